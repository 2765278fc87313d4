//! A stand-in: a forked copy of this process that works while this one is stopped.
//!
//! Job control stops a whole process (every thread): a `run` stopped by `SIGTSTP` reads
//! nothing, so whatever of its workload still runs would write into full pipes, where without
//! the wrapper it writes to the terminal. [`fork`] gives a copy that keeps working (the
//! capture's [`crate::launch::capture::Capture::flowing_while_stopped`]), since a stop of this
//! process does not stop another one.
//!
//! The copy has one thread, the one that forked: it must take no lock another thread may have
//! held at the fork. It makes only system calls (read, write, poll) and allocates through the
//! C library's `malloc`, which glibc makes usable in such a child; it never logs, never prints
//! through `std`'s locked streams, and ends with [`exit_now`] (no destructor, no `atexit`).
//! All its signals are blocked ([`block_all_signals`]): it is in this process's group, so a
//! terminal's `SIGINT` or `SIGTSTP` would reach it too.
//!
//! # Safety
//! `fork`, `_exit`, `sigprocmask` and `waitpid` on local, initialized values; the contract of the
//! child's side is the paragraph above, which the one caller keeps.
#![allow(unsafe_code)]

use rustix::process::Pid;

/// Which side of a [`fork`] this is.
pub enum Forked {
    /// The copy: do the work, then [`exit_now`].
    Child,
    /// This process, with the copy's pid.
    Parent(Pid),
}

/// Forks a copy of this process (see the module docs for what the copy may do).
pub fn fork() -> std::io::Result<Forked> {
    // SAFETY: fork has no memory preconditions; the child side keeps the module's contract
    // (system calls and malloc only, no lock another thread held, ends with `_exit`).
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(std::io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        pid => {
            Ok(Forked::Parent(Pid::from_raw(pid).ok_or_else(|| {
                std::io::Error::other("fork returned pid 0")
            })?))
        }
    }
}

/// Blocks every signal the kernel lets block (in the copy: it is no one's to signal).
pub fn block_all_signals() {
    // SAFETY: a local sigset_t filled by sigfillset before use; no old mask is asked for.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// Ends the copy at once: no destructor, no `atexit` handler, no flush of `std`'s buffers.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit has no preconditions and does not return.
    unsafe { libc::_exit(code) }
}

/// Reaps the copy `pid` (this process's own child, so its pid is not reused before this).
pub fn reap(pid: Pid) {
    loop {
        let mut status = 0;
        // SAFETY: waitpid on our own child's pid with a local status word.
        let r = unsafe { libc::waitpid(pid.as_raw_nonzero().get(), &mut status, 0) };
        if r != -1 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}
