//! `gc --json`: retention, forgetting, re-indexing and strays.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::reason::ScopeReason;
use super::vocab::{ForgetAction, RetentionAction, State, StrayAction};

/// `gc --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GcDoc {
    /// Retention (artifacts and capture receipts), its keys at the top level.
    #[serde(flatten)]
    pub retention: RetentionDoc,
    /// Forgetting whole exited registrations.
    pub forget: ForgetDoc,
    /// Records without an open-index marker that the assessment does not call `exited`, put
    /// back into the index.
    pub reindexed: Vec<String>,
    /// Files no record covers (D5): removed, would be removed, or kept and why.
    pub strays: Vec<StrayDoc>,
}

/// One retention pass.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RetentionDoc {
    pub older_than_secs: u64,
    pub dry_run: bool,
    pub deleted_files: usize,
    pub deleted_bytes: u64,
    pub entries: Vec<RetentionEntryDoc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RetentionEntryDoc {
    pub id: String,
    pub action: RetentionAction,
    /// Why it was kept, or deleted.
    pub reason: RetentionReason,
    pub files: Vec<PathBuf>,
    pub bytes: u64,
    /// How old the evidence is, when it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub age_secs: Option<u64>,
}

/// One forgetting pass.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ForgetDoc {
    pub forget_after_secs: u64,
    pub dry_run: bool,
    /// Registrations removed by this pass.
    pub forgotten: usize,
    /// Removals an earlier, interrupted pass had started and this one finished.
    pub resumed: usize,
    /// Registrations younger than the horizon (not listed in `entries`).
    pub young: usize,
    /// Registrations past the horizon by their files' age: forgotten, or kept and why.
    pub entries: Vec<ForgetEntryDoc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ForgetEntryDoc {
    pub id: String,
    pub action: ForgetAction,
    /// Why it was kept, or forgotten.
    pub reason: ForgetReason,
    /// For a registration forgotten (or that would be): how long nothing of it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unchanged_secs: Option<u64>,
}

/// Why retention kept a registration's artifacts, or deleted them: tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RetentionReason {
    /// `empty`: the registration has no artifact files.
    NoArtifacts,
    /// Artifacts without a record: nothing proves their scope exited.
    MissingRecord,
    /// An artifact was written within the limit (its `age_secs` beside the reason).
    Young,
    /// The scope is not proven exited: the assessment's state and reason.
    NotExited {
        state: State,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<ScopeReason>,
    },
    /// The registration's lock is busy (its owner holds it) or cannot be taken.
    LockBusy { error: String },
    /// The record does not decode intact.
    RecordNotIntact { error: String },
    /// An artifact's age cannot be read.
    StatFailed { path: PathBuf, error: String },
    /// Exited, but the receipt or an artifact is younger than the limit.
    ExitedYoung,
    /// Exited (verified) and past the limit: deleted, or would be.
    ExitedPastLimit,
    /// Deleted, but removing this artifact failed (the others are gone).
    RemoveFailed { path: PathBuf, error: String },
    /// Deleted, but syncing the logs directory failed afterwards.
    SyncFailed { error: String },
}

/// Why forgetting kept a registration, or forgot it: tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ForgetReason {
    /// Only exited registrations are forgotten: the assessment's state and reason.
    NotExited {
        state: State,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<ScopeReason>,
    },
    /// The registration's lock is busy (its owner holds it) or cannot be taken.
    LockBusy { error: String },
    /// The record does not decode intact.
    RecordNotIntact { error: String },
    /// Exited and nothing of it changed within the horizon (`unchanged_secs` beside it):
    /// forgotten, or would be.
    ExitedPastHorizon,
    /// Its open-index marker could not be removed.
    MarkerNotRemoved { error: String },
    /// Its record could not be moved aside (the forget intent).
    RecordNotMoved { error: String },
    /// A file of it could not be removed: the intent stays and the next pass tries again.
    RemoveFailed { path: PathBuf, error: String },
}

/// A file no record covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StrayDoc {
    pub path: PathBuf,
    /// The registration the file is named for, when its name says.
    pub id: Option<String>,
    pub bytes: u64,
    pub action: StrayAction,
    pub reason: StrayReasonDoc,
}

/// Why a file is (or would be) collected, or kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StrayReasonDoc {
    /// No record names its id.
    NoRecord,
    /// A temporary file of a replacement that never finished.
    Temporary,
    /// Younger than the safety age: a launch or a replacement may still be writing it.
    Young { age_secs: u64, limit_secs: u64 },
    /// The id's registration lock is held: something still uses it.
    Locked,
    /// The removal failed (the error, as text).
    Failed { error: String },
    /// The cgroup directory of a scope that ended (F4), left by a launcher that died between
    /// the receipt and its removal.
    EndedScopeCgroup,
    /// A cgroup directory below the runtime's parent that no record names (its launcher died
    /// between the `mkdir` and the record).
    UnnamedCgroup,
}
