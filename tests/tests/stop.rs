//! The one stop (SPEC T1–T4) against real process trees.

use std::process::Command;
use std::time::Duration;

use refine_protocol::ProcessWitness;
use refine_supervisor::end::assess::{self, Assessment, ExitProof, KERNEL_BOOT};
use refine_supervisor::end::stop::{self, StopError, StopOptions, StopOutcome, Target};
use refine_supervisor::kernel::procfs::{self, State};
use refine_supervisor::kernel::signal::{self, Signal, SignalError, Verified};
use refine_tests::{wait_until, words};

use refine_tests::stopkit::*;

const TREE_BUILDER: &str = env!("CARGO_BIN_EXE_tree-builder");

/// `tree-builder ARGS` (one line, split at white space) behind the real guardian.
fn launch(rt: &refine_supervisor::store::registry::Runtime, args: &str) -> GuardianScope {
    launch_guardian(rt, std::path::Path::new(TREE_BUILDER), &words(args))
}

/// 4 sessions x 3 groups x (leader + 4 leaves), 6 SIGTERM-ignorers, a forker and a stopped leaf:
/// 66 processes below the workload.
const BIG_TREE: &str = "--sessions 4 --groups 3 --leaves 4 --ignorers 6 --forker --stopped";

#[test]
fn stop_proves_exit_of_a_large_tree_by_receipt() {
    let (_home, rt) = home_and_runtime();
    let mut scope = launch(&rt, BIG_TREE);
    let nodes = scope.wait_ready();
    assert_eq!(nodes, 66);
    assert!(wait_until(GENEROUS, || scope
        .members()
        .iter()
        .any(|m| m.state == State::Stopped)));
    let before = scope.members();
    assert!(
        before.len() > 50,
        "expected a 50+ process tree, saw {}",
        before.len()
    );
    let sessions: std::collections::BTreeSet<i32> = before.iter().map(|m| m.sid).collect();
    let groups: std::collections::BTreeSet<i32> = before.iter().map(|m| m.pgid).collect();
    assert!(sessions.len() >= 5, "sessions: {sessions:?}");
    assert!(groups.len() >= 13, "groups: {groups:?}");

    let opts = StopOptions {
        grace: Some(Duration::from_millis(300)),
        ..StopOptions::default()
    };
    let report = stop::stop(&rt, &scope.reg, &opts).expect("stop");
    assert_eq!(report.outcome, StopOutcome::Stopped, "{report:#?}");
    let receipt = report.assessment.receipt().expect("exited by receipt");
    assert_eq!(receipt.registration, scope.reg.id);
    // The graceful phase went to the workload's group through a verified member.
    assert!(report.signalled.iter().any(|s| matches!(
        s.target,
        Target::Group { pgid, .. } if pgid == scope.reg.hello.workload_pgid as i32
    ) && s.signal == libc::SIGTERM));
    assert!(report.killed > 0);

    scope.reap();
    let left = survivors(&before);
    assert!(left.is_empty(), "survivors: {left:#?}");
    // Recomputed from the evidence, not cached.
    assert!(assess::assess(&rt, &scope.reg, &KERNEL_BOOT).is_exited());
}

#[test]
fn stop_without_grace_kills_sigterm_ignorers_and_detached_sessions() {
    let (_home, rt) = home_and_runtime();
    let mut scope = launch(
        &rt,
        "--sessions 3 --groups 2 --leaves 3 --ignorers 18 --orphan --then exit",
    );
    scope.wait_ready();
    // The workload and the session leaders exit: their descendants are the guardian's now.
    let reg = scope.reg.clone();
    assert!(wait_until(GENEROUS, || !running(&reg.hello.workload)));
    let before = scope.members();
    assert!(before.len() >= 24, "{before:#?}");
    assert!(before
        .iter()
        .all(|m| m.ppid != reg.hello.workload.pid as i32));

    let report = stop::stop(&rt, &scope.reg, &StopOptions::default()).expect("stop");
    assert_eq!(report.outcome, StopOutcome::Stopped, "{report:#?}");
    assert!(!report.signalled.iter().any(|s| s.signal == libc::SIGTERM));
    scope.reap();
    let left = survivors(&before);
    assert!(left.is_empty(), "survivors: {left:#?}");
}

#[test]
fn stopping_an_exited_scope_reports_it_and_signals_nothing() {
    let (_home, rt) = home_and_runtime();
    let mut scope = launch(&rt, "--sessions 0 --then exit");
    scope.reap();
    let report = stop::stop(&rt, &scope.reg, &StopOptions::default()).expect("stop");
    assert_eq!(report.outcome, StopOutcome::AlreadyExited);
    assert!(report.signalled.is_empty());
    assert!(matches!(
        report.assessment,
        Assessment::Exited {
            proof: ExitProof::Receipt(_)
        }
    ));
}

/// A member whose command name is not UTF-8 (any process may set its own, byte for byte) is
/// read, stopped and killed like any other: `/proc/PID/stat` is parsed as bytes.
#[test]
fn a_member_with_a_non_utf8_command_name_is_stopped() {
    let (_home, rt) = home_and_runtime();
    let script = "printf 'a\\377b' > /proc/$$/comm; sleep 1000 & echo ready 2; wait";
    let mut scope = launch_guardian(&rt, std::path::Path::new("/bin/sh"), &["-c", script]);
    assert_eq!(scope.wait_ready(), 2);
    let members = scope.members();
    let named: Vec<_> = members
        .iter()
        .filter_map(|m| procfs::pid_of(&m.witness))
        .filter_map(|p| std::fs::read(format!("/proc/{}/comm", p.as_raw_nonzero())).ok())
        .collect();
    assert!(
        named.iter().any(|c| c.as_slice() == b"a\xffb\n"),
        "no member named a\\xffb: {named:?}"
    );
    let report = stop::stop(&rt, &scope.reg, &StopOptions::default()).expect("stop");
    assert_eq!(report.outcome, StopOutcome::Stopped);
    assert_eq!(report.killed, 2, "{report:?}");
    scope.reap();
    assert!(survivors(&members).is_empty(), "{:?}", survivors(&members));
}

#[test]
fn quiescence_failure_resumes_exactly_what_it_stopped() {
    let (_home, rt, mut scope) = ready_tree(
        TREE_BUILDER,
        "--sessions 2 --groups 2 --leaves 3 --forker --stopped",
    );
    // The stopped leaf reports before it stops itself: wait for the kernel to show it stopped.
    assert!(wait_until(GENEROUS, || scope
        .members()
        .iter()
        .any(|m| m.state == State::Stopped)));
    let before = scope.members();
    let already: Vec<ProcessWitness> = before
        .iter()
        .filter(|m| m.state == State::Stopped)
        .map(|m| m.witness)
        .collect();
    assert_eq!(already.len(), 1, "one leaf stopped itself: {before:#?}");

    // The `/proc` quiesce is what this test is about: on a host with a writable cgroup v2 the
    // scope has a cgroup of its own, which the stop would freeze instead (tests/cgroup.rs).
    // Without the record's cgroup the stop takes the `/proc` path; the record gets it back below.
    let cgroup = scope.reg.cgroup.take();
    // A zero budget cannot quiesce a forking tree: two agreeing scans are needed.
    let opts = StopOptions {
        budget: Duration::ZERO,
        ..StopOptions::default()
    };
    let err = stop::stop(&rt, &scope.reg, &opts).expect_err("must not quiesce");
    let StopError::Quiescence(evidence) = err else {
        panic!("expected a quiescence failure, got {err:?}");
    };
    assert!(!evidence.stopped.is_empty());
    assert_eq!(evidence.found_stopped, already);
    assert!(evidence.last_scan.len() >= before.len() - 1);
    // Everything this attempt stopped was resumed (or is gone); nothing else was touched.
    for w in &evidence.stopped {
        assert!(
            evidence.resumed.contains(w) || !exists(w),
            "{w:?} not resumed"
        );
        assert!(
            wait_until(GENEROUS, || procfs::stat_of(w)
                .unwrap()
                .is_none_or(|s| !s.state.is_stopped())),
            "{w:?} still stopped"
        );
    }
    for w in &already {
        let s = procfs::stat_of(w)
            .unwrap()
            .expect("pre-stopped leaf exists");
        assert_eq!(s.state, State::Stopped, "the pre-stopped leaf was resumed");
    }
    // Evidence kept: the scope is still live and the record and proof are there.
    assert!(assess::assess(&rt, &scope.reg, &KERNEL_BOOT).is_live());
    assert!(rt.record_path(scope.reg.id).exists());

    // With a real budget the same stop succeeds.
    let report = stop::stop(&rt, &scope.reg, &StopOptions::default()).expect("stop");
    assert_eq!(report.outcome, StopOutcome::Stopped);
    scope.reap();
    scope.reg.cgroup = cgroup;
    let left = survivors(&before);
    assert!(left.is_empty(), "survivors: {left:#?}");
}

#[test]
fn group_signals_never_reach_a_group_id_of_one_or_less() {
    let mut child = Command::new(TREE_BUILDER)
        .args(["--sessions", "0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = rustix::process::Pid::from_child(&child);
    let me = procfs::stat(pid).unwrap();
    let v = Verified::open(me.witness()).unwrap();
    for pgid in [1, 0, -1, i32::MIN] {
        assert!(
            matches!(
                signal::signal_group(&v, pgid, Signal::KILL),
                Err(SignalError::InvalidGroup(g)) if g == pgid
            ),
            "group {pgid} was not refused"
        );
    }
    // A group the verified process is not in is refused too.
    assert!(matches!(
        signal::signal_group(&v, me.pgid + 1, Signal::KILL),
        Err(SignalError::NotMember { .. }) | Err(SignalError::InvalidGroup(_))
    ));
    assert!(running(&me.witness()));
    v.signal(Signal::KILL).unwrap();
    child.wait().unwrap();
    // Reaped: the pidfd now reports it gone.
    assert!(matches!(v.signal(Signal::KILL), Err(SignalError::Gone(_))));
}

#[test]
fn overlapping_stops_from_two_processes_serialize_and_agree() {
    let (home, _rt, mut scope) = ready_tree(
        TREE_BUILDER,
        "--sessions 3 --groups 2 --leaves 3 --ignorers 4",
    );
    let before = scope.members();
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_stop-run"))
            .arg(home.path())
            .arg("7000")
            .arg(scope.reg.id.to_string())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn stop-run")
    };
    let (a, b) = (run(), run());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    for o in [&a, &b] {
        assert!(
            o.status.success(),
            "stop-run failed: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let field = |o: &std::process::Output, key: &str| -> String {
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{key}=")).map(str::to_owned))
            .unwrap_or_else(|| panic!("no {key} in {text}"))
    };
    let outcomes = [field(&a, "outcome"), field(&b, "outcome")];
    // Serialized by the fence: one stops, the other finds the scope already exited.
    assert!(
        outcomes.contains(&"stopped".to_owned()) && outcomes.contains(&"already_exited".to_owned()),
        "{outcomes:?}"
    );
    // Both report the same final state: exited by the same receipt.
    assert_eq!(field(&a, "state"), "exited");
    assert_eq!(field(&b, "state"), "exited");
    assert_eq!(field(&a, "receipt"), field(&b, "receipt"));
    scope.reap();
    let left = survivors(&before);
    assert!(left.is_empty(), "survivors: {left:#?}");
}

#[test]
fn a_reused_pid_and_a_reused_group_id_are_never_signalled() {
    if refine_tests::skip_unless_root("needs root for unshare --pid and ns_last_pid") {
        return;
    }
    let home = home();
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(env!("CARGO_BIN_EXE_stop-pidreuse"))
        .arg(home.path())
        .arg(TREE_BUILDER)
        .output()
        .expect("run unshare");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("unshare failed") || stderr.contains("Operation not permitted") {
        eprintln!("skipped: cannot create a pid namespace here: {stderr}");
        return;
    }
    assert!(
        out.status.success(),
        "stop-pidreuse: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(stdout.contains("pid reuse: refused"), "{stdout}");
    assert!(stdout.contains("group reuse: untouched"), "{stdout}");
}

#[test]
fn children_are_killed_before_parents_so_no_stopped_group_is_resumed() {
    let (_home, rt) = home_and_runtime();
    // Session leaders stay: killing one before its groups would orphan them while stopped, and
    // the kernel would send those groups SIGHUP + SIGCONT.
    let mut scope = launch(&rt, "--sessions 3 --groups 3 --leaves 3");
    scope.wait_ready();
    let before = scope.members();
    let report = stop::stop(&rt, &scope.reg, &StopOptions::default()).expect("stop");
    assert_eq!(report.outcome, StopOutcome::Stopped);
    assert!(
        report.killed >= before.len(),
        "killed {} of {}: {report:#?}",
        report.killed,
        before.len()
    );
    assert!(!report.signalled.iter().any(|s| s.signal == libc::SIGCONT));
    scope.reap();
    assert!(survivors(&before).is_empty());
}

#[test]
fn ppid_scan_finds_the_same_tree_as_children_lists() {
    use refine_supervisor::kernel::tree::{discover_with, Roots, Walk};
    let (_home, rt, mut scope) =
        ready_tree(TREE_BUILDER, "--sessions 2 --groups 2 --leaves 2 --orphan");
    let roots = Roots {
        guardian: Some(scope.reg.hello.guardian),
        members: Vec::new(),
        owner: None,
    };
    let boot = procfs::boot_id().unwrap();
    let by_lists = discover_with(&roots, boot, Walk::ChildrenLists).unwrap();
    let by_scan = discover_with(&roots, boot, Walk::PpidScan).unwrap();
    assert!(by_lists.used_children_lists);
    assert!(!by_scan.used_children_lists);
    assert_eq!(by_lists.live_witnesses(), by_scan.live_witnesses());
    assert!(by_lists.live_witnesses().len() >= 13);
    let report = stop::stop(&rt, &scope.reg, &StopOptions::default()).expect("stop");
    assert_eq!(report.outcome, StopOutcome::Stopped);
    scope.reap();
}

#[test]
fn an_escaped_process_carrying_the_owner_marker_is_stopped_once_its_guardian_is_gone() {
    let (_home, rt, mut scope) = ready_tree(TREE_BUILDER, "--sessions 1 --groups 1 --leaves 1");
    // Started outside the guardian's tree (this test's own child), but marked as the scope's.
    let mut escaped = Command::new(TREE_BUILDER)
        .args(["--sessions", "0"])
        .env(procfs::OWNER_VAR, scope.reg.id.to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let esc = procfs::stat(rustix::process::Pid::from_child(&escaped))
        .unwrap()
        .witness();
    // A witness for reports while the guardian lives (A7: never its kill target then, see
    // stop_hardened.rs)...
    assert!(wait_until(GENEROUS, || scope
        .members()
        .iter()
        .any(|m| m.witness == esc)));
    // ...and a kill target once the guardian is gone without a receipt.
    Verified::open(scope.reg.hello.guardian)
        .unwrap()
        .signal(Signal::KILL)
        .unwrap();
    scope.reap();
    let report = stop::stop(&rt, &scope.reg, &StopOptions::default()).expect("stop");
    assert_eq!(report.outcome, StopOutcome::KilledUnverified, "{report:#?}");
    assert!(report
        .signalled
        .iter()
        .any(|s| s.target == Target::Process(esc) && s.signal == libc::SIGKILL));
    let status = escaped.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL)
    );
}

#[test]
fn a_scope_that_ends_on_sigterm_during_the_grace_needs_no_sigkill() {
    let (_home, rt, mut scope) = ready_tree(TREE_BUILDER, "--sessions 0");
    let opts = StopOptions {
        grace: Some(GENEROUS),
        ..StopOptions::default()
    };
    let report = stop::stop(&rt, &scope.reg, &opts).expect("stop");
    assert_eq!(report.outcome, StopOutcome::Stopped, "{report:#?}");
    assert_eq!(report.killed, 0);
    assert!(report.signalled.iter().all(|s| s.signal == libc::SIGTERM));
    let receipt = report.assessment.receipt().expect("receipt");
    assert_eq!(
        receipt.status,
        refine_protocol::WorkloadStatus::Signaled(libc::SIGTERM)
    );
    scope.reap();
}

#[test]
fn the_stop_fence_wait_is_bounded_and_typed() {
    let (_home, rt, mut scope) = ready_tree(TREE_BUILDER, "--sessions 0");
    let held = rt.stop_fence(Duration::from_secs(5)).unwrap();
    let opts = StopOptions {
        budget: Duration::from_millis(100),
        ..StopOptions::default()
    };
    let err = stop::stop(&rt, &scope.reg, &opts).expect_err("fence is held");
    assert!(matches!(err, StopError::Fence(_)), "{err:?}");
    assert!(running(&scope.reg.hello.workload), "nothing was signalled");
    drop(held);
    let report = stop::stop(&rt, &scope.reg, &StopOptions::default()).expect("stop");
    assert_eq!(report.outcome, StopOutcome::Stopped);
    scope.reap();
}

#[test]
fn a_parent_blocked_in_vfork_on_a_stopped_child_does_not_stall_quiescence() {
    let (_home, rt, mut scope) = ready_tree(TREE_BUILDER, "--sessions 0 --vforker");
    // The vfork child stopped itself before exec; its parent waits in the kernel (state D).
    assert!(
        wait_until(GENEROUS, || {
            let m = scope.members();
            m.iter().any(|m| m.state == State::DiskSleep)
                && m.iter().any(|m| m.state == State::Stopped)
        }),
        "{:#?}",
        scope.members()
    );
    let before = scope.members();
    let report = stop::stop(&rt, &scope.reg, &StopOptions::default()).expect("stop");
    assert_eq!(report.outcome, StopOutcome::Stopped);
    scope.reap();
    assert!(survivors(&before).is_empty());
}
