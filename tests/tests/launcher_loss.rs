//! W16 Launcher loss ends the scope: a launch that asked for a parent-death signal (a foreground
//! `run`, a host's default launch) ends its whole scope when its launcher dies, as the launcher's
//! own SIGTERM would (W9): the guardian signals the workload, kills what else of the scope is
//! left (sparing nested guardians, which end their own scopes), reaps everything and writes its
//! receipt. A launch without one (the service's, `cli-launch leave`) keeps outliving its
//! launcher (G7). A live scope whose main process ended is shown as such, never as `running`.
//!
//! Each case's workload is a `sleep` with numbers of its own (319xx), so a leftover process is
//! found by its command line, and killed by [`Leftovers`] on every exit of the test. Waiting is on
//! events (a guardian's exit on a pidfd, a child's `waitpid`) or through `wait_until` with
//! generous deadlines; the one sleep is the random moment of the burst's kills, which is the
//! fault, not a synchronization.

use refine_tests::cli_support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use cli_support::{describe, exited_within, kill_witness, launch, Home, DEADLINE};
use refine_protocol::record::Registration;
use refine_protocol::{Hello, Receipt, WorkloadStatus};
use refine_supervisor::end::assess::{self, Assessment, KERNEL_BOOT};
use refine_supervisor::store::registry::Runtime;
use refine_tests::driver::{self, Guardian, Launch, Msg, PATIENCE};
use refine_tests::{wait_until, words};
use rustix::process::Signal;

// ---------------------------------------------------------------------------------------------
// Processes, by command line.

/// A live (not zombie) process whose argv is exactly one of the ones asked for.
#[derive(Debug)]
struct Proc {
    pid: u32,
    ppid: u32,
    start_time: u64,
    /// Read through `Debug`, in failure messages.
    #[allow(dead_code)]
    argv: String,
}

/// Every live process whose argv is one of `argvs` (a zombie's reads empty).
fn procs(argvs: &[&[&str]]) -> Vec<Proc> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let argv: Vec<&[u8]> = cmdline
            .strip_suffix(b"\0")
            .unwrap_or(&cmdline)
            .split(|&b| b == 0)
            .collect();
        let wanted = argvs.iter().any(|want| {
            want.len() == argv.len() && want.iter().zip(&argv).all(|(w, a)| w.as_bytes() == *a)
        });
        if !wanted {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 1..].split_ascii_whitespace().collect();
        if fields.first().is_some_and(|s| *s == "Z" || *s == "X") {
            continue;
        }
        found.push(Proc {
            pid,
            ppid: fields.get(1).and_then(|s| s.parse().ok()).unwrap_or(0),
            start_time: fields.get(19).and_then(|s| s.parse().ok()).unwrap_or(0),
            argv: argv
                .iter()
                .map(|a| String::from_utf8_lossy(a))
                .collect::<Vec<_>>()
                .join(" "),
        });
    }
    found
}

/// Kills, on drop, every process a case may have left (by its argv, checked against its start
/// time through a pidfd): a failing case must not leave its sleeps to the next.
struct Leftovers(&'static [&'static [&'static str]]);

impl Leftovers {
    fn now(&self) -> Vec<Proc> {
        procs(self.0)
    }

    /// Waits (bounded) until each of the case's argvs runs as exactly one process; `what`
    /// names them in the failure.
    fn wait_each_running(&self, what: &str) {
        assert!(
            wait_until(DEADLINE, || self
                .0
                .iter()
                .all(|argv| procs(&[argv]).len() == 1)),
            "{what} never ran: {:?}",
            self.now()
        );
    }
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        for p in self.now() {
            p.kill(Signal::KILL);
        }
    }
}

impl Proc {
    /// Signals this process by its witness (pid and start time): whether it was delivered.
    fn kill(&self, sig: Signal) -> bool {
        kill_witness(u64::from(self.pid), self.start_time, sig)
    }
}

/// The direct children of `pid` (a single-threaded process: its main thread's list).
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Whether `pid` is blocked in `ppoll` now (`/proc/PID/syscall`; readable with
/// `CAP_SYS_PTRACE`, the guardian is not dumpable): the guardian is back in its reap loop's
/// wait, every step of the wake before it done.
fn in_ppoll(pid: u32) -> Option<bool> {
    let line = std::fs::read_to_string(format!("/proc/{pid}/syscall")).ok()?;
    let nr = line.split_whitespace().next()?;
    Some(nr.parse::<i64>().ok() == Some(libc::SYS_ppoll))
}

/// Whether the guardian `g` has reaped `pid` and waits again, or is gone (it ended its scope:
/// then what the caller checks next tells).
fn reaped_and_waiting(g: refine_protocol::ProcessWitness, pid: u32) -> bool {
    if !cli_support::alive(u64::from(g.pid), g.start_time) {
        return true;
    }
    !children(g.pid).contains(&pid) && in_ppoll(g.pid) == Some(true)
}

/// A pidfd for the process `(pid, start_time)`, opened first and checked after.
fn pidfd_of(pid: u32, start_time: u64) -> Option<std::os::fd::OwnedFd> {
    let p = rustix::process::Pid::from_raw(pid as i32)?;
    let fd = rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()?;
    cli_support::alive(u64::from(pid), start_time).then_some(fd)
}

// ---------------------------------------------------------------------------------------------
// The guardian alone (the raw test launcher).

/// Launches `sh -c "(ORPHAN &); exec MAIN"` through the guardian alone, with `pdeath_signal`
/// in place of the launch's default (which is checked to be SIGKILL), and returns once the
/// workload and its orphan both run. The temporary directory holds the proof file.
fn started_with_an_orphan(
    orphan: &[&str],
    main: &[&str],
    pdeath_signal: Option<u32>,
    left: &Leftovers,
) -> (tempfile::TempDir, Launch, Guardian, Hello) {
    let dir = tempfile::tempdir().unwrap();
    let script = format!("({} &); exec {}", orphan.join(" "), main.join(" "));
    let mut l = Launch::new(&dir.path().join("proof"), &["sh", "-c", &script]);
    assert_eq!(l.pdeath_signal, Some(libc::SIGKILL as u32), "the default");
    l.pdeath_signal = pdeath_signal;
    let g = Guardian::spawn();
    g.launch(&l, None).expect("send launch");
    let hello = g.expect_hello();
    g.start();
    assert_eq!(g.expect(), Msg::Started);
    left.wait_each_running("the workload and its orphan");
    (dir, l, g, hello)
}

/// Reaps the guardian (it must exit 0) and reads the receipt it wrote for `l`.
fn reaped_receipt(guardian: std::process::Child, l: &Launch) -> Receipt {
    let (status, stderr) = driver::reap(guardian);
    assert!(status.success(), "{status:?} {stderr}");
    Receipt::decode(&std::fs::read(&l.proof_path).unwrap()).expect("a receipt")
}

/// Waits (bounded) until the guardian `g` has reaped `pid` and waits again; `what` names `pid`
/// in the failure.
fn wait_reaped_and_waiting(g: refine_protocol::ProcessWitness, pid: u32, what: &str) {
    assert!(
        wait_until(PATIENCE, || reaped_and_waiting(g, pid)),
        "the guardian never reaped {what} and waited again"
    );
}

/// The launcher's end closes (as when it dies) while the workload's orphan runs: with the
/// launch's parent-death signal the guardian kills the workload *and* the orphan, reaps both and
/// writes its receipt. On the old code it signalled the workload only and stayed, holding the
/// orphan, with no receipt.
#[test]
fn launcher_loss_with_a_parent_death_signal_ends_the_whole_scope() {
    const ORPHAN: &[&str] = &["sleep", "31910"];
    const MAIN: &[&str] = &["sleep", "31911"];
    let left = Leftovers(&[ORPHAN, MAIN]);
    let (_dir, l, g, hello) =
        started_with_an_orphan(ORPHAN, MAIN, Some(libc::SIGKILL as u32), &left);
    let orphan = &procs(&[ORPHAN])[0];
    assert_eq!(orphan.ppid, hello.guardian.pid, "the guardian adopted it");
    let r = reaped_receipt(g.hang_up(), &l);
    assert_eq!(r.status, WorkloadStatus::Signaled(libc::SIGKILL), "{r:?}");
    assert_eq!(r.workload, hello.workload);
    assert_eq!(r.reaped, 2, "the workload and its orphan: {r:?}");
    assert!(left.now().is_empty(), "left running: {:?}", left.now());
}

/// The negative control: a launch without a parent-death signal (the service's) outlives its
/// launcher. The launcher's end closes first, then the workload ends: once the guardian has
/// reaped it and waits again, it has read the end of file and acted on it, and the orphan still
/// runs and holds the scope. Its end then lets the receipt come.
#[test]
fn launcher_loss_without_a_parent_death_signal_leaves_the_scope_running() {
    const ORPHAN: &[&str] = &["sleep", "31920"];
    const MAIN: &[&str] = &["sleep", "31921"];
    let left = Leftovers(&[ORPHAN, MAIN]);
    let (_dir, l, g, hello) = started_with_an_orphan(ORPHAN, MAIN, None, &left);
    let guardian = g.hang_up();
    let (gpid, w) = (hello.guardian.pid, hello.workload);
    assert!(kill_witness(u64::from(w.pid), w.start_time, Signal::TERM));
    wait_reaped_and_waiting(hello.guardian, w.pid, "its workload");
    let orphan = procs(&[ORPHAN]);
    assert_eq!(
        orphan.len(),
        1,
        "the orphan of a launch without a parent-death signal was ended with its launcher"
    );
    assert!(
        cli_support::alive(u64::from(gpid), hello.guardian.start_time),
        "the guardian left while the orphan runs"
    );
    assert!(
        refine_protocol::is_unwritten(&std::fs::read(&l.proof_path).unwrap()),
        "a receipt while the orphan runs"
    );
    assert!(orphan[0].kill(Signal::KILL));
    let r = reaped_receipt(guardian, &l);
    assert_eq!(r.status, WorkloadStatus::Signaled(libc::SIGTERM), "{r:?}");
    assert_eq!(r.reaped, 2);
}

/// A launcher that says `Disown` before its end leaves the scope to itself on purpose (its
/// workload ended, what it left is kept by its policy): the end of the channel that follows is no
/// loss, even for a launch that asked for a parent-death signal. As in the control above, the
/// guardian has read the end of file once it has reaped the workload and waits again.
#[test]
fn a_disowned_scope_outlives_its_launcher_despite_its_parent_death_signal() {
    const ORPHAN: &[&str] = &["sleep", "31922"];
    const MAIN: &[&str] = &["sleep", "31923"];
    let left = Leftovers(&[ORPHAN, MAIN]);
    let (_dir, l, g, hello) =
        started_with_an_orphan(ORPHAN, MAIN, Some(libc::SIGKILL as u32), &left);
    g.send(refine_protocol::Frame::Disown).expect("send disown");
    let guardian = g.hang_up();
    let w = hello.workload;
    assert!(kill_witness(u64::from(w.pid), w.start_time, Signal::TERM));
    wait_reaped_and_waiting(hello.guardian, w.pid, "its workload");
    let orphan = procs(&[ORPHAN]);
    assert_eq!(orphan.len(), 1, "the disowned scope was ended");
    assert!(orphan[0].kill(Signal::KILL));
    let r = reaped_receipt(guardian, &l);
    assert_eq!(r.status, WorkloadStatus::Signaled(libc::SIGTERM), "{r:?}");
}

// ---------------------------------------------------------------------------------------------
// `run`, SIGKILLed.

/// Every registration of `rt` with its assessment now.
fn assessed(rt: &Runtime) -> Vec<(Registration, Assessment)> {
    rt.list_ids()
        .expect("list registrations")
        .into_iter()
        .filter_map(|id| rt.read_registration(id).ok())
        .map(|r| {
            let a = assess::assess(rt, &r, &KERNEL_BOOT);
            (r, a)
        })
        .collect()
}

/// The registrations `rt` holds, once there are `n` of them (bounded).
fn registrations(rt: &Runtime, n: usize) -> Vec<Registration> {
    let mut regs = Vec::new();
    let found = wait_until(DEADLINE, || {
        regs = assessed(rt).into_iter().map(|(r, _)| r).collect();
        regs.len() >= n
    });
    assert!(found, "{} registrations, expected {n}", regs.len());
    regs.sort_by_key(|r| r.started_at_unix_ms);
    regs
}

/// `run -- sh -c SCRIPT` in `home`, its output discarded.
fn spawn_run(home: &Home, script: &str) -> std::process::Child {
    home.command(&["run", "--", "sh", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn run")
}

/// Waits for each guardian to exit (on pidfds opened while they ran), then asserts every
/// registration `exited` by its own verified receipt and nothing of `left` running.
fn assert_all_ended(rt: &Runtime, guardians: &[std::os::fd::OwnedFd], left: &Leftovers) {
    for fd in guardians {
        assert!(
            exited_within(fd, DEADLINE),
            "a guardian still holds its scope after its launcher's death: {:?}; {:#?}",
            left.now(),
            assessed(rt)
        );
    }
    for (r, a) in assessed(rt) {
        let receipt = a.receipt().unwrap_or_else(|| panic!("{}: {a:?}", r.id));
        assert_eq!(receipt.registration, r.id);
        assert_eq!(receipt.workload, r.hello.workload);
    }
    assert!(left.now().is_empty(), "left running: {:?}", left.now());
}

/// A foreground `run` SIGKILLed once its workload's orphan exists ends its scope `exited`, with
/// the guardian's verified receipt, and leaves nothing running. On the old code the orphan (and
/// the guardian) stayed, the scope `live`.
#[test]
fn a_sigkilled_run_ends_its_scope_with_a_verified_receipt() {
    const ORPHAN: &[&str] = &["sleep", "31912"];
    const MAIN: &[&str] = &["sleep", "31913"];
    let left = Leftovers(&[ORPHAN, MAIN]);
    let home = Home::new();
    let rt = Runtime::open(home.path(), home.port).expect("runtime");
    let mut run = spawn_run(&home, "(sleep 31912 &); sleep 31913");
    left.wait_each_running("the workload and its orphan");
    let reg = registrations(&rt, 1).remove(0);
    let g = reg.hello.guardian;
    let guardian = pidfd_of(g.pid, g.start_time).expect("the guardian runs");
    run.kill().expect("SIGKILL run");
    run.wait().expect("reap run");
    assert_all_ended(&rt, &[guardian], &left);
    let id = reg.id.to_string();
    let doc = home.json(&["receipt", &id, "--json"]);
    assert_eq!(doc["verified"], true, "{doc}");
    let shown = cli_support::show(&home, &id);
    assert_eq!(shown["state"], "exited", "{shown}");
    assert_eq!(shown["receipt"]["status"], "signaled", "{shown}");
    assert_eq!(shown["receipt"]["signal"], libc::SIGKILL, "{shown}");
}

/// `run` of a workload that ends and leaves two orphans returns (a `command` keeps its residue)
/// and its end must not end the residue (it told its guardian, `Disown`). One orphan is ended:
/// the guardian's wake for its death reads the end of file `run` left, reaps it and waits again,
/// and the other orphan still runs.
#[test]
fn a_run_that_returns_leaving_a_kept_residue_does_not_end_it() {
    const FIRST: &[&str] = &["sleep", "31924"];
    const SECOND: &[&str] = &["sleep", "31925"];
    let left = Leftovers(&[FIRST, SECOND]);
    let home = Home::new();
    let args = words("run --json -- sh -c '(sleep 31924 &); (sleep 31925 &)'");
    let out = home.cli_ok(&args);
    let id = cli_support::parse(&args, &out)["id"]
        .as_str()
        .expect("id")
        .to_owned();
    left.wait_each_running("the orphans (or they were ended with run)");
    let guardian = home.guardian_of(&id);
    let gpid = guardian.pid;
    let first = procs(&[FIRST]).remove(0);
    assert_eq!(first.ppid, gpid, "the guardian adopted it");
    assert!(first.kill(Signal::TERM));
    wait_reaped_and_waiting(guardian, first.pid, "the first orphan");
    assert_eq!(
        procs(&[SECOND]).len(),
        1,
        "the kept residue was ended when run exited"
    );
    assert_eq!(home.state(&id), "live");
    let args = ["stop", &id];
    home.cli_ok(&args);
    assert!(left.now().is_empty(), "{:?}", left.now());
}

/// `run -- sh -c 'refine-supervisor run -- ...'`, the outer `run` SIGKILLed: the outer guardian
/// ends its scope but spares the nested guardian, which ends its own (its launcher, the inner
/// `run`, is killed as a member of the outer scope) and writes its own receipt; both scopes end
/// `exited`, each proven by its own receipt, and nothing runs.
#[test]
fn a_nested_run_inside_a_sigkilled_run_ends_with_its_own_receipt() {
    const ORPHAN: &[&str] = &["sleep", "31914"];
    const MAIN: &[&str] = &["sleep", "31915"];
    let left = Leftovers(&[ORPHAN, MAIN]);
    let home = Home::new();
    let rt = Runtime::open(home.path(), home.port).expect("runtime");
    let sup = refine_tests::bin("refine-supervisor");
    let port = home.port.to_string();
    let mut run = home
        .command(&[
            "run",
            "--",
            "sh",
            "-c",
            "\"$0\" --home \"$1\" --port \"$2\" run -- sh -c \"$3\"; echo the inner run ended",
            sup.to_str().expect("utf-8 path"),
            home.path().to_str().expect("utf-8 path"),
            &port,
            "(sleep 31914 &); sleep 31915",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn run");
    left.wait_each_running("the nested workload and its orphan");
    let regs = registrations(&rt, 2);
    let guardians: Vec<_> = regs
        .iter()
        .map(|r| {
            let g = r.hello.guardian;
            pidfd_of(g.pid, g.start_time).expect("the guardian runs")
        })
        .collect();
    run.kill().expect("SIGKILL the outer run");
    run.wait().expect("reap run");
    assert_all_ended(&rt, &guardians, &left);
    // The inner scope's receipt is the inner guardian's own: it was not killed as a member.
    let inner = &regs[1];
    let args = ["receipt", &inner.id.to_string(), "--json"];
    let doc = home.json(&args);
    assert_eq!(doc["verified"], true, "{doc}");
}

/// `n` foreground runs of `script`, each SIGKILLed at a random moment 0.5–30 ms after its
/// spawn (at any step: before its guardian has the launch, at the gate, registered, running),
/// then: every registration ends `exited` with its receipt, and nothing of `left` runs.
fn burst(home: &Home, n: usize, script: &str, left: &Leftovers) {
    let rt = Runtime::open(home.path(), home.port).expect("runtime");
    let mut rng = refine_tests::Rng::seeded("BURST_SEED");
    let began = Instant::now();
    for _ in 0..n {
        let mut run = spawn_run(home, script);
        // The fault's moment, not a synchronization.
        std::thread::sleep(Duration::from_micros(500 + rng.below(29_500)));
        run.kill().expect("SIGKILL run");
        run.wait().expect("reap run");
    }
    let mut live = Vec::new();
    let mut running = Vec::new();
    let settled = wait_until(DEADLINE, || {
        live = assessed(&rt)
            .into_iter()
            .filter(|(_, a)| a.is_live())
            .map(|(r, _)| r.id.to_string())
            .collect();
        running = left.now();
        live.is_empty() && running.is_empty()
    });
    eprintln!(
        "{n} runs killed and settled in {:.1?}: {} registrations",
        began.elapsed(),
        rt.list_ids().map_or(0, |ids| ids.len())
    );
    assert!(
        settled,
        "{} scopes live, {} processes left running: {live:?} {running:?}",
        live.len(),
        running.len()
    );
    for (r, a) in assessed(&rt) {
        assert!(a.is_exited(), "{}: {a:?}", r.id);
    }
}

/// Issue 38 item 8: 60 runs SIGKILLed 0.5–30 ms after their start left 58 live scopes and 112
/// processes on the old code. No service runs here.
#[test]
fn a_burst_of_sigkilled_runs_leaves_no_scope_live_and_nothing_running() {
    const ORPHAN: &[&str] = &["sleep", "31916"];
    const MAIN: &[&str] = &["sleep", "31917"];
    let left = Leftovers(&[ORPHAN, MAIN]);
    let home = Home::new();
    burst(&home, 60, "(sleep 31916 &); sleep 31917", &left);
}

/// The same with a service running beside (the foreground runs launch in their own process
/// either way; nothing the service does may keep or end them otherwise).
#[test]
fn a_burst_of_sigkilled_runs_beside_a_service_leaves_no_scope_live() {
    const ORPHAN: &[&str] = &["sleep", "31926"];
    const MAIN: &[&str] = &["sleep", "31927"];
    let left = Leftovers(&[ORPHAN, MAIN]);
    let (home, _svc) = Home::with_service(&[]);
    burst(&home, 20, "(sleep 31926 &); sleep 31927", &left);
}

// ---------------------------------------------------------------------------------------------
// A live scope whose main process ended.

/// The line of `ps` (the human table) for `id`.
fn ps_line(home: &Home, id: &str) -> String {
    let args = ["ps"];
    let out = home.cli_ok(&args);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with(&id[..12]))
        .unwrap_or_else(|| panic!("{id} not in ps: {}", describe(&args, &out)))
        .to_owned()
}

/// A launch without a parent-death signal whose launcher is gone (`cli-launch leave`), whose
/// main process then ends while its orphan holds the scope: nobody is left to report the main
/// process's status, and `ps` still says what the kernel says: the scope is live, its main
/// process has ended (`residue`, `ended`), not `running`; `show` says the same of the main PID.
/// On the old code `ps` read `live` and `running` for as long as the orphan ran.
#[test]
fn ps_shows_a_live_scope_whose_main_process_ended_as_residue() {
    const ORPHAN: &[&str] = &["sleep", "31918"];
    const MAIN: &[&str] = &["sleep", "31919"];
    let left = Leftovers(&[ORPHAN, MAIN]);
    let home = Home::new();
    let (_, id) = launch(
        &home,
        "leave",
        &["sh", "-c", "(sleep 31918 &); exec sleep 31919"],
    );
    left.wait_each_running("the workload and its orphan");
    let row = home.row(&id);
    assert_eq!(row["state"], "live", "{row}");
    assert_eq!(row["workload_running"], true, "{row}");
    let line = ps_line(&home, &id);
    assert!(line.contains(" running "), "{line}");

    let guardian = home.guardian_of(&id);
    let [_, (wpid, wstart)] = cli_support::witnesses(&home, &id);
    assert!(kill_witness(wpid, wstart, Signal::TERM), "the main process");
    wait_reaped_and_waiting(guardian, wpid as u32, "its workload");
    // Its launcher gone and its main process reaped, the scope of a launch without a
    // parent-death signal still runs (G7): nothing ended its orphan.
    assert_eq!(procs(&[ORPHAN]).len(), 1, "{:?}", left.now());
    let row = home.row(&id);
    assert_eq!(row["state"], "live", "{row}");
    assert_eq!(row["workload_running"], false, "{row}");
    assert!(row["status"].is_null(), "nobody knows the status: {row}");
    let line = ps_line(&home, &id);
    assert!(
        line.contains(" residue ") && !line.contains("running"),
        "{line}"
    );
    let args = ["show", &id];
    let out = home.cli(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    let main = text
        .lines()
        .find(|l| l.trim_start().starts_with("Main PID"))
        .unwrap_or_else(|| panic!("{}", describe(&args, &out)));
    assert!(main.contains("ended"), "{main}");

    let args = ["stop", &id, "--json"];
    home.cli_ok(&args);
    assert_eq!(home.state(&id), "exited");
    assert!(left.now().is_empty(), "{:?}", left.now());
}

/// `run --end-with-parent` (a host's launch without a service, issue 40): `run` dies with the
/// process that started it (PR_SET_PDEATHSIG), so its scope ends as for a SIGKILLed `run`. The
/// negative control: without the flag `run` outlives that parent (as `nohup` would) and its
/// scope lives on.
#[test]
fn run_with_end_with_parent_dies_with_its_parent_and_its_scope_ends() {
    for (flag, label, nap) in [
        (Some("--end-with-parent"), "parented", "31981"),
        (None, "orphaned", "31982"),
    ] {
        let home = Home::new();
        let left = if flag.is_some() {
            Leftovers(&[&["sleep", "31981"]])
        } else {
            Leftovers(&[&["sleep", "31982"]])
        };
        let mut run = vec!["run", "--label", label];
        run.extend(flag);
        run.extend(["--", "sleep", nap]);
        let cmd = home.command(&run);
        let mut host = std::process::Command::new("sh");
        host.arg("-c")
            .arg("\"$@\" </dev/null & echo $!; wait")
            .arg("sh")
            .arg(cmd.get_program())
            .args(cmd.get_args())
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let mut host = host.spawn().expect("sh");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(host.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let run_pid: u32 = line.trim().parse().expect("run's pid");
        let run_fd = pidfd_of(run_pid, cli_support::start_time(run_pid)).expect("run's pidfd");
        let id = home.wait_labelled(label);
        let label = id.as_str();
        home.wait_state(label, "live");
        host.kill().unwrap();
        host.wait().unwrap();
        if flag.is_some() {
            assert!(exited_within(&run_fd, DEADLINE), "run outlived its parent");
            home.wait_ended(label);
            assert_eq!(home.state(label), "exited", "{}", home.row(label));
        } else {
            // Time must pass for a negative: run is still there a second after its parent.
            assert!(
                !exited_within(&run_fd, Duration::from_secs(1)),
                "run died with its parent"
            );
            assert_eq!(home.state(label), "live");
            rustix::process::kill_process(
                rustix::process::Pid::from_raw(run_pid as i32).unwrap(),
                Signal::KILL,
            )
            .unwrap();
            home.wait_ended(label);
        }
        drop(left);
    }
}
