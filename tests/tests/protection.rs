//! SPEC X11: a workload running as the supervisor's own user cannot reach its evidence, another
//! scope's output, its guardian, another scope or the service (Landlock, this kernel: ABI 7).
//!
//! The homes here live under the target directory, not under `/tmp`: a home beneath a shared
//! temporary directory gets no file-system part (see supervisor/README.md's threat model). The
//! workloads' own scratch files are in a `/tmp` directory, outside the home.

use refine_tests::cli_support;

use std::path::PathBuf;
use std::process::Stdio;

use cli_support::{witnesses, words, Home, Serving, DEADLINE};
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
try connect_service python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "$RUN/supervisor.sock"
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
    attack_planted(home, flags, |_, _| {})
}

/// [`attack`], with `plant(run, victim_id)` run once the victim's output is there and before
/// the attacker launches.
fn attack_planted(
    home: &Home,
    flags: &[&str],
    plant: impl FnOnce(&std::path::Path, &str),
) -> (Vec<String>, String, Option<i32>) {
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
    plant(&run, &victim_id);
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

fn which(tool: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether a case must skip because this kernel has no Landlock ABI 6 (signal scoping): then
/// it prints the reason.
fn skip_without_abi_6() -> bool {
    if landlock_abi() >= 6 {
        return false;
    }
    eprintln!("skipped: this kernel has no Landlock ABI 6 (signal scoping)");
    true
}

/// Every one of the [`ATTACKS`] reports `refused`.
fn assert_all_refused(lines: &[String]) {
    for name in ATTACKS {
        assert_eq!(
            outcome(lines, name),
            "refused",
            "{name} was not refused: {lines:#?}"
        );
    }
}

fn outcome<'a>(lines: &'a [String], name: &str) -> &'a str {
    lines
        .iter()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or("missing")
}

#[test]
fn a_same_uid_workload_cannot_reach_evidence_its_guardian_other_scopes_or_the_service() {
    if skip_without_abi_6() {
        return;
    }
    let home = quiet_home();
    let (lines, id, code) = attack(&home, &[]);
    assert_all_refused(&lines);
    assert!(lines.iter().any(|l| l == "done"), "{lines:#?}");
    // The remaining gap the threat model states: Landlock up to ABI 7 does not mediate
    // `connect` to a pathname unix socket (a later ABI's RESOLVE_UNIX right would).
    if landlock_abi() <= 7 && which("python3") {
        assert_eq!(outcome(&lines, "connect_service"), "ok", "{lines:#?}");
    }
    assert_eq!(code, Some(0), "the attacker's run");
    assert_eq!(home.state(&id), "exited", "{}", home.row(&id));
    let shown = home.json(&["show", "--json", &id]);
    let p = &shown["record"]["protection"];
    assert_eq!(p["fs"], "held", "{shown:#}");
    assert_eq!(p["signals"], "held", "{shown:#}");
}

/// Entries beside the way down to `run/` get rules: one that leads back into `run/` (a symbolic
/// link to it, a hard link to an artifact) must not carry those rights onto the evidence.
#[test]
fn a_link_planted_beside_run_does_not_open_the_evidence() {
    if skip_without_abi_6() {
        return;
    }
    let home = quiet_home();
    let (lines, id, code) = attack_planted(&home, &[], |run, victim| {
        let top = home.dir.path();
        std::os::unix::fs::symlink(run, top.join("run-link")).expect("a symbolic link to run/");
        std::fs::hard_link(
            run.join("logs").join(format!("{victim}.stdout")),
            top.join("victim-stdout"),
        )
        .expect("a hard link to the victim's stdout");
    });
    assert_all_refused(&lines);
    assert_eq!(code, Some(0), "the attacker's run");
    assert_eq!(home.state(&id), "exited", "{}", home.row(&id));
}

/// The negative control: with the protection turned off, every attempt succeeds.
#[test]
fn with_protection_off_the_same_attempts_succeed() {
    if skip_without_abi_6() {
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
        home.assert_show_says(id, "Protected:");
    }
    let out = home.cli(&["run", "--protect", "most", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// A home beneath a shared temporary directory keeps `mktemp` working there: the launch
/// proceeds without the file-system part, says so, and still scopes signals.
#[test]
fn a_home_under_a_shared_temporary_directory_gets_signal_scoping_only() {
    if skip_without_abi_6() {
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
    home.assert_show_says(id, "evidence under a shared temporary directory");
}

/// The attempts of a nested workload on its own evidence, one line each in `results`.
const INNER_ATTACK: &str = r#"
try() { name=$1; shift; if "$@" 2>/dev/null; then echo "$name ok"; else echo "$name refused"; fi >> "$RESULTS"; }
P="$RUN/proofs/$REFINE_OWNER"
try overwrite_receipt sh -c 'printf x 1<> "$0"' "$P"
try truncate_proof truncate -s 0 "$P"
try rename_record mv "$RUN/registrations/$REFINE_OWNER" "$RUN/registrations/moved"
try kill_guardian kill -KILL "$PPID"
echo done >> "$RESULTS"
"#;

/// A nested `run` inside a protected workload keeps working: its evidence lives in the home
/// the outer launch names in `REFINE_HOME` (`HOME/nested/ID`), and its own workload is held
/// away from it by a domain of its own, stacked on the outer one.
#[test]
fn a_nested_run_keeps_its_own_evidence_out_of_its_workloads_reach() {
    if skip_without_abi_6() {
        return;
    }
    let home = quiet_home();
    let scratch = tempfile::tempdir().expect("scratch");
    let results = scratch.path().join("results");
    let inner_doc = scratch.path().join("inner.json");
    let outer = r#"export RUN="$REFINE_HOME/run/7411"; exec "$SUP" run --json -- sh -c "$INNER" > "$INNER_DOC""#;
    let out = home
        .command(&["run", "--json", "--", "sh", "-c", outer])
        .env("SUP", refine_tests::bin("refine-supervisor"))
        .env("INNER", INNER_ATTACK)
        .env("INNER_DOC", &inner_doc)
        .env("RESULTS", &results)
        .env_remove("REFINE_HOME")
        .output()
        .expect("run");
    let lines: Vec<String> = std::fs::read_to_string(&results)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(out.status.success(), "{out:?}; {lines:#?}");
    for name in words("overwrite_receipt truncate_proof rename_record kill_guardian") {
        assert_eq!(outcome(&lines, name), "refused", "{name}: {lines:#?}");
    }
    let outer_doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("outer json");
    let outer_id = outer_doc["id"].as_str().expect("outer id");
    assert_eq!(home.state(outer_id), "exited");
    let inner: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&inner_doc).expect("inner doc")).expect("json");
    let inner_id = inner["id"].as_str().expect("inner id");
    let nested = home.path().join("nested").join(outer_id);
    let shown = home
        .command(&["show", "--json", inner_id])
        .arg("--home")
        .arg(&nested)
        .output()
        .expect("show");
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("show json");
    assert_eq!(shown["state"], "exited", "{shown:#}");
    assert_eq!(shown["record"]["protection"]["fs"], "held", "{shown:#}");
}

/// `NoNewPrivs:` of the workload, as its own /proc/self/status says.
fn no_new_privs_of(home: &std::path::Path, wrap: &[&str]) -> String {
    let mut cmd = std::process::Command::new(wrap.first().copied().unwrap_or("env"));
    cmd.args(wrap.iter().skip(1))
        .arg(refine_tests::bin("refine-supervisor"))
        .arg("--home")
        .arg(home)
        .args(["run", "--", "grep", "NoNewPrivs", "/proc/self/status"])
        .stdin(Stdio::null());
    let out = cmd.output().expect("run");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned()
}

/// Item 4: a root supervisor applies the domain with its own CAP_SYS_ADMIN and leaves setuid
/// programs their privilege; an unprivileged one sets no_new_privs, as Landlock requires.
#[test]
fn no_new_privs_is_set_by_an_unprivileged_supervisor_only() {
    if skip_without_abi_6() {
        return;
    }
    if refine_tests::skip_unless_root("needs root (to run the supervisor as nobody too)") {
        return;
    }
    if refine_tests::skip_without("setpriv", "no setpriv") {
        return;
    }
    let root_home = quiet_home();
    assert_eq!(no_new_privs_of(root_home.path(), &["env"]), "0");
    // nobody's own home (beneath /tmp: the scoping alone makes a domain).
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("nobody-home");
    std::fs::create_dir(&home).expect("home");
    std::os::unix::fs::chown(&home, Some(65534), Some(65534)).expect("chown");
    std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).expect("chown");
    assert_eq!(
        no_new_privs_of(
            &home,
            &words("setpriv --reuid=65534 --regid=65534 --clear-groups --")
        ),
        "1"
    );
}
