//! The reap loop (G5–G7, G9): the guardian waits on its signalfd and the channel; after every
//! wake it drains `waitpid(-1, WNOHANG)` until nothing is ready or `ECHILD`. Only `ECHILD` — the
//! kernel saying no child is left — ends the loop and lets the receipt be written.
//!
//! - The workload's own exit is sent at once (`WorkloadExited`, G6); reaping goes on while
//!   descendants (adopted through the subreaper bit) hold the scope.
//! - Termination/terminal signals to the guardian are forwarded to the unreaped workload (G9);
//!   so is a `Signal` frame from the launcher.
//! - Once the scope is [`SETTLE_AFTER_MS`] old, the proof file is synced once
//!   ([`ProofFile::settle`]): the sleep is bounded until then, by that age.
//! - Channel end of file = launcher lost (G7): the launch's parent-death signal, if it asked for
//!   one, is sent to the unreaped workload, once; reaping goes on. A launch without one (the
//!   service's: its launches outlive it until recovery) is left running.
//!
//! - X7 Two witnesses: after `ECHILD`, a scope with a cgroup waits until its `cgroup.events`
//!   says `populated 0`, polled (`POLLPRI`) with the signalfd and the channel, which are
//!   handled as before. A member that is not the guardian's descendant any more (forked in a
//!   PID namespace joined with `setns`, reparented to that namespace's init) keeps the scope
//!   live: no receipt while it runs. The wait is bounded by nothing but the cgroup (a stop
//!   empties it).
//!
//! Nothing here allocates.
//!
//! An error after the fork (the signalfd, `poll`, `waitpid`) does not end the guardian (G14): it
//! is remembered, the unreaped workload is killed, and the loop goes on without the signalfd,
//! waking every [`DEGRADED_TICK_MS`] to reap, until `ECHILD`; the receipt then names the error.
//! Only a `waitpid` that keeps failing ([`WAIT_RETRIES`] times) gives up without a receipt:
//! nothing else can prove the scope empty.
//!
//! # Caveats
//! Signals are forwarded to the workload process only, not to its group or adopted orphans
//! (stopping a whole tree is the supervisor's job, SPEC T), but for the launcher's job-control
//! signals, which reach the group the workload leads ([`Workload::forward`]). Once the workload is reaped its pidfd
//! is closed and nothing is signalled any more.

use refine_protocol_core::{Frame, WorkloadStatus};

use crate::channel::{Channel, Control};
use crate::error::Error;
use crate::gate::Workload;
use crate::receipt::{ProofFile, SETTLE_AFTER_MS};
use crate::signals::Signals;
use crate::sys::{self, Reaped};

/// How often the loop wakes to reap once the signalfd is no longer trusted.
pub const DEGRADED_TICK_MS: i32 = 100;
/// Consecutive `waitpid` failures after which the guardian gives up.
pub const WAIT_RETRIES: u32 = 50;

/// Whether the workload exec'd, as the gate learned it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Exec {
    Yes,
    /// Never: its status is `NeverStarted`, whatever the kernel reports for the gated child.
    No,
    /// Cannot be known: its status is `Unknown`.
    Unknown,
}

/// What the loop observed.
pub struct Outcome {
    pub status: WorkloadStatus,
    /// `CLOCK_REALTIME` when the workload was reaped; 0 if it never ran.
    pub exited_at_ns: u64,
    pub reaped: u32,
    /// The first error after which the loop went on degraded (the receipt names it).
    pub failure: Option<Error>,
}

/// Reaps until `ECHILD`.
pub fn until_empty(
    w: &mut Workload,
    chan: &mut Channel,
    signals: &Signals,
    proof: &ProofFile,
    pdeath_signal: Option<u32>,
    exec: Exec,
    cgroup: Option<&sys::Leaf>,
) -> Result<Outcome, Error> {
    let mut out = Outcome {
        status: WorkloadStatus::Unknown,
        exited_at_ns: 0,
        reaped: 0,
        failure: None,
    };
    let mut wait_errors = 0u32;
    let mut settle_at = Some(sys::monotonic_ms().saturating_add(SETTLE_AFTER_MS));
    // No child is left, but the cgroup still has members (X7).
    let mut members_left = false;
    loop {
        // Drain every exited child, then sleep until the next signal or frame.
        loop {
            match sys::reap_one() {
                Ok(Reaped::Child(pid, raw)) => {
                    wait_errors = 0;
                    out.reaped = out.reaped.saturating_add(1);
                    if pid == w.pid {
                        w.pidfd = None;
                        out.status = match exec {
                            // Killed by us after an error: not the workload's own end.
                            Exec::Yes if out.failure.is_some() => WorkloadStatus::Unknown,
                            Exec::Yes => status_of(raw),
                            Exec::No => WorkloadStatus::NeverStarted,
                            Exec::Unknown => WorkloadStatus::Unknown,
                        };
                        out.exited_at_ns = if exec == Exec::Yes {
                            sys::realtime_ns()
                        } else {
                            0
                        };
                        chan.send(&Frame::WorkloadExited {
                            status: out.status,
                            at_ns: out.exited_at_ns,
                        });
                    }
                }
                Ok(Reaped::None) => break,
                Ok(Reaped::NoChildren) => {
                    members_left = cgroup.is_some_and(sys::Leaf::populated);
                    if !members_left {
                        return Ok(out);
                    }
                    break;
                }
                Err(e) => {
                    wait_errors += 1;
                    if wait_errors >= WAIT_RETRIES {
                        return Err(Error::Wait(e));
                    }
                    degrade(&mut out, w, Error::Wait(e));
                    break;
                }
            }
        }
        let degraded = out.failure.is_some();
        let mut fds = [sys::poll_none(), sys::poll_none(), sys::poll_none()];
        if !degraded {
            fds[0] = sys::poll_in(signals.fd());
        }
        if chan.is_open() {
            fds[1] = sys::poll_in(chan.fd());
        }
        if let (true, Some(leaf)) = (members_left, cgroup) {
            fds[2] = leaf.poll_events();
        }
        let mut tick = if degraded { DEGRADED_TICK_MS } else { -1 };
        if let Some(at) = settle_at {
            match at.checked_sub(sys::monotonic_ms()) {
                Some(left) if left > 0 => {
                    let left = left.min(i32::MAX as u64) as i32;
                    tick = if tick < 0 { left } else { tick.min(left) };
                }
                _ => {
                    proof.settle();
                    settle_at = None;
                }
            }
        }
        // The cgroup's slot only while it is waited for: the loop polls what it watches.
        let watched = if members_left { 3 } else { 2 };
        if let Err(e) = sys::poll(&mut fds[..watched], tick) {
            degrade(&mut out, w, Error::Poll(e));
            continue;
        }
        if !degraded && sys::ready(&fds[0]) {
            loop {
                match signals.take() {
                    Ok(Some(sig)) if Signals::is_forwarded(sig) => w.signal(sig),
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => {
                        degrade(&mut out, w, e);
                        break;
                    }
                }
            }
        }
        if chan.is_open() && sys::ready(&fds[1]) {
            match chan.recv_control() {
                Control::Signal(signo) if (1..=64).contains(&signo) => w.forward(signo),
                Control::Closed => {
                    if let Some(s) = pdeath_signal {
                        w.signal(s as i32)
                    }
                }
                _ => {}
            }
        }
    }
}

/// After an error: remember the first one and kill the unreaped workload (the rest of the scope
/// is reaped as it exits).
fn degrade(out: &mut Outcome, w: &mut Workload, e: Error) {
    if out.failure.is_none() {
        out.failure = Some(e);
        w.signal(libc::SIGKILL);
    }
}

/// The exact status from a raw wait status; never a made-up code.
fn status_of(raw: i32) -> WorkloadStatus {
    if libc::WIFEXITED(raw) {
        WorkloadStatus::Exited(libc::WEXITSTATUS(raw))
    } else if libc::WIFSIGNALED(raw) {
        WorkloadStatus::Signaled(libc::WTERMSIG(raw))
    } else {
        WorkloadStatus::Unknown
    }
}
