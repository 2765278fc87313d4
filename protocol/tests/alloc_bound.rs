//! P2: no decode allocates more than a small constant plus a small multiple of its input. A
//! counting global allocator (this test binary's own: it affects nothing else) measures every
//! byte each decode asks for, on the thread that decodes.
//!
//! The multiple is what the decoded value itself costs: a one-byte empty string in a record is a
//! 24-byte `String` in memory, a two-byte map entry about 50 bytes of B-tree node. A length
//! field is never trusted: declaring 16 MiB in a 59-byte record must not allocate 16 MiB.

use std::collections::BTreeMap;

mod support;
use support::{allocated_by, bound};

use refine_protocol::codec::{envelope_seal, envelope_start, Writer};
use refine_protocol::record::{
    CaptureReceipt, Kind, LaunchResultRecord, Limits, Registration, ScopePolicy, StallIncident,
    StallRecord, StallSignal, StopCause, StopRequest, StreamEnd, StreamReceipt, CAPTURE_MAGIC,
    REGISTRATION_MAGIC, RESULT_MAGIC, STALL_MAGIC, STOP_MAGIC,
};
use refine_protocol::{
    BootId, Hello, ProcessWitness, ProofIdentity, RegistrationId, Rlimit, RuntimeId, TreeUsage,
    WorkloadStatus,
};

/// Decodes `input` with `decode` and checks the allocation against [`bound`].
fn check<T, E>(what: &str, input: &[u8], decode: impl FnOnce(&[u8]) -> Result<T, E>) -> usize {
    let (result, bytes) = allocated_by(|| decode(input).is_ok());
    assert!(
        bytes <= bound(input.len()),
        "{what}: a {}-byte input (decoded: {result}) allocated {bytes} bytes, over the bound {}",
        input.len(),
        bound(input.len())
    );
    bytes
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The finding replayed: a 59-byte launch result whose outcome string declares 16 MiB.
#[test]
fn the_59_byte_launch_result_allocates_a_bounded_amount() {
    let input = hex(
        "52464e52534c54000200000027000000f9fc63b6ebf6534575fe34a085f25b81\
         f07a4f8cffffffffff0100000000000000fffffffc02fbff000000",
    );
    assert_eq!(input.len(), 59);
    assert!(LaunchResultRecord::decode(&input).is_err());
    check(
        "the issue's launch result",
        &input,
        LaunchResultRecord::decode,
    );
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

fn registration() -> Registration {
    Registration {
        id: RegistrationId([1; 16]),
        runtime: RuntimeId([2; 16]),
        kind: Kind::Agent,
        label: "l".into(),
        owner: "o".into(),
        purpose: BTreeMap::from([("g".to_string(), "v".to_string())]),
        argv: vec!["a".into(), "b".into()],
        cwd: "/".into(),
        stdout_path: "o".into(),
        stderr_path: "e".into(),
        stdin_path: Some("i".into()),
        pty: false,
        limits: Limits {
            completion_timeout_ms: Some(1),
            idle_timeout_ms: Some(2),
            log_cap_bytes: Some(3),
            rlimits: vec![Rlimit {
                resource: 7,
                soft: 1,
                hard: 2,
            }],
            kill_after_ms: Some(4),
        },
        scope_policy: ScopePolicy::Keep,
        started_at_unix_ms: 5,
        hello: hello(),
        proof_path: "p".into(),
        argv_bytes: Some(vec![b"a".to_vec(), b"b".to_vec()]),
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
                name: "o".into(),
                end: StreamEnd::Incomplete(refine_protocol::record::StreamIncomplete::Worded(
                    "m".into(),
                )),
                artifact_path: "p".into(),
                artifact_bytes: 1,
                prefix: b"h".to_vec(),
            },
            StreamReceipt {
                name: "e".into(),
                end: StreamEnd::CaptureFailure(refine_protocol::record::StreamFailure::Worded(
                    "f".into(),
                )),
                artifact_path: "q".into(),
                artifact_bytes: 2,
                prefix: vec![],
            },
        ],
        written_at_unix_ms: 1,
    }
}

fn launch_result() -> LaunchResultRecord {
    LaunchResultRecord {
        id: RegistrationId([5; 16]),
        runtime: RuntimeId([6; 16]),
        outcome: refine_protocol::docs::Outcome::Stopped,
        workload_status: WorkloadStatus::Signaled(9),
        written_at_unix_ms: 1,
        stop_failure: Some("f".into()),
        usage: Some(TreeUsage {
            user_us: 1,
            system_us: 2,
            max_rss_kib: 3,
        }),
        residue_stop: Some(refine_protocol::ResidueStopRecord {
            outcome: refine_protocol::docs::StopOutcome::Stopped,
            cause: None,
            killed: 1,
            at_unix_ms: 2,
        }),
        cgroup_usage: Some(refine_protocol::CgroupUsage {
            cpu_us: 3,
            user_us: 1,
            system_us: 2,
            memory_peak_bytes: Some(4),
            oom_kills: Some(0),
        }),
        limit_usage: Some(refine_protocol::record::LimitUsage {
            memory_peak_bytes: Some(5),
            oom_kills: Some(1),
            pids_peak: Some(6),
            pids_refused: Some(7),
            throttled_us: Some(8),
        }),
    }
}

fn stop_request() -> StopRequest {
    StopRequest {
        id: RegistrationId([3; 16]),
        runtime: RuntimeId([4; 16]),
        cause: StopCause::IdleDeadline,
        requested_at_unix_ns: 1,
        requester_pid: 2,
    }
}

fn stall_record() -> StallRecord {
    let incident = StallIncident {
        signal: StallSignal::Silent,
        since_unix_ms: 1,
        samples: 2,
        cpu_permille: 3,
        last_write_unix_ms: 4,
    };
    StallRecord {
        id: RegistrationId([7; 16]),
        runtime: RuntimeId([8; 16]),
        sampled_at_unix_ms: 1,
        stalled: Some(incident),
        silent: Some(incident),
    }
}

/// A record envelope around `payload` (checksum computed), as an encoder would write it.
fn seal(magic: [u8; 8], version: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 20 + payload.len()];
    let mut w = Writer::new(&mut out);
    envelope_start(&mut w, &magic, version, 0).unwrap();
    w.bytes(payload).unwrap();
    envelope_seal(&mut w, magic.len()).unwrap();
    out
}

/// Length-looking values in bincode's varint form: 16 MiB as u32, 2^40 and u64::MAX as u64.
const PLANTS: [&[u8]; 4] = [
    &[0xfc, 0x00, 0x00, 0x00, 0x01],
    &[0xfc, 0xff, 0xff, 0xff, 0xff],
    &[0xfd, 0, 0, 0, 0, 0, 1, 0, 0],
    &[0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
];

/// Every record decoder, fed its valid encoding with a huge length planted at every payload
/// offset (replacing or inserted, checksum recomputed, so the payload decoder is reached): each
/// string, byte vector, sequence and map length of the record is declared huge in turn.
#[test]
fn every_record_decoder_with_a_huge_length_anywhere() {
    type Decoder = fn(&[u8]) -> Result<(), refine_protocol::DecodeError>;
    /// What, its magic, its newest version, a valid encoding, its decoder.
    type Case = (&'static str, [u8; 8], u16, Vec<u8>, Decoder);
    let records: [Case; 5] = [
        (
            "registration",
            REGISTRATION_MAGIC,
            2,
            registration().encode().unwrap(),
            |b| Registration::decode(b).map(drop),
        ),
        (
            "capture receipt",
            CAPTURE_MAGIC,
            1,
            capture_receipt().encode().unwrap(),
            |b| CaptureReceipt::decode(b).map(drop),
        ),
        (
            "launch result",
            RESULT_MAGIC,
            2,
            launch_result().encode().unwrap(),
            |b| LaunchResultRecord::decode(b).map(drop),
        ),
        (
            "stop request",
            STOP_MAGIC,
            1,
            stop_request().encode().unwrap(),
            |b| StopRequest::decode(b).map(drop),
        ),
        (
            "stall record",
            STALL_MAGIC,
            1,
            stall_record().encode().unwrap(),
            |b| StallRecord::decode(b).map(drop),
        ),
    ];
    let mut worst = (0.0f64, String::new());
    for (what, magic, version, good, decode) in records {
        assert!(decode(&good).is_ok(), "{what} does not decode");
        let payload = &good[20..];
        // Version 1 too, where a record has one (a shorter field list).
        for version in 1..=version {
            for at in 0..payload.len() {
                for plant in PLANTS {
                    for replace in [true, false] {
                        let mut p = payload[..at].to_vec();
                        p.extend_from_slice(plant);
                        let rest = if replace {
                            payload.get(at + plant.len()..).unwrap_or(&[])
                        } else {
                            &payload[at..]
                        };
                        p.extend_from_slice(rest);
                        let input = seal(magic, version, &p);
                        let bytes = check(what, &input, decode);
                        let ratio = bytes as f64 / input.len() as f64;
                        if ratio > worst.0 {
                            worst = (ratio, format!("{what} v{version} at {at}"));
                        }
                    }
                }
            }
        }
    }
    println!(
        "worst planted length: {:.1} bytes allocated per input byte ({})",
        worst.0, worst.1
    );
}

/// The bound holds for what the encoders accept at their limits too (the multiple is the
/// decoded value's own cost): the record filled with empty strings, empty byte vectors or
/// empty map entries.
#[test]
fn the_densest_valid_records_stay_within_the_bound() {
    let mut many_args = registration();
    many_args.argv = vec![String::new(); 200_000];
    let mut many_bytes = registration();
    many_bytes.argv_bytes = Some(vec![Vec::new(); 200_000]);
    let mut many_keys = registration();
    many_keys.purpose = (0..60_000u32)
        .map(|i| (format!("{i:x}"), String::new()))
        .collect();
    let mut many_limits = registration();
    many_limits.limits.rlimits = vec![
        Rlimit {
            resource: 0,
            soft: 0,
            hard: 0,
        };
        100_000
    ];
    for (what, r) in [
        ("empty argv entries", many_args),
        ("empty byte vectors", many_bytes),
        ("empty metadata", many_keys),
        ("zero rlimits", many_limits),
    ] {
        let input = r.encode().unwrap();
        let (back, bytes) = allocated_by(|| Registration::decode(&input));
        assert_eq!(back.unwrap(), r, "{what}");
        assert!(
            bytes <= bound(input.len()),
            "{what}: {} bytes allocated {bytes}",
            input.len()
        );
        println!(
            "{what}: {} bytes, {:.1} allocated per input byte",
            input.len(),
            bytes as f64 / input.len() as f64
        );
    }
    let mut streams = capture_receipt();
    streams.streams = vec![
        StreamReceipt {
            name: String::new(),
            end: StreamEnd::Eof,
            artifact_path: String::new(),
            artifact_bytes: 0,
            prefix: vec![],
        };
        100_000
    ];
    let input = streams.encode().unwrap();
    let bytes = check("empty streams", &input, CaptureReceipt::decode);
    println!(
        "empty streams: {} bytes, {:.1} allocated per input byte",
        input.len(),
        bytes as f64 / input.len() as f64
    );
}
