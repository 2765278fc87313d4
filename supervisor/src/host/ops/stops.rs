//! The shared operations on one scope: whether it ended, its assessment, `stop` with a grace
//! and the stop after a grace driven elsewhere, as their documents.

use super::*;

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
pub(super) fn stop_doc(
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
