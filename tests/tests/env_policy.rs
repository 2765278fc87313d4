//! Login-shell environment capture (SPEC S8) against real shells. The pure policy is unit-tested
//! in `supervisor/src/env_policy.rs`; launches that carry the result are in `engine.rs`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use refine_supervisor::launch::env_policy::{capture_login_env, LoginEnv, LoginEnvError};

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    refine_tests::install_executable(&p, format!("#!/bin/sh\n{body}\n").as_bytes());
    p
}

#[test]
fn a_real_login_shell_prints_its_environment() {
    let env = capture_login_env(Path::new("/bin/sh"), Duration::from_secs(30)).expect("capture");
    assert!(env.contains_key(OsStr::new("PATH")), "{env:?}");
}

#[test]
fn profile_chatter_before_the_marker_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    // A "shell" that prints noise, then runs the -c command with a variable its profile set.
    let shell = script(
        dir.path(),
        "chatty",
        "echo 'welcome A=B'; export FROM_PROFILE='x y'; shift; exec /bin/sh \"$@\"",
    );
    let env = capture_login_env(&shell, Duration::from_secs(30)).expect("capture");
    assert_eq!(
        env.get(OsStr::new("FROM_PROFILE")).map(|v| v.to_str()),
        Some(Some("x y"))
    );
    assert!(!env.contains_key(OsStr::new("welcome A")));
}

#[test]
fn a_hanging_profile_is_bounded_and_leaves_the_environment_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let shell = script(dir.path(), "hangs", "echo partial; exec sleep 600");
    let bound = Duration::from_millis(300);
    match capture_login_env(&shell, bound) {
        Err(LoginEnvError::Timeout { .. }) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
    let cached = LoginEnv::new(Some(shell), bound);
    assert!(cached.get().is_none());
    assert!(cached.get().is_none(), "the failure is cached, not retried");
}

#[test]
fn a_failing_shell_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let shell = script(dir.path(), "fails", "exit 1");
    assert!(matches!(
        capture_login_env(&shell, Duration::from_secs(30)),
        Err(LoginEnvError::NoOutput {
            status: Some(1),
            ..
        })
    ));
    assert!(matches!(
        capture_login_env(&dir.path().join("missing"), Duration::from_secs(30)),
        Err(LoginEnvError::Spawn { .. })
    ));
}
