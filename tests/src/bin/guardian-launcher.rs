//! Test helper: a launcher that is its own process, so a test can kill it mid-flight (G7) or
//! give the guardian a launcher with unusual process state (ignored signals).
//!
//! ```text
//! guardian-launcher [--ignore-signals] [--leak-stdin-pipe] [--pdeath SIGNO] PROOF -- ARGV...
//! ```
//!
//! `--leak-stdin-pipe`: the workload's stdin is a pipe created *without* close-on-exec, so the
//! guardian inherits both its ends; this launcher closes its own copies after the launch. The
//! workload sees end of file only if the guardian does not hold the write end.
//!
//! It spawns `refine-guardian` (beside this executable) through the test driver, launches ARGV
//! with inherited stdio (so the workload writes to this process's stdout), says *start*, and
//! prints one line per event on stdout:
//!
//! ```text
//! launcher-SigIgn HEX                       (with --ignore-signals: this process's ignored set)
//! hello GPID GSTART WPID WSTART PGID SID
//! guardian-SigIgn HEX                       (the gated guardian's ignored set)
//! started | spawn-failed ERRNO
//! exited STATUS
//! scope STATUS END REAPED
//! ```
//!
//! then reaps the guardian (by pid) and exits 0. Killed before that, it leaves the guardian to
//! notice the closed channel.

use std::io::Write;
use std::os::fd::AsFd;
use std::path::PathBuf;

use refine_tests::driver::{Guardian, Launch, Msg};

fn say(line: &str) {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Ignores a few signals in this process; ignored dispositions survive `execve` into the
/// guardian (and would survive into the workload if the guardian did not reset them).
fn ignore_signals() {
    for sig in [libc::SIGINT, libc::SIGQUIT, libc::SIGUSR2, libc::SIGHUP] {
        // SAFETY: SIG_IGN is a valid disposition for these catchable signals; this helper is
        // single-threaded.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(v) = status.lines().find_map(|l| l.strip_prefix("SigIgn:")) {
        say(&format!("launcher-SigIgn {}", v.trim()));
    }
}

fn main() {
    let mut args = std::env::args_os().skip(1);
    let mut pdeath = libc::SIGKILL as u32;
    let mut leak = false;
    let mut proof = None;
    while let Some(a) = args.next() {
        match a.to_str() {
            Some("--ignore-signals") => ignore_signals(),
            Some("--leak-stdin-pipe") => leak = true,
            Some("--pdeath") => {
                pdeath = args
                    .next()
                    .and_then(|v| v.to_str().and_then(|v| v.parse().ok()))
                    .expect("--pdeath SIGNO")
            }
            Some("--") => break,
            _ => proof = Some(PathBuf::from(a)),
        }
    }
    let argv: Vec<_> = args.collect();
    let proof = proof.expect("usage: guardian-launcher [opts] PROOF -- ARGV...");
    let mut l = Launch::new(&proof, &argv);
    l.pdeath_signal = Some(pdeath);

    let exe = std::env::current_exe().expect("current_exe");
    let guardian_exe = exe.with_file_name("refine-guardian");
    // Created before the guardian is spawned so it inherits both ends (no close-on-exec).
    let leaked = leak.then(|| rustix::pipe::pipe().expect("pipe"));
    let g = Guardian::spawn_exe(&guardian_exe, |cmd| {
        cmd.stderr(std::process::Stdio::inherit());
    });
    match leaked {
        Some((r, w)) => {
            let out = rustix::io::fcntl_dupfd_cloexec(std::io::stdout(), 3).expect("dup");
            let err = rustix::io::fcntl_dupfd_cloexec(std::io::stderr(), 3).expect("dup");
            g.launch(&l, Some([r.as_fd(), out.as_fd(), err.as_fd()]))
                .expect("send launch");
            drop((r, w, out, err));
        }
        None => g.launch(&l, None).expect("send launch"),
    }
    let h = g.expect_hello();
    say(&format!(
        "hello {} {} {} {} {} {}",
        h.guardian.pid,
        h.guardian.start_time,
        h.workload.pid,
        h.workload.start_time,
        h.workload_pgid,
        h.workload_sid
    ));
    let status = std::fs::read_to_string(format!("/proc/{}/status", h.guardian.pid));
    if let Some(v) = status
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
    {
        say(&format!("guardian-SigIgn {}", v.trim()));
    }
    g.start();
    loop {
        match g.recv(std::time::Duration::from_secs(24 * 3600)) {
            Some(Msg::Started) => say("started"),
            Some(Msg::SpawnFailed { errno }) => say(&format!("spawn-failed {errno}")),
            Some(Msg::WorkloadExited { status, .. }) => say(&format!("exited {status:?}")),
            Some(Msg::ScopeExited(r)) => {
                say(&format!("scope {:?} {:?} {}", r.status, r.end, r.reaped));
                break;
            }
            Some(Msg::Closed) => {
                say("closed");
                break;
            }
            Some(other) => say(&format!("other {other:?}")),
            None => {}
        }
    }
    let (status, _) = g.finish();
    assert!(status.success(), "guardian: {status:?}");
}
