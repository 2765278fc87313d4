//! The engine: a state machine over the output streams, the guardian channel and the control
//! socket that enforces the deadlines and the output limit, stops the tree through the shared
//! stop, and returns the [`LaunchResult`]. [`Engine::step`] is one turn, driven by readiness and
//! time: with one `poll` on a thread of its own or on the thread that waits for it
//! ([`Engine::run`]; `run` drives it on its main thread, with its signal relay [`Beside`] it), or,
//! for the service's detached launches, by a shared loop over many engines ([`super::shared`]).

use crate::store::journal;
use refine_protocol::docs::EventKind;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use refine_protocol::record::{Registration, ScopePolicy, StopCause};
use refine_protocol::{Receipt, WorkloadStatus};
use rustix::event::{PollFd, PollFlags};
use rustix::net::RecvFlags;

use super::{LaunchOutcome, LaunchResult, ScopeEnded, ScopeWatch, StopFailure};
use crate::end::stop::{Grace, Next, StopOptions, StopReport, Stopping};
use crate::launch::capture::{Capture, CaptureError, CaptureFailure, Tail};
use crate::launch::deadline::{Deadlines, Expired};
use crate::launch::escalation::{Answer, Escalation};
use crate::launch::guardian::{GuardianEvent, GuardianLink};
use crate::store::fence::Fence;
use crate::store::registry::Runtime;

mod finish;
mod watch;
use finish::settle_own;
use watch::is_permanent;
pub(super) use watch::{watch_scope, ResidueStop, Watch};

/// The shared stop (SPEC T) for this engine: deadlines, cancel, capture faults and the `stop`
/// scope policy all end the tree through [`crate::end::stop::stop`] (fence, quiesce, kill, proof by
/// the guardian's receipt). The guardian's link stays open meanwhile: its receipt frame is read
/// afterwards.
pub fn shared_stop(
    runtime: &Runtime,
    registration: &Registration,
) -> Result<StopReport, StopFailure> {
    stop_scope(runtime, registration, None, None)
}

/// The shared stop with a recorded cause and a grace (the scope watcher's deadline stop).
fn stop_scope(
    runtime: &Runtime,
    registration: &Registration,
    cause: Option<StopCause>,
    grace: Option<Duration>,
) -> Result<StopReport, StopFailure> {
    let opts = StopOptions {
        cause,
        grace,
        ..StopOptions::default()
    };
    crate::end::stop::stop(runtime, registration, &opts).map_err(|e| StopFailure {
        id: registration.id,
        error: Arc::new(e),
    })
}

/// Attempts at the stop of a scope's residue (the `stop` policy, a deadline) before it is
/// reported failed and the registration lock is let go (W7).
const RESIDUE_ATTEMPTS: u32 = 3;

/// Attempts at the shared stop for one cause while the workload keeps running.
pub(super) const STOP_ATTEMPTS: u32 = 5;
/// Pause between stop attempts.
pub(super) const STOP_RETRY: Duration = Duration::from_secs(1);

/// Control messages to the engine, on its control socket (one byte each; the handle, its
/// cancellers and input writers send them).
pub(super) const CTL_CANCEL: u8 = b'c';
pub(super) const CTL_OPERATOR_STOP: u8 = b's';
pub(super) const CTL_ACTIVITY: u8 = b'a';
/// Followed by the signal number in the same message.
pub(super) const CTL_SIGNAL: u8 = b'k';
/// A signal the host received, relayed per W9 ([`Escalation`]): followed by its number.
pub(super) const CTL_TERMINATION: u8 = b't';

/// How long the engine waits for the guardian's receipt after a stop it made.
pub(super) const RECEIPT_AFTER_STOP: Duration = Duration::from_secs(10);

/// What woke an engine: its streams (bit i = the capture's reader i), the guardian channel, the
/// control socket.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Woken {
    pub(super) streams: u32,
    pub(super) channel: bool,
    pub(super) control: bool,
}

impl Woken {
    pub(super) fn set(&mut self, source: Source) {
        match source {
            Source::Stream(i) if i < 32 => self.streams |= 1 << i,
            Source::Stream(_) => {}
            Source::Channel => self.channel = true,
            Source::Control => self.control = true,
        }
    }

    pub(super) fn has(&self, source: Source) -> bool {
        match source {
            Source::Stream(i) => i < 32 && self.streams & (1 << i) != 0,
            Source::Channel => self.channel,
            Source::Control => self.control,
        }
    }
}

/// One of the descriptors an engine waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// The capture's reader `i` (its stream, or its forward's room).
    Stream(usize),
    Channel,
    Control,
}

/// What an engine needs after a [`Engine::step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Wait for one of [`Engine::interest`] to be ready, or until this instant.
    Wait(Option<Instant>),
    /// A shared stop is due: blocking work, [`Engine::run_due_stop`], then the next step.
    StopDue,
    /// The result is due: [`Engine::finish`] (blocking: a bounded wait for the receipt, the
    /// result's write).
    Done,
}

/// Who holds the registration lock while this process owns the scope.
pub(in crate::launch) enum Owner {
    /// This process, with this descriptor.
    Here(Fence),
    /// The scope's guardian, for this process (L3: a detached scope of the service costs it
    /// one descriptor, the channel). The guardian lets go when the channel ends (this process
    /// closed it or died), and sends the lock back with its receipt, so the result is recorded
    /// and the scope settled under it.
    Guardian,
}

/// How long a settle waits for a lock that did not come back with the receipt (its guardian
/// exited: only another command's short hold is left to wait out).
const SETTLE_LOCK_WAIT: Duration = Duration::from_secs(2);

impl Owner {
    /// The launch's own end, its guardian reaped: the settle, under the lock held here or sent
    /// back by the guardian (else taken again, bounded). A lock someone else took meanwhile
    /// leaves the settle to them and to the maintenance pass.
    pub(in crate::launch) fn settle(
        &self,
        runtime: &Runtime,
        id: refine_protocol::RegistrationId,
        known: Option<&refine_protocol::Registration>,
        link: &mut GuardianLink,
    ) {
        let fence = match self {
            Owner::Here(fence) => return settle_own(runtime, id, known, fence),
            Owner::Guardian => match link.take_returned_lock() {
                Some(fd) => crate::store::fence::adopt(fd.into(), &runtime.record_path(id))
                    .map_err(crate::store::registry::RegistryError::from),
                None => runtime.lock(id, SETTLE_LOCK_WAIT),
            },
        };
        match fence {
            Ok(fence) => settle_own(runtime, id, known, &fence),
            Err(e) => {
                tracing::warn!(%id, error = %crate::error::error_chain(&e), "cannot take the registration lock back to settle")
            }
        }
    }
}

pub(super) struct Engine {
    /// The registration lock, held while this process owns the scope.
    pub(super) owner: Owner,
    pub(super) runtime: Runtime,
    pub(super) registration: Registration,
    pub(super) link: GuardianLink,
    pub(super) capture: Capture,
    pub(super) deadlines: Deadlines,
    /// W9: the termination requests the host relayed ([`Engine::termination_request`]).
    pub(super) escalation: Escalation,
    pub(super) output_limit: Option<u64>,
    /// Closed (`None`) once every handle and canceller is gone: a detached launch holds no
    /// descriptor for a control channel nobody can write to.
    pub(super) control: Option<OwnedFd>,
    pub(super) policy: ScopePolicy,
    /// Told once whether the workload exec'd (`Ok`) or failed to (`Err(errno)`).
    pub(super) spawned:
        Option<mpsc::SyncSender<Result<(), (i32, refine_protocol::frame::SpawnStep)>>>,
    /// Called once with the scope's receipt, whenever it comes ([`super::ReceiptHook`]).
    pub(super) on_receipt: Option<super::ReceiptHook>,
    /// Where the parts that outlive the result run (the capture's tail, the scope watcher):
    /// `None`, threads of their own; else the shared loop.
    pub(super) residues: Option<Arc<dyn Residues>>,
}

/// Runs what outlives a launch's result: the [`Tail`] of streams a residue still holds and the
/// scope's [`Watch`].
pub(super) trait Residues: Send + Sync {
    fn tail(&self, tail: Tail);
    fn watch(&self, watch: Watch);
}

#[derive(Default)]
pub(super) struct State {
    pub(super) status: Option<WorkloadStatus>,
    pub(super) receipt: Option<Receipt>,
    pub(super) channel_closed: bool,
    pub(super) guardian_failed: bool,
    pub(super) spawn_errno: Option<(i32, refine_protocol::frame::SpawnStep)>,
    /// The first cause that made this engine stop the tree.
    pub(super) cause: Option<LaunchOutcome>,
    pub(super) stopped: bool,
    /// A shared stop was decided and is not made yet ([`Engine::run_due_stop`]).
    pub(super) stop_due: bool,
    pub(super) stop_attempts: u32,
    pub(super) retry_stop_at: Option<Instant>,
    pub(super) stop_report: Option<StopReport>,
    pub(super) stop_failure: Option<StopFailure>,
    /// A deadline's grace (`--kill-after`, T7), driven by this engine's turns: its polite signal
    /// went out, and the shared stop follows when [`Stopping::advance`] says `Force`.
    pub(super) stopping: Option<Stopping>,
    /// After a stop this engine proved: until when the loop waits on the channel for the
    /// receipt (a timer, D2), set when the result is otherwise due.
    pub(super) receipt_until: Option<Instant>,
}

impl State {
    fn workload_over(&self) -> bool {
        self.status.is_some()
    }
}

impl Engine {
    /// Drives this engine on the calling thread to its result (the CLI's launches; a shared
    /// loop drives the same steps for many engines, [`super::shared`]).
    pub(super) fn run(self) -> LaunchResult {
        self.drive(State::default(), None, None)
    }

    /// [`Engine::run`] with the caller's own descriptor in the same `poll` ([`Beside`]).
    pub(super) fn run_beside(self, beside: &mut dyn Beside) -> LaunchResult {
        self.drive(State::default(), None, Some(beside))
    }

    /// Drives the engine from `st` on the calling thread: [`Engine::step`], the due stops, and
    /// one `poll` over [`Engine::interest`] per turn.
    pub(super) fn drive(
        mut self,
        mut st: State,
        mut woken: Option<Woken>,
        mut beside: Option<&mut (dyn Beside + '_)>,
    ) -> LaunchResult {
        loop {
            match self.step(&mut st, woken.take(), None) {
                Step::Done => break,
                Step::StopDue => self.run_due_stop(&mut st),
                Step::Wait(wake) => match self.wait(&mut st, wake, beside.as_deref_mut()) {
                    Ok(w) => woken = Some(w),
                    Err(e) => {
                        tracing::error!(id = %self.registration.id, error = %e, "capture poll failed");
                        // poll itself failed: nothing more can be observed; stop and give up
                        // capture.
                        self.stop(
                            &mut st,
                            LaunchOutcome::CaptureFault(CaptureFailure::Read { errno: 0 }),
                        );
                        self.run_due_stop(&mut st);
                        self.await_workload(&mut st);
                        break;
                    }
                },
            }
        }
        self.finish(st)
    }

    /// One turn of the engine: takes what woke it (reads the ready streams into `buf`, or the
    /// capture's own buffer; the guardian's events; the control messages), then decides: the
    /// result is due, a stop is due (deadlines, the output limit, a capture fault, a retry, a
    /// grace that ended, a cancel), or what to wait for next and until when. Never blocks but
    /// for the artifact writes of what it read.
    pub(super) fn step(
        &mut self,
        st: &mut State,
        woken: Option<Woken>,
        buf: Option<&mut [u8]>,
    ) -> Step {
        if let Some(w) = woken {
            self.capture.read_ready(w.streams, buf);
            if w.channel {
                // L1: a guarded capture's progress arrives on the channel.
                self.drain_events(st);
            }
            if let Some(t) = self.capture.last_output() {
                self.deadlines.activity(t);
            }
            if w.control {
                self.read_control(st);
            }
        }
        if st.stop_due {
            return Step::StopDue;
        }
        let now = Instant::now();
        if st.workload_over() {
            // Done when the drain is over, or earlier when every stream is closed and the
            // scope's end is known (its receipt usually follows the exit within ms).
            let scope_known = st.receipt.is_some() || st.channel_closed;
            if self.capture.is_done(now) && (scope_known || self.capture.drain_over(now)) {
                // W9: after a termination request, what is left of the scope once the
                // workload has ended is stopped through the shared stop (`docker stop`,
                // `tini -g`), whatever the scope's policy.
                if self.escalation.asked()
                    && !st.stopped
                    && st.receipt.is_none()
                    && !st.channel_closed
                {
                    st.stopped = true;
                    st.stop_due = true;
                    return Step::StopDue;
                }
                // D2: after a stop this engine proved, the receipt is due within milliseconds:
                // wait for it on the channel like for anything else, not on a thread. A stop
                // that failed waits for nothing (D6: a receipt that cannot come).
                if st.stop_report.is_some() && st.receipt.is_none() && !st.channel_closed {
                    let until = *st.receipt_until.get_or_insert(now + RECEIPT_AFTER_STOP);
                    if now < until {
                        return Step::Wait(Some(until));
                    }
                }
                return Step::Done;
            }
        }
        if st.cause.is_none() && !st.workload_over() {
            let cause = if let Some(e) = self.deadlines.expired(now) {
                Some(match e {
                    Expired::Completion => LaunchOutcome::TimedOut,
                    Expired::Idle => LaunchOutcome::IdleTimeout,
                })
            } else if self
                .output_limit
                .is_some_and(|l| self.capture.total_read() > l)
            {
                Some(LaunchOutcome::OutputLimit)
            } else if let Some(f) = self.capture.failure() {
                Some(LaunchOutcome::CaptureFault(f))
            } else {
                // W9: the grace of a termination request is over.
                self.escalation
                    .grace_over(now)
                    .then_some(LaunchOutcome::Cancelled)
            };
            if let Some(cause) = cause {
                self.stop(st, cause);
            }
        }
        if let (Some(at), Some(cause)) = (st.retry_stop_at, st.cause) {
            if now >= at && !st.workload_over() {
                st.retry_stop_at = None;
                st.stopped = false;
                self.stop(st, cause);
            }
        }
        if let (Some(s), Some(cause)) = (st.stopping.as_mut(), st.cause) {
            if !st.stopped && st.status.is_none() && s.advance(now, false) == Next::Force {
                self.stop(st, cause);
            }
        }
        if st.stop_due {
            return Step::StopDue;
        }
        let wake = if st.cause.is_none() && !st.workload_over() {
            match (self.deadlines.next(), self.escalation.end_at()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        } else if !st.workload_over() {
            let grace_until = st
                .stopping
                .as_ref()
                .filter(|_| !st.stopped)
                .and_then(Stopping::deadline);
            match (st.retry_stop_at, grace_until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        } else {
            None
        };
        Step::Wait(match (wake, self.capture.drain_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    /// The descriptors to wait on now: the output streams (held by the capture, none once the
    /// final drain has ended), the guardian channel and the control socket while each is open.
    pub(super) fn interest(
        &self,
        st: &State,
        now: Instant,
    ) -> Vec<(Source, BorrowedFd<'_>, PollFlags)> {
        let mut fds: Vec<_> = self
            .capture
            .interest(now)
            .into_iter()
            .map(|(i, fd, flags)| (Source::Stream(i), fd, flags))
            .collect();
        if !st.channel_closed {
            fds.push((Source::Channel, self.link.channel(), PollFlags::IN));
        }
        if let Some(c) = &self.control {
            fds.push((Source::Control, c.as_fd(), PollFlags::IN));
        }
        fds
    }

    /// Waits (on this thread) until one of [`Engine::interest`] is ready or `wake`.
    /// With `beside`, its descriptor is in the same `poll` and its wake-up bounds the wait; when
    /// either comes, it is told (and what it asks is done) before this returns.
    fn wait(
        &mut self,
        st: &mut State,
        wake: Option<Instant>,
        beside: Option<&mut (dyn Beside + '_)>,
    ) -> Result<Woken, CaptureError> {
        let beside_wake = beside.as_ref().and_then(|b| b.wake());
        let wake = match (wake, beside_wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let (woken, beside_ready) = {
            let interest = self.interest(st, Instant::now());
            let mut fds: Vec<PollFd<'_>> = interest
                .iter()
                .map(|(_, fd, flags)| PollFd::from_borrowed_fd(*fd, *flags))
                .collect();
            if let Some(b) = &beside {
                fds.push(PollFd::from_borrowed_fd(b.fd(), PollFlags::IN));
            }
            crate::launch::capture::poll_until(&mut fds, wake)?;
            let mut woken = Woken::default();
            for ((source, _, _), pfd) in interest.iter().zip(&fds) {
                if !pfd.revents().is_empty() {
                    woken.set(*source);
                }
            }
            let beside_ready =
                beside.is_some() && fds.last().is_some_and(|p| !p.revents().is_empty());
            (woken, beside_ready)
        };
        if let Some(b) = beside {
            if beside_ready || beside_wake.is_some_and(|at| Instant::now() >= at) {
                b.ready(&mut Asked { engine: self, st });
            }
        }
        Ok(woken)
    }

    /// Reads every pending guardian event without blocking.
    fn drain_events(&mut self, st: &mut State) {
        while !st.channel_closed {
            match self.link.next_event(Some(Duration::ZERO)) {
                Ok(Some(ev)) => self.on_event(st, ev),
                Ok(None) => return,
                Err(e) => {
                    tracing::error!(id = %self.registration.id, error = %crate::error::error_chain(&e), "guardian channel failed");
                    self.on_event(st, GuardianEvent::ChannelClosed);
                    return;
                }
            }
        }
    }

    fn on_event(&mut self, st: &mut State, ev: GuardianEvent) {
        let now = Instant::now();
        match ev {
            GuardianEvent::Started => {
                if let Some(tx) = self.spawned.take() {
                    let _ = tx.try_send(Ok(()));
                }
                let reg = &self.registration;
                let mut started = journal::event(EventKind::Started, reg.id, &reg.label);
                started.pid = Some(reg.hello.workload.pid);
                journal::record(&self.runtime, &started);
            }
            GuardianEvent::SpawnFailed { errno, step } => {
                if let Some(tx) = self.spawned.take() {
                    let _ = tx.try_send(Err((errno, step)));
                }
                st.spawn_errno = Some((errno, step));
                st.status.get_or_insert(WorkloadStatus::NeverStarted);
                self.capture.begin_drain(now);
            }
            GuardianEvent::WorkloadExited { status, at_ns } => {
                if st.status.is_none() {
                    self.adopt_requested_stop(st, at_ns);
                    self.record_exit(status);
                }
                st.status.get_or_insert(status);
                self.capture.begin_drain(exit_instant(at_ns, now));
            }
            GuardianEvent::ScopeExited(receipt) => {
                if st.status.is_none() {
                    self.adopt_requested_stop(st, receipt.workload_exited_at_ns);
                    self.record_exit(receipt.status);
                }
                st.status.get_or_insert(receipt.status);
                st.receipt = Some(receipt);
                self.capture.begin_drain(now);
                self.capture.extend_drain(now);
            }
            GuardianEvent::GuardianFailed { code, errno } => {
                tracing::error!(id = %self.registration.id, code, errno, "guardian failed");
                st.guardian_failed = true;
            }
            GuardianEvent::CaptureProgress { stdout, stderr } => {
                self.capture.guardian_progress(stdout, stderr, now);
            }
            GuardianEvent::CaptureEnded(c) => self.capture.guardian_ended(c),
            GuardianEvent::ChannelClosed => {
                st.channel_closed = true;
                if st.status.is_none() {
                    st.guardian_failed = true;
                    st.status = Some(WorkloadStatus::Unknown);
                    self.capture.begin_drain(now);
                }
            }
        }
    }

    /// V2: the workload's main process ended, as the guardian said.
    fn record_exit(&self, status: WorkloadStatus) {
        let reg = &self.registration;
        let mut ev = journal::event(EventKind::Exited, reg.id, &reg.label);
        journal::with_status(&mut ev, status);
        journal::record(&self.runtime, &ev);
    }

    fn read_control(&mut self, st: &mut State) {
        let mut buf = [0u8; 8];
        while let Some(control) = &self.control {
            match rustix::net::recv(control, &mut buf, RecvFlags::DONTWAIT) {
                // Every message is at least one byte: zero is end of file. Every handle and
                // canceller is gone: the socket is closed (a hung-up socket polls readable
                // forever, and a detached scope should not hold its descriptor).
                Ok((0, _)) => {
                    self.control = None;
                    return;
                }
                Ok((n, _)) => match buf[..n.min(buf.len())] {
                    [CTL_CANCEL] => self.stop(st, LaunchOutcome::Cancelled),
                    [CTL_OPERATOR_STOP] => self.stop(st, LaunchOutcome::Stopped),
                    [CTL_SIGNAL, signo] => {
                        self.forward_signal(st, i32::from(signo));
                        self.activity();
                    }
                    [CTL_TERMINATION, signo] => self.termination_request(st, i32::from(signo)),
                    _ => self.activity(),
                },
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return,
            }
        }
    }

    /// W9: a signal the host received: forwarded (and activity), or, the same termination
    /// request a second time, the scope ends at once ([`Escalation`]).
    fn termination_request(&mut self, st: &mut State, signo: i32) {
        match self.escalation.request(signo, Instant::now()) {
            Answer::EndNow => self.stop(st, LaunchOutcome::Cancelled),
            Answer::Forward => {
                self.forward_signal(st, signo);
                self.activity();
            }
        }
    }

    /// Sends `signo` to the workload through the guardian while it runs.
    fn forward_signal(&mut self, st: &State, signo: i32) {
        if !st.workload_over() && !st.channel_closed {
            if let Err(e) = self.link.signal(signo) {
                tracing::warn!(id = %self.registration.id, signo, error = %crate::error::error_chain(&e), "cannot forward a signal");
            }
        }
    }

    /// Input, a resize or a signal: activity for the idle deadline, here and on disk (the one
    /// definition a later process reads, [`crate::launch::deadline::recorded_activity`]).
    fn activity(&mut self) {
        self.deadlines.activity(Instant::now());
        crate::launch::deadline::stamp_activity(&self.registration);
    }

    /// A stop asked for from outside this engine (an operator's `stop ID`, the service's
    /// deadline enforcement) that was recorded before the workload ended is what ended it: its
    /// cause becomes the outcome (S7), unless this engine already had one.
    fn adopt_requested_stop(&self, st: &mut State, exited_at_unix_ns: u64) {
        if st.cause.is_some() {
            return;
        }
        match self.runtime.read_stop_request(self.registration.id) {
            Ok(Some(req)) if ended_by_stop(req.requested_at_unix_ns, exited_at_unix_ns) => {
                st.cause = Some(match req.cause {
                    StopCause::Operator | StopCause::Recovery => LaunchOutcome::Stopped,
                    StopCause::CompletionDeadline | StopCause::ReadyTimeout => {
                        LaunchOutcome::TimedOut
                    }
                    StopCause::IdleDeadline => LaunchOutcome::IdleTimeout,
                });
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(id = %self.registration.id, error = %crate::error::error_chain(&e), "unreadable stop request")
            }
        }
    }

    /// Stops the tree through the shared stop; the first cause is kept as the outcome.
    fn stop(&mut self, st: &mut State, cause: LaunchOutcome) {
        if st.cause.is_none() && !st.workload_over() {
            st.cause = Some(cause);
        }
        if st.stopped || st.receipt.is_some() {
            return;
        }
        // T7: a deadline with a grace sends the polite signal first; the loop calls this again
        // when the grace is over (a cancel meanwhile stops at once).
        let deadline = matches!(cause, LaunchOutcome::TimedOut | LaunchOutcome::IdleTimeout);
        if let (Some(ms), None, true) = (
            self.registration.limits.kill_after_ms,
            &st.stopping,
            deadline,
        ) {
            let mut s = Stopping::new(Some(Grace::term(Duration::from_millis(ms))));
            if s.advance(Instant::now(), false) == Next::Signal {
                let opts = StopOptions::default();
                if let Err(e) = s.signal(&self.runtime, &self.registration, &opts) {
                    tracing::warn!(id = %self.registration.id, error = %crate::error::error_chain(&e), "cannot send the deadline's polite signal");
                }
            }
            let waits = matches!(s.advance(Instant::now(), false), Next::Wait(_));
            st.stopping = Some(s);
            if waits {
                return;
            }
        }
        st.stopped = true;
        st.stop_due = true;
    }

    /// Makes the shared stop that [`Engine::stop`] decided, if one is due (blocking: the fence,
    /// the quiescence, the kill, the proof).
    pub(super) fn run_due_stop(&mut self, st: &mut State) {
        if !std::mem::take(&mut st.stop_due) {
            return;
        }
        st.stop_attempts += 1;
        match shared_stop(&self.runtime, &self.registration) {
            Ok(report) => {
                st.stop_report = Some(report);
                st.stop_failure = None;
                st.retry_stop_at = None;
            }
            Err(e) => {
                tracing::warn!(id = %self.registration.id, error = %crate::error::error_chain(&e), attempt = st.stop_attempts, "stop failed");
                let permanent = is_permanent(&e);
                st.stop_failure = Some(e);
                // The failure modes (fence held, quiescence not reached) are transient: try again
                // while the workload runs, a bounded number of times. A refusal (EPERM) is not:
                // it is reported at once (D6).
                if st.stop_attempts < STOP_ATTEMPTS && !permanent {
                    st.retry_stop_at = Some(Instant::now() + STOP_RETRY);
                }
            }
        }
    }

    /// After poll failed: wait (bounded) for the workload's status from the guardian alone.
    fn await_workload(&mut self, st: &mut State) {
        self.wait_events(st, RECEIPT_AFTER_STOP, |st| st.status.is_some());
        st.status.get_or_insert(WorkloadStatus::Unknown);
    }

    /// Takes the guardian's events for at most `bound`, until `done` holds or the channel has
    /// closed: the one bounded wait on the guardian alone.
    fn wait_events(&mut self, st: &mut State, bound: Duration, done: fn(&State) -> bool) {
        let end = Instant::now() + bound;
        while !done(st) && !st.channel_closed {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            match self.link.next_event(Some(left)) {
                Ok(Some(ev)) => self.on_event(st, ev),
                Ok(None) => return,
                Err(_) => self.on_event(st, GuardianEvent::ChannelClosed),
            }
        }
    }
}

/// The monotonic instant of the guardian's `CLOCK_REALTIME` exit stamp, never in the future and
/// never earlier than one drain before `now` (a clock step cannot shorten the drain to nothing).
pub(super) fn exit_instant(at_ns: u64, now: Instant) -> Instant {
    if at_ns == 0 {
        // No exit time: the workload never ran (or its end is unknown).
        return now;
    }
    let age = crate::kernel::clock::unix_time()
        .saturating_sub(Duration::from_nanos(at_ns))
        .min(crate::launch::capture::FINAL_DRAIN);
    now.checked_sub(age).unwrap_or(now)
}

/// A descriptor of the caller's that an engine driven on the caller's thread waits on too
/// ([`super::LaunchHandle::wait_beside`]): `run`'s signal relay, which so needs no thread of its
/// own. Told when the descriptor is readable or its wake-up has come; what it asks of the launch
/// is done at once, on this thread.
pub trait Beside {
    fn fd(&self) -> BorrowedFd<'_>;
    /// When to be told even if nothing is readable.
    fn wake(&self) -> Option<Instant>;
    fn ready(&mut self, launch: &mut dyn LaunchAsks);
}

/// What a [`Beside`] may ask of the launch it runs beside.
pub trait LaunchAsks {
    /// Sends `signo` to the workload (through the guardian) while it runs; counts as activity.
    fn signal(&mut self, signo: i32);
    /// Ends the scope through the shared stop (outcome `cancelled`), as a [`super::Canceller`].
    fn cancel(&mut self);
    /// A signal the host received, relayed per W9 ([`Escalation`]): `SIGINT` and `SIGTERM` are
    /// requests to end, every other signal is forwarded.
    fn termination_request(&mut self, signo: i32);
    /// Runs `stop`, which stops this process until it is continued (job control), with the
    /// launch's output kept flowing meanwhile
    /// ([`crate::launch::capture::Capture::flowing_while_stopped`]).
    fn stopped(&mut self, stop: &mut dyn FnMut());
    /// Whether the workload process still runs (its exit not yet reported): a signal that
    /// comes after it is not the workload's any more.
    fn workload_running(&self) -> bool {
        true
    }
}

struct Asked<'a> {
    engine: &'a mut Engine,
    st: &'a mut State,
}

impl LaunchAsks for Asked<'_> {
    fn signal(&mut self, signo: i32) {
        self.engine.forward_signal(self.st, signo);
        self.engine.activity();
    }

    fn cancel(&mut self) {
        self.engine.stop(self.st, LaunchOutcome::Cancelled);
    }

    fn termination_request(&mut self, signo: i32) {
        self.engine.termination_request(self.st, signo);
    }

    fn stopped(&mut self, stop: &mut dyn FnMut()) {
        self.engine.capture.flowing_while_stopped(stop);
    }

    fn workload_running(&self) -> bool {
        self.st.status.is_none()
    }
}

/// Whether a stop recorded at `requested_at_unix_ns` is what ended a workload that exited at
/// `exited_at_unix_ns`: recorded before the exit, or the workload has no exit time (0: it never
/// ran, as when the stop killed it between *start* and its exec, or its end is unknown; a
/// spawn failure is its own outcome and never asks this).
fn ended_by_stop(requested_at_unix_ns: u64, exited_at_unix_ns: u64) -> bool {
    exited_at_unix_ns == 0 || requested_at_unix_ns <= exited_at_unix_ns
}

#[cfg(test)]
mod tests {
    use super::{ended_by_stop, exit_instant};
    use std::time::Instant;

    /// A workload with no exit time (it never ran) starts its drain now: read as an exit at the
    /// epoch, the drain would be over at once and the result would not wait for the receipt
    /// that follows within milliseconds.
    #[test]
    fn a_workload_without_an_exit_time_drains_from_now() {
        let now = Instant::now();
        assert_eq!(exit_instant(0, now), now);
    }

    #[test]
    fn a_stop_recorded_before_the_exit_ended_it_and_one_after_did_not() {
        assert!(ended_by_stop(100, 200));
        assert!(ended_by_stop(200, 200));
        assert!(
            !ended_by_stop(300, 200),
            "a residue stop after the workload's own end"
        );
    }

    /// A workload the stop killed between *start* and its exec never ran: the guardian reports
    /// no exit time (0). The stop recorded meanwhile is what ended the launch.
    #[test]
    fn a_stop_ends_a_workload_that_never_ran() {
        assert!(ended_by_stop(1_700_000_000_000_000_000, 0));
    }
}
