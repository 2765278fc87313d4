//! Recovery after the launcher is lost (SPEC A4–A5): from fresh processes, against real guardians.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use refine_protocol::RegistrationId;
use refine_supervisor::end::assess::{assess, Assessment, UnverifiedReason, KERNEL_BOOT};
use refine_supervisor::end::recover::{recover, recover_one, RecoverOptions, RecoveryAction};
use refine_supervisor::end::stop::StopOutcome;
use refine_supervisor::kernel::signal::{Signal, Verified};
use refine_tests::stopkit::*;
use refine_tests::wait_until;

const TREE_BUILDER: &str = env!("CARGO_BIN_EXE_tree-builder");

#[test]
fn launcher_killed_mid_flight_then_two_concurrent_recoveries() {
    let home = home();
    let port = "7100";
    let mut launcher = Command::new(env!("CARGO_BIN_EXE_stop-launcher"))
        .arg(home.path())
        .arg(port)
        .arg(TREE_BUILDER)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn stop-launcher");
    let mut lines = BufReader::new(launcher.stdout.take().unwrap()).lines();
    let mut ids: BTreeMap<String, RegistrationId> = BTreeMap::new();
    loop {
        let line = lines
            .next()
            .expect("launcher output ended before ready")
            .unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["launched", name, id] => {
                ids.insert(name.to_string(), RegistrationId::parse(id).unwrap());
            }
            ["ready"] => break,
            _ => {}
        }
    }
    assert_eq!(ids.len(), 3);
    let rt = refine_supervisor::store::registry::Runtime::open_existing(home.path(), 7100).unwrap();
    let regs: BTreeMap<String, _> = ids
        .iter()
        .map(|(n, id)| (n.clone(), rt.read_registration(*id).unwrap()))
        .collect();
    let mut everything = Vec::new();
    for reg in regs.values() {
        everything.extend(scan(reg));
    }
    assert!(everything.len() >= 10, "{everything:#?}");

    // Kill the launcher (our child; through a verified pidfd like everything else).
    let pid = rustix::process::Pid::from_child(&launcher);
    let w = refine_supervisor::kernel::procfs::stat(pid)
        .unwrap()
        .witness();
    Verified::open(w).unwrap().signal(Signal::KILL).unwrap();
    launcher.wait().unwrap();

    let run = || {
        Command::new(env!("CARGO_BIN_EXE_stop-recover"))
            .arg(home.path())
            .arg(port)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn stop-recover")
    };
    let (a, b) = (run(), run());
    let outputs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let mut actions: BTreeMap<RegistrationId, Vec<String>> = BTreeMap::new();
    for o in &outputs {
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "stop-recover failed:\n{text}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let id = RegistrationId::parse(words.next().unwrap()).unwrap();
            let rest: Vec<&str> = words.collect();
            actions.entry(id).or_default().push(rest.join(" "));
        }
    }
    let report = format!("{actions:#?}");
    for (name, id) in &ids {
        // Each run reads the open index when it starts: a scope the other run already proved
        // exited has left it, so it may be seen by one run only.
        let acts = actions.get(id).cloned().unwrap_or_default();
        assert!((1..=2).contains(&acts.len()), "{name}: {report}");
        let stopped = acts.iter().filter(|a| a.starts_with("stopped")).count();
        // Nobody double-acts: at most one run stops a scope, the other finds it exited.
        assert!(stopped <= 1, "{name} stopped twice: {report}");
        assert!(
            acts.iter().any(|a| a != "owned"),
            "{name}: neither run acted: {report}"
        );
        for a in &acts {
            // `owned`: the other run held the lock while acting on it.
            assert!(
                a == "stopped Stopped" || a == "released exited" || a == "owned",
                "{name}: unexpected action {a}: {report}"
            );
        }
        if name == "exits" {
            assert_eq!(stopped, 0, "{report}");
        }
        // Proven exited by the guardian's receipt.
        let assessment = assess(&rt, &regs[name], &KERNEL_BOOT);
        assert!(assessment.receipt().is_some(), "{name}: {assessment:?}");
    }
    // The detached session and the SIGTERM-ignorers were stale live scopes: stopped.
    for name in ["detached", "ignorer"] {
        assert!(
            actions[&ids[name]].contains(&"stopped Stopped".to_owned()),
            "{name}: {report}"
        );
    }
    assert!(
        wait_until(GENEROUS, || everything.iter().all(|m| !running(&m.witness))),
        "survivors: {:#?}",
        survivors(&everything)
    );

    // Idempotent: every scope was proven exited under its lock, so each left the open index;
    // a third run has nothing left to read (recovery is O(open), F1).
    for id in ids.values() {
        assert!(!rt.open_marker_path(*id).exists(), "{id} still open");
    }
    let again = recover(&rt, &RecoverOptions::default()).unwrap();
    assert!(again.entries.is_empty(), "{again:#?}");
}

#[test]
fn a_scope_whose_launcher_holds_its_lock_is_left_to_it() {
    let (_home, rt) = home_and_runtime();
    let mut scope = launch_tree(&rt, TREE_BUILDER, "--sessions 1 --groups 1 --leaves 1");
    scope.wait_ready();
    let lock = rt
        .lock(scope.reg.id, std::time::Duration::from_secs(5))
        .unwrap();
    let opts = RecoverOptions {
        lock_wait: std::time::Duration::from_millis(50),
        ..RecoverOptions::default()
    };
    assert!(matches!(
        recover_one(&rt, scope.reg.id, &opts),
        RecoveryAction::Owned
    ));
    assert!(assess(&rt, &scope.reg, &KERNEL_BOOT).is_live());
    drop(lock);
    let before = scope.members();
    match recover_one(&rt, scope.reg.id, &opts) {
        RecoveryAction::Stopped { report } => assert_eq!(report.outcome, StopOutcome::Stopped),
        other => panic!("expected a stop, got {other:?}"),
    }
    scope.reap();
    assert!(survivors(&before).is_empty());
}

#[test]
fn unverified_and_corrupt_registrations_are_kept_and_reported() {
    let (_home, rt) = home_and_runtime();
    // Unverified: guardian SIGKILLed without a receipt; its orphans are killed, the record kept.
    let mut scope = launch_tree(&rt, TREE_BUILDER, "--sessions 1 --groups 1 --leaves 2");
    scope.wait_ready();
    let before = scope.members();
    Verified::open(scope.reg.hello.guardian)
        .unwrap()
        .signal(Signal::KILL)
        .unwrap();
    scope.reap();
    // Corrupt: a record that does not decode (indexed, as every record written by a launch is).
    let bad = rt.new_id().unwrap();
    rt.add_open_marker(bad).unwrap();
    std::fs::write(rt.record_path(bad), b"not a record").unwrap();

    let report = recover(&rt, &RecoverOptions::default()).unwrap();
    for e in &report.entries {
        if e.id == scope.reg.id {
            match &e.action {
                RecoveryAction::Kept { reason, stop } => {
                    assert_eq!(*reason, UnverifiedReason::GuardianGoneWithoutReceipt);
                    let stop = stop.as_ref().expect("orphans were killed");
                    assert_eq!(stop.outcome, StopOutcome::KilledUnverified);
                }
                other => panic!("expected kept, got {other:?}"),
            }
        } else {
            assert_eq!(e.id, bad);
            assert!(matches!(e.action, RecoveryAction::Corrupt { .. }), "{e:?}");
        }
    }
    assert_eq!(report.entries.len(), 2);
    assert!(
        wait_until(GENEROUS, || before.iter().all(|m| !running(&m.witness))),
        "survivors: {:#?}",
        survivors(&before)
    );
    // Evidence kept: record and proof file are still there, and the corrupt record too.
    assert!(rt.record_path(scope.reg.id).exists());
    assert!(Path::new(&scope.reg.proof_path).exists());
    assert!(rt.record_path(bad).exists());
    assert!(matches!(
        assess(&rt, &scope.reg, &KERNEL_BOOT),
        Assessment::Unverified { .. }
    ));
}
