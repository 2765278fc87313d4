//! P4 as properties: every encoder refuses, with the decoder's own error, each value its decoder
//! would refuse; whatever it accepts decodes back to the same value.
//!
//! Each case is a value with at most one field at or past a limit (a deterministic generator
//! picks which). The test also lays the value out on the wire by hand, without any check, so
//! that the decoder's verdict on those bytes is known: the encoder must refuse exactly when the
//! decoder would, and with the same typed error (same variant and field; an interior NUL, which
//! the encoder names `InteriorNul`, is the decoder's `InvalidField` of the same field).

use refine_protocol::codec::{envelope_seal, envelope_start, Writer};
use refine_protocol::frame::{
    encode_launch, CaptureParams, Credentials, FLAG_ALLOW_SETNS, FLAG_CAPTURE, FLAG_CGROUP,
    FLAG_CREDENTIALS, FLAG_LANDLOCK, FLAG_NEW_SESSION, FLAG_NO_NEW_PRIVS, FLAG_NO_PDEATH_SIGNAL,
    FLAG_OWNER_LOCK, FLAG_PTY, FLAG_READY_FD, FRAME_MAGIC, MAX_ARGS, MAX_FRAME, MAX_GROUPS,
    MAX_RLIMITS, MAX_START_TIMEOUT_MS,
};
use refine_protocol::receipt::{RECEIPT_LEN, RECEIPT_MAGIC};
use refine_protocol::{
    BootId, DecodeError, EncodeError, Frame, Hello, LaunchParams, ProcessWitness, ProofIdentity,
    Receipt, RegistrationId, Rlimit, RuntimeId, ScopeEnd, TreeUsage, WorkloadStatus,
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
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len())]
    }
}

fn iterations() -> usize {
    std::env::var("REFINE_SYMMETRY_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3_000)
}

/// The encoder's refusal is the decoder's.
fn same(e: EncodeError, d: DecodeError) -> bool {
    match (e, d) {
        (EncodeError::InvalidField { field: a }, DecodeError::InvalidField { field: b })
        | (EncodeError::InteriorNul { field: a }, DecodeError::InvalidField { field: b }) => a == b,
        (EncodeError::Oversized { len: a, max: m }, DecodeError::Oversized { len: b, max: n }) => {
            (a, m) == (b, n)
        }
        _ => false,
    }
}

/// A frame envelope around `payload`, no checks.
fn raw_frame(kind: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 16 + payload.len()];
    let mut w = Writer::new(&mut out);
    envelope_start(&mut w, &FRAME_MAGIC, 1, kind).unwrap();
    w.bytes(payload).unwrap();
    envelope_seal(&mut w, FRAME_MAGIC.len()).unwrap();
    out
}

fn raw_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u32 + 1).to_le_bytes());
    out.extend_from_slice(s);
    out.push(0);
}

/// The launch frame's layout (frame.rs), written without a single check.
fn raw_launch(p: &LaunchParams<'_>) -> Vec<u8> {
    let mut o = Vec::new();
    let cred = if p.credentials.is_some() {
        FLAG_CREDENTIALS
    } else {
        0
    };
    let (pdeath_flag, signal) = match p.pdeath_signal {
        None => (FLAG_NO_PDEATH_SIGNAL, 0),
        Some(s) => (0, s),
    };
    let cgroup = if p.cgroup.is_some() { FLAG_CGROUP } else { 0 };
    let capture = if p.capture.is_some() { FLAG_CAPTURE } else { 0 };
    let ready = if p.ready_fd.is_some() {
        FLAG_READY_FD
    } else {
        0
    };
    let flags = (p.flags & !(FLAG_CREDENTIALS | FLAG_CGROUP | FLAG_CAPTURE | FLAG_READY_FD))
        | cred
        | cgroup
        | capture
        | ready
        | pdeath_flag;
    for v in [flags, signal, p.start_timeout_ms, p.stdio_fds] {
        o.extend_from_slice(&v.to_le_bytes());
    }
    o.extend_from_slice(&p.registration.0);
    o.extend_from_slice(&p.runtime.0);
    raw_str(&mut o, p.proof_path);
    raw_str(&mut o, p.cwd);
    for list in [p.argv, p.env] {
        o.extend_from_slice(&(list.len() as u32).to_le_bytes());
        for s in list {
            raw_str(&mut o, s);
        }
    }
    o.extend_from_slice(&(p.rlimits.len() as u32).to_le_bytes());
    for l in p.rlimits {
        o.extend_from_slice(&l.resource.to_le_bytes());
        o.extend_from_slice(&l.soft.to_le_bytes());
        o.extend_from_slice(&l.hard.to_le_bytes());
    }
    if let Some(c) = p.credentials {
        for v in [c.uid, c.gid, c.groups.len() as u32] {
            o.extend_from_slice(&v.to_le_bytes());
        }
        for g in c.groups {
            o.extend_from_slice(&g.to_le_bytes());
        }
    }
    if let Some(c) = p.cgroup {
        raw_str(&mut o, c);
    }
    if let Some(c) = p.capture {
        o.extend_from_slice(&c.log_cap.unwrap_or(u64::MAX).to_le_bytes());
    }
    if let Some(n) = p.ready_fd {
        o.extend_from_slice(&n.to_le_bytes());
    }
    raw_frame(1, &o)
}

/// What a decoded launch spec says, in the encoder's terms.
fn params_of(f: &Frame<'_>) -> String {
    let Frame::Launch(s) = f else {
        return format!("not a launch: {f:?}");
    };
    let bytes = |c: &core::ffi::CStr| c.to_bytes().to_vec();
    format!(
        "{:?}",
        (
            s.flags,
            s.pdeath_signal,
            s.start_timeout_ms,
            s.stdio_fds,
            s.registration,
            s.runtime,
            bytes(s.proof_path),
            s.cwd.map(bytes).unwrap_or_default(),
            s.argv.iter().map(bytes).collect::<Vec<_>>(),
            s.env.iter().map(bytes).collect::<Vec<_>>(),
            s.rlimits.iter().collect::<Vec<_>>(),
            (
                s.credentials
                    .map(|c| (c.uid, c.gid, c.groups.iter().collect::<Vec<_>>())),
                s.cgroup.map(bytes),
                s.capture,
                s.ready_fd,
            ),
        )
    )
}

fn params_text(p: &LaunchParams<'_>) -> String {
    format!(
        "{:?}",
        (
            p.flags & !(FLAG_CREDENTIALS | FLAG_CGROUP | FLAG_CAPTURE | FLAG_READY_FD)
                | if p.capture.is_some() { FLAG_CAPTURE } else { 0 }
                | if p.ready_fd.is_some() {
                    FLAG_READY_FD
                } else {
                    0
                }
                | if p.credentials.is_some() {
                    FLAG_CREDENTIALS
                } else {
                    0
                }
                | if p.cgroup.is_some() { FLAG_CGROUP } else { 0 },
            p.pdeath_signal,
            p.start_timeout_ms,
            p.stdio_fds,
            p.registration,
            p.runtime,
            p.proof_path.to_vec(),
            p.cwd.to_vec(),
            p.argv.iter().map(|a| a.to_vec()).collect::<Vec<_>>(),
            p.env.iter().map(|a| a.to_vec()).collect::<Vec<_>>(),
            p.rlimits.to_vec(),
            (
                p.credentials.map(|c| (c.uid, c.gid, c.groups.to_vec())),
                p.cgroup.map(|c| c.to_vec()),
                p.capture,
                p.ready_fd,
            ),
        )
    )
}

/// encode(v) is refused exactly when decode(raw(v)) is, with the same error; else they agree.
#[test]
fn launch_encoder_and_decoder_agree_at_and_past_every_limit() {
    let mut rng = Rng(0x5EED_0001);
    let many: Vec<&[u8]> = vec![b"a"; MAX_ARGS + 1];
    let big = vec![b'x'; MAX_FRAME - 60];
    let groups: Vec<u32> = (0..=MAX_GROUPS as u32).collect();
    let rlimits = vec![
        Rlimit {
            resource: 1,
            soft: 2,
            hard: u64::MAX,
        };
        MAX_RLIMITS + 1
    ];
    let mut out = vec![0u8; 2 * MAX_FRAME];
    let mut refused = std::collections::BTreeMap::<String, usize>::new();
    for _ in 0..iterations() {
        let mut p = LaunchParams {
            flags: rng.pick(&[
                0,
                FLAG_PTY,
                FLAG_NEW_SESSION,
                FLAG_PTY | FLAG_NEW_SESSION,
                FLAG_ALLOW_SETNS,
                FLAG_NEW_SESSION | FLAG_ALLOW_SETNS,
                FLAG_OWNER_LOCK,
                FLAG_NEW_SESSION | FLAG_OWNER_LOCK,
                FLAG_LANDLOCK,
                FLAG_LANDLOCK | FLAG_NO_NEW_PRIVS,
                FLAG_NO_NEW_PRIVS,
                FLAG_OWNER_LOCK | FLAG_LANDLOCK | FLAG_NO_NEW_PRIVS,
            ]),
            pdeath_signal: rng.pick(&[None, Some(1), Some(15), Some(64)]),
            start_timeout_ms: rng.pick(&[1, 5000, MAX_START_TIMEOUT_MS]),
            stdio_fds: rng.pick(&[0, 3]),
            registration: RegistrationId([rng.next() as u8; 16]),
            runtime: RuntimeId([rng.next() as u8; 16]),
            proof_path: rng.pick(&[&b"/p"[..], b"/run/x/proofs/0101"]),
            cwd: rng.pick(&[&b""[..], b"/", b"/tmp"]),
            argv: &many[..rng.pick(&[1, 2, MAX_ARGS])],
            env: &many[..rng.pick(&[0, 1, MAX_ARGS])],
            rlimits: &rlimits[..rng.pick(&[0, 1, MAX_RLIMITS])],
            credentials: rng.pick(&[
                None,
                Some(Credentials {
                    uid: 0,
                    gid: 0,
                    groups: &[],
                }),
                Some(Credentials {
                    uid: 65534,
                    gid: u32::MAX - 1,
                    groups: &groups[..MAX_GROUPS],
                }),
            ]),
            // The hand-written reference (`raw_launch`) writes no signal state.
            signal_state: None,
            cgroup: rng.pick(&[None, Some(&b"/sys/fs/cgroup/refine/0101"[..])]),
            capture: rng.pick(&[
                None,
                Some(CaptureParams { log_cap: None }),
                Some(CaptureParams {
                    log_cap: Some(1 << 20),
                }),
            ]),
            ready_fd: rng.pick(&[None, Some(3), Some(9), Some(1023)]),
        };
        // A capturing launch sends its five descriptors (L1), and the registration lock with
        // them when the guardian is to hold it (L3; without a capture that flag is refused);
        // the readiness pipe is one more (H6), and needs descriptors sent.
        match p.capture {
            Some(_) => p.stdio_fds = 5 + u32::from(p.flags & FLAG_OWNER_LOCK != 0),
            None => p.flags &= !FLAG_OWNER_LOCK,
        }
        if p.ready_fd.is_some() {
            p.stdio_fds = match p.stdio_fds {
                0 => 4,
                n => n + 1,
            };
        }
        // X11: the Landlock ruleset is one more, last, also on inherited stdio.
        if p.flags & FLAG_LANDLOCK != 0 {
            p.stdio_fds += 1;
        }
        // At most one field at or past its limit.
        let bad_args: [&[u8]; 2] = [b"/bin/true", b"a\0b"];
        let big_env: [&[u8]; 1] = [&big];
        match rng.below(19) {
            0 => p.argv = &[],
            1 => p.argv = &many,
            2 => p.env = &many,
            3 => p.proof_path = b"",
            4 => p.proof_path = b"/p\0q",
            5 => p.argv = &bad_args,
            6 => p.pdeath_signal = Some(rng.pick(&[0, 65, u32::MAX])),
            7 => p.start_timeout_ms = rng.pick(&[0, MAX_START_TIMEOUT_MS + 1, u32::MAX]),
            8 => p.stdio_fds = rng.pick(&[1, 2, 4, 7, 8, u32::MAX]),
            // (bit 4 is the signal state, W10, bit 5 the cgroup, F4, bit 6 the setns opt-out,
            // X7, bit 7 the guardian's capture, L1, bit 8 the owner lock, L3, bit 9 the
            // readiness descriptor, H6, bit 10 the Landlock ruleset and bit 11 no_new_privs,
            // X11: the lowest unknown is 12)
            9 => p.flags = rng.pick(&[1 << 12, 1 << 31]),
            10 => p.rlimits = &rlimits,
            11 => {
                p.credentials = Some(Credentials {
                    uid: 1,
                    gid: 1,
                    groups: &groups,
                })
            }
            12 => {
                p.credentials = Some(Credentials {
                    uid: rng.pick(&[u32::MAX, 1]),
                    gid: rng.pick(&[u32::MAX, 1]),
                    groups: &[u32::MAX][..rng.below(2)],
                });
                if p.credentials.is_some_and(|c| c.uid == 1 && c.gid == 1) {
                    p.credentials = Some(Credentials {
                        uid: 1,
                        gid: 1,
                        groups: &[u32::MAX],
                    });
                }
            }
            13 => {
                p.env = &big_env;
                p.argv = &many[..1];
            }
            14 => p.cwd = b"/a\0",
            15 => p.cgroup = Some(rng.pick(&[&b""[..], b"/c\0g"])),
            16 => {
                p.capture = None;
                p.flags |= FLAG_OWNER_LOCK;
                p.stdio_fds = 0;
            }
            17 => {
                p.ready_fd = Some(rng.pick(&[0, 2, 1024, u32::MAX]));
                p.stdio_fds = match p.capture {
                    Some(_) => 6 + u32::from(p.flags & FLAG_OWNER_LOCK != 0),
                    None => 4,
                } + u32::from(p.flags & FLAG_LANDLOCK != 0);
            }
            _ => {}
        }
        let raw = raw_launch(&p);
        let decoded = Frame::decode(&raw);
        match encode_launch(&p, &mut out) {
            Ok(n) => {
                assert_eq!(&out[..n], &raw[..], "encoder and layout differ");
                let back = decoded.unwrap_or_else(|e| panic!("encoded, then refused: {e}"));
                assert_eq!(params_of(&back), params_text(&p));
            }
            Err(e) => {
                let d = decoded
                    .map(|f| params_of(&f))
                    .expect_err("refused a valid launch");
                assert!(same(e, d), "encoder: {e:?}, decoder: {d:?}");
                *refused.entry(format!("{e}")).or_default() += 1;
            }
        }
    }
    // Every fault was generated and refused.
    for want in [
        "argv holds",
        "proof path holds",
        "proof path contains",
        "argv contains",
        "cwd contains",
        "parent-death signal",
        "start timeout",
        "descriptor count",
        "launch flags",
        "credentials",
        "cgroup",
        "ready descriptor",
        "exceeds maximum 4096",
        "exceeds maximum 32",
        "exceeds maximum 256",
        "exceeds maximum 196608",
    ] {
        assert!(
            refused.keys().any(|k| k.contains(want)),
            "no refusal like {want:?}: {refused:#?}"
        );
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
        spawn_errno: -1,
        reaped: u32::MAX,
        workload_exited_at_ns: u64::MAX,
        written_at_ns: 6,
        usage,
    }
}

fn status_wire(s: WorkloadStatus) -> (u8, i32) {
    match s {
        WorkloadStatus::Exited(c) => (0, c),
        WorkloadStatus::Signaled(v) => (1, v),
        WorkloadStatus::NeverStarted => (2, 0),
        WorkloadStatus::Unknown => (3, 0),
    }
}

/// The receipt's layout (receipt.rs), written without a single check.
fn raw_receipt(r: &Receipt) -> Vec<u8> {
    let (version, len) = if r.usage.is_some() {
        (2u16, RECEIPT_LEN)
    } else {
        (1, 144)
    };
    let mut o = RECEIPT_MAGIC.to_vec();
    o.extend_from_slice(&version.to_le_bytes());
    o.extend_from_slice(&(len as u16).to_le_bytes());
    o.extend_from_slice(&0u32.to_le_bytes());
    for id in [r.registration.0, r.runtime.0, r.boot_id.0] {
        o.extend_from_slice(&id);
    }
    o.extend_from_slice(&r.guardian.pid.to_le_bytes());
    o.extend_from_slice(&r.workload.pid.to_le_bytes());
    for v in [
        r.guardian.start_time,
        r.workload.start_time,
        r.proof.dev,
        r.proof.ino,
    ] {
        o.extend_from_slice(&v.to_le_bytes());
    }
    let (tag, value) = status_wire(r.status);
    let (end, code) = match r.end {
        ScopeEnd::Completed => (0u8, 0u16),
        ScopeEnd::Aborted => (1, 0),
        ScopeEnd::SpawnFailed => (2, 0),
        ScopeEnd::GuardianError { code } => (3, code),
    };
    o.push(tag);
    o.push(end);
    o.extend_from_slice(&code.to_le_bytes());
    o.extend_from_slice(&value.to_le_bytes());
    o.extend_from_slice(&r.spawn_errno.to_le_bytes());
    o.extend_from_slice(&r.reaped.to_le_bytes());
    o.extend_from_slice(&r.workload_exited_at_ns.to_le_bytes());
    o.extend_from_slice(&r.written_at_ns.to_le_bytes());
    if let Some(u) = r.usage {
        for v in [u.user_us, u.system_us, u.max_rss_kib] {
            o.extend_from_slice(&v.to_le_bytes());
        }
    }
    let crc = refine_protocol::codec::crc32(&o);
    o.extend_from_slice(&crc.to_le_bytes());
    o.extend_from_slice(&0u32.to_le_bytes());
    o
}

const STATUSES: [WorkloadStatus; 14] = [
    WorkloadStatus::Exited(0),
    WorkloadStatus::Exited(255),
    WorkloadStatus::Exited(256),
    WorkloadStatus::Exited(-1),
    WorkloadStatus::Exited(i32::MIN),
    WorkloadStatus::Signaled(1),
    WorkloadStatus::Signaled(64),
    WorkloadStatus::Signaled(0),
    WorkloadStatus::Signaled(65),
    WorkloadStatus::Signaled(-9),
    WorkloadStatus::Signaled(i32::MAX),
    WorkloadStatus::NeverStarted,
    WorkloadStatus::Unknown,
    WorkloadStatus::Exited(3),
];

const ENDS: [ScopeEnd; 7] = [
    ScopeEnd::Completed,
    ScopeEnd::Aborted,
    ScopeEnd::SpawnFailed,
    ScopeEnd::GuardianError { code: 0 },
    ScopeEnd::GuardianError { code: 1 },
    ScopeEnd::GuardianError { code: 24 },
    ScopeEnd::GuardianError { code: u16::MAX },
];

/// The receipt, alone and inside a scope-exited frame, at every status and scope-end limit.
#[test]
fn receipt_and_scope_exited_encoders_refuse_what_their_decoders_refuse() {
    let usage = Some(TreeUsage {
        user_us: 1,
        system_us: u64::MAX,
        max_rss_kib: 3,
    });
    let mut refusals = 0;
    for status in STATUSES {
        for end in ENDS {
            for usage in [None, usage] {
                let r = receipt(status, end, usage);
                let raw = raw_receipt(&r);
                let decoded = Receipt::decode(&raw);
                let mut buf = [0u8; RECEIPT_LEN];
                let encoded = r.encode_into(&mut buf).map(|n| buf[..n].to_vec());
                let frame = Frame::ScopeExited(r);
                let mut fbuf = [0u8; 512];
                let framed = frame.encode_into(&mut fbuf).map(|n| fbuf[..n].to_vec());
                let raw_framed = Frame::decode(&raw_frame(8, &raw)).map(|f| format!("{f:?}"));
                match (encoded, framed) {
                    (Ok(bytes), Ok(fbytes)) => {
                        assert_eq!(bytes, raw, "{r:?}");
                        assert_eq!(decoded, Ok(r));
                        assert_eq!(
                            Frame::decode(&fbytes).map(|f| format!("{f:?}")),
                            Ok(format!("{frame:?}"))
                        );
                    }
                    (Err(e), Err(fe)) => {
                        refusals += 1;
                        let d = decoded.expect_err("refused a valid receipt");
                        assert!(same(e, d), "{r:?}: encoder {e:?}, decoder {d:?}");
                        let fd = raw_framed.expect_err("refused a valid frame");
                        assert!(same(fe, fd), "{r:?}: frame encoder {fe:?}, decoder {fd:?}");
                    }
                    (e, fe) => panic!("{r:?}: receipt {e:?} but frame {fe:?}"),
                }
            }
        }
    }
    assert!(refusals > 0);
}

/// Small frames: a signal outside 1..=64 and a workload status outside the kernel's domain are
/// refused both ways; everything else round-trips.
#[test]
fn small_frame_encoders_refuse_what_their_decoders_refuse() {
    let mut rng = Rng(0x5EED_0002);
    let mut signals: Vec<i32> = vec![i32::MIN, -1, 0, 1, 2, 63, 64, 65, i32::MAX];
    signals.extend((0..iterations()).map(|_| rng.next() as i32 % 100));
    let mut buf = [0u8; 512];
    let mut seen = [0usize; 2];
    for signo in signals {
        let frame = Frame::Signal { signo };
        let raw = raw_frame(9, &signo.to_le_bytes());
        let decoded = Frame::decode(&raw).map(|f| format!("{f:?}"));
        match frame.encode_into(&mut buf) {
            Ok(n) => {
                seen[0] += 1;
                assert_eq!(&buf[..n], &raw[..]);
                assert_eq!(decoded, Ok(format!("{frame:?}")));
            }
            Err(e) => {
                seen[1] += 1;
                let d = decoded.expect_err("refused a valid signal");
                assert!(same(e, d), "signal {signo}: encoder {e:?}, decoder {d:?}");
            }
        }
    }
    assert!(seen[0] > 0 && seen[1] > 0, "{seen:?}");
    for status in STATUSES {
        let at_ns = rng.next();
        let frame = Frame::WorkloadExited { status, at_ns };
        let (tag, value) = status_wire(status);
        let mut p = vec![tag];
        p.extend_from_slice(&value.to_le_bytes());
        p.extend_from_slice(&at_ns.to_le_bytes());
        let decoded = Frame::decode(&raw_frame(7, &p)).map(|f| format!("{f:?}"));
        match frame.encode_into(&mut buf) {
            Ok(n) => assert_eq!(
                Frame::decode(&buf[..n]).map(|f| format!("{f:?}")),
                Ok(format!("{frame:?}"))
            ),
            Err(e) => {
                let d = decoded.expect_err("refused a valid status");
                assert!(same(e, d), "{status:?}: encoder {e:?}, decoder {d:?}");
            }
        }
    }
    // The frames without a limit: any value round-trips.
    for _ in 0..iterations() {
        let frame = match rng.below(7) {
            0 => Frame::Hello(Hello {
                guardian: ProcessWitness {
                    pid: rng.next() as u32,
                    start_time: rng.next(),
                },
                boot_id: BootId([rng.next() as u8; 16]),
                workload: ProcessWitness {
                    pid: rng.next() as u32,
                    start_time: rng.next(),
                },
                workload_pgid: rng.next() as u32,
                workload_sid: rng.next() as u32,
                proof: ProofIdentity {
                    dev: rng.next(),
                    ino: rng.next(),
                },
                cgroup: Default::default(),
                provenance: None,
            }),
            1 => Frame::Start,
            2 => Frame::Abort,
            3 => Frame::Started,
            4 => Frame::SpawnFailed {
                errno: rng.next() as i32,
                step: refine_protocol::frame::SpawnStep::Program,
            },
            5 => Frame::Disown,
            _ => Frame::GuardianFailed {
                code: rng.next() as u16,
                errno: rng.next() as i32,
            },
        };
        let n = frame.encode_into(&mut buf).unwrap();
        assert_eq!(
            Frame::decode(&buf[..n]).map(|f| format!("{f:?}")),
            Ok(format!("{frame:?}"))
        );
    }
}

/// A record with a string `extra` bytes longer than the one that fills the file to the byte:
/// encode refuses exactly when the file would pass [`MAX_RECORD`], as the decoder refuses such
/// a file (same error, same sizes), and what it writes decodes to the same value.
fn record_at_the_limit<T: PartialEq + std::fmt::Debug + serde::Serialize>(
    what: &str,
    magic: [u8; 8],
    version: u16,
    make: impl Fn(usize) -> T,
    encode: fn(&T) -> Result<Vec<u8>, EncodeError>,
    decode: fn(&[u8]) -> Result<T, DecodeError>,
) {
    use refine_protocol::record::{ENVELOPE_LEN, MAX_RECORD};
    let base = encode(&make(0)).unwrap().len();
    // The string's varint length grows from 1 to 5 bytes past 65,535.
    let fill = MAX_RECORD - base - 4;
    let mut rng = Rng(0x5EED_0003);
    let mut seen = [0usize; 2];
    for extra in (-3i64..=3).chain((0..20).map(|_| rng.below(2000) as i64 - 1000)) {
        let value = make((fill as i64 + extra) as usize);
        let payload = bincode::serde::encode_to_vec(&value, bincode::config::standard()).unwrap();
        let mut raw = vec![0u8; ENVELOPE_LEN + payload.len()];
        let mut w = Writer::new(&mut raw);
        envelope_start(&mut w, &magic, version, 0).unwrap();
        w.bytes(&payload).unwrap();
        envelope_seal(&mut w, magic.len()).unwrap();
        match encode(&value) {
            Ok(bytes) => {
                seen[0] += 1;
                assert_eq!(bytes, raw, "{what}");
                assert_eq!(decode(&bytes).as_ref(), Ok(&value), "{what}");
            }
            Err(e) => {
                seen[1] += 1;
                let d = decode(&raw).expect_err("refused a valid record");
                assert!(same(e, d), "{what}: encoder {e:?}, decoder {d:?}");
                assert!(raw.len() > MAX_RECORD);
            }
        }
    }
    assert!(seen[0] > 0 && seen[1] > 0, "{what}: {seen:?}");
}

#[test]
fn record_encoders_refuse_exactly_what_their_decoders_refuse() {
    use refine_protocol::record::{
        CaptureReceipt, Kind, LaunchResultRecord, Limits, Registration, ScopePolicy, StreamEnd,
        StreamReceipt, CAPTURE_MAGIC, REGISTRATION_MAGIC, REGISTRATION_VERSION, RESULT_MAGIC,
        RESULT_VERSION,
    };
    let hello = Hello {
        guardian: ProcessWitness::default(),
        boot_id: BootId([7; 16]),
        workload: ProcessWitness::default(),
        workload_pgid: 1,
        workload_sid: 1,
        proof: ProofIdentity::default(),
        cgroup: Default::default(),
        provenance: None,
    };
    record_at_the_limit(
        "registration",
        REGISTRATION_MAGIC,
        REGISTRATION_VERSION,
        |n| Registration {
            id: RegistrationId([1; 16]),
            runtime: RuntimeId([2; 16]),
            kind: Kind::Command,
            label: "x".repeat(n),
            owner: String::new(),
            purpose: Default::default(),
            argv: vec!["true".into()],
            cwd: "/".into(),
            stdout_path: "o".into(),
            stderr_path: "e".into(),
            stdin_path: None,
            pty: false,
            limits: Limits::default(),
            scope_policy: ScopePolicy::Keep,
            started_at_unix_ms: 1,
            hello,
            proof_path: "p".into(),
            argv_bytes: None,
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
        },
        Registration::encode,
        Registration::decode,
    );
    record_at_the_limit(
        "capture receipt",
        CAPTURE_MAGIC,
        refine_protocol::record::CAPTURE_VERSION,
        |n| CaptureReceipt {
            id: RegistrationId([1; 16]),
            runtime: RuntimeId([2; 16]),
            workload_status: None,
            streams: vec![StreamReceipt {
                name: "stdout".into(),
                end: StreamEnd::Incomplete(refine_protocol::record::StreamIncomplete::Worded(
                    "y".repeat(n),
                )),
                artifact_path: "a".into(),
                artifact_bytes: 0,
                prefix: vec![],
            }],
            written_at_unix_ms: 1,
        },
        CaptureReceipt::encode,
        CaptureReceipt::decode,
    );
    record_at_the_limit(
        "launch result",
        RESULT_MAGIC,
        RESULT_VERSION,
        |n| LaunchResultRecord {
            id: RegistrationId([1; 16]),
            runtime: RuntimeId([2; 16]),
            outcome: refine_protocol::docs::Outcome::StopFailed,
            workload_status: WorkloadStatus::Exited(0),
            written_at_unix_ms: 1,
            stop_failure: Some("z".repeat(n)),
            usage: None,
            residue_stop: None,
            cgroup_usage: None,
            limit_usage: None,
        },
        LaunchResultRecord::encode,
        LaunchResultRecord::decode,
    );
}
