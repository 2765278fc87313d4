//! After the result: the [`Watch`] follows a scope whose workload has ended to its receipt, reaps
//! the guardian, stops a residue when its time comes (retrying a failed stop) and records how the
//! residue ended.

use super::*;

/// When and how the scope watcher stops a residue.
#[derive(Debug, Clone, Copy)]
pub(in crate::launch) struct ResidueStop {
    pub(in crate::launch) at: Instant,
    /// Recorded as the stop's cause (a deadline the watcher enforces); `None`: the engine's own.
    pub(in crate::launch) cause: Option<StopCause>,
    pub(in crate::launch) grace: Option<Duration>,
}

/// Hands the link to a [`Watch`] that follows the scope to its receipt and reaps the guardian,
/// on a thread of its own or in the shared loop (`residues`); with `stop`, it stops the scope at
/// that time through the shared stop, retrying a failed stop [`RESIDUE_ATTEMPTS`] times. A stop
/// that still fails is logged, recorded as the launch's outcome `stop_failed` with its reason
/// (`ps`, `show`), reported to the [`ScopeWatch`], and the registration lock and the scope are
/// let go (`Disown`: recovery or an operator may end the scope, and this launcher's end does
/// not, W16); the watcher still reads the receipt when it comes.
pub(in crate::launch) fn watch_scope(
    runtime: Runtime,
    registration: Registration,
    link: GuardianLink,
    owner: Owner,
    stop: Option<ResidueStop>,
    on_receipt: Option<crate::launch::ReceiptHook>,
    residues: Option<&dyn Residues>,
) -> ScopeWatch {
    let stop_at = stop.map(|s| s.at);
    let (tx, rx) = mpsc::channel();
    let watch = Watch {
        runtime,
        registration,
        link,
        owner: Some(owner),
        tx: Some(tx),
        next: stop,
        stop_due: None,
        attempts: 0,
        stop_report: None,
        stop_failure: None,
        receipt: None,
        ended: false,
        on_receipt,
    };
    match residues {
        Some(r) => r.watch(watch),
        None => {
            let spawned = std::thread::Builder::new()
                .name("refine-scope-watch".into())
                .spawn(move || watch.run());
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start the scope watcher");
            }
        }
    }
    ScopeWatch {
        rx,
        done: None,
        stop_at,
    }
}

/// Follows a scope that outlived its workload to its receipt (a state machine like the engine:
/// [`Watch::step`] never blocks; the stop and the end are the blocking parts).
pub(in crate::launch) struct Watch {
    runtime: Runtime,
    registration: Registration,
    link: GuardianLink,
    owner: Option<Owner>,
    tx: Option<mpsc::Sender<ScopeEnded>>,
    /// The residue stop to make, and when.
    next: Option<ResidueStop>,
    /// A stop whose time has come ([`Watch::run_due_stop`]).
    stop_due: Option<ResidueStop>,
    attempts: u32,
    stop_report: Option<StopReport>,
    stop_failure: Option<StopFailure>,
    receipt: Option<Receipt>,
    /// The receipt came or the channel closed.
    ended: bool,
    on_receipt: Option<crate::launch::ReceiptHook>,
}

impl Watch {
    /// One turn: the guardian's pending events (`channel`: its channel is ready), then the end,
    /// a due stop, or what to wait for.
    pub(in crate::launch) fn step(&mut self, channel: bool) -> Step {
        while channel && !self.ended {
            match self.link.next_event(Some(Duration::ZERO)) {
                Ok(Some(GuardianEvent::ScopeExited(r))) => {
                    self.receipt = Some(r);
                    self.ended = true;
                }
                Ok(Some(GuardianEvent::ChannelClosed)) | Err(_) => self.ended = true,
                Ok(Some(_)) => {}
                Ok(None) => break,
            }
        }
        if self.ended {
            return Step::Done;
        }
        if let Some(s) = self.next.filter(|s| Instant::now() >= s.at) {
            self.next = None;
            self.stop_due = Some(s);
            return Step::StopDue;
        }
        Step::Wait(self.next.map(|s| s.at))
    }

    /// The guardian channel, while the scope has not ended.
    pub(in crate::launch) fn interest(&self) -> Option<BorrowedFd<'_>> {
        (!self.ended).then(|| self.link.channel())
    }

    /// The residue stop whose time has come (blocking), with its retries.
    pub(in crate::launch) fn run_due_stop(&mut self) {
        let Some(s) = self.stop_due.take() else {
            return;
        };
        let id = self.registration.id;
        // T7, D2: the grace is a timer, not a wait on this thread: the polite signal now, the
        // stop when the grace is over (unless the receipt comes first and ends the watch).
        if let Some(grace) = s.grace {
            let mut stopping = Stopping::new(Some(Grace::term(grace)));
            let opts = StopOptions {
                cause: s.cause,
                ..StopOptions::default()
            };
            if let Err(e) = stopping.signal(&self.runtime, &self.registration, &opts) {
                tracing::warn!(%id, error = %crate::error::error_chain(&e), "cannot send the residue's polite signal");
            }
            if let Next::Wait(at) = stopping.advance(Instant::now(), false) {
                self.next = Some(ResidueStop {
                    at,
                    grace: None,
                    ..s
                });
                return;
            }
        }
        self.attempts += 1;
        let attempts = self.attempts;
        match stop_scope(&self.runtime, &self.registration, s.cause, None) {
            Ok(r) => {
                self.stop_report = Some(r);
                self.stop_failure = None;
            }
            Err(e) => {
                let error = crate::error::error_chain(&e);
                tracing::warn!(%id, attempts, %error, "residue stop failed");
                if attempts < RESIDUE_ATTEMPTS && !is_permanent(&e) {
                    self.next = Some(ResidueStop {
                        at: Instant::now() + STOP_RETRY,
                        grace: None,
                        ..s
                    });
                } else {
                    tracing::error!(%id, %error, "residue stop failed; the scope stays live");
                    record_stop_failure(&self.runtime, id, &error);
                    // W16: left to recovery or an operator on purpose, the residue must not be
                    // ended by its guardian when this launcher goes.
                    if let Err(e) = self.link.disown() {
                        tracing::warn!(%id, error = %crate::error::error_chain(&e), "cannot tell the guardian the residue is kept");
                    }
                    drop(self.owner.take());
                    if let Some(tx) = self.tx.take() {
                        let _ = tx.send(ScopeEnded {
                            receipt: None,
                            stop_report: None,
                            stop_failure: Some(e.clone()),
                        });
                    }
                }
                self.stop_failure = Some(e);
            }
        }
    }

    /// The scope ended: reap the guardian, settle, complete the result, tell the watchers.
    pub(in crate::launch) fn finish(mut self) {
        let id = self.registration.id;
        let _ = self.link.wait_guardian();
        // F4: the cgroup's accounting and removal before the settle, so that a settled scope
        // has none left behind.
        let limit_usage = self
            .receipt
            .and_then(|_| crate::kernel::resources::finish(&self.registration));
        let cgroup_usage = self
            .receipt
            .and_then(|_| crate::kernel::cgroup::finish(&self.registration));
        // Settled under our lock while we hold it; a lock let go after a failed stop leaves
        // it to the maintenance pass and recovery.
        if let Some(owner) = &self.owner {
            owner.settle(&self.runtime, id, None, &mut self.link);
        }
        drop(self.owner.take());
        if let Some(report) = &self.stop_report {
            record_residue_stop(&self.runtime, id, report);
        }
        // V2: the residue's end, with the launch's recorded outcome.
        let outcome = self
            .runtime
            .read_result(id)
            .ok()
            .flatten()
            .map(|r| r.outcome);
        let ended = crate::store::journal::ended(
            id,
            &self.registration.label,
            outcome.unwrap_or(refine_protocol::docs::Outcome::Completed),
            self.receipt.as_ref(),
        );
        crate::store::journal::record(&self.runtime, &ended);
        if let Some(r) = self.receipt {
            crate::end::assess::complete_result_usage(
                &self.runtime,
                id,
                crate::kernel::cgroup::with_usage(r.usage, cgroup_usage),
                cgroup_usage,
                limit_usage,
            );
            if let Some(hook) = &self.on_receipt {
                hook(&self.registration, &r, cgroup_usage);
            }
        }
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(ScopeEnded {
                receipt: self.receipt,
                stop_report: self.stop_report.take(),
                stop_failure: self.stop_failure.take(),
            });
        }
    }

    /// Runs the watch on this thread: one `poll` on the channel per turn.
    pub(in crate::launch) fn run(mut self) {
        let mut channel = false;
        loop {
            match self.step(channel) {
                Step::Done => break,
                Step::StopDue => {
                    channel = false;
                    self.run_due_stop();
                }
                Step::Wait(at) => {
                    let Some(fd) = self.interest() else { break };
                    let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
                    if crate::launch::capture::poll_until(&mut fds, at).is_err() {
                        break;
                    }
                    channel = !fds[0].revents().is_empty();
                }
            }
        }
        self.finish();
    }
}

/// Whether a failed stop would fail the same way again: members refused its signals (EPERM,
/// T6). Retrying it only delays the report (D6).
pub(super) fn is_permanent(e: &StopFailure) -> bool {
    matches!(*e.error, crate::end::stop::StopError::Refused { .. })
}

/// Records a residue stop that failed in the launch's result (outcome `stop_failed`, the
/// reason), for `ps` and `show`; the workload's own status is kept.
fn record_stop_failure(runtime: &Runtime, id: refine_protocol::RegistrationId, error: &str) {
    let previous = runtime.read_result(id).ok().flatten();
    let result = refine_protocol::LaunchResultRecord {
        id,
        runtime: runtime.id(),
        outcome: refine_protocol::docs::Outcome::StopFailed,
        workload_status: previous.map_or(WorkloadStatus::Unknown, |r| r.workload_status),
        written_at_unix_ms: crate::kernel::clock::unix_ms(),
        stop_failure: Some(error.to_owned()),
        usage: None,
        residue_stop: None,
        cgroup_usage: None,
        limit_usage: None,
    };
    if let Err(e) = runtime.write_result(&result) {
        tracing::warn!(%id, error = %crate::error::error_chain(&e), "cannot record the failed stop");
    }
}

/// Records the residue stop that ended the scope in the launch's result (D6): the outcome
/// document says how the residue ended, not only how the workload did.
fn record_residue_stop(
    runtime: &Runtime,
    id: refine_protocol::RegistrationId,
    report: &crate::end::stop::StopReport,
) {
    let Ok(Some(mut result)) = runtime.read_result(id) else {
        return;
    };
    let cause = runtime
        .read_stop_request(id)
        .ok()
        .flatten()
        .map(|r| r.cause);
    result.residue_stop = Some(refine_protocol::ResidueStopRecord {
        outcome: report.outcome,
        cause,
        killed: u32::try_from(report.killed).unwrap_or(u32::MAX),
        at_unix_ms: crate::kernel::clock::unix_ms(),
    });
    if let Err(e) = runtime.write_result(&result) {
        tracing::warn!(%id, error = %crate::error::error_chain(&e), "cannot record the residue stop");
    }
}
