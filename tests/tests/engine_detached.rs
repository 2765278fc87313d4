//! A launch whose handle is dropped at once (how the service launches `run --detach`): the
//! engine keeps capturing and following the scope, and its thread sleeps in `poll` rather than
//! spinning on the hung-up control socket. Its own test binary, so the only engine thread in
//! this process is the one under test.

use std::time::{Duration, Instant};

use refine_protocol::record::Kind;
use refine_protocol::Receipt;
use refine_supervisor::launch::{LaunchRequest, Supervisor};
use refine_supervisor::registry::{Runtime, Stream};
use refine_tests::{bin, wait_until};

/// `(state, utime + stime)` of every engine thread of this process.
fn engine_threads() -> Vec<(char, u64)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("refine-launch") {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let f: Vec<&str> = after.split_whitespace().collect();
        // Fields after the comm: state is #3 overall, utime #14, stime #15.
        let ticks = f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        out.push((f[0].chars().next().unwrap_or('?'), ticks));
    }
    out
}

#[test]
fn a_dropped_handle_leaves_an_engine_that_sleeps_and_still_finishes_the_scope() {
    let home = tempfile::tempdir().unwrap();
    let rt = Runtime::open(home.path(), 4243).unwrap();
    let sup = Supervisor::new(rt.clone()).with_guardian_exe(bin("refine-guardian"));
    let req = LaunchRequest::new(Kind::Command, ["/bin/sh", "-c", "echo ready; exec sleep 3"]);
    let handle = sup.launch(req).expect("launch");
    let id = handle.id();
    drop(handle);

    let stdout = rt.log_path(id, Stream::Stdout);
    let ready = wait_until(Duration::from_secs(30), || {
        std::fs::read_to_string(&stdout).is_ok_and(|s| s.contains("ready"))
    });
    assert!(
        ready,
        "the engine did not capture the workload's output after the handle was dropped"
    );

    // Measure the engine thread's CPU over one second of the workload's life. A thread blocked
    // in poll uses next to nothing; one spinning on a hung-up descriptor uses most of a core.
    let before = engine_threads();
    assert_eq!(
        before.len(),
        1,
        "expected exactly one engine thread: {before:?}"
    );
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = engine_threads();
    if let (Some(b), Some(a)) = (before.first(), after.first()) {
        let used = a.1.saturating_sub(b.1);
        assert!(
            used < 20,
            "the engine thread used {used} clock ticks in 1 s while its workload slept (state {})",
            a.0
        );
    }

    // And it still follows the scope to its receipt.
    let proof = rt.proof_path(id);
    let receipt = wait_until(Duration::from_secs(60), || {
        std::fs::read(&proof)
            .ok()
            .and_then(|b| Receipt::decode(&b).ok())
            .is_some()
    });
    assert!(receipt, "no receipt in {}", proof.display());
}
