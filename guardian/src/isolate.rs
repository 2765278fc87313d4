//! Out of the way (G13): the guardian leaves the launcher's process group, makes itself not
//! dumpable, and, once the workload is forked, keeps its working directory at `/`.
//!
//! - **Process group.** `setpgid(0, 0)` first thing, so a `kill(-pgid, SIGKILL)` aimed at the
//!   launcher's group (`timeout -s KILL`, a CI job cancel, a shell killing a pipeline) does not
//!   reach the guardian: it sees its channel close instead and ends the scope with a receipt
//!   (G7). The supervisor also spawns it with its own group (no window at all); this call covers
//!   every other launcher.
//! - **Not dumpable.** `PR_SET_DUMPABLE 0`: `/proc/<guardian>/fd`, `mem` and `environ` need
//!   `CAP_SYS_PTRACE`, so a workload of the same uid cannot open the proof file or the channel
//!   through them, and no core dump is written. The gated child inherits the flag until
//!   `execve`, which resets it for the workload as for any program.
//! - **Working directory.** `chdir("/")` right after the fork (the child keeps the launcher's
//!   directory, or goes to the one it asked for): a guardian holding a scope for hours must not
//!   pin a checkout or a mount.
//!
//! # The job-control rule
//! The guardian leaves the launcher's *process group*, never its *session*: `setsid` would take
//! the workload's controlling terminal away (a `git` or `ssh` prompting on `/dev/tty` would fail
//! with `ENXIO`). Inside the session the guardian is a background group of one process that never
//! reads or writes the terminal (its stdin is the channel, stdout/stderr are `/dev/null` or the
//! launcher's, and it blocks `SIGTTOU`), so the terminal's job-control signals (Ctrl-C, Ctrl-Z,
//! `SIGHUP` on hang-up, all sent to the foreground group) never reach it: the launcher (`run`)
//! receives them and forwards them as it decides (W2). `run --pty` is unchanged: the workload
//! makes its own session on the pseudo-terminal, and a workload of another user (`run --user`)
//! always gets a session of its own, without a terminal (X2). The workload gets its own group
//! (or session) as before, so a signal for its group reaches neither the guardian nor the
//! launcher.
//!
//! # Caveats
//! `PR_SET_DUMPABLE 0` does not stop root (or anyone with `CAP_SYS_PTRACE`); a workload that must
//! not tamper with evidence runs under another uid (X1). `setpgid` fails with `EPERM` when the
//! guardian already leads a session, which leaves it out of every other group anyway.

use crate::error::Error;
use crate::sys;

/// Before the handshake: a process group of its own, and not dumpable.
pub fn leave_launcher() -> Result<(), Error> {
    sys::leave_process_group().map_err(Error::Isolate)?;
    sys::set_not_dumpable().map_err(Error::Isolate)
}

/// After the fork: the guardian's own working directory is `/`. Best effort: `/` cannot go
/// away, and a failure here must not abort a launch whose child exists.
pub fn release_cwd() {
    let _ = sys::chdir_root();
}
