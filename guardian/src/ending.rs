//! W16 Launcher loss ends the scope: the rounds of `SIGKILL` the reap loop sends, once it has
//! entered its ending (see `reap`), to the guardian's direct children, as the kernel lists them
//! in `/proc/thread-self/children`.
//!
//! A child the guardian has not reaped keeps its pid (a zombie too), so a `kill` by the pid the
//! list gave cannot reach another process: nothing reaps while a round runs. Killing only direct
//! children is enough: the guardian is a subreaper, and the kernel reparents a dying process's
//! children to it *before* it signals the death (`SIGCHLD`), so the wake for that death lists
//! them, and the next round kills them. A tree is taken one generation per wake.
//!
//! Spared:
//! - the workload, which has its own signal (the launch's parent-death signal, sent by `reap`);
//! - nested guardians: a managed command may itself `run` a command, whose guardian becomes our
//!   child when its launcher (a member of this scope) dies. Killed, its scope would be left
//!   `unverified`; spared, it sees its own launcher gone and ends its own scope (recursively, as
//!   this one), writes its receipt and exits, and its exit wakes us. A nested guardian is a
//!   child that has exec'd since its fork (`PF_FORKNOEXEC` clear: a guardian's gated child is a
//!   fork of the guardian and is killed) and whose `/proc/PID/exe` reads as this guardian's own
//!   (`readlink`: the kernel formats the path from the dentry and asks nothing of the file
//!   system, so an executable on a FUSE mount served by a stopped member cannot hold a round;
//!   the file itself is never opened or `stat`ed). Where the link cannot be read (a guardian is
//!   not dumpable: without `CAP_SYS_PTRACE`, `EACCES`), the command name decides, as the outer
//!   stop's fallback does (`supervisor::kernel::nested`).
//!
//! Both ways of being wrong are safe for the proof: a nested guardian taken for a member is
//! killed (its own scope is left `unverified`, ours is still proven by `ECHILD`), and a member
//! taken for a nested guardian is spared (ours stays `live` while it runs: never a false
//! `exited`, and a `stop` still ends it).
//!
//! Nothing here allocates; a round's buffers (the two paths, the `stat` text) are in this
//! module's frames, below the reap loop's, and only while a round runs.
//!
//! # Caveats
//! - Recognition is by path: a nested guardian that is another copy of the binary (another
//!   path), or this one after its file was replaced (`... (deleted)`), is killed like a member;
//!   a path longer than [`EXE_MAX`] is compared by its first `EXE_MAX` bytes.
//! - Without `CAP_SYS_PTRACE` a member that names itself like the guardian (`prctl`,
//!   `PR_SET_NAME`) is spared and keeps the scope live until it ends or is stopped.
//! - Without `/proc/thread-self/children` (a kernel without `CONFIG_PROC_CHILDREN`, no `/proc`)
//!   a round kills nothing: the scope ends as under G7, when its members do.

use crate::error::Line;
use crate::identity;
use crate::sys::{self, Errno, Pid};

/// The longest executable path compared whole (longer ones: their first this many bytes).
pub const EXE_MAX: usize = 256;

/// What one round did.
#[derive(Default, Clone, Copy)]
pub struct Round {
    pub killed: u32,
    /// Nested guardians left to end their own scopes.
    pub spared: u32,
}

/// One round: `SIGKILL` to every direct child but the unreaped `workload` and the nested
/// guardians.
#[inline(never)]
pub fn kill_round(workload: Option<Pid>) -> Round {
    let mut own = [0u8; EXE_MAX];
    let own = sys::readlink(c"/proc/self/exe", &mut own)
        .ok()
        .map(|n| &own[..n]);
    let comm = sys::own_comm();
    let mut round = Round::default();
    let _ = sys::for_each_child(|child| {
        if Some(child) == workload {
            return;
        }
        if is_nested_guardian(child, own, &comm) {
            round.spared += 1;
        } else if sys::signal_child(child, libc::SIGKILL).is_ok() {
            round.killed += 1;
        }
    });
    round
}

/// Whether our child `pid` is a guardian (see the module docs): it has exec'd, and its
/// executable's path is `own` (ours), or, where its link cannot be read, its name is `comm`.
/// `own` is `None` if our own link could not be read: then the name decides.
fn is_nested_guardian(pid: Pid, own: Option<&[u8]>, comm: &[u8; 16]) -> bool {
    let mut path = Line::new();
    path.push(b"/proc/");
    path.push_u64(u64::from(pid.as_u32()));
    path.push(b"/exe\0");
    let Ok(path) = core::ffi::CStr::from_bytes_with_nul(path.as_bytes()) else {
        return false;
    };
    let mut exe = [0u8; EXE_MAX];
    let same = match (sys::readlink(path, &mut exe), own) {
        (Ok(n), Some(own)) => &exe[..n] == own,
        // Not dumpable, and we may not trace it: the name is all there is.
        (Err(Errno(libc::EACCES | libc::EPERM)), _) | (Ok(_), None) => identity::comm_is(pid, comm),
        // ENOENT: no executable any more (a zombie), nothing to spare.
        (Err(_), _) => false,
    };
    same && identity::never_exec_d(pid) == Ok(false)
}
