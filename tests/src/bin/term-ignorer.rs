//! Test helper: a workload that survives SIGTERM. It takes SIGTERM synchronously (blocked +
//! `sigwait`), prints `ready` once, then `term` for every SIGTERM it receives, and never exits by
//! itself: only a signal it cannot take (SIGKILL) ends it.

use refine_tests::say;

fn main() {
    // SAFETY: set is a live sigset_t, initialized by sigemptyset before use; the helper is
    // single-threaded, so changing its own mask affects nothing else.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    };
    say("ready");
    loop {
        let mut sig = 0;
        // SAFETY: set is initialized; sig is a live int.
        if unsafe { libc::sigwait(&set, &mut sig) } == 0 && sig == libc::SIGTERM {
            say("term");
        }
    }
}
