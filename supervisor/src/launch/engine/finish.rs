//! The engine's last step: the launch's result, recorded, and what outlives it (the capture's
//! tail, the scope's watch, its settle).

use std::time::{Duration, Instant};

use refine_protocol::record::{ScopePolicy, StopCause};
use refine_protocol::WorkloadStatus;

use super::{journal, watch_scope, Engine, ResidueStop, State, RECEIPT_AFTER_STOP};
use crate::launch::{LaunchOutcome, LaunchResult, ScopeEnded, ScopeState, ScopeWatch};
use crate::store::fence::Fence;
use crate::store::registry::Runtime;

impl Engine {
    pub(in crate::launch) fn finish(mut self, mut st: State) -> LaunchResult {
        let id = self.registration.id;
        let status = st.status.unwrap_or(WorkloadStatus::Unknown);
        let outcome = if let Some((errno, step)) = st.spawn_errno {
            LaunchOutcome::SpawnFailed { errno, step }
        } else if let Some(cause) = st.cause {
            cause
        } else if let Some(f) = self.capture.failure() {
            LaunchOutcome::CaptureFault(f)
        } else if st.guardian_failed && st.receipt.is_none() {
            LaunchOutcome::GuardianLost
        } else {
            LaunchOutcome::Completed
        };
        // A stop this engine proved: its receipt is due shortly; take it if it comes (unless
        // the loop has waited for it already, [`Engine::step`]). After a failed stop no receipt
        // is due: the result is reported at once (D6).
        if st.stop_report.is_some()
            && st.receipt_until.is_none()
            && st.receipt.is_none()
            && !st.channel_closed
        {
            self.wait_events(&mut st, RECEIPT_AFTER_STOP, |st| st.receipt.is_some());
        }
        // Any events already queued (the receipt often follows the exit immediately).
        if st.receipt.is_none() && !st.channel_closed {
            self.drain_events(&mut st);
        }
        // What ends a residue (S9, W7): the `stop` policy, a deadline that passed while the
        // workload ran (its grace is over: the workload has ended), or else the completion
        // deadline, which holds for the whole scope.
        let deadline_passed = matches!(
            st.cause,
            Some(LaunchOutcome::TimedOut | LaunchOutcome::IdleTimeout)
        );
        let residue_stop = if !st.stopped && (self.policy == ScopePolicy::Stop || deadline_passed) {
            Some(ResidueStop {
                at: Instant::now(),
                cause: None,
                grace: None,
            })
        } else {
            self.deadlines.completion_at().map(|at| ResidueStop {
                at,
                cause: Some(StopCause::CompletionDeadline),
                grace: self
                    .registration
                    .limits
                    .kill_after_ms
                    .map(Duration::from_millis),
            })
        };
        let Engine {
            runtime,
            registration,
            mut link,
            capture,
            owner,
            on_receipt,
            residues,
            ..
        } = self;
        // F4: the accounting of the scope's cgroup, read once it is empty, then it goes.
        // H8: the limits' accounting first (a v2 limit's files go with F4's directory).
        let limit_usage = st
            .receipt
            .and_then(|_| crate::kernel::resources::finish(&registration));
        let cgroup_usage = st
            .receipt
            .and_then(|_| crate::kernel::cgroup::finish(&registration));
        let result = refine_protocol::LaunchResultRecord {
            id,
            runtime: runtime.id(),
            outcome: outcome.kind(),
            workload_status: status,
            written_at_unix_ms: crate::kernel::clock::unix_ms(),
            stop_failure: None,
            usage: crate::kernel::cgroup::with_usage(
                st.receipt.and_then(|r| r.usage),
                cgroup_usage,
            ),
            residue_stop: None,
            cgroup_usage,
            limit_usage,
        };
        if let Err(e) = runtime.write_result(&result) {
            tracing::warn!(%id, error = %crate::error::error_chain(&e), "cannot record the launch result");
        }
        // X10: with the receipt in, nothing of the scope is left to write: a stream still open
        // is held by a process outside it, and is closed rather than tailed.
        let mut capture = capture;
        if st.receipt.is_some() {
            capture.close_held_outside();
        }
        let capture = match &residues {
            Some(r) => capture.finish_with(|t| r.tail(t)),
            None => capture.finish(),
        };
        let capture_receipt = if capture.is_complete() || capture.memory_only {
            None
        } else {
            let path = runtime.capture_receipt_path(id);
            let receipt = capture.receipt(id, runtime.id(), Some(status));
            let written = receipt
                .encode()
                .map_err(std::io::Error::other)
                .and_then(|bytes| crate::store::durable::write_atomic(&path, &bytes, 0o600));
            match written {
                Ok(()) => Some(path),
                Err(e) => {
                    tracing::error!(%id, error = %e, "cannot write the capture receipt");
                    None
                }
            }
        };
        // H6: a readiness still undecided is decided now (its watch may not outlive this).
        crate::launch::readiness::ended(&runtime, &registration);
        // V2: the scope's end, now if it has come (else its watch records it).
        if st.receipt.is_some() || st.channel_closed {
            let ended =
                journal::ended(id, &registration.label, outcome.kind(), st.receipt.as_ref());
            journal::record(&runtime, &ended);
        }
        let (scope, scope_watch) = if let Some(r) = st.receipt {
            let _ = link.wait_guardian();
            owner.settle(&runtime, id, Some(&registration), &mut link);
            if let Some(hook) = &on_receipt {
                hook(&registration, &r, cgroup_usage);
            }
            (
                ScopeState::Exited(r),
                ScopeWatch::ready(ScopeEnded {
                    receipt: Some(r),
                    stop_report: None,
                    stop_failure: None,
                }),
            )
        } else if st.channel_closed {
            let _ = link.wait_guardian();
            owner.settle(&runtime, id, Some(&registration), &mut link);
            (
                ScopeState::Unknown,
                ScopeWatch::ready(ScopeEnded {
                    receipt: None,
                    stop_report: None,
                    stop_failure: st.stop_failure.clone(),
                }),
            )
        } else {
            let state = if residue_stop.is_some() {
                ScopeState::Stopping
            } else {
                // W16: the residue is kept by its policy, not held by this launcher: its end,
                // whenever it comes, must not end the scope. (A residue this launcher is to
                // stop, `Stopping`, stays its to end: its death ends the scope instead.)
                if let Err(e) = link.disown() {
                    tracing::warn!(%id, error = %crate::error::error_chain(&e), "cannot tell the guardian the residue is kept");
                }
                ScopeState::Live
            };
            (
                state,
                watch_scope(
                    runtime,
                    registration.clone(),
                    link,
                    owner,
                    residue_stop,
                    on_receipt,
                    residues.as_deref(),
                ),
            )
        };
        LaunchResult {
            id,
            registration,
            outcome,
            status,
            capture,
            capture_receipt,
            scope,
            scope_watch,
            stop_report: st.stop_report,
            stop_failure: st.stop_failure,
        }
    }
}

/// The launch's own end, with its registration lock still held and its guardian reaped: the one
/// assessment decides whether the registration leaves the open index (F1); if it does not (no
/// receipt), it stays for the maintenance pass and recovery. `known`: the registration as this
/// engine committed it (else it is read back).
pub(super) fn settle_own(
    runtime: &Runtime,
    id: refine_protocol::RegistrationId,
    known: Option<&refine_protocol::Registration>,
    owner: &Fence,
) {
    let boot = &crate::end::assess::KERNEL_BOOT;
    let settled = match known {
        Some(reg) => crate::end::open_index::settle_known(runtime, reg, owner, boot),
        None => crate::end::open_index::settle(runtime, id, owner, boot),
    };
    if let Err(e) = settled {
        tracing::warn!(%id, error = %crate::error::error_chain(&e), "cannot settle the open index");
    }
}
