//! A clean `SIGCHLD` for every supervisor process that waits for a child (G11).
//!
//! Dispositions set to `SIG_IGN` survive `execve`: a parent that ignores `SIGCHLD` and then
//! execs `refine-supervisor` makes the kernel reap its children itself, so `waitpid` on the
//! guardian (or on the login shell that `env_policy` captures) finds no status, only `ECHILD`.
//! A blocked `SIGCHLD` likewise survives and would keep a signal-driven child reaper asleep.
//! [`reset`] runs first thing in `main`, before any thread exists: `SIGCHLD` back to `SIG_DFL`
//! and unblocked; every thread started later inherits the mask.
//!
//! # Safety
//! The only `unsafe` of the crate: `sigaction` and `pthread_sigmask` on local, initialized
//! `libc` structures, while the process is single-threaded (nothing has installed a `SIGCHLD`
//! handler yet that this could displace).
#![allow(unsafe_code)]

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
