//! The face for Rust hosts (SPEC E1): `Supervisor::spawn(Command)`, a `Child` waited for
//! blocking, with a bound, or from a tokio task; its stop with a grace; its environment from
//! nothing. Real guardian, real workloads.

use std::time::{Duration, Instant};

use refine_supervisor::store::registry::Stream;
use refine_supervisor::{Command, LaunchOutcome, LaunchResult, ScopeState, Supervisor};
use refine_tests::bin;

/// Generous: the machine is shared by several builds.
const SLACK: Duration = Duration::from_secs(20);

fn supervisor() -> (tempfile::TempDir, Supervisor) {
    let home = tempfile::tempdir().expect("a home");
    let sup = Supervisor::open(home.path())
        .expect("open the runtime")
        .with_guardian_exe(bin("refine-guardian"));
    (home, sup)
}

fn stdout(r: &LaunchResult) -> String {
    String::from_utf8_lossy(r.complete_output(Stream::Stdout).expect("complete stdout"))
        .into_owned()
}

/// A tokio task awaits the result on a current-thread runtime: nothing blocks its only
/// thread (the engine's own thread wakes it), so a timer on the same thread still fires.
#[test]
fn wait_async_leaves_the_runtime_thread_free() {
    let (_home, sup) = supervisor();
    let child = sup
        .spawn(Command::new("sh").args(["-c", "sleep 0.3; echo done"]))
        .expect("spawn");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let (result, ticks) = rt.block_on(async {
        let counted = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let c = counted.clone();
        let counter = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(20)).await;
                c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        let result = tokio::time::timeout(SLACK, child.wait_async())
            .await
            .expect("the result within the bound")
            .expect("the result");
        counter.abort();
        (result, counted.load(std::sync::atomic::Ordering::Relaxed))
    });
    assert_eq!(result.outcome, LaunchOutcome::Completed);
    assert_eq!(stdout(&result), "done\n");
    assert!(
        matches!(result.scope, ScopeState::Exited(_)),
        "{:?}",
        result.scope
    );
    // 300 ms of workload at one tick per 20 ms: the thread was free for the timer meanwhile.
    assert!(
        ticks >= 3,
        "the runtime's thread was blocked: {ticks} ticks"
    );
}

#[test]
fn wait_timeout_says_none_while_it_runs_then_gives_the_result() {
    let (_home, sup) = supervisor();
    let mut child = sup
        .spawn(
            Command::new("sh")
                .args(["-c", "read line; echo \"got $line\""])
                .stdin(refine_supervisor::StdinMode::Pipe),
        )
        .expect("spawn");
    assert!(child
        .wait_timeout(Duration::from_millis(50))
        .expect("a bounded wait")
        .is_none());
    child.write_input(b"x\n").expect("input");
    let result = child
        .wait_timeout(SLACK)
        .expect("a bounded wait")
        .expect("the result within the bound");
    assert_eq!(stdout(&result), "got x\n");
}

/// The stop's grace: SIGTERM first, and a workload that ends on it ends within the grace; the
/// result says it was stopped.
#[test]
fn stop_with_a_grace_ends_the_scope_and_the_result_says_stopped() {
    let (_home, sup) = supervisor();
    let child = sup
        .spawn(Command::new("sh").args([
            "-c",
            "trap 'exit 3' TERM; echo ready; while :; do sleep 0.05; done",
        ]))
        .expect("spawn");
    let started = Instant::now();
    let report = child.stop(Duration::from_secs(10)).expect("the stop");
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "the grace was waited out: {report:?}"
    );
    let result = child.wait().expect("the result");
    assert_eq!(
        result.outcome,
        LaunchOutcome::Stopped,
        "{:?}",
        result.status
    );
    assert!(
        matches!(result.scope, ScopeState::Exited(_)),
        "{:?} {:?} {report:?}",
        result.scope,
        result.status
    );
}

/// `env_clear`: only what the command sets, and the owner marker.
#[test]
fn env_clear_starts_from_nothing() {
    let (_home, sup) = supervisor();
    let result = sup
        .spawn(
            Command::new("/usr/bin/env")
                .env("LEAK", "no")
                .env_clear()
                .env("ONLY", "this"),
        )
        .expect("spawn")
        .wait()
        .expect("the result");
    let mut names: Vec<String> = stdout(&result)
        .lines()
        .map(|l| l.split('=').next().unwrap_or_default().to_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["ONLY", "REFINE_OWNER"], "{}", stdout(&result));
    // Negative control: without env_clear this process's environment is there.
    let (name, value) = std::env::vars()
        .find(|(k, v)| !k.is_empty() && !v.contains('\n'))
        .expect("a variable in this process's environment");
    let result = sup
        .spawn(Command::new("/usr/bin/env"))
        .expect("spawn")
        .wait()
        .expect("the result");
    assert!(
        stdout(&result).contains(&format!("{name}={value}\n")),
        "{name} missing: {}",
        stdout(&result)
    );
}
