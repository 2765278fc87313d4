//! What the CLI and the service share: the one assessment as both show it, the `ps` rows, the
//! `show`/`stop`/`recover` documents, retention with the assessment as evidence, the capacity
//! report and the launch request an API spec becomes.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use refine_protocol::api::{LaunchAsk, ScopeView};
use refine_protocol::record::StallRecord;
use refine_protocol::{Kind, Receipt, Registration, RegistrationId, StopCause};

use super::docs::{
    utc, ArtifactDoc, ArtifactsDoc, AssessmentDoc, ReceiptDoc, RecordDoc, RecoverAction,
    RecoverDoc, RecoverEntryDoc, ResultDoc, ShowDoc, State, StatusFields, StopDetail, StopDoc,
    StopOutcomeDoc, StopTimingsDoc, WatchDoc,
};
use super::error::{CliError, ServiceError};
use crate::capacity::{self, HostProbe, HostSample};
use crate::error_chain;
use crate::launch::LaunchRequest;
use crate::pty::WindowSize;
use crate::registry::{RegistryError, Runtime, Stream};
use crate::{assess, recover, retention, stop};

/// Standard output, locked.
pub(crate) fn out() -> io::StdoutLock<'static> {
    io::stdout().lock()
}

pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<(), CliError> {
    let mut o = out();
    serde_json::to_writer_pretty(&mut o, value)
        .map_err(|e| CliError::Output(io::Error::other(e)))?;
    writeln!(o).map_err(CliError::Output)
}

// ---------------------------------------------------------------------------------------------
// Assessment, as the CLI shows it.

/// The shared assessment's verdict, flattened for display.
#[derive(Debug, Clone)]
pub struct Assessed {
    pub state: State,
    pub reason: Option<String>,
    pub receipt: Option<Receipt>,
}

/// Runs the one shared assessment (A1) for `reg`.
pub fn assess(rt: &Runtime, reg: &Registration) -> Assessed {
    assess_one(rt, reg)
}

/// One registration as `ps` shows it.
fn view(rt: &Runtime, reg: &Registration, a: Assessed) -> ScopeView {
    let watch = stall_record(rt, reg, a.state);
    // Display only; an unreadable result record shows as none.
    let result = rt.read_result(reg.id).ok().flatten();
    let reported = result.as_ref().map(|r| r.workload_status);
    let status = StatusFields::of(a.receipt.map(|r| r.status).or(reported));
    ScopeView {
        id: reg.id.to_string(),
        kind: reg.kind.as_str().to_owned(),
        label: reg.label.clone(),
        state: a.state.name().to_owned(),
        reason: a.reason,
        status: status.status_string(),
        exit_code: status.exit_code,
        signal: status.signal,
        outcome: result.map(|r| r.outcome),
        started_at_unix_ms: reg.started_at_unix_ms,
        age_secs: crate::deadline::unix_ms().saturating_sub(reg.started_at_unix_ms) / 1000,
        pid: reg.hello.workload.pid,
        guardian_pid: reg.hello.guardian.pid,
        cwd: reg.cwd.clone(),
        argv: reg.argv.clone(),
        stdout: reg.stdout_path.clone(),
        stderr: reg.stderr_path.clone(),
        stalled: watch.as_ref().and_then(|w| w.stalled),
        silent: watch.and_then(|w| w.silent),
    }
}

/// A row for a record that does not decode: shown, never guessed at, never deleted.
fn corrupt_view(rt: &Runtime, id: RegistrationId, err: &RegistryError) -> ScopeView {
    ScopeView {
        id: id.to_string(),
        kind: "?".into(),
        label: String::new(),
        state: State::Corrupt.name().into(),
        reason: Some(err.to_string()),
        status: None,
        exit_code: None,
        signal: None,
        outcome: None,
        started_at_unix_ms: 0,
        age_secs: 0,
        pid: 0,
        guardian_pid: 0,
        cwd: String::new(),
        argv: Vec::new(),
        stdout: rt.log_path(id, Stream::Stdout).display().to_string(),
        stderr: rt.log_path(id, Stream::Stderr).display().to_string(),
        stalled: None,
        silent: None,
    }
}

/// Every registration's view (the `ps` rows); exited ones only with `all`.
pub fn list_views(rt: &Runtime, all: bool) -> Result<Vec<ScopeView>, RegistryError> {
    let mut rows = Vec::new();
    for id in rt.list_ids()? {
        let row = match rt.read_registration(id) {
            Ok(reg) => {
                let a = assess(rt, &reg);
                if !all && a.state == State::Exited {
                    continue;
                }
                view(rt, &reg, a)
            }
            Err(RegistryError::NotFound(_)) => continue,
            Err(e) => corrupt_view(rt, id, &e),
        };
        rows.push(row);
    }
    rows.sort_by_key(|r| (r.started_at_unix_ms, r.id.clone()));
    Ok(rows)
}

/// The stall watch's status of a live scope (display only; an unreadable one shows as none).
fn stall_record(rt: &Runtime, reg: &Registration, state: State) -> Option<StallRecord> {
    if state != State::Live {
        return None;
    }
    rt.read_stall(reg.id).ok().flatten()
}

/// The `show --json` document: record, receipt, assessment.
pub fn show_doc(rt: &Runtime, id: RegistrationId) -> Result<ShowDoc, CliError> {
    let reg = rt.read_registration(id)?;
    let a = assess(rt, &reg);
    let result = match rt.read_result(id) {
        Ok(Some(r)) => Some(ResultDoc::Written {
            outcome: r.outcome,
            status: StatusFields::of(Some(r.workload_status)),
            written_at: utc(r.written_at_unix_ms),
        }),
        Ok(None) => None,
        Err(e) => Some(ResultDoc::Unreadable {
            error: e.to_string(),
        }),
    };
    Ok(ShowDoc {
        id: id.to_string(),
        state: a.state,
        reason: a.reason.clone(),
        assessment: AssessmentDoc {
            state: a.state,
            reason: a.reason,
        },
        record: RecordDoc::of(&reg),
        result,
        receipt: a.receipt.as_ref().map(ReceiptDoc::of),
        artifacts: ArtifactsDoc {
            stdout: ArtifactDoc::of(Path::new(&reg.stdout_path)),
            stderr: ArtifactDoc::of(Path::new(&reg.stderr_path)),
        },
        watch: stall_record(rt, &reg, a.state).map(|r| WatchDoc::of(&r)),
    })
}

/// The host probe: sysinfo, or the fixed figures of the test seam
/// (`REFINE_CAPACITY_MEMORY=<bytes>|unavailable`, `REFINE_CAPACITY_CORES=<n>`).
pub fn probe() -> Box<dyn HostProbe + Send> {
    let mem = std::env::var("REFINE_CAPACITY_MEMORY").ok();
    let cores = std::env::var("REFINE_CAPACITY_CORES")
        .ok()
        .and_then(|c| c.parse().ok());
    if mem.is_none() && cores.is_none() {
        return Box::new(capacity::SysinfoProbe::new());
    }
    let mut real = capacity::SysinfoProbe::new().host();
    if let Some(c) = cores {
        real.logical_cores = c;
    }
    if let Some(m) = mem {
        real.available_memory = m.parse().ok();
    }
    Box::new(capacity::FixedProbe(HostSample {
        logical_cores: real.logical_cores,
        available_memory: real.available_memory,
    }))
}

/// The capacity report for `run/P` (live and unverified scopes counted from current evidence).
pub fn capacity_report(
    rt: Option<&Runtime>,
    policy: capacity::Policy,
    probe: &mut dyn HostProbe,
) -> Result<capacity::CapacityReport, CliError> {
    let (mut live, mut unverified) = (0, 0);
    let mut agents = Vec::new();
    if let Some(rt) = rt {
        for id in rt.list_ids()? {
            let Ok(reg) = rt.read_registration(id) else {
                // A corrupt record: nothing proves its scope ended; it holds a slot (C3).
                unverified += 1;
                continue;
            };
            match assess(rt, &reg).state {
                State::Live => {
                    live += 1;
                    if reg.kind == refine_protocol::Kind::Agent {
                        let g = reg.hello.guardian;
                        agents.push((id.to_string(), (g.pid, g.start_time)));
                    }
                }
                State::Exited => {}
                State::Unverified | State::Corrupt => unverified += 1,
            }
        }
    }
    let roots: Vec<(u32, u64)> = agents.iter().map(|(_, r)| *r).collect();
    let samples: BTreeMap<String, capacity::TreeSample> = agents
        .into_iter()
        .map(|(id, _)| id)
        .zip(probe.trees(&roots))
        .collect();
    Ok(policy.admit(probe.host(), &samples, live, unverified))
}

// ---------------------------------------------------------------------------------------------
// Shared operations (CLI and service).

/// The one shared assessment (A1), flattened for display.
pub fn assess_one(rt: &Runtime, reg: &Registration) -> Assessed {
    flatten(&assess::assess(rt, reg, &assess::KERNEL_BOOT))
}

/// An [`assess::Assessment`] as the CLI shows it.
pub fn flatten(a: &assess::Assessment) -> Assessed {
    match a {
        assess::Assessment::Live => Assessed {
            state: State::Live,
            reason: None,
            receipt: None,
        },
        assess::Assessment::Exited { proof } => match proof {
            assess::ExitProof::Receipt(r) => Assessed {
                state: State::Exited,
                reason: None,
                receipt: Some(*r),
            },
            assess::ExitProof::EarlierBoot { boot_id } => Assessed {
                state: State::Exited,
                reason: Some(format!("boot {boot_id} has ended (no receipt needed)")),
                receipt: None,
            },
        },
        assess::Assessment::Unverified { reason } => Assessed {
            state: State::Unverified,
            reason: Some(reason_text(reason)),
            receipt: None,
        },
    }
}

/// `guardian gone without receipt`, or the reason's fields as compact JSON.
fn reason_text(reason: &impl serde::Serialize) -> String {
    match serde_json::to_value(reason) {
        Ok(serde_json::Value::String(s)) => s.replace('_', " "),
        Ok(serde_json::Value::Object(m)) if m.len() == 1 => {
            let (k, v) = m.into_iter().next().unwrap_or_default();
            format!("{}: {v}", k.replace('_', " "))
        }
        Ok(v) => v.to_string(),
        Err(e) => e.to_string(),
    }
}

/// The shared stop for one registration; the `stop --json` document.
pub fn stop_one(rt: &Runtime, reg: &Registration, cause: StopCause) -> StopDoc {
    let opts = stop::StopOptions {
        cause: Some(cause),
        ..stop::StopOptions::default()
    };
    match stop::stop(rt, reg, &opts) {
        Ok(report) => {
            let a = flatten(&report.assessment);
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            StopDoc {
                id: reg.id.to_string(),
                outcome: StopOutcomeDoc::Stopped(report.outcome),
                state: a.state,
                reason: a.reason,
                detail: StopDetail::Done {
                    killed: report.killed,
                    signalled: report.signalled.len(),
                    timings_ms: StopTimingsDoc {
                        fence_wait: ms(report.timings.fence_wait),
                        quiesce: ms(report.timings.quiesce),
                        kill_to_exit: ms(report.timings.kill_to_exit),
                        total: ms(report.timings.total),
                    },
                    receipt: a.receipt.as_ref().map(|r| Box::new(ReceiptDoc::of(r))),
                },
            }
        }
        Err(e) => StopDoc {
            id: reg.id.to_string(),
            outcome: StopOutcomeDoc::Failed("failed"),
            state: assess_one(rt, reg).state,
            reason: Some(error_chain(&e)),
            detail: StopDetail::Failed {
                error: error_chain(&e),
            },
        },
    }
}

/// The recovery pass (A4); the `recover --json` document.
pub fn recover_all(rt: &Runtime) -> Result<RecoverDoc, ServiceError> {
    use recover::RecoveryAction as A;
    let report = recover::recover(rt, &recover::RecoverOptions::default())?;
    let mut counts: BTreeMap<RecoverAction, usize> = BTreeMap::new();
    let mut entries = Vec::with_capacity(report.entries.len());
    for e in &report.entries {
        let (action, after) = match &e.action {
            A::Stopped { report } => (RecoverAction::Stopped, flatten(&report.assessment)),
            A::Released { assessment } => (RecoverAction::Released, flatten(assessment)),
            A::Kept { reason, .. } => (
                RecoverAction::Kept,
                Assessed {
                    state: State::Unverified,
                    reason: Some(reason_text(reason)),
                    receipt: None,
                },
            ),
            A::StopFailed { error, assessment } => {
                let mut a = flatten(assessment);
                a.reason = Some(error_chain(error));
                (RecoverAction::StopFailed, a)
            }
            A::Owned => (
                RecoverAction::Owned,
                match rt.read_registration(e.id) {
                    Ok(reg) => assess_one(rt, &reg),
                    Err(err) => corrupt(&err),
                },
            ),
            A::Corrupt { error } => (RecoverAction::Corrupt, corrupt(error)),
        };
        *counts.entry(action).or_default() += 1;
        entries.push(RecoverEntryDoc {
            id: e.id.to_string(),
            action,
            state: after.state,
            reason: after.reason,
        });
    }
    Ok(RecoverDoc {
        summary: Some(counts),
        registrations: entries,
    })
}

fn corrupt(err: &RegistryError) -> Assessed {
    Assessed {
        state: State::Corrupt,
        reason: Some(error_chain(err)),
        receipt: None,
    }
}

/// One retention pass with the shared assessment as the evidence.
pub fn retire(
    rt: &Runtime,
    opts: retention::Options,
) -> Result<retention::Report, retention::RetentionError> {
    retention::retire(rt, opts, &|rt, reg| {
        let a = assess_one(rt, reg);
        if a.state == State::Exited {
            retention::Evidence::Exited(a.receipt)
        } else {
            retention::Evidence::NotExited {
                state: a.state.name(),
                reason: a.reason.unwrap_or_default(),
            }
        }
    })
}

/// The engine request for what the caller asked.
pub(crate) fn launch_request(spec: &LaunchAsk) -> Result<LaunchRequest, ServiceError> {
    if spec.argv.is_empty() {
        return Err(ServiceError::BadSpec("empty command".into()));
    }
    let mut req = LaunchRequest::new(spec.kind, spec.argv.iter().map(OsString::from));
    req.cwd = spec.cwd.as_ref().map(PathBuf::from);
    req.env = spec
        .env
        .iter()
        .map(|(k, v)| (OsString::from(k), Some(OsString::from(v))))
        .collect();
    req.label = spec.label.clone();
    req.owner = std::env::var("USER").unwrap_or_default();
    req.purpose = spec.meta.clone();
    req.completion_timeout = spec.timeout;
    req.idle_timeout = spec.idle_timeout;
    if spec.pty {
        req.pty = Some(WindowSize::default());
    }
    if let Some(user) = &spec.user {
        crate::credentials::require_privilege()?;
        req.user = Some(crate::credentials::resolve(user)?);
    }
    Ok(req)
}

/// Capacity admission for `agent` launches (C1–C4): `Ok` when a slot is free now or frees up
/// within the ask's `wait_for_slot`, with the admission lock held: the caller keeps it until the
/// launch's registration is durable (C4), so concurrent launches never overshoot the slots.
pub(crate) fn admit(
    rt: &Runtime,
    spec: &LaunchAsk,
) -> Result<Option<crate::fence::Fence>, ServiceError> {
    if spec.kind != Kind::Agent {
        return Ok(None);
    }
    let deadline = Instant::now() + spec.wait_for_slot.unwrap_or_default();
    let mut probe = probe();
    loop {
        let lock =
            capacity::admission_lock(rt).map_err(|e| ServiceError::Capacity(e.to_string()))?;
        let report = capacity_report(Some(rt), capacity::Policy::default(), &mut *probe)
            .map_err(|e| ServiceError::Capacity(e.to_string()))?;
        if report.free > 0 {
            return Ok(Some(lock));
        }
        drop(lock);
        if Instant::now() >= deadline {
            return Err(ServiceError::NoCapacity {
                slots: report.slots,
                live: report.live,
                unverified: report.unverified,
            });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
