//! Issue 39 (L1, L2, L4): the scope owns its output. A detached scope's guardian drains its
//! stdout and stderr into the artifacts itself, so a `kill -9` of the service breaks no pipe:
//! the workload writes on, ends with its own status, and the artifact holds every byte.

use refine_tests::cli_support;

use std::io::Write;
use std::path::Path;

use cli_support::{describe, detach, mkfifo, show, skip_unless_root, Home, Serving, DEADLINE};
use refine_tests::wait_until;

/// Opens the FIFO for writing and closes it: the workload's `read` returns.
fn release(path: &Path) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open the fifo");
    f.write_all(b"go\n").expect("write the fifo");
}

fn artifact(home: &Home, id: &str, stream: &str) -> String {
    std::fs::read_to_string(home.run_dir().join("logs").join(format!("{id}.{stream}")))
        .unwrap_or_default()
}

/// L1, L4: `kill -9` of `serve` while a detached scope writes. Before, the service held the
/// read ends: the workload's next write broke (SIGPIPE, "signal 13") and the artifact held the
/// lines written before the kill. Now it writes its 2,000 lines to the end, exits 7 of its own,
/// and the restarted service finds it exited with a verified receipt.
#[test]
fn a_killed_service_breaks_no_detached_writer() {
    let (home, mut svc) = Home::with_service(&[]);
    let gate = home.path().join("gate");
    mkfifo(&gate);
    let script = format!(
        "for i in 1 2 3 4; do echo line$i; done; read go < {gate}; \
         i=5; while [ $i -le 2000 ]; do echo line$i; echo err$i >&2; i=$((i+1)); done; exit 7",
        gate = gate.display()
    );
    let id = detach(&home, &["sh", "-c", &script]);
    assert!(
        wait_until(DEADLINE, || artifact(&home, &id, "stdout")
            .contains("line4\n")),
        "the first lines never reached the artifact"
    );
    svc.signal(rustix::process::Signal::KILL);
    svc.wait();
    // The workload writes on only now, with no service running.
    release(&gate);
    let _svc = Serving::start(&home, &[]);
    home.wait_ended(&id);
    let doc = show(&home, &id);
    let out = artifact(&home, &id, "stdout");
    let want: String = (1..=2000).map(|i| format!("line{i}\n")).collect();
    assert!(
        out == want,
        "stdout holds {} of 2000 lines (last {:?}); show: {doc}",
        out.lines().count(),
        out.lines().last()
    );
    let err = artifact(&home, &id, "stderr");
    assert_eq!(err.lines().count(), 1996, "stderr: {doc}");
    let args = ["show", "--json", &id];
    let text = doc.to_string();
    assert!(
        !text.contains("\"signal\":13") && !text.contains("PIPE"),
        "the writer died of SIGPIPE: {text}"
    );
    assert_eq!(
        doc.pointer("/receipt/exit_code").and_then(|v| v.as_i64()),
        Some(7),
        "{}",
        describe(&args, &home.cli(&args))
    );
}

/// L6: `serve --live-restore` on SIGTERM leaves its launches running (for an upgrade or a
/// restart): the writer goes on, and the next service adopts it. Without the flag, W8 holds
/// (SIGTERM ends the launches: `serve_shutdown.rs`).
#[test]
fn live_restore_keeps_the_launches_across_a_restart() {
    let (home, mut svc) = Home::with_service(&["--live-restore"]);
    let gate = home.path().join("gate");
    mkfifo(&gate);
    let script = format!(
        "echo before; read go < {gate}; i=0; while [ $i -lt 500 ]; do echo after$i; i=$((i+1)); done",
        gate = gate.display()
    );
    let id = detach(&home, &["sh", "-c", &script]);
    assert!(
        wait_until(DEADLINE, || artifact(&home, &id, "stdout")
            .contains("before\n")),
        "the first line never reached the artifact"
    );
    svc.signal(rustix::process::Signal::TERM);
    assert!(
        svc.wait().success(),
        "serve --live-restore did not exit cleanly"
    );
    assert_eq!(
        home.state(&id),
        "live",
        "the launch did not outlive the service"
    );
    release(&gate);
    let _svc = Serving::start(&home, &[]);
    home.wait_ended(&id);
    let doc = show(&home, &id);
    assert_eq!(doc["receipt"]["exit_code"], 0, "{doc}");
    let out = artifact(&home, &id, "stdout");
    assert_eq!(out.lines().count(), 501, "{out}");
}

/// L2: the guardian's time index answers `logs --since/--until` and `-t`, both streams in the
/// order they were written; a scope without an index (a foreground `run`) is refused in one
/// line, never answered by a file's modification time.
#[test]
fn logs_filter_by_the_time_index() {
    let (home, _svc) = Home::with_service(&[]);
    let (one, two) = (home.path().join("one"), home.path().join("two"));
    mkfifo(&one);
    mkfifo(&two);
    let script = format!(
        "echo early; read go < {one}; echo middle >&2; read go < {two}; echo late",
        one = one.display(),
        two = two.display()
    );
    let id = detach(&home, &["sh", "-c", &script]);
    // The batch is in the index once its record is (written right after the bytes).
    let indexed = |stream: &str| {
        std::fs::metadata(
            home.run_dir()
                .join("logs")
                .join(format!("{id}.{stream}-index")),
        )
        .map_or(0, |m| m.len())
            >= 32
    };
    assert!(wait_until(DEADLINE, || indexed("stdout")));
    assert_eq!(artifact(&home, &id, "stdout"), "early\n");
    // A time after the batch just seen and before the next one (released only afterwards).
    // The flag is read in whole milliseconds: the time is taken 2 ms after the batch's record
    // and the next batch comes 2 ms after it, pauses of the test's own around a clock
    // reading, not waits for anything.
    let between = |_: &Home| {
        std::thread::sleep(std::time::Duration::from_millis(2));
        let t = jiff::Timestamp::now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        t.to_string()
    };
    let t1 = between(&home);
    release(&one);
    assert!(wait_until(DEADLINE, || indexed("stderr")));
    assert_eq!(artifact(&home, &id, "stderr"), "middle\n");
    let t2 = between(&home);
    release(&two);
    home.wait_ended(&id);

    let text = |args: &[&str]| {
        let out = home.cli(args);
        assert!(out.status.success(), "{}", describe(args, &out));
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(text(&["logs", "--since", &t2, &id]).0, "late\n");
    assert_eq!(text(&["logs", "--until", &t1, &id]).0, "early\n");
    let (out, err) = text(&["logs", "--since", &t1, "--until", &t2, &id]);
    assert_eq!((out.as_str(), err.as_str()), ("", "middle\n"));
    // -t: every line with its time, in write order, stderr's line among stdout's.
    let (out, err) = text(&["logs", "-t", "--stdout", &id]);
    let stamped: Vec<&str> = out.lines().collect();
    assert_eq!(stamped.len(), 2, "{out}");
    for (line, want) in stamped.iter().zip(["early", "late"]) {
        let (stamp, rest) = line.split_once(' ').expect("a stamp");
        assert_eq!(rest, want);
        assert!(stamp.parse::<jiff::Timestamp>().is_ok(), "{stamp}");
    }
    assert!(err.is_empty(), "{err}");

    // Negative control: a foreground run's output has no index.
    let out = home.cli(&["run", "--label", "fg", "--", "echo", "hi"]);
    assert!(out.status.success());
    let args = ["logs", "--since", "1h", "fg"];
    let out = home.cli(&args);
    let line = cli_support::assert_one_line_error(&args, &out);
    assert!(line.contains("no time index"), "{line}");
}

/// The service's ends of its unnamed sockets (its guardians' channels among them), taken with
/// `pidfd_getfd`: while the test holds them, no guardian reads the end of its channel.
fn hold_unnamed_sockets(pid: u32) -> Vec<std::os::fd::OwnedFd> {
    use std::os::unix::fs::MetadataExt;
    // Sockets with a path (the listener) are left: a client would connect to a held one.
    let named: std::collections::BTreeSet<u64> = std::fs::read_to_string("/proc/net/unix")
        .expect("/proc/net/unix")
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 7).then(|| f[6].parse().ok()).flatten()
        })
        .collect();
    let pidfd = cli_support::pidfd(pid);
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the service's fd table")
        .flatten()
        .filter(|e| {
            std::fs::metadata(e.path()).is_ok_and(|m| {
                use std::os::unix::fs::FileTypeExt;
                m.file_type().is_socket() && !named.contains(&m.ino())
            })
        })
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|n| {
            rustix::process::pidfd_getfd(&pidfd, n, rustix::process::PidfdGetfdFlags::empty()).ok()
        })
        .collect()
}

/// L3, L4: a service launch's lock is held by its guardian for the service and let go once the
/// guardian reads the end of the dead service's channel. A guardian that reads it late (here the
/// test holds the service's end across recovery's first wait for the lock) does not cost its
/// scope the adoption: recovery asks again, within 2 s in all, for the service launches it
/// found held. Without that, recovery reported the scope `owned` and left it to no one until
/// the next start.
#[test]
fn recovery_waits_for_a_guardian_slow_to_let_go_of_the_lock() {
    if skip_unless_root("pidfd_getfd of the service's descriptors needs root") {
        return;
    }
    let (home, mut svc) = Home::with_service(&[]);
    let id = detach(&home, &["sleep", "600"]);
    home.wait_state(&id, "live");
    let held = hold_unnamed_sockets(svc.child.id());
    assert!(!held.is_empty(), "no channel of the service was found");
    svc.signal(rustix::process::Signal::KILL);
    svc.wait();
    let recover = home
        .command(&["recover", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn recover");
    // Time must pass: recovery's first wait for the lock (100 ms) is over by then.
    std::thread::sleep(std::time::Duration::from_millis(500));
    drop(held);
    let out = recover.wait_with_output().expect("recover");
    let doc = cli_support::json_of(&out.stdout);
    let action = doc["registrations"]
        .as_array()
        .and_then(|r| r.iter().find(|e| e["id"] == id.as_str()))
        .map(|e| e["action"].clone());
    let _ = home.cli(&["stop", &id]);
    assert_eq!(
        action,
        Some(serde_json::json!("adopted")),
        "recovery: {doc}"
    );
}
