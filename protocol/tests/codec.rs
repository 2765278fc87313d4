//! Round trips for every frame and record, and every error class. The fuzz loop over every
//! decoder is `tests/fuzz.rs`; the encoders' and decoders' limits as properties, `symmetry.rs`.

use std::collections::BTreeMap;

use refine_protocol::frame::{encode_launch, launch_len, FLAG_NEW_SESSION, FLAG_PTY, MAX_FRAME};
use refine_protocol::record::{
    CaptureReceipt, Kind, LaunchResultRecord, Limits, Registration, ScopePolicy, StopCause,
    StopRequest, StreamEnd, StreamReceipt,
};
use refine_protocol::{
    BootId, DecodeError, EncodeError, Frame, Hello, LaunchParams, ProcessWitness, ProofIdentity,
    Receipt, RegistrationId, Rlimit, RuntimeId, ScopeEnd, WorkloadStatus,
};

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

fn receipt() -> Receipt {
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
        status: WorkloadStatus::Exited(3),
        end: ScopeEnd::Completed,
        spawn_errno: 0,
        reaped: 4,
        workload_exited_at_ns: 5,
        written_at_ns: 6,
        usage: Some(refine_protocol::TreeUsage {
            user_us: 7,
            system_us: 8,
            max_rss_kib: 9,
        }),
    }
}

fn launch_bytes() -> Vec<u8> {
    let argv: [&[u8]; 3] = [b"/bin/sh", b"-c", b"echo hi"];
    let env: [&[u8]; 2] = [b"PATH=/usr/bin:/bin", b"REFINE_OWNER=0101"];
    let limits = [Rlimit {
        resource: 7,
        soft: 256,
        hard: 1024,
    }];
    let params = LaunchParams {
        flags: FLAG_PTY,
        pdeath_signal: Some(15),
        start_timeout_ms: 5000,
        stdio_fds: 3,
        registration: RegistrationId([1; 16]),
        runtime: RuntimeId([2; 16]),
        proof_path: b"/run/x/proofs/0101",
        cwd: b"/tmp",
        argv: &argv,
        env: &env,
        rlimits: &limits,
        credentials: None,
        signal_state: None,
        cgroup: None,
        capture: None,
        ready_fd: None,
    };
    // Sized exactly: launch_len is what encode_launch writes, and one byte less does not fit.
    let mut buf = vec![0u8; launch_len(&params)];
    assert!(encode_launch(&params, &mut buf[..launch_len(&params) - 1]).is_err());
    let n = encode_launch(&params, &mut buf).unwrap();
    assert_eq!(n, buf.len());
    buf
}

fn small_frames() -> Vec<Frame<'static>> {
    vec![
        Frame::Hello(hello()),
        Frame::Hello(Hello {
            provenance: Some(refine_protocol::provenance::Provenance::from_build(
                "0.1.0",
                "0123456789abcdef0123456789abcdef01234567",
                "true",
                "source",
            )),
            ..hello()
        }),
        Frame::Start,
        Frame::Abort,
        Frame::Started,
        Frame::SpawnFailed {
            errno: 2,
            step: refine_protocol::frame::SpawnStep::Cwd,
        },
        Frame::WorkloadExited {
            status: WorkloadStatus::Signaled(9),
            at_ns: 12345,
        },
        Frame::ScopeExited(receipt()),
        Frame::Signal { signo: 15 },
        Frame::GuardianFailed { code: 3, errno: 13 },
        Frame::Disown,
    ]
}

fn encode(frame: &Frame<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; 512];
    let n = frame.encode_into(&mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn launch_round_trip() {
    let bytes = launch_bytes();
    let Frame::Launch(spec) = Frame::decode(&bytes).unwrap() else {
        panic!("not a launch frame")
    };
    assert_eq!(spec.flags, FLAG_PTY);
    assert_eq!(spec.pdeath_signal, Some(15));
    assert_eq!(spec.start_timeout_ms, 5000);
    assert_eq!(spec.stdio_fds, 3);
    assert_eq!(spec.proof_path.to_bytes(), b"/run/x/proofs/0101");
    assert_eq!(spec.cwd.unwrap().to_bytes(), b"/tmp");
    let argv: Vec<&[u8]> = spec.argv.iter().map(|c| c.to_bytes()).collect();
    assert_eq!(argv, [&b"/bin/sh"[..], b"-c", b"echo hi"]);
    assert_eq!(spec.env.len(), 2);
    assert_eq!(
        spec.rlimits.iter().collect::<Vec<_>>(),
        [Rlimit {
            resource: 7,
            soft: 256,
            hard: 1024
        }]
    );
}

#[test]
fn every_small_frame_round_trips() {
    for frame in small_frames() {
        let bytes = encode(&frame);
        let back = Frame::decode(&bytes).unwrap();
        assert_eq!(format!("{back:?}"), format!("{frame:?}"));
    }
}

#[test]
fn frame_error_classes() {
    let good = encode(&Frame::Signal { signo: 15 });
    assert!(matches!(
        Frame::decode(&good[..10]),
        Err(DecodeError::Truncated { .. })
    ));
    assert!(matches!(
        Frame::decode(&good[..good.len() - 1]),
        Err(DecodeError::Truncated { .. })
    ));
    let mut bad = good.clone();
    bad[0] = b'x';
    assert_eq!(Frame::decode(&bad).unwrap_err(), DecodeError::BadMagic);
    let mut bad = good.clone();
    bad[4] = 9;
    assert!(matches!(
        Frame::decode(&bad),
        Err(DecodeError::UnsupportedVersion { got: 9, max: 2 })
    ));
    let mut bad = good.clone();
    bad[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        Frame::decode(&bad),
        Err(DecodeError::Oversized { .. })
    ));
    let mut bad = good.clone();
    bad[16] ^= 0x40;
    assert!(matches!(
        Frame::decode(&bad),
        Err(DecodeError::BadChecksum { .. })
    ));
    let mut bad = good.clone();
    bad.push(0);
    assert!(matches!(
        Frame::decode(&bad),
        Err(DecodeError::TrailingBytes { extra: 1 })
    ));
    let huge = vec![0u8; MAX_FRAME + 1];
    assert!(matches!(
        Frame::decode(&huge),
        Err(DecodeError::Oversized { .. })
    ));
}

#[test]
fn only_an_empty_file_or_the_exact_zero_reservation_is_unwritten() {
    use refine_protocol::is_unwritten;
    use refine_protocol::receipt::{RECEIPT_LEN, RESERVED};
    assert!(is_unwritten(&[]));
    assert!(is_unwritten(&RESERVED));
    // The reservation never decodes as a receipt.
    assert_eq!(
        Receipt::decode(&RESERVED).unwrap_err(),
        DecodeError::BadMagic
    );
    let good = receipt().encode();
    assert!(!is_unwritten(&good));
    // A torn receipt (part written, part still zero) is damage, not "unwritten".
    let mut torn = RESERVED;
    torn[..64].copy_from_slice(&good[..64]);
    assert!(!is_unwritten(&torn));
    assert!(Receipt::decode(&torn).is_err());
    for len in [1, RECEIPT_LEN - 1, RECEIPT_LEN + 1] {
        assert!(!is_unwritten(&vec![0u8; len]), "{len} zero bytes");
    }
    let mut one_bit = RESERVED;
    one_bit[RECEIPT_LEN - 1] = 1;
    assert!(!is_unwritten(&one_bit));
}

#[test]
fn launch_rejects_strings_without_nul_and_bad_fields() {
    let argv: [&[u8]; 1] = [b"a\0b"];
    let mut buf = vec![0u8; 1024];
    let err = encode_launch(
        &LaunchParams {
            flags: 0,
            pdeath_signal: Some(9),
            start_timeout_ms: 1000,
            stdio_fds: 0,
            registration: RegistrationId::default(),
            runtime: RuntimeId::default(),
            proof_path: b"/p",
            cwd: b"",
            argv: &argv,
            env: &[],
            rlimits: &[],
            credentials: None,
            signal_state: None,
            cgroup: None,
            capture: None,
            ready_fd: None,
        },
        &mut buf,
    );
    assert!(err.is_err());
    // An empty argv is refused by the encoder as the decoder refuses it (P4).
    let no_args: [&[u8]; 0] = [];
    let err = encode_launch(
        &LaunchParams {
            flags: 0,
            pdeath_signal: Some(9),
            start_timeout_ms: 1000,
            stdio_fds: 0,
            registration: RegistrationId::default(),
            runtime: RuntimeId::default(),
            proof_path: b"/p",
            cwd: b"",
            argv: &no_args,
            env: &[],
            rlimits: &[],
            credentials: None,
            signal_state: None,
            cgroup: None,
            capture: None,
            ready_fd: None,
        },
        &mut buf,
    );
    assert_eq!(err, Err(EncodeError::InvalidField { field: "argv" }));
}

fn registration() -> Registration {
    Registration {
        id: RegistrationId([1; 16]),
        runtime: RuntimeId([2; 16]),
        kind: Kind::Quality,
        label: "cargo test".into(),
        owner: "ci".into(),
        purpose: BTreeMap::from([("goal".to_string(), "green".to_string())]),
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
            log_cap_bytes: None,
            rlimits: vec![],
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
        streams: vec![StreamReceipt {
            name: "stdout".into(),
            end: StreamEnd::Incomplete(refine_protocol::record::StreamIncomplete::MemoryLimit {
                kept: 16 << 20,
            }),
            artifact_path: "/run/1/logs/x.stdout".into(),
            artifact_bytes: 1 << 30,
            prefix: b"hello".to_vec(),
        }],
        written_at_unix_ms: 1,
    }
}

fn stop_request() -> StopRequest {
    StopRequest {
        id: RegistrationId([3; 16]),
        runtime: RuntimeId([4; 16]),
        cause: StopCause::Operator,
        requested_at_unix_ns: 1_764_000_000_123_456_789,
        requester_pid: 4242,
    }
}

fn launch_result() -> LaunchResultRecord {
    LaunchResultRecord {
        id: RegistrationId([5; 16]),
        runtime: RuntimeId([6; 16]),
        outcome: refine_protocol::docs::Outcome::Stopped,
        workload_status: WorkloadStatus::Signaled(9),
        written_at_unix_ms: 1_764_000_000_123,
        stop_failure: None,
        usage: None,
        residue_stop: None,
        cgroup_usage: None,
        limit_usage: None,
    }
}

fn stall_record() -> refine_protocol::record::StallRecord {
    use refine_protocol::record::{StallIncident, StallRecord, StallSignal};
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

#[test]
fn stall_records_round_trip_and_reject_damage() {
    use refine_protocol::record::StallRecord;
    let r = stall_record();
    let bytes = r.encode().unwrap();
    assert_eq!(StallRecord::decode(&bytes).unwrap(), r);
    assert_eq!(
        StallRecord::decode(&launch_result().encode().unwrap()).unwrap_err(),
        DecodeError::BadMagic
    );
    let mut v = bytes.clone();
    let last = v.len() - 1;
    v[last] ^= 1;
    assert!(matches!(
        StallRecord::decode(&v),
        Err(DecodeError::BadChecksum { .. })
    ));
    assert!(matches!(
        StallRecord::decode(&bytes[..bytes.len() - 1]),
        Err(DecodeError::Truncated { .. })
    ));
}

#[test]
fn records_round_trip_and_reject_damage() {
    let r = registration();
    let bytes = r.encode().unwrap();
    assert_eq!(Registration::decode(&bytes).unwrap(), r);
    let c = capture_receipt();
    assert_eq!(CaptureReceipt::decode(&c.encode().unwrap()).unwrap(), c);
    // A capture receipt is not a registration.
    assert_eq!(
        Registration::decode(&c.encode().unwrap()).unwrap_err(),
        DecodeError::BadMagic
    );
    let s = stop_request();
    assert_eq!(StopRequest::decode(&s.encode().unwrap()).unwrap(), s);
    assert_eq!(
        StopRequest::decode(&c.encode().unwrap()).unwrap_err(),
        DecodeError::BadMagic
    );
    let mut v = s.encode().unwrap();
    let last = v.len() - 1;
    v[last] ^= 1;
    assert!(matches!(
        StopRequest::decode(&v),
        Err(DecodeError::BadChecksum { .. })
    ));
    let l = launch_result();
    assert_eq!(LaunchResultRecord::decode(&l.encode().unwrap()).unwrap(), l);
    assert_eq!(
        LaunchResultRecord::decode(&s.encode().unwrap()).unwrap_err(),
        DecodeError::BadMagic
    );
    assert!(matches!(
        Registration::decode(&bytes[..bytes.len() - 1]),
        Err(DecodeError::Truncated { .. })
    ));
    let mut v = bytes.clone();
    v[8] = 12;
    assert!(matches!(
        Registration::decode(&v),
        Err(DecodeError::UnsupportedVersion { .. })
    ));
    let mut v = bytes.clone();
    let last = v.len() - 1;
    v[last] ^= 1;
    assert!(matches!(
        Registration::decode(&v),
        Err(DecodeError::BadChecksum { .. })
    ));
    let mut v = bytes.clone();
    v.push(0);
    assert!(matches!(
        Registration::decode(&v),
        Err(DecodeError::TrailingBytes { .. })
    ));
    let mut v = bytes.clone();
    v[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        Registration::decode(&v),
        Err(DecodeError::Oversized { .. })
    ));
}

/// P4: every record the encoder accepts decodes, also at the limits; one past the limit is
/// refused by the encoder, naming the size and the limit, before anything could be written.
#[test]
fn records_at_their_limits_round_trip_or_are_refused_by_the_encoder() {
    use refine_protocol::record::MAX_RECORD;
    // Many tiny strings: bincode charges 8 bytes per length against its limit, more than the
    // one byte each takes; these once encoded but did not decode.
    let mut r = registration();
    r.argv = vec!["a".to_owned(); 116_420];
    let bytes = r.encode().unwrap();
    assert_eq!(Registration::decode(&bytes).unwrap(), r);
    let mut r = registration();
    r.purpose = (0..52_608)
        .map(|i| (format!("{i:x}"), String::new()))
        .collect();
    let bytes = r.encode().unwrap();
    assert_eq!(Registration::decode(&bytes).unwrap(), r);
    // Filled to the byte: the largest label that fits still round-trips...
    let mut r = registration();
    r.label = String::new();
    let base = r.encode().unwrap().len();
    let room = MAX_RECORD - base;
    // The label's length prefix grows from 1 to 5 bytes (varint) once it is long.
    r.label = "x".repeat(room - 4);
    let bytes = r.encode().unwrap();
    assert_eq!(bytes.len(), MAX_RECORD);
    assert_eq!(Registration::decode(&bytes).unwrap(), r);
    // ...and one byte more is refused by the encoder, with both sizes in the message.
    r.label.push('x');
    let err = r.encode().unwrap_err();
    assert_eq!(
        err,
        EncodeError::Oversized {
            len: MAX_RECORD + 1,
            max: MAX_RECORD
        }
    );
    assert!(err.to_string().contains(&MAX_RECORD.to_string()));
    // Ten 120 KiB metadata values (the reproduced 1.2 MiB launch): refused.
    let mut r = registration();
    r.purpose = (0..10)
        .map(|i| (format!("k{i}"), "v".repeat(120 * 1024)))
        .collect();
    assert!(matches!(r.encode(), Err(EncodeError::Oversized { .. })));
}

/// P4: a status no kernel reports is neither written nor read; arithmetic on a decoded status
/// cannot overflow.
#[test]
fn statuses_outside_the_kernels_domain_are_refused() {
    assert_eq!(WorkloadStatus::Signaled(i32::MAX).shell_code(), None);
    assert_eq!(WorkloadStatus::Signaled(0).shell_code(), None);
    assert_eq!(WorkloadStatus::Signaled(64).shell_code(), Some(192));
    assert_eq!(WorkloadStatus::Exited(-1).shell_code(), None);
    for bad in [
        WorkloadStatus::Signaled(0),
        WorkloadStatus::Signaled(65),
        WorkloadStatus::Signaled(i32::MAX),
        WorkloadStatus::Exited(256),
        WorkloadStatus::Exited(-1),
    ] {
        let r = Receipt {
            status: bad,
            ..receipt()
        };
        let mut buf = [0u8; refine_protocol::receipt::RECEIPT_LEN];
        assert!(
            matches!(
                r.encode_into(&mut buf),
                Err(EncodeError::InvalidField { .. })
            ),
            "{bad:?} encoded"
        );
        // A forged receipt that carries it (checksum recomputed) does not decode.
        let mut v = Receipt {
            status: WorkloadStatus::Exited(0),
            ..receipt()
        }
        .encode();
        let (tag, value) = match bad {
            WorkloadStatus::Exited(c) => (0u8, c),
            WorkloadStatus::Signaled(s) => (1u8, s),
            _ => unreachable!(),
        };
        v[104] = tag;
        v[108..112].copy_from_slice(&value.to_le_bytes());
        reseal_receipt(&mut v);
        assert!(
            matches!(Receipt::decode(&v), Err(DecodeError::InvalidField { .. })),
            "{bad:?} decoded"
        );
    }
}

/// P4: the receipt's flags and reserved fields are checked, not skipped.
#[test]
fn receipt_flags_and_reserved_bytes_must_be_zero() {
    for at in [12usize, 13, 14, 15, 106, 107] {
        let mut v = receipt().encode();
        v[at] = 1;
        reseal_receipt(&mut v);
        assert!(
            matches!(Receipt::decode(&v), Err(DecodeError::InvalidField { .. })),
            "byte {at} ignored"
        );
    }
}

/// P4: a launch frame the guardian would refuse is refused by the encoder.
#[test]
fn launch_encoder_enforces_the_decoders_domain() {
    use refine_protocol::frame::MAX_START_TIMEOUT_MS;
    fn params(
        flags: u32,
        pdeath_signal: Option<u32>,
        start_timeout_ms: u32,
    ) -> LaunchParams<'static> {
        const ARGV: [&[u8]; 1] = [b"/bin/true"];
        LaunchParams {
            flags,
            pdeath_signal,
            start_timeout_ms,
            stdio_fds: 0,
            registration: RegistrationId([1; 16]),
            runtime: RuntimeId([2; 16]),
            proof_path: b"/run/x/proofs/0101",
            cwd: b"/",
            argv: &ARGV,
            env: &[],
            rlimits: &[],
            credentials: None,
            signal_state: None,
            cgroup: None,
            capture: None,
            ready_fd: None,
        }
    }
    let mut out = vec![0u8; MAX_FRAME];
    assert!(encode_launch(&params(0, Some(9), MAX_START_TIMEOUT_MS), &mut out).is_ok());
    assert!(encode_launch(&params(0, None, 1000), &mut out).is_ok());
    for (p, what) in [
        (
            params(0, Some(9), MAX_START_TIMEOUT_MS + 1),
            "start timeout",
        ),
        (params(0, Some(9), 0), "zero start timeout"),
        (params(0, Some(65), 1000), "signal 65"),
        (
            params(0, Some(0), 1000),
            "signal 0 (none is None, not a magic 0)",
        ),
        (params(1 << 31, Some(9), 1000), "unknown flag"),
        (
            params(refine_protocol::frame::FLAG_NO_PDEATH_SIGNAL, Some(9), 1000),
            "the wire-only flag from a caller",
        ),
    ] {
        assert!(
            matches!(
                encode_launch(&p, &mut out),
                Err(EncodeError::InvalidField { .. })
            ),
            "{what} encoded"
        );
    }
}

/// "No parent-death signal" is its own wire encoding (a flag bit, the field 0), decoded as `None`;
/// the flag with a signal, or a 0 without the flag, are refused.
#[test]
fn launch_without_a_parent_death_signal() {
    use refine_protocol::frame::FLAG_NO_PDEATH_SIGNAL;
    const ARGV: [&[u8]; 1] = [b"/bin/true"];
    let p = |pdeath_signal| LaunchParams {
        flags: FLAG_NEW_SESSION,
        pdeath_signal,
        start_timeout_ms: 1000,
        stdio_fds: 0,
        registration: RegistrationId([1; 16]),
        runtime: RuntimeId([2; 16]),
        proof_path: b"/p",
        cwd: b"",
        argv: &ARGV,
        env: &[],
        rlimits: &[],
        credentials: None,
        signal_state: None,
        cgroup: None,
        capture: None,
        ready_fd: None,
    };
    let mut out = vec![0u8; MAX_FRAME];
    let n = encode_launch(&p(None), &mut out).unwrap();
    let Frame::Launch(spec) = Frame::decode(&out[..n]).unwrap() else {
        panic!("not a launch frame")
    };
    assert_eq!(spec.pdeath_signal, None);
    assert_eq!(
        spec.flags, FLAG_NEW_SESSION,
        "the wire-only bit is not a launch flag"
    );
    // Flags at payload offset 0, the signal at 4 (header: 16 bytes); reseal the CRC.
    let reseal = |v: &mut Vec<u8>| {
        let len = v.len();
        let mut crc_in = v[..12].to_vec();
        crc_in.extend_from_slice(&v[16..len]);
        let crc = refine_protocol::codec::crc32(&crc_in);
        v[12..16].copy_from_slice(&crc.to_le_bytes());
    };
    let mut both = out[..n].to_vec();
    both[20..24].copy_from_slice(&9u32.to_le_bytes());
    reseal(&mut both);
    assert!(Frame::decode(&both).is_err(), "flag and a signal decoded");
    let m = encode_launch(&p(Some(9)), &mut out).unwrap();
    let mut zero = out[..m].to_vec();
    zero[20..24].copy_from_slice(&0u32.to_le_bytes());
    reseal(&mut zero);
    assert!(Frame::decode(&zero).is_err(), "a magic 0 decoded");
    let mut fixed = zero.clone();
    fixed[16..20].copy_from_slice(&(FLAG_NEW_SESSION | FLAG_NO_PDEATH_SIGNAL).to_le_bytes());
    reseal(&mut fixed);
    assert!(Frame::decode(&fixed).is_ok());
}

fn reseal_receipt(v: &mut [u8]) {
    let at = v.len() - 8;
    let crc = refine_protocol::codec::crc32(&v[..at]);
    v[at..at + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Registration version 2 keeps the command's bytes; a version 1 record (no `argv_bytes`)
/// still decodes, with the field absent.
#[test]
fn registration_v2_keeps_argv_bytes_and_v1_still_decodes() {
    use refine_protocol::codec::{envelope_seal, envelope_start, Writer};
    use refine_protocol::record::{REGISTRATION_MAGIC, REGISTRATION_VERSION};
    let mut r = registration();
    r.argv = vec!["a\u{fffd}b".into()];
    r.argv_bytes = Some(vec![b"a\xffb".to_vec()]);
    let bytes = r.encode().unwrap();
    assert_eq!(
        u16::from_le_bytes([bytes[8], bytes[9]]),
        REGISTRATION_VERSION
    );
    assert_eq!(Registration::decode(&bytes).unwrap(), r);

    // A version 1 record, laid out as the version-1 writer wrote it (no `kill_after_ms` in the
    // limits, no `argv_bytes`): decodes with both absent.
    #[derive(serde::Serialize)]
    struct LimitsV1 {
        completion_timeout_ms: Option<u64>,
        idle_timeout_ms: Option<u64>,
        log_cap_bytes: Option<u64>,
        rlimits: Vec<Rlimit>,
    }
    #[derive(serde::Serialize)]
    struct RegistrationV1<'a> {
        id: RegistrationId,
        runtime: RuntimeId,
        kind: Kind,
        label: &'a str,
        owner: &'a str,
        purpose: &'a BTreeMap<String, String>,
        argv: &'a [String],
        cwd: &'a str,
        stdout_path: &'a str,
        stderr_path: &'a str,
        stdin_path: &'a Option<String>,
        pty: bool,
        limits: LimitsV1,
        scope_policy: ScopePolicy,
        started_at_unix_ms: u64,
        hello: Hello,
        proof_path: &'a str,
    }
    let mut plain = registration();
    plain.limits.completion_timeout_ms = Some(5000);
    plain.limits.kill_after_ms = None;
    let old = RegistrationV1 {
        id: plain.id,
        runtime: plain.runtime,
        kind: plain.kind,
        label: &plain.label,
        owner: &plain.owner,
        purpose: &plain.purpose,
        argv: &plain.argv,
        cwd: &plain.cwd,
        stdout_path: &plain.stdout_path,
        stderr_path: &plain.stderr_path,
        stdin_path: &plain.stdin_path,
        pty: plain.pty,
        limits: LimitsV1 {
            completion_timeout_ms: plain.limits.completion_timeout_ms,
            idle_timeout_ms: plain.limits.idle_timeout_ms,
            log_cap_bytes: plain.limits.log_cap_bytes,
            rlimits: plain.limits.rlimits.clone(),
        },
        scope_policy: plain.scope_policy,
        started_at_unix_ms: plain.started_at_unix_ms,
        hello: plain.hello,
        proof_path: &plain.proof_path,
    };
    let payload = bincode::serde::encode_to_vec(&old, bincode::config::standard()).unwrap();
    let header = 20;
    let v2 = plain.encode().unwrap();
    let mut v1 = vec![0u8; header + payload.len()];
    let mut w = Writer::new(&mut v1);
    envelope_start(&mut w, &REGISTRATION_MAGIC, 1, 0).unwrap();
    w.bytes(&payload).unwrap();
    envelope_seal(&mut w, REGISTRATION_MAGIC.len()).unwrap();
    assert_eq!(Registration::decode(&v1).unwrap(), plain);

    // A version 10 record (no `health`: version 11's payload without its one zero byte), a
    // version 9 record (no `sandbox` either), a
    // version 8 record (no `protection` either), a version 7 record (no `readiness` either), a
    // version 6 record (no `resources` either), a version 5 record (no `on_service_loss`
    // either), a version 4 record (no provenance either: two zero bytes less), a version 3
    // record (no `allow_setns` either) and a version 2 record (no `cgroup` either) decode with
    // them absent.
    assert_eq!(
        &v2[v2.len() - 10..],
        &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        "an absent cgroup, allow_setns, two provenances, on_service_loss, resources, \
         readiness, protection, sandbox and health are one zero byte each at the end"
    );
    for (version, missing) in [
        (10u16, 1usize),
        (9, 2),
        (8, 3),
        (7, 4),
        (6, 5),
        (5, 6),
        (4, 8),
        (3, 9),
        (2, 10),
    ] {
        let payload = &v2[header..v2.len() - missing];
        let mut old = vec![0u8; header + payload.len()];
        let mut w = Writer::new(&mut old);
        envelope_start(&mut w, &REGISTRATION_MAGIC, version, 0).unwrap();
        w.bytes(payload).unwrap();
        envelope_seal(&mut w, REGISTRATION_MAGIC.len()).unwrap();
        assert_eq!(
            Registration::decode(&old).unwrap(),
            plain,
            "version {version}"
        );
    }

    // Version 5 keeps both builds (V1).
    let mut built = plain.clone();
    let p = refine_protocol::provenance::Provenance::from_build(
        "0.1.0",
        "0123456789abcdef0123456789abcdef01234567",
        "false",
        "release",
    );
    built.supervisor_provenance = Some(p.into());
    built.guardian_provenance = Some(
        refine_protocol::provenance::Provenance::from_build("0.1.0", "", "unknown", "source")
            .into(),
    );
    assert_eq!(
        Registration::decode(&built.encode().unwrap()).unwrap(),
        built
    );

    // Version 3 keeps the scope's cgroup (F4).
    let mut with_cgroup = plain.clone();
    with_cgroup.cgroup = Some(refine_protocol::ScopeCgroup {
        path: "/sys/fs/cgroup/refine/x".into(),
        refused_errno: Some(38),
    });
    assert_eq!(
        Registration::decode(&with_cgroup.encode().unwrap()).unwrap(),
        with_cgroup
    );

    // Version 4 keeps the setns opt-out (X7).
    let mut opted_out = plain.clone();
    opted_out.allow_setns = Some(true);
    assert_eq!(
        Registration::decode(&opted_out.encode().unwrap()).unwrap(),
        opted_out
    );

    // Version 9 keeps what the Landlock domain held (X11).
    let mut protected = plain.clone();
    protected.protection = Some(refine_protocol::record::Protection {
        asked: refine_protocol::record::ProtectAsk::All,
        abi: 7,
        fs: refine_protocol::record::ProtectPart::SharedTmp,
        signals: refine_protocol::record::ProtectPart::Held,
        abstract_sockets: refine_protocol::record::ProtectPart::ReadyNotify,
        no_new_privs: true,
        rules: 27,
    });
    assert_eq!(
        Registration::decode(&protected.encode().unwrap()).unwrap(),
        protected
    );

    // Version 10 keeps the sandbox (X12).
    let mut sandboxed = plain.clone();
    sandboxed.sandbox = Some(refine_protocol::record::Sandbox {
        mode: refine_protocol::record::SandboxMode::WorkspaceWrite,
        network: refine_protocol::record::NetworkAsk::None,
        writable: vec!["/work/ws".into(), "/work/cache".into()],
        tmpdir: Some("/tmp/refine-sandbox-1".into()),
    });
    assert_eq!(
        Registration::decode(&sandboxed.encode().unwrap()).unwrap(),
        sandboxed
    );

    // Version 6 keeps what recovery does on the service's loss (L6).
    let mut kept = plain.clone();
    kept.on_service_loss = Some(refine_protocol::record::ServiceLoss::Keep);
    assert_eq!(Registration::decode(&kept.encode().unwrap()).unwrap(), kept);

    // Version 7 keeps the resource limits and where they were applied (H8).
    let mut limited = plain.clone();
    limited.resources = Some(refine_protocol::record::ScopeResources {
        memory_max_bytes: Some(32 << 20),
        cpu_millis: Some(500),
        pids_max: Some(20),
        placements: vec![refine_protocol::record::LimitPlacement {
            controller: refine_protocol::record::LimitController::Memory,
            dir: "/sys/fs/cgroup/memory/refine/r/i".into(),
            unified: false,
        }],
    });
    assert_eq!(
        Registration::decode(&limited.encode().unwrap()).unwrap(),
        limited
    );

    // Version 8 keeps the readiness asked for (H6).
    let mut ready = plain.clone();
    ready.readiness = Some(refine_protocol::record::ReadinessSpec {
        mode: refine_protocol::record::ReadyMode::Cmd,
        fd: None,
        cmd: Some("curl -fs localhost:8080".into()),
        timeout_ms: Some(90_000),
    });
    assert_eq!(
        Registration::decode(&ready.encode().unwrap()).unwrap(),
        ready
    );

    // H7: a health check round-trips.
    let mut checked = plain.clone();
    checked.health = Some(refine_protocol::record::HealthSpec {
        cmd: "curl -fs localhost:8080/health".into(),
        interval_ms: 30_000,
        timeout_ms: 30_000,
        retries: 3,
        start_period_ms: 0,
    });
    assert_eq!(
        Registration::decode(&checked.encode().unwrap()).unwrap(),
        checked
    );

    // Negative control: a version past 11 is refused, not guessed.
    let mut v12 = v2.clone();
    v12[8] = 12;
    assert!(matches!(
        Registration::decode(&v12),
        Err(DecodeError::UnsupportedVersion { got: 12, .. })
    ));
}

/// X1: credentials travel with flag bit 3, and the encoder refuses exactly what the decoder
/// refuses (more than MAX_GROUPS groups, an id of u32::MAX); a flag without its fields is a
/// truncated frame.
#[test]
fn launch_credentials_round_trip_and_limits() {
    use refine_protocol::frame::{Credentials, FLAG_CREDENTIALS, MAX_GROUPS};
    let argv: [&[u8]; 1] = [b"/bin/true"];
    let params = |credentials| LaunchParams {
        flags: 0,
        pdeath_signal: None,
        start_timeout_ms: 1000,
        stdio_fds: 0,
        registration: RegistrationId::default(),
        runtime: RuntimeId::default(),
        proof_path: b"/p",
        cwd: b"",
        argv: &argv,
        env: &[],
        rlimits: &[],
        credentials,
        signal_state: None,
        cgroup: None,
        capture: None,
        ready_fd: None,
    };
    let encode = |p: &LaunchParams<'_>| {
        let mut buf = vec![0u8; launch_len(p)];
        encode_launch(p, &mut buf).map(|n| {
            assert_eq!(n, buf.len());
            buf
        })
    };
    let groups: Vec<u32> = (0..MAX_GROUPS as u32).map(|g| 1000 + g).collect();
    let bytes = encode(&params(Some(Credentials {
        uid: 65534,
        gid: 65533,
        groups: &groups,
    })))
    .unwrap();
    let Frame::Launch(spec) = Frame::decode(&bytes).unwrap() else {
        panic!("not a launch frame")
    };
    assert_eq!(spec.flags, FLAG_CREDENTIALS);
    let c = spec.credentials.expect("credentials");
    assert_eq!((c.uid, c.gid), (65534, 65533));
    assert_eq!(c.groups.iter().collect::<Vec<_>>(), groups);

    // Without credentials the flag is clear, even if the caller set it.
    let mut p = params(None);
    p.flags = FLAG_CREDENTIALS;
    let plain = encode(&p).unwrap();
    let Frame::Launch(spec) = Frame::decode(&plain).unwrap() else {
        panic!("not a launch frame")
    };
    assert_eq!((spec.flags, spec.credentials.is_none()), (0, true));

    // Refused by the encoder, and by the decoder when forged.
    let too_many: Vec<u32> = (0..=MAX_GROUPS as u32).collect();
    assert!(matches!(
        encode(&params(Some(Credentials {
            uid: 1,
            gid: 1,
            groups: &too_many,
        }))),
        Err(EncodeError::Oversized { .. })
    ));
    for (uid, gid, groups) in [
        (u32::MAX, 1, &[][..]),
        (1, u32::MAX, &[]),
        (1, 1, &[u32::MAX]),
    ] {
        assert!(matches!(
            encode(&params(Some(Credentials { uid, gid, groups }))),
            Err(EncodeError::InvalidField {
                field: "credentials"
            })
        ));
    }
    let forge = |tail: &[u8]| {
        // The plain launch with the flag set and `tail` as its credentials; CRC recomputed.
        let mut b = encode(&params(None)).unwrap();
        let flags_at = refine_protocol::frame::HEADER_LEN;
        let flags = u32::from_le_bytes(b[flags_at..flags_at + 4].try_into().unwrap());
        b[flags_at..flags_at + 4].copy_from_slice(&(flags | FLAG_CREDENTIALS).to_le_bytes());
        b.extend_from_slice(tail);
        let len = (b.len() - refine_protocol::frame::HEADER_LEN) as u32;
        b[8..12].copy_from_slice(&len.to_le_bytes());
        let mut crc_input = b[..12].to_vec();
        crc_input.extend_from_slice(&b[16..]);
        b[12..16].copy_from_slice(&refine_protocol::codec::crc32(&crc_input).to_le_bytes());
        Frame::decode(&b).map(|_| ()).unwrap_err()
    };
    let ids = |uid: u32, gid: u32, n: u32| {
        [uid.to_le_bytes(), gid.to_le_bytes(), n.to_le_bytes()].concat()
    };
    assert!(matches!(forge(&[]), DecodeError::Truncated { .. }));
    assert!(matches!(
        forge(&ids(1, 1, MAX_GROUPS as u32 + 1)),
        DecodeError::Oversized { .. }
    ));
    assert_eq!(
        forge(&ids(u32::MAX, 1, 0)),
        DecodeError::InvalidField {
            field: "credentials"
        }
    );
}

/// W10: the launcher's inherited signal state travels with flag bit 4 and comes back as it went;
/// without it the flag is clear; a set that names SIGKILL or SIGSTOP is refused by the encoder
/// (and would be by the decoder).
#[test]
fn launch_signal_state_round_trips_and_refuses_unblockable_signals() {
    use refine_protocol::frame::{SignalState, FLAG_SIGNAL_STATE};
    const ARGV: [&[u8]; 1] = [b"/bin/true"];
    let p = |signal_state| LaunchParams {
        flags: 0,
        pdeath_signal: None,
        start_timeout_ms: 1000,
        stdio_fds: 0,
        registration: RegistrationId([1; 16]),
        runtime: RuntimeId([2; 16]),
        proof_path: b"/p",
        cwd: b"",
        argv: &ARGV,
        env: &[],
        rlimits: &[],
        credentials: None,
        signal_state,
        cgroup: None,
        capture: None,
        ready_fd: None,
    };
    let mut out = vec![0u8; MAX_FRAME];
    let st = SignalState {
        ignored: 1 << (libc_sig::HUP - 1),
        blocked: (1 << (libc_sig::USR2 - 1)) | (1 << 63),
    };
    let n = encode_launch(&p(Some(st)), &mut out).unwrap();
    assert_eq!(n, launch_len(&p(Some(st))));
    let Frame::Launch(spec) = Frame::decode(&out[..n]).unwrap() else {
        panic!("not a launch frame")
    };
    assert_eq!(spec.signal_state, Some(st));
    assert_eq!(spec.flags, FLAG_SIGNAL_STATE);
    let n = encode_launch(&p(None), &mut out).unwrap();
    let Frame::Launch(spec) = Frame::decode(&out[..n]).unwrap() else {
        panic!("not a launch frame")
    };
    assert_eq!((spec.signal_state, spec.flags), (None, 0));
    for bad in [
        SignalState {
            ignored: 1 << (libc_sig::KILL - 1),
            blocked: 0,
        },
        SignalState {
            ignored: 0,
            blocked: 1 << (libc_sig::STOP - 1),
        },
    ] {
        assert!(encode_launch(&p(Some(bad)), &mut out).is_err(), "{bad:?}");
    }
}

/// Signal numbers the signal-state test names (Linux).
mod libc_sig {
    pub const HUP: u32 = 1;
    pub const KILL: u32 = 9;
    pub const USR2: u32 = 12;
    pub const STOP: u32 = 19;
}

/// V1: a `Hello` with the guardian's provenance is a version 2 frame; one without is the
/// version 1 frame a guardian before provenance sends (read back as `None`); every other frame
/// stays version 1, and a version 2 frame of another kind is refused.
#[test]
fn only_a_hello_with_provenance_is_a_version_two_frame() {
    let version = |b: &[u8]| u16::from_le_bytes([b[4], b[5]]);
    let plain = encode(&Frame::Hello(hello()));
    assert_eq!(version(&plain), 1);
    let Frame::Hello(h) = Frame::decode(&plain).unwrap() else {
        panic!("not a hello")
    };
    assert_eq!(h.provenance, None);
    let p = refine_protocol::provenance::Provenance::from_build("0.1.0", "", "unknown", "source");
    let with = encode(&Frame::Hello(Hello {
        provenance: Some(p),
        ..hello()
    }));
    assert_eq!(version(&with), 2);
    assert_eq!(with.len(), plain.len() + refine_protocol::provenance::LEN);
    let Frame::Hello(h) = Frame::decode(&with).unwrap() else {
        panic!("not a hello")
    };
    assert_eq!(h.provenance, Some(p));
    for f in small_frames() {
        if !matches!(f, Frame::Hello(_)) {
            assert_eq!(version(&encode(&f)), 1, "{f:?}");
        }
    }
    // A Start frame claiming version 2 (checksum recomputed): refused, not guessed.
    let mut start = encode(&Frame::Start);
    start[4] = 2;
    let crc = refine_protocol::codec::crc32_update(
        refine_protocol::codec::crc32(&start[..12]),
        &start[16..],
    );
    start[12..16].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        Frame::decode(&start).unwrap_err(),
        DecodeError::UnsupportedVersion { got: 2, max: 1 }
    );
    // A malformed provenance in a Hello is a typed error.
    let mut bad = with.clone();
    bad[16 + 70] ^= 0xff;
    let crc =
        refine_protocol::codec::crc32_update(refine_protocol::codec::crc32(&bad[..12]), &bad[16..]);
    bad[12..16].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(Frame::decode(&bad).unwrap_err(), DecodeError::BadMagic);
}

/// Issue 41 item 4: a capture receipt carries typed stream ends (version 2); one the version 1
/// writer left on disk (its reasons as words) still reads, its words kept as they were.
#[test]
fn capture_receipt_v2_is_typed_and_a_v1_file_still_reads() {
    use refine_protocol::record::{StreamFailure, StreamIncomplete};
    let v1 = include_bytes!("fixtures/capture-receipt-v1.bin");
    let old = CaptureReceipt::decode(v1).expect("a version 1 capture receipt reads");
    assert_eq!(old.id, RegistrationId([0x11; 16]));
    assert_eq!(
        old.streams[0].end,
        StreamEnd::Incomplete(StreamIncomplete::Worded(
            "final drain of 200ms ended before end of file".into()
        ))
    );
    assert_eq!(
        old.streams[1].end,
        StreamEnd::CaptureFailure(StreamFailure::Worded(
            "reading the stream failed (errno 5)".into()
        ))
    );
    assert_eq!(old.streams[0].prefix, b"hello");
    let mut new = old.clone();
    new.streams[0].end = StreamEnd::Incomplete(StreamIncomplete::DrainEnded { drain_ms: 200 });
    new.streams[1].end = StreamEnd::CaptureFailure(StreamFailure::Read { errno: 5 });
    let bytes = new.encode().unwrap();
    assert_eq!(
        u16::from_le_bytes([bytes[8], bytes[9]]),
        2,
        "written as version 2"
    );
    assert_eq!(CaptureReceipt::decode(&bytes).unwrap(), new);
    assert_eq!(
        new.streams[0].end.to_string(),
        "incomplete: final drain of 200ms ended before end of file"
    );
}
