//! SPEC X12: `run --sandbox read-only | workspace-write[=PATH,...]` and `--network none`
//! (Landlock, this kernel: ABI 7). The workloads report on their stdout, which `run` relays:
//! in a sandbox they may not be able to write anywhere the test reads.

use refine_tests::cli_support;

use std::path::Path;
use std::process::Output;

use cli_support::{describe, words, Home};

fn landlock_abi() -> u32 {
    refine_supervisor::kernel::landlock::abi().unwrap_or(0)
}

/// Skips (with the reason printed) on a kernel without what X12 needs.
fn skip() -> bool {
    if landlock_abi() < 4 {
        eprintln!("skipped: this kernel has no Landlock ABI 4 (TCP rights)");
        return true;
    }
    false
}

/// One line per attempt: `NAME ok`, `NAME EACCES` or `NAME other: MESSAGE`.
const WRITES: &str = r#"
try() { name=$1; f=$2; if err=$( (echo x > "$f") 2>&1 ); then echo "$name ok"; else case $err in *"ermission denied"*) echo "$name EACCES";; *) echo "$name other: $err";; esac; fi; }
try inside "$PWD/inside"
try outside "$OUTSIDE/outside"
try named "$NAMED/named"
try tmpdir "$TMPDIR/t"
try devnull /dev/null
case $TMPDIR in /tmp|/tmp/|"") echo "tmpdir shared: $TMPDIR";; *) echo "tmpdir private";; esac
echo "TMPDIR=$TMPDIR"
"#;

fn outcome<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or("missing")
}

/// `run FLAGS -- sh -c SCRIPT` in `cwd`, with `env`.
fn run_in(home: &Home, cwd: &Path, flags: &[&str], script: &str, env: &[(&str, &Path)]) -> Output {
    let mut args = vec!["run"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    let mut cmd = home.command(&args);
    cmd.current_dir(cwd);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run")
}

/// The sandboxed run succeeded and printed exactly `expected`.
fn assert_printed(out: &Output, expected: &str) {
    assert!(out.status.success(), "{}", describe(&[], out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        expected,
        "{}",
        describe(&[], out)
    );
}

/// The `--json` run succeeded: its document.
fn succeeded_json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", describe(&[], out));
    serde_json::from_slice(&out.stdout).expect("json")
}

#[test]
fn workspace_write_allows_the_workspace_named_paths_and_tmpdir_only() {
    if skip() {
        return;
    }
    let home = Home::new();
    let ws = tempfile::tempdir().expect("workspace");
    let outside = tempfile::tempdir().expect("outside");
    let named = tempfile::tempdir().expect("named");
    let flag = format!("--sandbox=workspace-write={}", named.path().display());
    let out = run_in(
        &home,
        ws.path(),
        &[&flag],
        WRITES,
        &[("OUTSIDE", outside.path()), ("NAMED", named.path())],
    );
    assert!(out.status.success(), "{}", describe(&[], &out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(outcome(&text, "inside"), "ok", "{text}");
    assert_eq!(outcome(&text, "named"), "ok", "{text}");
    assert_eq!(outcome(&text, "tmpdir"), "ok", "{text}");
    assert!(text.contains("tmpdir private"), "{text}");
    assert_eq!(outcome(&text, "devnull"), "ok", "{text}");
    assert_eq!(outcome(&text, "outside"), "EACCES", "{text}");
    let tmpdir = text
        .lines()
        .find_map(|l| l.strip_prefix("TMPDIR="))
        .unwrap_or_else(|| panic!("no TMPDIR line: {text}"));
    assert!(
        !Path::new(tmpdir).exists(),
        "the private TMPDIR {tmpdir} outlived the scope"
    );
    assert!(ws.path().join("inside").exists());
    assert!(!outside.path().join("outside").exists());
    // The negative control: without a sandbox the same write outside succeeds.
    let out = run_in(
        &home,
        ws.path(),
        &[],
        WRITES,
        &[("OUTSIDE", outside.path()), ("NAMED", named.path())],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(outcome(&text, "outside"), "ok", "{text}");
}

#[test]
fn read_only_refuses_writes_to_the_working_directory_but_not_to_its_tmpdir() {
    if skip() {
        return;
    }
    let home = Home::new();
    let ws = tempfile::tempdir().expect("workspace");
    let outside = tempfile::tempdir().expect("outside");
    let out = run_in(
        &home,
        ws.path(),
        &["--sandbox", "read-only"],
        WRITES,
        &[("OUTSIDE", outside.path()), ("NAMED", outside.path())],
    );
    assert!(out.status.success(), "{}", describe(&[], &out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(outcome(&text, "inside"), "EACCES", "{text}");
    assert_eq!(outcome(&text, "outside"), "EACCES", "{text}");
    assert_eq!(outcome(&text, "tmpdir"), "ok", "{text}");
    assert_eq!(outcome(&text, "devnull"), "ok", "{text}");
    assert!(text.contains("tmpdir private"), "{text}");
    // Reads stay everywhere.
    std::fs::write(outside.path().join("r"), "readable\n").expect("write");
    let out = run_in(
        &home,
        ws.path(),
        &["--sandbox", "read-only"],
        r#"cat "$OUTSIDE/r""#,
        &[("OUTSIDE", outside.path())],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "readable\n");
}

/// The record and `show` (human and --json) carry the policy.
#[test]
fn the_sandbox_is_recorded_and_shown() {
    if skip() {
        return;
    }
    let home = Home::new();
    let ws = tempfile::tempdir().expect("workspace");
    let out = run_in(
        &home,
        ws.path(),
        &words("--json --sandbox workspace-write --network none"),
        "true",
        &[],
    );
    let doc = succeeded_json(&out);
    let id = doc["id"].as_str().expect("id");
    let shown = home.json(&["show", "--json", id]);
    let s = &shown["record"]["sandbox"];
    assert_eq!(s["mode"], "workspace_write", "{shown:#}");
    assert_eq!(s["network"], "none", "{shown:#}");
    let ws_canon = std::fs::canonicalize(ws.path()).expect("canonical");
    assert!(
        s["writable"]
            .as_array()
            .is_some_and(|a| a.iter().any(|p| p == ws_canon.to_str().unwrap())),
        "{shown:#}"
    );
    let human = home.show_text(id);
    let line = human
        .lines()
        .find(|l| l.trim_start().starts_with("Sandbox:"))
        .unwrap_or_else(|| panic!("no Sandbox: line in {human}"));
    assert!(line.contains("workspace-write"), "{line}");
    assert!(line.contains("network none"), "{line}");
    // No sandbox asked: shown as none.
    let (_, doc) = home.run_json(&["true"]);
    let id = doc["id"].as_str().expect("id");
    home.assert_show_says(id, "Sandbox:");
}

/// A missing path, an unknown mode: refused in one line before anything runs.
#[test]
fn a_request_that_cannot_be_honoured_is_refused_in_one_line() {
    let home = Home::new();
    let ws = tempfile::tempdir().expect("workspace");
    let marker = ws.path().join("ran");
    let script = format!("touch {}", marker.display());
    let missing = ws.path().join("no-such-dir");
    let flag = format!("--sandbox=workspace-write={}", missing.display());
    let args = ["run", &flag, "--", "sh", "-c", &script];
    let err = home.one_line_error(&args);
    assert!(err.contains("no-such-dir"), "{err}");
    assert!(!marker.exists(), "the workload ran");
    let args = ["run", "--sandbox", "everything", "--", "true"];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
    let args = ["run", "--network", "some", "--", "true"];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
}

/// A connection to a loopback listener the test owns (and a bind): refused with
/// `--network none`, working without.
#[test]
fn network_none_refuses_tcp_connect_and_bind() {
    if skip() {
        return;
    }
    if std::process::Command::new("python3")
        .arg("-V")
        .output()
        .is_err()
    {
        eprintln!("skipped: no python3");
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port().to_string();
    let home = Home::new();
    let ws = tempfile::tempdir().expect("workspace");
    let script = r#"python3 - "$PORT" <<'EOF'
import socket, sys
for name, act in (("connect", lambda s: s.connect(("127.0.0.1", int(sys.argv[1])))), ("bind", lambda s: s.bind(("127.0.0.1", 0)))):
    s = socket.socket()
    try:
        act(s)
        print(name, "ok")
    except PermissionError:
        print(name, "EACCES")
    except OSError as e:
        print(name, "other:", e)
EOF"#;
    let port_dir = Path::new(&port);
    for (flags, expect) in [
        (&["--network", "none"][..], "EACCES"),
        (
            &["--sandbox", "read-only", "--network", "none"][..],
            "EACCES",
        ),
        (&[][..], "ok"),
    ] {
        let out = run_in(&home, ws.path(), flags, script, &[("PORT", port_dir)]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(outcome(&text, "connect"), expect, "{flags:?}: {text}");
        assert_eq!(outcome(&text, "bind"), expect, "{flags:?}: {text}");
    }
    drop(listener);
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[test]
fn git_status_works_inside_workspace_write() {
    if skip() {
        return;
    }
    let home = Home::new();
    let ws = tempfile::tempdir().expect("workspace");
    git(ws.path(), &["init", "-q"]);
    std::fs::write(ws.path().join("a"), "a\n").expect("write");
    git(ws.path(), &["add", "a"]);
    git(ws.path(), &["commit", "-q", "-m", "a"]);
    std::fs::write(ws.path().join("b"), "b\n").expect("write");
    let script = "git status --porcelain && git -c user.name=t -c user.email=t@example.invalid commit -q --allow-empty -m inside && echo committed";
    let out = run_in(
        &home,
        ws.path(),
        &["--sandbox", "workspace-write", "--network", "none"],
        script,
        &[],
    );
    assert_printed(&out, "?? b\ncommitted\n");
}

#[test]
fn cargo_build_of_a_small_crate_works_inside_workspace_write() {
    if skip() {
        return;
    }
    let home = Home::new();
    let ws = tempfile::tempdir().expect("workspace");
    std::fs::create_dir(ws.path().join("src")).expect("src");
    std::fs::write(
        ws.path().join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .expect("manifest");
    std::fs::write(
        ws.path().join("src/main.rs"),
        "fn main() { println!(\"tiny ran\"); }\n",
    )
    .expect("main");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target = ws.path().join("target");
    let script = r#""$CARGO_BIN" build --offline -q && "$CARGO_TARGET_DIR/debug/tiny""#;
    let out = run_in(
        &home,
        ws.path(),
        &["--sandbox", "workspace-write", "--network", "none"],
        script,
        &[
            ("CARGO_BIN", Path::new(&cargo)),
            ("CARGO_TARGET_DIR", &target),
        ],
    );
    assert_printed(&out, "tiny ran\n");
}

/// The same through the API (`run --detach` builds a launch request, as a client does).
#[test]
fn a_detached_launch_carries_the_sandbox() {
    if skip() {
        return;
    }
    let (home, _service) = Home::with_service(&[]);
    let ws = tempfile::tempdir().expect("workspace");
    let outside = tempfile::tempdir().expect("outside");
    let script = r#"echo x > "$OUTSIDE/o"; echo x > "$PWD/i""#;
    let out = run_in(
        &home,
        ws.path(),
        &["--detach", "--json", "--sandbox", "workspace-write"],
        script,
        &[("OUTSIDE", outside.path())],
    );
    let doc = succeeded_json(&out);
    let id = doc["id"].as_str().expect("id");
    home.wait_ended(id);
    assert!(ws.path().join("i").exists());
    assert!(!outside.path().join("o").exists());
    let shown = home.json(&["show", "--json", id]);
    assert_eq!(
        shown["record"]["sandbox"]["mode"], "workspace_write",
        "{shown:#}"
    );
}

/// With X11's file-system part held (a home outside every shared temporary directory), a
/// workspace that contains the home's `run/` still never reaches the evidence: entries beside
/// the way down to `run/` are writable, the receipts and the scopes' output are not.
#[test]
fn a_workspace_above_run_leaves_the_evidence_out_of_reach() {
    if skip() {
        return;
    }
    let base = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sandbox");
    std::fs::create_dir_all(&base).expect("base");
    let home = Home {
        dir: tempfile::tempdir_in(&base).expect("home"),
        port: 7411,
    };
    // A first scope, so that run/ holds records, proofs and logs.
    let (_, doc) = home.run_json(&["sh", "-c", "echo secret"]);
    let first = doc["id"].as_str().expect("id").to_owned();
    let run = home.run_dir();
    std::fs::create_dir(home.path().join("sub")).expect("sub");
    let script = r#"
try() { name=$1; shift; if "$@" 2>/dev/null; then echo "$name ok"; else echo "$name refused"; fi; }
try beside sh -c 'echo x > "$0"' "$PWD/sub/beside"
try in_ancestor sh -c 'echo x > "$0"' "$PWD/new"
try overwrite_receipt sh -c 'printf x 1<> "$0"' "$RUN/proofs/$REFINE_OWNER"
try read_other_stdout grep -q secret "$RUN/logs/$FIRST.stdout"
try write_other_stdout sh -c 'echo x >> "$0"' "$RUN/logs/$FIRST.stdout"
try read_record sh -c 'cat "$0" > /dev/null' "$RUN/registrations/$REFINE_OWNER"
"#;
    let mut cmd = home.command(&[
        "run",
        "--json",
        "--sandbox",
        "workspace-write",
        "--",
        "sh",
        "-c",
        script,
    ]);
    cmd.current_dir(home.path())
        .env("RUN", &run)
        .env("FIRST", &first);
    let out = cmd.output().expect("run");
    assert!(out.status.success(), "{}", describe(&[], &out));
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", describe(&[], &out)));
    let id = doc["id"].as_str().expect("id");
    let logs = home.cli(&["logs", id]);
    let logs = String::from_utf8_lossy(&logs.stdout);
    for (name, expect) in [
        ("beside", "ok"),
        // X11's stated cost: no new entry directly in an ancestor of run/.
        ("in_ancestor", "refused"),
        ("overwrite_receipt", "refused"),
        ("read_other_stdout", "refused"),
        ("write_other_stdout", "refused"),
        ("read_record", "ok"),
    ] {
        assert_eq!(outcome(&logs, name), expect, "{name}: {logs}");
    }
    assert_eq!(home.state(id), "exited", "{}", home.row(id));
    let shown = home.json(&["show", "--json", id]);
    assert_eq!(shown["record"]["protection"]["fs"], "held", "{shown:#}");
    assert_eq!(
        shown["record"]["sandbox"]["mode"], "workspace_write",
        "{shown:#}"
    );
}

/// The facade: `Command::sandbox`, `sandbox_path` and `network_none`.
#[test]
fn the_facade_takes_the_sandbox() {
    use refine_supervisor::store::registry::Stream;
    use refine_supervisor::{Command, SandboxMode, Supervisor};
    if skip() {
        return;
    }
    let home = tempfile::tempdir().expect("home");
    let sup = Supervisor::open(home.path())
        .expect("open")
        .with_guardian_exe(refine_tests::bin("refine-guardian"));
    let ws = tempfile::tempdir().expect("workspace");
    let named = tempfile::tempdir().expect("named");
    let outside = tempfile::tempdir().expect("outside");
    let script = r#"echo x > in && echo x > "$0/n" && { echo x > "$1/o"; } 2>/dev/null; echo done"#;
    let result = sup
        .spawn(
            Command::new("sh")
                .args(["-c", script])
                .arg(named.path())
                .arg(outside.path())
                .current_dir(ws.path())
                .sandbox(SandboxMode::WorkspaceWrite)
                .sandbox_path(named.path())
                .network_none(),
        )
        .expect("spawn")
        .wait()
        .expect("the result");
    let out = String::from_utf8_lossy(result.complete_output(Stream::Stdout).expect("stdout"))
        .into_owned();
    assert_eq!(out, "done\n");
    assert!(ws.path().join("in").exists() && named.path().join("n").exists());
    assert!(!outside.path().join("o").exists());
}
