//! The operator CLI as a user drives it (SPEC O1, O3, O4): help, bad input, and `run`.

use refine_tests::cli_support;

use std::fs;
use std::process::Stdio;
use std::time::Duration;

use cli_support::*;

const COMMANDS: [&str; 13] = [
    "run",
    "serve",
    "ps",
    "show",
    "stop",
    "logs",
    "wait",
    "receipt",
    "recover",
    "gc",
    "capacity",
    "top",
    "completions",
];

#[test]
fn every_command_has_help() {
    let home = Home::new();
    for c in COMMANDS {
        let out = home.cli(&[c, "--help"]);
        assert!(out.status.success(), "{}", describe(&[c, "--help"], &out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Usage:"), "{c}: {text}");
    }
    let out = home.cli(&["--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for c in COMMANDS {
        assert!(text.contains(c), "top-level help lacks {c}");
    }
}

/// Help wraps at words to the terminal's width (here `COLUMNS=80`, as off a terminal), so no
/// paragraph breaks mid-word at 80 columns (issue 44).
#[test]
fn help_wraps_at_words_within_80_columns() {
    let home = Home::new();
    for c in COMMANDS
        .iter()
        .map(|c| vec![*c, "--help"])
        .chain([vec!["--help"]])
    {
        let out = output_of({
            let mut cmd = home.command(&c);
            cmd.env("COLUMNS", "80");
            cmd
        });
        let text = String::from_utf8_lossy(&out.stdout);
        let long: Vec<&str> = text.lines().filter(|l| l.chars().count() > 80).collect();
        assert!(long.is_empty(), "{c:?}: lines past 80 columns: {long:#?}");
    }
}

#[test]
fn a_home_that_cannot_be_created_is_one_line() {
    let home = Home::new();
    // Under a regular file: no directory can be made there.
    let file = home.path().join("a-file");
    fs::write(&file, "").unwrap();
    let gone = file.join("home");
    for args in [
        vec!["ps"],
        vec!["gc", "--older-than", "0s"],
        vec!["capacity"],
        vec!["run", "--", "true"],
    ] {
        let out = std::process::Command::new(refine_tests::bin("refine-supervisor"))
            .arg("--home")
            .arg(&gone)
            .args(&args)
            .output()
            .expect("spawn");
        let err = assert_one_line_error(&args, &out);
        if args[0] == "run" {
            assert!(err.contains("cannot create the home"), "{err}");
            assert_eq!(err.matches("Not a directory").count(), 1, "{err}");
        } else {
            // Readers never create a home (D7).
            assert!(err.contains("does not exist"), "{err}");
        }
    }
    assert!(!gone.exists());
}

/// A detached run's request is JSON text: an argument that is not UTF-8 is refused in one line,
/// before any service is asked.
#[test]
fn a_detached_run_of_bytes_is_refused_in_one_line() {
    use std::os::unix::ffi::OsStrExt;
    let home = Home::new();
    let out = home
        .command(&["run", "--detach", "--", "printf"])
        .arg(std::ffi::OsStr::from_bytes(b"\xff"))
        .output()
        .expect("spawn");
    let args = ["run", "--detach", "--", "printf", "\\xff"];
    let err = assert_one_line_error(&args, &out);
    assert!(
        err.ends_with("error: invalid launch: run --detach passes arguments, environment values and the directory as UTF-8 text; run without --detach passes any bytes\n"),
        "{err}"
    );
}

/// Usage errors are clap's whole message (exit 2): it names the flag and the value. (`run CMD`
/// without `--` runs CMD: operator_habits.rs.)
#[test]
fn bad_durations_and_missing_commands_are_usage_errors() {
    let home = Home::new();
    for args in [
        vec!["gc", "--older-than", "5x"],
        vec!["gc", "--older-than", "-1s"],
        vec!["gc", "--older-than", ""],
        vec!["run", "--timeout", "soon", "--", "true"],
        vec!["run", "--idle-timeout", "soon", "--", "true"],
        vec!["run", "--timeout", "-1", "--", "true"],
        vec!["run", "--"],
        vec!["run"],
        vec!["frobnicate"],
    ] {
        let out = home.cli(&args);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        // clap names the flag, or the value it could not place (`-1s` reads as a flag).
        if let Some(i) = args
            .iter()
            .position(|a| a.ends_with("timeout") || *a == "--older-than")
        {
            let value = args.get(i + 1).copied().unwrap_or_default();
            let named = err.contains(args[i]) || value.get(..2).is_some_and(|v| err.contains(v));
            assert!(named, "{}: {err}", args[i]);
        }
        assert!(err.contains("Usage:") || err.contains("--help"), "{err}");
        // One prefix for every error of this program, usage errors included (issue 44).
        assert!(
            err.starts_with("refine-supervisor: error: "),
            "{}",
            describe(&args, &out)
        );
    }
    // A runtime error reads the same way.
    let out = home.cli(&["show", "ffff0000"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("refine-supervisor: error: "), "{err}");
    // Help and version are not errors: on stdout, exit 0, clap's text unchanged.
    for args in [vec!["--help"], vec!["--version"], vec!["run", "--help"]] {
        let out = home.cli(&args);
        assert!(
            out.status.success() && out.stderr.is_empty() && !out.stdout.is_empty(),
            "{}",
            describe(&args, &out)
        );
    }
    assert!(
        !home.run_dir().join("registrations").exists()
            || fs::read_dir(home.run_dir().join("registrations"))
                .unwrap()
                .next()
                .is_none()
    );
}

#[test]
fn show_logs_and_receipt_of_an_exited_scope() {
    let home = Home::new();
    let (_, id) = launch(
        &home,
        "wait",
        &["sh", "-c", "echo out; echo err >&2; exit 2"],
    );
    let s = show(&home, &id);
    assert_eq!(s["state"], "exited", "{s}");
    assert_eq!(s["receipt"]["exit_code"], 2, "{s}");
    assert_eq!(s["record"]["argv"][0], "sh");

    let out = home.cli(&["logs", &id]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    let out = home.cli(&["logs", &id, "--stderr"]);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "err\n");
    // --follow ends at once: the scope has exited.
    let out = home.cli(&["logs", &id, "--follow"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");

    let r = home.json(&["receipt", &id, "--json"]);
    assert_eq!(r["verified"], true, "{r}");
    let proof = s["record"]["proof"]["path"].as_str().unwrap().to_owned();
    let r = home.json(&["receipt", &proof, "--json"]);
    assert_eq!(r["verified"], true, "{r}");

    // Damage the receipt in place (same inode): it no longer verifies, and nothing says exited.
    let mut bytes = fs::read(&proof).unwrap();
    bytes[20] ^= 0x55;
    refine_tests::overwrite_in_place(&proof, &bytes);
    for args in [
        vec!["receipt", id.as_str()],
        vec!["receipt", proof.as_str()],
    ] {
        let out = home.cli(&args);
        assert_one_line_error(&args, &out);
    }
    assert_eq!(home.state(&id), "unverified");
}

#[test]
fn two_concurrent_stops_both_finish_and_agree() {
    let home = Home::new();
    let (_, id) = launch(&home, "leave", &["sleep", "600"]);
    assert_eq!(home.state(&id), "live");
    let outs: Vec<_> = std::thread::scope(|s| {
        let a = s.spawn(|| home.cli(&["stop", &id, "--json"]));
        let b = s.spawn(|| home.cli(&["stop", &id, "--json"]));
        [a.join().unwrap(), b.join().unwrap()]
    })
    .into();
    let docs: Vec<_> = outs
        .iter()
        .map(|o| {
            assert!(o.status.success(), "{}", describe(&["stop"], o));
            parse(&["stop"], o)
        })
        .collect();
    assert!(docs.iter().all(|d| d["state"] == "exited"), "{docs:?}");
    let acted = docs.iter().filter(|d| d["outcome"] == "stopped").count();
    assert_eq!(acted, 1, "exactly one stop acts: {docs:?}");
    assert_eq!(show(&home, &id)["state"], "exited");
}

#[test]
fn unknown_and_malformed_ids_are_one_line() {
    let home = Home::new();
    // Before any runtime exists, and after one does.
    for pass in 0..2 {
        if pass == 1 {
            launch(&home, "wait", &["true"]);
        }
        let unknown = "0123456789abcdef0123456789abcdef";
        for args in [
            vec!["show", unknown],
            vec!["stop", unknown],
            vec!["logs", unknown],
            vec!["receipt", unknown],
            vec!["show", "nope"],
            vec!["stop", "12"],
            vec!["logs", "zz", "--stderr"],
        ] {
            let err = home.one_line_error(&args);
            assert!(
                err.contains("no registration") || err.contains("invalid registration id"),
                "{err}"
            );
        }
        let args = ["receipt", "/nonexistent/proof"];
        let err = assert_one_line_error(&args, &home.cli(&args));
        assert!(
            err.ends_with(
                "no receipt at /nonexistent/proof: No such file or directory (os error 2)\n"
            ),
            "{err}"
        );
    }
}

#[test]
fn corrupt_record_is_one_line_and_nothing_is_deleted() {
    let home = Home::new();
    let (_, id) = launch(&home, "wait", &["sh", "-c", "echo out; echo err >&2"]);
    let record = home.run_dir().join("registrations").join(&id);
    let mut bytes = fs::read(&record).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::write(&record, &bytes).unwrap();
    // As if its end was never proven (the open index still names it): recovery reads it too.
    fs::write(home.run_dir().join("open").join(&id), b"").unwrap();
    let before = snapshot(&home.run_dir());

    for args in [
        vec!["show", id.as_str()],
        vec!["stop", id.as_str()],
        vec!["logs", id.as_str()],
        vec!["receipt", id.as_str()],
    ] {
        let err = home.one_line_error(&args);
        assert!(err.contains("corrupt"), "{err}");
    }
    // ps lists it as corrupt; recover reports it; gc keeps its artifacts.
    assert_eq!(home.row(&id)["state"], "corrupt");
    let rec = home.json(&["recover", "--json"]);
    assert_eq!(rec["registrations"][0]["action"], "corrupt", "{rec}");
    let gc = home.json(&["gc", "--older-than", "0s", "--json"]);
    assert_eq!(gc["deleted_files"], 0, "{gc}");
    let after = snapshot(&home.run_dir());
    // Same files, same inodes (the lock was only locked, never replaced).
    assert_eq!(before, after);
}

#[test]
fn logs_follow_ends_when_the_scope_has_exited() {
    let home = Home::new();
    let (_, id) = launch(&home, "leave", &["sh", "-c", "echo first; exec sleep 600"]);
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut follow = home
        .command(&["logs", &id, "--follow"])
        .stdout(out.reopen().unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(refine_tests::wait_until(DEADLINE, || {
        fs::read_to_string(out.path()).unwrap_or_default() == "first\n"
    }));
    assert!(
        follow.try_wait().unwrap().is_none(),
        "follow ended while live"
    );
    let args = ["stop", &id];
    let stopped = home.cli(&args);
    assert!(stopped.status.success(), "{}", describe(&args, &stopped));
    let mut status = None;
    assert!(refine_tests::wait_until(DEADLINE, || {
        status = follow.try_wait().unwrap();
        status.is_some()
    }));
    assert!(status.unwrap().success());
    assert_eq!(fs::read_to_string(out.path()).unwrap(), "first\n");
}

#[test]
fn ps_is_an_aligned_table_and_hides_exited_without_all() {
    let home = Home::new();
    let (_, done) = launch(&home, "wait", &["true"]);
    let (_, live) = launch(&home, "leave", &["sleep", "600"]);
    let out = home.cli(&["ps"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[1].starts_with(&live[..12]), "{text}");
    // Every column starts at the same offset in the header and the row.
    let header = lines[0];
    for col in ["KIND", "STATE", "STATUS", "PID"] {
        let at = header.find(col).unwrap();
        assert_eq!(&lines[1][at - 2..at], "  ", "{col} misaligned:\n{text}");
    }
    let all = home.cli(&["ps", "--all"]);
    assert!(String::from_utf8_lossy(&all.stdout).contains(&done[..12]));
    assert!(home.cli(&["stop", &live]).status.success());
}

#[test]
fn run_passes_exit_codes_and_signals_through() {
    let home = Home::new();
    for (argv, code) in [
        (vec!["true"], 0),
        (vec!["sh", "-c", "exit 7"], 7),
        (vec!["sh", "-c", "kill -TERM $$"], 128 + 15),
        (vec!["sh", "-c", "kill -KILL $$"], 128 + 9),
    ] {
        let mut args = vec!["run", "--"];
        args.extend_from_slice(&argv);
        let out = home.cli(&args);
        assert_eq!(out.status.code(), Some(code), "{}", describe(&args, &out));
    }
    // Output streams through, stdout and stderr apart.
    let args = ["run", "--", "sh", "-c", "echo to-out; echo to-err >&2"];
    let out = home.cli(&args);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "to-out\n",
        "{}",
        describe(&args, &out)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "to-err\n",
        "{}",
        describe(&args, &out)
    );
}

#[test]
fn run_json_has_the_contract_fields() {
    let home = Home::new();
    let (out, doc) = home.run_json(&["sh", "-c", "echo hello; echo oops >&2; exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", describe(&["run"], &out));
    assert_eq!(doc["outcome"], "completed", "{doc}");
    assert_eq!(doc["exit_code"], 3, "{doc}");
    assert!(doc["signal"].is_null(), "{doc}");
    let id = doc["id"].as_str().expect("id");
    assert_eq!(id.len(), 32);
    for (stream, text) in [("stdout", "hello\n"), ("stderr", "oops\n")] {
        assert_eq!(doc[stream]["complete"], true, "{doc}");
        assert_eq!(
            doc[stream]["end"],
            serde_json::json!({"kind": "eof"}),
            "{doc}"
        );
        let path = doc[stream]["path"].as_str().expect("path");
        assert_eq!(fs::read_to_string(path).unwrap(), text);
    }

    let (out, doc) = home.run_json(&["sh", "-c", "kill -TERM $$"]);
    assert_eq!(out.status.code(), Some(143), "{}", describe(&["run"], &out));
    assert_eq!(doc["signal"], 15, "{doc}");
    assert!(doc["exit_code"].is_null(), "{doc}");

    let (out, doc) = home.run_json(&["/nonexistent/program"]);
    assert!(!out.status.success());
    assert_eq!(doc["outcome"], "spawn_failed", "{doc}");

    // The registrations are all listed, exited, with their workload status.
    let rows = home.ps();
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r["state"] == "exited"), "{rows:?}");
}

/// A launch that asked for no parent-death signal (as the service's) outlives its launcher: its
/// scope stays `live` without a receipt until `stop` ends it. (A SIGKILLed foreground `run` asks
/// for one, and its guardian ends the scope itself: `launcher_loss.rs`.)
#[test]
fn a_scope_whose_launcher_left_is_never_exited_without_a_receipt_and_stop_ends_it() {
    let home = Home::new();
    // The workload keeps running after its launcher has left.
    let (_, id) = launch(&home, "leave", &["sh", "-c", "sleep 600 & wait"]);

    let row = home.row(&id);
    let state = row["state"].as_str().unwrap().to_owned();
    assert!(state == "live" || state == "unverified", "{row}");
    let [guardian, workload] = witnesses(&home, &id);
    assert!(
        alive(guardian.0, guardian.1),
        "the guardian outlives its launcher"
    );
    let _ = workload;
    // Its proof file holds the guardian's reservation, which is no receipt: one line, non-zero.
    let proof = show(&home, &id)["record"]["proof"]["path"]
        .as_str()
        .unwrap()
        .to_owned();
    let args = ["receipt", proof.as_str()];
    let err = assert_one_line_error(&args, &home.cli(&args));
    assert!(err.contains("holds no receipt yet"), "{err}");

    let args = ["stop", &id, "--json"];
    let doc = home.json(&args);
    assert_eq!(doc["state"], "exited", "{doc}");
    let s = show(&home, &id);
    assert_eq!(s["state"], "exited", "{s}");
    assert!(s["receipt"].is_object(), "{s}");
    assert_eq!(home.json(&["receipt", &id, "--json"])["verified"], true);
    assert!(!alive(guardian.0, guardian.1));
}

/// A scope whose launcher left it running (no parent-death signal, as the service's launches ask
/// for none) is stopped by `recover`.
#[test]
fn recover_ends_a_scope_left_by_its_launcher() {
    let home = Home::new();
    let (_, id) = launch(&home, "leave", &["sh", "-c", "sleep 600 & wait"]);
    assert_ne!(home.state(&id), "exited");

    let rec = home.json(&["recover", "--json"]);
    assert!(rec.to_string().contains(&id), "{rec}");
    let s = show(&home, &id);
    assert_eq!(s["state"], "exited", "{s}");
    assert!(s["receipt"].is_object());
}

#[test]
fn quality_run_stops_its_leftover_descendants_before_returning() {
    let home = Home::new();
    let (out, doc) = home.run_json(&["sh", "-c", "sleep 600 & echo left"]);
    assert!(out.status.success(), "{}", describe(&["run"], &out));
    // `command` keeps the scope; stop it afterwards.
    assert_eq!(doc["scope"], "live", "{doc}");
    let id = doc["id"].as_str().unwrap().to_owned();
    assert!(home.cli(&["stop", &id]).status.success());

    let args = words("run --json --kind quality -- sh -c 'sleep 600 & echo left'");
    let doc = home.json(&args);
    assert_eq!(doc["scope"], "exited", "{doc}");
    let id = doc["id"].as_str().unwrap();
    assert_eq!(home.state(id), "exited");
    assert!(show(&home, id)["receipt"].is_object());
}

/// `$(refine-supervisor run -- CMD)` with a detached descendant: the caller's pipes reach end of
/// file when `run` exits, not when the descendant does (the guardian keeps none of them).
#[test]
fn run_releases_the_callers_pipes_while_a_descendant_keeps_the_scope() {
    use std::io::Read;
    let home = Home::new();
    let mut child = home
        .command(&["run", "--", "sh", "-c", "echo out; (exec sleep 600 &)"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut o, mut e) = (String::new(), String::new());
        let _ = out.read_to_string(&mut o);
        let _ = err.read_to_string(&mut e);
        let _ = tx.send((o, e));
    });
    let eof = rx.recv_timeout(DEADLINE);
    let status = child.wait().unwrap();
    let id = home.ps()[0]["id"].as_str().unwrap().to_owned();
    // End the detached sleeper whatever happened, then judge.
    let stopped = home.cli(&["stop", &id]);
    let (o, e) = eof.expect("the caller's pipes stayed open while the descendant lived");
    assert!(status.success(), "run failed: {e}");
    assert_eq!(o, "out\n");
    assert!(
        stopped.status.success(),
        "{}",
        describe(&["stop", &id], &stopped)
    );
}

/// `run --pty` from a terminal is interactive: the workload's terminal has the operator's window
/// size, and keys typed at the operator's terminal reach it (it echoes and edits the line).
#[test]
fn run_pty_on_a_terminal_forwards_keys_and_the_window_size() {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    use rustix::fs::{Mode, OFlags};
    use rustix::pty::OpenptFlags;
    use std::os::fd::OwnedFd;

    let home = Home::new();
    // The operator's terminal: a PTY pair made here; `run` gets the slave as stdin/stdout/stderr.
    let master = rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    rustix::pty::grantpt(&master).unwrap();
    rustix::pty::unlockpt(&master).unwrap();
    let name = rustix::pty::ptsname(&master, Vec::new()).unwrap();
    let slave: OwnedFd = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .unwrap();
    let size = rustix::termios::Winsize {
        ws_row: 41,
        ws_col: 101,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(&master, size).unwrap();
    let mut child = home
        .command(&words(
            "run --kind terminal --pty -- sh -c 'stty size; read x; echo got:$x'",
        ))
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave.try_clone().unwrap())
        .spawn()
        .unwrap();
    drop(slave);

    // Read the operator's terminal until `want` shows up (or the deadline passes).
    let mut seen = Vec::new();
    let mut read_until = |want: &str| -> bool {
        let end = std::time::Instant::now() + DEADLINE;
        while !String::from_utf8_lossy(&seen).contains(want) {
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            let ts = Timespec {
                tv_sec: left.as_secs() as i64,
                tv_nsec: left.subsec_nanos() as i64,
            };
            let mut fds = [PollFd::new(&master, PollFlags::IN)];
            if poll(&mut fds, Some(&ts)).unwrap_or(0) == 0 {
                continue;
            }
            let mut buf = [0u8; 4096];
            match rustix::io::read(&master, &mut buf) {
                Ok(n) if n > 0 => seen.extend_from_slice(&buf[..n]),
                _ => return false,
            }
        }
        true
    };
    let sized = read_until("41 101");
    if sized {
        rustix::io::write(&master, b"abc\r").unwrap();
    }
    let answered = sized && read_until("got:abc");
    let status = if answered {
        Some(child.wait().unwrap())
    } else {
        let _ = child.kill();
        let _ = child.wait();
        None
    };
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(
        sized,
        "the workload did not see the operator's window size: {text:?}"
    );
    assert!(answered, "typed keys did not reach the workload: {text:?}");
    assert!(status.unwrap().success(), "{text:?}");
}

#[test]
fn stop_from_another_process_is_the_run_outcome_stopped() {
    let home = Home::new();
    let ready = home.path().join("ready");
    let script = format!("touch '{}'; exec sleep 600", ready.display());
    let run = home
        .command(&["run", "--json", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn run");
    assert!(
        refine_tests::wait_until(Duration::from_secs(30), || ready.exists()),
        "the workload never started"
    );
    let rows = home.ps();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let id = rows[0]["id"].as_str().unwrap().to_owned();

    let args = ["stop", &id, "--json"];
    let out = home.cli_ok(&args);
    assert_eq!(parse(&args, &out)["state"], "exited");

    let out = run.wait_with_output().expect("wait run");
    let doc = parse(&["run"], &out);
    assert_eq!(doc["outcome"], "stopped", "{doc}");
    assert_eq!(doc["signal"], 9, "{doc}");
    assert_eq!(out.status.code(), Some(137), "{}", describe(&["run"], &out));
    // The request is recorded beside the artifacts (evidence of who ended it), and `ps` shows
    // why the launch ended.
    assert!(home
        .run_dir()
        .join("logs")
        .join(format!("{id}.stop"))
        .is_file());
    let row = home.row(&id);
    assert_eq!(row["outcome"], "stopped", "{row}");
    assert_eq!(row["signal"], 9, "{row}");
    let table = home.cli(&["ps", "--all"]);
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("stopped"),
        "{}",
        describe(&["ps", "--all"], &table)
    );

    // Negative control: a workload that completed before any stop was asked for stays
    // completed; the later stop of the descendant holding its scope changes nothing of that.
    let (out, doc) = home.run_json(&["sh", "-c", "sleep 600 & exit 5"]);
    assert_eq!(doc["outcome"], "completed", "{doc}");
    assert_eq!(out.status.code(), Some(5));
    let id = doc["id"].as_str().unwrap().to_owned();
    assert_eq!(home.state(&id), "live", "the sleep holds the scope");
    // While the sleep holds the scope, `ps` already shows how the workload itself ended.
    let row = home.row(&id);
    assert_eq!(
        (&row["status"], &row["exit_code"], &row["outcome"]),
        (&"exited".into(), &5.into(), &"completed".into()),
        "{row}"
    );
    assert_eq!(show(&home, &id)["result"]["exit_code"], 5);
    let args = ["stop", &id, "--json"];
    home.cli_ok(&args);
    assert_eq!(show(&home, &id)["state"], "exited");
    assert_eq!(show(&home, &id)["receipt"]["exit_code"], 5);
}

#[test]
fn damaged_result_and_stop_records_are_shown_never_trusted_and_kept() {
    let home = Home::new();
    let (_, doc) = home.run_json(&["sh", "-c", "exit 4"]);
    let id = doc["id"].as_str().unwrap().to_owned();
    let logs = home.run_dir().join("logs");
    // The result is appended to the registration record (F3): its last byte is the result's.
    let result = home.run_dir().join("registrations").join(&id);
    let mut bytes = fs::read(&result).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::write(&result, &bytes).unwrap();
    let stop = logs.join(format!("{id}.stop"));
    fs::write(&stop, b"not a stop request").unwrap();

    // The receipt still decides state and status; the damaged result only loses its outcome.
    let row = home.row(&id);
    assert_eq!(row["state"], "exited", "{row}");
    assert_eq!(row["exit_code"], 4, "{row}");
    assert!(row["outcome"].is_null(), "{row}");
    let s = show(&home, &id);
    let err = s["result"]["error"].as_str().unwrap_or_default();
    assert!(err.contains("corrupt launch result"), "{s}");
    // Stopping an exited scope neither reads nor rewrites the request; nothing is deleted.
    let args = ["stop", &id, "--json"];
    home.cli_ok(&args);
    assert_eq!(fs::read(&result).unwrap(), bytes);
    assert_eq!(fs::read(&stop).unwrap(), b"not a stop request");
}
