//! `holders --json` (SPEC H1) and `reap --checkout --json` (SPEC H2).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::scope::WitnessDoc;
use super::vocab::{OwnerLink, OwnerState, StopOutcome, Via};

/// `holders --json`: what holds one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HoldersDoc {
    pub path: PathBuf,
    pub exists: bool,
    pub holders: Vec<HolderDoc>,
    /// Processes looked at.
    pub scanned: usize,
    /// Processes whose files could not be read (permission): they may hold the path too.
    pub unreadable: usize,
    pub elapsed_ms: u64,
}

/// One process that holds the path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HolderDoc {
    #[serde(flatten)]
    pub witness: WitnessDoc,
    pub ppid: i32,
    /// The file name of `/proc/PID/exe`; `[comm]` for a kernel thread.
    pub program: String,
    /// User + system CPU time, milliseconds.
    pub cpu_ms: u64,
    /// Time since the process started, milliseconds.
    pub age_ms: u64,
    /// How it holds the path: the first of cwd, root, an open file, a mapped file that does.
    pub via: Via,
    /// The first reported path under the target (lossy UTF-8, as the kernel shows it).
    pub path: String,
    pub owner: Option<OwnerDoc>,
    pub orphaned: Option<AdopterDoc>,
}

/// The registration a holder belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OwnerDoc {
    pub id: String,
    /// The port whose `run/P` holds the record (`null` when unknown).
    pub port: Option<u16>,
    pub state: OwnerState,
    pub found: OwnerLink,
    /// Whether the registration's workload process itself is still running.
    pub workload_alive: bool,
}

/// Why a holder counts as orphaned (adopted rather than started by its parent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case", tag = "adopter")]
pub enum AdopterDoc {
    /// Parent pid 1.
    Init,
    /// The parent is a known subreaper outside any scope.
    Subreaper { pid: i32, program: String },
    /// The parent is the guardian of a registration that is no longer live.
    EndedGuardian { id: String },
}

/// `reap --checkout --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReapDoc {
    pub path: PathBuf,
    pub exists: bool,
    /// Holders whose live workload works there: when not empty, nothing was signalled.
    pub refused: Vec<HolderDoc>,
    /// Residue scopes stopped through the one stop.
    pub stopped: Vec<ScopeStopDoc>,
    /// Orphans (and their descendants) killed.
    pub killed: Vec<WitnessDoc>,
    /// Whatever still holds the path afterwards.
    pub left: Vec<LeftDoc>,
    /// A kill of the orphans that failed (the holders it did not end are in `left`).
    pub error: Option<String>,
}

/// How a residue scope's stop ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScopeStopDoc {
    pub id: String,
    pub port: u16,
    /// The stop's outcome, or `null` when it failed (see `error`).
    pub outcome: Option<StopOutcome>,
    /// Whether the scope's receipt verifies after the stop.
    pub receipt_verified: bool,
    pub error: Option<String>,
}

/// A holder still there, and why. (A `not_orphan` entry repeats `ppid`: the holder's, then the
/// reason's, the same number.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LeftDoc {
    #[serde(flatten)]
    pub holder: HolderDoc,
    #[serde(flatten)]
    pub why: WhyDoc,
}

/// Why a holder is still there after the reap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum WhyDoc {
    /// Its registration is live and its workload runs (the reap refused).
    LiveWorkload,
    /// Residue of a registration whose stop did not end it.
    ResidueSurvived,
    /// No live owner, but its parent is alive and did not adopt it: not an orphan.
    NotOrphan { ppid: i32, parent: String },
    /// The guardian of a registration (of any home): left to that registration.
    Guardian { guardian_of: GuardianOfDoc },
    /// An orphan whose tree holds a registration's guardian: left to that registration.
    GuardianBelow { guardian_of: GuardianOfDoc },
    /// Signalled, but still alive when the budget ran out.
    Survived,
}

/// The registration a guardian process belongs to, in any home.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GuardianOfDoc {
    pub home: PathBuf,
    pub port: u16,
    pub id: String,
}
