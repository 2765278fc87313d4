//! Registration: spawn the guardian (the handshake in [`crate::launch::guardian`]), receive its
//! identities, write the registration durably, and only then say *start*.

use crate::store::journal;
use refine_protocol::docs::EventKind;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

use refine_protocol::frame::Placement;
use refine_protocol::record::{Kind, Limits, Registration, ScopeCgroup, ScopePolicy};
use refine_protocol::{BootId, Hello, ProcessWitness, ProofIdentity, RegistrationId};

use crate::launch::guardian::GuardianLink;
use crate::launch::guardian::{start, HandshakeError, LaunchConfig, Starting, Stdio, OWNER_VAR};
use crate::store::registry::{RegistryError, Runtime, Stream};
use std::os::unix::ffi::OsStrExt;

/// A launch for [`launch_registered`]: what the registration records, plus the guardian's
/// launch whole.
#[derive(Debug)]
pub struct RegisteredLaunch {
    pub kind: Kind,
    pub label: String,
    pub owner: String,
    pub purpose: BTreeMap<String, String>,
    /// What the guardian runs and how. [`launch_registered`] sets its registration part (the
    /// ids, the proof path, the cgroup), its limits from [`RegisteredLaunch::limits`], and
    /// `REFINE_OWNER=<id>` on top of its environment.
    pub guardian: LaunchConfig,
    /// Where input written to the workload is recorded (`logs/ID.stdin`), if it takes any.
    pub stdin_path: Option<PathBuf>,
    pub pty: bool,
    pub limits: Limits,
    pub scope_policy: ScopePolicy,
    /// L6: what recovery does with the scope once its launcher is gone (`None`: stop it).
    pub on_service_loss: Option<refine_protocol::record::ServiceLoss>,
    /// The terminal whose foreground the workload's group gets before it starts (W15).
    pub foreground: Option<std::sync::Arc<crate::kernel::terminal::Foreground>>,
    /// H8: the resource limits (checked already: [`crate::kernel::resources::check`]).
    pub resources: crate::kernel::resources::ResourceAsk,
    /// H6: the readiness asked for (its watch is the caller's: [`crate::launch::readiness`]).
    pub readiness: Option<refine_protocol::record::ReadinessSpec>,
    /// H7: the health check (its prober is the caller's: [`crate::launch::health`]).
    pub health: Option<refine_protocol::record::HealthSpec>,
    /// X11: what protection the launch's Landlock domain holds ([`crate::launch::protect`]).
    pub protection: Option<refine_protocol::record::Protection>,
    /// X12: the sandbox the domain holds ([`crate::launch::sandbox`]).
    pub sandbox: Option<refine_protocol::record::Sandbox>,
}

/// The minimal managed launch: spawn the guardian, receive its identities, write the registration
/// durably, and only then say *start*. Returns the record and the link (events follow on it).
/// If the registration cannot be written, the guardian is told to abort: no workload code runs
/// unregistered.
///
/// The scope's cgroup, where it got one (`Registration::cgroup`), is the caller's to read and
/// remove after the receipt, as the engine does: [`crate::kernel::cgroup::finish`].
pub fn launch_registered(
    rt: &Runtime,
    id: RegistrationId,
    req: RegisteredLaunch,
) -> Result<(Registration, GuardianLink), HandshakeError> {
    let (_lock, pending) = rt
        .begin_registration(id)
        .map_err(HandshakeError::Registry)?;
    launch_registered_into(rt, pending, id, req)
}

/// [`launch_registered`] into a record the caller began ([`Runtime::begin_registration`]): the
/// caller holds the registration's lock from before the record exists.
pub fn launch_registered_into(
    rt: &Runtime,
    pending: crate::store::registry::PendingRecord,
    id: RegistrationId,
    req: RegisteredLaunch,
) -> Result<(Registration, GuardianLink), HandshakeError> {
    let started = start(
        req.guardian.guardian_exe.clone(),
        matches!(req.guardian.stdio, Stdio::Inherit),
    )?;
    launch_started(rt, pending, id, req, started)
}

/// [`launch_registered_into`] through a guardian the caller started ahead ([`start`]), so that
/// its exec overlapped the caller's own preparation (F3).
pub(crate) fn launch_started(
    rt: &Runtime,
    pending: crate::store::registry::PendingRecord,
    id: RegistrationId,
    req: RegisteredLaunch,
    started: Starting,
) -> Result<(Registration, GuardianLink), HandshakeError> {
    let mut config = req.guardian;
    let foreground = req.foreground;
    let mut owner_entry = OsString::from(OWNER_VAR);
    owner_entry.push("=");
    owner_entry.push(id.to_string());
    config
        .env
        .retain(|e| e.as_bytes().split(|&b| b == b'=').next() != Some(OWNER_VAR.as_bytes()));
    config.env.push(owner_entry);
    let cwd_text = match &config.cwd {
        Some(c) => c.to_string_lossy().into_owned(),
        None => std::env::current_dir()
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let proof_path = rt.proof_path(id);
    // The record is built (and its size checked) before the guardian is sent its launch: a
    // launch whose record could not be read back is refused before anything runs. The
    // identities come later; the widest values stand in for them, so the real record is never
    // larger.
    let mut registration = Registration {
        id,
        runtime: rt.id(),
        kind: req.kind,
        label: req.label,
        owner: req.owner,
        purpose: req.purpose,
        argv: config
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        argv_bytes: config
            .argv
            .iter()
            .any(|a| a.to_str().is_none())
            .then(|| config.argv.iter().map(|a| a.as_bytes().to_vec()).collect()),
        cwd: cwd_text,
        stdout_path: rt
            .log_path(id, Stream::Stdout)
            .to_string_lossy()
            .into_owned(),
        stderr_path: rt
            .log_path(id, Stream::Stderr)
            .to_string_lossy()
            .into_owned(),
        stdin_path: req
            .stdin_path
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned()),
        pty: req.pty,
        limits: req.limits,
        scope_policy: req.scope_policy,
        started_at_unix_ms: u64::MAX,
        hello: widest_hello(),
        proof_path: proof_path.to_string_lossy().into_owned(),
        // The widest a cgroup record gets (for the size check; the real one replaces it).
        cgroup: Some(ScopeCgroup {
            path: "/".repeat(4096),
            refused_errno: Some(i32::MIN),
        }),
        allow_setns: Some(config.allow_setns),
        // V1: this build, and the guardian's as its Hello says (the widest one stands in for
        // the size check).
        supervisor_provenance: Some(crate::kernel::provenance::own()),
        guardian_provenance: Some(widest_provenance()),
        on_service_loss: req.on_service_loss,
        // The widest the limits' record gets (the real one replaces it).
        resources: (!req.resources.is_empty()).then(|| widest_resources(&req.resources)),
        readiness: req.readiness,
        health: req.health,
        protection: req.protection,
        sandbox: req.sandbox,
    };
    if let Err(source) = registration.encode() {
        return Err(HandshakeError::Registry(RegistryError::Refused {
            what: "registration record",
            source,
        }));
    }
    // F4: a cgroup of its own where one can be made (detected once per process).
    // H7's probe scopes get none ([`Runtime::without_cgroup`]).
    let cgroup = if rt.makes_cgroups() {
        crate::kernel::cgroup::create(rt.id(), id)
    } else {
        None
    };
    // H8: the limits' directories, written before the workload exists.
    let resources = if req.resources.is_empty() {
        None
    } else {
        match crate::kernel::resources::prepare(rt.id(), id, &req.resources, cgroup.as_deref()) {
            Ok(r) => Some(r),
            Err(e) => {
                if let Some(dir) = &cgroup {
                    let _ = crate::kernel::cgroup::remove(dir);
                }
                return Err(HandshakeError::Resources(e));
            }
        }
    };
    registration.resources = resources.clone();
    config.registration = id;
    config.runtime = rt.id();
    config.proof_path = proof_path;
    config.rlimits = registration.limits.rlimits.clone();
    config.cgroup = cgroup.clone();
    let spawned = started.launch(config);
    let mut link = match spawned {
        Ok(link) => link,
        Err(e) => {
            if let Some(r) = &resources {
                crate::kernel::resources::remove_v1(&r.placements);
            }
            if let Some(dir) = &cgroup {
                let _ = crate::kernel::cgroup::remove(dir);
            }
            return Err(e);
        }
    };
    // H8: the workload waits at the gate: it joins the v1 limits before its execve; a v2
    // limit needs it forked into the scope's own cgroup, or it would hold nothing.
    if let Some(r) = &resources {
        let joined = crate::kernel::resources::join(r, link.hello().workload.pid);
        let unheld = r.placements.iter().any(|p| p.unified)
            && !matches!(link.hello().cgroup, Placement::Cgroup);
        let refused = match joined {
            Err(e) => Some(e),
            Ok(()) if unheld => Some(crate::kernel::resources::ResourceError::Unavailable {
                flag: "memory-max, --cpus or --pids-max",
                why: "the guardian could not fork the workload into its cgroup".to_owned(),
            }),
            Ok(()) => None,
        };
        if let Some(e) = refused {
            let _ = link.abort();
            crate::kernel::resources::remove_v1(&r.placements);
            if let Some(dir) = &cgroup {
                let _ = crate::kernel::cgroup::remove(dir);
            }
            return Err(HandshakeError::Resources(e));
        }
    }
    registration.started_at_unix_ms = crate::kernel::clock::unix_ms();
    // The placement is recorded in `registration.cgroup` (the record's hello does not carry
    // it): the record in memory is the one on disk.
    registration.hello = Hello {
        cgroup: Placement::NotAsked,
        provenance: None,
        ..*link.hello()
    };
    registration.guardian_provenance = link.hello().provenance.map(Into::into);
    registration.cgroup = cgroup.map(|dir| {
        let refused_errno = match link.hello().cgroup {
            Placement::Cgroup => None,
            Placement::Refused { errno } => Some(errno),
            // An older guardian that ignores the field: the scope runs outside the cgroup.
            Placement::NotAsked => Some(0),
        };
        if refused_errno.is_some() {
            // Nothing runs in it: the scope uses /proc, and the directory goes at once.
            tracing::info!(dir = %dir.display(), errno = ?refused_errno, "clone3 into the scope's cgroup refused; using /proc");
            let _ = crate::kernel::cgroup::remove(&dir);
        }
        ScopeCgroup {
            path: dir.to_string_lossy().into_owned(),
            refused_errno,
        }
    });
    if let Err(e) = rt.commit_registration(pending, &registration) {
        let _ = link.abort();
        return Err(HandshakeError::Registry(e));
    }
    let mut launched = journal::event(EventKind::Launched, id, &registration.label);
    launched.scope_kind = Some(registration.kind);
    journal::record(rt, &launched);
    // W15: the workload's group exists (the hello names it) and nothing of it runs yet, so it
    // reads the terminal as its foreground from its first instruction.
    if let Some(tty) = &foreground {
        if let Err(e) = tty.give(registration.hello.workload_pgid) {
            tracing::warn!(id = %id, error = %e, "cannot give the terminal to the workload");
        }
    }
    link.start()?;
    Ok((registration, link))
}

/// A guardian report whose every field takes its widest encoding.
fn widest_hello() -> Hello {
    let witness = ProcessWitness {
        pid: u32::MAX,
        start_time: u64::MAX,
    };
    Hello {
        guardian: witness,
        boot_id: BootId([0xff; 16]),
        workload: witness,
        workload_pgid: u32::MAX,
        workload_sid: u32::MAX,
        proof: ProofIdentity {
            dev: u64::MAX,
            ino: u64::MAX,
        },
        cgroup: Default::default(),
        provenance: None,
    }
}

/// A guardian's provenance at its widest (the longest version, a SHA-256 commit).
fn widest_provenance() -> refine_protocol::BuildProvenance {
    use refine_protocol::provenance::{Class, Provenance, MAX_VERSION};
    let version = "9".repeat(MAX_VERSION);
    let commit = "f".repeat(64);
    Provenance::new(&version, Some(&commit), Some(true), Class::Source)
        .map(Into::into)
        .unwrap_or_else(|_| crate::kernel::provenance::own())
}

/// The widest [`refine_protocol::record::ScopeResources`] `ask` can record: each placement's
/// path at the longest a path gets.
fn widest_resources(
    ask: &crate::kernel::resources::ResourceAsk,
) -> refine_protocol::record::ScopeResources {
    use refine_protocol::record::{LimitController, LimitPlacement};
    let placement = |controller| LimitPlacement {
        controller,
        dir: "/".repeat(4096),
        unified: false,
    };
    refine_protocol::record::ScopeResources {
        memory_max_bytes: ask.memory_max_bytes,
        cpu_millis: ask.cpu_millis,
        pids_max: ask.pids_max,
        placements: [
            LimitController::Memory,
            LimitController::Cpu,
            LimitController::Pids,
        ]
        .into_iter()
        .map(placement)
        .collect(),
    }
}
