//! `stop-pidreuse HOME TREE_BUILDER`: the PID-reuse test body. Runs as pid 1 of a fresh pid
//! namespace (`unshare --pid --fork --mount-proc`), where `ns_last_pid` puts a new process on a
//! chosen pid. Prints `pid reuse: refused` and `group reuse: untouched` on success; any failure
//! panics (non-zero exit) with the relevant `/proc` state.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use refine_protocol::ProcessWitness;
use refine_supervisor::end::stop::{self, StopOptions, StopOutcome, Target};
use refine_supervisor::kernel::procfs;
use refine_supervisor::kernel::signal::{SignalError, Verified};
use refine_supervisor::store::registry::Runtime;
use refine_tests::stopkit::{self, GENEROUS};
use refine_tests::{wait_until, words};
use rustix::process::Pid;

fn idle(tree_builder: &Path, own_group: bool) -> Child {
    let mut cmd = Command::new(tree_builder);
    cmd.args(["--sessions", "0"]).stdout(Stdio::null());
    if own_group {
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    }
    cmd.spawn().expect("spawn")
}

fn witness(child: &Child) -> ProcessWitness {
    procfs::stat(Pid::from_child(child))
        .expect("stat")
        .witness()
}

/// Clock ticks (USER_HZ = 100 on Linux) since boot, the unit of a start time.
fn ticks_now() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    t.tv_sec as u64 * 100 + t.tv_nsec as u64 / 10_000_000
}

/// Spawns an idle process on exactly `pid` (via `ns_last_pid`), retrying a few times. Waits for
/// the clock tick to advance past `after` first: start times have a 10 ms resolution, and a pid
/// reused within the same tick is indistinguishable by its start time (see `signal` caveats).
fn spawn_on(pid: u32, after: u64, tree_builder: &Path, own_group: bool) -> Child {
    spawn_on_with(pid, after, || idle(tree_builder, own_group))
}

/// [`spawn_on`] for any spawner.
fn spawn_on_with(pid: u32, after: u64, spawn: impl Fn() -> Child) -> Child {
    assert!(
        wait_until(GENEROUS, || ticks_now() > after + 1),
        "clock did not advance"
    );
    for _ in 0..20 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", format!("{}", pid - 1))
            .expect("write ns_last_pid");
        let mut c = spawn();
        if c.id() == pid {
            return c;
        }
        let _ = c.kill();
        let _ = c.wait();
    }
    panic!("could not place a process on pid {pid}");
}

/// `sh` with one `sleep` child (which reports its pid first): (sh, the sleep's pid).
fn sh_with_child() -> (Child, Pid) {
    let (sh, line) = refine_tests::spawn_first_line(
        Command::new("sh").args(["-c", "sleep 1000 & echo $!; wait"]),
        "sh",
    );
    let kid = line.trim().parse().ok().and_then(Pid::from_raw);
    (sh, kid.expect("the sleep's pid"))
}

/// Kills the sleep and reaps its `sh` (which reaps the sleep).
fn end(mut sh: Child, kid: Pid) {
    let _ = rustix::process::kill_process(kid, rustix::process::Signal::KILL);
    sh.wait().expect("reap sh");
}

fn kept_descriptors_follow_the_process_not_the_pid() {
    let (sh, old_kid) = sh_with_child();
    let pid = Pid::from_child(&sh);
    let mut r = procfs::Reader::new().expect("reader");
    r.set_room(16);
    let old = r.stat(pid).expect("stat");
    assert_eq!(old.threads, 1);
    let mut kids = Vec::new();
    r.children(pid, 1, &mut kids)
        .expect("children")
        .expect("children lists");
    assert_eq!(kids, [old_kid]);
    assert_eq!(r.kept(), 2, "stat and children kept");
    end(sh, old_kid);
    let sh = spawn_on_with(old.witness().pid, old.start_time, || sh_with_child().0);
    let new = procfs::stat(pid).expect("stat of the new process");
    let new_kid = procfs::children(pid).expect("children").expect("lists");
    assert_ne!(new.start_time, old.start_time);
    assert_eq!(new_kid.len(), 1, "{new_kid:?}");
    let seen = r.stat(pid).expect("the reader's stat of the reused pid");
    assert_eq!(seen.witness(), new.witness(), "the reader read {seen:?}");
    kids.clear();
    r.children(pid, seen.threads, &mut kids)
        .expect("children")
        .expect("children lists");
    assert_eq!(kids, new_kid, "the reader missed the new process's child");
    end(sh, new_kid[0]);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let home = Path::new(&args[0]);
    let tree_builder = Path::new(&args[1]);
    assert_eq!(
        std::process::id(),
        1,
        "must run as pid 1 of a new pid namespace"
    );

    // 1. A witness whose pid now names an unrelated process is refused.
    let mut first = idle(tree_builder, false);
    let old = witness(&first);
    first.kill().expect("kill");
    first.wait().expect("reap");
    let mut reused = spawn_on(old.pid, old.start_time, tree_builder, false);
    let new = witness(&reused);
    assert_eq!(new.pid, old.pid);
    assert_ne!(new.start_time, old.start_time);
    match Verified::open(old) {
        Err(SignalError::Reused { .. }) => {}
        other => panic!("a reused pid was not refused: {other:?}"),
    }
    assert!(stopkit::running(&new), "the unrelated process must run on");
    println!("pid reuse: refused");
    reused.kill().expect("kill");
    reused.wait().expect("reap");

    // 2. A reader that keeps `/proc` descriptors across scans (the stop's): once the process
    //    it kept them for is reaped and its pid taken by another, it reads the new process and
    //    the new process's children, never the old one's files.
    kept_descriptors_follow_the_process_not_the_pid();
    println!("kept descriptors: new process read");

    // 3. A scope whose workload exited: its pid and group id are taken by an unrelated process
    //    in its own group. The stop (with a graceful group SIGTERM) must not touch it.
    let rt = Runtime::open(home, 7001).expect("runtime");
    let mut scope = stopkit::launch_guardian(
        &rt,
        tree_builder,
        &words("--sessions 2 --groups 1 --leaves 2 --orphan --then exit"),
    );
    scope.wait_ready();
    let workload = scope.reg.hello.workload;
    assert!(
        wait_until(GENEROUS, || !stopkit::exists(&workload)),
        "the workload was not reaped"
    );
    let members = scope.members();
    assert!(members.len() >= 6, "{members:#?}");
    let mut unrelated = spawn_on(workload.pid, workload.start_time, tree_builder, true);
    let u = witness(&unrelated);
    let ustat = procfs::stat(Pid::from_child(&unrelated)).expect("stat");
    assert_eq!(ustat.pgid as u32, scope.reg.hello.workload_pgid);

    let opts = StopOptions {
        grace: Some(Duration::from_millis(200)),
        ..StopOptions::default()
    };
    let report = stop::stop(&rt, &scope.reg, &opts).expect("stop");
    assert_eq!(report.outcome, StopOutcome::Stopped, "{report:#?}");
    for s in &report.signalled {
        match s.target {
            Target::Group { pgid, .. } => {
                assert_ne!(
                    pgid as u32, workload.pid,
                    "signalled the reused group: {s:?}"
                )
            }
            Target::Process(w) => assert_ne!(w.pid, u.pid, "signalled the reused pid: {s:?}"),
            // F4: the kernel kills the cgroup's members only; the check below proves the
            // unrelated process (outside it) untouched.
            Target::Cgroup { .. } => {}
        }
    }
    scope.reap();
    let left = stopkit::survivors(&members);
    assert!(left.is_empty(), "survivors: {left:#?}");
    let now = procfs::stat_of(&u)
        .expect("stat")
        .expect("unrelated process exists");
    assert!(
        !now.state.is_exited() && !now.state.is_stopped(),
        "the unrelated process was touched: {now:?}"
    );
    println!("group reuse: untouched");
    unrelated.kill().expect("kill");
    unrelated.wait().expect("reap");
}
