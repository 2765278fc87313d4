//! The terminal's foreground process group (`tcgetpgrp`, `tcsetpgrp`; SPEC W15): what a
//! job-control shell does for its jobs, done by `run` for its workload.
//!
//! The guardian puts the workload in a process group of its own (so that a stop can signal the
//! whole group). On a terminal that leaves `run`'s group in the foreground, and the terminal's
//! `SIGINT`, `SIGTSTP` and `SIGQUIT` would reach `run` alone. [`Foreground::give`] makes the
//! workload's group the foreground one once its group exists and before it is told to start,
//! so that those keys reach the whole job as they would the bare command, and a shell under
//! `run` (`bash -i`, `bash -m`) finds the terminal its own and gets job control.
//!
//! # Caveats
//! - Only a terminal that is this process's controlling terminal, with this process's group in
//!   its foreground and no other process in that group, is claimed ([`Foreground::claim`]):
//!   what a job-control shell gives a job of its own. A pipeline (`run cmd | less`) or a shell
//!   without job control (a script) shares the group, and handing the terminal away would put
//!   those processes in the background; they keep the relay of W9 instead.
//! - `tcsetpgrp` from a background group is refused with `SIGTTOU` unless the caller has it
//!   blocked or ignored: `run` blocks every signal it relays, `SIGTTOU` among them.
//! - A process killed with `SIGKILL` gives nothing back. The shell that started `run` takes its
//!   terminal back when its job ends, as every job-control shell does for every job (bash's
//!   `give_terminal_to` after `waitpid`); since only such a shell's job claims the terminal,
//!   there is always one to do it. The workload's group is then ended by the guardian (W16).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::process::Pid;

/// This process's controlling terminal, claimed for a workload's group.
#[derive(Debug)]
pub struct Foreground {
    tty: OwnedFd,
    /// This process's group, which had the terminal when it was claimed.
    own: Pid,
    /// The group the terminal was given to (0: none yet).
    given: AtomicI32,
}

impl Foreground {
    /// `fd` as a terminal this process may hand on: its controlling terminal, whose foreground
    /// group is this process's group, in which no other process is (see the caveats). `None`
    /// otherwise, and for anything that is not a terminal.
    pub fn claim(fd: BorrowedFd<'_>) -> Option<Foreground> {
        if !rustix::termios::isatty(fd) {
            return None;
        }
        let own = rustix::process::getpgrp();
        // Not our controlling terminal: `ENOTTY`.
        let foreground = rustix::termios::tcgetpgrp(fd).ok()?;
        if foreground != own || !alone_in_group(own) {
            return None;
        }
        let tty = rustix::io::fcntl_dupfd_cloexec(fd, 3).ok()?;
        Some(Foreground {
            tty,
            own,
            given: AtomicI32::new(0),
        })
    }

    /// Makes `pgid` the terminal's foreground group.
    pub fn give(&self, pgid: u32) -> io::Result<()> {
        let group = i32::try_from(pgid)
            .ok()
            .and_then(Pid::from_raw)
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        rustix::termios::tcsetpgrp(self.tty.as_fd(), group)?;
        self.given
            .store(group.as_raw_nonzero().get(), Ordering::Relaxed);
        Ok(())
    }

    /// The group the terminal was given to.
    pub fn given(&self) -> Option<Pid> {
        Pid::from_raw(self.given.load(Ordering::Relaxed))
    }

    fn foreground(&self) -> Option<Pid> {
        rustix::termios::tcgetpgrp(self.tty.as_fd()).ok()
    }

    /// Whether the group the terminal was given to has it now.
    pub fn held_by_given(&self) -> bool {
        self.given().is_some() && self.foreground() == self.given()
    }

    /// Gives the terminal to the workload's group again when this process's group has it
    /// (`fg` after a stop); a `bg` leaves it to whoever has it.
    pub fn give_again(&self) {
        if let Some(g) = self.given() {
            if self.foreground() == Some(self.own) {
                let _ = rustix::termios::tcsetpgrp(self.tty.as_fd(), g);
            }
        }
    }

    /// Takes the terminal back for this process's group when the workload's group has it, or
    /// when the group that has it has no process left (a group of the workload's that ended
    /// holding it). A terminal that someone else took (the shell, after a `bg`) stays theirs.
    pub fn take_back(&self) {
        let Some(given) = self.given() else { return };
        let Some(now) = self.foreground() else { return };
        if now == self.own {
            return;
        }
        let empty = rustix::process::test_kill_process_group(now)
            .is_err_and(|e| e == rustix::io::Errno::SRCH);
        if now == given || empty {
            if let Err(e) = rustix::termios::tcsetpgrp(self.tty.as_fd(), self.own) {
                tracing::warn!(error = %e, "cannot take the terminal back");
            }
        }
    }
}

/// Whether no process but this one is in process group `pgid` (a thread is not listed in
/// `/proc`; a process that vanishes while it is read is not counted).
fn alone_in_group(pgid: Pid) -> bool {
    let me = rustix::process::getpid();
    let Ok(pids) = super::procfs::all_pids() else {
        return false;
    };
    !pids
        .into_iter()
        .filter(|&p| p != me)
        .any(|p| super::procfs::stat(p).is_ok_and(|st| st.pgid == pgid.as_raw_nonzero().get()))
}
