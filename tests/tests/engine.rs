//! The launch engine end to end (SPEC S1–S11): real guardian, real workloads, real kernel.
//!
//! Every launch goes through `Supervisor::launch`; this test process never reaps anything but
//! what the engine reaps (the guardian, by pid). Processes a kept scope leaves behind are found by
//! their `REFINE_OWNER` marker and ended through a pidfd that is verified after opening.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use refine_protocol::record::{Kind, ScopePolicy};
use refine_protocol::{Receipt, RegistrationId, ScopeEnd as ReceiptEnd, WorkloadStatus};
use refine_supervisor::end::assess;
use refine_supervisor::launch::capture::{Incomplete, StreamState, Utf8Chunks};
use refine_supervisor::launch::env_policy::{EnvMap, LoginEnv};
use refine_supervisor::launch::pty::WindowSize;
use refine_supervisor::launch::{
    LaunchOutcome, LaunchRequest, LaunchResult, ScopeState, SharedLoop, StdinMode, Supervisor,
};
use refine_supervisor::store::registry::{Runtime, Stream};
use refine_tests::{bin, wait_until, words};
use sha2::{Digest, Sha256};

const PRODUCER: &str = env!("CARGO_BIN_EXE_cap-producer");
const MIB: usize = 1024 * 1024;
/// Generous: the machine is shared by several builds.
const SLACK: Duration = Duration::from_secs(20);

struct Fixture {
    _home: tempfile::TempDir,
    sup: Supervisor,
}

fn guardian() -> PathBuf {
    bin("refine-guardian")
}

fn fixture() -> Fixture {
    fixture_with(None, None)
}

fn fixture_with(daemon: Option<EnvMap>, login: Option<EnvMap>) -> Fixture {
    let home = tempfile::tempdir().unwrap();
    let rt = Runtime::open(home.path(), 4242).unwrap();
    let mut sup = Supervisor::new(rt)
        .with_guardian_exe(guardian())
        .with_login_env(Arc::new(LoginEnv::fixed(login)));
    if let Some(d) = daemon {
        sup = sup.with_daemon_env(d);
    }
    Fixture { _home: home, sup }
}

fn req(kind: Kind, argv: &[&str]) -> LaunchRequest {
    let mut r = LaunchRequest::new(kind, argv.iter().copied());
    r.label = "engine-test".into();
    r
}

fn describe(r: &LaunchResult) -> String {
    let text = |s| {
        r.capture
            .stream(s)
            .map(|c| String::from_utf8_lossy(&c.kept()[..c.kept().len().min(2000)]).into_owned())
            .unwrap_or_default()
    };
    format!(
        "argv {:?}: outcome {:?}, status {:?}, scope {:?}\nstdout: {}\nstderr: {}",
        r.registration.argv,
        r.outcome,
        r.status,
        r.scope,
        text(Stream::Stdout),
        text(Stream::Stderr)
    )
}

/// Every live process carrying `REFINE_OWNER=<id>`, pinned by a pidfd opened before the marker
/// was (re)checked, so a reused pid is never mistaken for one of ours.
fn owned(id: RegistrationId) -> Vec<(i32, OwnedFd)> {
    let marker = format!("REFINE_OWNER={id}");
    let has_marker = |pid: i32| {
        std::fs::read(format!("/proc/{pid}/environ"))
            .map(|e| e.split(|&b| b == 0).any(|v| v == marker.as_bytes()))
            .unwrap_or(false)
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if !has_marker(pid) {
            continue;
        }
        let Some(p) = rustix::process::Pid::from_raw(pid) else {
            continue;
        };
        let Ok(fd) = rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()) else {
            continue;
        };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(true);
        if has_marker(pid) && !zombie {
            out.push((pid, fd));
        }
    }
    out
}

fn kill_owned(id: RegistrationId) {
    for (_, fd) in owned(id) {
        let _ = rustix::process::pidfd_send_signal(&fd, rustix::process::Signal::KILL);
    }
}

fn expect_receipt(r: &mut LaunchResult) -> Receipt {
    expect_receipt_in(None, r)
}

/// [`expect_receipt`], plus the shared assessment (A2) saying `exited` when a runtime is given.
fn expect_receipt_in(rt: Option<&Runtime>, r: &mut LaunchResult) -> Receipt {
    let end = r
        .scope_watch
        .wait(SLACK)
        .unwrap_or_else(|| panic!("no scope end within {SLACK:?}"))
        .clone();
    let receipt = end.receipt.expect("a receipt");
    refine_tests::assert_receipt_binds(&receipt, &r.registration);
    if let Some(rt) = rt {
        let a = assess::assess(rt, &r.registration, &assess::KERNEL_BOOT);
        assert!(matches!(a, assess::Assessment::Exited { .. }), "{a:?}");
    }
    receipt
}

fn nothing_left(r: &LaunchResult) {
    let id = r.id;
    assert!(
        wait_until(SLACK, || owned(id).is_empty()),
        "processes of {id} still alive: {:?}",
        owned(id).iter().map(|(p, _)| *p).collect::<Vec<_>>()
    );
}

#[test]
fn true_completes_with_registration_and_receipt() {
    let f = fixture();
    let mut r = f.sup.run(req(Kind::Command, &["/bin/true"])).unwrap();
    assert_eq!(r.outcome, LaunchOutcome::Completed, "{}", describe(&r));
    assert_eq!(r.status, WorkloadStatus::Exited(0));
    assert!(r.capture.is_complete());
    assert!(r.capture_receipt.is_none());
    let on_disk = f.sup.runtime().read_registration(r.id).unwrap();
    assert_eq!(on_disk, r.registration);
    assert_eq!(on_disk.kind, Kind::Command);
    assert_eq!(on_disk.scope_policy, ScopePolicy::Keep);
    assert!(on_disk.started_at_unix_ms > 0);
    let receipt = expect_receipt(&mut r);
    assert_eq!(receipt.end, ReceiptEnd::Completed);
    assert!(matches!(r.scope, ScopeState::Exited(_)));
}

#[test]
fn missing_program_is_a_typed_spawn_failure() {
    let f = fixture();
    let mut r = f
        .sup
        .run(req(Kind::Command, &["/nonexistent/refine-no-such-program"]))
        .unwrap();
    assert_eq!(
        r.outcome,
        LaunchOutcome::SpawnFailed {
            errno: libc::ENOENT,
            step: refine_protocol::frame::SpawnStep::Program,
        },
        "{}",
        describe(&r)
    );
    assert_eq!(r.status, WorkloadStatus::NeverStarted);
    expect_receipt(&mut r);
}

#[test]
fn a_detached_sleeper_holding_stdout_does_not_hold_the_result() {
    let f = fixture();
    let t0 = Instant::now();
    let mut r = f
        .sup
        .run(req(
            Kind::Command,
            &["sh", "-c", "(sleep 600 &); echo done"],
        ))
        .unwrap();
    let took = t0.elapsed();
    assert!(took < SLACK, "took {took:?}: {}", describe(&r));
    assert_eq!(r.outcome, LaunchOutcome::Completed, "{}", describe(&r));
    assert_eq!(r.status, WorkloadStatus::Exited(0));
    let out = r.capture.stream(Stream::Stdout).unwrap();
    assert_eq!(out.kept(), b"done\n");
    assert_eq!(
        out.state,
        StreamState::Incomplete(Incomplete::DrainEnded {
            drain: refine_supervisor::launch::capture::FINAL_DRAIN
        })
    );
    assert!(r.complete_output(Stream::Stdout).is_err());
    assert!(r.capture_receipt.as_ref().is_some_and(|p| p.exists()));
    assert_eq!(r.scope, ScopeState::Live, "{}", describe(&r));
    // The subshell that started it may still be on its way out.
    assert!(
        wait_until(SLACK, || owned(r.id).len() == 1),
        "the sleeper is live and carries the owner marker"
    );
    assert!(r.scope_watch.wait(Duration::ZERO).is_none());
    kill_owned(r.id);
    let receipt = expect_receipt(&mut r);
    assert_eq!(receipt.status, WorkloadStatus::Exited(0));
}

#[test]
fn a_writer_after_exit_cannot_delay_the_result() {
    let f = fixture();
    let mut q = req(Kind::Command, &[PRODUCER, "orphan-flood"]);
    q.log_cap = Some(4 * MIB as u64);
    let t0 = Instant::now();
    let mut r = f.sup.run(q).unwrap();
    assert!(t0.elapsed() < SLACK, "{}", describe(&r));
    assert_eq!(r.outcome, LaunchOutcome::Completed, "{}", describe(&r));
    assert!(matches!(
        r.capture.stream(Stream::Stdout).unwrap().state,
        StreamState::Incomplete(_)
    ));
    assert_eq!(r.scope, ScopeState::Live);
    assert!(
        !owned(r.id).is_empty(),
        "the flooder was not killed by capture"
    );
    kill_owned(r.id);
    expect_receipt(&mut r);
}

#[test]
fn forty_mib_through_the_engine() {
    let f = fixture();
    let count = Arc::new(AtomicU64::new(0));
    let hash = Arc::new(Mutex::new(Sha256::new()));
    let (c, h) = (count.clone(), hash.clone());
    let mut q = req(Kind::Command, &[PRODUCER, "bytes", &(40 * MIB).to_string()]);
    q.on_output = Some(Box::new(move |s, b| {
        if s == Stream::Stdout {
            c.fetch_add(b.len() as u64, Ordering::Relaxed);
            h.lock().unwrap().update(b);
        }
    }));
    let r = f.sup.run(q).unwrap();
    assert_eq!(r.outcome, LaunchOutcome::Completed, "{}", describe(&r));
    let out = r.capture.stream(Stream::Stdout).unwrap();
    assert_eq!(out.kept().len(), 16 * MIB);
    assert!(matches!(
        out.state,
        StreamState::Incomplete(Incomplete::MemoryLimit { .. })
    ));
    let producer_sha = String::from_utf8(r.complete_output(Stream::Stderr).unwrap().to_vec())
        .unwrap()
        .trim()
        .to_owned();
    let artifact_sha = refine_tests::sha256_file(&out.artifact);
    assert_eq!(artifact_sha, producer_sha);
    assert_eq!(count.load(Ordering::Relaxed), 40 * MIB as u64);
    let cb_sha = refine_tests::sha256_hex(hash.lock().unwrap().clone());
    assert_eq!(cb_sha, producer_sha);
    // The capture receipt beside the logs decodes and names the artifact.
    let path = r.capture_receipt.as_ref().expect("capture receipt");
    let rec = refine_protocol::CaptureReceipt::decode(&std::fs::read(path).unwrap()).unwrap();
    assert_eq!(rec.id, r.id);
    assert_eq!(rec.streams[0].artifact_bytes, 40 * MIB as u64);
}

#[test]
fn early_closed_stdout_and_split_utf8() {
    // close-stdout: stdout ends early, the workload keeps running until its stdin closes.
    let f = fixture();
    let (tx, rx) = mpsc::channel();
    let mut q = req(Kind::Command, &[PRODUCER, "close-stdout"]);
    q.stdin = StdinMode::Pipe;
    q.on_output = Some(Box::new(move |s, b| {
        if s == Stream::Stderr && b.windows(6).any(|w| w == b"closed") {
            let _ = tx.send(());
        }
    }));
    let h = f.sup.launch(q).unwrap();
    rx.recv_timeout(SLACK).expect("stdout closed");
    let pid = h.registration().hello.workload.pid as i32;
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    h.close_input();
    let r = h.wait().unwrap();
    assert_eq!(r.status, WorkloadStatus::Exited(3), "{}", describe(&r));
    assert_eq!(r.complete_output(Stream::Stdout).unwrap(), b"bye\n");
    assert_eq!(r.complete_output(Stream::Stderr).unwrap(), b"closed\n");

    // utf8-split: the first write ends mid-character; the second follows only after input.
    let (tx, rx) = mpsc::channel();
    let text = Arc::new(Mutex::new(String::new()));
    let t = text.clone();
    let mut dec = Utf8Chunks::default();
    let mut q = req(Kind::Command, &[PRODUCER, "utf8-split"]);
    q.stdin = StdinMode::Pipe;
    q.on_output = Some(Box::new(move |s, b| {
        if s == Stream::Stdout {
            let _ = tx.send(b.to_vec());
            dec.push(b, |s| t.lock().unwrap().push_str(s));
        }
    }));
    let h = f.sup.launch(q).unwrap();
    let first = rx.recv_timeout(SLACK).expect("first chunk");
    assert_eq!(first, b"caf\xc3");
    h.write_input(b"x").unwrap();
    let r = h.wait().unwrap();
    assert_eq!(r.outcome, LaunchOutcome::Completed, "{}", describe(&r));
    assert_eq!(*text.lock().unwrap(), "café!\n");
    assert_eq!(
        r.complete_output(Stream::Stdout).unwrap(),
        "café!\n".as_bytes()
    );
    // The input it took is recorded beside its output, and the record says where.
    let stdin_path = r
        .registration
        .stdin_path
        .clone()
        .expect("stdin artifact recorded");
    assert_eq!(std::fs::read(&stdin_path).unwrap(), b"x");
}

#[test]
fn completion_timeout_stops_the_whole_tree() {
    let f = fixture();
    let mut q = req(Kind::Command, &["sh", "-c", "sleep 600 & sleep 600"]);
    q.timeout = Some(Duration::from_millis(500));
    let mut r = f.sup.run(q).unwrap();
    assert_eq!(r.outcome, LaunchOutcome::TimedOut, "{}", describe(&r));
    assert_eq!(r.registration.limits.completion_timeout_ms, Some(500));
    expect_receipt(&mut r);
    nothing_left(&r);
}

#[test]
fn idle_timeout_stops_the_whole_tree() {
    let f = fixture();
    let mut q = req(
        Kind::Command,
        &[
            "sh",
            "-c",
            "sleep 600 & exec \"$0\" idle-then-exit",
            PRODUCER,
        ],
    );
    q.stdin = StdinMode::Pipe;
    q.idle_timeout = Some(Duration::from_millis(500));
    let h = f.sup.launch(q).unwrap();
    let mut r = h.wait().unwrap();
    assert_eq!(r.outcome, LaunchOutcome::IdleTimeout, "{}", describe(&r));
    assert_eq!(r.registration.limits.idle_timeout_ms, Some(500));
    expect_receipt(&mut r);
    nothing_left(&r);
}

const DAEMON: &str = "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo started";

#[test]
fn quality_stops_a_setsid_daemon_after_the_result() {
    let f = fixture();
    let mut r = f
        .sup
        .run(req(Kind::Quality, &["sh", "-c", DAEMON]))
        .unwrap();
    assert_eq!(r.outcome, LaunchOutcome::Completed, "{}", describe(&r));
    assert_eq!(r.status, WorkloadStatus::Exited(0));
    assert_eq!(r.complete_output(Stream::Stdout).unwrap(), b"started\n");
    assert_eq!(r.registration.scope_policy, ScopePolicy::Stop);
    assert!(
        matches!(r.scope, ScopeState::Stopping | ScopeState::Exited(_)),
        "{}",
        describe(&r)
    );
    expect_receipt(&mut r);
    assert!(r
        .scope_watch
        .wait(Duration::ZERO)
        .unwrap()
        .stop_failure
        .is_none());
    nothing_left(&r);
}

#[test]
fn keep_leaves_a_setsid_daemon_live_until_it_exits() {
    let f = fixture();
    let mut q = req(Kind::Quality, &["sh", "-c", DAEMON]);
    q.scope_policy = Some(ScopePolicy::Keep);
    let mut r = f.sup.run(q).unwrap();
    assert_eq!(r.outcome, LaunchOutcome::Completed, "{}", describe(&r));
    assert_eq!(r.scope, ScopeState::Live);
    // `setsid` may still be between fork and its own session when the result returns.
    let leads_session = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|st| {
                let f: Vec<String> = st
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect();
                f.get(3) == Some(&pid.to_string())
            })
            .unwrap_or(false)
    };
    assert!(
        wait_until(SLACK, || {
            let d = owned(r.id);
            d.len() == 1 && leads_session(d[0].0)
        }),
        "one live daemon leading its own session: {:?}",
        owned(r.id).iter().map(|(p, _)| *p).collect::<Vec<_>>()
    );
    assert!(
        r.scope_watch.wait(Duration::from_millis(300)).is_none(),
        "scope still live"
    );
    kill_owned(r.id);
    expect_receipt(&mut r);
}

#[test]
fn log_cap_of_one_mib_on_ten() {
    let f = fixture();
    let mut q = req(Kind::Command, &[PRODUCER, "bytes", &(10 * MIB).to_string()]);
    q.log_cap = Some(MIB as u64);
    let r = f.sup.run(q).unwrap();
    assert_eq!(r.outcome, LaunchOutcome::Completed, "{}", describe(&r));
    assert_eq!(
        r.status,
        WorkloadStatus::Exited(0),
        "the writer never blocked"
    );
    let out = r.capture.stream(Stream::Stdout).unwrap();
    assert_eq!(std::fs::metadata(&out.artifact).unwrap().len(), MIB as u64);
    assert_eq!(
        out.state,
        StreamState::Incomplete(Incomplete::ArtifactCap { cap: MIB as u64 })
    );
    assert_eq!(r.registration.limits.log_cap_bytes, Some(MIB as u64));
}

#[test]
fn output_limit_is_its_own_outcome() {
    let f = fixture();
    let mut q = req(Kind::Command, &[PRODUCER, "flood"]);
    q.output_limit = Some(2 * MIB as u64);
    let mut r = f.sup.run(q).unwrap();
    assert_eq!(r.outcome, LaunchOutcome::OutputLimit, "{}", describe(&r));
    expect_receipt(&mut r);
    nothing_left(&r);
}

/// The service's way: one shared loop drives concurrent engines (the same engine logic). A
/// deadline and a cancel end their trees through the loop's pool, an output limit and 40 MiB of
/// output are read through the loop's one buffer, and a kept residue that holds stdout is
/// followed to its receipt by a watcher in the loop while the loop's tail writes its output on.
#[test]
fn the_shared_loop_drives_the_same_engine() {
    let Fixture { _home, sup } = fixture();
    let sup = sup.with_shared_loop(SharedLoop::start().expect("the shared loop"));
    let mut timed = req(Kind::Command, &["sh", "-c", "sleep 600 & sleep 600"]);
    timed.timeout = Some(Duration::from_millis(500));
    let mut flood = req(Kind::Command, &[PRODUCER, "flood"]);
    flood.output_limit = Some(2 * MIB as u64);
    let big = req(Kind::Command, &[PRODUCER, "bytes", &(40 * MIB).to_string()]);
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let script = format!(
        "setsid sh -c 'while [ ! -e {} ]; do sleep 0.05; done; echo tail' & echo parent",
        go.display()
    );
    let kept = req(Kind::Command, &["sh", "-c", &script]);
    let handles: Vec<_> = [timed, flood, big, kept]
        .into_iter()
        .map(|q| sup.launch(q).unwrap())
        .collect();
    let cancelled = sup.launch(req(Kind::Agent, &["sleep", "600"])).unwrap();
    cancelled.cancel();
    let mut results: Vec<LaunchResult> = handles.into_iter().map(|h| h.wait().unwrap()).collect();
    results.push(cancelled.wait().unwrap());
    let outcomes: Vec<LaunchOutcome> = results.iter().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [
            LaunchOutcome::TimedOut,
            LaunchOutcome::OutputLimit,
            LaunchOutcome::Completed,
            LaunchOutcome::Completed,
            LaunchOutcome::Cancelled
        ],
        "{}",
        results.iter().map(describe).collect::<Vec<_>>().join("\n")
    );
    let big = &results[2];
    let producer_sha = String::from_utf8(big.complete_output(Stream::Stderr).unwrap().to_vec())
        .unwrap()
        .trim()
        .to_owned();
    let out = big.capture.stream(Stream::Stdout).unwrap();
    assert_eq!(refine_tests::sha256_file(&out.artifact), producer_sha);
    assert_eq!(
        results[3].scope,
        ScopeState::Live,
        "{}",
        describe(&results[3])
    );
    std::fs::write(&go, b"").unwrap();
    for r in &mut results {
        expect_receipt(r);
        nothing_left(r);
    }
    let kept = &results[3].capture;
    kept.wait_delivered();
    let artifact = &kept.stream(Stream::Stdout).unwrap().artifact;
    assert_eq!(std::fs::read_to_string(artifact).unwrap(), "parent\ntail\n");
}

#[test]
fn cancel_from_another_thread() {
    let f = fixture();
    let h = f.sup.launch(req(Kind::Agent, &["sleep", "600"])).unwrap();
    let c = h.canceller();
    std::thread::spawn(move || c.cancel()).join().unwrap();
    let mut r = h.wait().unwrap();
    assert_eq!(r.outcome, LaunchOutcome::Cancelled, "{}", describe(&r));
    // The cancel can land while the child is still between *start* and its `execve`: then it
    // is killed before its program ran, and says so (never started), never a made-up status.
    assert!(
        matches!(
            r.status,
            WorkloadStatus::Signaled(libc::SIGKILL) | WorkloadStatus::NeverStarted
        ),
        "{}",
        describe(&r)
    );
    expect_receipt(&mut r);
    nothing_left(&r);
}

#[test]
fn terminal_tty_input_and_resize() {
    let f = fixture();
    let r = f.sup.run(req(Kind::Terminal, &["tty"])).unwrap();
    let out = String::from_utf8_lossy(r.complete_output(Stream::Stdout).unwrap()).into_owned();
    assert!(out.trim().starts_with("/dev/pts/"), "{}", describe(&r));
    assert_eq!(r.status, WorkloadStatus::Exited(0));
    assert!(r.registration.pty);

    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    let mut q = req(
        Kind::Terminal,
        &words("sh -c 'echo ready; read line; echo got:$line; read x; stty size'"),
    );
    q.pty = Some(WindowSize { rows: 24, cols: 80 });
    q.on_output = Some(Box::new(move |_, b| {
        let _ = tx.send(b.to_vec());
    }));
    let h = f.sup.launch(q).unwrap();
    let mut seen = Vec::new();
    let mut wait_for = |needle: &[u8]| {
        let end = Instant::now() + SLACK;
        while !seen.windows(needle.len()).any(|w| w == needle) {
            let left = end.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(b) => seen.extend_from_slice(&b),
                Err(_) => panic!(
                    "never saw {:?} in {:?}",
                    String::from_utf8_lossy(needle),
                    String::from_utf8_lossy(&seen)
                ),
            }
        }
    };
    wait_for(b"ready");
    h.write_input(b"hello\n").unwrap();
    wait_for(b"got:hello");
    h.resize(WindowSize { rows: 33, cols: 77 }).unwrap();
    h.write_input(b"\n").unwrap();
    let r = h.wait().unwrap();
    let out = String::from_utf8_lossy(r.complete_output(Stream::Stdout).unwrap()).into_owned();
    assert!(out.contains("33 77"), "{}", describe(&r));
}

fn map(pairs: &[(&str, &str)]) -> EnvMap {
    pairs
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
}

fn env_of(r: &LaunchResult) -> BTreeMap<String, String> {
    String::from_utf8_lossy(r.complete_output(Stream::Stdout).unwrap())
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[test]
fn quality_environment_policy() {
    let daemon = map(&[
        ("PATH", "/usr/bin:/bin"),
        ("HOME", "/daemon-home"),
        ("GIT_DIR", "/elsewhere/.git"),
        ("GIT_INDEX_FILE", "/elsewhere/index"),
    ]);
    let login = map(&[
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("ONLY_IN_LOGIN", "1"),
        ("HOME", "/login-home"),
    ]);
    let f = fixture_with(Some(daemon), Some(login));
    let mut q = req(Kind::Quality, &["/usr/bin/env"]);
    q.env = vec![(
        OsString::from("GIT_WORK_TREE"),
        Some(OsString::from("/explicit")),
    )];
    let r = f.sup.run(q).unwrap();
    let env = env_of(&r);
    assert_eq!(
        env.get("PATH").map(String::as_str),
        Some("/usr/local/bin:/usr/bin:/bin")
    );
    assert_eq!(env.get("HOME").map(String::as_str), Some("/daemon-home"));
    assert!(!env.contains_key("ONLY_IN_LOGIN"));
    assert!(!env.contains_key("GIT_DIR"));
    assert!(!env.contains_key("GIT_INDEX_FILE"));
    assert_eq!(
        env.get("GIT_WORK_TREE").map(String::as_str),
        Some("/explicit")
    );
    assert_eq!(env.get("REFINE_OWNER"), Some(&r.id.to_string()));

    // An agent gets the host shell's environment (still without git redirection).
    let r = f.sup.run(req(Kind::Agent, &["/usr/bin/env"])).unwrap();
    let env = env_of(&r);
    assert_eq!(env.get("ONLY_IN_LOGIN").map(String::as_str), Some("1"));
    assert_eq!(env.get("HOME").map(String::as_str), Some("/login-home"));
}

#[test]
fn a_grandchild_carries_the_owner_marker() {
    let f = fixture();
    let mut r = f
        .sup
        .run(req(Kind::Command, &["sh", "-c", "(sleep 600 &); echo ok"]))
        .unwrap();
    assert!(
        wait_until(SLACK, || owned(r.id).len() == 1),
        "{}",
        describe(&r)
    );
    let left = owned(r.id);
    let environ = std::fs::read(format!("/proc/{}/environ", left[0].0)).unwrap();
    let marker = format!("REFINE_OWNER={}", r.id);
    assert!(environ
        .split(|&b| b == 0)
        .any(|v| OsStr::from_bytes_compat(v) == OsStr::new(&marker)));
    kill_owned(r.id);
    expect_receipt(&mut r);
}

trait FromBytesCompat {
    fn from_bytes_compat(b: &[u8]) -> &OsStr;
}
impl FromBytesCompat for OsStr {
    fn from_bytes_compat(b: &[u8]) -> &OsStr {
        use std::os::unix::ffi::OsStrExt;
        OsStr::from_bytes(b)
    }
}

#[test]
fn a_forwarded_signal_reaches_the_workload() {
    let f = fixture();
    let h = f.sup.launch(req(Kind::Command, &["sleep", "600"])).unwrap();
    assert!(matches!(
        h.signal(0),
        Err(refine_supervisor::launch::LaunchError::BadSignal(0))
    ));
    h.signal(libc::SIGTERM).unwrap();
    let mut r = h.wait().unwrap();
    assert_eq!(r.outcome, LaunchOutcome::Completed, "{}", describe(&r));
    assert_eq!(r.status, WorkloadStatus::Signaled(libc::SIGTERM));
    expect_receipt(&mut r);
}

/// SPEC W11 for the library: a host passing a duration the clock cannot hold (`Duration::MAX`
/// as a deadline or the kill-after grace) gets a typed error before anything is created, never
/// a panic, an abort or a silently wrapped value (the CLI and the API bound them the same way).
#[test]
fn durations_the_clock_cannot_hold_are_refused_by_the_library() {
    use refine_supervisor::launch::LaunchError;
    let f = fixture();
    let over = refine_protocol::api::MAX_DURATION + Duration::from_millis(1);
    type Set = fn(&mut LaunchRequest, Duration);
    let fields: [(&str, Set); 3] = [
        ("timeout", |r, d| r.timeout = Some(d)),
        ("idle_timeout", |r, d| r.idle_timeout = Some(d)),
        ("kill_after", |r, d| r.kill_after = Some(d)),
    ];
    for (name, set) in fields {
        for d in [Duration::MAX, over] {
            let mut r = req(Kind::Command, &["true"]);
            set(&mut r, d);
            match f.sup.launch(r) {
                Err(LaunchError::DurationTooLong { what, max }) => {
                    assert_eq!(what, name);
                    assert_eq!(max, refine_protocol::api::MAX_DURATION);
                }
                Err(e) => panic!("{name} = {d:?}: another error: {e}"),
                Ok(h) => panic!("{name} = {d:?}: launched: {}", describe(&h.wait().unwrap())),
            }
        }
        // The bound itself is accepted.
        let mut r = req(Kind::Command, &["true"]);
        set(&mut r, refine_protocol::api::MAX_DURATION);
        let res = f.sup.run(r).unwrap();
        assert_eq!(res.status, WorkloadStatus::Exited(0), "{}", describe(&res));
    }
}
