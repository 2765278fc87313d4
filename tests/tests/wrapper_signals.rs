//! `run` behaves like the bare command, part II (SPEC W9–W12): which signals are
//! requests to end (W9), the signal state the workload inherits (W10), deadlines like coreutils
//! `timeout` (W11), terminals and pipes (W12), and the behaviours the peers' own suites check
//! (tini, dumb-init: inherited signal configuration, every signal forwarded in order, exit codes,
//! reaping, parent-death forwarding), written for this project. Each case runs the real
//! `refine-supervisor run` as a shell would.

use refine_tests::cli_support;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use cli_support::*;
use refine_tests::wait_until;

/// Waits until `path` exists (the workload wrote it), while `child` runs.
fn wait_file(child: &mut Child, path: &Path, what: &str) {
    let ok = wait_until(DEADLINE, || {
        path.exists() || child.try_wait().ok().flatten().is_some()
    });
    assert!(
        ok && path.exists(),
        "{what}: never seen ({:?})",
        child.try_wait()
    );
}

/// Sends `sig` to `run` and waits until the workload's trap for it left `seen` (the signal was
/// forwarded); `what` names it in the failure.
fn forward(child: &mut Child, sig: i32, seen: &Path, what: &str) {
    signal(child, sig);
    wait_file(child, seen, what);
}

// ---------------------------------------------------------------------------------------------
// W9 termination requests.

/// A daemon that reloads on SIGHUP keeps running: SIGHUP is forwarded and starts no timer.
#[test]
fn sighup_is_forwarded_and_starts_no_grace() {
    let home = Home::new();
    let hup = home.path().join("hup");
    let traps = format!("trap ': > {}' HUP; trap 'exit 7' USR1", hup.display());
    let (mut child, out) = trapping_run(&home, &["--stop-grace", "1s"], &traps);
    forward(&mut child, libc::SIGHUP, &hup, "the forwarded SIGHUP");
    // Time must pass here: well past the grace a SIGHUP would have started.
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        child.try_wait().unwrap().is_none(),
        "run ended after a SIGHUP: {:?}",
        child.try_wait()
    );
    let (st, doc) = signalled_document(&mut child, out, libc::SIGUSR1, "run after SIGUSR1");
    assert_eq!(st.code(), Some(7), "{st}: {doc}");
    assert_eq!(doc["outcome"], "completed", "{doc}");
}

/// SIGHUP, then SIGINT, then SIGTERM: each is forwarded; a different signal never escalates
/// (the workload's own TERM trap decides the status).
#[test]
fn different_signals_never_escalate_each_is_forwarded() {
    let home = Home::new();
    let (hup, int) = (home.path().join("hup"), home.path().join("int"));
    let traps = format!(
        "trap ': > {}' HUP; trap ': > {}' INT; trap 'exit 9' TERM",
        hup.display(),
        int.display()
    );
    let (mut child, out) = trapping_run(&home, &[], &traps);
    forward(&mut child, libc::SIGHUP, &hup, "the forwarded SIGHUP");
    forward(&mut child, libc::SIGINT, &int, "the forwarded SIGINT");
    let (st, doc) = signalled_document(&mut child, out, libc::SIGTERM, "run after HUP, INT, TERM");
    assert_eq!(st.code(), Some(9), "{st}: {doc}");
    assert_eq!(doc["outcome"], "completed", "{doc}");
}

/// `kill -TERM` to `run -- sh -c 'sleep 300 & wait'`: the shell dies of it, and the rest of the
/// scope (the background sleep) is stopped before `run` exits with the shell's status.
#[test]
fn sigterm_ends_the_whole_scope_once_the_workload_ended() {
    let home = Home::new();
    let (mut child, out, pid) = run_with_background_sleep(&home);
    let sleeper = pidfd(pid);
    let (st, doc) = signalled_document(&mut child, out, libc::SIGTERM, "run after SIGTERM");
    assert_eq!(st.code(), Some(143), "{st}: {doc}");
    assert!(
        exited_within(&sleeper, Duration::ZERO),
        "the background sleep outlived run: {doc}"
    );
    assert_eq!(doc["scope"], "exited", "{doc}");
}

/// Negative control: without a termination request the residue is kept (the workload's exit
/// alone stops nothing).
#[test]
fn without_a_request_the_background_job_is_kept_negative_control() {
    let home = Home::new();
    let pidfile = home.path().join("bg.pid");
    let script = format!("sleep 300 & echo $! > {}", pidfile.display());
    let (out, doc) = home.run_json(&["sh", "-c", &script]);
    assert!(out.status.success(), "{}", describe(&["run"], &out));
    let pid = refine_tests::read_pid(&pidfile);
    let sleeper = pidfd(pid);
    assert!(
        !exited_within(&sleeper, Duration::ZERO),
        "the residue was stopped: {doc}"
    );
    let id = doc["id"].as_str().unwrap().to_owned();
    let st = home.cli(&["stop", &id]);
    assert!(st.status.success(), "{}", describe(&["stop"], &st));
    assert!(exited_within(&sleeper, DEADLINE));
}

// ---------------------------------------------------------------------------------------------
// W11 deadlines like coreutils `timeout`; durations and sizes.

/// `run --timeout` alone is `timeout DUR CMD`: SIGTERM first (the workload's trap runs), and
/// `run` exits 124.
#[test]
fn timeout_alone_sends_sigterm_first_and_exits_124() {
    let home = Home::new();
    let script = "trap 'echo got-term; exit 0' TERM; while :; do sleep 0.05; done";
    let args = ["run", "--json", "--timeout", "1s", "--", "sh", "-c", script];
    let (out, doc) = home.cli_doc(&args);
    assert_eq!(doc["outcome"], "timed_out", "{doc}");
    assert_eq!(out.status.code(), Some(124), "{}", describe(&args, &out));
    let path = doc["stdout"]["path"].as_str().expect("stdout path");
    assert_eq!(std::fs::read_to_string(path).unwrap(), "got-term\n");
}

/// A workload that ignores the SIGTERM is killed after `--kill-after`'s default of 5 s: 137.
#[test]
fn timeout_alone_kills_a_term_ignorer_after_the_default_five_seconds() {
    let home = Home::new();
    let script = "trap '' TERM; while :; do sleep 0.05; done";
    let args = [
        "run",
        "--json",
        "--timeout",
        "0.5",
        "--",
        "sh",
        "-c",
        script,
    ];
    let started = Instant::now();
    let (out, doc) = home.cli_doc(&args);
    assert!(
        started.elapsed() >= Duration::from_millis(5500),
        "killed before the default grace"
    );
    assert_eq!(doc["outcome"], "timed_out", "{doc}");
    assert_eq!(doc["signal"], 9, "{doc}");
    assert_eq!(out.status.code(), Some(137), "{}", describe(&args, &out));
}

/// `--log-cap 1.5M` is 1.5 MiB.
#[test]
fn sizes_take_fractions() {
    let home = Home::new();
    let args = words("run --json --log-cap 1.5M -- head -c 2000000 /dev/zero");
    let (out, doc) = home.cli_doc(&args);
    assert!(out.status.success(), "{}", describe(&args, &out));
    assert_eq!(doc["stdout"]["bytes"], 1_572_864, "{doc}");
    assert_eq!(doc["stdout"]["complete"], false, "{doc}");
}

/// Every duration flag is bounded when it is parsed: a value the clock cannot hold is a usage
/// error naming the flag and the bound (exit 2), never an abort after something was done.
#[test]
fn every_duration_flag_refuses_what_the_clock_cannot_hold() {
    let home = Home::new();
    let huge = "18446744073709551615";
    let run = |flag: &'static str| vec!["run", flag, huge, "--", "true"];
    let mut cases: Vec<Vec<&str>> = RUN_DURATION_FLAGS.map(run).to_vec();
    cases.extend([
        vec!["stop", "--grace", huge, "0123456789abcdef0123456789abcdef"],
        vec![
            "wait",
            "--timeout",
            huge,
            "0123456789abcdef0123456789abcdef",
        ],
        vec!["gc", "--older-than", huge, "--dry-run"],
        vec!["gc", "--forget-after", huge, "--dry-run"],
        vec!["reap", "--checkout", "/nonexistent", "--budget", huge],
    ]);
    for flag in SERVE_DURATION_FLAGS {
        cases.push(vec!["serve", flag, huge]);
    }
    for args in &cases {
        for value in [huge, "300000y"] {
            let args: Vec<&str> = args
                .iter()
                .map(|a| if *a == huge { value } else { a })
                .collect();
            let out = home.cli(&args);
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
            let first = err.lines().next().unwrap_or_default();
            let at = args.iter().position(|a| *a == value).unwrap();
            let flag = args[at - 1];
            assert!(
                first.contains(flag) && first.contains("at most"),
                "{}",
                describe(&args, &out)
            );
        }
    }
}

/// Bare numbers are seconds, also with a fraction; fractions with a unit too.
#[test]
fn durations_take_fractions() {
    let home = Home::new();
    let args = words("run --json --timeout 0.5 --kill-after 0.5 -- sleep 60");
    let (_, doc) = home.cli_doc(&args);
    assert_eq!(doc["outcome"], "timed_out", "{doc}");
    for d in ["0.5", "1.5m", "0.25h", "2.5d"] {
        let args = ["gc", "--older-than", d, "--dry-run"];
        home.cli_ok(&args);
    }
}

/// The service API bounds its durations too: a launch or stop whose milliseconds the clock
/// cannot hold is refused (`bad_request`), and the service goes on.
#[test]
fn the_api_refuses_durations_the_clock_cannot_hold() {
    use std::io::{BufRead, BufReader, Write};
    let (home, mut served) = Home::with_service(&[]);
    let api = |line: &str| -> serde_json::Value {
        let mut s = std::os::unix::net::UnixStream::connect(home.run_dir().join("supervisor.sock"))
            .unwrap();
        s.write_all(line.as_bytes()).unwrap();
        let mut resp = String::new();
        BufReader::new(s).read_line(&mut resp).unwrap();
        serde_json::from_str(&resp).unwrap_or_else(|e| panic!("{e}: {resp:?} for {line}"))
    };
    let huge = u64::MAX;
    for field in words("timeout_ms idle_timeout_ms kill_after_ms wait_for_slot_ms") {
        let line = format!(
            "{{\"v\":1,\"op\":\"launch\",\"argv\":[\"true\"],\"kind\":\"command\",\"label\":\"\",\"cwd\":null,\"env\":{{}},\"meta\":{{}},\"pty\":false,\"{field}\":{huge}}}\n"
        );
        let doc = api(&line);
        assert_eq!(doc["ok"], false, "{field}: {doc}");
        assert_eq!(doc["error"]["kind"], "bad_request", "{field}: {doc}");
    }
    let doc = api(&format!(
        "{{\"v\":1,\"op\":\"stop\",\"id\":\"0123456789abcdef0123456789abcdef\",\"grace_ms\":{huge}}}\n"
    ));
    assert_eq!(doc["error"]["kind"], "bad_request", "{doc}");
    let list = api("{\"v\":1,\"op\":\"list\"}\n");
    assert_eq!(list["ok"], true, "the service went on: {list}");
    served.signal(rustix::process::Signal::TERM);
    assert!(served.wait().success());
}

// ---------------------------------------------------------------------------------------------
// W10 inherited signal state.

/// Bit of signal `sig` in a `/proc/PID/status` signal set.
fn bit(sig: i32) -> u64 {
    1 << (sig - 1)
}

/// The `SigIgn` and `SigBlk` sets of a `/proc/PID/status` text.
fn sig_sets(status: &str) -> (u64, u64) {
    let field = |key| refine_tests::status_mask(status, key);
    (field("SigIgn:"), field("SigBlk:"))
}

/// `cmd` starts with `ignored` set to `SIG_IGN` and `blocked` in its mask, as `nohup` or a
/// shell's `&` job leaves them.
fn with_signal_state(
    cmd: &mut std::process::Command,
    ignored: &'static [i32],
    blocked: &'static [i32],
) {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec only async-signal-safe calls (signal, sigemptyset,
    // sigaddset, sigprocmask) on a local set; nothing is allocated.
    unsafe {
        cmd.pre_exec(move || {
            for &s in ignored {
                libc::signal(s, libc::SIG_IGN);
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &s in blocked {
                libc::sigaddset(&mut set, s);
            }
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
}

/// The workload inherits what `run` inherited: its ignored dispositions and its blocked mask,
/// as the bare command would (tini's sigconf check).
#[test]
fn the_workload_inherits_the_ignored_and_blocked_signals_of_run() {
    let home = Home::new();
    let mut cmd = home.command(&["run", "--", "grep", "^Sig", "/proc/self/status"]);
    with_signal_state(
        &mut cmd,
        &[libc::SIGUSR1, libc::SIGHUP],
        &[libc::SIGUSR2, libc::SIGTERM],
    );
    let out = output_of(cmd);
    assert!(out.status.success(), "{}", describe(&["run"], &out));
    let (ign, blk) = sig_sets(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        ign & (bit(libc::SIGUSR1) | bit(libc::SIGHUP)),
        bit(libc::SIGUSR1) | bit(libc::SIGHUP),
        "SigIgn {ign:x}"
    );
    assert_eq!(
        blk,
        bit(libc::SIGUSR2) | bit(libc::SIGTERM),
        "SigBlk {blk:x}"
    );
    // Negative control: a caller that ignores and blocks nothing gives a clean workload.
    let out = home.cli(&["run", "--", "grep", "^Sig", "/proc/self/status"]);
    let (ign, blk) = sig_sets(&String::from_utf8_lossy(&out.stdout));
    assert_eq!((ign, blk), (0, 0), "{}", describe(&["run"], &out));
}

/// `nohup run -- job`, then SIGHUP to `run`: the job ignores it (it inherited the `SIG_IGN`)
/// and `run` does not relay it; the job lives on.
#[test]
fn nohup_run_then_sighup_the_job_survives() {
    let home = Home::new();
    let ready = home.path().join("ready");
    let script = format!(": > {}; while :; do sleep 0.05; done", ready.display());
    let mut cmd = home.command(&["run", "--json", "--", "sh", "-c", &script]);
    with_signal_state(&mut cmd, &[libc::SIGHUP], &[]);
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn run");
    let out = collect(child.stdout.take().expect("stdout"));
    wait_file(&mut child, &ready, "the workload's ready file");
    signal(&child, libc::SIGHUP);
    // Time must pass: the HUP had its chance to end the job.
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the job died of SIGHUP: {:?}",
        child.try_wait()
    );
    let (st, doc) = signalled_document(&mut child, out, libc::SIGTERM, "run after SIGTERM");
    assert_eq!(st.code(), Some(128 + libc::SIGTERM), "{st}: {doc}");
}

/// Launches the service makes start clean whatever the service inherited (G8).
#[test]
fn service_launches_start_clean() {
    let home = Home::new();
    let mut cmd = home.command(&["serve"]);
    with_signal_state(&mut cmd, &[libc::SIGUSR1], &[libc::SIGUSR2]);
    let mut serve = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn serve");
    let sock = home.run_dir().join("supervisor.sock");
    assert!(wait_until(DEADLINE, || {
        std::os::unix::net::UnixStream::connect(&sock).is_ok()
    }));
    let out = home.cli(&words("run --detach --json -- grep ^Sig /proc/self/status"));
    assert!(out.status.success(), "{}", describe(&["run"], &out));
    let id = parse(&["run"], &out)["id"].as_str().unwrap().to_owned();
    home.wait_ended(&id);
    let text =
        std::fs::read_to_string(home.run_dir().join("logs").join(format!("{id}.stdout"))).unwrap();
    assert_eq!(sig_sets(&text), (0, 0), "{text}");
    signal(&serve, libc::SIGTERM);
    let st = wait_bounded(&mut serve, DEADLINE, "serve after SIGTERM");
    assert!(st.success(), "{st}");
}

// ---------------------------------------------------------------------------------------------
// W12 terminals and pipes.

/// `run --pty -- ARGV` with `input` written to its stdin pipe and closed (with `None`, stdin is
/// `/dev/null`): how it ended and what it printed.
fn pty_run(home: &Home, argv: &[&str], input: Option<&[u8]>) -> (ExitStatus, String) {
    use std::io::Write;
    let mut args = vec!["run", "--pty", "--"];
    args.extend_from_slice(argv);
    let mut child = home
        .command(&args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn run");
    let out = collect(child.stdout.take().expect("stdout"));
    if let Some(bytes) = input {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(bytes).expect("write stdin");
    }
    let what = format!("{input:?} | refine-supervisor {}", args.join(" "));
    let st = wait_bounded(&mut child, DEADLINE, &what);
    (
        st,
        String::from_utf8_lossy(&out.join().unwrap()).into_owned(),
    )
}

/// `printf 'hi\n' | run --pty -- head -n 1`: the input reaches the terminal, and the command
/// ends at once (as under `script`).
#[test]
fn piped_input_reaches_a_pty_launch() {
    let home = Home::new();
    let (st, out) = pty_run(&home, &["head", "-n", "1"], Some(b"hi\n"));
    assert!(st.success(), "{st}: {out:?}");
    assert!(out.contains("hi"), "{out:?}");
}

/// `run --pty -- sh -c read </dev/null`: the end of input reaches the terminal (VEOF), `read`
/// returns, the command ends; likewise after a last line without its newline.
#[test]
fn the_end_of_a_non_terminal_stdin_reaches_a_pty_launch() {
    let home = Home::new();
    let (st, out) = pty_run(&home, &["sh", "-c", "read x; echo read-ended"], None);
    assert!(out.contains("read-ended"), "{st}: {out:?}");

    let read = ["sh", "-c", "read x; echo got:$x"];
    let (st, out) = pty_run(&home, &read, Some(b"partial"));
    assert!(out.contains("got:partial"), "{st}: {out:?}");
}

/// `run --json -- sh -c 'exit 3' | true`: the reader of `run`'s stdout is gone when the document
/// is printed; `run` still exits with the workload's status (or 141), never 0.
#[test]
fn the_status_survives_a_gone_stdout_reader() {
    let home = Home::new();
    let (r, w) = rustix::pipe::pipe().expect("pipe");
    drop(r);
    let mut cmd = home.command(&["run", "--json", "--", "sh", "-c", "exit 3"]);
    cmd.stdout(std::process::Stdio::from(w))
        .stderr(Stdio::piped());
    let out = cmd.output().expect("run");
    let code = out.status.code().or(out.status.signal().map(|s| 128 + s));
    assert!(
        matches!(code, Some(3) | Some(141)),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---------------------------------------------------------------------------------------------
// What the peers' own suites check (tini `test/`, dumb-init `tests/`), as this project's tests.

/// tini's sigconf check: the workload starts with what the caller ignored (SIGTTOU, SIGSEGV,
/// SIGINT) and blocked (SIGTTIN, SIGILL, SIGTERM), including signals `run` itself relays. The
/// probe is `cat`: `grep` installs its own SIGSEGV handler, and `dash` resets SIGSEGV.
#[test]
fn peer_sigconf_ignored_and_blocked_signals_survive_the_wrapper() {
    let home = Home::new();
    let mut cmd = home.command(&["run", "--", "cat", "/proc/self/status"]);
    with_signal_state(
        &mut cmd,
        &[libc::SIGTTOU, libc::SIGSEGV, libc::SIGINT],
        &[libc::SIGTTIN, libc::SIGILL, libc::SIGTERM],
    );
    let out = output_of(cmd);
    assert!(out.status.success(), "{}", describe(&["run"], &out));
    let (ign, blk) = sig_sets(&String::from_utf8_lossy(&out.stdout));
    let want_ign = bit(libc::SIGTTOU) | bit(libc::SIGSEGV) | bit(libc::SIGINT);
    assert_eq!(ign & want_ign, want_ign, "SigIgn {ign:x}");
    assert_eq!(
        blk,
        bit(libc::SIGTTIN) | bit(libc::SIGILL) | bit(libc::SIGTERM),
        "SigBlk {blk:x}"
    );
}

/// dumb-init's `test_proxies_signals`: every normal signal sent to the wrapper reaches the
/// workload, each once and in the order sent. Normal here: 1–31 but SIGKILL/SIGSTOP (the kernel's),
/// SIGCHLD (about `run`'s own child) and the job-control stops (which stop `run` too, tested in
/// `wrapper.rs`). SIGPIPE sent with `kill` is forwarded like the rest (the kernel's SIGPIPE for
/// `run`'s own broken stdout is not: `the_status_survives_a_gone_stdout_reader`); the fault
/// signals sent with `kill` (SEGV, BUS, ILL, FPE, TRAP, SYS) are forwarded too; plus real-time
/// signals.
#[test]
fn peer_every_normal_signal_is_forwarded_once_in_order() {
    use std::io::{BufRead, BufReader};
    let home = Home::new();
    let printer = refine_tests::bin("signal-printer");
    let printer = printer.to_str().unwrap();
    let mut child = home.spawn_cli(&["run", "--", printer], Stdio::piped());
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next = || lines.next().and_then(|l| l.ok()).unwrap_or_default();
    assert_eq!(next(), "ready");
    let skipped = [
        libc::SIGKILL,
        libc::SIGSTOP,
        libc::SIGCHLD,
        libc::SIGTSTP,
        libc::SIGTTIN,
        libc::SIGTTOU,
    ];
    let rt = [libc::SIGRTMIN(), libc::SIGRTMIN() + 5, libc::SIGRTMAX()];
    let sent: Vec<i32> = (1..32).filter(|s| !skipped.contains(s)).chain(rt).collect();
    for &sig in &sent {
        signal(&child, sig);
        assert_eq!(
            next(),
            sig.to_string(),
            "after signal {sig} (sent so far: {sent:?})"
        );
    }
    // SIGINT a second time: the request again ends the scope (W9).
    signal(&child, libc::SIGINT);
    let st = wait_bounded(&mut child, DEADLINE, "run after the second SIGINT");
    assert_eq!(st.code(), Some(137), "{st}");
}

/// tini's and dumb-init's exit status tests: every code 0–255 comes back as it is, and a death
/// by signal N as 128+N.
#[test]
fn peer_exit_codes_and_signal_deaths_come_back_as_they_are() {
    let home = Home::new();
    for code in (0..=255).step_by(3).chain([1, 2, 126, 127, 128, 254, 255]) {
        let script = format!("exit {code}");
        let out = home.cli(&["run", "--", "sh", "-c", &script]);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{}",
            describe(&["run", &script], &out)
        );
    }
    for sig in [
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGKILL,
        libc::SIGUSR1,
    ] {
        let script = format!("kill -{sig} $$");
        let out = home.cli(&["run", "--", "sh", "-c", &script]);
        assert_eq!(
            out.status.code(),
            Some(128 + sig),
            "{}",
            describe(&["run", &script], &out)
        );
    }
}

/// `/proc/PID/task/*/children` of `pid`, each with its state letter.
fn children_of(pid: u32) -> Vec<(u32, char)> {
    let mut kids = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return kids;
    };
    for t in tasks.flatten() {
        let list = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        for k in list
            .split_whitespace()
            .filter_map(|k| k.parse::<u32>().ok())
        {
            let stat = std::fs::read_to_string(format!("/proc/{k}/stat")).unwrap_or_default();
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].trim_start().chars().next())
                .unwrap_or('?');
            kids.push((k, state));
        }
    }
    kids
}

/// tini's reaping test: orphans the workload leaves behind are adopted and reaped while the
/// workload runs (no zombie stays under the guardian), and the scope's end waits for them.
#[test]
fn peer_orphans_are_reaped_no_zombie_stays() {
    let home = Home::new();
    let ready = home.path().join("ready");
    let guardian_file = home.path().join("guardian");
    // Five orphans that exit at once (each subshell exits right after its fork), then a wait.
    let script = format!(
        "for i in 1 2 3 4 5; do (sh -c 'exit 0' &); done; echo $PPID > {}; : > {}; sleep 300",
        guardian_file.display(),
        ready.display()
    );
    let mut child = home.spawn_cli(
        &["run", "--json", "--", "sh", "-c", &script],
        Stdio::piped(),
    );
    let out = collect(child.stdout.take().expect("stdout"));
    wait_file(&mut child, &ready, "the workload's ready file");
    let guardian: u32 = std::fs::read_to_string(&guardian_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut kids = Vec::new();
    let reaped = wait_until(DEADLINE, || {
        kids = children_of(guardian);
        kids.iter().all(|&(_, s)| s != 'Z') && kids.len() == 1
    });
    assert!(reaped, "the guardian's children: {kids:?}");
    let (st, doc) = signalled_document(&mut child, out, libc::SIGTERM, "run after SIGTERM");
    assert_eq!(st.code(), Some(143), "{st}: {doc}");
    assert_eq!(doc["scope"], "exited", "{doc}");
}

/// tini's pdeathsignal test, for a wrapper: when `run` itself is killed (SIGKILL, nothing to
/// forward), the guardian sends the workload the parent-death signal (SIGKILL for `run`) and the
/// scope still ends with a receipt.
#[test]
fn peer_the_launchers_death_reaches_the_workload() {
    let home = Home::new();
    let pidfile = home.path().join("pid");
    let mut child = home.spawn_sh(
        &format!("echo $$ > {}; exec sleep 300", pidfile.display()),
        Stdio::null(),
    );
    let mut pid = None;
    assert!(wait_until(DEADLINE, || {
        pid = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        pid.is_some()
            && std::fs::read_to_string(format!("/proc/{}/comm", pid.unwrap()))
                .is_ok_and(|c| c.trim() == "sleep")
    }));
    let workload = pidfd(pid.unwrap());
    signal(&child, libc::SIGKILL);
    let _ = child.wait();
    assert!(
        exited_within(&workload, DEADLINE),
        "the workload outlived its launcher"
    );
    let rows = home.ps();
    let id = rows[0]["id"].as_str().unwrap().to_owned();
    home.wait_state(&id, "exited");
}
