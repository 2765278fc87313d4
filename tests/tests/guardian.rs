//! End-to-end tests of `refine-guardian` (issue 2, SPEC G1–G10), driven through the raw
//! test-side launcher in `refine_tests::driver`. Every test runs the real binary against the real
//! kernel; the test process reaps only the guardian it spawned (by pid), never `waitpid(-1)`.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use refine_protocol::frame::MAX_FRAME;
use refine_protocol::{Frame, Hello, Receipt, ScopeEnd, WorkloadStatus};
use refine_tests::driver::{Guardian, Launch, Msg};

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
    let (_, frames, r) = run(&l);
    assert_eq!(
        frames[0],
        Msg::SpawnFailed {
            errno: libc::ENOENT
        },
        "{frames:?}"
    );
    assert_eq!(r.end, ScopeEnd::SpawnFailed);
    assert_eq!(r.spawn_errno, libc::ENOENT);
    assert_eq!(r.status, WorkloadStatus::NeverStarted);

    let dir = tempfile::tempdir().unwrap();
    let l = Launch::new(&dir.path().join("proof"), &["/nonexistent/refine/prog"]);
    let (_, frames, r) = run(&l);
    assert_eq!(
        frames[0],
        Msg::SpawnFailed {
            errno: libc::ENOENT
        },
        "{frames:?}"
    );
    assert_eq!(r.spawn_errno, libc::ENOENT);
}

#[test]
fn not_executable_is_spawn_failed_eacces() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.txt");
    fs::write(&file, "not a program").unwrap();
    let l = Launch::new(&dir.path().join("proof"), &[file.as_os_str()]);
    let (_, frames, r) = run(&l);
    assert_eq!(
        frames[0],
        Msg::SpawnFailed {
            errno: libc::EACCES
        },
        "{frames:?}"
    );
    assert_eq!(r.end, ScopeEnd::SpawnFailed);
}

/// A workload that would leave evidence if it ever executed.
fn marker_launch(dir: &Path) -> (Launch, std::path::PathBuf) {
    let marker = dir.join("executed");
    let l = Launch::new(
        &dir.join("proof"),
        &[Path::new("touch").as_os_str(), marker.as_os_str()],
    );
    (l, marker)
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
    let (l, marker) = marker_launch(dir.path());
    let g = Guardian::spawn();
    g.launch(&l, None).unwrap();
    let hello = g.expect_hello();
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
    let (l, marker) = marker_launch(dir.path());
    let g = Guardian::spawn();
    g.launch(&l, None).unwrap();
    let hello = g.expect_hello();
    let Guardian { child, chan } = g;
    drop(chan);
    let g = Guardian {
        child,
        chan: rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .unwrap()
        .0,
    };
    let (status, stderr) = g.finish();
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
    // The guardian may already be gone when the message is larger than its buffer.
    let _ = g.send_raw(bytes);
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
