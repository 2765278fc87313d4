//! Sampling a scope for the stall watch: the tree's cumulative CPU time and its artifacts' size.
//!
//! The tree's CPU time is read from `/proc/PID/stat` (fields 14–17): for every live member its
//! own and its reaped children's user + system time, plus the guardian's reaped-children time
//! (the guardian reaps every orphan, so a member that exited is folded into its reaper). The
//! guardian's own time is left out: it is the supervisor's cost, not the workload's.
//!
//! # Caveats
//! A member's time moves into its parent's child counters only when the parent waits for it; a
//! zombie still counts as itself. The marker scan (every process's environment) is skipped:
//! escaped processes outside the guardian's tree are not sampled.

use std::time::Duration;

use refine_protocol::record::Registration;
use refine_protocol::BootId;

use crate::procfs;
use crate::registry::{Runtime, Stream};
use crate::tree::{self, Roots, TreeError};

/// The tree's cumulative CPU time (see the module docs); `None` once the guardian is gone.
pub fn tree_cpu(reg: &Registration, boot: BootId) -> Result<Option<Duration>, TreeError> {
    let hz = procfs::ticks_per_second();
    let guardian = reg.hello.guardian;
    let Some(gpid) = procfs::pid_of(&guardian) else {
        return Ok(None);
    };
    let reaped = match procfs::stat_cpu(gpid) {
        Ok((s, cpu)) if s.matches(&guardian) && !s.state.is_exited() => {
            cpu.children_user + cpu.children_system
        }
        Ok(_) => return Ok(None),
        Err(e) if e.is_vanished() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let scope = tree::discover(
        &Roots {
            guardian: Some(guardian),
            members: Vec::new(),
            owner: None,
        },
        boot,
    )?;
    let mut ticks = reaped;
    for m in scope.live() {
        let Some(pid) = procfs::pid_of(&m.witness) else {
            continue;
        };
        match procfs::stat_cpu(pid) {
            Ok((s, cpu)) if s.matches(&m.witness) => {
                ticks = ticks.saturating_add(cpu.with_children())
            }
            Ok(_) => {}
            Err(e) if e.is_vanished() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Some(
        Duration::from_secs(ticks / hz) + Duration::from_nanos((ticks % hz) * 1_000_000_000 / hz),
    ))
}

/// The total size of the registration's output artifacts (stdout, stderr), bytes; a missing
/// artifact counts as empty.
pub fn artifact_bytes(runtime: &Runtime, reg: &Registration) -> u64 {
    [Stream::Stdout, Stream::Stderr]
        .into_iter()
        .filter_map(|s| std::fs::metadata(runtime.log_path(reg.id, s)).ok())
        .map(|m| m.len())
        .sum()
}
