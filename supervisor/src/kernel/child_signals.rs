//! A clean `SIGCHLD` for every supervisor process that waits for a child (G11).
//!
//! Dispositions set to `SIG_IGN` survive `execve`: a parent that ignores `SIGCHLD` and then
//! execs `refine-supervisor` makes the kernel reap its children itself, so `waitpid` on the
//! guardian (or on the login shell that `env_policy` captures) finds no status, only `ECHILD`.
//! A blocked `SIGCHLD` likewise survives and would keep a signal-driven child reaper asleep.
//! [`reset`] runs first thing in `main`, before any thread exists: `SIGCHLD` back to `SIG_DFL`
//! and unblocked; every thread started later inherits the mask.
//!
//! [`Blocked`] serves `run`'s signal relay (W2): the relayed signals are blocked while the
//! process is still single-threaded (every thread inherits the mask) and taken one by one with
//! a `signalfd` that `run`'s main thread polls beside the end of its launch — one
//! `pthread_sigmask` instead of a handler per signal, and no relay thread.
//!
//! # Safety
//! The only `unsafe` of the crate: `sigaction`, `pthread_sigmask` and `signalfd` on local,
//! initialized `libc` structures, while the process is single-threaded (nothing has installed
//! a `SIGCHLD` handler yet that this could displace; no thread exists that the mask would miss).
#![allow(unsafe_code)]

/// The signal state this process inherited, read by [`capture_inherited`].
static INHERITED: std::sync::OnceLock<refine_protocol::frame::SignalState> =
    std::sync::OnceLock::new();

/// Reads the signal state this process inherited (W10): the signals set to `SIG_IGN` and the
/// blocked mask. Call first thing in `main`, before [`reset`] or anything else changes them.
/// `SIGPIPE` is left out: the Rust runtime ignores it before `main`, so whether the caller did
/// cannot be told (the workload gets it at its default, W3).
pub fn capture_inherited() {
    let mut st = refine_protocol::frame::SignalState::default();
    // SAFETY: `old` and `mask` are local and zero-initialized; sigaction with a null new action
    // only reads the current one (signals libc keeps for itself fail with EINVAL and are left
    // out); pthread_sigmask with a null new set only reads the mask; sigismember reads `mask`.
    unsafe {
        for sig in 1..=64 {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP || sig == libc::SIGPIPE {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
            {
                st.ignored |= 1 << (sig - 1);
            }
        }
        let mut mask: libc::sigset_t = std::mem::zeroed();
        if libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut mask) == 0 {
            for sig in 1..=64 {
                if sig != libc::SIGKILL
                    && sig != libc::SIGSTOP
                    && libc::sigismember(&mask, sig) == 1
                {
                    st.blocked |= 1 << (sig - 1);
                }
            }
        }
    }
    let _ = INHERITED.set(st);
}

/// What [`capture_inherited`] read (a clean state if it was not called).
pub fn inherited() -> refine_protocol::frame::SignalState {
    INHERITED.get().copied().unwrap_or_default()
}

/// Whether `sig` was inherited as `SIG_IGN` ([`capture_inherited`]).
pub fn inherited_ignored(sig: i32) -> bool {
    (1..=64).contains(&sig) && inherited().ignored & (1 << (sig - 1)) != 0
}

/// Sets `SIGCHLD` to `SIG_DFL` and unblocks it in the calling thread. Call at the start of
/// `main`, before any thread is spawned. Best effort: the calls cannot fail for `SIGCHLD`.
pub fn reset() {
    // SAFETY: `action` and `set` are local, zero-initialized and then filled by sigemptyset /
    // sigaddset; SIG_DFL with no flags is a valid action for SIGCHLD; the old values are not
    // requested (null); the process is single-threaded (module docs).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut());
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// Unblocks `signals` in the calling thread (the service, once its handlers for them are in
/// place: an upgrade's `execve` carries them blocked, so that one sent meanwhile waits for the
/// handler instead of ending the new image by the default action).
pub fn unblock(signals: &[i32]) {
    let set = set_of(signals);
    // SAFETY: `set` is an initialized set; the old mask is not requested (null).
    unsafe {
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// The set of `signals`; invalid numbers are refused by sigaddset (EINVAL) and left out.
fn set_of(signals: &[i32]) -> libc::sigset_t {
    // SAFETY: `set` is local and initialized by sigemptyset before sigaddset fills it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &sig in signals {
            libc::sigaddset(&mut set, sig);
        }
        set
    }
}

/// A set of signals blocked in every thread of the process, to be read from [`Blocked::signalfd`].
#[derive(Debug, Clone, Copy)]
pub struct Blocked(libc::sigset_t);

impl Blocked {
    /// Blocks `signals` in the calling thread (and so in every thread it starts later). Call
    /// while the process is single-threaded: a thread started before would take them itself.
    pub fn block(signals: &[i32]) -> Blocked {
        let set = set_of(signals);
        // SAFETY: `set` is an initialized set; the old mask is not requested (null).
        unsafe {
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
        Blocked(set)
    }

    /// A non-blocking, close-on-exec `signalfd` that reads these signals (one at a time with
    /// [`read_signal`]); they stay blocked, so they are queued for it instead of delivered.
    pub fn signalfd(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::FromRawFd;
        // SAFETY: `self.0` is an initialized set; -1 asks for a new descriptor, which is owned
        // here alone once the call succeeds.
        let fd = unsafe { libc::signalfd(-1, &self.0, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by signalfd and nothing else owns it.
        Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
    }
}

/// One signal read from a [`Blocked::signalfd`]: its number and who sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// The signal's number.
    pub signo: i32,
    /// `ssi_code`: `SI_USER` (0) for `kill`, `SI_TKILL`/`SI_QUEUE` for `tgkill`/`sigqueue`.
    pub code: i32,
    /// `ssi_pid`: the sending process (for a signal the kernel raised on a process's behalf,
    /// such as the `SIGPIPE` of a write to a broken pipe, that process itself).
    pub pid: u32,
}

impl Taken {
    /// Whether another process sent this signal with `kill`, `tgkill` or `sigqueue`. The
    /// kernel's `SIGPIPE` for a write of this process to a broken pipe reads as `SI_USER` from
    /// this process itself (`send_sig` without info), so it is not.
    pub fn sent_by_another_process(&self) -> bool {
        matches!(self.code, libc::SI_USER | libc::SI_TKILL | libc::SI_QUEUE)
            && self.pid != std::process::id()
    }
}

/// The next signal queued for a [`Blocked::signalfd`], or `None` when none is pending.
pub fn read_signal(fd: std::os::fd::BorrowedFd<'_>) -> Option<Taken> {
    // One `struct signalfd_siginfo` (128 bytes): `ssi_signo` (u32) at 0, `ssi_errno` (i32) at
    // 4, `ssi_code` (i32) at 8, `ssi_pid` (u32) at 12.
    let mut info = [0u8; 128];
    let word = |info: &[u8; 128], at: usize| {
        u32::from_ne_bytes([info[at], info[at + 1], info[at + 2], info[at + 3]])
    };
    loop {
        match rustix::io::read(fd, &mut info) {
            Ok(n) if n == info.len() => {
                let signo = i32::try_from(word(&info, 0)).ok()?;
                return Some(Taken {
                    signo,
                    code: i32::from_ne_bytes(word(&info, 8).to_ne_bytes()),
                    pid: word(&info, 12),
                });
            }
            Err(rustix::io::Errno::INTR) => {}
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Taken;

    /// The kernel's `SIGPIPE` for this process's own write reads as `SI_USER` from itself: not
    /// forwarded; one that another process sent with `kill`, `tgkill` or `sigqueue` is.
    #[test]
    fn a_signal_from_another_process_is_told_from_the_kernels_own() {
        let me = std::process::id();
        let other = me.wrapping_add(1).max(2);
        let taken = |code, pid| Taken {
            signo: libc::SIGPIPE,
            code,
            pid,
        };
        assert!(!taken(libc::SI_USER, me).sent_by_another_process());
        assert!(!taken(libc::SI_KERNEL, 0).sent_by_another_process());
        assert!(taken(libc::SI_USER, other).sent_by_another_process());
        assert!(taken(libc::SI_TKILL, other).sent_by_another_process());
        assert!(taken(libc::SI_QUEUE, other).sent_by_another_process());
    }
}
