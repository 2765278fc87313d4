//! The guardian on real hosts (SPEC G11–G14): inherited signal state, signals from
//! anyone, group kills aimed at the launcher, a stopped gated child, and what a workload can
//! reach of its guardian through `/proc`. Each test drives the real binaries against the real
//! kernel; the test process reaps only the children it spawned, by pid.

use refine_tests::cli_support;

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};

use cli_support::{alive, describe, kill_witness, parse, witnesses, Home, DEADLINE};
use refine_protocol::{Frame, Hello, Receipt, ScopeEnd, WorkloadStatus};
use refine_tests::driver::{gated_marker, marker_launch, Guardian, Launch, Msg, PATIENCE};
use refine_tests::wait_until;
use rustix::process::Signal;

/// Field `n` (1-based, as in proc(5)) of `/proc/PID/stat`, counted after the last `)`.
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    rest.split(' ').nth(n - 3).map(str::to_owned)
}

fn start_time(pid: u32) -> u64 {
    stat_field(pid, 22)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no start time for {pid}"))
}

/// A pidfd for `pid` (one of our witnesses), checked against its start time.
fn pidfd(pid: u32, start: u64) -> OwnedFd {
    let p = rustix::process::Pid::from_raw(pid as i32).expect("pid > 0");
    let fd = rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty())
        .unwrap_or_else(|e| panic!("pidfd_open {pid}: {e}"));
    assert_eq!(start_time(pid), start, "pid {pid} is not the witness");
    fd
}

/// A stopped process reads `T` in `/proc/PID/stat` (kernel state, not a log line).
fn wait_stopped(pid: u32) {
    let mut state = String::new();
    let ok = wait_until(PATIENCE, || {
        state = stat_field(pid, 3).unwrap_or_default();
        state == "T"
    });
    assert!(ok, "{pid} never stopped (state {state:?})");
}

fn assert_receipt_on_disk(r: &Receipt, hello: &Hello, l: &Launch) {
    let on_disk = Receipt::decode(&fs::read(&l.proof_path).expect("proof")).expect("decodes");
    assert_eq!(&on_disk, r, "the receipt on disk is the one sent");
    assert_eq!(r.registration, l.registration);
    assert_eq!((r.guardian, r.workload), (hello.guardian, hello.workload));
}

// ---------------------------------------------------------------------------------------------
// G11: an inherited SIG_IGN for SIGCHLD.

/// A parent that ignores SIGCHLD and then execs the supervisor: the ignored disposition survives
/// `execve` into `run` and into the guardian, where the kernel would reap the workload itself
/// (no status, no wake-up).
#[test]
fn sigchld_ignored_by_the_launchers_parent_still_gives_the_exit_status() {
    let home = Home::new();
    let args = ["run", "--json", "--", "sh", "-c", "exit 5"];
    let mut cmd = home.command(&args);
    // SAFETY: `signal` is async-signal-safe; the closure allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGCHLD, libc::SIG_IGN);
            Ok(())
        });
    }
    let out = cli_support::output_of(cmd);
    let doc = parse(&args, &out);
    assert_eq!(out.status.code(), Some(5), "{}", describe(&args, &out));
    assert_eq!(doc["exit_code"], 5, "{doc}");
    let id = doc["id"].as_str().expect("id");
    assert_eq!(home.state(id), "exited");
    assert_eq!(home.json(&["receipt", id, "--json"])["verified"], true);
}

/// Control for the test above: the disposition really is inherited across `execve` (so the
/// guardian has to reset it; it is not the harness that makes the case pass).
#[test]
fn control_an_ignored_sigchld_survives_execve() {
    let mut cmd = Command::new("grep");
    cmd.args(["^SigIgn:", "/proc/self/status"]);
    // SAFETY: as above.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGCHLD, libc::SIG_IGN);
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mask = u64::from_str_radix(text.trim().trim_start_matches("SigIgn:").trim(), 16).unwrap();
    assert_ne!(mask & (1 << (libc::SIGCHLD - 1)), 0, "{text}");
}

// ---------------------------------------------------------------------------------------------
// G12: only SIGKILL ends the guardian.

/// Each of the signals 1–31 but KILL and STOP, sent by another process to a guardian that holds
/// a detached descendant (its workload has exited): the guardian survives, and `stop` then
/// proves the end of the scope with its receipt.
#[test]
fn every_signal_but_kill_and_stop_leaves_the_guardian_alive_and_stop_proves_the_end() {
    let home = Home::new();
    for sig in (1..=31).filter(|&s| s != libc::SIGKILL && s != libc::SIGSTOP) {
        let (_, id) = cli_support::launch(&home, "leave", &["sh", "-c", "sleep 600 & exit 0"]);
        let [guardian, workload] = witnesses(&home, &id);
        // The workload exits at once; the sleeper is the detached descendant that holds the scope.
        assert!(
            wait_until(DEADLINE, || !alive(workload.0, workload.1)),
            "signal {sig}: the workload did not exit"
        );
        let signal = Signal::from_named_raw(sig).expect("a named signal");
        assert!(
            kill_witness(guardian.0, guardian.1, signal),
            "signal {sig}: the guardian was already gone"
        );
        let args = ["stop", &id, "--json"];
        let out = home.cli(&args);
        assert!(
            out.status.success(),
            "signal {sig}: {}",
            describe(&args, &out)
        );
        let doc = parse(&args, &out);
        assert_eq!(doc["state"], "exited", "signal {sig}: {doc}");
        assert_eq!(
            home.json(&["receipt", &id, "--json"])["verified"],
            true,
            "signal {sig}"
        );
        assert!(!alive(guardian.0, guardian.1), "signal {sig}");
    }
}

// ---------------------------------------------------------------------------------------------
// G13: out of the way.

/// `timeout -s KILL` or a CI cancel kills the launcher's whole process group: the guardian is
/// not in it, so it sees its channel close, ends the workload (the default parent-death signal),
/// reaps, and writes the receipt: the scope ends `exited`, never `unverified`.
#[test]
fn sigkill_to_the_launchers_process_group_leaves_a_receipt() {
    let home = Home::new();
    let mut run = home
        .command(&["run", "--", "sh", "-c", "echo ready; exec sleep 600"])
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn run");
    let mut line = String::new();
    BufReader::new(run.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    let id = home.ps()[0]["id"].as_str().unwrap().to_owned();
    let [guardian, _] = witnesses(&home, &id);
    let pgid = rustix::process::Pid::from_raw(run.id() as i32).expect("pid > 1");
    assert_eq!(
        stat_field(run.id(), 5).as_deref(),
        Some(run.id().to_string().as_str()),
        "run leads its own group"
    );
    assert_ne!(
        stat_field(guardian.0 as u32, 5),
        stat_field(run.id(), 5),
        "the guardian left the launcher's process group"
    );
    rustix::process::kill_process_group(pgid, Signal::KILL).expect("kill the group");
    run.wait().unwrap();
    home.wait_state(&id, "exited");
    assert_eq!(home.json(&["receipt", &id, "--json"])["verified"], true);
    assert!(!alive(guardian.0, guardian.1));
}

/// The workload asked for a directory; the guardian itself sits at `/` once the workload is
/// forked (it must not pin a checkout), and it is not dumpable: a workload of the same uid and
/// the same capabilities cannot open its descriptors through `/proc/<guardian>/fd` (the proof
/// file among them).
///
/// As root, `CAP_SYS_PTRACE` would open them whatever the dumpable flag, and a process whose
/// capabilities are not a superset of the guardian's is refused whatever the flag too. So the
/// guardian is started through `setpriv --bounding-set -sys_ptrace`: guardian and workload then
/// have the same uid and the same capabilities, and only the dumpable flag stands between them.
/// The workload's own descriptors stay open to it (the control).
#[test]
fn the_guardian_keeps_its_cwd_at_root_and_its_descriptors_out_of_reach() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root && Command::new("setpriv").arg("--help").output().is_err() {
        eprintln!("skipped: running as root and setpriv is missing (cannot drop CAP_SYS_PTRACE)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("checkout");
    fs::create_dir(&cwd).unwrap();
    let script = r#"g=$PPID
echo "own-cwd $(pwd -P)"
for n in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
  if (: >> /proc/$g/fd/$n) 2>/dev/null; then echo "opened $n"; fi
done
if (: >> /proc/$$/fd/1) 2>/dev/null; then echo "control-ok"; fi
echo done
read x || exit 0
"#;
    let mut l = Launch::new(&dir.path().join("proof"), &["sh", "-c", script]);
    l.cwd = Some(cwd.clone());
    let (in_r, in_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let (out_r, out_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let err = rustix::io::fcntl_dupfd_cloexec(std::io::stderr(), 3).unwrap();
    let g = if root {
        let exe = refine_tests::bin("refine-guardian");
        Guardian::spawn_exe(Path::new("setpriv"), |c| {
            c.args(["--bounding-set", "-sys_ptrace", "--"]).arg(exe);
        })
    } else {
        Guardian::spawn()
    };
    g.launch(&l, Some([in_r.as_fd(), out_w.as_fd(), err.as_fd()]))
        .unwrap();
    drop((in_r, out_w, err));
    let hello = g.expect_hello();
    g.start();
    let mut out = String::new();
    let mut lines = BufReader::new(fs::File::from(out_r));
    while !out.ends_with("done\n") {
        let n = lines.read_line(&mut out).unwrap();
        assert!(n > 0, "the workload ended early:\n{out}");
    }
    // Read by the test process (with every capability): the workload itself may not look.
    let guardian_cwd = fs::read_link(format!("/proc/{}/cwd", hello.guardian.pid)).unwrap();
    drop(in_w);
    let (_, r) = g.until_scope_exited();
    assert_eq!(r.status, WorkloadStatus::Exited(0), "{out}");
    assert_receipt_on_disk(&r, &hello, &l);
    assert!(g.finish().0.success());
    assert!(out.contains("control-ok"), "control: {out}");
    assert!(
        !out.contains("opened "),
        "the workload opened a guardian descriptor:\n{out}"
    );
    assert_eq!(guardian_cwd, Path::new("/"), "the guardian pins its cwd");
    let canonical = cwd.canonicalize().unwrap();
    assert!(
        out.contains(&format!("own-cwd {}\n", canonical.display())),
        "{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// G14: a stopped gated child, a child killed before execve.

/// Launches the marker workload, stops the gated child (state `T`) and says *start*: the child
/// cannot exec (or report) while stopped. Returns the guardian, the hello and the launch.
fn start_a_stopped_child(dir: &Path) -> (Guardian, Hello, Launch, std::path::PathBuf, OwnedFd) {
    let (l, marker) = marker_launch(dir);
    let g = Guardian::spawn();
    g.launch(&l, None).unwrap();
    let hello = g.expect_hello();
    let child = pidfd(hello.workload.pid, hello.workload.start_time);
    rustix::process::pidfd_send_signal(&child, Signal::STOP).unwrap();
    wait_stopped(hello.workload.pid);
    g.start();
    (g, hello, l, marker, child)
}

fn assert_never_started(frames: &[Msg], r: &Receipt) {
    assert!(!frames.contains(&Msg::Started), "{frames:?}");
    assert_eq!(r.status, WorkloadStatus::NeverStarted, "{r:?}");
    assert_ne!(r.end, ScopeEnd::Completed, "{r:?}");
    assert_eq!(r.workload_exited_at_ns, 0);
}

#[test]
fn a_stopped_gated_child_does_not_hang_the_guardian_abort_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let (g, hello, l, marker, _child) = start_a_stopped_child(dir.path());
    g.send(Frame::Abort).unwrap();
    let (frames, r) = g.until_scope_exited();
    assert_never_started(&frames, &r);
    assert_eq!(r.end, ScopeEnd::Aborted);
    assert_receipt_on_disk(&r, &hello, &l);
    let (status, stderr) = g.finish();
    assert!(status.success(), "{status:?} {stderr}");
    assert!(!marker.exists(), "the workload executed");
}

/// The scope of a gated child ends without it ever starting: the frames and the receipt (sent
/// and on disk) say so, the guardian exits 0, and the workload left no marker.
fn assert_ended_never_started(g: Guardian, hello: &Hello, l: &Launch, marker: &Path) {
    let (frames, r) = g.until_scope_exited();
    assert_never_started(&frames, &r);
    assert_receipt_on_disk(&r, hello, l);
    assert!(g.finish().0.success());
    assert!(!marker.exists(), "the workload executed");
}

#[test]
fn a_stopped_gated_child_does_not_hang_the_guardian_a_closed_channel_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let (g, hello, l, marker, _child) = start_a_stopped_child(dir.path());
    let (status, stderr) = refine_tests::driver::reap(g.hang_up());
    assert!(status.success(), "{status:?} {stderr}");
    let r = Receipt::decode(&fs::read(&l.proof_path).unwrap()).expect("a receipt");
    assert_never_started(&[], &r);
    assert_eq!((r.guardian, r.workload), (hello.guardian, hello.workload));
    assert!(!marker.exists(), "the workload executed");
}

#[test]
fn a_stopped_gated_child_does_not_hang_the_guardian_sigterm_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let (g, hello, l, marker, _child) = start_a_stopped_child(dir.path());
    let gfd = pidfd(hello.guardian.pid, hello.guardian.start_time);
    rustix::process::pidfd_send_signal(&gfd, Signal::TERM).unwrap();
    assert_ended_never_started(g, &hello, &l, &marker);
}

/// A guardian that exits with frames of ours unread would make the kernel reset the channel,
/// and a launcher reading it sees the reset before the receipt the guardian sent last (a CI
/// run lost the receipt so). The guardian reads what is left before it exits. It is stopped
/// while both frames queue, so the second is certainly unread when the abort is acted on.
#[test]
fn a_guardian_that_exits_with_frames_unread_does_not_reset_the_channel() {
    let dir = tempfile::tempdir().unwrap();
    let (g, hello, _, marker) = gated_marker(dir.path());
    let gfd = pidfd(hello.guardian.pid, hello.guardian.start_time);
    rustix::process::pidfd_send_signal(&gfd, Signal::STOP).unwrap();
    wait_stopped(hello.guardian.pid);
    g.send(Frame::Abort).unwrap();
    g.send(Frame::Signal {
        signo: libc::SIGUSR1,
    })
    .unwrap();
    rustix::process::pidfd_send_signal(&gfd, Signal::CONT).unwrap();
    let (frames, r) = g.until_scope_exited();
    assert!(!frames.contains(&Msg::Reset), "{frames:?}");
    assert_eq!(r.end, ScopeEnd::Aborted);
    assert_eq!(g.recv(PATIENCE), Some(Msg::Closed), "after the receipt");
    assert!(g.finish().0.success());
    assert!(!marker.exists(), "the workload executed");
}

/// Killed between *start* and `execve`: the report pipe closes exactly as on a successful exec,
/// but the workload never ran, and the receipt must say so.
#[test]
fn a_child_killed_between_start_and_execve_is_never_reported_started() {
    let dir = tempfile::tempdir().unwrap();
    let (g, hello, l, marker, child) = start_a_stopped_child(dir.path());
    rustix::process::pidfd_send_signal(&child, Signal::KILL).unwrap();
    assert_ended_never_started(g, &hello, &l, &marker);
}

/// A child stopped at the gate and then resumed (SIGCONT) starts normally: the stop alone
/// decides nothing.
#[test]
fn a_gated_child_stopped_and_resumed_starts_normally() {
    let dir = tempfile::tempdir().unwrap();
    let (g, hello, l, marker, child) = start_a_stopped_child(dir.path());
    rustix::process::pidfd_send_signal(&child, Signal::CONT).unwrap();
    let (frames, r) = g.until_scope_exited();
    assert_eq!(frames.first(), Some(&Msg::Started), "{frames:?}");
    assert_eq!(r.status, WorkloadStatus::Exited(0));
    assert_eq!(r.end, ScopeEnd::Completed);
    assert_receipt_on_disk(&r, &hello, &l);
    assert!(g.finish().0.success());
    assert!(marker.exists());
}

// ---------------------------------------------------------------------------------------------
// G9, W9: only SIGINT and SIGTERM ask the guardian's scope to end; the others are forwarded.

/// Whether `sig` is pending for the whole process `pid` (`ShdPnd`): the guardian blocks every
/// signal, so one it has not read yet stays there.
fn shared_pending(pid: u32, sig: i32) -> bool {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("ShdPnd:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|set| set & (1 << (sig - 1)) != 0)
}

/// Sends `sig` to the guardian and waits until it has read it from its signalfd.
fn signal_guardian_and_see_it_taken(hello: &Hello, sig: Signal) {
    let gfd = pidfd(hello.guardian.pid, hello.guardian.start_time);
    rustix::process::pidfd_send_signal(&gfd, sig).unwrap();
    let pid = hello.guardian.pid;
    assert!(
        wait_until(PATIENCE, || !shared_pending(pid, sig.as_raw())),
        "the guardian never took signal {}",
        sig.as_raw()
    );
}

/// SIGHUP to the guardian while the workload waits at the gate: not a request to end (W9); it
/// is queued for the workload, which starts and then gets it (`sleep` dies of it).
#[test]
fn sighup_at_the_gate_is_forwarded_after_start_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    let l = Launch::new(&dir.path().join("proof"), &["sleep", "300"]);
    let g = Guardian::spawn();
    g.launch(&l, None).unwrap();
    let hello = g.expect_hello();
    signal_guardian_and_see_it_taken(&hello, Signal::HUP);
    g.start();
    let (frames, r) = g.until_scope_exited();
    assert_eq!(frames.first(), Some(&Msg::Started), "{frames:?}");
    assert_eq!(r.status, WorkloadStatus::Signaled(libc::SIGHUP), "{r:?}");
    assert_receipt_on_disk(&r, &hello, &l);
    assert!(g.finish().0.success());
}

/// SIGQUIT to the guardian while the started child is on its way to `execve` (held there,
/// stopped): not a request to end either; the program runs (the signal follows the exec).
#[test]
fn sigquit_while_the_child_execs_is_forwarded_not_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let (g, hello, l, _marker, child) = start_a_stopped_child(dir.path());
    signal_guardian_and_see_it_taken(&hello, Signal::QUIT);
    // (Gone already if the guardian took the signal for an end.)
    let _ = rustix::process::pidfd_send_signal(&child, Signal::CONT);
    let (frames, r) = g.until_scope_exited();
    assert_eq!(frames.first(), Some(&Msg::Started), "{frames:?}");
    assert_ne!(r.status, WorkloadStatus::NeverStarted, "{r:?}");
    assert_receipt_on_disk(&r, &hello, &l);
    assert!(g.finish().0.success());
}

// ---------------------------------------------------------------------------------------------
// G7: the launcher's death reaches the workload also when a send found it gone first.

/// The number of descriptors the guardian is polling, read from `/proc/PID/syscall` (the second
/// argument of `poll`/`ppoll`): 3 while the child execs (report, signals, channel), 2 in the
/// reap loop (signals, channel). `None` while it is not in a system call.
fn polled_fds(pid: u32) -> Option<u64> {
    let line = fs::read_to_string(format!("/proc/{pid}/syscall")).ok()?;
    let nfds = line.split_whitespace().nth(2)?;
    u64::from_str_radix(nfds.strip_prefix("0x")?, 16).ok()
}

/// The window of the CI flake (`peer_the_launchers_death_reaches_the_workload`): the launcher
/// dies after the workload's exec but before the guardian's `Started` frame, whose send then
/// fails with `EPIPE`. That failed send must not close the channel for the guardian: its end
/// of file still comes, and with it the parent-death signal (G7). Made deterministic here by
/// shutting the launcher's receiving side first (the send fails, no end of file yet), and
/// closing the channel only once the guardian is in its reap loop.
#[test]
fn a_failed_send_to_a_gone_launcher_still_forwards_the_parent_death() {
    let dir = tempfile::tempdir().unwrap();
    let l = Launch::new(&dir.path().join("proof"), &["sleep", "300"]);
    let g = Guardian::spawn();
    g.launch(&l, None).unwrap();
    let hello = g.expect_hello();
    let child = pidfd(hello.workload.pid, hello.workload.start_time);
    rustix::process::pidfd_send_signal(&child, Signal::STOP).unwrap();
    wait_stopped(hello.workload.pid);
    g.start();
    // The guardian waits for the exec (3 descriptors polled); nothing can reach us any more.
    let gpid = hello.guardian.pid;
    assert!(
        wait_until(PATIENCE, || polled_fds(gpid) == Some(3)),
        "the guardian never waited for the exec ({:?})",
        polled_fds(gpid)
    );
    rustix::net::shutdown(g.chan_fd(), rustix::net::Shutdown::Read).unwrap();
    rustix::process::pidfd_send_signal(&child, Signal::CONT).unwrap();
    // `Started` was sent (and failed) once the guardian is in the reap loop.
    assert!(
        wait_until(PATIENCE, || polled_fds(gpid) == Some(2)),
        "the guardian never reached its reap loop ({:?})",
        polled_fds(gpid)
    );
    let guardian = g.hang_up();
    let outlived = !cli_support::exited_within(&child, DEADLINE);
    if outlived {
        let _ = rustix::process::pidfd_send_signal(&child, Signal::KILL);
    }
    let (status, stderr) = refine_tests::driver::reap(guardian);
    assert!(!outlived, "the workload outlived its launcher");
    assert!(status.success(), "{status:?} {stderr}");
    let r = Receipt::decode(&fs::read(&l.proof_path).unwrap()).expect("a receipt");
    assert_eq!(r.status, WorkloadStatus::Signaled(libc::SIGKILL), "{r:?}");
}
