//! `run --user` that cannot be turned against the operator, and a receipt that lands (SPEC X2,
//! X3, X5, W13), against the real binaries: a real pseudo-terminal, a real capability set, a
//! real full disk (a tiny tmpfs), the guardian's gate driven frame by frame.
//!
//! Every case needs root (another uid, `chown`, `mount`); each prints a skip reason otherwise.

use refine_tests::cli_support;

use std::os::fd::OwnedFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cli_support::*;
use refine_protocol::{Frame, WorkloadStatus};
use refine_tests::driver::{Guardian, Launch, Msg, PATIENCE};
use refine_tests::{passwd_ids, TinyDisk};

macro_rules! root_only {
    () => {
        if refine_tests::skip_unless_root_and_nobody("another uid, chown, mount") {
            return;
        }
    };
}

/// A directory every user may enter and write (0777).
fn public_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// Copies executables where any user may run them (the target dir may be private).
fn public_tools(names: &[(&str, PathBuf)]) -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let paths = names
        .iter()
        .map(|(name, src)| {
            let dst = dir.path().join(name);
            refine_tests::install_executable(&dst, &std::fs::read(src).unwrap());
            dst
        })
        .collect();
    (dir, paths)
}

fn helper(name: &str) -> PathBuf {
    refine_tests::bin(name)
}

/// Reads `fd` (non-blocking) until `needle` has been seen or the deadline passes; returns all.
fn read_until(fd: &OwnedFd, needle: &str, deadline: Duration) -> String {
    let flags = rustix::fs::fcntl_getfl(fd).unwrap();
    rustix::fs::fcntl_setfl(fd, flags | rustix::fs::OFlags::NONBLOCK).unwrap();
    let end = Instant::now() + deadline;
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains(needle) && Instant::now() < end {
        let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
        let _ = rustix::event::poll(
            &mut fds,
            Some(&rustix::time::Timespec {
                tv_sec: 0,
                tv_nsec: 100_000_000,
            }),
        );
        let mut buf = [0u8; 4096];
        match rustix::io::read(fd, &mut buf) {
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// X2: under a real terminal (a pseudo-terminal the test owns, whose session a shell leads, as
/// an operator's would), a `run --user nobody` workload has no controlling terminal (`tty_nr`
/// 0) and no descriptor of a terminal; the child it leaves behind, once `run` has returned,
/// cannot open `/dev/tty`, and its `TIOCSTI` types nothing into the caller's terminal.
#[test]
fn a_user_workload_has_no_terminal_and_types_nothing_into_the_callers() {
    root_only!();
    let home = Home::new();
    let (_tools, tools) = public_tools(&[("tty-probe", helper("tty-probe"))]);
    let dir = public_dir();
    let go = dir.path().join("go");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &go,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o666),
        0,
    )
    .unwrap();
    std::fs::set_permissions(&go, std::fs::Permissions::from_mode(0o666)).unwrap();

    let master = rustix::pty::openpt(
        rustix::pty::OpenptFlags::RDWR
            | rustix::pty::OpenptFlags::NOCTTY
            | rustix::pty::OpenptFlags::CLOEXEC,
    )
    .unwrap();
    rustix::pty::grantpt(&master).unwrap();
    rustix::pty::unlockpt(&master).unwrap();
    let slave_name = rustix::pty::ptsname(&master, Vec::new()).unwrap();
    let slave: OwnedFd = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(slave_name.to_str().unwrap())
        .unwrap()
        .into();

    // The operator's shell: it leads the terminal's session, runs `run`, then stays without
    // reading the terminal, so whatever is typed into it stays in its input queue.
    let mut shell = Command::new("setsid");
    shell
        .args([
            "--ctty",
            "sh",
            "-c",
            "\"$@\"; echo \"run-returned $?\"; exec sleep 600",
            "sh",
        ])
        .arg(refine_tests::bin("refine-supervisor"))
        .arg("--home")
        .arg(home.path())
        .args(["run", "--user", "nobody", "--cwd", "/", "--"])
        .arg(&tools[0])
        .arg(dir.path())
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave.try_clone().unwrap()));
    let mut shell = shell.spawn().unwrap();
    let printed = read_until(&master, "run-returned", DEADLINE);
    let workload = std::fs::read_to_string(dir.path().join("workload")).unwrap_or_default();

    // The left-behind child goes on only now, after `run` returned.
    let released = refine_tests::wait_until(DEADLINE, || {
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&go)
            .is_ok()
    });
    let child_report = dir.path().join("child");
    let reported = released && refine_tests::wait_until(DEADLINE, || child_report.exists());
    let child = std::fs::read_to_string(&child_report).unwrap_or_default();
    // Whatever was typed waits in the terminal's input queue.
    let typed = read_until(&slave, "PWNED", Duration::from_millis(300));
    let _ = shell.kill();
    let _ = shell.wait();

    let context =
        format!("terminal:\n{printed}\nworkload:\n{workload}\nchild:\n{child}\ntyped: {typed:?}");
    assert!(printed.contains("run-returned 0"), "{context}");
    assert!(
        workload.contains("tty_nr 0\n"),
        "a controlling terminal: {context}"
    );
    for line in workload.lines().filter(|l| l.starts_with("fd ")) {
        assert!(
            !line.contains("/dev/pts") && !line.contains("/dev/tty") && !line.contains("ptmx"),
            "a terminal descriptor reached the workload: {line}\n{context}"
        );
    }
    assert!(reported, "the left-behind child did not report: {context}");
    assert!(
        child.contains(&format!("tty {}\n", libc::ENXIO)),
        "/dev/tty opened: {context}"
    );
    assert!(!child.contains(" ok"), "{context}");
    assert!(
        typed.is_empty(),
        "typed into the caller's terminal: {context}"
    );
}

/// X3: a supervisor that is not root but holds CAP_SETUID/CAP_SETGID as ambient capabilities
/// (systemd `AmbientCapabilities=`) launches `--user daemon`: the workload has every capability
/// set empty (inheritable, permitted, effective, ambient) and daemon's ids; the supervisor's
/// own uid is refused in one line.
#[test]
fn capabilities_do_not_survive_the_user_switch() {
    root_only!();
    if Command::new("setpriv").arg("--help").output().is_err() {
        eprintln!("skipped: no setpriv (util-linux)");
        return;
    }
    let Some((daemon_uid, _)) = passwd_ids("daemon") else {
        eprintln!("skipped: no `daemon` user in /etc/passwd");
        return;
    };
    let (nobody_uid, nobody_gid) = passwd_ids("nobody").unwrap();
    let home = Home::new();
    rustix::fs::chown(
        home.path(),
        Some(rustix::fs::Uid::from_raw(nobody_uid)),
        Some(rustix::fs::Gid::from_raw(nobody_gid)),
    )
    .unwrap();
    let (_tools, tools) = public_tools(&[
        ("refine-supervisor", refine_tests::bin("refine-supervisor")),
        ("refine-guardian", refine_tests::bin("refine-guardian")),
    ]);
    let as_capable_nobody = |args: &[&str]| {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={nobody_uid}"))
            .arg(format!("--regid={nobody_gid}"))
            .args(words(
                "--clear-groups --inh-caps=+setuid,+setgid --ambient-caps=+setuid,+setgid --",
            ))
            .arg(&tools[0])
            .arg("--home")
            .arg(home.path())
            .args(args)
            .env("REFINE_GUARDIAN", &tools[1])
            .stdin(Stdio::null());
        output_of(c)
    };
    let args =
        words("run --user daemon --cwd / -- grep -E ^(Uid|Gid|Groups|Cap) /proc/self/status");
    let out = as_capable_nobody(&args);
    assert!(out.status.success(), "{}", describe(&args, &out));
    let status = String::from_utf8_lossy(&out.stdout).into_owned();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| panic!("no {name} in:\n{status}"))
    };
    for set in ["CapInh:", "CapPrm:", "CapEff:", "CapAmb:"] {
        assert_eq!(field(set), "0000000000000000", "{set}\n{status}");
    }
    let d = daemon_uid.to_string();
    assert_eq!(field("Uid:"), format!("{d} {d} {d} {d}"), "{status}");

    // The supervisor's own uid would leave the evidence within the workload's reach.
    let args = ["run", "--user", "nobody", "--", "true"];
    let out = as_capable_nobody(&args);
    let err = assert_one_line_error(&args, &out);
    assert!(err.contains("own"), "{err}");
}

/// X3 under a root supervisor: every capability set of a `--user nobody` workload is empty,
/// the bounding set included (root may drop it: a setuid program nobody runs gains nothing).
#[test]
fn a_root_supervisor_empties_every_capability_set() {
    root_only!();
    let home = Home::new();
    let args = words("run --user nobody --cwd / -- grep ^Cap /proc/self/status");
    let out = home.cli_ok(&args);
    let status = String::from_utf8_lossy(&out.stdout).into_owned();
    for set in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
        let v = status
            .lines()
            .find_map(|l| l.strip_prefix(set))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no {set} in:\n{status}"));
        assert_eq!(v, "0000000000000000", "{set}\n{status}");
    }
}

/// `--user root` is refused in one line (the workload would keep every privilege).
#[test]
fn user_root_is_refused() {
    root_only!();
    let home = Home::new();
    for user in ["root", "0", "0:0"] {
        let args = ["run", "--user", user, "--", "true"];
        let err = home.one_line_error(&args);
        assert!(err.contains("root"), "{err}");
    }
    // The root group too, named or numbered: the workload ran with gid 0 before.
    let marker = home.path().join("ran");
    let touch = format!("touch '{}'", marker.display());
    for user in ["nobody:root", "nobody:0"] {
        let args = ["run", "--user", user, "--", "sh", "-c", &touch];
        let err = home.one_line_error(&args);
        assert!(err.contains("root group"), "{err}");
        assert!(!marker.exists(), "{user}: the workload ran");
    }
}

/// X3, the order: the user switch happens after *start*. A gated child of a `--user nobody`
/// launch is beyond nobody's reach (no signal, no `pidfd_getfd`); once started, the workload is
/// nobody's (the negative control: the same probe then may signal it).
#[test]
fn the_gated_child_is_out_of_the_target_users_reach() {
    root_only!();
    let (uid, gid) = passwd_ids("nobody").unwrap();
    let (_tools, tools) = public_tools(&[("gate-poke", helper("gate-poke"))]);
    let poke = |pid: u32| {
        let mut c = Command::new(&tools[0]);
        c.arg(pid.to_string()).uid(uid).gid(gid);
        let out = c.output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let dir = tempfile::tempdir().unwrap();
    let launch = |name: &str| {
        let mut l = Launch::new(&dir.path().join(name), &["sleep", "30"]);
        l.cwd = Some("/".into());
        l.credentials = Some((uid, gid, vec![gid]));
        let g = Guardian::spawn();
        g.launch(&l, None).unwrap();
        let hello = g.expect_hello();
        (g, hello.workload.pid)
    };

    let (g, pid) = launch("gated");
    let report = poke(pid);
    assert!(
        report.contains(&format!("kill {}\n", libc::EPERM)),
        "nobody reached the gated child:\n{report}"
    );
    assert!(
        !report.contains(" ok"),
        "nobody reached the gated child:\n{report}"
    );
    g.send(Frame::Abort).unwrap();
    let (_, receipt) = g.until_scope_exited();
    assert_eq!(receipt.status, WorkloadStatus::NeverStarted);
    let _ = g.finish();

    let (g, pid) = launch("started");
    g.start();
    assert_eq!(g.expect(), Msg::Started);
    let report = poke(pid);
    g.send(Frame::Signal {
        signo: libc::SIGKILL,
    })
    .unwrap();
    let _ = g.until_scope_exited();
    let _ = g.finish();
    assert!(report.contains("kill ok\n"), "{report}");
}

/// W13: a spawn failure names the step that failed, with the error as the workload's
/// credentials saw it: the `--cwd` directory nobody may not enter, the program nobody may not
/// run.
#[test]
fn a_spawn_failure_names_the_step_that_failed() {
    root_only!();
    let home = Home::new();
    let private = tempfile::tempdir().unwrap();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let prog = private.path().join("prog");
    refine_tests::install_executable(&prog, b"#!/bin/sh\nexit 0\n");
    let private_dir = private.path().to_str().unwrap();

    let args = ["run", "--user", "nobody", "--cwd", private_dir, "--", "sh"];
    let out = home.cli(&args);
    let err = assert_one_line_error(&args, &out);
    assert!(
        err.contains(&format!("{private_dir}: Permission denied")),
        "{}",
        describe(&args, &out)
    );
    assert_eq!(out.status.code(), Some(126), "{}", describe(&args, &out));

    let args = [
        "run",
        "--user",
        "nobody",
        "--cwd",
        "/",
        "--",
        prog.to_str().unwrap(),
    ];
    let out = home.cli(&args);
    let err = assert_one_line_error(&args, &out);
    assert!(
        err.contains(&format!("{}: Permission denied", prog.display())),
        "{}",
        describe(&args, &out)
    );
}

/// X5: the proof file's space is reserved before the workload may start: on a disk without
/// room for it (none at all, or one page, which the registration record would take), `run` is
/// refused in one line and the workload never runs; once there is room again, `run` works.
#[test]
fn a_full_disk_refuses_the_launch_before_the_workload_runs() {
    root_only!();
    let Some(disk) = TinyDisk::mount("2m") else {
        eprintln!("skipped: cannot mount a tmpfs");
        return;
    };
    full_disk_refuses_the_launch(&disk, &[1, 0]);
}

/// X5 on ext4, where the guardian reserves the receipt's space by writing it as zeros (F3:
/// delayed allocation reserves at the write, and the receipt then overwrites them in place):
/// a full disk refuses the launch there too, before the workload runs.
#[test]
fn a_full_ext4_disk_refuses_the_launch_before_the_workload_runs() {
    root_only!();
    let Some(disk) = TinyDisk::mount_ext4(8) else {
        eprintln!("skipped: cannot make and mount an ext4 file system (mkfs.ext4, a loop device)");
        return;
    };
    // Free space on ext4 is not counted in pages one can leave exactly (delayed allocation,
    // blocks given back at a commit): a disk with none.
    full_disk_refuses_the_launch(&disk, &[0]);
}

/// The one-line refusals on `disk` with each of `free_pages` free (with none, the line names
/// the reservation), then a launch that works once there is room.
fn full_disk_refuses_the_launch(disk: &TinyDisk, free_pages: &[u64]) {
    let home = Home {
        dir: tempfile::tempdir_in(disk.path()).unwrap(),
        port: 7411,
    };
    let (out, _) = home.run_json(&["true"]); // the runtime's folders exist
    assert!(out.status.success(), "{}", describe(&["run"], &out));
    let outside = tempfile::tempdir().unwrap();
    let marker = outside.path().join("ran");
    let args = ["run", "--", "touch", marker.to_str().unwrap()];
    for &pages in free_pages {
        disk.fill_leaving(pages);
        let err = home.one_line_error(&args);
        assert!(
            !marker.exists(),
            "the workload ran with {pages} free pages: {}",
            describe(&args, &out)
        );
        if pages == 0 {
            assert!(err.contains("reserve"), "{}", describe(&args, &out));
            // The cause once: its text and its number, not a guardian code and two errnos.
            assert_eq!(err.matches("28").count(), 1, "{}", describe(&args, &out));
            assert!(!err.contains("(code "), "{}", describe(&args, &out));
        }
        disk.free();
    }
    home.cli_ok(&args);
    assert!(marker.exists());
}

/// X5: a receipt write that fails is retried while the guardian lives, and the scope stays
/// `live` meanwhile: a same-uid workload empties its proof file (giving the reservation back)
/// and fills the disk before it exits; the guardian, its scope empty, waits and retries; once
/// there is room again, the receipt lands and verifies.
#[test]
fn a_failed_receipt_write_is_retried_while_the_guardian_lives() {
    root_only!();
    let Some(disk) = TinyDisk::mount("2m") else {
        eprintln!("skipped: cannot mount a tmpfs");
        return;
    };
    let home = Home {
        dir: tempfile::tempdir_in(disk.path()).unwrap(),
        port: 7411,
    };
    let fill = disk.path().join("fill");
    let script = format!(
        "p='{}/proofs/'\"$REFINE_OWNER\"; : > \"$p\"; cat /dev/zero > '{}' 2>/dev/null; exit 0",
        home.run_dir().display(),
        fill.display()
    );
    let run = home
        .command(&["run", "--json", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guardian = 0;
    // The guardian has reaped its scope (no child left) and sleeps: it is between attempts.
    let retrying = refine_tests::wait_until(DEADLINE, || {
        guardian = refine_tests::proc_children(run.id())
            .first()
            .copied()
            .unwrap_or(0);
        guardian != 0
            && fill.exists()
            && refine_tests::proc_children(guardian).is_empty()
            && refine_tests::proc_state(guardian) == Some('S')
    });
    let registrations: Vec<String> = std::fs::read_dir(home.run_dir().join("registrations"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    let state_meanwhile = registrations
        .first()
        .map(|id| home.state(id))
        .unwrap_or_default();
    let proof_meanwhile = registrations
        .first()
        .map(|id| std::fs::metadata(home.run_dir().join("proofs").join(id)).map(|m| m.len()));
    disk.free();
    let out = run.wait_with_output().unwrap();
    let context = format!(
        "guardian {guardian} ({:?}), registrations {registrations:?}, proof {proof_meanwhile:?}\n{}",
        refine_tests::proc_state(guardian),
        describe(&["run"], &out)
    );
    assert!(retrying, "the guardian is not retrying: {context}");
    assert_eq!(state_meanwhile, "live", "{context}");
    assert!(
        matches!(proof_meanwhile, Some(Ok(0))),
        "no failed write to retry: {context}"
    );
    let doc = parse(&["run"], &out);
    let id = doc["id"].as_str().unwrap();
    let verdict = home.receipt(id);
    assert_eq!(verdict["verified"], true, "{verdict}");
}

/// X5: the receipt is written whole: bytes a same-uid workload appended to its own proof file
/// (once the receipt's space is reserved in it) are cut, and the receipt verifies.
#[test]
fn the_receipt_is_written_whole() {
    root_only!();
    let home = Home::new();
    let run_dir = home.run_dir();
    // The space is reserved before the workload runs; an older guardian reserved it while the
    // workload started: wait for it either way (the guardian fills it without a wait).
    let script = format!(
        "p='{}/proofs/'\"$REFINE_OWNER\"; while [ ! -s \"$p\" ]; do :; done; printf 12345678 >> \"$p\"",
        run_dir.display()
    );
    let (out, doc) = home.run_json(&["sh", "-c", &script]);
    assert!(out.status.success(), "{}", describe(&["run"], &out));
    let id = doc["id"].as_str().unwrap();
    let verdict = home.receipt(id);
    assert_eq!(verdict["verified"], true, "{verdict}");
}

/// X5: `Signal` frames at the gate are neither dropped nor reordered: a `SIGTERM` sent before
/// *start* ends the program once it runs; `SIGCONT` then `SIGSTOP` leave it stopped, `SIGSTOP`
/// then `SIGCONT` running.
#[test]
fn signals_at_the_gate_keep_their_order_and_are_not_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let gated = |name: &str, signals: &[i32]| {
        let l = Launch::new(&dir.path().join(name), &["sleep", "30"]);
        let g = Guardian::spawn();
        g.launch(&l, None).unwrap();
        let pid = g.expect_hello().workload.pid;
        for &signo in signals {
            g.send(Frame::Signal { signo }).unwrap();
        }
        g.start();
        assert_eq!(g.expect(), Msg::Started);
        (g, pid)
    };
    let state = |pid: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rfind(')')
            .and_then(|i| stat[i + 2..].chars().next())
            .unwrap_or('?')
    };

    let (g, _) = gated("term", &[libc::SIGTERM]);
    let (_, receipt) = g.until_scope_exited();
    let _ = g.finish();
    assert_eq!(receipt.status, WorkloadStatus::Signaled(libc::SIGTERM));

    let (g, pid) = gated("cont-stop", &[libc::SIGCONT, libc::SIGSTOP]);
    let stopped = refine_tests::wait_until(PATIENCE, || state(pid) == 'T');
    g.send(Frame::Signal {
        signo: libc::SIGKILL,
    })
    .unwrap();
    let _ = g.until_scope_exited();
    let _ = g.finish();
    assert!(stopped, "CONT then STOP: the workload is not stopped");

    let (g, pid) = gated("stop-cont", &[libc::SIGSTOP, libc::SIGCONT]);
    // Both are delivered at once after the exec: the sleep then sleeps (S), never stays T.
    let asleep = refine_tests::wait_until(PATIENCE, || state(pid) == 'S');
    let still = state(pid);
    g.send(Frame::Signal {
        signo: libc::SIGKILL,
    })
    .unwrap();
    let _ = g.until_scope_exited();
    let _ = g.finish();
    assert!(asleep && still != 'T', "STOP then CONT: state {still}");
}

/// W13 for `run --detach` (the service launches): the failed step is named too, here the
/// `--cwd` directory nobody may not enter.
#[test]
fn a_detached_spawn_failure_names_the_step_that_failed() {
    root_only!();
    let home = Home::new();
    let private = tempfile::tempdir().unwrap();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let private_dir = private.path().to_str().unwrap();
    let svc = Serving::start(&home, &["--maintenance-every", "200ms"]);
    let args = [
        "run",
        "--detach",
        "--user",
        "nobody",
        "--cwd",
        private_dir,
        "--",
        "sh",
    ];
    let out = home.cli(&args);
    drop(svc);
    let err = assert_one_line_error(&args, &out);
    assert!(
        err.contains(&format!("{private_dir}: Permission denied")),
        "{}",
        describe(&args, &out)
    );
}
