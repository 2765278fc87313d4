//! `holders-bench [--iterations N] [--sessions S] [--groups G] [--leaves L]`: the cost of
//! `holders PATH` (SPEC H1: <= 200 ms with 2,000 processes on the node).
//!
//! Launches `tree-builder` behind the real guardian with its working directory in a fresh
//! directory (default 10 sessions x 10 groups x (leader + 19 leaves) = 2,010 processes, every
//! one of them a holder of that directory, owned through the guardian), then times:
//! - the library call (load every registration of the home, one pass over `/proc`, owners),
//!   for the held directory and for a directory nobody holds;
//! - the command `refine-supervisor holders DIR --json` end to end (process start included),
//!   when the binary is built beside this one.
//!
//! Prints medians, min and max. Stops the tree through the one stop at the end.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use refine_supervisor::end::assess::KERNEL_BOOT;
use refine_supervisor::hygiene::holders::{self, Registrations, Target};
use refine_supervisor::kernel::procfs;
use refine_supervisor::launch::launch_registered;
use refine_supervisor::store::registry::Runtime;
use refine_tests::stopkit::{self, BenchArgs, GuardianScope};

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// CPU time (user + system) this process used so far, all threads (clock-tick resolution).
fn cpu_used() -> Duration {
    let (_, cpu) = procfs::stat_cpu(rustix::process::getpid()).expect("own stat");
    Duration::from_millis(cpu.own() * 1000 / procfs::ticks_per_second())
}

fn summary(what: &str, mut v: Vec<Duration>) {
    v.sort();
    println!(
        "{what}: median {}  min {}  max {}",
        ms(v[v.len() / 2]),
        ms(v[0]),
        ms(v[v.len() - 1])
    );
}

fn main() {
    let (iterations, sessions, groups, leaves) = BenchArgs::parse_over(15, 10, 10, 19);
    let exe = std::env::current_exe().expect("current_exe");
    let tree_builder = BenchArgs::tree_builder();
    let home = tempfile::tempdir().expect("tempdir");
    let held = tempfile::tempdir().expect("tempdir");
    let free = tempfile::tempdir().expect("tempdir");
    let rt = Runtime::open(home.path(), 7311).expect("runtime");
    let (s, g, l) = (sessions.to_string(), groups.to_string(), leaves.to_string());
    let argv = [
        tree_builder.as_os_str(),
        "--sessions".as_ref(),
        s.as_ref(),
        "--groups".as_ref(),
        g.as_ref(),
        "--leaves".as_ref(),
        l.as_ref(),
    ];
    let (reader, writer) = std::io::pipe().expect("pipe");
    let mut req = stopkit::request(argv.iter().map(|a| a.into()).collect(), writer.into());
    req.guardian.cwd = Some(held.path().to_owned());
    let id = rt.new_id().expect("id");
    let (reg, link) = launch_registered(&rt, id, req).expect("launch");
    let mut scope = GuardianScope {
        runtime: rt.clone(),
        link,
        reg,
        lines: std::io::BufReader::new(reader),
        ready: None,
    };
    let nodes = scope.wait_ready();
    let on_node = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .count();
    println!("tree: {nodes} processes below the workload; {on_node} processes on the node");

    let time = |dir: &Path| {
        let mut wall = Vec::new();
        let mut cpu = Vec::new();
        let mut found = 0;
        for _ in 0..iterations {
            let t = Instant::now();
            let c = cpu_used();
            let regs = Registrations::load(home.path(), &KERNEL_BOOT);
            let target = Target::resolve(dir).expect("target");
            found = holders::holders(&target, &regs)
                .expect("holders")
                .holders
                .len();
            wall.push(t.elapsed());
            cpu.push(cpu_used().saturating_sub(c));
        }
        (wall, cpu, found)
    };
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    println!("load average: {}", load.join(" "));
    for (dir, what) in [(held.path(), "all owned"), (free.path(), "none")] {
        let (wall, cpu, found) = time(dir);
        summary(&format!("library, {found} holders ({what}), wall"), wall);
        summary(&format!("library, {found} holders ({what}), CPU "), cpu);
    }

    let cli = exe.with_file_name("refine-supervisor");
    if cli.exists() {
        for dir in [held.path(), free.path()] {
            let mut v = Vec::new();
            let mut code = None;
            for _ in 0..iterations {
                let t = Instant::now();
                let status = Command::new(&cli)
                    .arg("--home")
                    .arg(home.path())
                    .arg("holders")
                    .arg(dir)
                    .arg("--json")
                    .stdout(Stdio::null())
                    .status()
                    .expect("refine-supervisor holders");
                v.push(t.elapsed());
                code = status.code();
            }
            summary(
                &format!("refine-supervisor holders DIR --json (exit {code:?}), end to end"),
                v,
            );
        }
    } else {
        println!("({} not built: command not timed)", cli.display());
    }
    let opts = refine_supervisor::end::stop::StopOptions {
        budget: Duration::from_secs(60),
        ..Default::default()
    };
    let report = refine_supervisor::end::stop::stop(&rt, &scope.reg, &opts).expect("stop");
    scope.reap();
    println!("tree stopped: {:?}", report.outcome);
}
