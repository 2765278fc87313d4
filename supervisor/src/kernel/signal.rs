//! The one way to signal a managed process: through a pidfd whose target was verified against
//! its witness after the pidfd was opened.
//!
//! [`Verified::open`] calls `pidfd_open(pid)`, then re-reads `/proc/PID/stat` and compares the
//! start time with the witness. The pidfd pins the process it was opened for, so if the start time
//! read *after* opening matches, the pidfd names the witnessed process and every later
//! `pidfd_send_signal` reaches it or nobody (`ESRCH` once it has been reaped) — never a process
//! that reused the pid.
//!
//! [`signal_group`] sends to a process group (`kill(-pgid)`) only when a verified member held by
//! pidfd currently belongs to that group, and never for a group id of 1 or less: `kill(-1)` as root
//! signals every process on the machine, `kill(0)` the caller's own group.
//!
//! # Caveats
//! A start time has the resolution of a clock tick (10 ms): a pid that is freed and reused within
//! the same tick is indistinguishable by it. Holding the pidfd from discovery to the last signal
//! (as the stop does) leaves only the instant between a scan and `pidfd_open` exposed, and pids
//! are handed out cyclically, so a reuse there needs the pid space to wrap within that instant.
//!
//! A group signal reaches whoever is in the group when the kernel delivers it; the verified member
//! keeps the group id from being reused, but a process that joins the group (`setpgid`) between the
//! check and the send is signalled too. Stops therefore signal each witnessed process individually
//! and use the group signal only for the graceful SIGTERM. Signals to a zombie succeed and do
//! nothing.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use refine_protocol::ProcessWitness;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use rustix::process::{kill_process_group, pidfd_open, pidfd_send_signal, Pid, PidfdFlags};

pub use rustix::process::Signal;

use crate::kernel::procfs::{self, ProcfsError, Stat};

/// The one signal-name table: what [`parse`] reads (without `SIG`), what completion offers
/// ([`NAMES`]) and what the views print beside a number ([`name`]). Kept here rather than
/// taken from `nix` (not a dependency) or rustix (`Signal` has no names).
const TABLE: [(&str, i32); 14] = [
    ("TERM", libc::SIGTERM),
    ("INT", libc::SIGINT),
    ("HUP", libc::SIGHUP),
    ("QUIT", libc::SIGQUIT),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("USR2", libc::SIGUSR2),
    ("ALRM", libc::SIGALRM),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("WINCH", libc::SIGWINCH),
    ("ABRT", libc::SIGABRT),
    ("SEGV", libc::SIGSEGV),
    ("PIPE", libc::SIGPIPE),
];

/// The names of [`TABLE`], in its order.
pub const NAMES: [&str; TABLE.len()] = {
    let mut out = [""; TABLE.len()];
    let mut i = 0;
    while i < TABLE.len() {
        out[i] = TABLE[i].0;
        i += 1;
    }
    out
};

/// The short name of signal number `n` (`KILL` for 9), when the table has it.
pub fn name(n: i32) -> Option<&'static str> {
    TABLE.iter().find(|&&(_, v)| v == n).map(|&(name, _)| name)
}

/// Parses a signal as operators write it: a name (`TERM`, `SIGTERM`, `term`) or a number (`15`);
/// the one reading of `stop --signal` and of the service API's stop `signal`.
pub fn parse(text: &str) -> Result<Signal, String> {
    let t = text.trim();
    let upper = t.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let raw = match TABLE.iter().find(|&&(n, _)| n == name) {
        Some(&(_, raw)) => raw,
        None => name.parse().unwrap_or(0),
    };
    Signal::from_named_raw(raw)
        .ok_or_else(|| format!("{text:?} is not a signal (examples: TERM, INT, HUP, USR1, 15)"))
}

#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    /// The witnessed process no longer exists (exited and reaped).
    #[error("process {0:?} is gone")]
    Gone(ProcessWitness),
    /// The pid now names another process (PID reuse): nothing was signalled.
    #[error("pid {} now names another process (start time {found}, witness {})", .witness.pid, .witness.start_time)]
    Reused { witness: ProcessWitness, found: u64 },
    /// The witness holds no valid pid (0 or out of range).
    #[error("witness {0:?} holds no valid pid")]
    InvalidPid(ProcessWitness),
    /// A group id of 1 or less is never signalled.
    #[error("refusing to signal process group {0}")]
    InvalidGroup(i32),
    /// The verified process is not (or no longer) a member of the group.
    #[error("process {pid} is not in process group {pgid}")]
    NotMember { pid: u32, pgid: i32 },
    #[error("cannot {op} for pid {pid}")]
    Os {
        op: &'static str,
        pid: u32,
        #[source]
        source: Errno,
    },
    #[error(transparent)]
    Procfs(#[from] ProcfsError),
}

/// A process held by a pidfd and verified to be its witness.
#[derive(Debug)]
pub struct Verified {
    pidfd: OwnedFd,
    pid: Pid,
    witness: ProcessWitness,
}

impl Verified {
    /// Opens a pidfd for `witness.pid`, then verifies the start time (see the module docs).
    pub fn open(witness: ProcessWitness) -> Result<Verified, SignalError> {
        Verified::open_with_stat(witness).map(|(v, _)| v)
    }

    /// [`Verified::open`], also returning the stat read for the verification (the process's
    /// state right after the pidfd was opened), so a caller need not read it again.
    pub(crate) fn open_with_stat(witness: ProcessWitness) -> Result<(Verified, Stat), SignalError> {
        let pid = procfs::pid_of(&witness).ok_or(SignalError::InvalidPid(witness))?;
        let pinned = Pinned::open(pid)?.ok_or(SignalError::Gone(witness))?;
        // After opening: the pidfd pins the process, so a matching start time proves identity.
        let found = match procfs::stat(pid) {
            Ok(s) => s,
            Err(e) if e.is_vanished() => return Err(SignalError::Gone(witness)),
            Err(e) => return Err(e.into()),
        };
        if found.start_time != witness.start_time {
            return Err(SignalError::Reused {
                witness,
                found: found.start_time,
            });
        }
        Ok((pinned.verified(witness), found))
    }

    pub fn witness(&self) -> ProcessWitness {
        self.witness
    }

    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Sends `sig` to exactly this process. [`SignalError::Gone`] once it has been reaped.
    #[doc(alias = "pidfd_send_signal")]
    pub fn signal(&self, sig: Signal) -> Result<(), SignalError> {
        match pidfd_send_signal(&self.pidfd, sig) {
            Ok(()) => Ok(()),
            Err(Errno::SRCH) => Err(SignalError::Gone(self.witness)),
            Err(source) => Err(SignalError::Os {
                op: "pidfd_send_signal",
                pid: self.witness.pid,
                source,
            }),
        }
    }

    /// The current stat of this process; `None` once it has been reaped.
    pub fn stat(&self) -> Result<Option<Stat>, SignalError> {
        // A reaped pid may be reused: `stat_of` compares the start time.
        Ok(procfs::stat_of(&self.witness)?)
    }

    /// Whether the process has exited (the pidfd polls readable; zombies count as exited).
    pub fn has_exited(&self) -> Result<bool, SignalError> {
        self.wait_exit(Some(std::time::Duration::ZERO))
    }

    /// Waits up to `timeout` (`None`: forever) for the process to exit; returns whether it did.
    pub(crate) fn wait_exit(
        &self,
        timeout: Option<std::time::Duration>,
    ) -> Result<bool, SignalError> {
        let ts = timeout.map(|d| rustix::time::Timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: d.subsec_nanos() as _,
        });
        loop {
            let mut fds = [PollFd::new(&self.pidfd, PollFlags::IN)];
            match poll(&mut fds, ts.as_ref()) {
                Ok(n) => return Ok(n > 0),
                Err(Errno::INTR) => continue,
                Err(source) => {
                    return Err(SignalError::Os {
                        op: "poll pidfd",
                        pid: self.witness.pid,
                        source,
                    })
                }
            }
        }
    }
}

/// A pidfd opened for a pid before anything about the process was read: the first half of a
/// verification, for a scan that has no witness yet (the stop's discovery opens one for each
/// process it finds, then reads its stat once). The pidfd pins the process, so the start time in
/// a stat read *after* [`Pinned::open`] is the pinned process's own: [`Pinned::verified`] makes
/// the witness from it, and every signal through the result reaches that process or nobody.
#[derive(Debug)]
pub struct Pinned {
    pidfd: OwnedFd,
    pid: Pid,
}

impl Pinned {
    /// `pidfd_open(pid)`; `None` when no such process exists.
    pub fn open(pid: Pid) -> Result<Option<Pinned>, SignalError> {
        match pidfd_open(pid, PidfdFlags::empty()) {
            Ok(pidfd) => Ok(Some(Pinned { pidfd, pid })),
            Err(Errno::SRCH) => Ok(None),
            Err(source) => Err(SignalError::Os {
                op: "pidfd_open",
                pid: pid.as_raw_nonzero().get() as u32,
                source,
            }),
        }
    }

    /// The verified process, given its `witness` as a stat of this pid read after
    /// [`Pinned::open`] shows it (the caller's contract; another pid is a bug, caught in debug
    /// builds).
    pub fn verified(self, witness: ProcessWitness) -> Verified {
        debug_assert_eq!(procfs::pid_of(&witness), Some(self.pid));
        Verified {
            pidfd: self.pidfd,
            pid: self.pid,
            witness,
        }
    }
}

impl AsFd for Verified {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }
}

/// Sends `sig` to process group `pgid`, only if `member` (verified, held by pidfd) is in it now,
/// and never for a group id of 1 or less.
#[doc(alias = "killpg")]
pub fn signal_group(member: &Verified, pgid: i32, sig: Signal) -> Result<(), SignalError> {
    let group = checked_group(pgid)?;
    let now = procfs::stat_of(&member.witness)?.ok_or(SignalError::Gone(member.witness))?;
    if now.pgid != pgid || now.state.is_exited() {
        return Err(SignalError::NotMember {
            pid: member.witness.pid,
            pgid,
        });
    }
    match kill_process_group(group, sig) {
        Ok(()) => Ok(()),
        Err(Errno::SRCH) => Err(SignalError::Gone(member.witness)),
        Err(source) => Err(SignalError::Os {
            op: "kill(-pgid)",
            pid: member.witness.pid,
            source,
        }),
    }
}

/// The group id as a [`Pid`], refusing 1 or less (`kill(-1)` is every process, `kill(0)` our own
/// group, and negative values are not group ids).
pub(crate) fn checked_group(pgid: i32) -> Result<Pid, SignalError> {
    if pgid <= 1 {
        return Err(SignalError::InvalidGroup(pgid));
    }
    Pid::from_raw(pgid).ok_or(SignalError::InvalidGroup(pgid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_completed_name_parses() {
        for name in NAMES {
            let sig = parse(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(super::name(sig.as_raw()), Some(name), "one table both ways");
        }
        assert_eq!(super::name(9), Some("KILL"));
        assert_eq!(super::name(64), None);
    }

    #[test]
    fn never_a_group_at_or_below_one() {
        for pgid in [i32::MIN, -5, -1, 0, 1] {
            assert!(matches!(
                checked_group(pgid),
                Err(SignalError::InvalidGroup(g)) if g == pgid
            ));
        }
        assert!(checked_group(2).is_ok());
    }

    #[test]
    fn a_wrong_start_time_is_refused() {
        let me = procfs::stat(rustix::process::getpid()).unwrap().witness();
        assert!(Verified::open(me).is_ok());
        let stale = ProcessWitness {
            start_time: me.start_time + 7,
            ..me
        };
        assert!(matches!(
            Verified::open(stale),
            Err(SignalError::Reused { .. })
        ));
        assert!(matches!(
            Verified::open(ProcessWitness {
                pid: 0,
                start_time: 1
            }),
            Err(SignalError::InvalidPid(_))
        ));
    }
}
