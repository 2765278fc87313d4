//! The recovery pass (A4) and its plan, as the `recover` document.

use super::*;

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

pub(super) fn corrupt(err: &RegistryError) -> Assessed {
    Assessed {
        state: State::Corrupt,
        reason: Some(ScopeReason::Error {
            error: error_chain(err),
        }),
        receipt: None,
    }
}
