//! Job control under `run`, as the peers' suites check it (dumb-init's `shell_background` and
//! `child_processes` tests, issue 22 item 7), written for this project: `SIGTSTP`/`SIGTTIN`/
//! `SIGTTOU` to `run` reach the workload's whole process group before `run` stops itself, `fg`
//! continues the whole group, and while `run` is stopped the output of whatever still runs
//! keeps reaching `run`'s reader, as it would reach the terminal without the wrapper.

use refine_tests::cli_support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;

use cli_support::*;
use refine_tests::wait_until;

/// The state letter of `pid` in `/proc/PID/stat` (`?` once it is gone).
fn proc_state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].trim_start().chars().next())
        .unwrap_or('?')
}

/// `run -- signal-printer` with its stdout read line by line on a thread of its own, so that a
/// line can be waited for with a bound while `run` is stopped.
fn printer_run(home: &Home) -> (Child, mpsc::Receiver<String>) {
    let printer = refine_tests::bin("signal-printer");
    let mut child = home.spawn_cli(&["run", "--", printer.to_str().unwrap()], Stdio::piped());
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

fn next_line(rx: &mpsc::Receiver<String>, what: &str) -> String {
    rx.recv_timeout(DEADLINE)
        .unwrap_or_else(|e| panic!("{what}: no line within {DEADLINE:?} ({e})"))
}

/// dumb-init's `test_shell_background_support_without_setsid`, for `run`: a workload that takes
/// `SIGTSTP` itself (and so keeps running) is told of it, `run` stops, and what the workload
/// writes meanwhile reaches `run`'s reader while `run` is stopped; `SIGCONT` continues `run`
/// and is forwarded in turn. Each job-control stop in turn.
#[test]
fn output_keeps_flowing_while_run_is_stopped() {
    let home = Home::new();
    let (mut child, rx) = printer_run(&home);
    assert_eq!(next_line(&rx, "the printer's start"), "ready");
    let run = child.id();
    let id = home.ps()[0]["id"].as_str().expect("id").to_owned();
    for sig in [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU] {
        signal(&child, sig);
        assert!(
            wait_until(DEADLINE, || proc_state(run) == 'T'),
            "run after signal {sig}: state {}",
            proc_state(run)
        );
        // Read while `run` is stopped (it stays stopped: nothing continues it before the line).
        let line = next_line(
            &rx,
            &format!("the printer's line for signal {sig}, run stopped"),
        );
        assert_eq!(line, sig.to_string());
        assert_eq!(proc_state(run), 'T', "run is still stopped");
        signal(&child, libc::SIGCONT);
        assert_eq!(
            next_line(&rx, "the forwarded SIGCONT"),
            libc::SIGCONT.to_string()
        );
        assert!(
            wait_until(DEADLINE, || proc_state(run) != 'T'),
            "run after SIGCONT: state {}",
            proc_state(run)
        );
    }
    // Output after the stops still flows, and the end is as ever (W9: the second SIGINT).
    signal(&child, libc::SIGUSR1);
    assert_eq!(
        next_line(&rx, "a signal after the stops"),
        libc::SIGUSR1.to_string()
    );
    signal(&child, libc::SIGINT);
    assert_eq!(next_line(&rx, "the first SIGINT"), libc::SIGINT.to_string());
    signal(&child, libc::SIGINT);
    let st = wait_bounded(&mut child, DEADLINE, "run after the second SIGINT");
    assert_eq!(st.code(), Some(137), "{st}");
    // What the stand-in carried while `run` was stopped is in the artifact too, in order.
    let logs = home.cli(&["logs", &id]);
    let want: String = ["ready", "20", "18", "21", "18", "22", "18", "10", "2"]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(String::from_utf8_lossy(&logs.stdout), want, "the artifact");
}

/// Ctrl-Z stops the whole job, not its first process: `SIGTSTP` to `run -- sh -c 'sleep & wait'`
/// stops the shell and its background sleep (one process group, as the terminal would stop it
/// without the wrapper, and as dumb-init forwards to the group), and `SIGCONT` continues both.
#[test]
fn job_control_stops_and_continues_the_workloads_whole_group() {
    let home = Home::new();
    let (mut child, out, sleeper) = run_with_background_sleep(&home);
    let shell = home.ps()[0]["pid"].as_u64().expect("pid") as u32;
    let run = child.id();
    signal(&child, libc::SIGTSTP);
    let states = || (proc_state(shell), proc_state(sleeper), proc_state(run));
    assert!(
        wait_until(DEADLINE, || states() == ('T', 'T', 'T')),
        "after SIGTSTP (shell, background sleep, run): {:?}",
        states()
    );
    signal(&child, libc::SIGCONT);
    assert!(
        wait_until(DEADLINE, || {
            let (a, b, c) = states();
            a != 'T' && b != 'T' && c != 'T'
        }),
        "after SIGCONT (shell, background sleep, run): {:?}",
        states()
    );
    let (st, doc) = signalled_document(&mut child, out, libc::SIGTERM, "run after SIGTERM");
    assert_eq!(st.code(), Some(143), "{st}: {doc}");
    assert_eq!(doc["scope"], "exited", "{doc}");
}
