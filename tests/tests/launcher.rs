//! The supervisor-side minimal launcher (`supervisor::guardian`) against the real guardian:
//! registration durable before *start*, owner marker, abort when registration fails.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use refine_protocol::{Receipt, ScopeEnd, WorkloadStatus};
use refine_supervisor::launch::env_policy::to_entries;
use refine_supervisor::launch::guardian::{
    self, GuardianEvent, HandshakeError, LaunchConfig, Stdio,
};
use refine_supervisor::launch::{launch_registered, RegisteredLaunch};
use refine_supervisor::store::registry::Runtime;
use refine_tests::bin;

fn request(script: &str, env: Vec<(OsString, OsString)>) -> RegisteredLaunch {
    RegisteredLaunch {
        purpose: BTreeMap::from([("goal".into(), "prove".into())]),
        ..refine_tests::stopkit::registered(
            "launcher test",
            LaunchConfig {
                env: to_entries(&env.into_iter().collect()),
                start_timeout: Duration::from_secs(30),
                guardian_exe: Some(bin("refine-guardian")),
                ..LaunchConfig::new(
                    vec!["/bin/sh".into(), "-c".into(), script.into()],
                    Stdio::Inherit,
                )
            },
        )
    }
}

fn path_env() -> Vec<(OsString, OsString)> {
    vec![("PATH".into(), "/usr/bin:/bin".into())]
}

fn events_until_receipt(link: &mut guardian::GuardianLink) -> (Vec<GuardianEvent>, Receipt) {
    let mut seen = Vec::new();
    loop {
        match link
            .next_event(Some(Duration::from_secs(60)))
            .expect("event")
        {
            Some(GuardianEvent::ScopeExited(r)) => return (seen, r),
            Some(GuardianEvent::ChannelClosed) => {
                panic!("channel closed without receipt; events {seen:?}")
            }
            Some(e) => seen.push(e),
            None => panic!("no event within 60 s; events so far {seen:?}"),
        }
    }
}

#[test]
fn registration_is_durable_before_start_and_the_receipt_binds_to_it() {
    let home = tempfile::tempdir().unwrap();
    let rt = Runtime::open(home.path(), 1).unwrap();
    let id = rt.new_id().unwrap();
    let out = home.path().join("out");
    let record = rt.record_path(id);
    // The workload checks for its own record: it must exist before the workload runs at all.
    let script = format!(
        "test -f {record} && echo registered > {out}.reg; printf %s \"$REFINE_OWNER\" > {out}",
        record = record.display(),
        out = out.display()
    );
    let mut env = path_env();
    env.push(("REFINE_OWNER".into(), "inherited-and-wrong".into()));
    let (reg, mut link) = launch_registered(&rt, id, request(&script, env)).expect("launch");

    assert_eq!(rt.read_registration(id).expect("record"), reg);
    let (events, receipt) = events_until_receipt(&mut link);
    let _ = refine_supervisor::kernel::cgroup::finish(&reg);
    assert_eq!(
        events.first(),
        Some(&GuardianEvent::Started),
        "events {events:?}"
    );
    assert!(events.contains(&GuardianEvent::WorkloadExited {
        status: WorkloadStatus::Exited(0),
        at_ns: receipt.workload_exited_at_ns
    }));
    assert!(link.wait_guardian().expect("reap guardian").success());

    assert_eq!(
        std::fs::read_to_string(format!("{}.reg", out.display()))
            .unwrap()
            .trim(),
        "registered"
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        id.to_string(),
        "owner marker"
    );
    refine_tests::assert_receipt_binds(&receipt, &reg);
    assert_eq!(receipt.status, WorkloadStatus::Exited(0));
    assert_eq!(receipt.end, ScopeEnd::Completed);
}

#[test]
fn failed_registration_aborts_the_gated_workload() {
    let home = tempfile::tempdir().unwrap();
    let rt = Runtime::open(home.path(), 1).unwrap();
    let id = rt.new_id().unwrap();
    // A directory where the record must go: the durable write's rename fails.
    std::fs::create_dir(rt.record_path(id)).unwrap();
    let ran = home.path().join("ran");
    let script = format!("touch {}", ran.display());
    let err = launch_registered(&rt, id, request(&script, path_env())).expect_err("must fail");
    assert!(matches!(err, HandshakeError::Registry(_)), "{err:?}");

    let proof = rt.proof_path(id);
    let aborted = refine_tests::receipt_lands(&proof, Duration::from_secs(30));
    assert!(aborted, "no aborted receipt in {}", proof.display());
    let receipt = Receipt::decode(&std::fs::read(&proof).unwrap()).unwrap();
    assert_eq!(receipt.end, ScopeEnd::Aborted);
    assert_eq!(receipt.status, WorkloadStatus::NeverStarted);
    assert!(!ran.exists(), "the workload ran without a registration");
}

#[test]
fn missing_guardian_is_a_typed_error() {
    let home = tempfile::tempdir().unwrap();
    let rt = Runtime::open(home.path(), 1).unwrap();
    let mut req = request("true", path_env());
    req.guardian.guardian_exe = Some(Path::new("/nonexistent/refine-guardian").to_owned());
    let err = launch_registered(&rt, rt.new_id().unwrap(), req).expect_err("must fail");
    assert!(matches!(err, HandshakeError::GuardianMissing(_)), "{err:?}");
}

#[test]
fn a_guardian_failure_before_hello_is_typed_and_readable() {
    let home = tempfile::tempdir().unwrap();
    let rt = Runtime::open(home.path(), 1).unwrap();
    let id = rt.new_id().unwrap();
    // The proof file must be new (O_EXCL): an existing one is refused before anything is forked.
    std::fs::write(rt.proof_path(id), b"someone else's").unwrap();
    let err = launch_registered(&rt, id, request("true", path_env())).expect_err("must fail");
    assert!(
        matches!(err, HandshakeError::GuardianFailed { code: 14, errno } if errno == libc::EEXIST),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("cannot create the proof file") && text.contains("errno 17"),
        "{text}"
    );
    // Nothing was registered and the other file is untouched.
    assert!(!rt.record_path(id).exists());
    assert_eq!(std::fs::read(rt.proof_path(id)).unwrap(), b"someone else's");
}

/// A guardian started ahead of its launch (F3) and then dropped, because the launch failed
/// before it was sent, is told nothing: it exits and is reaped at once, neither left running
/// nor left a zombie, and it created no proof file.
#[test]
fn a_guardian_started_and_dropped_before_its_launch_is_gone() {
    let started = guardian::start(Some(bin("refine-guardian")), false).expect("start");
    let pid = started.pid();
    assert!(pid > 1);
    assert!(Path::new(&format!("/proc/{pid}")).exists(), "running");
    drop(started);
    // Reaped by the drop itself: no /proc entry (a zombie would still have one).
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "guardian {pid} still there after the drop: {:?}",
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
    );
}

/// A guardian started for other stdio than its launch is refused, not launched.
#[test]
fn a_started_guardian_takes_only_the_launch_it_was_started_for() {
    let started = guardian::start(Some(bin("refine-guardian")), true).expect("start");
    let pid = started.pid();
    let config = LaunchConfig::new(
        vec!["/bin/true".into()],
        Stdio::Fds(std::array::from_fn(|_| {
            std::fs::File::open("/dev/null").unwrap().into()
        })),
    );
    match started.launch(config) {
        Err(HandshakeError::Unexpected(_)) => {}
        other => panic!("launched anyway: {other:?}"),
    }
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "guardian {pid} left behind"
    );
}
