//! X10: once the scope's receipt is in, nothing of the scope is left to write, so `run` is no
//! longer held by its output streams.
//! - A stream a process outside the scope still holds open (here: this test, which opened the
//!   workload's stdout through `/proc/PID/fd/1`, as an `SCM_RIGHTS` holder would hold it) is
//!   drained like the first drain, then closed and marked incomplete ("held open outside the
//!   scope"): `run` exits with the workload's status, and a late write from the holder fails
//!   (`EPIPE`) instead of landing in the ended scope's artifact.
//! - What is left is a slow reader's pace: a `SIGTERM` that comes after the workload ended
//!   ends `run` at once with 143, whatever its reader does.
//!
//! Both stop paths (the cgroup and `REFINE_CGROUP=off`) are driven: the capture does not
//! depend on them, the proof that precedes it does.

use refine_tests::cli_support;

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use cli_support::{collect, exited_within, json_of, pidfd, signal, wait_bounded, Home, DEADLINE};
use refine_tests::wait_until;

/// `sh` script for the workload: writes its pid, waits for one line on the fifo `go`, prints
/// `before` and exits 0.
fn held_script(home: &Home) -> String {
    format!(
        "echo $$ > '{d}/pid'; read x < '{d}/go'; echo before; exit 0",
        d = home.path().display()
    )
}

fn pid_in(home: &Home) -> u32 {
    let file = home.path().join("pid");
    let mut pid = None;
    let ok = wait_until(DEADLINE, || {
        pid = std::fs::read_to_string(&file)
            .ok()
            .and_then(|s| s.trim().parse().ok());
        pid.is_some()
    });
    assert!(ok, "the workload never wrote its pid");
    pid.expect("pid")
}

fn mkfifo(path: &std::path::Path) {
    let st = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(st.success(), "mkfifo {}", path.display());
}

fn outside_holder_is_closed_out(cgroup: bool) {
    let home = Home::new();
    mkfifo(&home.path().join("go"));
    let mut base = home.command(&[]);
    if !cgroup {
        base.env("REFINE_CGROUP", "off");
    }
    let script = held_script(&home);
    let mut run = base
        .args(["run", "--json", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn run");
    let doc = collect(run.stdout.take().expect("stdout"));
    let pid = pid_in(&home);
    // The outside holder: a second write end of the workload's stdout, held by this process.
    let mut held = OpenOptions::new()
        .write(true)
        .open(format!("/proc/{pid}/fd/1"))
        .expect("open the workload's stdout from outside");
    // Let the workload write its last line and exit.
    let mut go = OpenOptions::new()
        .write(true)
        .open(home.path().join("go"))
        .expect("open the fifo");
    go.write_all(b"x\n").expect("write the fifo");
    drop(go);
    // The old code read until end of file: until this holder closes, which it does not.
    let st = wait_bounded(
        &mut run,
        Duration::from_secs(20),
        "run with its stdout held outside the scope",
    );
    assert_eq!(st.code(), Some(0), "run exits with the workload's status");
    let doc = json_of(&doc.join().expect("collect"));
    assert_eq!(doc["scope"], "exited", "{doc}");
    assert_eq!(doc["stdout"]["complete"], false, "{doc}");
    assert_eq!(
        doc["stdout"]["end"],
        serde_json::json!({"kind": "incomplete", "why": {"kind": "held_outside"}}),
        "{doc}"
    );
    // The read end is closed: the holder's late line fails and lands nowhere.
    let late = held.write_all(b"late line from outside\n");
    assert_eq!(
        late.as_ref().map_err(|e| e.raw_os_error()),
        Err(Some(libc::EPIPE)),
        "a late write into the ended scope's stream"
    );
    let artifact = doc["stdout"]["path"].as_str().expect("artifact path");
    let mut text = String::new();
    std::fs::File::open(artifact)
        .expect("artifact")
        .read_to_string(&mut text)
        .expect("read artifact");
    assert_eq!(
        text, "before\n",
        "the artifact holds the scope's output only"
    );
    // The capture receipt says why, for `show` and for later readers.
    let id = doc["id"].as_str().expect("id");
    home.assert_show_says(id, "held open outside the scope");
}

#[test]
fn stream_held_outside_is_closed_after_the_receipt() {
    outside_holder_is_closed_out(true);
}

#[test]
fn stream_held_outside_is_closed_after_the_receipt_proc_path() {
    outside_holder_is_closed_out(false);
}

/// A reader that reads nothing: the workload's 512 KiB cannot all reach it, `run` stays to
/// deliver them, and a `SIGTERM` once the workload has ended ends `run` with 143.
#[test]
fn sigterm_ends_delivery_to_a_slow_reader() {
    let home = Home::new();
    let done = home.path().join("done");
    let script = format!("head -c 524288 /dev/zero; : > '{}'", done.display());
    let mut run = home.spawn_sh(&script, Stdio::piped());
    // The reader: it holds the pipe and reads nothing until run has ended.
    let reader = run.stdout.take().expect("stdout");
    assert!(
        wait_until(DEADLINE, || done.exists()),
        "the workload never finished its writes"
    );
    let id = home.ps()[0]["id"].as_str().expect("id").to_owned();
    home.wait_state(&id, "exited");
    // One request may still meet the engine before it has taken the workload's exit (then it
    // is the workload's); a second one is `run`'s own whatever capture is doing.
    let fd = pidfd(run.id());
    let mut sent = 0;
    loop {
        signal(&run, libc::SIGTERM);
        sent += 1;
        if exited_within(&fd, Duration::from_secs(2)) {
            break;
        }
        assert!(sent < 10, "run still delivering after {sent} SIGTERMs");
    }
    let st = wait_bounded(&mut run, DEADLINE, "run after SIGTERM");
    assert_eq!(st.code(), Some(143), "W9's status for SIGTERM");
    drop(reader);
}
