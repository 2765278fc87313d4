//! The stop without a scope (`reap --checkout`'s orphans): quiesced and killed as a scope's
//! members are, with exit observed on the pidfds instead of a receipt.

use std::time::{Duration, Instant};

use refine_protocol::{BootId, ProcessWitness};

use super::{kill_member, quiesce, Sent, StopError};
use crate::kernel::signal::SignalError;
use crate::kernel::tree::Roots;

/// What [`kill_unowned`] did.
#[derive(Debug, Clone)]
pub struct UnownedKill {
    /// Every signal sent, in order.
    pub signalled: Vec<Sent>,
    /// Processes killed (quiesced first, then SIGKILL through their pidfds).
    pub killed: Vec<ProcessWitness>,
    /// Killed processes that had not exited when the budget ran out.
    pub left: Vec<ProcessWitness>,
}

/// Kills processes that belong to no live scope (`reap --checkout`'s orphans): the roots'
/// witnessed trees are quiesced and killed like a scope's, children before parents, every
/// signal through a verified pidfd; then waits (within `budget`) for each to exit. There is no
/// guardian and no receipt: exit is observed on the pidfds. The caller serializes with other
/// stops (the runtime's stop fence) and has made sure no live guardian is among the roots' trees.
pub fn kill_unowned(
    roots: &Roots,
    boot: BootId,
    budget: Duration,
) -> Result<UnownedKill, StopError> {
    let deadline = Instant::now() + budget;
    let mut signalled = Vec::new();
    let mut rounds = 0;
    // A member the kernel refuses to signal (EPERM) is left out and reported as left.
    let mut refused = Vec::new();
    let held = quiesce::quiesce(
        roots,
        boot,
        deadline,
        &mut signalled,
        &mut rounds,
        &mut refused,
    )?;
    let mut killed = Vec::new();
    for v in held.iter().rev() {
        if kill_member(v, &mut signalled, &mut refused)? {
            killed.push(v.witness);
        }
    }
    let mut left = refused;
    for v in &held {
        let wait = deadline.saturating_duration_since(Instant::now());
        let exited = match v.with(|p| p.wait_exit(Some(wait))) {
            Ok(exited) => exited,
            Err(SignalError::Gone(_)) | Err(SignalError::Reused { .. }) => true,
            Err(e) => return Err(StopError::Signal(e)),
        };
        if !exited {
            left.push(v.witness);
        }
    }
    Ok(UnownedKill {
        signalled,
        killed,
        left,
    })
}
