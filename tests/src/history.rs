//! Fabricated history: registrations whose scopes have ended, written the way a launch leaves
//! them — the record through the library, the proof file created first and `stat`ed so the
//! record names its real (device, inode), the receipt written into it, stdout/stderr, the
//! launch result and the lock file — without launching anything. Every one of them assesses
//! `exited` by a verified receipt. For growth benchmarks (`gen-history`) and forgetting tests.

use std::collections::BTreeMap;
use std::fs::{self, File, FileTimes};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use refine_protocol::{
    BootId, Hello, Kind, LaunchResultRecord, Limits, ProcessWitness, ProofIdentity, Receipt,
    Registration, RegistrationId, ScopeEnd, ScopePolicy, TreeUsage, WorkloadStatus,
};
use refine_supervisor::store::registry::{Runtime, Stream};

/// How a fabricated registration is written.
#[derive(Debug, Clone, Copy)]
pub struct Fabricate {
    /// The boot its witnesses belong to (the current one, for a receipt-proven exit).
    pub boot: BootId,
    /// When it ended; its start is one second earlier, and every file is dated to its end.
    pub ended: SystemTime,
    /// Through [`Runtime::write_registration`] (open marker, fsyncs), as a launch does; else the
    /// record is written without a marker and without fsync, as history that was settled.
    pub durable: bool,
    /// Whether the receipt is written (without it the scope is `unverified`: guardian gone).
    pub receipt: bool,
    /// The guardian witness is this process (alive): without a receipt the scope is `live`.
    pub guardian_alive: bool,
}

impl Fabricate {
    /// An exited registration of the current boot, ended at `ended`, as settled history.
    pub fn exited(ended: SystemTime) -> Self {
        Fabricate {
            boot: refine_supervisor::kernel::procfs::boot_id().expect("boot id"),
            ended,
            durable: false,
            receipt: true,
            guardian_alive: false,
        }
    }

    /// Exited, but still in the open index (written as a launch writes, not yet settled).
    pub fn indexed(ended: SystemTime) -> Self {
        Fabricate {
            durable: true,
            ..Self::exited(ended)
        }
    }

    /// Live: indexed, no receipt, and its guardian witness is this (living) process.
    pub fn live(started: SystemTime) -> Self {
        Fabricate {
            receipt: false,
            guardian_alive: true,
            ..Self::indexed(started)
        }
    }

    /// Unverified: indexed, no receipt, guardian gone.
    pub fn unverified(ended: SystemTime) -> Self {
        Fabricate {
            receipt: false,
            ..Self::indexed(ended)
        }
    }
}

/// A guardian witness that names no live process (pid 1 never has start time 1): the guardian
/// is gone, as it is after a receipt.
const GONE: ProcessWitness = ProcessWitness {
    pid: 1,
    start_time: 1,
};

/// The record of a command registration `id` labelled `label` with `hello`: its output and proof
/// where the runtime keeps them, owner, argv and purpose empty, cwd `/`, started at 0, every
/// optional part absent. Callers change fields with struct update syntax.
pub fn record(rt: &Runtime, id: RegistrationId, label: &str, hello: Hello) -> Registration {
    let text = |p: PathBuf| p.display().to_string();
    Registration {
        id,
        runtime: rt.id(),
        kind: Kind::Command,
        label: label.into(),
        owner: String::new(),
        purpose: BTreeMap::new(),
        argv: Vec::new(),
        cwd: "/".into(),
        stdout_path: text(rt.log_path(id, Stream::Stdout)),
        stderr_path: text(rt.log_path(id, Stream::Stderr)),
        stdin_path: None,
        pty: false,
        limits: Limits::default(),
        scope_policy: ScopePolicy::Keep,
        started_at_unix_ms: 0,
        hello,
        proof_path: text(rt.proof_path(id)),
        argv_bytes: None,
        cgroup: None,
        allow_setns: None,
        supervisor_provenance: None,
        guardian_provenance: None,
        on_service_loss: None,
        resources: None,
        readiness: None,
        health: None,
        protection: None,
        sandbox: None,
    }
}

/// Writes one registration as `f` says; returns its record.
pub fn fabricate(rt: &Runtime, f: Fabricate) -> Registration {
    let id = rt.new_id().expect("id");
    let proof_path = rt.proof_path(id);
    let proof = File::create(&proof_path).expect("create proof");
    let meta = proof.metadata().expect("stat proof");
    let proof_id = ProofIdentity {
        dev: meta.dev(),
        ino: meta.ino(),
    };
    let ended_ns = f.ended.duration_since(UNIX_EPOCH).unwrap_or_default();
    let started_ms = (ended_ns.as_millis() as u64).saturating_sub(1000);
    let guardian = if f.guardian_alive {
        let me = rustix::process::getpid();
        refine_supervisor::kernel::procfs::stat(me)
            .expect("own stat")
            .witness()
    } else {
        GONE
    };
    let hello = Hello {
        guardian,
        boot_id: f.boot,
        workload: GONE,
        workload_pgid: 1,
        workload_sid: 1,
        proof: proof_id,
        cgroup: Default::default(),
        provenance: None,
    };
    let reg = Registration {
        argv: vec!["/bin/true".into()],
        started_at_unix_ms: started_ms,
        ..record(rt, id, "history", hello)
    };
    if f.durable {
        rt.write_registration(&reg).expect("write registration");
    } else {
        fs::write(rt.record_path(id), reg.encode().expect("encode")).expect("write record");
    }
    if f.receipt {
        let receipt = Receipt {
            registration: id,
            runtime: rt.id(),
            boot_id: f.boot,
            guardian: GONE,
            workload: GONE,
            proof: proof_id,
            status: WorkloadStatus::Exited(0),
            end: ScopeEnd::Completed,
            spawn_errno: 0,
            reaped: 1,
            workload_exited_at_ns: ended_ns.as_nanos() as u64,
            written_at_ns: ended_ns.as_nanos() as u64,
            usage: Some(TreeUsage {
                user_us: 700,
                system_us: 300,
                max_rss_kib: 1024,
            }),
        };
        use std::io::Write;
        (&proof)
            .write_all(&receipt.encode())
            .expect("write receipt");
    }
    drop(proof);
    fs::write(rt.log_path(id, Stream::Stdout), b"\n").expect("stdout");
    // A silent stderr leaves no artifact (F3).
    rt.write_result(&LaunchResultRecord {
        id,
        runtime: rt.id(),
        outcome: refine_protocol::docs::Outcome::Completed,
        workload_status: WorkloadStatus::Exited(0),
        written_at_unix_ms: ended_ns.as_millis() as u64,
        stop_failure: None,
        usage: None,
        residue_stop: None,
        cgroup_usage: None,
        limit_usage: None,
    })
    .expect("result");
    backdate(rt, id, f.ended);
    reg
}

/// Every file of `id` under `run/P`, whether it exists or not.
pub fn files_of(rt: &Runtime, id: RegistrationId) -> Vec<PathBuf> {
    rt.registration_files(id).to_vec()
}

/// Sets the modification time of every existing file of `id` to `when`.
pub fn backdate(rt: &Runtime, id: RegistrationId, when: SystemTime) {
    for p in files_of(rt, id) {
        if let Ok(f) = File::options().write(true).open(&p) {
            f.set_times(FileTimes::new().set_modified(when).set_accessed(when))
                .expect("set times");
        }
    }
}

/// `now - age`.
pub fn ago(age: Duration) -> SystemTime {
    SystemTime::now() - age
}
