//! Standard capture over plain pipes (SPEC S3–S5, S10), driven against real producer processes.
//!
//! These tests need no guardian: the producer is this test's own direct child (reaped by pid,
//! never `waitpid(-1)`), and its exit, observed on a pidfd, starts the final drain just as the
//! guardian's `WorkloadExited` does in the engine.

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use refine_protocol::record::{CaptureReceipt, StreamEnd};
use refine_protocol::{RegistrationId, RuntimeId, WorkloadStatus};
use refine_supervisor::launch::capture::{
    Capture, CaptureConfig, CaptureResult, Incomplete, IncompleteCapture, OutputCallback,
    StreamSource, StreamState, Utf8Chunks, FINAL_DRAIN,
};
use refine_supervisor::store::registry::Stream;
use sha2::{Digest, Sha256};

const PRODUCER: &str = env!("CARGO_BIN_EXE_cap-producer");
const MIB: usize = 1024 * 1024;

struct Run {
    result: CaptureResult,
    status: std::process::ExitStatus,
    /// From the producer's exit (seen on its pidfd) to the capture's end.
    after_exit: Duration,
}

fn spawn(args: &[&str]) -> Child {
    Command::new(PRODUCER)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cap-producer")
}

fn sources(child: &mut Child, dir: &Path) -> Vec<StreamSource> {
    let out: OwnedFd = child.stdout.take().expect("stdout").into();
    let err: OwnedFd = child.stderr.take().expect("stderr").into();
    vec![
        StreamSource {
            stream: Stream::Stdout,
            fd: out,
            artifact: dir.join("x.stdout"),
            pty: false,
            forward: None,
        },
        StreamSource {
            stream: Stream::Stderr,
            fd: err,
            artifact: dir.join("x.stderr"),
            pty: false,
            forward: None,
        },
    ]
}

/// Captures until the producer exited and the capture is done (all EOF or drain over).
fn drive(mut child: Child, mut cap: Capture) -> Run {
    let pid = rustix::process::Pid::from_child(&child);
    let pidfd =
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).expect("pidfd_open");
    let mut exited_at: Option<Instant> = None;
    let mut status = None;
    let hard_end = Instant::now() + Duration::from_secs(120);
    loop {
        let now = Instant::now();
        assert!(now < hard_end, "capture did not finish within 120 s");
        if status.is_some() && cap.is_done(now) {
            break;
        }
        let extra = [pidfd.as_fd()];
        let ready = if status.is_none() {
            cap.pump(&extra, Some(hard_end)).expect("pump")
        } else {
            cap.pump(&[], Some(hard_end)).expect("pump")
        };
        if status.is_none() && ready.is_set(0) {
            let at = Instant::now();
            exited_at = Some(at);
            cap.begin_drain(at);
            // Our own direct child, reaped by pid.
            status = Some(child.wait().expect("wait producer"));
        }
    }
    let after_exit = exited_at.map(|t| t.elapsed()).unwrap_or_default();
    Run {
        result: cap.finish(),
        status: status.expect("status"),
        after_exit,
    }
}

fn counting_callback() -> (OutputCallback, Arc<AtomicU64>, Arc<Mutex<Sha256>>) {
    let count = Arc::new(AtomicU64::new(0));
    let hash = Arc::new(Mutex::new(Sha256::new()));
    let (c, h) = (count.clone(), hash.clone());
    let cb: OutputCallback = Box::new(move |s, b| {
        if s == Stream::Stdout {
            c.fetch_add(b.len() as u64, Ordering::Relaxed);
            h.lock().unwrap().update(b);
        }
    });
    (cb, count, hash)
}

fn stderr_text(r: &CaptureResult) -> String {
    String::from_utf8_lossy(r.stream(Stream::Stderr).unwrap().kept()).into_owned()
}

#[test]
fn forty_mib_keeps_sixteen_and_the_artifact_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn(&["bytes", &(40 * MIB).to_string()]);
    drop(child.stdin.take());
    let (cb, count, hash) = counting_callback();
    let cap = Capture::new(
        sources(&mut child, dir.path()),
        CaptureConfig::default(),
        Some(cb),
    )
    .unwrap();
    let run = drive(child, cap);
    assert!(run.status.success());
    let out = run.result.stream(Stream::Stdout).unwrap();
    assert_eq!(out.kept().len(), 16 * MIB);
    assert_eq!(
        out.state,
        StreamState::Incomplete(Incomplete::MemoryLimit { kept: 16 * MIB })
    );
    assert_eq!(out.artifact_bytes, 40 * MIB as u64);
    assert_eq!(out.read_bytes, 40 * MIB as u64);
    let producer_sha = stderr_text(&run.result).trim().to_owned();
    assert_eq!(refine_tests::sha256_file(&out.artifact), producer_sha);
    assert_eq!(count.load(Ordering::Relaxed), 40 * MIB as u64);
    let cb_sha = refine_tests::sha256_hex(hash.lock().unwrap().clone());
    assert_eq!(cb_sha, producer_sha, "the callback saw every byte in order");
    // Parsers are refused; stderr (complete) is served.
    assert!(matches!(
        run.result.complete_output(Stream::Stdout),
        Err(IncompleteCapture::Incomplete { .. })
    ));
    assert!(run.result.complete_output(Stream::Stderr).is_ok());
    assert!(!run.result.is_complete());
}

#[test]
fn capture_receipt_round_trips_with_bounded_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn(&["bytes", &(3 * MIB).to_string()]);
    drop(child.stdin.take());
    let config = CaptureConfig {
        keep_max: MIB,
        ..CaptureConfig::default()
    };
    let cap = Capture::new(sources(&mut child, dir.path()), config, None).unwrap();
    let run = drive(child, cap);
    let id = RegistrationId([7; 16]);
    let receipt = run
        .result
        .receipt(id, RuntimeId([9; 16]), Some(WorkloadStatus::Exited(0)));
    let back = CaptureReceipt::decode(&receipt.encode().unwrap()).unwrap();
    assert_eq!(back, receipt);
    let out = &back.streams[0];
    assert_eq!(out.name, "stdout");
    assert!(matches!(out.end, StreamEnd::Incomplete(_)));
    assert_eq!(out.artifact_bytes, 3 * MIB as u64);
    assert_eq!(
        out.prefix.len(),
        refine_protocol::record::CAPTURE_PREFIX_MAX
    );
    assert_eq!(back.streams[1].end, StreamEnd::Eof);
}

#[test]
fn a_writer_that_outlives_the_workload_cannot_delay_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn(&["orphan-flood"]);
    drop(child.stdin.take());
    let cap = Capture::new(
        sources(&mut child, dir.path()),
        CaptureConfig {
            log_cap: Some(8 * MIB as u64),
            ..CaptureConfig::default()
        },
        None,
    )
    .unwrap();
    let run = drive(child, cap);
    let flood = Flooder::from_stderr(&stderr_text(&run.result));
    assert!(run.status.success());
    // Generous scheduling slack on a shared 2-core machine; the point is "not until EOF".
    assert!(
        run.after_exit < FINAL_DRAIN + Duration::from_secs(10),
        "result took {:?} after exit",
        run.after_exit
    );
    let out = run.result.stream(Stream::Stdout).unwrap();
    assert!(
        matches!(
            out.state,
            StreamState::Incomplete(Incomplete::DrainEnded { .. })
                | StreamState::Incomplete(Incomplete::ArtifactCap { .. })
        ),
        "{:?}",
        out.state
    );
    assert!(flood.alive(), "capture must never kill a writer to get EOF");
    flood.kill();
}

/// The detached flooder, verified by its command line once a pidfd pins it.
struct Flooder(OwnedFd);

impl Flooder {
    fn from_stderr(text: &str) -> Flooder {
        let pid: i32 = text
            .lines()
            .find_map(|l| l.strip_prefix("flood-pid "))
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no flood pid in {text:?}"));
        let pid = rustix::process::Pid::from_raw(pid).expect("pid");
        let fd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
            .expect("pidfd of flooder");
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", pid.as_raw_nonzero())).unwrap();
        assert!(
            cmdline.split(|&b| b == 0).any(|a| a == b"flood"),
            "pid {pid:?} is not the flooder"
        );
        Flooder(fd)
    }
    fn alive(&self) -> bool {
        rustix::process::pidfd_send_signal(&self.0, rustix::process::Signal::CONT).is_ok()
    }
    fn kill(self) {
        let _ = rustix::process::pidfd_send_signal(&self.0, rustix::process::Signal::KILL);
        let mut fds = [rustix::event::PollFd::new(
            &self.0,
            rustix::event::PollFlags::IN,
        )];
        let ts = rustix::event::Timespec {
            tv_sec: 30,
            tv_nsec: 0,
        };
        let _ = rustix::event::poll(&mut fds, Some(&ts));
    }
}

#[test]
fn early_closed_stdout_ends_that_stream_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn(&["close-stdout"]);
    let mut stdin = child.stdin.take().unwrap();
    let closed = Arc::new(AtomicU64::new(0));
    let seen = closed.clone();
    let cb: OutputCallback = Box::new(move |s, b| {
        if s == Stream::Stderr && b.windows(6).any(|w| w == b"closed") {
            seen.store(1, Ordering::SeqCst);
        }
    });
    let mut cap = Capture::new(
        sources(&mut child, dir.path()),
        CaptureConfig::default(),
        Some(cb),
    )
    .unwrap();
    // Pump until stdout reached EOF while the producer still runs (it waits for stdin EOF).
    let end = Instant::now() + Duration::from_secs(60);
    while closed.load(Ordering::SeqCst) == 0 || !cap.is_closed(Stream::Stdout) {
        assert!(Instant::now() < end, "stdout never closed");
        cap.pump(&[], Some(end)).unwrap();
    }
    assert!(child.try_wait().unwrap().is_none(), "producer still runs");
    stdin.write_all(b"go").unwrap();
    drop(stdin);
    let run = drive(child, cap);
    assert_eq!(run.status.code(), Some(3));
    assert_eq!(
        run.result.complete_output(Stream::Stdout).unwrap(),
        b"bye\n"
    );
    assert_eq!(
        run.result.complete_output(Stream::Stderr).unwrap(),
        b"closed\n"
    );
    assert!(run.result.is_complete());
}

#[test]
fn utf8_split_across_writes_arrives_raw_and_decodes_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn(&["utf8-split"]);
    let stdin = Mutex::new(Some(child.stdin.take().unwrap()));
    let chunks: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let text = Arc::new(Mutex::new(String::new()));
    let (c, t) = (chunks.clone(), text.clone());
    let mut dec = Utf8Chunks::default();
    let cb: OutputCallback = Box::new(move |s, b| {
        if s != Stream::Stdout {
            return;
        }
        c.lock().unwrap().push(b.to_vec());
        dec.push(b, |s| t.lock().unwrap().push_str(s));
        // First half seen: let the producer write the second half.
        if let Some(mut w) = stdin.lock().unwrap().take() {
            let _ = w.write_all(b"x");
        }
    });
    let cap = Capture::new(
        sources(&mut child, dir.path()),
        CaptureConfig::default(),
        Some(cb),
    )
    .unwrap();
    let run = drive(child, cap);
    assert!(run.status.success());
    let chunks = chunks.lock().unwrap();
    assert_eq!(
        chunks[0], b"caf\xc3",
        "the first write arrives alone, split mid-character"
    );
    assert_eq!(chunks.concat(), "café!\n".as_bytes());
    assert_eq!(*text.lock().unwrap(), "café!\n");
    assert!(!text.lock().unwrap().contains('\u{fffd}'));
    assert_eq!(
        run.result.complete_output(Stream::Stdout).unwrap(),
        "café!\n".as_bytes()
    );
}

#[test]
fn log_cap_stops_the_artifact_but_keeps_draining() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn(&["bytes", &(10 * MIB).to_string()]);
    drop(child.stdin.take());
    let (cb, count, _) = counting_callback();
    let cap = Capture::new(
        sources(&mut child, dir.path()),
        CaptureConfig {
            log_cap: Some(MIB as u64),
            ..CaptureConfig::default()
        },
        Some(cb),
    )
    .unwrap();
    let run = drive(child, cap);
    assert!(run.status.success(), "the writer finished without blocking");
    let out = run.result.stream(Stream::Stdout).unwrap();
    assert_eq!(std::fs::metadata(&out.artifact).unwrap().len(), MIB as u64);
    assert_eq!(
        out.state,
        StreamState::Incomplete(Incomplete::ArtifactCap { cap: MIB as u64 })
    );
    assert_eq!(out.read_bytes, 10 * MIB as u64);
    assert_eq!(count.load(Ordering::Relaxed), 10 * MIB as u64);
    // The capped artifact holds the stream's first MiB.
    let kept = out.kept();
    assert_eq!(&std::fs::read(&out.artifact).unwrap()[..], &kept[..MIB]);
}

/// The artifact failed as a write to a full disk does.
fn assert_full_disk(state: &StreamState) {
    assert_eq!(
        *state,
        StreamState::Failed(
            refine_supervisor::launch::capture::CaptureFailure::ArtifactWrite {
                errno: libc::ENOSPC
            }
        )
    );
}

#[test]
fn an_artifact_write_failure_is_a_capture_failure_and_the_pipe_still_drains() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn(&["bytes", &(4 * MIB).to_string()]);
    drop(child.stdin.take());
    let mut srcs = sources(&mut child, dir.path());
    // Every write to /dev/full fails with ENOSPC.
    srcs[0].artifact = "/dev/full".into();
    let (cb, count, _) = counting_callback();
    let cap = Capture::new(srcs, CaptureConfig::default(), Some(cb)).unwrap();
    let run = drive(child, cap);
    assert!(run.status.success(), "the writer never blocked");
    let out = run.result.stream(Stream::Stdout).unwrap();
    assert_full_disk(&out.state);
    assert_eq!(out.read_bytes, 4 * MIB as u64);
    assert_eq!(count.load(Ordering::Relaxed), 4 * MIB as u64);
    assert!(matches!(
        run.result.complete_output(Stream::Stdout),
        Err(IncompleteCapture::Failed { .. })
    ));
}

/// `cap-producer bytes N` captured with no callback, 1 MiB kept in memory, artifacts in `dir`:
/// past that prefix the bytes are spliced.
fn spliced_run(n: usize, dir: &Path, log_cap: Option<u64>) -> Run {
    let mut child = spawn(&["bytes", &n.to_string()]);
    drop(child.stdin.take());
    let cap = Capture::new(
        sources(&mut child, dir),
        CaptureConfig {
            keep_max: MIB,
            log_cap,
            ..CaptureConfig::default()
        },
        None,
    )
    .unwrap();
    drive(child, cap)
}

/// Without a callback or forward, bytes past the kept prefix move pipe to file by `splice`
/// (F5): the artifact is still every byte in order, the prefix is still kept, the stream is
/// still incomplete past the memory limit.
#[test]
fn past_the_kept_prefix_the_artifact_is_spliced_and_still_exact() {
    let dir = tempfile::tempdir().unwrap();
    let run = spliced_run(40 * MIB, dir.path(), None);
    assert!(run.status.success());
    let out = run.result.stream(Stream::Stdout).unwrap();
    assert_eq!(out.kept().len(), MIB);
    assert_eq!(
        out.state,
        StreamState::Incomplete(Incomplete::MemoryLimit { kept: MIB })
    );
    assert_eq!(out.artifact_bytes, 40 * MIB as u64);
    assert_eq!(out.read_bytes, 40 * MIB as u64);
    let producer_sha = stderr_text(&run.result).trim().to_owned();
    assert_eq!(refine_tests::sha256_file(&out.artifact), producer_sha);
    let head = std::fs::read(&out.artifact).unwrap();
    assert_eq!(
        &head[..MIB],
        out.kept(),
        "the kept prefix is the artifact's"
    );
}

/// A disk that fills up while bytes are being spliced fails the artifact as a failed write
/// does (the bytes already taken from the workload's pipe are not lost from the count), and the
/// pipe is still drained to its end. Root only: it mounts a tmpfs of 4 MiB.
#[test]
fn a_disk_that_fills_while_splicing_fails_the_artifact_and_the_pipe_still_drains() {
    let Some(disk) = refine_tests::TinyDisk::mount("4m") else {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    };
    let run = spliced_run(24 * MIB, disk.path(), None);
    assert!(run.status.success(), "the writer finished without blocking");
    let out = run.result.stream(Stream::Stdout).unwrap();
    assert_full_disk(&out.state);
    assert_eq!(out.read_bytes, 24 * MIB as u64);
    let artifact = std::fs::read(&out.artifact).unwrap();
    assert_eq!(out.artifact_bytes, artifact.len() as u64);
    assert!(
        artifact.len() > MIB && artifact.len() <= 4 * MIB,
        "{} bytes stored",
        artifact.len()
    );
    assert_eq!(
        &artifact[..MIB],
        out.kept(),
        "the kept prefix is the artifact's"
    );
}

/// The log cap holds on the splice path too: the artifact stops at the cap, and the pipe is
/// still drained to its end.
#[test]
fn the_log_cap_holds_when_the_artifact_is_spliced() {
    let dir = tempfile::tempdir().unwrap();
    let cap_bytes = 5 * MIB as u64 + 12_345;
    let run = spliced_run(24 * MIB, dir.path(), Some(cap_bytes));
    assert!(run.status.success(), "the writer finished without blocking");
    let out = run.result.stream(Stream::Stdout).unwrap();
    assert_eq!(std::fs::metadata(&out.artifact).unwrap().len(), cap_bytes);
    assert_eq!(
        out.state,
        StreamState::Incomplete(Incomplete::ArtifactCap { cap: cap_bytes })
    );
    assert_eq!(out.read_bytes, 24 * MIB as u64);
    assert_eq!(&std::fs::read(&out.artifact).unwrap()[..MIB], out.kept());
}
