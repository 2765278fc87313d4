//! Every scope that recovery or a stop ended says so in its outcome (issue 44, item 4): a
//! restarted service's recovery leaves `stopped` with the cause `recovery`, never a bare
//! "signal 9" and no result; a stop on a full disk still reads `stopped`, not the signal.

use refine_tests::cli_support;

use cli_support::*;
use refine_tests::TinyDisk;
use serde_json::Value;

fn result_of(home: &Home, id: &str) -> Value {
    let doc = show(home, id);
    assert!(doc["result"].is_object(), "no result: {doc:#}");
    doc["result"].clone()
}

/// A service killed with its launch running; the restarted one's recovery stops the scope.
#[test]
fn a_scope_stopped_by_recovery_says_stopped_cause_recovery() {
    let (home, mut svc) = Home::with_service(&[]);
    // A launch that asked to be kept would be adopted instead (L4); this one asks to be stopped.
    let id = cli_support::detach_with(&home, &["--on-service-loss", "stop"], &["sleep", "300"]);
    home.wait_state(&id, "live");
    svc.signal(rustix::process::Signal::KILL);
    svc.wait();
    let _again = Serving::start(&home, &[]);
    home.wait_ended(&id);
    let result = result_of(&home, &id);
    assert_eq!(result["outcome"], "stopped", "{result:#}");
    assert_eq!(result["residue_stop"]["cause"], "recovery", "{result:#}");
    // The human view names the cause beside the outcome.
    let out = home.cli(&["show", &id]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("Outcome:") && l.contains("stopped") && l.contains("recovery")),
        "{text}"
    );
}

/// `stop ID` while the home's disk is full: the cause cannot be written as a file of its own,
/// and the outcome is still `stopped`.
#[test]
fn a_stop_on_a_full_disk_reads_stopped() {
    if skip_unless_root("mounting a tiny tmpfs needs root") {
        return;
    }
    let Some(disk) = TinyDisk::mount("8m") else {
        println!("skipped: cannot mount a tmpfs here");
        return;
    };
    let home = Home {
        dir: tempfile::tempdir_in(disk.path()).expect("tempdir"),
        port: 7411,
    };
    let _svc = Serving::start(&home, &[]);
    let id = detach(&home, &["sleep", "300"]);
    home.wait_state(&id, "live");
    disk.fill_leaving(0);
    let out = home.cli(&["stop", &id]);
    assert!(out.status.success(), "{}", describe(&["stop", &id], &out));
    home.wait_ended(&id);
    let result = result_of(&home, &id);
    disk.free();
    assert_eq!(result["outcome"], "stopped", "{result:#}");
}
