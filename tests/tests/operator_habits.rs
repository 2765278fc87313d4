//! Issue 44 (O14), the habits an operator brings from coreutils, tini and docker: `run CMD`
//! without `--`, `--timeout 0` as no timeout, a negative duration refused in one clear line,
//! `stop` of several ids with their graces at once, and `gc` past live scopes without lock waits.

use refine_tests::cli_support;

use std::path::Path;
use std::process::{Command, Stdio};

use cli_support::*;
use refine_tests::wait_until;

#[test]
fn run_takes_the_command_without_a_double_dash() {
    let home = Home::new();
    let out = home.cli(&["run", "echo", "hi"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    // From the command's first word on, every word is the command's.
    let out = home.cli(&["run", "echo", "--json", "-x"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "--json -x\n");
    // Options before the command are run's own.
    let (out, doc) = home.run_json(&["true"]);
    assert!(out.status.success(), "{doc}");
    let out = home.cli(&["run", "--json", "true"]);
    assert!(out.status.success(), "{out:?}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["exit_code"], 0, "{doc}");
}

#[test]
fn a_zero_timeout_is_no_timeout_as_for_coreutils() {
    let home = Home::new();
    for flag in ["--timeout", "--idle-timeout"] {
        let out = home.cli(&["run", flag, "0", "--", "sh", "-c", "sleep 0.3; echo done"]);
        assert_eq!(out.status.code(), Some(0), "{flag} 0: {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n", "{flag} 0");
    }
}

#[test]
fn a_negative_duration_is_one_clear_line() {
    let home = Home::new();
    let out = home.cli(&["run", "--timeout", "-1", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("negative"), "{err}");
    assert!(
        !err.contains("-- -1"),
        "clap's tip for a value that looks like a flag: {err}"
    );
}

/// A process killed and reaped on drop (also when an assertion fails).
struct Guard(std::process::Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A scope that notes its SIGTERM in `marker`, survives it, and exits 0 once a line is written
/// to `fifo`.
fn term_noter(home: &Home, marker: &Path, fifo: &Path) -> (std::process::Child, String) {
    let made = Command::new("mkfifo").arg(fifo).status().expect("mkfifo");
    assert!(made.success());
    let script = format!(
        "trap 'echo term > {m}' TERM; echo ready; while ! read x < {f}; do [ -p {f} ] || exit 1; done; exit 0",
        m = marker.display(),
        f = fifo.display()
    );
    home.run_until_ready_with(home.command(&[]), &["sh", "-c", &script])
}

#[test]
fn stop_of_several_ids_runs_their_graces_at_once() {
    let home = Home::new();
    let dir = home.path().to_owned();
    let (ma, fa) = (dir.join("a.term"), dir.join("a.fifo"));
    let (mb, fb) = (dir.join("b.term"), dir.join("b.fifo"));
    let (run_a, a) = term_noter(&home, &ma, &fa);
    let mut run_a = Guard(run_a);
    let (run_b, b) = term_noter(&home, &mb, &fb);
    let mut run_b = Guard(run_b);
    // A grace longer than the test waits: one after the other, b's SIGTERM would come a
    // minute after a's.
    let mut stop = Guard(
        home.command(&["stop", "-t", "60", &a, &b])
            .stdout(Stdio::piped())
            .spawn()
            .expect("stop"),
    );
    let both = wait_until(DEADLINE, || ma.exists() && mb.exists());
    assert!(
        both,
        "both scopes got SIGTERM within {DEADLINE:?}: a {}, b {}",
        ma.exists(),
        mb.exists()
    );
    // Both end by themselves within their graces.
    std::fs::write(&fa, b"x\n").expect("fifo a");
    std::fs::write(&fb, b"x\n").expect("fifo b");
    let st = wait_bounded(&mut stop.0, DEADLINE, "stop a b");
    let mut text = String::new();
    std::io::Read::read_to_string(&mut stop.0.stdout.take().expect("stdout"), &mut text)
        .expect("read");
    assert!(st.success(), "stop: {st}: {text}");
    assert_eq!(text.lines().count(), 2, "one line per id: {text}");
    for r in [&mut run_a, &mut run_b] {
        let st = wait_bounded(&mut r.0, DEADLINE, "run");
        assert!(st.success(), "{st}");
    }
}

/// Issue 44 item 4: `gc` sees a live scope without waiting on its lock (its launcher holds it
/// for the scope's life): retention and forgetting keep it as `live` at once; before, each
/// waited its 200 ms lock bound and said "lock busy".
#[test]
fn gc_keeps_live_scopes_without_waiting_on_their_locks() {
    let home = Home::new();
    let mut runs = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (run, id) = home.run_until_ready_with(
            home.command(&[]),
            &["sh", "-c", "echo ready; exec sleep 300"],
        );
        runs.push(Guard(run));
        ids.push(id);
    }
    let started = std::time::Instant::now();
    let doc = home.json(&["gc", "--older-than", "0s", "--forget-after", "0s", "--json"]);
    eprintln!("gc over 3 live scopes: {:?}", started.elapsed());
    let text = doc.to_string();
    assert!(
        !text.contains("lock busy"),
        "gc waited on a live scope's lock: {doc}"
    );
    for id in &ids {
        assert!(text.contains(id.as_str()), "{id} not reported: {doc}");
        assert_eq!(home.state(id), "live", "gc touched a live scope");
    }
}

/// `CMD` under `unshare --time --boottime 86400 --fork` (a time namespace whose boot time runs a
/// day ahead): `/proc/PID/stat` start times read there are a day later than outside.
fn in_time_namespace(home: &Home, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new("unshare");
    cmd.args(["--time", "--boottime", "86400", "--fork"])
        .arg(refine_tests::bin("refine-supervisor"))
        .arg("--home")
        .arg(home.path())
        .args(args)
        .stdin(Stdio::null());
    output_of(cmd)
}

/// Issue 44: views from inside a time namespace (and launches made there, viewed from outside)
/// agree with the initial namespace: a start time is compared in the initial namespace's terms
/// (`/proc/self/timens_offsets`), so no live scope reads `unverified` for the reader's offset.
#[test]
fn a_time_namespace_does_not_make_live_scopes_unverified() {
    if skip_unless_root("unshare --time needs root") {
        return;
    }
    let probe = output_of({
        let mut c = Command::new("unshare");
        c.args(["--time", "--boottime", "86400", "--fork", "true"]);
        c
    });
    if !probe.status.success() {
        println!(
            "skipped: no time namespaces here ({})",
            String::from_utf8_lossy(&probe.stderr).trim()
        );
        return;
    }
    let home = Home::new();
    // A scope launched outside, viewed inside.
    let outside = run_returning(&home, &["sh", "-c", "sleep 600 >/dev/null 2>&1 &"]).1;
    let row = |out: &std::process::Output, id: &str| {
        let rows = json_of(&out.stdout);
        rows["registrations"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["id"] == id))
            .map(|r| r["state"].clone())
    };
    let inside = in_time_namespace(&home, &["ps", "--all", "--json"]);
    assert_eq!(
        row(&inside, &outside),
        Some(serde_json::json!("live")),
        "{}",
        describe(&["ps"], &inside)
    );
    // A scope launched inside, viewed outside.
    let launched = in_time_namespace(
        &home,
        &words("run --json -- sh -c 'sleep 600 >/dev/null 2>&1 &'"),
    );
    let id = json_of(&launched.stdout)["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let outside_view = home.cli(&["ps", "--all", "--json"]);
    assert_eq!(
        row(&outside_view, &id),
        Some(serde_json::json!("live")),
        "{}",
        describe(&["ps"], &outside_view)
    );
    for id in [&outside, &id] {
        let out = home.cli(&["stop", id]);
        assert!(out.status.success(), "{}", describe(&["stop", id], &out));
    }
}
