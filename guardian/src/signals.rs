//! Signals, taken synchronously (G9, G11, G12): at start every inherited disposition is reset
//! to `SIG_DFL` and every signal is blocked (a fresh mask, `SIG_SETMASK`: nothing depends on the
//! mask the launcher left), then read from a signalfd polled alongside the channel. No handlers,
//! no work in signal context.
//!
//! What another process sends is either forwarded to the workload (termination, terminal and
//! user signals, through its pidfd, while it is unreaped) or absorbed: `SIGCHLD` only means
//! "reap now", and everything else — the fault signals `SEGV`, `BUS`, `ILL`, `FPE`, `TRAP`,
//! `SYS`, `ABRT` sent with `kill`, `SIGPIPE`, the real-time signals — is read and dropped. So
//! only `SIGKILL` ends the guardian (and `SIGSTOP` pauses it). A *real* fault in the guardian
//! still ends it: the kernel delivers a synchronous fault with `force_sig`, which unblocks the
//! signal and restores its default action first; blocking the fault signals cannot hang it. The
//! forked child resets the mask and every disposition before `execve`.
//!
//! # Caveats
//! Signals coalesce: two `SIGTERM`s before a read are one. `SIGCHLD` only means "reap now"; the
//! reaper drains `waitpid` until nothing is left, it never counts `SIGCHLD`s.

use crate::error::Error;
use crate::sys::{self, OwnedFd};

pub struct Signals {
    fd: OwnedFd,
}

impl Signals {
    /// Resets every inherited disposition, blocks every signal and opens the signalfd. Call
    /// before anything can be forked.
    pub fn block_all() -> Result<Signals, Error> {
        sys::reset_dispositions();
        let fd = sys::block_signals_to_signalfd(&[]).map_err(Error::Signals)?;
        Ok(Signals { fd })
    }

    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// The next pending signal, if any.
    pub fn take(&self) -> Result<Option<i32>, Error> {
        sys::read_signal(&self.fd).map_err(Error::SignalRead)
    }

    /// Signals that ask the guardian's scope to end: only `SIGTERM` and `SIGINT` (W9). Before
    /// the workload runs they abort it; `SIGHUP`, `SIGQUIT` and the rest are queued for the
    /// program and follow its `execve` (a daemon's reload is not an end).
    pub fn is_termination(sig: i32) -> bool {
        matches!(sig, libc::SIGTERM | libc::SIGINT)
    }

    /// Signals forwarded to the workload (termination, terminal and user signals); every other
    /// one is absorbed.
    pub fn is_forwarded(sig: i32) -> bool {
        Self::is_termination(sig)
            || matches!(
                sig,
                libc::SIGHUP
                    | libc::SIGQUIT
                    | libc::SIGUSR1
                    | libc::SIGUSR2
                    | libc::SIGWINCH
                    | libc::SIGALRM
                    | libc::SIGCONT
                    | libc::SIGTSTP
                    | libc::SIGTTIN
                    | libc::SIGTTOU
            )
    }
}
