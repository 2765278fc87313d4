//! SPEC D4: an outer stop recognises a nested guardian by the identity its binary carries, not by
//! its path, file or name. A nested run through another copy of the binaries ends `exited` with
//! its receipt; a process that merely takes the guardian's name is killed like any member.

use refine_tests::cli_support;

use std::path::Path;
use std::process::{Command, Stdio};

use cli_support::{assert_returns, words, Home, DEADLINE};
use refine_tests::bin;

/// Copies the supervisor and the guardian into `dir` through `cp` in a child process: a copy
/// written by this test process would leave a write descriptor that another test's fork could
/// inherit, and the copy's exec would then fail with ETXTBSY.
fn copy_binaries(dir: &Path) -> (String, String) {
    let sup = dir.join("refine-supervisor");
    let guardian = dir.join("refine-guardian");
    for (from, to) in [
        (bin("refine-supervisor"), &sup),
        (bin("refine-guardian"), &guardian),
    ] {
        let st = Command::new("cp")
            .arg(&from)
            .arg(to)
            .stdin(Stdio::null())
            .status()
            .expect("cp");
        assert!(st.success(), "cp {} {}: {st}", from.display(), to.display());
    }
    let s = |p: &Path| p.to_str().expect("utf-8 path").to_owned();
    (s(&sup), s(&guardian))
}

/// Runs `run --json --timeout 2s --kill-after 0 -- ARGV` to its end, then waits until every registration has
/// settled; returns the rows (every one is stopped before this returns, whatever it shows).
fn run_with_timeout(home: &Home, argv: &[&str], expect_rows: usize) -> Vec<serde_json::Value> {
    // `--kill-after 0`: no SIGTERM first, the scope is stopped (quiesce, kill) at the deadline.
    let mut args = words("run --json --timeout 2s --kill-after 0 --");
    args.extend(argv);
    let mut run = home.spawn_cli(&args, Stdio::null());
    assert_returns(&mut run, DEADLINE, "the outer run");
    home.wait_settled(expect_rows)
}

#[test]
fn a_nested_run_through_another_copy_of_the_binaries_ends_with_its_receipt() {
    let home = Home::new();
    let copies = tempfile::tempdir().expect("tempdir");
    let (sup, guardian) = copy_binaries(copies.path());
    // A temporary directory's path has no white space: the line splits into its words.
    let inner = format!(
        "env REFINE_GUARDIAN={guardian} {sup} --home {} --port {} run -- sleep 1000",
        home.path().display(),
        home.port
    );
    let rows = run_with_timeout(&home, &words(&inner), 2);
    assert!(
        rows.iter().all(|r| r["state"] == "exited"),
        "the nested guardian (a copy) was killed: {rows:#?}"
    );
    // Each registration ends with its receipt: `show` names its scope's end.
    for r in &rows {
        let id = r["id"].as_str().expect("id");
        let shown = home.json(&["show", "--json", id]);
        let text = shown.to_string();
        assert!(text.contains("receipt"), "{id}: {shown:#}");
    }
}

/// The negative control: `sh` run through a link named `refine-guardian` looks like a guardian
/// by name (its `comm` is the link's name) but carries no identity: the outer stop kills it.
#[test]
fn a_process_named_like_a_guardian_is_killed() {
    let home = Home::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = dir.path().join("refine-guardian");
    std::os::unix::fs::symlink("/bin/sh", &fake).expect("symlink");
    let pid_file = dir.path().join("fake.pid");
    let script = format!(
        "echo $$ > {}; while :; do sleep 1; done",
        pid_file.display()
    );
    let fake = fake.to_str().expect("utf-8 path");
    let rows = run_with_timeout(&home, &[fake, "-c", &script], 1);
    assert_eq!(rows[0]["state"], "exited", "{rows:#?}");
    let pid = refine_tests::read_pid(&pid_file);
    // Its parent was the outer guardian, which reaped it before writing its receipt.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(
        !stat.contains("(refine-guardia"),
        "the fake guardian is still alive: {stat}"
    );
}
