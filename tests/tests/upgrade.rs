//! Issue 39 (L5): `serve` upgrades in place. `refine-supervisor upgrade` (or SIGHUP, the
//! unit's `systemctl reload`) makes the service execute the binary now at the path it was
//! started from: the same pid, the listening socket carried across `execve` (no connect is
//! refused meanwhile), every launch kept and adopted. A new binary that does not run is refused
//! and the old one serves on.

use refine_tests::cli_support;

use std::io::{BufRead, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use cli_support::{describe, detach, show, Home, DEADLINE};
use refine_tests::{bin, wait_until};

/// A copy of the supervisor at `dir/refine-supervisor`, put there by rename (a new inode, as
/// an install does). The copy is written by `cp`, not by this process: a child that another
/// test forks while this process held the new file open for writing would hold it too, until
/// its exec, and an exec of the copy meanwhile fails with ETXTBSY.
fn install(dir: &Path) -> PathBuf {
    let to = dir.join("refine-supervisor");
    let tmp = dir.join(".refine-supervisor.new");
    let copied = Command::new("cp")
        .arg(bin("refine-supervisor"))
        .arg(&tmp)
        .status()
        .expect("run cp");
    assert!(copied.success(), "cp the supervisor: {copied}");
    std::fs::rename(&tmp, &to).expect("install it");
    to
}

fn exe_inode(pid: u32) -> u64 {
    std::fs::metadata(format!("/proc/{pid}/exe"))
        .expect("the service's exe")
        .ino()
}

/// `serve` from the installed copy (the guardian named, since none is beside the copy).
fn serve_from(home: &Home, exe: &Path) -> Child {
    let child = Command::new(exe)
        .arg("--home")
        .arg(home.path())
        .args(["--port", &home.port.to_string(), "serve"])
        .env("REFINE_GUARDIAN", bin("refine-guardian"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(home.path().join("serve.log")).expect("the service's log"),
        ))
        .spawn()
        .expect("spawn serve");
    let sock = home.run_dir().join("supervisor.sock");
    assert!(
        wait_until(DEADLINE, || std::os::unix::net::UnixStream::connect(&sock)
            .is_ok()),
        "serve did not come up"
    );
    child
}

/// The service of `home` from a fresh copy of the supervisor (its folder, its path, the
/// service), as each test here starts it.
fn serve_copy(home: &Home) -> (tempfile::TempDir, PathBuf, Child) {
    let dir = tempfile::tempdir().unwrap();
    let exe = install(dir.path());
    let svc = serve_from(home, &exe);
    (dir, exe, svc)
}

/// Clients in a loop, each a `list` request on a connection of its own; counts answers and
/// failures (a refused connect, a connection closed without an answer).
struct Clients {
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicUsize>,
    failed: Arc<std::sync::Mutex<Vec<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Clients {
    fn start(sock: PathBuf) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (s, a, f) = (stop.clone(), answered.clone(), failed.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Acquire) {
                let r = (|| -> std::io::Result<()> {
                    let mut c = std::os::unix::net::UnixStream::connect(&sock)?;
                    c.write_all(b"{\"v\":1,\"op\":\"list\"}\n")?;
                    // One reply line: the connection stays open for more requests.
                    let mut reply = String::new();
                    std::io::BufReader::new(&mut c).read_line(&mut reply)?;
                    if !reply.contains("\"ok\":true") {
                        return Err(std::io::Error::other(format!("reply {reply:?}")));
                    }
                    Ok(())
                })();
                match r {
                    Ok(()) => {
                        a.fetch_add(1, Ordering::AcqRel);
                    }
                    Err(e) => {
                        f.lock().unwrap().push(e.to_string());
                        // A service that is down refuses at once: a client retries at a pace.
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                }
            }
        });
        Clients {
            stop,
            answered,
            failed,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::Release);
        self.thread.take().unwrap().join().unwrap();
        (
            self.answered.load(Ordering::Acquire),
            self.failed.lock().unwrap().clone(),
        )
    }
}

#[test]
fn an_upgrade_in_place_keeps_the_pid_the_socket_and_the_launches() {
    let home = Home::new();
    let (dir, _, mut svc) = serve_copy(&home);
    let pid = svc.id();
    let id = detach(&home, &["sh", "-c", "echo ready; exec sleep 600"]);
    assert!(wait_until(DEADLINE, || home.state(&id) == "live"));
    let clients = Clients::start(home.run_dir().join("supervisor.sock"));
    for round in 0..3 {
        let before = exe_inode(pid);
        install(dir.path());
        let args = ["upgrade"];
        let out = home.cli(&args);
        assert!(
            out.status.success(),
            "round {round}: {}\nthe service's log:\n{}",
            describe(&args, &out),
            std::fs::read_to_string(home.path().join("serve.log")).unwrap_or_default()
        );
        assert_ne!(
            exe_inode(pid),
            before,
            "round {round}: the old binary still runs"
        );
        assert_eq!(
            home.state(&id),
            "live",
            "round {round}: the launch did not survive"
        );
    }
    let (answered, failed) = clients.finish();
    eprintln!("clients: {answered} answered, {} failed", failed.len());
    assert!(
        failed.is_empty(),
        "requests failed across the upgrades: {failed:?}"
    );
    assert!(answered > 0);
    // The adopted launch is still the service's to stop, with proof.
    let out = home.cli(&["stop", &id]);
    assert!(out.status.success(), "{}", describe(&["stop"], &out));
    assert!(show(&home, &id)["receipt"].is_object());
    assert!(svc.try_wait().unwrap().is_none(), "the service exited");
    let _ = svc.kill();
    let _ = svc.wait();
}

/// H7 across L5: the new image probes the scopes the old one probed. The record names the
/// same process (an upgrade keeps the pid and its start time), so "its prober is alive" must
/// not keep the new image from taking the probes over.
#[test]
fn an_upgrade_in_place_keeps_probing() {
    let home = Home::new();
    let (dir, _, mut svc) = serve_copy(&home);
    let flag = home.path().join("up");
    let probe = format!("test -e {}", flag.display());
    let id = cli_support::detach_with(
        &home,
        &[
            "--health-cmd",
            &probe,
            "--health-interval",
            "100ms",
            "--health-retries",
            "1",
        ],
        &["sleep", "600"],
    );
    let health = |state: &str| {
        let mut last = serde_json::Value::Null;
        let got = wait_until(DEADLINE, || {
            last = show(&home, &id)["health"].clone();
            last["state"] == state
        });
        (got, last)
    };
    let (got, last) = health("unhealthy");
    assert!(got, "never unhealthy before the upgrade: {last:#}");
    install(dir.path());
    let out = home.cli(&["upgrade"]);
    assert!(out.status.success(), "{}", describe(&["upgrade"], &out));
    std::fs::write(&flag, b"").unwrap();
    let (got, last) = health("healthy");
    assert!(got, "no probe after the upgrade: {last:#}");
    home.cli(&["stop", &id]);
    let _ = svc.kill();
    let _ = svc.wait();
}

/// A SIGHUP that comes while the new image is still starting (a second `systemctl reload` at
/// once) is held for it, not taken by the default action: the signals that end or upgrade the
/// service stay blocked across `execve` until the new image has its handlers. The test sends
/// the second SIGHUP the moment `/proc/PID/exe` names the new binary, five times over.
#[test]
fn a_sighup_while_the_new_image_starts_is_an_upgrade_not_the_end() {
    let home = Home::new();
    let (dir, _, mut svc) = serve_copy(&home);
    let pid = svc.id();
    let hup = || {
        let st = Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(st.success(), "kill -HUP {pid}: {st}");
    };
    for round in 0..5 {
        let before = exe_inode(pid);
        install(dir.path());
        hup();
        // No event tells of an execve: a tight look at the link, so the second SIGHUP lands
        // in the new image's first milliseconds.
        let end = std::time::Instant::now() + DEADLINE;
        while std::fs::metadata(format!("/proc/{pid}/exe"))
            .map(|m| m.ino())
            .ok()
            == Some(before)
        {
            assert!(
                std::time::Instant::now() < end,
                "round {round}: the new binary did not start; its log:\n{}",
                std::fs::read_to_string(home.path().join("serve.log")).unwrap_or_default()
            );
            std::thread::yield_now();
        }
        install(dir.path());
        hup();
        assert!(
            svc.try_wait().unwrap().is_none(),
            "round {round}: the SIGHUP during the start ended the service; its log:\n{}",
            std::fs::read_to_string(home.path().join("serve.log")).unwrap_or_default()
        );
        // The held SIGHUP is an upgrade of its own: it ends with the service answering.
        let out = home.cli(&["ps"]);
        assert!(
            wait_until(DEADLINE, || home.cli(&["ps"]).status.success()
                || svc.try_wait().unwrap().is_some()),
            "round {round}: the service does not answer: {}\nits log:\n{}",
            describe(&["ps"], &out),
            std::fs::read_to_string(home.path().join("serve.log")).unwrap_or_default()
        );
        assert!(
            svc.try_wait().unwrap().is_none(),
            "round {round}: the service exited; its log:\n{}",
            std::fs::read_to_string(home.path().join("serve.log")).unwrap_or_default()
        );
    }
    let _ = svc.kill();
    let _ = svc.wait();
}

/// A new binary that does not run is refused; the old one serves on.
#[test]
fn a_broken_new_binary_leaves_the_old_one_serving() {
    let home = Home::new();
    let (dir, exe, mut svc) = serve_copy(&home);
    let pid = svc.id();
    let before = exe_inode(pid);
    let tmp = dir.path().join(".broken");
    std::fs::write(&tmp, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp, &exe).unwrap();
    let args = ["upgrade", "--timeout", "2s"];
    let out = home.cli(&args);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
    assert_eq!(exe_inode(pid), before, "the broken binary runs");
    assert!(svc.try_wait().unwrap().is_none(), "the service exited");
    let id = detach(&home, &["true"]);
    home.wait_ended(&id);
    let _ = svc.kill();
    let _ = svc.wait();
}

/// A new image that passes the preflight but never answers: `upgrade` gives up at its
/// `--timeout` with one line, instead of waiting for the reply for ever (its check that the
/// new image answers reads with the time that is left as the bound).
#[test]
fn an_upgrade_to_an_image_that_never_answers_ends_at_its_timeout() {
    let home = Home::new();
    let (dir, exe, mut svc) = serve_copy(&home);
    let pid = svc.id();
    let before = exe_inode(pid);
    let tmp = dir.path().join(".mute");
    let copied = Command::new("cp")
        .arg(bin("mute-service"))
        .arg(&tmp)
        .status()
        .expect("run cp");
    assert!(copied.success(), "cp the mute service: {copied}");
    std::fs::rename(&tmp, &exe).unwrap();
    let args = ["upgrade", "--timeout", "2s"];
    let mut cmd = home.command(&args);
    let mut up = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn upgrade");
    let fd = cli_support::pidfd(up.id());
    let ended = cli_support::exited_within(&fd, DEADLINE);
    if !ended {
        let _ = up.kill();
    }
    let out = up.wait_with_output().expect("wait for upgrade");
    let ran_mute = exe_inode(pid) != before;
    let _ = svc.kill();
    let _ = svc.wait();
    assert!(
        ended,
        "upgrade was still waiting {DEADLINE:?} after its 2s timeout (killed): {}",
        describe(&args, &out)
    );
    assert!(
        ran_mute,
        "the mute image never ran: {}",
        describe(&args, &out)
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{}", describe(&args, &out));
}

/// Item 7, the soak (bounded for two shared cores): 50 detached writers of sequence-numbered
/// lines (400 lines per write every 20 ms each: some 11 MB/s in all at full pace), 20 `kill -9`
/// and restarts of `serve` and 5 upgrades in place while they write: every writer ends 0 (a
/// write that failed, EPIPE included, exits 3), every artifact holds its 400,000 lines exactly
/// once and in order, every scope ends `exited` with a verified receipt. The writers' longest
/// single write is printed (timed inside the writer).
#[test]
fn a_soak_of_kills_and_upgrades_loses_no_line() {
    const SCOPES: usize = 50;
    const LINES: u64 = 400_000;
    let home = Home::new();
    let (dir, exe, mut svc) = serve_copy(&home);
    let producer = bin("cap-producer");
    let producer = producer.to_str().unwrap();
    let lines = LINES.to_string();
    let t0 = std::time::Instant::now();
    let ids: Vec<String> = (0..SCOPES)
        .map(|_| detach(&home, &[producer, "seq", &lines, "400", "20"]))
        .collect();
    let clients = Clients::start(home.run_dir().join("supervisor.sock"));
    let (mut kills, mut upgrades) = (0, 0);
    for cycle in 0..20 {
        svc.kill().unwrap();
        svc.wait().unwrap();
        kills += 1;
        svc = serve_from(&home, &exe);
        if cycle % 4 == 3 {
            install(dir.path());
            let out = home.cli(&["upgrade"]);
            assert!(out.status.success(), "{}", describe(&["upgrade"], &out));
            upgrades += 1;
        }
    }
    let (answered, failed) = clients.finish();
    let writing = ids.iter().filter(|id| home.state(id) == "live").count();
    let mut stall = 0u64;
    for id in &ids {
        home.wait_ended(id);
    }
    let took = t0.elapsed();
    let mut bytes = 0usize;
    for id in &ids {
        let doc = show(&home, id);
        assert_eq!(doc["receipt"]["exit_code"], 0, "a writer failed: {doc}");
        let logs = home.run_dir().join("logs");
        let out = std::fs::read_to_string(logs.join(format!("{id}.stdout"))).unwrap();
        bytes += out.len();
        let mut want = 1u64;
        for line in out.lines() {
            let n = line
                .strip_prefix("seq ")
                .and_then(|n| n.parse::<u64>().ok());
            assert_eq!(
                n,
                Some(want),
                "{id}: line {want} missing or doubled: {line:?}"
            );
            want += 1;
        }
        assert_eq!(want, LINES + 1, "{id}: {} of {LINES} lines", want - 1);
        let err = std::fs::read_to_string(logs.join(format!("{id}.stderr"))).unwrap();
        let us = err
            .trim()
            .strip_prefix("max-stall-us ")
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{id}: no stall figure: {err:?}"));
        stall = stall.max(us);
    }
    eprintln!(
        "soak: {SCOPES} scopes x {LINES} lines, {kills} kill -9, {upgrades} upgrades; \
         longest write {stall} us; {:.1} MB in {:.1} s until the last ended ({:.1} MB/s); \
         {writing} still writing after the last cycle; \
         requests {answered} answered, {} failed (during kills)",
        bytes as f64 / 1e6,
        took.as_secs_f64(),
        bytes as f64 / 1e6 / took.as_secs_f64(),
        failed.len()
    );
    let _ = svc.kill();
    let _ = svc.wait();
}
