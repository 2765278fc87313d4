//! Test helper: a workload that prints the number of every signal it receives, one per line, in
//! the order it takes them. Every signal but SIGKILL and SIGSTOP is blocked and taken
//! synchronously (`sigwaitinfo`), so none ends, stops or continues it by its action; it prints
//! `ready` once the mask is set, and never exits by itself.

use refine_tests::say;

fn main() {
    // SAFETY: set is a live sigset_t, filled by sigfillset before use (SIGKILL and SIGSTOP
    // cannot be blocked and are left to the kernel); the helper is single-threaded, so its own
    // mask affects nothing else.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        set
    };
    say("ready");
    loop {
        // SAFETY: set is initialized; no siginfo is requested (null).
        let sig = unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) };
        if sig > 0 {
            say(sig);
        }
    }
}
