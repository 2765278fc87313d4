//! Reap by checkout (SPEC H2): end what works under a path and has no live owner.
//!
//! ```text
//! look      holders of the path (crate::hygiene::holders), each with its owner and whether it is orphaned
//! refuse    a holder whose registration is live and whose workload still runs: nothing is
//!           signalled, the holders are listed (end that workload first)
//! residue   each registration that holds the path but whose workload has exited (live scope,
//!           or unverified: guardian gone) goes through the one stop (crate::end::stop), with receipts
//! orphans   holders with no live owner whose parent adopted them (pid 1, a known subreaper, a
//!           guardian whose registration has ended) are quiesced and killed with their
//!           descendants, through verified pidfds; never a process of another pid namespace, a
//!           container shim's child, nor a tree that holds a guardian of any home
//! check     the holders are looked up again: whatever still holds the path is reported with why
//! ```
//!
//! A holder that has no live owner but is not orphaned (an operator's shell whose cwd is in the
//! checkout, a process some live parent started) is never signalled: it is reported as left.
//!
//! # Caveats
//! Every signal goes through [`crate::kernel::signal`] (pidfd opened, then the start time checked): a
//! pid reused since the scan is never signalled. An orphan tree that contains the guardian of a
//! registration, of this home or any other ([`holders::guardian_of`]: a second home inside the
//! checkout), is left alone and reported with the home it belongs to: its scope ends through its
//! own registration, never by SIGKILL to its guardian (H5). Which parent is a subreaper is known by name only ([`crate::hygiene::holders::SUBREAPERS`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use refine_protocol::record::StopCause;
use refine_protocol::{ProcessWitness, RegistrationId};

use crate::end::assess::{Assessment, BootSource};
use crate::end::stop::{self, StopError, StopOptions, StopOutcome};
use crate::hygiene::holders::{
    self, GuardianOf, Holder, HoldersError, OwnerState, Registrations, Target,
};
use crate::kernel::tree::{self, Roots};
use crate::store::registry::Runtime;

#[derive(Debug, thiserror::Error)]
pub enum ReapError {
    #[error("cannot list the holders")]
    Holders(#[from] HoldersError),
    #[error("cannot read the current boot id")]
    Boot(#[source] crate::kernel::procfs::ProcfsError),
    #[error("cannot take the stop fence")]
    Fence(#[source] crate::store::registry::RegistryError),
    /// Every daemon init adopted works under `/`: that is not a checkout.
    #[error("refusing to reap under / (every orphaned daemon works there): name a checkout")]
    Root,
}

/// How a residue scope's stop ended.
#[derive(Debug, Clone)]
pub struct ScopeStop {
    pub id: RegistrationId,
    pub port: u16,
    /// The stop's outcome, or `None` when it failed (see `error`).
    pub outcome: Option<StopOutcome>,
    /// Whether the scope's receipt verifies after the stop.
    pub receipt_verified: bool,
    pub error: Option<String>,
}

/// Why a holder is still there after the reap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// Its registration is live and its workload runs (the reap refused).
    LiveWorkload,
    /// Residue of a registration whose stop did not end it.
    ResidueSurvived,
    /// No live owner, but its parent is alive and did not adopt it: not an orphan.
    NotOrphan { ppid: i32, parent: String },
    /// The guardian of a registration (of any home): left to that registration.
    Guardian { guardian_of: GuardianOf },
    /// An orphan whose tree holds a registration's guardian: left to that registration.
    GuardianBelow { guardian_of: GuardianOf },
    /// Signalled, but still alive when the budget ran out.
    Survived,
}

/// A holder still there, and why.
#[derive(Debug, Clone)]
pub struct Left {
    pub holder: Holder,
    pub why: Why,
}

/// The answer of `reap --checkout`.
#[derive(Debug, Clone)]
pub struct ReapReport {
    pub path: PathBuf,
    pub exists: bool,
    /// Holders whose live workload works there: when not empty, nothing was signalled.
    pub refused: Vec<Holder>,
    /// Residue scopes stopped through the one stop.
    pub stopped: Vec<ScopeStop>,
    /// Orphans (and their descendants) killed.
    pub killed: Vec<ProcessWitness>,
    /// Whatever still holds the path afterwards.
    pub left: Vec<Left>,
    /// A kill of the orphans that failed (the holders it did not end are in `left`).
    pub error: Option<String>,
}

impl ReapReport {
    /// Exit 0 only when nothing holds the path any more.
    pub fn clean(&self) -> bool {
        self.refused.is_empty() && self.left.is_empty()
    }
}

/// Reaps `path` (see the module docs). `home` is searched for registrations on every port;
/// `runtime`, when given, supplies the stop fence for the orphans' kill.
pub fn reap_checkout(
    home: &Path,
    runtime: Option<&Runtime>,
    path: &Path,
    budget: Duration,
    boot: &dyn BootSource,
) -> Result<ReapReport, ReapError> {
    let target = Target::resolve(path)?;
    if target.path() == Path::new("/") {
        return Err(ReapError::Root);
    }
    let regs = Registrations::load(home, boot);
    let found = holders::holders(&target, &regs)?;
    let mut report = ReapReport {
        path: found.path.clone(),
        exists: found.exists,
        refused: Vec::new(),
        stopped: Vec::new(),
        killed: Vec::new(),
        left: Vec::new(),
        error: None,
    };
    report.refused = found
        .holders
        .iter()
        .filter(|h| h.owner.is_some_and(|o| o.workload_alive))
        .cloned()
        .collect();
    if !report.refused.is_empty() {
        return Ok(report);
    }

    // Residue: registrations that hold the path, whose workload has exited.
    let residue: BTreeSet<RegistrationId> = found
        .holders
        .iter()
        .filter_map(|h| h.owner)
        .filter(|o| matches!(o.state, OwnerState::Live | OwnerState::Unverified))
        .map(|o| o.id)
        .collect();
    for id in residue {
        let Some((rt, reg)) = regs.get(id) else {
            continue;
        };
        let opts = StopOptions {
            budget,
            boot,
            cause: Some(StopCause::Operator),
            ..StopOptions::default()
        };
        let stop = stop::stop(rt, reg, &opts);
        report.stopped.push(scope_stop(rt, id, stop));
    }

    // Orphans with no live owner, each with its tree unless a guardian (of any home) is in it.
    let current = boot.boot_id().map_err(ReapError::Boot)?;
    let guardian_here = |w: &ProcessWitness| {
        let id = regs.guarded_by(w)?;
        let (rt, _) = regs.get(id)?;
        Some(GuardianOf {
            home: rt.home().to_owned(),
            port: rt.port(),
            id,
        })
    };
    let mut roots = Vec::new();
    let mut guarded = std::collections::HashMap::new();
    for h in found.holders.iter().filter(|h| no_live_owner(h)) {
        if h.orphaned.is_none() {
            continue;
        }
        let one = Roots {
            members: vec![h.witness],
            ..Roots::default()
        };
        let below = match tree::discover(&one, current) {
            Ok(s) => s,
            Err(_) => continue,
        };
        let guardian = below.members.iter().find_map(|m| {
            guardian_here(&m.witness)
                .or_else(|| holders::guardian_of(&m.witness))
                .map(|g| (m.witness, g))
        });
        if let Some((w, guardian_of)) = guardian {
            let why = if w == h.witness {
                Why::Guardian { guardian_of }
            } else {
                Why::GuardianBelow { guardian_of }
            };
            guarded.insert(h.witness, why);
            continue;
        }
        roots.push(h.witness);
    }
    if !roots.is_empty() {
        let fence = runtime
            .map(|rt| rt.stop_fence(budget))
            .transpose()
            .map_err(ReapError::Fence)?;
        let roots = Roots {
            members: roots,
            ..Roots::default()
        };
        match stop::kill_unowned(&roots, current, budget) {
            Ok(k) => report.killed = k.killed,
            Err(e) => report.error = Some(crate::error::error_chain(&e)),
        }
        drop(fence);
    }

    // What still holds the path, and why.
    let regs = Registrations::load(home, boot);
    let after = holders::holders(&target, &regs)?;
    for holder in after.holders {
        let why = if holder.owner.is_some_and(|o| o.workload_alive) {
            Why::LiveWorkload
        } else if !no_live_owner(&holder) {
            Why::ResidueSurvived
        } else if let Some(why) = guarded.get(&holder.witness) {
            why.clone()
        } else if holder.orphaned.is_some() {
            Why::Survived
        } else {
            Why::NotOrphan {
                ppid: holder.ppid,
                parent: rustix::process::Pid::from_raw(holder.ppid)
                    .map(holders::program)
                    .unwrap_or_default(),
            }
        };
        report.left.push(Left { holder, why });
    }
    Ok(report)
}

/// No live registration owns it: no owner, an ended one, or a marker naming an unknown one.
fn no_live_owner(h: &Holder) -> bool {
    h.owner
        .is_none_or(|o| matches!(o.state, OwnerState::Exited | OwnerState::Unknown))
}

fn scope_stop(
    rt: &Runtime,
    id: RegistrationId,
    stop: Result<stop::StopReport, StopError>,
) -> ScopeStop {
    match stop {
        Ok(r) => ScopeStop {
            id,
            port: rt.port(),
            outcome: Some(r.outcome),
            receipt_verified: matches!(r.assessment, Assessment::Exited { .. })
                && r.assessment.receipt().is_some(),
            error: None,
        },
        Err(e) => ScopeStop {
            id,
            port: rt.port(),
            outcome: None,
            receipt_verified: false,
            error: Some(crate::error::error_chain(&e)),
        },
    }
}
