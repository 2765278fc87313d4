//! `run` behaves like the bare command (SPEC W1–W6): stdin, signal relay, broken and
//! slow pipes, the default log cap, spawn failures that explain themselves, and bytes that are
//! not UTF-8. Each case runs the real `refine-supervisor run` as a shell would.

use refine_tests::cli_support;

use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use cli_support::*;
use refine_tests::wait_until;

// ---------------------------------------------------------------------------------------------
// W1 stdin.

/// `run -- cat` with `stdin` as its standard input, both outputs collected: the child (its
/// stdin already given) and the collectors of its stdout and stderr.
fn spawn_cat(home: &Home, stdin: Stdio) -> (std::process::Child, Collected, Collected) {
    spawn_collected(home.command(&["run", "--", "cat"]).stdin(stdin), "run")
}

/// Waits (bounded) for [`spawn_cat`]'s `run`: it must have printed exactly `expected` and
/// exited 0.
fn assert_cat_printed(
    mut child: std::process::Child,
    (out, err): (Collected, Collected),
    expected: &str,
    what: &str,
) {
    let st = wait_bounded(&mut child, DEADLINE, what);
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert_eq!(
        String::from_utf8_lossy(&out),
        expected,
        "{st}: {}",
        String::from_utf8_lossy(&err)
    );
    assert!(st.success(), "{st}");
}

#[test]
fn stdin_from_a_pipe_reaches_the_workload_with_its_eof() {
    let home = Home::new();
    let (mut child, out, err) = spawn_cat(&home, Stdio::piped());
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(b"a\nb\n").expect("write stdin");
    drop(input); // EOF: `cat` must see it and end.
    let what = "printf 'a\\nb\\n' | run -- cat";
    assert_cat_printed(child, (out, err), "a\nb\n", what);
}

/// `run` drives its launch on its main thread, with the signal relay in the same `poll`: while a
/// plain workload runs (stdin not a terminal, no idle deadline), `run` is one thread. The
/// workload reads it from `/proc`: its parent is the guardian, whose parent is `run`.
#[test]
fn run_holds_no_thread_besides_its_main_one() {
    let home = Home::new();
    let script = r#"run=$(cut -d' ' -f4 /proc/$PPID/stat); grep '^Threads:' /proc/$run/status"#;
    let out = home.cli(&["run", "--", "sh", "-c", script]);
    assert!(out.status.success(), "{}", describe(&["run"], &out));
    let line = String::from_utf8_lossy(&out.stdout);
    let threads: u32 = line
        .trim()
        .strip_prefix("Threads:")
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no thread count in {line:?}"));
    assert_eq!(threads, 1, "run's threads while its workload runs");
}

#[test]
fn stdin_from_a_file_reaches_the_workload() {
    let home = Home::new();
    let file = home.path().join("input.txt");
    std::fs::write(&file, "one\ntwo\nthree\n").expect("write input");
    let mut cmd = home.command(&["run", "--", "wc", "-l"]);
    cmd.stdin(std::fs::File::open(&file).expect("open input"));
    let out = output_of(cmd);
    assert!(out.status.success(), "{}", describe(&["run"], &out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "3");
}

#[test]
fn stdin_from_a_terminal_reaches_the_workload_and_ctrl_d_ends_it() {
    let home = Home::new();
    let (pty, slave) = refine_tests::open_pty();
    let (child, out, err) = spawn_cat(&home, slave.into());
    let mut master = std::fs::File::from(pty);
    // A line, then Ctrl-D on an empty line: end of file in canonical mode.
    master.write_all(b"typed\n\x04").expect("type");
    // Keep the master drained (the terminal echoes what is typed).
    std::thread::spawn(move || {
        let mut buf = [0u8; 1024];
        while matches!(master.read(&mut buf), Ok(n) if n > 0) {}
    });
    assert_cat_printed(child, (out, err), "typed\n", "run -- cat on a terminal");
}

#[test]
fn stdin_input_counts_as_activity_for_the_idle_deadline() {
    let home = Home::new();
    // The workload prints nothing: only the input keeps it from the 3 s idle deadline.
    let mut child = home
        .command(&words("run --json --idle-timeout 3s -- sh -c 'while read l; do :; done; echo done-reading >&2'"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn run");
    let out = collect(child.stdout.take().expect("stdout"));
    let mut input = child.stdin.take().expect("stdin");
    // Input every 500 ms for 6 s: twice the idle deadline, never 3 s without input.
    for _ in 0..12 {
        input.write_all(b"line\n").expect("write stdin");
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(input);
    let (st, doc) = finished_document(&mut child, out, "run --idle-timeout with input");
    assert_eq!(doc["outcome"], "completed", "{st}: {doc}");
    assert!(st.success(), "{st}: {doc}");

    // Negative control: the same workload without input is idle and is stopped.
    let mut child = home
        .command(&words(
            "run --json --idle-timeout 1s -- sh -c 'while read l; do :; done'",
        ))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn run");
    let out = collect(child.stdout.take().expect("stdout"));
    let _held_open = child.stdin.take();
    let (st, doc) = finished_document(&mut child, out, "idle run without input");
    assert_eq!(doc["outcome"], "idle_timeout", "{st}: {doc}");
}

// ---------------------------------------------------------------------------------------------
// W2 signals.

#[test]
fn sigterm_to_run_reaches_the_workload_whose_trap_exits_0_completed() {
    let home = Home::new();
    let (mut child, out) = trapping_run(&home, &[], "trap 'echo got-term; exit 0' TERM");
    let (st, doc) = signalled_document(&mut child, out, libc::SIGTERM, "run after SIGTERM");
    assert_eq!(doc["outcome"], "completed", "{st}: {doc}");
    assert_eq!(st.code(), Some(0), "{st}: {doc}");
    let path = doc["stdout"]["path"].as_str().expect("stdout path");
    assert_eq!(std::fs::read_to_string(path).unwrap(), "got-term\n");
}

#[test]
fn user_hangup_and_alarm_signals_are_forwarded_not_fatal_to_run() {
    for (sig, name, code) in [
        (libc::SIGUSR1, "USR1", 11),
        (libc::SIGUSR2, "USR2", 12),
        (libc::SIGHUP, "HUP", 13),
        (libc::SIGALRM, "ALRM", 14),
        (libc::SIGINT, "INT", 15),
        (libc::SIGQUIT, "QUIT", 16),
    ] {
        let home = Home::new();
        let (mut child, out) = trapping_run(&home, &[], &format!("trap 'exit {code}' {name}"));
        let (st, doc) = signalled_document(&mut child, out, sig, name);
        assert_eq!(st.signal(), None, "{name}: run itself died: {st}");
        assert_eq!(st.code(), Some(code), "{name}: {st}: {doc}");
        assert_eq!(doc["outcome"], "completed", "{name}: {doc}");
    }
}

#[test]
fn a_second_sigterm_escalates_through_the_shared_stop_cancelled() {
    let home = Home::new();
    let seen = home.path().join("seen");
    let (mut child, out) = trapping_run(&home, &[], &format!("trap ': > {}' TERM", seen.display()));
    signal(&child, libc::SIGTERM);
    // The first one was forwarded (the workload saw it and lives on) ...
    assert!(
        wait_until(DEADLINE, || seen.exists()),
        "SIGTERM never reached the workload"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "run ended on the first SIGTERM"
    );
    // ... the second ends the scope at once.
    let (st, doc) = signalled_document(
        &mut child,
        out,
        libc::SIGTERM,
        "run after the second SIGTERM",
    );
    assert_eq!(doc["outcome"], "cancelled", "{st}: {doc}");
    assert_eq!(doc["scope"], "exited", "{doc}");
    assert_eq!(st.code(), Some(137), "{st}: {doc}");
}

#[test]
fn stop_grace_ends_a_workload_that_ignores_sigterm() {
    let home = Home::new();
    let (mut child, out) = trapping_run(&home, &["--stop-grace", "1s"], "trap '' TERM");
    let sent = Instant::now();
    let (st, doc) = signalled_document(&mut child, out, libc::SIGTERM, "run after the grace");
    assert!(
        sent.elapsed() >= Duration::from_secs(1),
        "ended before the grace"
    );
    assert_eq!(doc["outcome"], "cancelled", "{st}: {doc}");
    assert_eq!(st.code(), Some(137), "{st}: {doc}");
}

// ---------------------------------------------------------------------------------------------
// W3 pipes.

#[test]
fn a_closed_reader_breaks_the_workload_stream_yes_head() {
    let home = Home::new();
    let mut child = home
        .command(&["run", "--", "yes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn run");
    let err = collect(child.stderr.take().expect("stderr"));
    let mut reader = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    for _ in 0..2 {
        line.clear();
        std::io::BufRead::read_line(&mut reader, &mut line).expect("read");
        assert_eq!(line, "y\n");
    }
    drop(reader); // `head -2` exits.
    let closed = Instant::now();
    let st = wait_bounded(&mut child, DEADLINE, "run -- yes | head -2");
    let took = closed.elapsed();
    eprintln!("run ended {took:?} after its reader closed");
    let err = err.join().unwrap();
    assert_eq!(
        st.code(),
        Some(141),
        "{st}: {}",
        String::from_utf8_lossy(&err)
    );
    // The artifact holds what was written, and nothing of the scope is left.
    let rows = home.ps();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let id = rows[0]["id"].as_str().unwrap().to_owned();
    home.wait_state(&id, "exited");
    let show = show(&home, &id);
    let stdout = show["record"]["stdout_path"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| {
            home.run_dir()
                .join("logs")
                .join(format!("{id}.stdout"))
                .display()
                .to_string()
        });
    let art = std::fs::read(&stdout).expect("stdout artifact");
    assert!(
        art.len() >= 4 && art.starts_with(b"y\ny\n"),
        "{} bytes",
        art.len()
    );
}

#[test]
fn a_full_pipe_never_blocks_the_completion_deadline() {
    let home = Home::new();
    let mut child = home
        .command(&["run", "--timeout", "2s", "--", "yes"])
        .stdout(Stdio::piped()) // never read
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn run");
    let st = wait_bounded(
        &mut child,
        DEADLINE,
        "run --timeout 2s -- yes into a full pipe",
    );
    // The deadline's SIGTERM ended `yes` (W11: 124, as `timeout` exits).
    assert_eq!(st.code(), Some(124), "{st}");
    let rows = home.ps();
    assert_eq!(rows[0]["outcome"], "timed_out", "{rows:?}");
    // Back-pressure: the artifact did not run ahead of the reader by more than a bounded amount.
    let id = rows[0]["id"].as_str().unwrap();
    let art = home.run_dir().join("logs").join(format!("{id}.stdout"));
    let len = std::fs::metadata(&art).expect("artifact").len();
    assert!(
        len < 64 << 20,
        "the workload was not throttled: {len} bytes"
    );
}

// ---------------------------------------------------------------------------------------------
// W4 log cap.

#[test]
fn every_artifact_has_a_cap_default_one_gib_and_log_cap_sets_it() {
    let home = Home::new();
    let args = words("run --json --log-cap 1K -- sh -c 'head -c 5000 /dev/zero'");
    let doc = home.json(&args);
    let path = doc["stdout"]["path"].as_str().unwrap();
    assert_eq!(std::fs::metadata(path).unwrap().len(), 1024, "{doc}");
    assert_eq!(doc["stdout"]["complete"], false, "{doc}");
    assert_eq!(
        doc["stdout"]["end"],
        serde_json::json!({"kind": "incomplete", "why": {"kind": "artifact_cap", "cap_bytes": 1024}}),
        "{doc}"
    );
    // Negative control: under the cap, complete.
    let args = words("run --json --log-cap 10K -- sh -c 'head -c 5000 /dev/zero'");
    let doc = parse(&args, &home.cli(&args));
    assert_eq!(doc["stdout"]["complete"], true, "{doc}");
    // The default is recorded: 1 GiB; `0` is none.
    let (_, doc) = home.run_json(&["true"]);
    let id = doc["id"].as_str().unwrap();
    assert_eq!(
        show(&home, id)["record"]["limits"]["log_cap_bytes"],
        1u64 << 30
    );
    let args = ["run", "--json", "--log-cap", "0", "--", "true"];
    let doc = parse(&args, &home.cli(&args));
    let id = doc["id"].as_str().unwrap();
    assert!(show(&home, id)["record"]["limits"]["log_cap_bytes"].is_null());
}

/// Issue 41 item 4: why an artifact is incomplete is a typed object in `show --json` (tagged by
/// `kind`, its figures beside it), not words; the human view words it as before.
#[test]
fn an_incomplete_artifact_says_why_as_a_typed_object() {
    let home = Home::new();
    let args = [
        "run",
        "--json",
        "--log-cap",
        "1K",
        "--",
        "sh",
        "-c",
        "head -c 5000 /dev/zero",
    ];
    let doc = home.json(&args);
    let id = doc["id"].as_str().unwrap();
    let shown = show(&home, id);
    let incomplete = &shown["artifacts"]["stdout"]["incomplete"];
    assert_eq!(
        *incomplete,
        serde_json::json!({"kind": "artifact_cap", "cap_bytes": 1024}),
        "{shown:#}"
    );
    assert!(
        shown["artifacts"]["stderr"]["incomplete"].is_null(),
        "{shown:#}"
    );
    home.assert_show_says(
        id,
        "incomplete: log cap of 1024 bytes reached (the pipe is still drained)",
    );
}

// ---------------------------------------------------------------------------------------------
// W5 spawn failures.

#[test]
fn spawn_failures_name_the_program_or_directory_with_126_or_127() {
    let home = Home::new();
    let not_exec = home.path().join("not-executable");
    std::fs::write(&not_exec, "#!/bin/sh\n").unwrap();
    let not_exec = not_exec.display().to_string();
    let denied = format!("refine-supervisor: {not_exec}: Permission denied");
    let cases: [(&[&str], &str, i32); 3] = [
        (
            &["run", "--", "/nonexistent"],
            "refine-supervisor: /nonexistent: No such file or directory",
            127,
        ),
        (&["run", "--", &not_exec], &denied, 126),
        (
            &["run", "--cwd", "/nonexistent-dir", "--", "true"],
            "refine-supervisor: /nonexistent-dir: No such file or directory",
            127,
        ),
    ];
    for (args, line, code) in cases {
        let out = home.cli(args);
        assert_eq!(out.status.code(), Some(code), "{}", describe(args, &out));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim_end(),
            line,
            "{}",
            describe(args, &out)
        );
    }
    // `--json` keeps its contract.
    let (out, doc) = home.run_json(&["/nonexistent"]);
    assert_eq!(out.status.code(), Some(127));
    assert_eq!(doc["outcome"], "spawn_failed");
    assert_eq!(doc["errno"], libc::ENOENT);
}

// ---------------------------------------------------------------------------------------------
// W6 bytes.

#[test]
fn arguments_and_env_values_that_are_not_utf8_pass_through() {
    use std::os::unix::ffi::OsStringExt;
    let home = Home::new();
    let arg = std::ffi::OsString::from_vec(b"a\xffb".to_vec());
    let env = std::ffi::OsString::from_vec(b"V=c\xfed".to_vec());
    let mut cmd = home.command(&["run", "--env"]);
    cmd.arg(&env)
        .args(["--", "sh", "-c", "printf '%s|%s' \"$1\" \"$V\"", "sh"])
        .arg(&arg);
    let out = output_of(cmd);
    assert!(out.status.success(), "{}", describe(&["run"], &out));
    assert_eq!(out.stdout, b"a\xffb|c\xfed");
    // The record keeps the bytes (`argv_bytes`, numbers in JSON) beside the lossy text.
    let row = home.ps().into_iter().next().expect("a registration");
    let rec = show(&home, row["id"].as_str().unwrap())["record"].clone();
    let last = rec["argv_bytes"].as_array().and_then(|a| a.last().cloned());
    let bytes: Vec<u8> = last
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|b| b.as_u64().unwrap() as u8)
        .collect();
    assert_eq!(bytes, b"a\xffb", "{rec}");
    assert_eq!(
        rec["argv"].as_array().unwrap().last().unwrap(),
        "a\u{fffd}b"
    );
    // Negative control: a UTF-8 command records no bytes.
    let (_, doc) = home.run_json(&["true"]);
    let rec = show(&home, doc["id"].as_str().unwrap())["record"].clone();
    assert!(rec["argv_bytes"].is_null(), "{rec}");
}

/// W6: a `--cwd` whose name is not UTF-8 is the workload's working directory, byte for byte
/// (the embedded `run` passes the path itself, not a lossy text of it).
#[test]
fn a_working_directory_that_is_not_utf8_is_the_workloads() {
    use std::os::unix::ffi::OsStringExt;
    let home = Home::new();
    let dir = home
        .path()
        .join(std::ffi::OsString::from_vec(b"d\xff".to_vec()));
    std::fs::create_dir(&dir).expect("create the non-UTF-8 directory");
    let mut cmd = home.command(&["run", "--cwd"]);
    cmd.arg(&dir).args(["--", "pwd", "-P"]);
    let out = output_of(cmd);
    assert!(
        out.status.success(),
        "{}",
        describe(&["run", "--cwd"], &out)
    );
    let want = std::fs::canonicalize(&dir).expect("canonical directory");
    assert_eq!(
        out.stdout.strip_suffix(b"\n").unwrap_or(&out.stdout),
        want.as_os_str().as_bytes(),
        "{}",
        describe(&["run", "--cwd"], &out)
    );
}

/// W6: every byte of the argv and of an environment entry (its name too) reaches the
/// workload's `/proc/self/cmdline` and `/proc/self/environ` unchanged.
#[test]
fn argv_and_environment_bytes_reach_the_workloads_proc_entries() {
    use std::os::unix::ffi::OsStringExt;
    let home = Home::new();
    let arg = std::ffi::OsString::from_vec(b"x\xfe\x80y".to_vec());
    let env = std::ffi::OsString::from_vec(b"K\xff=v\xc3".to_vec());
    let mut cmd = home.command(&["run", "--env"]);
    cmd.arg(&env)
        .args(words(
            "-- sh -c 'cat /proc/$$/cmdline >&2; cat /proc/$$/environ' sh",
        ))
        .arg(&arg);
    let out = output_of(cmd);
    assert!(out.status.success(), "{}", describe(&["run"], &out));
    let (cmdline, environ) = (&out.stderr, &out.stdout);
    assert!(
        cmdline.ends_with(b"\0sh\0x\xfe\x80y\0"),
        "cmdline {cmdline:?}"
    );
    assert!(
        environ.split(|&b| b == 0).any(|e| e == b"K\xff=v\xc3"),
        "environ {environ:?}"
    );
}

/// `run --detach` of a program that cannot run reports it (one line, 127) instead of an id.
#[test]
fn detached_spawn_failure_is_reported_not_an_id() {
    let (home, svc) = Home::with_service(&["--maintenance-every", "200ms"]);
    let result = std::panic::catch_unwind(|| {
        let args = ["run", "--detach", "--", "/nonexistent"];
        let out = home.cli(&args);
        assert_eq!(out.status.code(), Some(127), "{}", describe(&args, &out));
        assert!(out.stdout.is_empty(), "{}", describe(&args, &out));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim_end(),
            "refine-supervisor: /nonexistent: No such file or directory"
        );
        let args = ["run", "--detach", "--json", "--", "/nonexistent"];
        let (_, doc) = home.cli_doc(&args);
        assert_eq!(doc["outcome"], "spawn_failed", "{doc}");
        assert_eq!(doc["errno"], libc::ENOENT, "{doc}");
        // Negative control: a program that runs still prints its id and exits 0.
        let args = ["run", "--detach", "--", "true"];
        let out = home.cli_ok(&args);
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim().len(), 32);
    });
    drop(svc); // SIGKILLed and reaped
               // The killed service may not have read the last receipt: the next recovery settles that
               // scope (and removes its cgroup, F4), as it would after any crash; nothing is left behind.
    let _ = home.cli(&["recover"]);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

fn proc_state(pid: u64) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].trim_start().chars().next())
        .unwrap_or('?')
}

/// Ctrl-Z: SIGTSTP stops the workload, then `run` itself; `fg` (SIGCONT to `run`) continues
/// both.
#[test]
fn sigtstp_stops_the_workload_then_run_and_sigcont_continues_both() {
    let home = Home::new();
    let (mut child, out) = trapping_run(&home, &[], "trap 'exit 0' TERM");
    let row = home.ps().into_iter().next().expect("a registration");
    let workload = row["pid"].as_u64().expect("pid");
    let run = u64::from(child.id());
    signal(&child, libc::SIGTSTP);
    assert!(
        wait_until(DEADLINE, || proc_state(workload) == 'T'
            && proc_state(run) == 'T'),
        "after SIGTSTP: workload {}, run {}",
        proc_state(workload),
        proc_state(run)
    );
    signal(&child, libc::SIGCONT);
    assert!(
        wait_until(DEADLINE, || proc_state(workload) != 'T'
            && proc_state(run) != 'T'),
        "after SIGCONT: workload {}, run {}",
        proc_state(workload),
        proc_state(run)
    );
    let (st, doc) = signalled_document(&mut child, out, libc::SIGTERM, "run after SIGTERM");
    assert_eq!(doc["outcome"], "completed", "{st}: {doc}");
}

// ---------------------------------------------------------------------------------------------
// W14 `run` as PID 1.

/// As the init of a PID namespace, `run`'s own exit would kill every process in it, the guardian
/// before its receipt: the residue is stopped first and the scope ends `exited`, its receipt
/// verified from outside the namespace. Before the fix `run` returned at the workload's exit,
/// the kernel killed the guardian and the scope stayed `unverified` for ever.
#[test]
fn run_as_the_init_of_a_pid_namespace_exits_after_its_receipt() {
    if !Path::new("/usr/bin/unshare").exists() && !Path::new("/bin/unshare").exists() {
        eprintln!("skipped: no unshare(1)");
        return;
    }
    let home = Home::new();
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["--pid", "--fork", "--mount-proc"])
        .arg(refine_tests::bin("refine-supervisor"))
        .arg("--home")
        .arg(home.path())
        .arg("--port")
        .arg(home.port.to_string())
        .args(["run", "--json", "--", "sh", "-c", "sleep 31400 & exit 0"])
        .stdin(Stdio::null());
    let out = output_of(cmd);
    let args = ["unshare", "run", "--", "sh", "-c", "sleep 31400 & exit 0"];
    if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("unshare:") {
        eprintln!("skipped: {}", String::from_utf8_lossy(&out.stderr).trim());
        return;
    }
    let doc = parse(&args, &out);
    let id = doc["id"].as_str().expect("id").to_owned();
    assert_eq!(doc["scope"], "exited", "{}", describe(&args, &out));
    assert_eq!(home.state(&id), "exited", "{}", describe(&args, &out));
    let receipt = home.cli(&["receipt", &id]);
    assert!(
        receipt.status.success(),
        "{}",
        describe(&["receipt", &id], &receipt)
    );
}
