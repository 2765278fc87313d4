//! Test helper: what a process can do to another one (SPEC X3: a gated child of `run --user`
//! must be out of the target user's reach until its `execve`).
//!
//! `gate-poke PID` prints `kill ok|ERRNO` (signal 0: the permission check only), then
//! `getfd N ok|ERRNO` for descriptors 0..16 of PID (`pidfd_getfd`), or `pidfd ERRNO` when PID
//! cannot be opened.

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
}

fn main() {
    let pid: i32 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("PID");
    // SAFETY: kill with signal 0 sends nothing; it only checks existence and permission.
    match unsafe { libc::kill(pid, 0) } {
        0 => println!("kill ok"),
        _ => println!("kill {}", errno()),
    }
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        println!("pidfd {}", errno());
        return;
    }
    for fd in 0..16 {
        // SAFETY: pidfd_getfd takes a pidfd, a descriptor number and flags; it returns a new
        // descriptor of this process or -1.
        let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) };
        if got >= 0 {
            println!("getfd {fd} ok");
        } else {
            println!("getfd {fd} {}", errno());
        }
    }
}
