//! Signals, taken synchronously: every signal but the synchronous faults is blocked from the
//! start and read from a signalfd polled alongside the channel. No handlers, no work in signal
//! context. The guardian therefore dies only by `SIGKILL` (G9).
//!
//! Terminal and termination signals are forwarded to the workload while it is unreaped (through
//! its pidfd). The forked child resets the mask and every disposition before `execve`.
//!
//! # Caveats
//! Signals coalesce: two `SIGTERM`s before a read are one. `SIGCHLD` only means "reap now"; the
//! reaper drains `waitpid` until nothing is left, it never counts `SIGCHLD`s.

use crate::error::Error;
use crate::sys::{self, OwnedFd};

/// Faults the kernel raises synchronously; blocking them would hang or kill us obscurely.
const UNBLOCKED: [i32; 7] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGTRAP,
    libc::SIGSYS,
    libc::SIGABRT,
];

pub struct Signals {
    fd: OwnedFd,
}

impl Signals {
    /// Blocks signals and opens the signalfd. Call before anything can be forked.
    pub fn block_all() -> Result<Signals, Error> {
        let fd = sys::block_signals_to_signalfd(&UNBLOCKED).map_err(Error::Signals)?;
        Ok(Signals { fd })
    }

    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// The next pending signal, if any.
    pub fn take(&self) -> Result<Option<i32>, Error> {
        sys::read_signal(&self.fd).map_err(Error::Signals)
    }

    /// Signals that ask the guardian's scope to end.
    pub fn is_termination(sig: i32) -> bool {
        matches!(
            sig,
            libc::SIGTERM | libc::SIGINT | libc::SIGHUP | libc::SIGQUIT
        )
    }

    /// Signals forwarded to the workload (termination, terminal and user signals).
    pub fn is_forwarded(sig: i32) -> bool {
        Self::is_termination(sig)
            || matches!(
                sig,
                libc::SIGUSR1
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
