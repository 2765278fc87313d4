//! Test helper: what a workload can do with its caller's terminal (SPEC X2), run under
//! `run --user`.
//!
//! `tty-probe DIR` writes `DIR/workload` (`tty_nr N`, field 7 of `/proc/self/stat`, then one
//! `fd N TARGET` line per open descriptor), forks a child and exits. The child, left behind
//! (the guardian adopts it), waits until its parent is gone, then until the test opens and
//! closes the FIFO `DIR/go`, and then tries to type into a terminal: it opens `/dev/tty` and
//! calls `TIOCSTI` with `echo PWNED` on it and on fds 0, 1, 2. It writes `DIR/child` (through a
//! rename, so the file appears whole): `tty ok` or `tty ERRNO`, and `tiocsti FD ok|ERRNO`.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::Path;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
}

/// `TIOCSTI` of every byte of `text` on `fd`: `ok`, or the first errno.
fn inject(fd: i32, text: &[u8]) -> String {
    for b in text {
        // SAFETY: TIOCSTI reads one byte through the pointer, which points at a live byte.
        if unsafe { libc::ioctl(fd, libc::TIOCSTI, b as *const u8) } != 0 {
            return errno().to_string();
        }
    }
    "ok".to_owned()
}

fn main() {
    let dir = Path::new(&std::env::args().nth(1).expect("DIR")).to_owned();
    let stat = std::fs::read_to_string("/proc/self/stat").expect("stat");
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    // Fields after the comm: state ppid pgrp session tty_nr ...
    let tty_nr = after.split(' ').nth(4).expect("tty_nr");
    let mut report = format!("tty_nr {tty_nr}\n");
    for e in std::fs::read_dir("/proc/self/fd")
        .expect("fd dir")
        .flatten()
    {
        let target = std::fs::read_link(e.path()).unwrap_or_default();
        report.push_str(&format!(
            "fd {} {}\n",
            e.file_name().to_string_lossy(),
            target.display()
        ));
    }
    std::fs::write(dir.join("workload"), report).expect("write the report");

    let (r, w) = std::io::pipe().expect("pipe");
    // SAFETY: this process has one thread; the child only makes plain calls and exits.
    let pid = unsafe { libc::fork() };
    if pid != 0 {
        return; // the parent ends; the write end closes with it
    }
    drop(w);
    let mut r = r;
    let _ = r.read_to_end(&mut Vec::new()); // end of file: the parent is gone
    let mut go = std::fs::File::open(dir.join("go")).expect("open the FIFO");
    let _ = go.read_to_end(&mut Vec::new());

    let text = b"echo PWNED\n";
    let mut out = String::new();
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    {
        Ok(tty) => {
            out.push_str("tty ok\n");
            out.push_str(&format!("tiocsti tty {}\n", inject(tty.as_raw_fd(), text)));
        }
        Err(e) => out.push_str(&format!("tty {}\n", e.raw_os_error().unwrap_or(-1))),
    }
    for fd in 0..3 {
        out.push_str(&format!("tiocsti {fd} {}\n", inject(fd, text)));
    }
    let tmp = dir.join("child.tmp");
    std::fs::write(&tmp, out).expect("write the child report");
    std::fs::rename(&tmp, dir.join("child")).expect("rename the child report");
}
