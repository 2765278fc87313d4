//! E3: the operations on a runtime that the CLI, the service and a Rust host share: the one
//! assessment as they all show it, the `ps` rows, the `show`/`stop`/`recover` documents,
//! retention with the assessment as evidence, and `gc`. Each returns the protocol's document
//! (`refine_protocol::docs`); none needs tokio. [`crate::Supervisor`] offers them beside `spawn`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use refine_protocol::api::ScopeView;
use refine_protocol::docs::ScopeReason;
use refine_protocol::record::StallRecord;
use refine_protocol::{Receipt, Registration, RegistrationId, StopCause};

use super::docs::{
    artifact_doc, forget_doc, record_doc, retention_doc, stray_doc, utc, watch_doc, ArtifactDoc,
    ArtifactsDoc, AssessmentDoc, GcDoc, KindUnreadable, ProcessDoc, ReceiptDoc, RecoverAction,
    RecoverDoc, RecoverEntryDoc, ResidueStopDoc, ResultDoc, ScopeKind, ShowDoc, State,
    StatusFields, StopDetail, StopDoc, StopFailed, StopOutcomeDoc, StopTimingsDoc, UsageDoc,
};
use super::docs::{holders_doc, reap_doc, CapacityDoc, HoldersDoc, ReapDoc};
use crate::error_chain;
use crate::hygiene::holders::{HoldersError, Registrations, Target};
use crate::hygiene::reap_checkout::{self, ReapError};
use crate::store::registry::{RegistryError, Runtime, Stream};
use crate::{
    end::assess, end::open_index, end::recover, end::stop, history::forget, history::retention,
    kernel::procfs, kernel::tree,
};

/// Why an operation on a runtime failed (each kind as the mechanism that failed says it).
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Retention(#[from] retention::RetentionError),
    #[error(transparent)]
    Forget(#[from] forget::ForgetError),
    #[error("recovery failed")]
    Recover(#[from] recover::RecoverError),
}

// ---------------------------------------------------------------------------------------------
// Assessment, as the CLI shows it.

/// The shared assessment's verdict, flattened for display.
#[derive(Debug, Clone)]
pub struct Assessed {
    pub state: State,
    pub reason: Option<ScopeReason>,
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
    // A failed residue stop explains a scope that is still live (W7).
    let stop_failure = result.as_ref().and_then(|r| r.stop_failure.clone());
    let status = StatusFields::of(a.receipt.map(|r| r.status).or(reported));
    // W16: the kernel's word on the main process, not the launcher's: a live scope whose
    // launcher died before it could report the status still shows its main process ended.
    let workload_running = a.state == State::Live && workload_runs(&reg.hello.workload);
    ScopeView {
        id: reg.id.to_string(),
        kind: ScopeKind::Known(reg.kind),
        label: reg.label.clone(),
        state: a.state,
        reason: a
            .reason
            .or(stop_failure.map(|error| ScopeReason::StopFailed { error })),
        status: status.status,
        exit_code: status.exit_code,
        signal: status.signal,
        workload_running: Some(workload_running),
        outcome: result.map(|r| r.outcome),
        started_at_unix_ms: reg.started_at_unix_ms,
        age_secs: crate::kernel::clock::unix_ms().saturating_sub(reg.started_at_unix_ms) / 1000,
        pid: reg.hello.workload.pid,
        guardian_pid: reg.hello.guardian.pid,
        cwd: reg.cwd.clone(),
        argv: reg.argv.clone(),
        stdout: reg.stdout_path.clone(),
        stderr: reg.stderr_path.clone(),
        stalled: watch.as_ref().and_then(|w| w.stalled),
        silent: watch.and_then(|w| w.silent),
        usage: a.receipt.and_then(|r| r.usage).map(UsageDoc::from),
        ready: reg.readiness.as_ref().map(|_| {
            rt.read_ready(reg.id)
                .ok()
                .flatten()
                .map_or(refine_protocol::docs::ReadyState::Starting, |r| r.state)
        }),
        health: reg.health.as_ref().map(|_| {
            rt.read_health(reg.id)
                .ok()
                .flatten()
                .map_or(refine_protocol::docs::HealthState::Starting, |r| r.state)
        }),
    }
}

/// Whether the workload's witness names a running process (not a zombie). A `/proc` that cannot
/// be read says nothing: the process is taken for running, as `ps` showed it before it knew.
fn workload_runs(w: &refine_protocol::ProcessWitness) -> bool {
    match procfs::stat_of(w) {
        Ok(Some(stat)) => !stat.state.is_exited(),
        Ok(None) => false,
        Err(_) => true,
    }
}

/// A row for a record that does not decode: shown, never guessed at, never deleted.
fn corrupt_view(rt: &Runtime, id: RegistrationId, err: &RegistryError) -> ScopeView {
    ScopeView {
        id: id.to_string(),
        kind: ScopeKind::Unreadable(KindUnreadable::Unknown),
        label: String::new(),
        state: State::Corrupt,
        reason: Some(ScopeReason::Error {
            error: error_chain(err),
        }),
        status: None,
        exit_code: None,
        signal: None,
        workload_running: Some(false),
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
        usage: None,
        ready: None,
        health: None,
    }
}

/// The `ps` rows: with `all`, every registration of the history; without, only those in the
/// open index (not yet proven exited: O(open), F1), and of those the ones not `exited` now.
pub fn list_views(rt: &Runtime, all: bool) -> Result<Vec<ScopeView>, RegistryError> {
    finish_abandoned_stops(rt);
    let ids = if all { rt.list_ids()? } else { rt.open_ids()? };
    let mut rows = Vec::new();
    for id in ids {
        let row = match rt.read_registration(id) {
            Ok(reg) => {
                let a = assess(rt, &reg);
                if !all && a.state == State::Exited {
                    continue;
                }
                // Forgotten while it was read (forget moves the record aside before the proof
                // goes): not a row, never a momentary `unverified`.
                if a.state == State::Unverified && !rt.record_path(id).exists() {
                    continue;
                }
                view(rt, &reg, a)
            }
            // Forgotten meanwhile, or an open marker whose record is not written yet.
            Err(RegistryError::NotFound(_)) => continue,
            Err(e) => corrupt_view(rt, id, &e),
        };
        rows.push(row);
    }
    // Newest first, as `podman ps` lists.
    rows.sort_by(|a, b| (b.started_at_unix_ms, &b.id).cmp(&(a.started_at_unix_ms, &a.id)));
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
/// Issue 38 item 7: a reader that finds a scope quiesced by a stop nobody runs any more (its
/// lease left, the runtime's stop fence free) completes that stop before it reports; nothing
/// (one `readdir`) when there is none, and never a wait on a running stop.
fn finish_abandoned_stops(rt: &Runtime) {
    crate::end::stop::complete_if_abandoned(
        rt,
        &crate::end::assess::KERNEL_BOOT,
        std::time::Duration::ZERO,
    );
}

pub fn show_doc(rt: &Runtime, id: RegistrationId) -> Result<ShowDoc, RegistryError> {
    finish_abandoned_stops(rt);
    let reg = rt.read_registration(id)?;
    let a = assess(rt, &reg);
    let result = match rt.read_result(id) {
        Ok(Some(r)) => Some(ResultDoc::Written {
            reason: super::docs::result_reason(&r),
            outcome: r.outcome,
            status: StatusFields::of(Some(r.workload_status)),
            written_at: utc(r.written_at_unix_ms),
            // Until whoever proves the end completes the record, the receipt's own figures.
            usage: r
                .usage
                .or(a.receipt.and_then(|rc| rc.usage))
                .map(UsageDoc::from),
            residue_stop: r.residue_stop.as_ref().map(ResidueStopDoc::from),
            stop_failure: r.stop_failure,
            cgroup_usage: r.cgroup_usage.map(super::docs::cgroup_usage_doc),
            limit_usage: r.limit_usage.map(super::docs::limit_usage_doc),
        }),
        Ok(None) => None,
        Err(e) => Some(ResultDoc::Unreadable {
            error: error_chain(&e),
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
        record: record_doc(&reg),
        result,
        receipt: a.receipt.as_ref().map(ReceiptDoc::of),
        artifacts: {
            let receipt = rt.capture_receipt_path(id);
            let doc = |path: &str, name: &str| ArtifactDoc {
                incomplete: super::docs::capture_end(&receipt, name),
                ..artifact_doc(Path::new(path))
            };
            ArtifactsDoc {
                stdout: doc(&reg.stdout_path, "stdout"),
                stderr: doc(&reg.stderr_path, "stderr"),
            }
        },
        watch: stall_record(rt, &reg, a.state).map(|r| watch_doc(&r)),
        processes: if a.state == State::Live {
            processes(&reg)
        } else {
            Vec::new()
        },
        health: reg
            .health
            .as_ref()
            .map(|spec| super::docs::health_doc(spec, rt.read_health(id).ok().flatten())),
        readiness: reg.readiness.as_ref().map(|spec| {
            let rec = rt.read_ready(id).ok().flatten();
            refine_protocol::docs::ReadinessDoc {
                mode: spec.mode,
                fd: spec.fd,
                cmd: spec.cmd.clone(),
                timeout_ms: spec.timeout_ms,
                state: rec
                    .as_ref()
                    .map_or(refine_protocol::docs::ReadyState::Starting, |r| r.state),
                since: rec.as_ref().map(|r| utc(r.at_unix_ms)),
                status: rec.as_ref().and_then(|r| r.status.clone()),
                reason: rec.as_ref().and_then(|r| r.reason.clone()),
                probes: rec.as_ref().map_or(0, |r| r.probes),
            }
        }),
    })
}

/// The live scope's processes: below the guardian, and those carrying its owner marker.
/// For display: a process that ends during the scan is left out.
fn processes(reg: &Registration) -> Vec<ProcessDoc> {
    let Ok(boot) = assess::BootSource::boot_id(&assess::KERNEL_BOOT) else {
        return Vec::new();
    };
    let roots = tree::Roots {
        guardian: Some(reg.hello.guardian),
        members: Vec::new(),
        owner: Some(reg.id),
    };
    let Ok(scope) = tree::discover(&roots, boot) else {
        return Vec::new();
    };
    scope
        .members
        .iter()
        .filter_map(|m| {
            let pid = procfs::pid_of(&m.witness)?;
            let usage = procfs::usage(pid).ok()?;
            let (program, args) = procfs::program_and_args(pid);
            Some(ProcessDoc {
                pid: m.witness.pid,
                ppid: m.ppid,
                start_time: m.witness.start_time,
                state: format!("{:?}", m.state).to_lowercase(),
                program,
                args,
                cpu_ms: refine_protocol::time::saturating_ms(usage.cpu),
                rss_bytes: usage.rss_bytes,
                found: m.found,
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Shared operations (CLI and service).

/// Whether `reg` has ended as `wait` means it (not live, and its launcher has its output and
/// result, so `logs` shows it all): its state and `wait`'s exit code, or `None` while not.
pub fn ended(rt: &Runtime, reg: &Registration) -> Option<(State, i32)> {
    let a = assess_one(rt, reg);
    if a.state == State::Live || !rt.let_go(reg.id) {
        return None;
    }
    let reported = rt
        .read_result(reg.id)
        .ok()
        .flatten()
        .map(|r| r.workload_status);
    let (code, _) = wait_code(a.receipt.map(|r| r.status).or(reported));
    Some((a.state, code))
}

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
                reason: Some(ScopeReason::EarlierBoot {
                    boot_id: boot_id.to_string(),
                }),
                receipt: None,
            },
        },
        assess::Assessment::Unverified { reason } => Assessed {
            state: State::Unverified,
            reason: Some(ScopeReason::Unverified {
                failed: reason.doc(),
            }),
            receipt: None,
        },
    }
}

/// The shared stop for one registration, with an optional grace (its length and polite
/// signal, T7); the `stop --json` document.
pub fn stop_one(
    rt: &Runtime,
    reg: &Registration,
    cause: StopCause,
    grace: Option<(Duration, crate::kernel::signal::Signal)>,
) -> StopDoc {
    let mut opts = stop::StopOptions {
        cause: Some(cause),
        grace: grace.map(|(g, _)| g),
        ..stop::StopOptions::default()
    };
    if let Some((_, sig)) = grace {
        opts.grace_signal = sig;
    }
    stop_doc(rt, reg, stop::stop(rt, reg, &opts))
}

/// [`stop_one`] after a grace the service's event loop drove ([`stop::Stopping`]): the report
/// holds the grace's signals and time itself.
pub fn stop_after_grace(
    rt: &Runtime,
    reg: &Registration,
    cause: StopCause,
    stopping: &stop::Stopping,
) -> StopDoc {
    let opts = stop::StopOptions {
        cause: Some(cause),
        ..stop::StopOptions::default()
    };
    stop_doc(rt, reg, stop::stop_after(rt, reg, &opts, stopping))
}

/// The `stop --json` document of a stop's result.
fn stop_doc(
    rt: &Runtime,
    reg: &Registration,
    result: Result<stop::StopReport, stop::StopError>,
) -> StopDoc {
    match result {
        Ok(report) => {
            let a = flatten(&report.assessment);
            let us = refine_protocol::time::saturating_us;
            StopDoc {
                id: reg.id.to_string(),
                outcome: StopOutcomeDoc::Stopped(report.outcome),
                state: a.state,
                reason: a.reason,
                detail: StopDetail::Done {
                    killed: report.killed,
                    signalled: report.signalled.len(),
                    timings_us: StopTimingsDoc {
                        grace: us(report.timings.grace),
                        fence_wait: us(report.timings.fence_wait),
                        quiesce: us(report.timings.quiesce),
                        kill_to_exit: us(report.timings.kill_to_exit),
                        total: us(report.timings.total),
                    },
                    receipt: a.receipt.as_ref().map(|r| Box::new(ReceiptDoc::of(r))),
                },
            }
        }
        Err(e) => StopDoc {
            id: reg.id.to_string(),
            outcome: StopOutcomeDoc::Failed(StopFailed::Failed),
            state: assess_one(rt, reg).state,
            reason: Some(ScopeReason::Error {
                error: error_chain(&e),
            }),
            detail: StopDetail::Failed {
                error: error_chain(&e),
            },
        },
    }
}

/// The recovery pass (A4); the `recover --json` document.
pub fn recover_all(rt: &Runtime) -> Result<RecoverDoc, OpsError> {
    use recover::RecoveryAction as A;
    // A runtime written before the open index existed gets it now (once).
    rt.ensure_open_index()?;
    let report = recover::recover(rt, &recover::RecoverOptions::default())?;
    let mut counts: BTreeMap<RecoverAction, usize> = BTreeMap::new();
    let mut entries = Vec::with_capacity(report.entries.len());
    for e in &report.entries {
        let (action, after) = match &e.action {
            A::Stopped { report } => (RecoverAction::Stopped, flatten(&report.assessment)),
            A::Released { assessment } => (RecoverAction::Released, flatten(assessment)),
            A::Adopted => (
                RecoverAction::Adopted,
                match rt.read_registration(e.id) {
                    Ok(reg) => assess_one(rt, &reg),
                    Err(err) => corrupt(&err),
                },
            ),
            A::Kept { reason, .. } => (
                RecoverAction::Kept,
                Assessed {
                    state: State::Unverified,
                    reason: Some(ScopeReason::Unverified {
                        failed: reason.doc(),
                    }),
                    receipt: None,
                },
            ),
            A::StopFailed { error, assessment } => {
                let mut a = flatten(assessment);
                a.reason = Some(ScopeReason::Error {
                    error: error_chain(error),
                });
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
        dry_run: false,
        summary: Some(counts),
        registrations: entries,
        unwritten_dropped: report.unwritten_dropped,
    })
}

/// What the recovery pass would do now (`recover --dry-run`): the same assessment, the same
/// lock test (a held lock is an owner), and nothing signalled, released or written.
pub fn recover_plan(rt: &Runtime) -> Result<RecoverDoc, RegistryError> {
    let mut counts: BTreeMap<RecoverAction, usize> = BTreeMap::new();
    let mut entries = Vec::new();
    // What recovery reads: the open index (F1).
    for id in rt.open_ids()? {
        let lock = rt.lock(id, recover::DEFAULT_LOCK_WAIT);
        let (action, after) = match (lock, rt.read_registration(id)) {
            (
                Err(RegistryError::Fence(crate::store::fence::FenceError::Timeout { .. })),
                Ok(reg),
            ) => (RecoverAction::Owned, assess_one(rt, &reg)),
            (_, Err(err)) => (RecoverAction::Corrupt, corrupt(&err)),
            (_, Ok(reg)) => {
                let a = assess_one(rt, &reg);
                let kept = reg.on_service_loss == Some(refine_protocol::record::ServiceLoss::Keep);
                let action = match a.state {
                    State::Live if kept => RecoverAction::WouldAdopt,
                    State::Live => RecoverAction::WouldStop,
                    State::Exited => RecoverAction::WouldRelease,
                    State::Unverified | State::Corrupt => RecoverAction::WouldKeep,
                };
                (action, a)
            }
        };
        *counts.entry(action).or_default() += 1;
        entries.push(RecoverEntryDoc {
            id: id.to_string(),
            action,
            state: after.state,
            reason: after.reason,
        });
    }
    Ok(RecoverDoc {
        dry_run: true,
        summary: Some(counts),
        registrations: entries,
        unwritten_dropped: 0,
    })
}

fn corrupt(err: &RegistryError) -> Assessed {
    Assessed {
        state: State::Corrupt,
        reason: Some(ScopeReason::Error {
            error: error_chain(err),
        }),
        receipt: None,
    }
}

/// `gc`: retention, then forgetting, then (unless a dry run) re-indexing of records that lost
/// their open-index marker but are not proven exited. O(history): an operator's pass.
pub fn gc(
    rt: &Runtime,
    opts: retention::Options,
    forget_opts: forget::Options,
) -> Result<GcDoc, OpsError> {
    if !opts.dry_run {
        rt.ensure_open_index()?;
    }
    let retention = retire(rt, opts)?;
    let forget = forget::forget(rt, forget_opts, &assess::KERNEL_BOOT)?;
    let reindexed = if opts.dry_run {
        Vec::new()
    } else {
        open_index::reindex(rt, &assess::KERNEL_BOOT)?
            .into_iter()
            .map(|id| id.to_string())
            .collect()
    };
    // D5: what no record covers, after forgetting (which may have left a `.stall` behind).
    let strays = crate::history::strays::collect(rt, opts.dry_run)?;
    Ok(GcDoc {
        retention: retention_doc(&retention),
        forget: forget_doc(&forget),
        reindexed,
        strays: strays.iter().map(stray_doc).collect(),
    })
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
                state: a.state,
                reason: a.reason,
            }
        }
    })
}

/// How often [`wait_ended`] and [`wait_healthy`] look again. The end and a health record have
/// no event a caller of another process can block on (the launcher, not the caller, reaps), so
/// the wait is a bounded look-again; its cost is one registry read per scope per period.
pub const WAIT_PERIOD: Duration = Duration::from_millis(100);

/// What [`wait_ended`] found: per scope (in the order asked) its state, `wait`'s exit code and
/// the text `wait` prints, or `None` for one still live when the time ran out.
#[derive(Debug, Clone)]
pub struct Waited {
    pub ended: Vec<Option<(State, i32, String)>>,
    pub timed_out: bool,
}

/// Waits until every scope in `regs` has ended as `wait` means it (see [`ended`]), or until
/// `timeout` (none: without a bound) has passed.
pub fn wait_ended(rt: &Runtime, regs: &[Registration], timeout: Option<Duration>) -> Waited {
    let started = std::time::Instant::now();
    let mut ended: Vec<Option<(State, i32, String)>> = vec![None; regs.len()];
    loop {
        for (reg, slot) in regs.iter().zip(ended.iter_mut()) {
            if slot.is_some() {
                continue;
            }
            let a = assess_one(rt, reg);
            if a.state == State::Live || !rt.let_go(reg.id) {
                continue;
            }
            let reported = rt
                .read_result(reg.id)
                .ok()
                .flatten()
                .map(|r| r.workload_status);
            let (code, text) = wait_code(a.receipt.map(|r| r.status).or(reported));
            *slot = Some((a.state, code, text));
        }
        if ended.iter().all(Option::is_some) {
            return Waited {
                ended,
                timed_out: false,
            };
        }
        let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
        if left == Some(Duration::ZERO) {
            return Waited {
                ended,
                timed_out: true,
            };
        }
        std::thread::sleep(left.map_or(WAIT_PERIOD, |l| l.min(WAIT_PERIOD)));
    }
}

/// What [`wait_healthy`] found (H7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitedHealth {
    /// Its last probe succeeded.
    Healthy,
    /// The launch asked for no health check: it never becomes healthy.
    NoCheck,
    /// The scope ended (in this state) before a probe found it healthy.
    Ended(State),
    /// The time ran out; the health state it had then.
    TimedOut(refine_protocol::docs::HealthState),
}

/// Waits until the scope's health check finds it `healthy` (an `unhealthy` one may recover, as
/// docker's does, so that is waited through), until it ends, or until `timeout` has passed.
pub fn wait_healthy(
    rt: &Runtime,
    reg: &Registration,
    timeout: Option<Duration>,
) -> Result<WaitedHealth, RegistryError> {
    use refine_protocol::docs::HealthState;
    if reg.health.is_none() {
        return Ok(WaitedHealth::NoCheck);
    }
    let started = std::time::Instant::now();
    loop {
        let state = rt
            .read_health(reg.id)?
            .map_or(HealthState::Starting, |r| r.state);
        if state == HealthState::Healthy {
            return Ok(WaitedHealth::Healthy);
        }
        let a = assess_one(rt, reg);
        if a.state != State::Live {
            return Ok(WaitedHealth::Ended(a.state));
        }
        let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
        if left == Some(Duration::ZERO) {
            return Ok(WaitedHealth::TimedOut(state));
        }
        std::thread::sleep(left.map_or(WAIT_PERIOD, |l| l.min(WAIT_PERIOD)));
    }
}

/// What `wait` prints and exits with for a workload status: its code, 128+N for signal N, 127
/// for a workload that never started; when nothing says, `-1` is printed (as `podman wait`
/// does) and the exit code is 255.
pub fn wait_code(status: Option<refine_protocol::WorkloadStatus>) -> (i32, String) {
    use refine_protocol::WorkloadStatus as W;
    match status {
        Some(W::Exited(c)) => (c, c.to_string()),
        Some(W::Signaled(s)) => (128 + s, (128 + s).to_string()),
        Some(W::NeverStarted) => (127, "127".into()),
        Some(W::Unknown) | None => (255, "-1".into()),
    }
}

/// H1: what holds `path` (a process working in it, or with a file of it open), over the
/// registrations of every port of `home`; the `holders --json` document.
pub fn holders(home: &Path, path: &Path) -> Result<HoldersDoc, HoldersError> {
    let target = Target::resolve(path)?;
    let regs = Registrations::load(home, &assess::KERNEL_BOOT);
    Ok(holders_doc(&crate::hygiene::holders::holders(
        &target, &regs,
    )?))
}

/// H2: ends what still holds the checkout `path` within `budget` (the fence of `runtime`, when
/// given, for the orphans' kill); the `reap --json` document and whether nothing holds it now.
pub fn reap(
    home: &Path,
    runtime: Option<&Runtime>,
    path: &Path,
    budget: Duration,
) -> Result<(ReapDoc, bool), ReapError> {
    let report = reap_checkout::reap_checkout(home, runtime, path, budget, &assess::KERNEL_BOOT)?;
    Ok((reap_doc(&report), report.clean()))
}

/// Which deadline of `reg` has passed, if any (the one definition of activity, W7).
pub fn deadline_passed(reg: &Registration) -> Option<StopCause> {
    use crate::launch::deadline::{expired_on_record, Expired};
    expired_on_record(reg, std::time::Instant::now()).map(|e| match e {
        Expired::Completion => StopCause::CompletionDeadline,
        Expired::Idle => StopCause::IdleDeadline,
    })
}

/// A deadline stop the maintenance pass found due: the registration, which deadline passed,
/// and its grace (W11's `--kill-after`; none: the kill at once).
#[derive(Debug, Clone)]
pub struct DueStop {
    pub reg: Registration,
    pub cause: StopCause,
    pub grace: Option<Duration>,
}

/// What one maintenance pass found: the open registrations it looked at, those it settled
/// (proven exited, or a marker whose launch never wrote its record), and the deadline stops
/// due, for the caller to carry out (its own way of waiting out a grace).
#[derive(Debug, Clone, Default)]
pub struct Maintenance {
    pub open: usize,
    pub settled: usize,
    pub due: Vec<DueStop>,
    /// H7: the live registrations with a health check it looked at, for the caller to see
    /// that each has a prober.
    pub health_checked: Vec<Registration>,
}

/// One maintenance pass over the open index (O(open), F1): a stop abandoned while it held the
/// fence is completed (issue 38 item 7); registrations for which `skip` holds (a launcher's
/// own, whose engines enforce their deadlines and settle) are left alone; `each` sees every
/// other registration read; what the assessment proves exited is settled under its lock; a
/// live scope past a deadline is a [`DueStop`]. Nothing is signalled here.
pub fn maintenance_pass(
    rt: &Runtime,
    skip: impl Fn(RegistrationId) -> bool,
    mut each: impl FnMut(&Registration),
) -> Maintenance {
    use crate::end::open_index::Settled;
    stop::complete_if_abandoned(rt, &assess::KERNEL_BOOT, Duration::ZERO);
    let mut pass = Maintenance::default();
    let Ok(ids) = rt.open_ids() else {
        return pass;
    };
    for id in ids {
        pass.open += 1;
        if skip(id) {
            continue;
        }
        let reg = match rt.read_registration(id) {
            Ok(reg) => reg,
            // A marker whose launch may still be writing its record, or died before it.
            Err(RegistryError::NotFound(_)) => {
                if let Ok(Some(Settled::Unwritten { dropped: true })) =
                    open_index::settle_if_free(rt, id, &assess::KERNEL_BOOT)
                {
                    pass.settled += 1;
                }
                continue;
            }
            Err(_) => continue,
        };
        each(&reg);
        match assess_one(rt, &reg).state {
            State::Live => {
                if reg.health.is_some() {
                    pass.health_checked.push(reg.clone());
                }
                if let Some(cause) = deadline_passed(&reg) {
                    let grace = reg.limits.kill_after_ms.map(Duration::from_millis);
                    pass.due.push(DueStop { reg, cause, grace });
                }
            }
            State::Exited => {
                if let Ok(Some(Settled::Closed(_))) =
                    open_index::settle_if_free(rt, id, &assess::KERNEL_BOOT)
                {
                    pass.settled += 1;
                }
            }
            State::Unverified | State::Corrupt => {}
        }
    }
    pass
}

/// C1-C4: the host's capacity for launches, with `limit_percent` of it usable (none: the
/// default policy's), and what the open scopes of `rt` (none: no runtime yet) take of it; the
/// `capacity --json` document.
pub fn capacity(
    rt: Option<&Runtime>,
    limit_percent: Option<u8>,
) -> Result<CapacityDoc, RegistryError> {
    let mut policy = crate::capacity::Policy::default();
    if let Some(p) = limit_percent {
        policy.limit_percent = p;
    }
    let report = crate::capacity::capacity_report(rt, policy, &mut *crate::capacity::probe())?;
    Ok(super::docs::capacity_doc(&report))
}

/// Housekeeping over the whole history (R1-R4): retention of artifacts older than `retain`,
/// then forgetting of records exited longer than `forget_after`. O(history): a service runs it
/// at start and then seldom. Each pass's report, or why it failed.
pub fn housekeeping(
    rt: &Runtime,
    retain: Duration,
    forget_after: Duration,
) -> (
    Result<retention::Report, retention::RetentionError>,
    Result<forget::Report, forget::ForgetError>,
) {
    let retired = retire(
        rt,
        retention::Options {
            older_than: retain,
            dry_run: false,
        },
    );
    let opts = forget::Options {
        after: forget_after,
        dry_run: false,
    };
    (retired, forget::forget(rt, opts, &assess::KERNEL_BOOT))
}

/// What `gc` does: retention's horizon for artifacts and forgetting's for records (each with
/// its dry run).
#[derive(Debug, Clone, Copy, Default)]
pub struct GcOptions {
    pub retention: retention::Options,
    pub forget: forget::Options,
}

/// E3: the operations on the supervisor's runtime, as the CLI and the service perform them.
impl crate::Supervisor {
    /// The `ps` rows: with `all`, every registration of the history; without, the scopes not
    /// yet proven exited. Newest first.
    pub fn list(&self, all: bool) -> Result<Vec<ScopeView>, RegistryError> {
        list_views(self.runtime(), all)
    }

    /// The `show` document of one registration: record, result, receipt, assessment, and a
    /// live scope's processes.
    pub fn show(&self, id: RegistrationId) -> Result<ShowDoc, RegistryError> {
        show_doc(self.runtime(), id)
    }

    /// Stops the scope of `id` as an operator (`stop ID`): with a grace, SIGTERM to the
    /// workload's group and `grace` to end before the whole tree is killed; without, the kill at
    /// once. The document says whether a receipt proves the end; a failed stop is a document too.
    pub fn stop(
        &self,
        id: RegistrationId,
        grace: Option<Duration>,
    ) -> Result<StopDoc, RegistryError> {
        let grace = grace.map(|g| (g, crate::kernel::signal::Signal::TERM));
        self.stop_with(id, StopCause::Operator, grace)
    }

    /// [`crate::Supervisor::stop`] with its cause and the grace's polite signal.
    pub fn stop_with(
        &self,
        id: RegistrationId,
        cause: StopCause,
        grace: Option<(Duration, crate::kernel::signal::Signal)>,
    ) -> Result<StopDoc, RegistryError> {
        let reg = self.runtime().read_registration(id)?;
        Ok(stop_one(self.runtime(), &reg, cause, grace))
    }

    /// The recovery pass (A4): scopes whose launcher is gone are stopped, released or adopted.
    pub fn recover(&self) -> Result<RecoverDoc, OpsError> {
        recover_all(self.runtime())
    }

    /// What [`crate::Supervisor::recover`] would do now, doing nothing.
    pub fn recover_plan(&self) -> Result<RecoverDoc, RegistryError> {
        recover_plan(self.runtime())
    }

    /// `gc`: retention, forgetting, re-indexing and the strays (D5).
    pub fn gc(&self, opts: GcOptions) -> Result<GcDoc, OpsError> {
        gc(self.runtime(), opts.retention, opts.forget)
    }

    /// One maintenance pass ([`maintenance_pass`]) with its due deadline stops carried out here,
    /// each grace waited out in turn (a service runs them as tasks instead): the pass and the
    /// stops' documents.
    pub fn maintain(&self) -> (Maintenance, Vec<StopDoc>) {
        let pass = maintenance_pass(self.runtime(), |_| false, |_| {});
        let docs = pass
            .due
            .iter()
            .map(|d| {
                let grace = d.grace.map(|g| (g, crate::kernel::signal::Signal::TERM));
                stop_one(self.runtime(), &d.reg, d.cause, grace)
            })
            .collect();
        (pass, docs)
    }

    /// [`capacity`] of this runtime's host, with the default policy.
    pub fn capacity(&self) -> Result<CapacityDoc, RegistryError> {
        capacity(Some(self.runtime()), None)
    }

    /// [`holders`] of `path` over every port of this runtime's home.
    pub fn holders(&self, path: &Path) -> Result<HoldersDoc, HoldersError> {
        holders(self.runtime().home(), path)
    }

    /// [`reap`] of the checkout `path`, this runtime's fence for the kill.
    pub fn reap(&self, path: &Path, budget: Duration) -> Result<(ReapDoc, bool), ReapError> {
        reap(self.runtime().home(), Some(self.runtime()), path, budget)
    }
}
