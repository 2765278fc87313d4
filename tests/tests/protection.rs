//! SPEC X11: a workload running as the supervisor's own user cannot reach its evidence, another
//! scope's output, its guardian, another scope or the service (Landlock, this kernel: ABI 7).
//!
//! The homes here live under the target directory, not under `/tmp`: a home beneath a shared
//! temporary directory gets no file-system part (see supervisor/README.md's threat model). The
//! workloads' own scratch files are in a `/tmp` directory, outside the home.

mod cli_support;

use std::path::PathBuf;
use std::process::Stdio;

use cli_support::{witnesses, Home, Serving, DEADLINE};
use refine_tests::wait_until;

/// A home outside every shared temporary directory.
fn quiet_home() -> Home {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("protection");
    std::fs::create_dir_all(&base).expect("base");
    Home {
        dir: tempfile::tempdir_in(&base).expect("home"),
        port: 7411,
    }
}

/// Whether this kernel has Landlock with signal scoping (ABI 6 or later).
fn landlock_abi() -> u32 {
    refine_supervisor::kernel::landlock::abi().unwrap_or(0)
}

/// The attacks, one line each in `results`: `NAME ok` when it succeeded, `NAME refused`.
const ATTACK: &str = r#"
try() { name=$1; shift; if "$@" 2>/dev/null; then echo "$name ok"; else echo "$name refused"; fi >> "$RESULTS"; }
P="$RUN/proofs/$REFINE_OWNER"
try overwrite_receipt sh -c 'printf x 1<> "$0"' "$P"
try truncate_proof truncate -s 0 "$P"
try rename_record mv "$RUN/registrations/$REFINE_OWNER" "$RUN/registrations/moved"
try read_other_stdout grep -q secret-b "$RUN/logs/$VICTIM.stdout"
try delete_other_stdout rm "$RUN/logs/$VICTIM.stdout"
try kill_other_workload kill -KILL "$VICTIM_PID"
try kill_service kill -KILL "$SERVICE_PID"
try stop_guardian kill -STOP "$PPID"
kill -CONT "$PPID" 2>/dev/null
try kill_guardian kill -KILL "$PPID"
echo done >> "$RESULTS"
"#;

const ATTACKS: [&str; 9] = [
    "overwrite_receipt",
    "truncate_proof",
    "rename_record",
    "read_other_stdout",
    "delete_other_stdout",
    "kill_other_workload",
    "kill_service",
    "stop_guardian",
    "kill_guardian",
];

/// Runs the attacker (with `flags` before `--`) beside a victim scope and a service; returns
/// the attacker's result lines, its id and run's exit status.
fn attack(home: &Home, flags: &[&str]) -> (Vec<String>, String, Option<i32>) {
    let service = Serving::start(home, &[]);
    let (mut victim, victim_id) =
        home.run_until_ready(&["sh", "-c", "echo ready; echo secret-b; exec sleep 1000"]);
    let run = home.run_dir();
    let victim_log = run.join("logs").join(format!("{victim_id}.stdout"));
    assert!(
        wait_until(DEADLINE, || std::fs::read_to_string(&victim_log)
            .is_ok_and(|s| s.contains("secret-b"))),
        "the victim's output never reached {}",
        victim_log.display()
    );
    let [_, (victim_pid, _)] = witnesses(home, &victim_id);
    let scratch = tempfile::tempdir().expect("scratch");
    let results = scratch.path().join("results");
    let mut args = vec!["run", "--json"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", ATTACK]);
    let out = home
        .command(&args)
        .env("RUN", &run)
        .env("RESULTS", &results)
        .env("VICTIM", &victim_id)
        .env("VICTIM_PID", victim_pid.to_string())
        .env("SERVICE_PID", service.child.id().to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("run the attacker");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let id = doc["id"].as_str().unwrap_or_default().to_owned();
    let _ = home.cli(&["stop", &victim_id]);
    let _ = victim.kill();
    let _ = victim.wait();
    drop(service);
    let lines = std::fs::read_to_string(&results)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    (lines, id, out.status.code())
}

fn outcome<'a>(lines: &'a [String], name: &str) -> &'a str {
    lines
        .iter()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or("missing")
}

#[test]
fn a_same_uid_workload_cannot_reach_evidence_its_guardian_other_scopes_or_the_service() {
    if landlock_abi() < 6 {
        eprintln!("skipped: this kernel has no Landlock ABI 6 (signal scoping)");
        return;
    }
    let home = quiet_home();
    let (lines, id, code) = attack(&home, &[]);
    for name in ATTACKS {
        assert_eq!(
            outcome(&lines, name),
            "refused",
            "{name} was not refused: {lines:#?}"
        );
    }
    assert!(lines.iter().any(|l| l == "done"), "{lines:#?}");
    assert_eq!(code, Some(0), "the attacker's run");
    assert_eq!(home.state(&id), "exited", "{}", home.row(&id));
    let shown = home.json(&["show", "--json", &id]);
    let p = &shown["record"]["protection"];
    assert_eq!(p["fs"], "held", "{shown:#}");
    assert_eq!(p["signals"], "held", "{shown:#}");
}

/// The negative control: with the protection turned off, every attempt succeeds.
#[test]
fn with_protection_off_the_same_attempts_succeed() {
    if landlock_abi() < 6 {
        eprintln!("skipped: this kernel has no Landlock ABI 6 (signal scoping)");
        return;
    }
    let home = quiet_home();
    let (lines, _, _) = attack(&home, &["--protect", "none"]);
    for name in ATTACKS {
        assert_eq!(
            outcome(&lines, name),
            "ok",
            "{name} did not succeed: {lines:#?}"
        );
    }
}

/// Item 5: the opt-out is recorded and shown.
#[test]
fn the_opt_out_is_recorded_and_shown() {
    let home = quiet_home();
    for (ask, fs, signals) in [
        ("none", "opted_out", "opted_out"),
        ("fs", "held", "opted_out"),
        ("signals", "opted_out", "held"),
    ] {
        let out = home.cli(&["run", "--json", "--protect", ask, "--", "true"]);
        assert!(out.status.success(), "{out:?}");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let id = doc["id"].as_str().expect("id");
        let shown = home.json(&["show", "--json", id]);
        let p = &shown["record"]["protection"];
        assert_eq!(p["asked"], ask, "{shown:#}");
        if landlock_abi() >= 6 {
            assert_eq!(p["fs"], fs, "{shown:#}");
            assert_eq!(p["signals"], signals, "{shown:#}");
        }
        let human = home.cli(&["show", id]);
        let human = String::from_utf8_lossy(&human.stdout);
        assert!(human.contains("Protected:"), "{human}");
    }
    let out = home.cli(&["run", "--protect", "most", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// A home beneath a shared temporary directory keeps `mktemp` working there: the launch
/// proceeds without the file-system part, says so, and still scopes signals.
#[test]
fn a_home_under_a_shared_temporary_directory_gets_signal_scoping_only() {
    if landlock_abi() < 6 {
        eprintln!("skipped: this kernel has no Landlock ABI 6 (signal scoping)");
        return;
    }
    let home = Home::new();
    assert!(home.path().starts_with(std::env::temp_dir()));
    let scratch = tempfile::tempdir().expect("scratch");
    let results = scratch.path().join("results");
    let script = r#"f=$(mktemp) && rm "$f" && echo mktemp >> "$RESULTS"; kill -0 "$PPID" 2>/dev/null || echo scoped >> "$RESULTS""#;
    let out = home
        .command(&["run", "--json", "--", "sh", "-c", script])
        .env("RESULTS", &results)
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&results).unwrap_or_default();
    assert_eq!(text, "mktemp\nscoped\n");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let id = doc["id"].as_str().expect("id");
    let shown = home.json(&["show", "--json", id]);
    let p = &shown["record"]["protection"];
    assert_eq!(p["fs"], "shared_tmp", "{shown:#}");
    assert_eq!(p["signals"], "held", "{shown:#}");
    let human = home.cli(&["show", id]);
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.contains("evidence under a shared temporary directory"),
        "{human}"
    );
}
