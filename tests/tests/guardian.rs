//! End-to-end tests of `refine-guardian` (SPEC G1–G10), driven through the raw
//! test-side launcher in `refine_tests::driver`. Every test runs the real binary against the real
//! kernel; the test process reaps only the guardian it spawned (by pid), never `waitpid(-1)`.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use refine_protocol::frame::MAX_FRAME;
use refine_protocol::{Frame, Hello, Receipt, ScopeEnd, WorkloadStatus};
use refine_tests::driver::{gated_marker, marker_launch, Guardian, Launch, Msg};

/// Checks every bound field of `r` against the hello and the launch, and the file on disk.
fn assert_receipt_matches(r: &Receipt, hello: &Hello, l: &Launch) {
    assert_eq!(r.registration, l.registration);
    assert_eq!(r.runtime, l.runtime);
    assert_eq!(r.boot_id, hello.boot_id);
    assert_eq!(r.guardian, hello.guardian);
    assert_eq!(r.workload, hello.workload);
    assert_eq!(r.proof, hello.proof);
    let meta = fs::metadata(&l.proof_path).expect("proof file");
    assert_eq!((meta.dev(), meta.ino()), (hello.proof.dev, hello.proof.ino));
    let on_disk = Receipt::decode(&fs::read(&l.proof_path).expect("read proof")).expect("decode");
    assert_eq!(&on_disk, r, "the receipt on disk equals the one sent");
}

fn boot_id() -> refine_protocol::BootId {
    let text = fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    refine_protocol::BootId::parse(&text).unwrap()
}

/// Launches, says start, and collects everything up to the receipt.
fn run(l: &Launch) -> (Hello, Vec<Msg>, Receipt) {
    let g = Guardian::spawn();
    g.launch(l, None).expect("send launch");
    let hello = g.expect_hello();
    assert_eq!(hello.guardian.pid, g.pid());
    assert_eq!(hello.boot_id, boot_id());
    g.start();
    let (frames, receipt) = g.until_scope_exited();
    let (status, stderr) = g.finish();
    assert!(status.success(), "guardian failed: {status:?} {stderr}");
    assert_receipt_matches(&receipt, &hello, l);
    (hello, frames, receipt)
}

/// [`run`] of a launch that must fail to spawn with `errno`: its first frame says so; the
/// receipt.
fn run_spawn_failed(l: &Launch, errno: i32) -> Receipt {
    let (_, frames, r) = run(l);
    assert_eq!(frames[0], Msg::SpawnFailed { errno }, "{frames:?}");
    r
}

fn sh(dir: &Path, script: &str) -> Launch {
    Launch::new(&dir.join("proof"), &["sh", "-c", script])
}

#[test]
fn exit_codes_propagate_exactly() {
    for code in [0, 3, 255] {
        let dir = tempfile::tempdir().unwrap();
        let l = sh(dir.path(), &format!("exit {code}"));
        let (_, frames, r) = run(&l);
        assert_eq!(frames[0], Msg::Started);
        assert!(
            matches!(
                frames[1],
                Msg::WorkloadExited { status: WorkloadStatus::Exited(c), at_ns } if c == code && at_ns > 0
            ),
            "{frames:?}"
        );
        assert_eq!(r.status, WorkloadStatus::Exited(code));
        assert_eq!(r.end, ScopeEnd::Completed);
        assert_eq!(r.spawn_errno, 0);
        assert_eq!(r.reaped, 1);
    }
}

#[test]
fn death_by_signal_propagates_exactly() {
    for (sig, name) in [
        (libc::SIGKILL, "KILL"),
        (libc::SIGTERM, "TERM"),
        (libc::SIGSEGV, "SEGV"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let l = sh(dir.path(), &format!("kill -{name} $$"));
        let (_, frames, r) = run(&l);
        assert!(frames.contains(&Msg::Started), "{frames:?}");
        assert_eq!(r.status, WorkloadStatus::Signaled(sig), "{name}");
        assert_eq!(r.end, ScopeEnd::Completed);
    }
}

#[test]
fn missing_executable_is_spawn_failed_enoent_with_receipt() {
    let dir = tempfile::tempdir().unwrap();
    let l = Launch::new(&dir.path().join("proof"), &["no-such-program-refine"]);
    let r = run_spawn_failed(&l, libc::ENOENT);
    assert_eq!(r.end, ScopeEnd::SpawnFailed);
    assert_eq!(r.spawn_errno, libc::ENOENT);
    assert_eq!(r.status, WorkloadStatus::NeverStarted);

    let dir = tempfile::tempdir().unwrap();
    let l = Launch::new(&dir.path().join("proof"), &["/nonexistent/refine/prog"]);
    let r = run_spawn_failed(&l, libc::ENOENT);
    assert_eq!(r.spawn_errno, libc::ENOENT);
}

#[test]
fn not_executable_is_spawn_failed_eacces() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.txt");
    fs::write(&file, "not a program").unwrap();
    let l = Launch::new(&dir.path().join("proof"), &[file.as_os_str()]);
    let r = run_spawn_failed(&l, libc::EACCES);
    assert_eq!(r.end, ScopeEnd::SpawnFailed);
}

#[test]
fn a_failed_setup_is_a_spawn_failure_and_the_program_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (mut l, marker) = marker_launch(dir.path());
    l.cwd = Some(dir.path().join("no such dir"));
    let r = run_spawn_failed(&l, libc::ENOENT);
    assert_eq!(
        (r.end, r.spawn_errno),
        (ScopeEnd::SpawnFailed, libc::ENOENT)
    );
    assert_eq!(r.status, WorkloadStatus::NeverStarted);

    let dir = tempfile::tempdir().unwrap();
    let (mut l, marker2) = marker_launch(dir.path());
    l.rlimits = vec![refine_protocol::Rlimit {
        resource: 999, // no such resource
        soft: 1,
        hard: 1,
    }];
    let r = run_spawn_failed(&l, libc::EINVAL);
    assert_eq!(r.end, ScopeEnd::SpawnFailed);
    assert!(!marker.exists() && !marker2.exists());
}

fn assert_aborted(r: &Receipt) {
    assert_eq!(r.end, ScopeEnd::Aborted);
    assert_eq!(r.status, WorkloadStatus::NeverStarted);
    assert_eq!(r.workload_exited_at_ns, 0);
    assert_eq!(r.reaped, 1, "the gated workload was reaped");
}

#[test]
fn no_start_within_the_bound_aborts_without_executing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut l, marker) = marker_launch(dir.path());
    l.start_timeout_ms = 200;
    let g = Guardian::spawn();
    g.launch(&l, None).unwrap();
    let hello = g.expect_hello();
    let (frames, r) = g.until_scope_exited();
    assert!(!frames.contains(&Msg::Started), "{frames:?}");
    assert_aborted(&r);
    assert_receipt_matches(&r, &hello, &l);
    let (status, _) = g.finish();
    assert!(status.success());
    assert!(
        !marker.exists(),
        "the workload executed although start never came"
    );
}

#[test]
fn abort_frame_aborts_without_executing() {
    let dir = tempfile::tempdir().unwrap();
    let (g, hello, l, marker) = gated_marker(dir.path());
    g.send(Frame::Abort).unwrap();
    let (_, r) = g.until_scope_exited();
    assert_aborted(&r);
    assert_receipt_matches(&r, &hello, &l);
    assert!(g.finish().0.success());
    assert!(!marker.exists());
}

#[test]
fn channel_closed_before_start_aborts_without_executing() {
    let dir = tempfile::tempdir().unwrap();
    let (g, hello, l, marker) = gated_marker(dir.path());
    let (status, stderr) = refine_tests::driver::reap(g.hang_up());
    assert!(status.success(), "{status:?} {stderr}");
    let r = Receipt::decode(&fs::read(&l.proof_path).unwrap()).expect("aborted receipt");
    assert_aborted(&r);
    assert_receipt_matches(&r, &hello, &l);
    assert!(!marker.exists());
}

/// Bad handshake input: non-zero exit, one line on stderr, nothing forked or created.
fn assert_rejected(what: &str, bytes: &[u8], expect_in_line: &str) {
    let dir = tempfile::tempdir().unwrap();
    let g = Guardian::spawn();
    // Room for the oversized message in our send queue (the kernel caps it at wmem_max).
    let _ = rustix::net::sockopt::set_socket_send_buffer_size(&g.chan, 1 << 20);
    match g.send_raw(bytes) {
        Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
            eprintln!("skipping {what}: this kernel's socket buffers cannot carry it ({e})");
            let _ = g.finish();
            return;
        }
        // The guardian may already be gone when the message is larger than its buffer.
        _ => {}
    }
    let (status, stderr) = g.finish();
    assert!(
        !status.success(),
        "{what}: guardian accepted it ({status:?})"
    );
    assert_eq!(
        stderr.lines().count(),
        1,
        "{what}: not one line: {stderr:?}"
    );
    assert!(
        stderr.contains(expect_in_line),
        "{what}: {stderr:?} does not say {expect_in_line:?}"
    );
    assert!(
        fs::read_dir(dir.path()).unwrap().next().is_none(),
        "{what}: files created"
    );
}

#[test]
fn malformed_truncated_oversized_handshakes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (l, marker) = marker_launch(dir.path());
    let good = l.encode(0);

    assert_rejected("garbage", b"this is not a frame at all", "wrong magic");
    assert_rejected("truncated", &good[..good.len() - 7], "truncated input");
    assert_rejected("header only", &good[..10], "truncated input");
    let mut bad = good.clone();
    bad[4] = 9; // version
    assert_rejected("version", &bad, "unsupported version");
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0x55;
    assert_rejected("checksum", &bad, "checksum mismatch");
    let mut bad = good.clone();
    bad[8..12].copy_from_slice(&(MAX_FRAME as u32).to_le_bytes());
    assert_rejected("length field", &bad, "length exceeds maximum");
    let mut big = good.clone();
    big.resize(MAX_FRAME + 1, 0);
    assert_rejected("oversized message", &big, "exceeds the maximum frame size");
    let mut start = [0u8; 64];
    let n = Frame::Start.encode_into(&mut start).unwrap();
    assert_rejected("start first", &start[..n], "not a launch frame");
    // A launch that promises three descriptors but brings none.
    assert_rejected("descriptors", &l.encode(3), "descriptors");
    assert!(!marker.exists());
    assert!(!l.proof_path.exists());
}

#[test]
fn a_silent_launcher_is_given_up_after_the_launch_bound() {
    // Nothing is sent: the guardian waits its fixed bound (10 s) for the launch frame.
    let g = Guardian::spawn();
    match g.expect() {
        Msg::GuardianFailed { errno: 0, .. } => {}
        other => panic!("expected GuardianFailed, got {other:?}"),
    }
    let (status, stderr) = g.finish();
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(stderr.contains("no launch frame"), "{stderr:?}");
}

#[test]
fn stdin_that_is_not_a_seqpacket_socket_is_refused() {
    let out = std::process::Command::new(refine_tests::bin("refine-guardian"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(err.contains("SOCK_SEQPACKET"), "{err:?}");
}

// ---------------------------------------------------------------------------------------------
// Helpers for the process-tree tests.

use std::io::{BufRead, BufReader, Read as _};
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::Duration;

use refine_tests::driver::PATIENCE;

fn cloexec_pipe() -> (OwnedFd, OwnedFd) {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).expect("pipe")
}

fn stderr_dup() -> OwnedFd {
    rustix::io::fcntl_dupfd_cloexec(std::io::stderr(), 3).expect("dup stderr")
}

/// A field of `/proc/PID/status`, if the process exists.
fn proc_status(pid: u32, key: &str) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
}

/// Field 22 of `/proc/PID/stat`.
fn start_time(pid: u32) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

/// A pidfd for `pid`, verified to name the process that started at `start`.
fn verified_pidfd(pid: u32, start: u64) -> OwnedFd {
    let p = rustix::process::Pid::from_raw(pid as i32).expect("pid > 0");
    let fd = rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty())
        .unwrap_or_else(|e| panic!("pidfd_open {pid}: {e}"));
    assert_eq!(
        start_time(pid),
        Some(start),
        "pid {pid} is not the witnessed process"
    );
    fd
}

/// Waits (bounded) until the process behind `pidfd` has exited.
fn await_exit(pidfd: &OwnedFd, what: &str) {
    let ts = rustix::time::Timespec {
        tv_sec: PATIENCE.as_secs() as i64,
        tv_nsec: 0,
    };
    let mut fds = [rustix::event::PollFd::new(
        pidfd,
        rustix::event::PollFlags::IN,
    )];
    let n = rustix::event::poll(&mut fds, Some(&ts)).expect("poll pidfd");
    assert_eq!(n, 1, "{what} did not exit within {PATIENCE:?}");
}

fn signal_pidfd(pidfd: &OwnedFd, sig: rustix::process::Signal) {
    rustix::process::pidfd_send_signal(pidfd, sig).expect("pidfd_send_signal");
}

/// Reads everything from `fd` until EOF (or EIO, as a PTY master reports the last close).
fn read_to_end(fd: OwnedFd) -> String {
    let mut file = fs::File::from(fd);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.raw_os_error() == Some(libc::EIO) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("read: {e}"),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Launches `l` through a new guardian with its stdin and stdout on pipes (stderr is the
/// test's), and reads its hello: the guardian, the hello, the writer of the workload's stdin and
/// the reader of its stdout (this process keeps no other end).
fn launched_with_pipes(l: &Launch) -> (Guardian, Hello, OwnedFd, OwnedFd) {
    let (in_r, in_w) = cloexec_pipe();
    let (out_r, out_w) = cloexec_pipe();
    let err = stderr_dup();
    let g = Guardian::spawn();
    g.launch(l, Some([in_r.as_fd(), out_w.as_fd(), err.as_fd()]))
        .unwrap();
    drop((in_r, out_w, err));
    let hello = g.expect_hello();
    (g, hello, in_w, out_r)
}

/// Runs the probe through the guardian with piped stdio; returns (hello, receipt, probe output).
fn run_probe(l: &Launch) -> (Hello, Receipt, String) {
    let (g, hello, in_w, out_r) = launched_with_pipes(l);
    g.start();
    let output = read_to_end(out_r);
    drop(in_w);
    let (frames, r) = g.until_scope_exited();
    assert_eq!(frames[0], Msg::Started, "{frames:?}\n{output}");
    assert!(g.finish().0.success());
    assert_receipt_matches(&r, &hello, l);
    (hello, r, output)
}

fn probe_value<'a>(output: &'a str, key: &str) -> &'a str {
    output
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("probe printed no {key:?}:\n{output}"))
}

const PROBE: &str = env!("CARGO_BIN_EXE_probe");
const ORPHANER: &str = env!("CARGO_BIN_EXE_orphaner");

// ---------------------------------------------------------------------------------------------
// G1, G5, G6: detached descendants.

#[test]
fn detached_grandchild_delays_the_receipt_not_the_workload_result() {
    let dir = tempfile::tempdir().unwrap();
    let l = Launch::new(&dir.path().join("proof"), &[ORPHANER]);
    let (g, hello, in_w, out_r) = launched_with_pipes(&l);
    g.start();
    assert_eq!(g.expect(), Msg::Started);
    // G6: the workload's own result arrives while its grandchild still holds the scope.
    match g.expect() {
        Msg::WorkloadExited {
            status: WorkloadStatus::Exited(7),
            at_ns,
        } => assert!(at_ns > 0),
        other => panic!("expected the workload's exit first, got {other:?}"),
    }
    let mut line = String::new();
    BufReader::new(fs::File::from(out_r))
        .read_line(&mut line)
        .unwrap();
    let gpid: u32 = line
        .strip_prefix("grandchild ")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("orphaner said {line:?}"));
    // G1: the setsid'd orphan was adopted by the guardian, not by init.
    assert_eq!(
        proc_status(gpid, "PPid:").as_deref(),
        Some(hello.guardian.pid.to_string().as_str()),
        "grandchild {gpid} not adopted by guardian {}",
        hello.guardian.pid
    );
    assert_ne!(
        proc_status(gpid, "NSsid:"),
        proc_status(hello.guardian.pid, "NSsid:")
    );
    // G5: no receipt while a descendant lives.
    assert!(refine_protocol::is_unwritten(
        &fs::read(&l.proof_path).unwrap()
    ));
    assert_eq!(
        g.recv(Duration::ZERO),
        None,
        "a frame arrived while the grandchild lives"
    );
    // Release the grandchild: only now may the scope end.
    drop(in_w);
    let (frames, r) = g.until_scope_exited();
    assert!(frames.is_empty(), "{frames:?}");
    assert_eq!(r.status, WorkloadStatus::Exited(7));
    assert_eq!(r.end, ScopeEnd::Completed);
    assert_eq!(r.reaped, 2, "the workload and the adopted grandchild");
    assert!(r.written_at_ns >= r.workload_exited_at_ns);
    assert_receipt_matches(&r, &hello, &l);
    assert!(g.finish().0.success());
}

/// Negative control for the test above (STYLE 14): without the subreaper bit, the same orphan
/// is not adopted by the process that started the orphaner. (This test process never sets the
/// bit; the harness is threaded.)
#[test]
fn without_the_subreaper_bit_the_orphan_is_not_adopted() {
    let mut is_subreaper = 0;
    // SAFETY: PR_GET_CHILD_SUBREAPER only reads a flag into the live int.
    let r = unsafe { libc::prctl(libc::PR_GET_CHILD_SUBREAPER, &mut is_subreaper as *mut i32) };
    assert_eq!(
        (r, is_subreaper),
        (0, 0),
        "the test process must not be a subreaper"
    );
    let (in_r, in_w) = cloexec_pipe();
    let mut orphaner = Command::new(ORPHANER)
        .stdin(Stdio::from(in_r))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(orphaner.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let gpid: u32 = line
        .strip_prefix("grandchild ")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(orphaner.wait().unwrap().code(), Some(7));
    let ppid = proc_status(gpid, "PPid:").expect("grandchild alive");
    assert_ne!(
        ppid,
        std::process::id().to_string(),
        "adopted without the bit?"
    );
    assert_ne!(ppid, orphaner.id().to_string());
    drop(in_w); // lets the grandchild exit; its new parent reaps it
}

// ---------------------------------------------------------------------------------------------
// G7: launcher loss.

/// Kills (through a pidfd) and reaps a child this test spawned if the test fails before it
/// ended, so a failing test leaves no launcher holding the harness's pipes.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // Unreaped: the pid is still this child's, so the pidfd names it.
            if let Some(pid) = rustix::process::Pid::from_raw(self.0.id() as i32) {
                if let Ok(fd) =
                    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
                {
                    let _ = rustix::process::pidfd_send_signal(&fd, rustix::process::Signal::KILL);
                }
            }
            let _ = self.0.wait();
        }
    }
}

#[test]
fn launcher_killed_mid_flight_guardian_forwards_pdeath_reaps_and_writes_receipt() {
    let dir = tempfile::tempdir().unwrap();
    let proof = dir.path().join("proof");
    let mut launcher = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_guardian-launcher"))
            .arg("--pdeath")
            .arg(libc::SIGUSR1.to_string())
            .arg(&proof)
            .args(["--", "sleep", "1000"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let launcher = &mut launcher.0;
    let mut lines = BufReader::new(launcher.stdout.take().unwrap()).lines();
    let hello: Vec<u64> = lines
        .next()
        .unwrap()
        .unwrap()
        .strip_prefix("hello ")
        .expect("hello line")
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    let rest: Vec<String> = lines
        .by_ref()
        .map(|l| l.unwrap())
        .take_while(|l| l != "started")
        .collect();
    assert!(
        rest.iter().all(|l| l.starts_with("guardian-SigIgn")),
        "{rest:?}"
    );
    let (gpid, gstart, wpid, wstart) = (hello[0] as u32, hello[1], hello[2] as u32, hello[3]);
    let guardian = verified_pidfd(gpid, gstart);
    let workload = verified_pidfd(wpid, wstart);
    let launcher_fd = verified_pidfd(launcher.id(), start_time(launcher.id()).unwrap());

    signal_pidfd(&launcher_fd, rustix::process::Signal::KILL);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&launcher.wait().unwrap()),
        Some(libc::SIGKILL)
    );
    // The guardian survives its launcher, signals the workload, reaps it, and exits.
    await_exit(&workload, "the workload (after the parent-death signal)");
    await_exit(&guardian, "the guardian");
    let r = Receipt::decode(&fs::read(&proof).unwrap()).expect("a receipt that verifies");
    assert_eq!(
        r.status,
        WorkloadStatus::Signaled(libc::SIGUSR1),
        "the requested pdeath signal"
    );
    assert_eq!(r.end, ScopeEnd::Completed);
    assert_eq!((r.guardian.pid, r.guardian.start_time), (gpid, gstart));
    assert_eq!((r.workload.pid, r.workload.start_time), (wpid, wstart));
    assert_eq!(r.boot_id, boot_id());
    let meta = fs::metadata(&proof).unwrap();
    assert_eq!((r.proof.dev, r.proof.ino), (meta.dev(), meta.ino()));
    assert_eq!(r.reaped, 1);
}

#[test]
fn channel_loss_after_start_defaults_to_sigkill_for_a_term_ignoring_workload() {
    let dir = tempfile::tempdir().unwrap();
    let l = Launch::new(
        &dir.path().join("proof"),
        &[env!("CARGO_BIN_EXE_term-ignorer")],
    );
    let (g, hello, _in_w, out_r) = launched_with_pipes(&l);
    g.start();
    assert_eq!(g.expect(), Msg::Started);
    let mut out = BufReader::new(fs::File::from(out_r)).lines();
    assert_eq!(out.next().unwrap().unwrap(), "ready");
    // G9: SIGTERM to the guardian reaches the workload, which takes it and keeps running.
    let gfd = verified_pidfd(hello.guardian.pid, hello.guardian.start_time);
    signal_pidfd(&gfd, rustix::process::Signal::TERM);
    assert_eq!(out.next().unwrap().unwrap(), "term");
    assert!(refine_protocol::is_unwritten(
        &fs::read(&l.proof_path).unwrap()
    ));
    // G7: the launcher goes away; pdeath_signal 0 means SIGKILL.
    let (status, stderr) = refine_tests::driver::reap(g.hang_up());
    assert!(status.success(), "{status:?} {stderr}");
    let r = Receipt::decode(&fs::read(&l.proof_path).unwrap()).unwrap();
    assert_eq!(r.status, WorkloadStatus::Signaled(libc::SIGKILL));
    assert_eq!(r.workload, hello.workload);
}

// ---------------------------------------------------------------------------------------------
// G9: signals.

#[test]
fn termination_signals_to_the_guardian_are_forwarded_and_the_receipt_is_written() {
    for sig in [
        rustix::process::Signal::TERM,
        rustix::process::Signal::INT,
        rustix::process::Signal::HUP,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let l = Launch::new(&dir.path().join("proof"), &["sleep", "1000"]);
        let g = Guardian::spawn();
        g.launch(&l, None).unwrap();
        let hello = g.expect_hello();
        g.start();
        assert_eq!(g.expect(), Msg::Started);
        let gfd = verified_pidfd(hello.guardian.pid, hello.guardian.start_time);
        signal_pidfd(&gfd, sig);
        let (frames, r) = g.until_scope_exited();
        let want = WorkloadStatus::Signaled(sig.as_raw());
        assert!(
            matches!(frames[..], [Msg::WorkloadExited { status, .. }] if status == want),
            "{frames:?}"
        );
        assert_eq!(r.status, want);
        assert_receipt_matches(&r, &hello, &l);
        let (status, stderr) = g.finish();
        assert_eq!(
            status.code(),
            Some(0),
            "the guardian itself survives {sig:?}: {stderr}"
        );
    }
}

#[test]
fn signal_frame_is_forwarded_to_the_workload() {
    let dir = tempfile::tempdir().unwrap();
    let l = Launch::new(&dir.path().join("proof"), &["sleep", "1000"]);
    let g = Guardian::spawn();
    g.launch(&l, None).unwrap();
    g.expect_hello();
    g.start();
    assert_eq!(g.expect(), Msg::Started);
    g.send(Frame::Signal {
        signo: libc::SIGUSR1,
    })
    .unwrap();
    let (_, r) = g.until_scope_exited();
    assert_eq!(r.status, WorkloadStatus::Signaled(libc::SIGUSR1));
    assert!(g.finish().0.success());
}

// ---------------------------------------------------------------------------------------------
// G5, G8: what the workload inherits.

#[test]
fn workload_holds_neither_the_proof_descriptor_nor_the_channel() {
    let dir = tempfile::tempdir().unwrap();
    let l = Launch::new(&dir.path().join("proof"), &[PROBE]);
    let (_, _, out) = run_probe(&l);
    let fds: Vec<(&str, &str)> = out
        .lines()
        .filter_map(|l| l.strip_prefix("fd "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    let numbers: Vec<&str> = fds.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, ["0", "1", "2"], "{out}");
    for (n, target) in fds {
        assert!(!target.starts_with("socket:"), "fd {n} is a socket: {out}");
        assert!(!target.contains("proof"), "fd {n} is the proof file: {out}");
    }
}

#[test]
fn environment_cwd_and_rlimit_reach_the_workload() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("work dir");
    fs::create_dir(&cwd).unwrap();
    let mut l = Launch::new(&dir.path().join("proof"), &[PROBE]);
    l.env = vec![b"REFINE_PROBE=hello world".to_vec(), b"EMPTY=".to_vec()];
    l.cwd = Some(cwd.clone());
    l.rlimits = vec![refine_protocol::Rlimit {
        resource: libc::RLIMIT_NOFILE,
        soft: 123,
        hard: 456,
    }];
    let (_, _, out) = run_probe(&l);
    let env: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix("env ")).collect();
    assert_eq!(
        env,
        ["REFINE_PROBE=hello world", "EMPTY="],
        "exactly the prepared env"
    );
    assert_eq!(
        probe_value(&out, "cwd"),
        cwd.canonicalize().unwrap().to_str().unwrap()
    );
    assert_eq!(probe_value(&out, "nofile"), "123 456");
    // A new process group (no PTY, no new session flag).
    assert_eq!(probe_value(&out, "pgid"), probe_value(&out, "pid"));
}

/// `SigBlk`/`SigIgn` of a `/proc/PID/status` text, as bit sets.
fn sig_sets(status: &str) -> (u64, u64) {
    let get = |key| refine_tests::status_mask(status, key);
    (get("SigBlk:"), get("SigIgn:"))
}

fn sig_bit(s: i32) -> u64 {
    1u64 << (s - 1)
}

/// The workload is `cat /proc/self/status` (a C program that changes no disposition, unlike a
/// Rust `main`, whose runtime ignores SIGPIPE before `main` runs).
#[test]
fn the_guardians_blocked_mask_does_not_reach_the_workload() {
    let dir = tempfile::tempdir().unwrap();
    let l = Launch::new(&dir.path().join("proof"), &["cat", "/proc/self/status"]);
    let (g, hello, _in_w, out_r) = launched_with_pipes(&l);
    // Control: the guardian itself blocks (almost) every signal.
    let guardian = fs::read_to_string(format!("/proc/{}/status", hello.guardian.pid)).unwrap();
    let (blocked, _) = sig_sets(&guardian);
    let want = sig_bit(libc::SIGTERM) | sig_bit(libc::SIGCHLD) | sig_bit(libc::SIGINT);
    assert_eq!(blocked & want, want, "control: {guardian}");
    g.start();
    let out = read_to_end(out_r);
    let (_, r) = g.until_scope_exited();
    assert_eq!(r.status, WorkloadStatus::Exited(0));
    assert_eq!(
        sig_sets(&out),
        (0, 0),
        "the workload starts with no blocked or ignored signal"
    );
    assert!(g.finish().0.success());
}

#[test]
fn ignored_dispositions_of_the_launcher_do_not_reach_the_workload() {
    let dir = tempfile::tempdir().unwrap();
    let proof = dir.path().join("proof");
    let out = Command::new(env!("CARGO_BIN_EXE_guardian-launcher"))
        .arg("--ignore-signals")
        .arg(&proof)
        .args(["--", "cat", "/proc/self/status"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = sig_bit(libc::SIGINT)
        | sig_bit(libc::SIGQUIT)
        | sig_bit(libc::SIGUSR2)
        | sig_bit(libc::SIGHUP);
    let hex = |key: &str| u64::from_str_radix(probe_value(&text, key), 16).unwrap();
    assert_eq!(
        hex("launcher-SigIgn") & want,
        want,
        "control: the launcher ignores them\n{text}"
    );
    // Ignored dispositions survive execve, but the guardian resets them first thing (G11)...
    assert_eq!(hex("guardian-SigIgn"), 0, "the guardian kept them\n{text}");
    // ...and the workload starts with none.
    assert_eq!(sig_sets(&text), (0, 0), "{text}");
    assert!(text.contains("scope Exited(0) Completed 1"), "{text}");
}

/// A launcher that leaks descriptors (no close-on-exec) must not be able to keep a workload's
/// stdin open through the guardian: the guardian closes every inherited descriptor but its
/// channel, so `cat` sees end of file once the launcher closes its own copies.
#[test]
fn descriptors_leaked_to_the_guardian_do_not_hold_the_scope_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut launcher = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_guardian-launcher"))
            .arg("--leak-stdin-pipe")
            .arg(dir.path().join("proof"))
            .args(["--", "cat"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let launcher = &mut launcher.0;
    let mut exited = None;
    let done = refine_tests::wait_until(PATIENCE, || {
        exited = launcher.try_wait().unwrap();
        exited.is_some()
    });
    assert!(
        done,
        "the leaked write end held cat's stdin open: the scope never ended"
    );
    let mut text = String::new();
    launcher
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert!(exited.unwrap().success(), "{text}");
    assert!(text.contains("scope Exited(0) Completed 1"), "{text}");
}

#[test]
fn pty_launch_gives_the_workload_a_controlling_terminal() {
    use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let slave: OwnedFd = rustix::fs::open(
        name.as_c_str(),
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut l = Launch::new(
        &dir.path().join("proof"),
        &["sh", "-c", "test -t 0 && test -t 1 && echo tty-ok-$$"],
    );
    l.flags = refine_protocol::frame::FLAG_PTY;
    let g = Guardian::spawn();
    g.launch(&l, Some([slave.as_fd(), slave.as_fd(), slave.as_fd()]))
        .unwrap();
    drop(slave);
    let hello = g.expect_hello();
    assert_eq!(hello.workload_sid, hello.workload.pid, "a new session");
    assert_eq!(hello.workload_pgid, hello.workload.pid);
    g.start();
    let (frames, r) = g.until_scope_exited();
    assert_eq!(frames[0], Msg::Started);
    // The output went through the master (buffered there until we read it).
    let mut fds = [rustix::event::PollFd::new(
        &master,
        rustix::event::PollFlags::IN,
    )];
    let ts = rustix::time::Timespec {
        tv_sec: PATIENCE.as_secs() as i64,
        tv_nsec: 0,
    };
    rustix::event::poll(&mut fds, Some(&ts)).unwrap();
    let out = read_to_end(master);
    assert!(
        out.contains(&format!("tty-ok-{}", hello.workload.pid)),
        "{out:?}"
    );
    assert_eq!(r.status, WorkloadStatus::Exited(0));
    assert!(g.finish().0.success());
}

#[test]
fn the_largest_argv_and_environment_reach_the_workload() {
    use refine_protocol::frame::MAX_ARGS;
    let dir = tempfile::tempdir().unwrap();
    let mut argv: Vec<String> = ["sh", "-c", "echo $#; echo $VAR_0 $VAR_4094", "sh"]
        .map(String::from)
        .to_vec();
    argv.extend((argv.len()..MAX_ARGS).map(|i| format!("arg{i}")));
    let mut l = Launch::new(&dir.path().join("proof"), &argv);
    l.env
        .extend((0..MAX_ARGS - 1).map(|i| format!("VAR_{i}=value-{i}").into_bytes()));
    assert_eq!((l.argv.len(), l.env.len()), (MAX_ARGS, MAX_ARGS));
    let (_, r, out) = run_probe(&l);
    assert_eq!(r.status, WorkloadStatus::Exited(0));
    assert_eq!(
        out,
        format!("{}\nvalue-0 value-4094\n", MAX_ARGS - 4),
        "{out}"
    );
}

#[test]
fn an_existing_proof_file_is_refused_before_anything_is_forked() {
    let dir = tempfile::tempdir().unwrap();
    let (l, marker) = marker_launch(dir.path());
    fs::write(&l.proof_path, b"stale").unwrap();
    let g = Guardian::spawn();
    g.launch(&l, None).unwrap();
    match g.expect() {
        Msg::GuardianFailed { errno, .. } => assert_eq!(errno, libc::EEXIST),
        other => panic!("expected GuardianFailed, got {other:?}"),
    }
    let (status, stderr) = g.finish();
    assert!(!status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(fs::read(&l.proof_path).unwrap(), b"stale");
    assert!(!marker.exists());
}
