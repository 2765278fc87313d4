//! Test helper: leaves a detached grandchild behind and exits 7.
//!
//! The middle child calls `setsid` and forks the grandchild, then exits at once, so the
//! grandchild is orphaned and reparented to the nearest child subreaper (or init). The grandchild
//! writes `grandchild PID` on stdout and then holds the scope until its stdin reaches end of file
//! (whoever holds the write end decides when it exits). The top process reaps only its own middle
//! child, by pid.

fn main() {
    // SAFETY: this helper is single-threaded; both children only make the raw calls below
    // (setsid, fork, write, read, _exit) before exiting.
    let middle = unsafe { libc::fork() };
    if middle == 0 {
        // SAFETY: see above.
        unsafe {
            libc::setsid();
            let grandchild = libc::fork();
            if grandchild == 0 {
                let mut line = [0u8; 32];
                let text = format_pid(libc::getpid(), &mut line);
                libc::write(1, text.as_ptr().cast(), text.len());
                let mut buf = [0u8; 64];
                while libc::read(0, buf.as_mut_ptr().cast(), buf.len()) > 0 {}
                libc::_exit(0);
            }
            libc::_exit(if grandchild > 0 { 0 } else { 1 });
        }
    }
    assert!(middle > 0, "fork failed");
    let mut status = 0;
    // SAFETY: waits for our own child by pid; status is a live int.
    let r = unsafe { libc::waitpid(middle, &mut status, 0) };
    assert_eq!(r, middle);
    std::process::exit(7);
}

/// `grandchild PID\n` into `buf` without allocating (used after fork).
fn format_pid(pid: libc::pid_t, buf: &mut [u8; 32]) -> &[u8] {
    let prefix = b"grandchild ";
    buf[..prefix.len()].copy_from_slice(prefix);
    let mut digits = [0u8; 12];
    let mut n = pid as u32;
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let d = &digits[i..];
    buf[prefix.len()..prefix.len() + d.len()].copy_from_slice(d);
    buf[prefix.len() + d.len()] = b'\n';
    &buf[..prefix.len() + d.len() + 1]
}
