//! A launch whose handle is dropped at once (how the service launches `run --detach`): the
//! engine keeps capturing and following the scope, and its thread sleeps in `poll` rather than
//! spinning on the hung-up control socket.

use std::time::{Duration, Instant};

use refine_protocol::record::Kind;
use refine_supervisor::launch::{LaunchRequest, Supervisor};
use refine_supervisor::store::registry::{Runtime, Stream};
use refine_tests::{bin, wait_until};

/// `(tid, state, utime + stime)` of every engine thread of this process.
fn engine_threads() -> Vec<(String, char, u64)> {
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
        let tid = task.file_name().to_string_lossy().into_owned();
        out.push((tid, f[0].chars().next().unwrap_or('?'), ticks));
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
    // Every engine thread of this process is measured (other tests may run one too): none may
    // burn CPU while its workload sleeps.
    let before = engine_threads();
    assert!(!before.is_empty(), "no engine thread found");
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(50));
    }
    for (tid, state, ticks) in engine_threads() {
        if let Some((_, _, earlier)) = before.iter().find(|(t, _, _)| *t == tid) {
            let used = ticks.saturating_sub(*earlier);
            assert!(
                used < 20,
                "engine thread {tid} used {used} clock ticks in 1 s while its workload slept (state {state})"
            );
        }
    }

    // And it still follows the scope to its receipt.
    let proof = rt.proof_path(id);
    let receipt = refine_tests::receipt_lands(&proof, Duration::from_secs(60));
    assert!(receipt, "no receipt in {}", proof.display());
}

#[test]
fn recovery_leaves_a_scope_whose_launcher_is_alive_to_it() {
    use refine_supervisor::end::recover::{recover_one, RecoverOptions, RecoveryAction};
    use refine_supervisor::launch::LaunchOutcome;

    let home = tempfile::tempdir().unwrap();
    let rt = Runtime::open(home.path(), 4244).unwrap();
    let sup = Supervisor::new(rt.clone()).with_guardian_exe(bin("refine-guardian"));
    let req = LaunchRequest::new(Kind::Command, ["/bin/sleep", "600"]);
    let handle = sup.launch(req).expect("launch");
    let id = handle.id();

    // The launcher holds the registration lock: recovery reports the scope as owned and
    // signals nothing (the workload is still there to be cancelled below).
    let action = recover_one(&rt, id, &RecoverOptions::default());
    assert!(matches!(action, RecoveryAction::Owned), "{action:?}");
    let canceller = handle.canceller();
    canceller.cancel();
    let result = handle.wait().expect("wait");
    assert_eq!(
        result.outcome,
        LaunchOutcome::Cancelled,
        "the workload should have been alive to cancel"
    );

    // Once the scope has its receipt, the lock is free again and recovery releases it.
    let action = recover_one(&rt, id, &RecoverOptions::default());
    assert!(
        matches!(action, RecoveryAction::Released { .. }),
        "{action:?}"
    );
}
