//! The structure-aware fuzz loop over every decoder: every frame kind, the receipt, every record,
//! the socket's requests and replies. Inputs are valid encodings, mutated (bits, bytes, lengths
//! planted in the codec's and bincode's forms, truncation, extension, noise), each decoded as it
//! is and again with its length and checksum recomputed, so the payload decoders are reached.
//!
//! Every decode attempt is held to three things:
//! - it returns (a typed error or a value), never panics;
//! - it allocates at most the bound of `support` for its input's length (a counting allocator,
//!   this binary's own);
//! - what decodes encodes again, without refusal, to bytes that decode to the same value, and
//!   for the fixed layouts (frames, receipts) to the very bytes decoded.
//!
//! `REFINE_FUZZ_ITERS` sets the rounds (default 10,000 for the test suite); `scripts/fuzz` runs
//! the long mode, and prints the attempt count.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::time::Duration;

mod support;
use support::{allocated_by, bound};

use refine_protocol::api::{self, ApiError, ErrorKind, LaunchAsk, Reply, Request, Response};
use refine_protocol::codec::{crc32, crc32_update};
use refine_protocol::frame::{
    encode_launch, Credentials, LaunchSpec, FLAG_NEW_SESSION, FLAG_PTY, MAX_FRAME,
};
use refine_protocol::record::{
    CaptureReceipt, Kind, LaunchResultRecord, Limits, Registration, ScopePolicy, StallIncident,
    StallRecord, StallSignal, StopCause, StopRequest, StreamEnd, StreamReceipt,
};
use refine_protocol::{
    BootId, EncodeError, Frame, Hello, LaunchParams, ProcessWitness, ProofIdentity, Receipt,
    RegistrationId, Rlimit, RuntimeId, ScopeEnd, TreeUsage, WorkloadStatus,
};

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Length-looking values: the codec's u32 lengths, and bincode's varints (u16, u32, u64).
const PLANTS: [&[u8]; 9] = [
    &[0, 0, 0, 0],
    &[1, 0, 0, 0],
    &[0xff, 0xff, 0xff, 0xff],
    &[0xff, 0xff, 0xff, 0x7f],
    &[0x00, 0x00, 0x03, 0x00],
    &[0xfb, 0xff, 0xff],
    &[0xfc, 0x00, 0x00, 0x00, 0x01],
    &[0xfd, 0, 0, 0, 0, 0, 1, 0, 0],
    &[0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
];

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(8) {
            0 | 1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            2 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            3 => v.truncate(rng.below(v.len() + 1)),
            4 => v.extend((0..rng.below(16)).map(|_| rng.next() as u8)),
            5 | 6 => {
                // Plant a length, over the bytes there or between them.
                let plant = PLANTS[rng.below(PLANTS.len())];
                let i = rng.below(v.len() + 1);
                if rng.below(2) == 0 && i + plant.len() <= v.len() {
                    v[i..i + plant.len()].copy_from_slice(plant);
                } else {
                    v.splice(i..i, plant.iter().copied());
                }
            }
            _ => {
                let len = rng.below(300);
                v = (0..len).map(|_| rng.next() as u8).collect();
            }
        }
    }
    v
}

/// Recomputes an envelope's length and checksum (`magic` bytes of magic): frames and records.
fn reseal_envelope(v: &mut [u8], magic: usize) {
    let header = magic + 12;
    if v.len() < header {
        return;
    }
    let len = (v.len() - header) as u32;
    v[magic + 4..magic + 8].copy_from_slice(&len.to_le_bytes());
    let crc = crc32_update(crc32(&v[..header - 4]), &v[header..]);
    v[header - 4..header].copy_from_slice(&crc.to_le_bytes());
}

/// Recomputes a receipt's checksum where its length field says it ends.
fn reseal_receipt(v: &mut [u8]) {
    if v.len() < 12 {
        return;
    }
    let len = u16::from_le_bytes([v[10], v[11]]) as usize;
    if (16..=v.len()).contains(&len) {
        let at = len - 8;
        let crc = crc32(&v[..at]);
        v[at..at + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

struct Tally {
    attempts: u64,
    decoded: u64,
    worst: f64,
}

impl Tally {
    /// One decode attempt, its allocation held to the bound.
    fn decode<'a, T>(
        &mut self,
        what: &str,
        input: &'a [u8],
        decode: impl FnOnce(&'a [u8]) -> T,
    ) -> T {
        self.attempts += 1;
        let (out, bytes) = allocated_by(|| decode(input));
        assert!(
            bytes <= bound(input.len()),
            "{what}: a {}-byte input allocated {bytes} bytes (bound {}): {input:02x?}",
            input.len(),
            bound(input.len())
        );
        // Per byte where the constant does not dominate.
        let ratio = bytes as f64 / input.len().max(1) as f64;
        if input.len() >= 64 && ratio > self.worst {
            self.worst = ratio;
        }
        out
    }
}

fn reencode_launch(spec: &LaunchSpec<'_>, out: &mut [u8]) -> Result<usize, EncodeError> {
    let argv: Vec<&[u8]> = spec.argv.iter().map(CStr::to_bytes).collect();
    let env: Vec<&[u8]> = spec.env.iter().map(CStr::to_bytes).collect();
    let rlimits: Vec<Rlimit> = spec.rlimits.iter().collect();
    let groups: Vec<u32> = spec
        .credentials
        .map(|c| c.groups.iter().collect())
        .unwrap_or_default();
    encode_launch(
        &LaunchParams {
            flags: spec.flags,
            pdeath_signal: spec.pdeath_signal,
            start_timeout_ms: spec.start_timeout_ms,
            stdio_fds: spec.stdio_fds,
            registration: spec.registration,
            runtime: spec.runtime,
            proof_path: spec.proof_path.to_bytes(),
            cwd: spec.cwd.map_or(&[][..], CStr::to_bytes),
            argv: &argv,
            env: &env,
            rlimits: &rlimits,
            credentials: spec.credentials.map(|c| Credentials {
                uid: c.uid,
                gid: c.gid,
                groups: &groups,
            }),
            signal_state: spec.signal_state,
            cgroup: spec.cgroup.map(CStr::to_bytes),
            capture: None,
            ready_fd: None,
        },
        out,
    )
}

/// A frame that decoded encodes again, to the very bytes it came from.
fn frame_symmetry(input: &[u8], frame: &Frame<'_>, out: &mut [u8]) {
    let n = match frame {
        Frame::Launch(spec) => reencode_launch(spec, out),
        other => other.encode_into(out),
    }
    .unwrap_or_else(|e| panic!("decoded {frame:?}, re-encoding refused: {e}"));
    assert_eq!(&out[..n], input, "{frame:?} re-encoded to other bytes");
    if let Frame::Launch(spec) = frame {
        // Walking a decoded spec never panics either.
        let _ = spec.argv.iter().count() + spec.env.iter().count() + spec.rlimits.iter().count();
    }
}

fn hello() -> Hello {
    Hello {
        guardian: ProcessWitness {
            pid: 10,
            start_time: 99,
        },
        boot_id: BootId([7; 16]),
        workload: ProcessWitness {
            pid: 11,
            start_time: 100,
        },
        workload_pgid: 11,
        workload_sid: 11,
        proof: ProofIdentity { dev: 1, ino: 2 },
        cgroup: Default::default(),
        provenance: None,
    }
}

fn receipt(status: WorkloadStatus, end: ScopeEnd, usage: Option<TreeUsage>) -> Receipt {
    Receipt {
        registration: RegistrationId([1; 16]),
        runtime: RuntimeId([2; 16]),
        boot_id: BootId([3; 16]),
        guardian: ProcessWitness {
            pid: 10,
            start_time: 99,
        },
        workload: ProcessWitness {
            pid: 11,
            start_time: 100,
        },
        proof: ProofIdentity { dev: 1, ino: 2 },
        status,
        end,
        spawn_errno: 0,
        reaped: 4,
        workload_exited_at_ns: 5,
        written_at_ns: 6,
        usage,
    }
}

fn usage() -> Option<TreeUsage> {
    Some(TreeUsage {
        user_us: 7,
        system_us: 8,
        max_rss_kib: 9,
    })
}

fn provenance() -> refine_protocol::provenance::Provenance {
    refine_protocol::provenance::Provenance::from_build(
        "0.1.0",
        "0123456789abcdef0123456789abcdef01234567",
        "false",
        "release",
    )
}

fn frame_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    let argv: [&[u8]; 3] = [b"/bin/sh", b"-c", b"echo hi"];
    let env: [&[u8]; 2] = [b"PATH=/usr/bin:/bin", b"REFINE_OWNER=0101"];
    let limits = [Rlimit {
        resource: 7,
        soft: 256,
        hard: u64::MAX,
    }];
    let groups = [4, 27];
    for (flags, pdeath_signal, credentials) in [
        (FLAG_PTY, Some(15), None),
        (
            FLAG_NEW_SESSION,
            None,
            Some(Credentials {
                uid: 1000,
                gid: 1000,
                groups: &groups,
            }),
        ),
        (0, Some(64), None),
        (refine_protocol::frame::FLAG_ALLOW_SETNS, Some(9), None),
    ] {
        let p = LaunchParams {
            flags,
            pdeath_signal,
            start_timeout_ms: 5000,
            stdio_fds: 3,
            registration: RegistrationId([1; 16]),
            runtime: RuntimeId([2; 16]),
            proof_path: b"/run/x/proofs/0101",
            cwd: if credentials.is_some() { b"" } else { b"/tmp" },
            argv: &argv,
            env: &env,
            rlimits: &limits,
            credentials,
            signal_state: (flags == 0).then_some(refine_protocol::frame::SignalState {
                ignored: 1 << 0,
                blocked: 1 << 9,
            }),
            // F4: one seed forks into a cgroup of its own.
            cgroup: (flags == FLAG_PTY).then_some(&b"/sys/fs/cgroup/refine/0101"[..]),
            capture: None,
            ready_fd: None,
        };
        let mut buf = vec![0u8; MAX_FRAME];
        let n = encode_launch(&p, &mut buf).unwrap();
        buf.truncate(n);
        seeds.push(buf);
    }
    for frame in [
        Frame::Hello(hello()),
        Frame::Hello(Hello {
            cgroup: refine_protocol::frame::Placement::Cgroup,
            ..hello()
        }),
        Frame::Hello(Hello {
            cgroup: refine_protocol::frame::Placement::Refused { errno: 38 },
            ..hello()
        }),
        // V1: a version 2 Hello, with the guardian's provenance.
        Frame::Hello(Hello {
            provenance: Some(provenance()),
            ..hello()
        }),
        Frame::Start,
        Frame::Abort,
        Frame::Disown,
        Frame::Started,
        Frame::SpawnFailed {
            errno: 2,
            step: refine_protocol::frame::SpawnStep::Cwd,
        },
        Frame::WorkloadExited {
            status: WorkloadStatus::Signaled(9),
            at_ns: 12345,
        },
        Frame::WorkloadExited {
            status: WorkloadStatus::Exited(255),
            at_ns: 1,
        },
        Frame::ScopeExited(receipt(
            WorkloadStatus::Exited(3),
            ScopeEnd::Completed,
            usage(),
        )),
        Frame::ScopeExited(receipt(
            WorkloadStatus::Unknown,
            ScopeEnd::GuardianError { code: 19 },
            None,
        )),
        Frame::Signal { signo: 15 },
        Frame::GuardianFailed { code: 3, errno: 13 },
    ] {
        let mut buf = vec![0u8; 512];
        let n = frame.encode_into(&mut buf).unwrap();
        buf.truncate(n);
        seeds.push(buf);
    }
    seeds
}

fn receipt_seeds() -> Vec<Vec<u8>> {
    [
        receipt(WorkloadStatus::Exited(0), ScopeEnd::Completed, usage()),
        receipt(WorkloadStatus::NeverStarted, ScopeEnd::Aborted, None),
        receipt(WorkloadStatus::NeverStarted, ScopeEnd::SpawnFailed, usage()),
        receipt(
            WorkloadStatus::Signaled(64),
            ScopeEnd::GuardianError { code: 24 },
            usage(),
        ),
    ]
    .iter()
    .map(|r| r.encode().to_vec())
    .collect()
}

fn registration() -> Registration {
    Registration {
        id: RegistrationId([1; 16]),
        runtime: RuntimeId([2; 16]),
        kind: Kind::Quality,
        label: "cargo test".into(),
        owner: "ci".into(),
        purpose: BTreeMap::from([
            ("goal".to_string(), "green".to_string()),
            ("round".to_string(), "3".to_string()),
        ]),
        argv: vec!["cargo".into(), "test".into()],
        argv_bytes: None,
        cwd: "/src".into(),
        stdout_path: "/run/1/logs/x.stdout".into(),
        stderr_path: "/run/1/logs/x.stderr".into(),
        stdin_path: None,
        pty: false,
        limits: Limits {
            completion_timeout_ms: Some(60_000),
            idle_timeout_ms: None,
            log_cap_bytes: Some(1 << 30),
            rlimits: vec![Rlimit {
                resource: 7,
                soft: 1024,
                hard: u64::MAX,
            }],
            kill_after_ms: Some(5_000),
        },
        scope_policy: ScopePolicy::Stop,
        started_at_unix_ms: 1_700_000_000_000,
        hello: hello(),
        proof_path: "/run/1/proofs/x".into(),
        cgroup: None,
        allow_setns: None,
        supervisor_provenance: None,
        guardian_provenance: None,
        on_service_loss: None,
        resources: None,
        readiness: None,
        protection: None,
        health: None,
        sandbox: None,
    }
}

fn capture_receipt() -> CaptureReceipt {
    CaptureReceipt {
        id: RegistrationId([1; 16]),
        runtime: RuntimeId([2; 16]),
        workload_status: Some(WorkloadStatus::Exited(0)),
        streams: vec![
            StreamReceipt {
                name: "stdout".into(),
                end: StreamEnd::Incomplete(
                    refine_protocol::record::StreamIncomplete::MemoryLimit { kept: 16 << 20 },
                ),
                artifact_path: "/run/1/logs/x.stdout".into(),
                artifact_bytes: 1 << 30,
                prefix: b"hello".to_vec(),
            },
            StreamReceipt {
                name: "stderr".into(),
                end: StreamEnd::Eof,
                artifact_path: "/run/1/logs/x.stderr".into(),
                artifact_bytes: 0,
                prefix: vec![],
            },
        ],
        written_at_unix_ms: 1,
    }
}

fn stall_record() -> StallRecord {
    StallRecord {
        id: RegistrationId([7; 16]),
        runtime: RuntimeId([8; 16]),
        sampled_at_unix_ms: 1_764_000_060_000,
        stalled: Some(StallIncident {
            signal: StallSignal::Stalled,
            since_unix_ms: 1_764_000_000_000,
            samples: 5,
            cpu_permille: 987,
            last_write_unix_ms: 1_763_999_700_000,
        }),
        silent: None,
    }
}

fn launch_result(usage: Option<TreeUsage>) -> LaunchResultRecord {
    LaunchResultRecord {
        id: RegistrationId([5; 16]),
        runtime: RuntimeId([6; 16]),
        outcome: refine_protocol::docs::Outcome::Stopped,
        workload_status: WorkloadStatus::Signaled(9),
        written_at_unix_ms: 1_764_000_000_123,
        stop_failure: usage.map(|_| "EPERM".into()),
        residue_stop: usage.map(|_| refine_protocol::ResidueStopRecord {
            outcome: refine_protocol::docs::StopOutcome::Stopped,
            cause: Some(refine_protocol::StopCause::CompletionDeadline),
            killed: 2,
            at_unix_ms: 1_764_000_000_456,
        }),
        cgroup_usage: usage.map(|u| refine_protocol::CgroupUsage {
            cpu_us: u.user_us + u.system_us,
            user_us: u.user_us,
            system_us: u.system_us,
            memory_peak_bytes: Some(u.max_rss_kib * 1024),
            oom_kills: None,
        }),
        usage,
        limit_usage: usage.map(|u| refine_protocol::record::LimitUsage {
            memory_peak_bytes: Some(u.max_rss_kib * 1024),
            oom_kills: Some(1),
            pids_peak: None,
            pids_refused: Some(3),
            throttled_us: Some(u.user_us),
        }),
    }
}

fn request_seeds() -> Vec<Vec<u8>> {
    let mut ask = LaunchAsk::new(Kind::Agent, vec!["sleep".into(), "1".into()]);
    ask.label = "a label".into();
    ask.cwd = Some("/tmp".into());
    ask.env = BTreeMap::from([("K".to_string(), "V".to_string())]);
    ask.meta = BTreeMap::from([("goal".to_string(), "x".to_string())]);
    ask.timeout = Some(Duration::from_millis(1500));
    ask.idle_timeout = Some(Duration::from_secs(60));
    ask.kill_after = Some(Duration::from_millis(250));
    ask.pty = true;
    ask.wait_for_slot = Some(Duration::from_secs(2));
    ask.log_cap_bytes = Some(0);
    ask.user = Some("nobody:nogroup".into());
    [
        Request::Launch(ask),
        Request::List { all: true },
        Request::Show {
            id: "ab".repeat(16),
        },
        Request::Stop {
            id: "0".repeat(32),
            grace: None,
            signal: None,
        },
        Request::Stop {
            id: "1".repeat(32),
            grace: Some(Duration::from_millis(1500)),
            signal: Some("SIGUSR1".into()),
        },
        Request::Wait {
            id: "web".into(),
            until: api::WaitUntil::Exited,
            timeout: Some(Duration::from_millis(300)),
        },
        Request::Signal {
            id: "cd".repeat(4),
            signal: "USR1".into(),
        },
        Request::Input {
            id: "ef".repeat(16),
            data: "line\n".into(),
            close: true,
        },
    ]
    .iter()
    .map(api::encode_request)
    .collect()
}

/// The `show` document of a stopped scope, as the service's socket sent it.
const SHOW: &str = r#"{"id":"57a327167595da8b07816299b8876883","state":"exited","reason":null,"assessment":{"state":"exited","reason":null},"record":{"id":"57a327167595da8b07816299b8876883","runtime":"9284ccfcbdc8f4045b173e70431a5932","kind":"command","label":"other","owner":"","purpose":{},"argv":["sleep","60"],"cwd":"/tmp/vocab","stdout":"/tmp/vocab/home/run/7/logs/57a327167595da8b07816299b8876883.stdout","stderr":"/tmp/vocab/home/run/7/logs/57a327167595da8b07816299b8876883.stderr","stdin":null,"pty":false,"scope_policy":"keep","limits":{"completion_timeout_ms":null,"idle_timeout_ms":null,"log_cap_bytes":1073741824},"started_at_unix_ms":1796278949076,"started":"2026-12-03T06:22:29Z","boot_id":"77faca3b2d414a6fa9450f70b955af95","guardian":{"pid":11220,"start_time":4612584},"workload":{"pid":11221,"start_time":4612584,"pgid":11221,"sid":27760},"proof":{"path":"/tmp/vocab/home/run/7/proofs/57a327167595da8b07816299b8876883","dev":65024,"ino":10027930},"cgroup":{"path":"/sys/fs/cgroup/unified/refine/57a327167595da8b07816299b8876883","forked_into":true,"usage":null}},"result":{"outcome":"stopped","status":"signaled","exit_code":null,"signal":9,"written_at":"2026-12-03T06:22:32Z","usage":{"user_us":1692,"system_us":0,"max_rss_kib":1520}},"receipt":{"registration":"57a327167595da8b07816299b8876883","runtime":"9284ccfcbdc8f4045b173e70431a5932","boot_id":"77faca3b2d414a6fa9450f70b955af95","guardian":{"pid":11220,"start_time":4612584},"workload":{"pid":11221,"start_time":4612584},"proof":{"dev":65024,"ino":10027930},"status":"signaled","exit_code":null,"signal":9,"end":"completed","spawn_errno":0,"reaped":1,"workload_exited_at_ns":1796278952972510000,"written_at_ns":1796278952972627700,"usage":{"user_us":1692,"system_us":0,"max_rss_kib":1520}},"artifacts":{"stdout":{"path":"/tmp/vocab/home/run/7/logs/57a327167595da8b07816299b8876883.stdout","exists":false,"bytes":0},"stderr":{"path":"/tmp/vocab/home/run/7/logs/57a327167595da8b07816299b8876883.stderr","exists":false,"bytes":0}},"watch":null,"processes":[]}"#;

fn response_seeds() -> Vec<Vec<u8>> {
    let view = api::ScopeView {
        id: "ab".repeat(16),
        kind: refine_protocol::docs::ScopeKind::Known(Kind::Agent),
        label: "l".into(),
        state: refine_protocol::docs::State::Exited,
        reason: None,
        status: Some(refine_protocol::docs::StatusName::Signaled),
        exit_code: None,
        signal: Some(9),
        workload_running: Some(false),
        outcome: Some(refine_protocol::docs::Outcome::Stopped),
        started_at_unix_ms: 1_764_000_000_000,
        age_secs: 3,
        pid: 11,
        guardian_pid: 10,
        cwd: "/".into(),
        argv: vec!["true".into()],
        stdout: "/o".into(),
        stderr: "/e".into(),
        stalled: stall_record().stalled,
        silent: None,
        usage: usage().map(Into::into),
        ready: Some(refine_protocol::docs::ReadyState::Starting),
        health: Some(refine_protocol::docs::HealthState::Unhealthy),
    };
    [
        Response::ok(Reply::Launched { id: "x".into() }),
        Response::ok(Reply::SpawnFailed {
            id: "x".into(),
            errno: 2,
            step: Some(refine_protocol::frame::SpawnStep::User),
        }),
        Response::ok(Reply::List(vec![view])),
        // A show reply as a service sent it.
        Response::ok(Reply::Show(Box::new(serde_json::from_str(SHOW).unwrap()))),
        Response::ok(Reply::Stop(Box::new(refine_protocol::docs::StopDoc {
            id: "ab".repeat(16),
            outcome: refine_protocol::docs::StopOutcomeDoc::Failed(
                refine_protocol::docs::StopFailed::Failed,
            ),
            state: refine_protocol::docs::State::Unverified,
            reason: Some(refine_protocol::docs::ScopeReason::Error {
                error: "EPERM".into(),
            }),
            detail: refine_protocol::docs::StopDetail::Failed {
                error: "EPERM".into(),
            },
        }))),
        Response {
            v: 1,
            ok: false,
            result: None,
            error: Some(ApiError {
                kind: ErrorKind::NoCapacity,
                message: "no free slot".into(),
            }),
        },
    ]
    .iter()
    .map(api::encode_response)
    .collect()
}

/// Decodes a record's mutation as it is and resealed; what decodes must re-encode and decode to
/// the same value.
fn record_round<T: PartialEq + std::fmt::Debug>(
    t: &mut Tally,
    rng: &mut Rng,
    what: &str,
    seed: &[u8],
    decode: fn(&[u8]) -> Result<T, refine_protocol::DecodeError>,
    encode: fn(&T) -> Result<Vec<u8>, EncodeError>,
) {
    let mut v = mutate(rng, seed);
    for attempt in 0..2 {
        if attempt == 1 {
            reseal_envelope(&mut v, 8);
        }
        if let Ok(value) = t.decode(what, &v, decode) {
            t.decoded += 1;
            let again = encode(&value)
                .unwrap_or_else(|e| panic!("{what}: decoded {value:?}, re-encoding refused: {e}"));
            assert_eq!(decode(&again).as_ref(), Ok(&value), "{what}");
        }
    }
}

#[test]
fn fuzz_every_decoder() {
    let rounds: usize = std::env::var("REFINE_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let mut rng = Rng(std::env::var("REFINE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9E37_79B9_7F4A_7C15));
    let frames = frame_seeds();
    let receipts = receipt_seeds();
    let regs = [registration(), {
        let mut r = registration();
        r.argv = vec!["a\u{fffd}b".into()];
        r.argv_bytes = Some(vec![b"a\xffb".to_vec(), vec![]]);
        r.stdin_path = Some("/dev/null".into());
        r.kind = Kind::Terminal;
        r.pty = true;
        r.supervisor_provenance = Some(provenance().into());
        r.guardian_provenance = Some(
            refine_protocol::provenance::Provenance::from_build("0.1.0", "", "unknown", "source")
                .into(),
        );
        r
    }]
    .map(|r| r.encode().unwrap());
    let caps = capture_receipt().encode().unwrap();
    let stop = StopRequest {
        id: RegistrationId([3; 16]),
        runtime: RuntimeId([4; 16]),
        cause: StopCause::IdleDeadline,
        requested_at_unix_ns: 1_764_000_000_123_456_789,
        requester_pid: 4242,
    }
    .encode()
    .unwrap();
    let results = [launch_result(None), launch_result(usage())].map(|r| r.encode().unwrap());
    let stall = stall_record().encode().unwrap();
    let requests = request_seeds();
    let responses = response_seeds();
    let mut out = vec![0u8; MAX_FRAME];
    let mut t = Tally {
        attempts: 0,
        decoded: 0,
        worst: 0.0,
    };
    for i in 0..rounds {
        // Frames, as they are and resealed.
        let mut v = mutate(&mut rng, &frames[i % frames.len()]);
        for attempt in 0..2 {
            if attempt == 1 {
                reseal_envelope(&mut v, 4);
            }
            if let Ok(frame) = t.decode("frame", &v, Frame::decode) {
                t.decoded += 1;
                frame_symmetry(&v, &frame, &mut out);
            }
        }
        // The receipt, as it is and resealed.
        let mut v = mutate(&mut rng, &receipts[i % receipts.len()]);
        for attempt in 0..2 {
            if attempt == 1 {
                reseal_receipt(&mut v);
            }
            if let Ok(r) = t.decode("receipt", &v, Receipt::decode) {
                t.decoded += 1;
                let _ = r.status.shell_code();
                let mut buf = [0u8; 256];
                let n = r
                    .encode_into(&mut buf)
                    .unwrap_or_else(|e| panic!("decoded {r:?}, re-encoding refused: {e}"));
                assert_eq!(&buf[..n], &v[..], "{r:?} re-encoded to other bytes");
            }
        }
        // The provenance layout (V1): what decodes is exactly its bytes.
        let v = mutate(&mut rng, provenance().as_bytes());
        if let Ok(p) = t.decode(
            "provenance",
            &v,
            refine_protocol::provenance::Provenance::decode,
        ) {
            t.decoded += 1;
            assert_eq!(&p.as_bytes()[..], &v[..], "{p:?} re-encoded to other bytes");
        }
        // Every record.
        record_round(
            &mut t,
            &mut rng,
            "registration",
            &regs[i % regs.len()],
            Registration::decode,
            Registration::encode,
        );
        record_round(
            &mut t,
            &mut rng,
            "capture receipt",
            &caps,
            CaptureReceipt::decode,
            CaptureReceipt::encode,
        );
        record_round(
            &mut t,
            &mut rng,
            "stop request",
            &stop,
            StopRequest::decode,
            StopRequest::encode,
        );
        record_round(
            &mut t,
            &mut rng,
            "launch result",
            &results[i % results.len()],
            LaunchResultRecord::decode,
            LaunchResultRecord::encode,
        );
        record_round(
            &mut t,
            &mut rng,
            "stall record",
            &stall,
            StallRecord::decode,
            StallRecord::encode,
        );
        // The socket: a request line and a reply line.
        let line = mutate(&mut rng, &requests[i % requests.len()]);
        if let Ok(req) = t.decode("request", &line, api::decode_request) {
            t.decoded += 1;
            let again = api::encode_request(&req);
            assert_eq!(api::decode_request(&again), Ok(req));
        }
        let _ = t.decode("request explained", &line, api::decode_request_explained);
        let line = mutate(&mut rng, &responses[i % responses.len()]);
        if let Ok(resp) = t.decode("response", &line, api::decode_response) {
            t.decoded += 1;
            let again = api::encode_response(&resp);
            assert_eq!(api::decode_response(&again), Ok(resp));
        }
    }
    println!(
        "fuzz: {rounds} rounds, {} decode attempts, {} decoded and re-encoded to the same value, \
         worst allocation {:.1} bytes per input byte of 64 or more (bound {} + {} per byte): no finding",
        t.attempts,
        t.decoded,
        t.worst,
        support::CONSTANT,
        support::PER_INPUT_BYTE
    );
}
