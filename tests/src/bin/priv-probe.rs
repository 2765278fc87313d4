//! Test helper: a workload that tries to reach its own evidence, run under `run --user`.
//!
//! `priv-probe RUNDIR EXIT` reads its registration id from `REFINE_OWNER`, tries to open its
//! proof file and its registration record (read-write, then read-only), to list its guardian's
//! (its parent's) descriptors and to open each of the first 64 of them, and prints one line per
//! attempt, then its own credentials and its guardian's uid, and exits with `EXIT`.
//!
//! ```text
//! open PATH MODE              the open succeeded (evidence reachable)
//! denied PATH MODE ERRNO      refused with this errno
//! ids UID GID GROUPS          GROUPS: comma-separated supplementary gids
//! guardian-uid UID            real uid of the parent (from /proc/PPID/status)
//! ```

use std::fs::OpenOptions;
use std::path::Path;

fn attempt(out: &mut String, path: &Path, write: bool) {
    let mode = if write { "rw" } else { "r" };
    match OpenOptions::new().read(true).write(write).open(path) {
        Ok(_) => out.push_str(&format!("open {} {mode}\n", path.display())),
        Err(e) => out.push_str(&format!(
            "denied {} {mode} {}\n",
            path.display(),
            e.raw_os_error().unwrap_or(-1)
        )),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let run_dir = Path::new(&args[1]);
    let code: i32 = args[2].parse().expect("exit code");
    let id = std::env::var("REFINE_OWNER").expect("REFINE_OWNER");
    let mut out = String::new();
    for sub in ["proofs", "registrations"] {
        let p = run_dir.join(sub).join(&id);
        attempt(&mut out, &p, true);
        attempt(&mut out, &p, false);
    }
    // SAFETY: getppid takes no arguments and cannot fail.
    let ppid = unsafe { libc::getppid() };
    let fd_dir = format!("/proc/{ppid}/fd");
    match std::fs::read_dir(&fd_dir) {
        Ok(_) => out.push_str(&format!("open {fd_dir} list\n")),
        Err(e) => out.push_str(&format!(
            "denied {fd_dir} list {}\n",
            e.raw_os_error().unwrap_or(-1)
        )),
    }
    for fd in 0..64 {
        let p = Path::new(&fd_dir).join(fd.to_string());
        // ENOENT means "no such descriptor" only to someone allowed to look: the kernel checks
        // access before the lookup, so every attempt must be refused, existing fd or not.
        attempt(&mut out, &p, true);
    }
    // SAFETY: plain calls without pointers, and getgroups into a live buffer of its length.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut groups = [0 as libc::gid_t; 256];
    // SAFETY: groups is a live buffer of groups.len() entries.
    let n = unsafe { libc::getgroups(groups.len() as i32, groups.as_mut_ptr()) };
    let list: Vec<String> = groups[..n.max(0) as usize]
        .iter()
        .map(|g| g.to_string())
        .collect();
    out.push_str(&format!("ids {uid} {gid} {}\n", list.join(",")));
    let status = std::fs::read_to_string(format!("/proc/{ppid}/status")).unwrap_or_default();
    let guardian_uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap_or("?");
    out.push_str(&format!("guardian-uid {guardian_uid}\n"));
    print!("{out}");
    std::process::exit(code);
}
