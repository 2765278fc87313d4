//! The policies `run` applies, through the face (SPEC E3, issue 41 item 1): a Rust host that
//! holds a `Child` gets W9's termination requests and W11's deadline with its kill-after as
//! `run` does. Real guardian, real workloads.

use std::path::Path;
use std::time::Duration;

use refine_supervisor::host::{Signal, Timeout};
use refine_supervisor::{Command, LaunchOutcome, LaunchResult, ScopeState, Supervisor};
use refine_tests::{bin, wait_until};

/// Generous: the machine is shared by several builds.
const SLACK: Duration = Duration::from_secs(60);

fn supervisor() -> (tempfile::TempDir, Supervisor) {
    let home = tempfile::tempdir().expect("a home");
    let sup = Supervisor::open(home.path())
        .expect("open the runtime")
        .with_guardian_exe(bin("refine-guardian"));
    (home, sup)
}

/// Waits for the workload's word that it is set up (a file it writes), not for a time.
fn wait_up(file: &Path) {
    assert!(
        wait_until(SLACK, || file.exists()),
        "the workload never said it was up ({})",
        file.display()
    );
}

/// `sh -c SCRIPT sh UP`: the script writes `$1` once it is set up.
fn script(script: &str, up: &Path) -> Command {
    Command::new("sh").args(["-c", script, "sh"]).arg(up)
}

/// Stops whatever a test left of a scope, so that no process outlives it.
fn clean_up(sup: &Supervisor, result: &LaunchResult) {
    let _ = refine_supervisor::launch::shared_stop(sup.runtime(), &result.registration);
}

/// A workload that ends on SIGTERM but leaves a process behind that ignores it.
const LEAVES_A_RESIDUE: &str = "(trap '' TERM; exec sleep 600) & echo up > \"$1\"; exec sleep 600";

/// W9 through the face: the request is forwarded, the workload ends by it, and what else of
/// its scope still runs is stopped through the shared stop: the receipt proves the end.
#[test]
fn a_termination_request_ends_the_rest_of_the_scope_once_the_workload_ends() {
    let (home, sup) = supervisor();
    let up = home.path().join("up");
    let child = sup
        .spawn(script(LEAVES_A_RESIDUE, &up).stop_grace(Duration::from_secs(600)))
        .expect("spawn");
    wait_up(&up);
    child
        .on_termination_request(Signal::TERM)
        .expect("the request");
    let result = child.wait().expect("the result");
    clean_up(&sup, &result);
    assert_eq!(
        result.status,
        refine_supervisor::WorkloadStatus::Signaled(libc::SIGTERM),
        "{result:?}"
    );
    assert!(
        matches!(result.scope, ScopeState::Exited(_)),
        "the residue was left running: {:?}",
        result.scope
    );
}

/// The negative control: a plain signal is only forwarded; a `command` launch keeps the rest of
/// its scope (its policy), so the scope is still live when the result comes.
#[test]
fn a_plain_signal_leaves_the_rest_of_the_scope_running() {
    let (home, sup) = supervisor();
    let up = home.path().join("up");
    let child = sup.spawn(script(LEAVES_A_RESIDUE, &up)).expect("spawn");
    wait_up(&up);
    child.signal(Signal::TERM).expect("the signal");
    let result = child.wait().expect("the result");
    clean_up(&sup, &result);
    assert!(
        matches!(result.scope, ScopeState::Live),
        "the residue was stopped without a request: {:?}",
        result.scope
    );
}

/// W9: the same request a second time ends the scope at once, whatever the grace; a different
/// one in between is only forwarded.
#[test]
fn the_same_request_twice_ends_the_scope_at_once() {
    let (home, sup) = supervisor();
    let up = home.path().join("up");
    let mut child = sup
        .spawn(
            script("trap '' TERM INT; echo up > \"$1\"; exec sleep 600", &up)
                .stop_grace(Duration::from_secs(600)),
        )
        .expect("spawn");
    wait_up(&up);
    child
        .on_termination_request(Signal::TERM)
        .expect("the request");
    child
        .on_termination_request(Signal::INT)
        .expect("the other request");
    assert!(
        child
            .wait_timeout(Duration::from_millis(500))
            .expect("a wait")
            .is_none(),
        "a different request escalated"
    );
    child
        .on_termination_request(Signal::TERM)
        .expect("the second request");
    let result = child
        .wait_timeout(SLACK)
        .expect("a wait")
        .expect("the second request ended the scope");
    clean_up(&sup, &result);
    assert_eq!(result.outcome, LaunchOutcome::Cancelled, "{result:?}");
    assert!(
        matches!(result.scope, ScopeState::Exited(_)),
        "{:?}",
        result.scope
    );
}

/// W9: a workload that ignores the request has the grace, then its scope is stopped.
#[test]
fn the_grace_over_the_scope_is_stopped() {
    let (home, sup) = supervisor();
    let up = home.path().join("up");
    let mut child = sup
        .spawn(
            script("trap '' TERM; echo up > \"$1\"; exec sleep 600", &up)
                .stop_grace(Duration::from_millis(300)),
        )
        .expect("spawn");
    wait_up(&up);
    child
        .on_termination_request(Signal::TERM)
        .expect("the request");
    let result = child
        .wait_timeout(SLACK)
        .expect("a wait")
        .expect("the grace ended the scope");
    clean_up(&sup, &result);
    assert_eq!(result.outcome, LaunchOutcome::Cancelled, "{result:?}");
    assert!(
        matches!(result.scope, ScopeState::Exited(_)),
        "{:?}",
        result.scope
    );
}

/// W11 through the face: a deadline alone is `timeout DUR`: SIGTERM to the workload's group
/// first (the workload dies of it, not of a kill), and the result's exit code is 124, as
/// coreutils `timeout` and `run` give it.
#[test]
fn a_deadline_alone_sends_sigterm_first_and_exits_124() {
    let (_home, sup) = supervisor();
    let child = sup
        .spawn(
            Command::new("sleep")
                .arg("600")
                .deadline(Timeout::after(Duration::from_millis(300))),
        )
        .expect("spawn");
    assert_eq!(
        child.registration().limits.kill_after_ms,
        Some(Timeout::DEFAULT_KILL_AFTER.as_millis() as u64),
        "the default kill-after"
    );
    let result = child.wait().expect("the result");
    clean_up(&sup, &result);
    assert_eq!(result.outcome, LaunchOutcome::TimedOut, "{result:?}");
    assert_eq!(
        result.status,
        refine_supervisor::WorkloadStatus::Signaled(libc::SIGTERM),
        "{result:?}"
    );
    assert_eq!(result.exit_code(), 124);
}

/// W11: a workload that ignores the SIGTERM (ignored from its start, as `nohup` would leave
/// it: no race with the deadline) is stopped after the kill-after; 137.
#[test]
fn a_deadline_kills_a_term_ignorer_after_its_kill_after_and_exits_137() {
    let (_home, sup) = supervisor();
    let mut cmd = Command::new("sleep").arg("600").deadline(
        Timeout::after(Duration::from_millis(200)).kill_after(Duration::from_millis(300)),
    );
    cmd.request_mut().signal_state = Some(refine_protocol::frame::SignalState {
        ignored: 1 << (libc::SIGTERM - 1),
        blocked: 0,
    });
    let child = sup.spawn(cmd).expect("spawn");
    let result = child.wait().expect("the result");
    clean_up(&sup, &result);
    assert_eq!(result.outcome, LaunchOutcome::TimedOut, "{result:?}");
    assert_eq!(
        result.status,
        refine_supervisor::WorkloadStatus::Signaled(libc::SIGKILL),
        "{result:?}"
    );
    assert_eq!(result.exit_code(), 137);
}

/// W11: zero is no deadline (`timeout 0`), and a kill-after of zero kills at once.
#[test]
fn zero_is_no_deadline_and_a_zero_kill_after_is_none() {
    let none = Timeout::after(Duration::ZERO);
    assert_eq!(none.completion(), None);
    assert_eq!(none.grace(), None, "no deadline, no grace");
    let at_once = Timeout::after(Duration::from_secs(1)).kill_after(Duration::ZERO);
    assert_eq!(at_once.grace(), None);
    let idle = Timeout::default().idle(Duration::from_secs(1));
    assert_eq!(idle.grace(), Some(Timeout::DEFAULT_KILL_AFTER));
    let (_home, sup) = supervisor();
    let child = sup
        .spawn(Command::new("true").deadline(none))
        .expect("spawn");
    assert_eq!(child.registration().limits.completion_timeout_ms, None);
    assert_eq!(child.registration().limits.kill_after_ms, None);
    let result = child.wait().expect("the result");
    assert_eq!(result.outcome, LaunchOutcome::Completed);
    assert_eq!(result.exit_code(), 0);
}

/// W8 through the face: the shutdown rule a host (the service) applies to its own launches:
/// SIGTERM to each, the grace for them to end, the shared stop for the rest; every scope ends
/// with its receipt. One that ends on the SIGTERM is not stopped; one that ignores it is, once
/// the grace is over.
#[test]
fn shutdown_ends_each_launch_and_stops_the_rest_after_the_grace() {
    let (home, sup) = supervisor();
    let (up_a, up_b) = (home.path().join("up-a"), home.path().join("up-b"));
    let polite = sup
        .spawn(script(
            "trap 'exit 0' TERM; echo up > \"$1\"; while :; do sleep 0.05; done",
            &up_a,
        ))
        .expect("spawn");
    let deaf = sup
        .spawn(script(
            "trap '' TERM; echo up > \"$1\"; exec sleep 600",
            &up_b,
        ))
        .expect("spawn");
    wait_up(&up_a);
    wait_up(&up_b);
    // Generous: the polite one must end within it also on a loaded machine.
    let done = sup.shutdown(&[polite.id(), deaf.id()], Duration::from_secs(5));
    assert_eq!(done.ended_in_grace, vec![polite.id()], "{done:?}");
    assert_eq!(done.stopped.len(), 1, "{done:?}");
    assert_eq!(done.stopped[0].id, deaf.id().to_string());
    assert!(
        matches!(
            done.stopped[0].outcome,
            refine_supervisor::host::StopOutcomeDoc::Stopped(_)
        ),
        "{done:?}"
    );
    // Proven ended when `shutdown` returns: the assessment of each says `exited`.
    for child in [polite, deaf] {
        let a = refine_supervisor::host::ops::assess_one(sup.runtime(), child.registration());
        assert_eq!(a.state, refine_supervisor::host::State::Exited, "{a:?}");
        let result = child.wait().expect("the result");
        clean_up(&sup, &result);
    }
}
