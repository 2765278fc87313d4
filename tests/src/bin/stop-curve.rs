//! `stop-curve [--iterations N]` (default 9; at least [`SMALL_ITERATIONS`] for trees of 100
//! processes or fewer, where the kernel's own time is a millisecond or less and one slow round
//! moves a median of 9): the stop's size curve. For trees of 1, 10, 100, 1,000
//! and 2,000 processes below the workload, the median time of `stop::stop` from the call to the
//! verified receipt, beside the median time the kernel needs to empty the same tree from a
//! cgroup v2 through `cgroup.kill` until `cgroup.events` says `populated 0`. The cgroup column is
//! skipped, with the reason, where no writable cgroup2 hierarchy is mounted. `--sizes 100,1000`
//! measures only those sizes; `--phases` adds the stop's median quiesce and kill-to-exit times
//! and its quiesce rounds (where the time goes).
//!
//! `--age-ms N` lets each tree idle N ms once it is up before it is stopped, and the
//! baseline's tree as long (default 0: stopped at once, as in every earlier run of the
//! curve). An idle machine wakes slower, both sides alike; from 1,000 ms on, the guardian has
//! also synced its proof file ahead of the receipt, and the curve counts the guardians that had
//! (seen in `/proc/<guardian>/syscall` as a `ppoll` without a timeout).

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use refine_supervisor::end::stop::{self, StopOptions, StopOutcome};
use refine_supervisor::store::registry::Runtime;
use refine_tests::stopkit;

/// (processes, sessions, groups, leaves): nodes = sessions * (1 + groups * (1 + leaves)).
const SIZES: [(u32, u32, u32, u32); 5] = [
    (1, 1, 0, 0),
    (10, 1, 1, 8),
    (100, 10, 3, 2),
    (1000, 10, 9, 10),
    (2000, 20, 9, 10),
];

/// The fewest rounds for a tree of 100 processes or fewer (each takes a few milliseconds).
const SMALL_ITERATIONS: usize = 31;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// A writable cgroup2 mount (from /proc/self/mountinfo), or why there is none.
fn cgroup2_root() -> Result<PathBuf, String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    for line in info.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        if post.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        let Some(mount) = pre.split_whitespace().nth(4) else {
            continue;
        };
        let probe = Path::new(mount).join(format!("refine-curve-{}", std::process::id()));
        match std::fs::create_dir(&probe) {
            Ok(()) if probe.join("cgroup.kill").exists() => return Ok(probe),
            Ok(()) => {
                let _ = std::fs::remove_dir(&probe);
                return Err(format!("{mount} has no cgroup.kill (kernel < 5.14)"));
            }
            Err(e) => return Err(format!("{mount} is not writable: {e}")),
        }
    }
    Err("no cgroup2 hierarchy is mounted".into())
}

/// Builds the tree inside `cg`, waits until it is up and then for `age` (as long as the stop's
/// tree idled before its stop: an idle machine wakes slower), then times cgroup.kill to
/// `populated 0`.
fn cgroup_kill(
    cg: &Path,
    tree_builder: &Path,
    args: &[String],
    nodes: u32,
    age: Duration,
) -> Duration {
    let script = format!("echo $$ > {}/cgroup.procs && exec \"$@\"", cg.display());
    let mut child = Command::new("sh")
        .args(["-c", &script, "sh"])
        .arg(tree_builder)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn tree in cgroup");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout"));
    let ready = format!("ready {nodes}");
    refine_tests::read_until(&mut lines, "the tree", &ready, |l| l == ready);
    std::thread::sleep(age);
    let events = cg.join("cgroup.events");
    let start = Instant::now();
    std::fs::write(cg.join("cgroup.kill"), "1").expect("cgroup.kill");
    while !std::fs::read_to_string(&events)
        .expect("cgroup.events")
        .lines()
        .any(|l| l == "populated 0")
    {
        // Yield, not spin: a busy loop takes its core from the exiting processes it waits for
        // (with one process its time varied widely). cgroup.events' own
        // change notification is rate-limited to one per 10 ms, too coarse to wait on here.
        std::thread::yield_now();
    }
    let took = start.elapsed();
    let _ = child.wait();
    took
}

/// Whether the guardian `pid` sleeps in `ppoll` without a timeout: it has synced its proof file
/// ahead of the receipt (its sleep is bounded by the scope's age until then). `None` where its
/// system call cannot be read.
fn settled(pid: u32) -> Option<bool> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/syscall")).ok()?;
    let mut fields = text.split_whitespace();
    let nr = fields.next().and_then(|n| n.parse::<i64>().ok());
    // ppoll(fds, nfds, tsp, ...): the third argument is the timeout's address.
    Some(nr == Some(libc::SYS_ppoll) && fields.nth(2) == Some("0x0"))
}

fn main() {
    let mut iterations = 9usize;
    let mut only: Option<Vec<u32>> = None;
    let mut phases = false;
    let mut age = Duration::ZERO;
    let mut settles = 0usize;
    let mut aged_rounds = 0usize;
    let usage = |why: String| -> ! {
        eprintln!(
            "stop-curve: {why} (usage: stop-curve [--iterations N] [--sizes 1,10,...] [--phases] [--age-ms N])"
        );
        std::process::exit(2)
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--iterations" => {
                iterations = match args.next().and_then(|v| v.parse().ok()) {
                    Some(n) if n > 0 => n,
                    _ => usage("--iterations takes a count of at least 1".into()),
                }
            }
            "--sizes" => {
                let sizes: Option<Vec<u32>> = args
                    .next()
                    .and_then(|v| v.split(',').map(|n| n.parse().ok()).collect());
                match sizes {
                    Some(s) => only = Some(s),
                    None => usage("--sizes takes comma-separated process counts".into()),
                }
            }
            "--phases" => phases = true,
            "--age-ms" => {
                age = match args.next().and_then(|v| v.parse().ok()) {
                    Some(n) => Duration::from_millis(n),
                    None => usage("--age-ms takes milliseconds".into()),
                }
            }
            other => usage(format!("unknown argument {other:?}")),
        }
    }
    let tree_builder = std::env::current_exe()
        .expect("current_exe")
        .with_file_name("tree-builder");
    let home = tempfile::tempdir().expect("tempdir");
    let rt = Runtime::open(home.path(), 7301).expect("runtime");
    let cg = cgroup2_root();
    if let Err(why) = &cg {
        println!("cgroup.kill column skipped: {why}");
    }
    // F4: which path the stop takes (REFINE_CGROUP=off forces the /proc one).
    match refine_supervisor::kernel::cgroup::base() {
        Ok(base) => println!(
            "stop path: cgroup (each scope forked into its own below {}: freeze, cgroup.procs, cgroup.kill)",
            base.display()
        ),
        Err(why) => println!("stop path: /proc (SIGSTOP quiesce, pidfd kills): {why}"),
    }
    println!(
        "each tree idles {} ms once it is up before its stop (the baseline's too)",
        age.as_millis()
    );
    let mut paths = std::collections::BTreeSet::new();
    println!(
        "processes  stop median ms  cgroup.kill median ms  ratio   \
         (median of {iterations}; of {} up to 100 processes)",
        iterations.max(SMALL_ITERATIONS)
    );
    for (nodes, s, g, l) in SIZES {
        if only.as_ref().is_some_and(|o| !o.contains(&nodes)) {
            continue;
        }
        let tree: Vec<String> = ["--sessions", &s.to_string(), "--groups", &g.to_string()]
            .into_iter()
            .map(str::to_owned)
            .chain(["--leaves".to_owned(), l.to_string()])
            .collect();
        let tree_refs: Vec<&str> = tree.iter().map(String::as_str).collect();
        let mut stops = Vec::new();
        let mut kills = Vec::new();
        let (mut quiesces, mut exits, mut rounds) = (Vec::new(), Vec::new(), Vec::new());
        let rounds_here = if nodes <= 100 {
            iterations.max(SMALL_ITERATIONS)
        } else {
            iterations
        };
        for _ in 0..rounds_here {
            let mut scope = stopkit::launch_guardian(&rt, &tree_builder, &tree_refs);
            assert_eq!(scope.wait_ready(), nodes);
            if !age.is_zero() {
                std::thread::sleep(age);
                aged_rounds += 1;
                settles += usize::from(settled(scope.reg.hello.guardian.pid) == Some(true));
            }
            paths.insert(match scope.reg.cgroup.as_ref() {
                Some(c) if c.holds_scope() => "cgroup",
                _ => "/proc",
            });
            let report = stop::stop(&rt, &scope.reg, &StopOptions::default()).expect("stop");
            assert_eq!(report.outcome, StopOutcome::Stopped);
            scope.reap();
            stops.push(report.timings.total);
            quiesces.push(report.timings.quiesce);
            exits.push(report.timings.kill_to_exit);
            rounds.push(report.timings.rounds);
            if let Ok(cg) = &cg {
                kills.push(cgroup_kill(cg, &tree_builder, &tree, nodes, age));
            }
        }
        let stop_ms = median(stops);
        if phases {
            rounds.sort();
            println!(
                "{nodes:>9}  phases: quiesce {} ms, kill to receipt {} ms, rounds {}",
                ms(median(quiesces)),
                ms(median(exits)),
                rounds[rounds.len() / 2]
            );
        }
        match kills.is_empty() {
            true => println!("{nodes:>9}  {:>14}  {:>21}", ms(stop_ms), "-"),
            false => {
                let kill = median(kills);
                println!(
                    "{nodes:>9}  {:>14}  {:>21}  {:.2}x",
                    ms(stop_ms),
                    ms(kill),
                    stop_ms.as_secs_f64() / kill.as_secs_f64().max(1e-9)
                );
            }
        }
    }
    if let Ok(cg) = &cg {
        let _ = std::fs::remove_dir(cg);
    }
    println!("path measured: {paths:?}");
    if aged_rounds > 0 {
        println!("proof file synced ahead of the receipt: {settles} of {aged_rounds} stops");
    }
}
