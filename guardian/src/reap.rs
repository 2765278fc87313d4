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
//! - W16 Launcher loss ends the scope: a launch that asked for a parent-death signal (a
//!   foreground `run` asks for `SIGKILL`) has its whole scope ended when the channel closes, as
//!   the launcher's own stop would have ended it, and the receipt proves it. The loop enters its
//!   *ending* (also when the channel closed before the loop, while the workload exec'd). Once
//!   the workload can no longer act on its signal (it is reaped, or the signal was `SIGKILL`),
//!   every wake runs a round of [`ending::kill_round`] after the drain: `SIGKILL` to every
//!   direct child not reaped yet (by pid: an unreaped child's pid cannot have been reused),
//!   sparing nested guardians, which end their own scopes and exit. The orphans of a killed
//!   child are the guardian's before its `SIGCHLD` arrives, so the wake for that death lists
//!   them: a tree ends one generation per wake. While ending, the loop also wakes every
//!   [`ENDING_TICK_MS`], for an orphan whose reparenting brings no wake of its own (its parent
//!   was not the guardian's child: a member spared as a guardian by its name). With a cgroup, `ECHILD` while it is still populated (members out
//!   of the tree, X7) writes its `cgroup.kill`, on every such wake. A launcher that leaves on
//!   purpose (its workload ended, what it left kept by its policy) says `Disown` first: its end
//!   is then no loss, and neither the signal nor the ending follows it. The guardian does this,
//!   not a stop of the launcher's, because the launcher is what was lost: its duty falls to the
//!   process whose life is the scope's.
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
//! is closed and nothing is signalled any more; only the ending's rounds signal the rest.
//!
//! The ending has no grace of its own: with a parent-death signal other than `SIGKILL` (a host
//! may ask for one) the rest is killed once the workload has ended, and a workload that ignores
//! its signal keeps the scope live, as under G7, until it ends or is stopped. A nested guardian
//! that is spared but never ends (its own launch asked for no parent-death signal) keeps this
//! scope live too: never a false `exited`; `stop` ends both.

use refine_protocol_core::{Frame, WorkloadStatus};

use crate::capture::Drain;
use crate::channel::{Channel, Control};
use crate::ending;
use crate::error::Error;
use crate::gate::Workload;
use crate::receipt::{ProofFile, SETTLE_AFTER_MS};
use crate::signals::Signals;
use crate::sys::{self, Reaped};

/// How often the loop wakes to reap once the signalfd is no longer trusted.
pub const DEGRADED_TICK_MS: i32 = 100;
/// How often the loop wakes while it ends its scope (W16), whatever else wakes it.
pub const ENDING_TICK_MS: i32 = 100;
/// Consecutive `waitpid` failures after which the guardian gives up.
pub const WAIT_RETRIES: u32 = 50;

const SIGKILL: u32 = libc::SIGKILL as u32;

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

/// What the loop watches besides the workload and the channel.
pub struct Watched<'a> {
    pub proof: &'a ProofFile,
    pub pdeath_signal: Option<u32>,
    pub exec: Exec,
    pub cgroup: Option<&'a sys::Leaf>,
    /// L1: the output the guardian drains, for a capturing launch.
    pub drain: Option<&'a mut Drain>,
}

/// Reaps until `ECHILD`.
pub fn until_empty(
    w: &mut Workload,
    chan: &mut Channel,
    signals: &Signals,
    watched: Watched<'_>,
) -> Result<Outcome, Error> {
    let Watched {
        proof,
        pdeath_signal,
        exec,
        cgroup,
        mut drain,
    } = watched;
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
    // W16: the launcher is gone and the launch asked for a parent-death signal: the scope ends.
    // Lost already (while the workload exec'd, see `gate`), the signal was sent there.
    let mut ending = pdeath_signal.is_some() && !chan.is_open();
    // `Disown` takes the parent-death signal back: the launcher's end is no loss any more.
    let mut pdeath_signal = pdeath_signal;
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
                    // W16: what left the tree is still in the cgroup, and ends with it.
                    if let (true, Some(leaf)) = (ending, cgroup) {
                        let _ = leaf.kill();
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
        // W16: once the workload can no longer act on its parent-death signal (reaped, or the
        // signal was SIGKILL), the rest of the scope is killed, a generation per wake.
        if ending && !members_left && (w.pidfd.is_none() || pdeath_signal == Some(SIGKILL)) {
            // The workload is spared while unreaped (it has its signal); once reaped, its pid
            // names nothing of ours, or a member that took the number.
            ending::kill_round(w.pidfd.as_ref().map(|_| w.pid));
        }
        let degraded = out.failure.is_some();
        let mut fds = [sys::poll_none(); 5];
        if !degraded {
            fds[0] = sys::poll_in(signals.fd());
        }
        if chan.is_open() {
            fds[1] = sys::poll_in(chan.fd());
        }
        // The cgroup's slot only while it is waited for.
        if let (true, Some(leaf)) = (members_left, cgroup) {
            fds[2] = leaf.poll_events();
        }
        // L1: the streams the guardian drains.
        if let Some(d) = drain.as_deref() {
            [fds[3], fds[4]] = d.poll_entries();
        }
        let mut tick = if degraded {
            DEGRADED_TICK_MS
        } else if ending {
            ENDING_TICK_MS
        } else {
            -1
        };
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
        if let Some(left) = drain.as_deref().and_then(Drain::progress_tick) {
            tick = if tick < 0 { left } else { tick.min(left) };
        }
        // Only the slots in use (a launch that captures nothing polls two, or three while its
        // cgroup is waited for): what the loop polls is what it watches.
        let watched = if drain.is_some() {
            5
        } else if members_left {
            3
        } else {
            2
        };
        if let Err(e) = sys::poll(&mut fds[..watched], tick) {
            degrade(&mut out, w, Error::Poll(e));
            continue;
        }
        if let Some(d) = drain.as_deref_mut() {
            d.service([sys::ready(&fds[3]), sys::ready(&fds[4])]);
            d.report_progress(chan);
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
                        w.signal(s as i32);
                        ending = true;
                    }
                }
                Control::Disown => pdeath_signal = None,
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
