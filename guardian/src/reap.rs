//! The reap loop (G5–G7, G9): the guardian waits on its signalfd and the channel; after every
//! wake it drains `waitpid(-1, WNOHANG)` until nothing is ready or `ECHILD`. Only `ECHILD` — the
//! kernel saying no child is left — ends the loop and lets the receipt be written.
//!
//! - The workload's own exit is sent at once (`WorkloadExited`, G6); reaping goes on while
//!   descendants (adopted through the subreaper bit) hold the scope.
//! - Termination/terminal signals to the guardian are forwarded to the unreaped workload (G9);
//!   so is a `Signal` frame from the launcher.
//! - Channel end of file = launcher lost (G7): the launch's parent-death signal, if it asked for
//!   one, is sent to the unreaped workload, once; reaping goes on. A launch without one (the
//!   service's: its launches outlive it until recovery) is left running.
//!
//! Nothing here allocates.
//!
//! # Caveats
//! Signals are forwarded to the workload process only, not to its group or adopted orphans:
//! stopping a whole tree is the supervisor's job (SPEC T). Once the workload is reaped its pidfd
//! is closed and nothing is signalled any more.

use refine_protocol::{Frame, WorkloadStatus};

use crate::channel::{Channel, Control};
use crate::error::Error;
use crate::gate::Workload;
use crate::signals::Signals;
use crate::sys::{self, Reaped};

/// What the loop observed.
pub struct Outcome {
    pub status: WorkloadStatus,
    /// `CLOCK_REALTIME` when the workload was reaped; 0 if it never ran.
    pub exited_at_ns: u64,
    pub reaped: u32,
}

/// Reaps until `ECHILD`. `started`: the workload exec'd (otherwise its status is
/// `NeverStarted`, whatever the kernel reports for the gated child).
pub fn until_empty(
    w: &mut Workload,
    chan: &mut Channel,
    signals: &Signals,
    pdeath_signal: Option<u32>,
    started: bool,
) -> Result<Outcome, Error> {
    let mut out = Outcome {
        status: WorkloadStatus::Unknown,
        exited_at_ns: 0,
        reaped: 0,
    };
    loop {
        // Drain every exited child, then sleep until the next signal or frame.
        loop {
            match sys::reap_one().map_err(Error::Wait)? {
                Reaped::Child(pid, raw) => {
                    out.reaped = out.reaped.saturating_add(1);
                    if pid == w.pid {
                        w.pidfd = None;
                        out.status = if started {
                            status_of(raw)
                        } else {
                            WorkloadStatus::NeverStarted
                        };
                        out.exited_at_ns = if started { sys::realtime_ns() } else { 0 };
                        chan.send(&Frame::WorkloadExited {
                            status: out.status,
                            at_ns: out.exited_at_ns,
                        });
                    }
                }
                Reaped::None => break,
                Reaped::NoChildren => return Ok(out),
            }
        }
        let mut fds = [sys::poll_in(signals.fd()), sys::poll_none()];
        if chan.is_open() {
            fds[1] = sys::poll_in(chan.fd());
        }
        if sys::poll(&mut fds, -1).is_err() {
            // Only ENOMEM is possible here, and it is transient: never leave the scope
            // unreaped over it; drain again and retry.
            continue;
        }
        if sys::ready(&fds[0]) {
            while let Some(sig) = signals.take()? {
                if Signals::is_forwarded(sig) {
                    w.signal(sig);
                }
            }
        }
        if chan.is_open() && sys::ready(&fds[1]) {
            match chan.recv_control() {
                Control::Signal(signo) if (1..=64).contains(&signo) => w.signal(signo),
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
