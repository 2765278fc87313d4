//! Test helper: prints what a workload sees of its own launch, one fact per line, then exits 0.
//!
//! ```text
//! pid N / ppid N / sid N / pgid N
//! SigBlk HEX / SigIgn HEX            (this process, from /proc/self/status)
//! parent-SigBlk HEX / parent-SigIgn HEX (the parent, i.e. the guardian)
//! cwd PATH
//! nofile SOFT HARD
//! tty0 BOOL / tty1 BOOL
//! fd N TARGET                         (every open descriptor but the one listing /proc/self/fd)
//! env KEY=VALUE                       (every environment entry)
//! ```

use std::io::Write;

fn status_field(path: &str, key: &str) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

fn main() {
    let mut out = String::new();
    let pid = std::process::id();
    // Raw calls on purpose: a session or group whose leader lives outside this PID namespace reads
    // as 0 here, which rustix's `Pid` cannot hold.
    // SAFETY: getppid, getsid(0) and getpgrp take no pointers and cannot fail for the caller.
    let (ppid, sid, pgid) = unsafe { (libc::getppid(), libc::getsid(0), libc::getpgrp()) };
    out += &format!("pid {pid}\nppid {ppid}\n");
    out += &format!("sid {sid}\npgid {pgid}\n");
    for key in ["SigBlk:", "SigIgn:"] {
        let k = key.trim_end_matches(':');
        out += &format!("{k} {}\n", status_field("/proc/self/status", key));
        out += &format!(
            "parent-{k} {}\n",
            status_field(&format!("/proc/{ppid}/status"), key)
        );
    }
    out += &format!(
        "cwd {}\n",
        std::env::current_dir().map_or(String::new(), |d| d.display().to_string())
    );
    let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    out += &format!(
        "nofile {} {}\n",
        lim.current.map_or("inf".into(), |v| v.to_string()),
        lim.maximum.map_or("inf".into(), |v| v.to_string())
    );
    out += &format!("tty0 {}\n", rustix::termios::isatty(std::io::stdin()));
    out += &format!("tty1 {}\n", rustix::termios::isatty(std::io::stdout()));
    let listing = std::fs::read_dir("/proc/self/fd").expect("read /proc/self/fd");
    for entry in listing.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let target =
            std::fs::read_link(entry.path()).map_or(String::from("?"), |t| t.display().to_string());
        if target.starts_with("/proc/") && target.ends_with("/fd") {
            continue; // the directory being listed
        }
        out += &format!("fd {name} {target}\n");
    }
    for (k, v) in std::env::vars_os() {
        out += &format!("env {}={}\n", k.to_string_lossy(), v.to_string_lossy());
    }
    let _ = std::io::stdout().write_all(out.as_bytes());
}
