//! T7 grace and W7 whole-scope deadlines, through the CLI as an operator types them:
//! `stop ID --grace DUR [--signal SIG]` (docker stop -t), `run --timeout/--idle-timeout
//! --kill-after DUR` (coreutils `timeout -k`), the completion deadline of a scope that outlives
//! its workload, and the `quality` residue stop that must retry, not hang, and say so.
//!
//! Each polite-signal test has its negative control: without a grace the workload's trap never
//! runs (it dies of SIGKILL).

use refine_tests::cli_support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use cli_support::*;
use refine_tests::wait_until;

/// A workload that prints `ready`, then waits; on `sig` it prints `bye` and exits 0.
fn trapper(sig: &str) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!("trap 'echo bye; exit 0' {sig}; echo ready; sleep 600 & wait"),
    ]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn stdout_of(home: &Home, id: &str) -> String {
    std::fs::read_to_string(home.run_dir().join("logs").join(format!("{id}.stdout")))
        .unwrap_or_default()
}

/// The run process's exit, bounded.
fn wait_child(child: &mut std::process::Child) -> std::process::ExitStatus {
    let mut status = None;
    assert!(
        wait_until(DEADLINE, || {
            status = child.try_wait().expect("try_wait");
            status.is_some()
        }),
        "run did not end"
    );
    status.expect("status")
}

#[test]
fn stop_with_grace_lets_the_workload_exit_by_itself() {
    let home = Home::new();
    let argv = trapper("TERM");
    let (mut child, id) = home.run_until_ready(&strs(&argv));
    let args = ["stop", &id, "--grace", "20s", "--json"];
    let t = Instant::now();
    let out = home.cli_ok(&args);
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "the grace was waited out"
    );
    let doc = parse(&args, &out);
    assert_eq!(doc["state"], "exited", "{doc}");
    // The workload's own status: the trap ran and exited 0.
    let status = wait_child(&mut child);
    assert_eq!(status.code(), Some(0), "run's status");
    assert!(stdout_of(&home, &id).contains("bye"));
    let row = home.row(&id);
    assert_eq!(row["exit_code"], 0, "{row}");
    assert_eq!(row["outcome"], "stopped", "{row}");
}

#[test]
fn stop_without_grace_kills_negative_control() {
    let home = Home::new();
    let argv = trapper("TERM");
    let (mut child, id) = home.run_until_ready(&strs(&argv));
    let args = ["stop", &id, "--json"];
    home.cli_ok(&args);
    let status = wait_child(&mut child);
    assert_eq!(status.code(), Some(137), "SIGKILL without a grace");
    assert!(!stdout_of(&home, &id).contains("bye"));
}

#[test]
fn stop_grace_with_a_chosen_signal() {
    let home = Home::new();
    let argv = trapper("INT");
    let (mut child, id) = home.run_until_ready(&strs(&argv));
    let args = ["stop", &id, "--grace", "20s", "--signal", "INT", "--json"];
    home.cli_ok(&args);
    assert_eq!(wait_child(&mut child).code(), Some(0));
    assert!(stdout_of(&home, &id).contains("bye"));
    // A bad signal name is a usage error (clap's message, naming it), and nothing is stopped.
    let (mut other, id2) = home.run_until_ready(&["sh", "-c", "echo ready; exec sleep 600"]);
    let bad = ["stop", &id2, "--grace", "1s", "--signal", "NOPE"];
    let out = home.cli(&bad);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&bad, &out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"NOPE\" is not a signal"));
    assert_eq!(home.state(&id2), "live");
    let _ = home.cli(&["stop", &id2]);
    wait_child(&mut other);
}

#[test]
fn grace_escalates_to_the_kill_for_a_term_ignorer() {
    let home = Home::new();
    let (mut child, id) = home.run_until_ready(&[env!("CARGO_BIN_EXE_term-ignorer")]);
    let args = ["stop", &id, "--grace", "500ms", "--json"];
    let t = Instant::now();
    let out = home.cli_ok(&args);
    assert!(t.elapsed() >= Duration::from_millis(500));
    assert_eq!(parse(&args, &out)["state"], "exited");
    assert_eq!(wait_child(&mut child).code(), Some(137));
    assert!(
        stdout_of(&home, &id).contains("term"),
        "the polite signal came first"
    );
}

/// The grace wait does not hold the runtime's stop fence: another stop finishes while the first
/// one is still waiting out its grace.
#[test]
fn the_grace_wait_does_not_hold_the_stop_fence() {
    let home = Home::new();
    let (mut ignorer, slow) = home.run_until_ready(&[env!("CARGO_BIN_EXE_term-ignorer")]);
    let (mut other, quick) = home.run_until_ready(&["sh", "-c", "echo ready; exec sleep 600"]);
    let mut graceful = home
        .command(&["stop", &slow, "--grace", "20s", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn stop");
    // Wait until the polite signal was delivered (the ignorer prints `term`).
    assert!(wait_until(DEADLINE, || stdout_of(&home, &slow).contains("term")));
    let args = ["stop", &quick, "--json"];
    home.cli_ok(&args);
    assert_eq!(
        graceful.try_wait().expect("try_wait"),
        None,
        "the graceful stop is still in its grace"
    );
    wait_child(&mut other);
    let _ = graceful.kill();
    let _ = graceful.wait();
    let _ = home.cli(&["stop", &slow]);
    wait_child(&mut ignorer);
}

#[test]
fn kill_after_gives_a_deadline_a_grace_and_keeps_its_outcome() {
    let home = Home::new();
    let argv = trapper("TERM");
    let mut args = words("run --json --timeout 1s --kill-after 20s --");
    args.extend(strs(&argv));
    let t = Instant::now();
    let (out, doc) = home.cli_doc(&args);
    assert!(t.elapsed() < Duration::from_secs(15), "{doc}");
    assert_eq!(doc["outcome"], "timed_out", "{doc}");
    assert_eq!(doc["exit_code"], 0, "died of the polite signal: {doc}");
    // As coreutils `timeout`: a deadline that ended the workload politely exits 124, whatever
    // the workload's own status (kept in the document).
    assert_eq!(out.status.code(), Some(124), "{doc}");

    // The kill after the grace: still `timed_out`.
    let ignorer = env!("CARGO_BIN_EXE_term-ignorer");
    let args = [
        "run",
        "--json",
        "--idle-timeout",
        "1s",
        "--kill-after",
        "300ms",
        "--",
        ignorer,
    ];
    let (out, doc) = home.cli_doc(&args);
    assert_eq!(doc["outcome"], "idle_timeout", "{doc}");
    assert_eq!(doc["signal"], 9, "{doc}");
    // The kill, as `timeout -k`: 128 + 9.
    assert_eq!(out.status.code(), Some(137), "{doc}");
}

#[test]
fn a_deadline_with_kill_after_0_kills_negative_control() {
    let home = Home::new();
    let argv = trapper("TERM");
    // `--kill-after 0`: no grace (a deadline alone has 5 s, W11).
    let mut args = words("run --json --timeout 1s --kill-after 0 --");
    args.extend(strs(&argv));
    let (out, doc) = home.cli_doc(&args);
    assert_eq!(doc["outcome"], "timed_out", "{doc}");
    assert_eq!(doc["signal"], 9, "{doc}");
    assert_eq!(out.status.code(), Some(137), "{doc}");
}

/// W7: the completion deadline holds for the whole scope, also after the workload has exited.
#[test]
fn the_completion_deadline_ends_a_kept_residue_of_a_foreground_run() {
    let home = Home::new();
    let args = words("run --json --timeout 2s -- sh -c 'sleep 1000 & echo $!; exit 0'");
    let (_, doc) = home.cli_doc(&args);
    assert_eq!(doc["exit_code"], 0, "{doc}");
    let id = doc["id"].as_str().expect("id").to_owned();
    // Whoever enforces it, the residue is gone and proven gone soon after the deadline.
    home.wait_state(&id, "exited");
    let row = home.row(&id);
    assert_eq!(row["state"], "exited", "{row}");
}

/// The negative control: without a deadline the residue is kept (S9).
#[test]
fn without_a_deadline_the_residue_is_kept_negative_control() {
    let home = Home::new();
    let args = ["run", "--json", "--", "sh", "-c", "sleep 1000 & exit 0"];
    let (_, doc) = home.cli_doc(&args);
    let id = doc["id"].as_str().expect("id").to_owned();
    assert_eq!(home.state(&id), "live");
    let _ = home.cli(&["stop", &id]);
    home.wait_state(&id, "exited");
}

/// The `quality` residue stop retries while the fence is busy, and succeeds once it is free.
#[test]
fn the_quality_residue_stop_retries_while_the_fence_is_busy() {
    let home = Home::new();
    // Make the runtime, then hold its stop fence for a while.
    let _ = home.cli(&["run", "--", "true"]);
    let fence = home.hold_stop_fence();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3));
        drop(fence);
    });
    let args = words("run --json --kind quality -- sh -c 'sleep 1000 & exit 0'");
    let (_, doc) = home.cli_doc(&args);
    release.join().expect("release");
    assert_eq!(doc["scope"], "exited", "{doc}");
    let id = doc["id"].as_str().expect("id");
    assert_eq!(home.state(id), "exited");
}

/// When the fence stays busy past the budget, the failure is logged, shown in `ps`/`show`, and
/// the registration lock is not held forever.
#[test]
fn a_failed_residue_stop_is_shown_and_does_not_hang() {
    let home = Home::new();
    let _ = home.cli(&["run", "--", "true"]);
    let fence = home.hold_stop_fence();
    let args = words("run --json --kind quality -- sh -c 'sleep 1000 & exit 0'");
    let t = Instant::now();
    let out = home.cli(&args);
    assert!(t.elapsed() < Duration::from_secs(40), "run hung");
    let doc = parse(&args, &out);
    let id = doc["id"].as_str().expect("id").to_owned();
    assert!(doc["stop_failure"].is_string(), "{doc}");
    let row = home.row(&id);
    assert_eq!(row["state"], "live", "{row}");
    assert_eq!(row["outcome"], "stop_failed", "{row}");
    assert_eq!(row["reason"]["kind"], "stop_failed", "{row}");
    assert!(
        row["reason"]["error"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{row}"
    );
    let show = show(&home, &id);
    assert_eq!(show["result"]["outcome"], "stop_failed", "{show}");
    drop(fence);
    // The lock is free: an operator's stop (or recovery) can end it.
    let out = home.cli(&["stop", &id]);
    assert!(out.status.success(), "{}", describe(&["stop"], &out));
    home.wait_state(&id, "exited");
}

/// A foreground `run` that holds a residue until its completion deadline still answers SIGINT:
/// the residue is ended at once through the shared stop, and `run` exits.
#[test]
fn sigint_ends_the_residue_a_foreground_run_holds_for_its_deadline() {
    let home = Home::new();
    let mut cmd = home.command(&words(
        "run --timeout 120s -- sh -c 'sleep 1000 & echo ready; exit 0'",
    ));
    cmd.stderr(Stdio::null());
    let (mut child, line) = refine_tests::spawn_first_line(&mut cmd, "run");
    assert_eq!(line.trim(), "ready");
    let id = home.ps()[0]["id"].as_str().expect("id").to_owned();
    // The workload has exited and `run` holds the residue (the registration stays live).
    assert!(wait_until(DEADLINE, || home.row(&id)["outcome"] == "completed"));
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    let fd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).expect("pidfd");
    rustix::process::pidfd_send_signal(&fd, rustix::process::Signal::INT).expect("SIGINT");
    let t = Instant::now();
    let status = wait_child(&mut child);
    assert!(t.elapsed() < Duration::from_secs(25), "{:?}", t.elapsed());
    assert_eq!(status.code(), Some(0), "the workload's own status");
    home.wait_state(&id, "exited");
}
