//! Recovery after a supervisor restart (SPEC A4–A5): every registration in the open index
//! (`open/`, see [`crate::end::open_index`]: those not yet proven exited) is re-assessed under its
//! registration lock and the runtime stop fence, and
//!
//! - `live` and stale (no launcher holds its registration lock) → stopped through
//!   [`crate::end::stop`], unless its record asks to be kept on its launcher's loss (L6, a
//!   service's launch: its guardian captures its output): then it is *adopted*, left running
//!   with its identity checked by the assessment (registration, guardian pid and start time,
//!   proof inode), and the maintenance of whoever adopts it enforces its deadlines and settles
//!   it once its receipt proves it exited;
//! - `exited` → released (reported; its marker leaves the index; the record, proof and logs stay
//!   for retention and forgetting to judge);
//! - `unverified` → kept with its evidence (capacity stays held) and reported;
//! - a record that cannot be read or decoded → reported, never deleted.
//!
//! Idempotent: it acts only on what the assessment says now, so a second run (or two concurrent
//! runs) finds the scopes the first one stopped `exited` and only reports them; a run after
//! that no longer reads them at all. Its cost is O(open registrations), not O(history). A
//! marker whose record was never written is dropped once the launch's start timeout has passed.
//!
//! # Caveats
//! A launcher that still owns a launch holds that registration's lock (the record itself) for the
//! life of the launch; recovery then cannot take the lock within its bound and reports the
//! registration as owned instead of stopping it. A launcher that died released its lock with its
//! open file description, which is how a stale scope is recognised. The service's launches have
//! their lock held by their guardians for the service (L3), let go when a guardian reads the end
//! of the service's channel: those found held are asked once more within [`GUARDIAN_LET_GO`].

use std::time::{Duration, Instant};

use refine_protocol::docs::Outcome;
use refine_protocol::record::ServiceLoss;
use refine_protocol::{
    LaunchResultRecord, Registration, RegistrationId, ResidueStopRecord, StopCause, WorkloadStatus,
};

use crate::end::assess::{self, Assessment, UnverifiedReason};
use crate::end::open_index;
use crate::end::stop::{self, StopOptions, StopReport};
use crate::store::fence::FenceError;
use crate::store::registry::{RegistryError, Runtime};

/// Default bound on each registration lock. Short: a held lock means an owner is alive (a
/// launcher, retention, or another recovery acting on it), and waiting longer would only delay
/// recovery of the other registrations; the next run sees the registration again.
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_millis(100);

/// How long in all recovery waits a second time for the locks of service launches that were
/// held ([`recover`]): their guardians let go once they have read their service's end.
pub const GUARDIAN_LET_GO: Duration = Duration::from_secs(2);

/// How to recover.
#[derive(Debug, Clone, Copy)]
pub struct RecoverOptions<'a> {
    /// Options of every stop recovery makes (budget, grace, boot source).
    pub stop: StopOptions<'a>,
    /// How long to wait for each registration's lock. A lock still held after this is owned by a
    /// running launcher (or another recovery): the registration is reported as owned.
    pub lock_wait: Duration,
}

impl Default for RecoverOptions<'static> {
    fn default() -> Self {
        RecoverOptions {
            stop: StopOptions::default(),
            lock_wait: DEFAULT_LOCK_WAIT,
        }
    }
}

/// What recovery did with one registration.
#[derive(Debug)]
pub enum RecoveryAction {
    /// It was live and stale: stopped, and the receipt proves it ended (or, without a guardian,
    /// killed without proof: see the report's outcome).
    Stopped { report: StopReport },
    /// Already exited (receipt or an ended boot): released.
    Released { assessment: Assessment },
    /// Live, stale, and kept on its launcher's loss (L6): left running, its identity checked.
    Adopted,
    /// Unverified: kept with its evidence, capacity held. If its guardian is gone (same boot),
    /// the processes still witnessed for it were killed through the stop (`stop`); that
    /// proves nothing, so the registration stays unverified.
    Kept {
        reason: UnverifiedReason,
        stop: Option<StopReport>,
    },
    /// Its lock is held (by a live launcher, retention, or another recovery acting on it): left
    /// to its owner.
    Owned,
    /// The stop failed; evidence kept.
    StopFailed {
        error: stop::StopError,
        assessment: Assessment,
    },
    /// The record cannot be read or decoded: reported, never deleted.
    Corrupt { error: RegistryError },
}

#[derive(Debug)]
pub struct RecoveryEntry {
    pub id: RegistrationId,
    pub action: RecoveryAction,
}

#[derive(Debug, Default)]
pub struct RecoveryReport {
    pub entries: Vec<RecoveryEntry>,
    /// Open-index markers whose record was never written (a launch that died before it
    /// registered), dropped by this run.
    pub unwritten_dropped: usize,
}

impl RecoveryReport {
    pub fn count(&self, pred: impl Fn(&RecoveryAction) -> bool) -> usize {
        self.entries.iter().filter(|e| pred(&e.action)).count()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    #[error("cannot list registrations")]
    List(#[source] RegistryError),
}

/// Recovers every registration of `runtime` (see the module docs).
pub fn recover(
    runtime: &Runtime,
    opts: &RecoverOptions<'_>,
) -> Result<RecoveryReport, RecoverError> {
    let mut report = RecoveryReport::default();
    // Issue 38 item 7: first the stops their stoppers abandoned (killed while they held the
    // fence), whoever owns those scopes.
    stop::complete_if_abandoned(runtime, opts.stop.boot, opts.stop.budget);
    for id in runtime.open_ids().map_err(RecoverError::List)? {
        if !runtime.record_path(id).exists() {
            // A marker without a record: a launch still writing it (it holds the lock), or one
            // that died before it registered.
            if let Ok(Some(open_index::Settled::Unwritten { dropped: true })) =
                open_index::settle_if_free(runtime, id, opts.stop.boot)
            {
                report.unwritten_dropped += 1;
            }
            continue;
        }
        let action = recover_one(runtime, id, opts);
        report.entries.push(RecoveryEntry { id, action });
    }
    // L3: a service launch's lock is held by its guardian for that service until the guardian
    // reads the end of the service's channel, and after a crash or an upgrade a guardian may not
    // have woken yet: those are asked once more, all within one bound.
    let until = Instant::now() + GUARDIAN_LET_GO;
    for e in &mut report.entries {
        let service_launch = || {
            runtime
                .read_registration(e.id)
                .is_ok_and(|r| r.on_service_loss.is_some())
        };
        if !matches!(e.action, RecoveryAction::Owned) || !service_launch() {
            continue;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let opts = RecoverOptions {
            lock_wait: left,
            ..*opts
        };
        e.action = recover_one(runtime, e.id, &opts);
    }
    Ok(report)
}

/// Writes the launch result a stale scope never got (its launcher is gone): `stopped` by
/// recovery, or `completed` when the workload had ended before the stop (which then only ended
/// what outlived it), with the stop's own record (cause `recovery`). A result already written
/// is left as it is. Display only, like every result: a failure is logged.
fn record_outcome(runtime: &Runtime, reg: &Registration, report: &StopReport, since_unix_ns: u64) {
    if !matches!(runtime.read_result(reg.id), Ok(None)) {
        return;
    }
    let receipt = report.assessment.receipt();
    let ended_before = receipt
        .is_some_and(|r| r.workload_exited_at_ns != 0 && r.workload_exited_at_ns < since_unix_ns);
    let rec = LaunchResultRecord {
        id: reg.id,
        runtime: runtime.id(),
        outcome: if ended_before {
            Outcome::Completed
        } else {
            Outcome::Stopped
        },
        workload_status: receipt.map_or(WorkloadStatus::Unknown, |r| r.status),
        written_at_unix_ms: crate::kernel::clock::unix_ms(),
        stop_failure: None,
        usage: receipt.and_then(|r| r.usage),
        residue_stop: Some(ResidueStopRecord {
            outcome: report.outcome,
            cause: Some(StopCause::Recovery),
            killed: u32::try_from(report.killed).unwrap_or(u32::MAX),
            at_unix_ms: crate::kernel::clock::unix_ms(),
        }),
        cgroup_usage: None,
        limit_usage: None,
    };
    if let Err(e) = runtime.write_result(&rec) {
        tracing::warn!(id = %reg.id, error = %crate::error::error_chain(&e), "could not record recovery's outcome");
    }
    let ended = crate::store::journal::ended(reg.id, &reg.label, rec.outcome, receipt);
    crate::store::journal::record(runtime, &ended);
}

/// Recovers one registration under its lock and the runtime stop fence.
pub fn recover_one(
    runtime: &Runtime,
    id: RegistrationId,
    opts: &RecoverOptions<'_>,
) -> RecoveryAction {
    let lock = match runtime.lock(id, opts.lock_wait) {
        Ok(l) => l,
        Err(RegistryError::Fence(FenceError::Timeout { .. })) => return RecoveryAction::Owned,
        Err(error) => return RecoveryAction::Corrupt { error },
    };
    let reg = match runtime.read_registration(id) {
        Ok(r) => r,
        Err(error) => return RecoveryAction::Corrupt { error },
    };
    let fence_wait = opts.stop.budget + opts.stop.grace.unwrap_or_default();
    // Recovery's stops are recovery's: the cause an engine or a view reports.
    let recovery_stop = StopOptions {
        cause: Some(StopCause::Recovery),
        ..opts.stop
    };
    let since = crate::kernel::clock::unix_ns();
    let fence = match runtime.stop_fence(fence_wait) {
        Ok(f) => f,
        Err(error) => {
            return RecoveryAction::StopFailed {
                error: stop::StopError::Fence(error),
                assessment: assess::assess(runtime, &reg, opts.stop.boot),
            }
        }
    };
    let action = match assess::assess(runtime, &reg, opts.stop.boot) {
        Assessment::Live if reg.on_service_loss == Some(ServiceLoss::Keep) => {
            let ev = crate::store::journal::event(
                refine_protocol::docs::EventKind::Adopted,
                reg.id,
                &reg.label,
            );
            crate::store::journal::record(runtime, &ev);
            RecoveryAction::Adopted
        }
        Assessment::Live => match stop::stop_fenced(runtime, &reg, &recovery_stop, &fence) {
            Ok(report) => {
                record_outcome(runtime, &reg, &report, since);
                RecoveryAction::Stopped { report }
            }
            Err(error) => RecoveryAction::StopFailed {
                error,
                assessment: assess::assess(runtime, &reg, opts.stop.boot),
            },
        },
        a @ Assessment::Exited { .. } => RecoveryAction::Released { assessment: a },
        Assessment::Unverified { reason } => {
            // The stop kills what is still witnessed for a same-boot scope whose guardian is
            // gone (verified witnesses only) and signals nothing otherwise; the registration is
            // kept unverified either way.
            let stop = stop::stop_fenced(runtime, &reg, &opts.stop, &fence)
                .ok()
                .filter(|r| r.killed > 0);
            RecoveryAction::Kept { reason, stop }
        }
    };
    // What the assessment just proved exited (under the lock) leaves the open index. A failed
    // removal only means the next run assesses it again.
    let exited = match &action {
        RecoveryAction::Released { assessment } => Some(assessment),
        RecoveryAction::Stopped { report } => Some(&report.assessment),
        _ => None,
    };
    if let Some(a) = exited.filter(|a| a.is_exited()) {
        open_index::finish_cgroup(runtime, &reg, a);
        let _ = open_index::close_if_exited(runtime, id, &lock, a.clone());
    }
    action
}
