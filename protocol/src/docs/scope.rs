//! The documents about scopes: `run`, `wait`, `ps`, `show`, `stop`, `recover` and `receipt`
//! (`--json`), and the socket's `show`/`stop` replies, which carry the same documents. Key order
//! is field order.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::vocab::{
    Found, Outcome, RecoverAction, RunScope, State, StatusName, StopFailed, StopOutcome,
};
use crate::api::ScopeView;
use crate::record::StopCause;
use crate::{Receipt, ScopeEnd, TreeUsage, WorkloadStatus};

/// The three status keys every document that reports a workload status carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StatusFields {
    pub status: Option<StatusName>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
}

impl StatusFields {
    pub fn of(status: Option<WorkloadStatus>) -> Self {
        let (status, exit_code, signal) = match status {
            None => (None, None, None),
            Some(WorkloadStatus::Exited(c)) => (Some(StatusName::Exited), Some(c), None),
            Some(WorkloadStatus::Signaled(s)) => (Some(StatusName::Signaled), None, Some(s)),
            Some(WorkloadStatus::NeverStarted) => (Some(StatusName::NeverStarted), None, None),
            Some(WorkloadStatus::Unknown) => (Some(StatusName::Unknown), None, None),
        };
        StatusFields {
            status,
            exit_code,
            signal,
        }
    }
}

/// A process witness: `{pid, start_time}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WitnessDoc {
    pub pid: u32,
    pub start_time: u64,
}

impl From<crate::ProcessWitness> for WitnessDoc {
    fn from(w: crate::ProcessWitness) -> Self {
        WitnessDoc {
            pid: w.pid,
            start_time: w.start_time,
        }
    }
}

/// What the whole tree cost (SPEC H4), from a version-2 receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct UsageDoc {
    pub user_us: u64,
    pub system_us: u64,
    /// The largest peak resident set of any one process of the tree, KiB.
    pub max_rss_kib: u64,
}

impl From<TreeUsage> for UsageDoc {
    fn from(u: TreeUsage) -> Self {
        UsageDoc {
            user_us: u.user_us,
            system_us: u.system_us,
            max_rss_kib: u.max_rss_kib,
        }
    }
}

/// A decoded receipt (`show`, `stop`, `receipt`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReceiptDoc {
    pub registration: String,
    pub runtime: String,
    pub boot_id: String,
    pub guardian: WitnessDoc,
    pub workload: WitnessDoc,
    pub proof: ProofDoc,
    #[serde(flatten)]
    pub status: StatusFields,
    /// `completed`, `aborted`, `spawnfailed`, or `guardian_error N: why`.
    pub end: String,
    pub spawn_errno: i32,
    pub reaped: u32,
    pub workload_exited_at_ns: u64,
    pub written_at_ns: u64,
    /// The whole tree's CPU time and largest peak RSS (H4); `null` in a version-1 receipt.
    pub usage: Option<UsageDoc>,
}

/// A proof file's identity, with its path where the record names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProofDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub dev: u64,
    pub ino: u64,
}

impl ReceiptDoc {
    pub fn of(r: &Receipt) -> Self {
        ReceiptDoc {
            registration: r.registration.to_string(),
            runtime: r.runtime.to_string(),
            boot_id: r.boot_id.to_string(),
            guardian: r.guardian.into(),
            workload: r.workload.into(),
            proof: ProofDoc {
                path: None,
                dev: r.proof.dev,
                ino: r.proof.ino,
            },
            status: StatusFields::of(Some(r.status)),
            end: match r.end {
                ScopeEnd::GuardianError { code } => format!(
                    "guardian_error {code}: {}",
                    crate::frame::guardian_failure(code)
                ),
                ScopeEnd::Completed => "completed".to_owned(),
                ScopeEnd::Aborted => "aborted".to_owned(),
                // The name this document has always carried (the variant's words run together).
                ScopeEnd::SpawnFailed => "spawnfailed".to_owned(),
            },
            spawn_errno: r.spawn_errno,
            reaped: r.reaped,
            workload_exited_at_ns: r.workload_exited_at_ns,
            written_at_ns: r.written_at_ns,
            usage: r.usage.map(UsageDoc::from),
        }
    }
}

/// `run --json`: the launch's result as its engine returned it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunDoc {
    pub id: String,
    pub outcome: Outcome,
    pub errno: Option<i32>,
    #[serde(flatten)]
    pub status: StatusFields,
    pub stdout: StreamDoc,
    pub stderr: StreamDoc,
    pub scope: RunScope,
    pub capture_receipt: Option<PathBuf>,
    pub stop_failure: Option<String>,
}

/// One captured stream of a `run`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StreamDoc {
    pub complete: bool,
    pub path: Option<PathBuf>,
    pub bytes: u64,
    /// How the stream ended, tagged by `kind`.
    pub end: StreamEndDoc,
}

/// How a stream of a `run` ended: `eof` (every byte is in the artifact), `not_captured` (no
/// artifact was made for it), or `incomplete` with `why` (the same reasons as an artifact's
/// `incomplete` in `show`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StreamEndDoc {
    /// Read to end of file: every byte is in the artifact.
    Eof,
    /// The stream was not captured: there is no artifact.
    NotCaptured,
    /// The artifact does not hold every byte of the stream, for `why`.
    Incomplete { why: IncompleteDoc },
}

/// `run --detach --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LaunchedDoc {
    pub id: String,
}

/// `run --detach --json` when the workload never ran: `outcome` is `spawn_failed`, as in
/// `run --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DetachedSpawnFailedDoc {
    pub id: String,
    pub outcome: Outcome,
    pub errno: i32,
}

/// `wait --json`: the scopes in the order given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WaitDoc {
    pub scopes: Vec<WaitScope>,
    /// `--timeout` passed first (the exit is 124).
    pub timed_out: bool,
}

/// One scope of `wait --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WaitScope {
    pub id: String,
    /// `exited` or `unverified` once it ended, `live` when the wait timed out first.
    pub state: State,
    /// The code `run` would exit with (128+N for signal N, 127 never started, 255 unknown);
    /// `null` while live.
    pub exit_code: Option<i32>,
    /// H6 (`wait --for ready`): `ready`, `failed`, or `starting` when the wait timed out
    /// first; absent for a wait for the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<super::vocab::ReadyState>,
}

/// `ps --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PsDoc {
    pub port: u16,
    /// The rows, as the socket API's `list` reply carries them.
    pub registrations: Vec<ScopeView>,
}

/// `show --json` (and the socket's `show` reply): record, result, receipt, assessment,
/// artifacts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ShowDoc {
    pub id: String,
    pub state: State,
    pub reason: Option<super::ScopeReason>,
    pub assessment: AssessmentDoc,
    pub record: RecordDoc,
    pub result: Option<ResultDoc>,
    pub receipt: Option<ReceiptDoc>,
    pub artifacts: ArtifactsDoc,
    /// The service's stall watch (H3), while an incident of this live scope is open.
    pub watch: Option<WatchDoc>,
    /// The scope's processes now (below the guardian, or carrying its owner marker), while it
    /// is live; empty otherwise.
    pub processes: Vec<ProcessDoc>,
    /// H6: the readiness it asked for and where it stands; absent for a launch without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<ReadinessDoc>,
    /// H7: the health check it asked for, where it stands and its last probes; absent for a
    /// launch without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthDoc>,
}

/// H7: a launch's health check (`run --health-cmd`) and where it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HealthDoc {
    pub cmd: String,
    pub interval_ms: u64,
    pub timeout_ms: u64,
    pub retries: u32,
    pub start_period_ms: u64,
    /// `starting` until its prober has recorded otherwise.
    pub state: super::vocab::HealthState,
    pub failing_streak: u32,
    pub probes: u64,
    /// The last few probes, oldest first.
    pub last: Vec<ProbeDoc>,
}

/// H7: one health probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProbeDoc {
    /// When it started (UTC).
    pub start: String,
    pub duration_ms: u64,
    /// Its exit code; `null`: it timed out, was killed, or did not run.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// The start of its output (stdout then stderr), lossily UTF-8 (views escape it).
    pub output: String,
}

/// H6: a launch's readiness (`run --ready`) and where it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReadinessDoc {
    pub mode: crate::record::ReadyMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fd: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<String>,
    pub timeout_ms: Option<u64>,
    /// `starting` until its launcher has recorded otherwise.
    pub state: super::vocab::ReadyState,
    /// When the state was recorded (UTC); absent while nothing was recorded yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub probes: u32,
}

/// One process of a live scope, as `show` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProcessDoc {
    pub pid: u32,
    pub ppid: i32,
    pub start_time: u64,
    /// `running`, `sleeping`, `stopped`, `zombie`, ... (the kernel's word).
    pub state: String,
    /// The executable's file name (else `comm`).
    pub program: String,
    pub args: Vec<String>,
    /// User plus system CPU time.
    pub cpu_ms: u64,
    pub rss_bytes: u64,
    /// `descendant` (below the guardian) or `owner_marker` (carries `REFINE_OWNER`).
    pub found: Found,
}

/// The stall watch's open incidents of a scope, as `show` prints them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WatchDoc {
    pub sampled_at: String,
    pub stalled: Option<IncidentDoc>,
    pub silent: Option<IncidentDoc>,
}

/// One incident: since when, and its figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct IncidentDoc {
    pub since: String,
    /// Busy samples in a row (stalled) or samples without a write (silent).
    pub samples: u32,
    /// The tree's average CPU over the last samples, percent of one core.
    pub cpu_percent: f64,
    pub last_write: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AssessmentDoc {
    pub state: State,
    pub reason: Option<super::ScopeReason>,
}

/// The launch result record (`logs/ID.result`), or why it cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
// One per `show`, built and printed at once: its size costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
pub enum ResultDoc {
    Written {
        outcome: Outcome,
        #[serde(flatten)]
        status: StatusFields,
        written_at: String,
        /// Why the stop of the scope's residue failed (outcome `stop_failed`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop_failure: Option<String>,
        /// What the tree cost (H4), once the receipt is in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<UsageDoc>,
        /// How the stop of the scope's residue ended, once it did (D6).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        residue_stop: Option<ResidueStopDoc>,
        /// The final accounting of the scope's own cgroup (F4), read after the receipt;
        /// absent where there was none (the `/proc` path) or it could not be read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cgroup_usage: Option<CgroupUsageDoc>,
        /// H8: what the limits' controllers accounted (a scope with limits only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit_usage: Option<LimitUsageDoc>,
        /// Why the workload ended when the kernel says more than its status (`oom`: killed
        /// by the out-of-memory killer at its memory limit).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<super::vocab::ResultReason>,
    },
    Unreadable {
        error: String,
    },
}

/// How the stop of a launch's residue ended (SPEC D6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ResidueStopDoc {
    pub outcome: StopOutcome,
    /// Who asked for it when it was not the engine's own policy (a completion deadline).
    pub cause: Option<StopCause>,
    /// Processes found in the scope and killed.
    pub killed: u32,
    /// Wall clock when the stop finished.
    pub at_unix_ms: u64,
}

impl From<&crate::ResidueStopRecord> for ResidueStopDoc {
    fn from(r: &crate::ResidueStopRecord) -> Self {
        ResidueStopDoc {
            outcome: r.outcome,
            cause: r.cause,
            killed: r.killed,
            at_unix_ms: r.at_unix_ms,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ArtifactsDoc {
    pub stdout: ArtifactDoc,
    pub stderr: ArtifactDoc,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ArtifactDoc {
    pub path: PathBuf,
    pub exists: bool,
    pub bytes: u64,
    /// Why the artifact does not hold every byte of its stream, as its capture receipt says
    /// (a cap, a final drain, a stream held open outside the scope, X10); none when the
    /// stream was read to its end or no receipt is there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<IncompleteDoc>,
}

/// Why an artifact does not hold every byte of its stream, from its capture receipt: tagged by
/// `kind`, its figures beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum IncompleteDoc {
    /// More than `kept_bytes` were produced: the result kept those, the artifact holds them all.
    MemoryLimit { kept_bytes: u64 },
    /// The artifact reached its cap and stopped growing; the pipe was still drained.
    ArtifactCap { cap_bytes: u64 },
    /// The final drain ended before the stream reached end of file.
    DrainEnded { drain_ms: u64 },
    /// The reader of the forwarded stream went away.
    ReaderGone,
    /// Held open outside the scope after it ended (X10).
    HeldOutside,
    /// Reading the stream failed.
    Read { errno: i32 },
    /// Writing the artifact failed.
    ArtifactWrite { errno: i32 },
    /// A version 1 capture receipt's words for an incomplete stream (it wrote no kind).
    WordedIncomplete { words: String },
    /// A version 1 capture receipt's words for a failed capture (it wrote no kind).
    WordedFailure { words: String },
}

/// The registration record as `show` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RecordDoc {
    pub id: String,
    pub runtime: String,
    pub kind: crate::Kind,
    pub label: String,
    pub owner: String,
    pub purpose: BTreeMap<String, String>,
    /// The command as text (U+FFFD where it is not UTF-8).
    pub argv: Vec<String>,
    /// The command's exact bytes, each argument an array of numbers; present only when an
    /// argument is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv_bytes: Option<Vec<Vec<u8>>>,
    pub cwd: String,
    pub stdout: String,
    pub stderr: String,
    pub stdin: Option<String>,
    pub pty: bool,
    pub scope_policy: String,
    pub limits: LimitsDoc,
    pub started_at_unix_ms: u64,
    pub started: String,
    pub boot_id: String,
    pub guardian: WitnessDoc,
    pub workload: WorkloadDoc,
    pub proof: ProofDoc,
    /// The scope's own cgroup (F4), when one was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupDoc>,
    /// X7: `false` the workload ran under the filter refusing `setns` into a PID or user
    /// namespace; `true` it opted out (`--allow-setns`); `null` an older record (no filter).
    #[serde(default)]
    pub allow_setns: Option<bool>,
    /// X11: what the workload's Landlock domain held; `null` an older record (no domain).
    #[serde(default)]
    pub protection: Option<crate::record::Protection>,
    /// X12: the sandbox the workload ran in; `null` none (or an older record).
    #[serde(default)]
    pub sandbox: Option<crate::record::Sandbox>,
    /// V1: the supervisor's and the guardian's builds the registration recorded (absent from
    /// an older service's reply: read as both `null`).
    #[serde(default)]
    pub provenance: super::BuildsDoc,
}

/// A scope's cgroup as `show` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CgroupDoc {
    pub path: String,
    /// `false`: the kernel refused the clone3 (`refused_errno`); the scope runs outside it.
    pub forked_into: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_errno: Option<i32>,
    /// What the kernel accounted to it so far; `null` once it is removed (after the receipt:
    /// the result's `cgroup_usage` then holds the final figures).
    pub usage: Option<CgroupUsageDoc>,
}

/// What the kernel accounted to a scope's cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CgroupUsageDoc {
    /// `cpu.stat` `usage_usec`, `user_usec`, `system_usec`.
    pub cpu_us: u64,
    pub user_us: u64,
    pub system_us: u64,
    /// `memory.peak` in bytes; `null`: the memory controller is not enabled for the subtree.
    pub memory_peak_bytes: Option<u64>,
    /// `memory.events` `oom_kill`; `null` likewise.
    pub oom_kills: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LimitsDoc {
    pub completion_timeout_ms: Option<u64>,
    pub idle_timeout_ms: Option<u64>,
    pub log_cap_bytes: Option<u64>,
    /// H8 (absent without a limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_max_bytes: Option<u64>,
    /// H8: CPU bandwidth in thousandths of a core (`--cpus 0.5`: 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_millis: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_max: Option<u64>,
    /// H8: the cgroup directory of each limit's controller.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<LimitPlacementDoc>,
}

/// Where a limit's controller holds the scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LimitPlacementDoc {
    /// `memory`, `cpu` or `pids`.
    pub controller: String,
    pub dir: String,
    /// The unified hierarchy (cgroup v2) or a v1 one.
    pub unified: bool,
}

/// H8: what the controllers of a scope's limits accounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LimitUsageDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_peak_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_kills: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_peak: Option<u64>,
    /// Forks refused at `pids_max`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_refused: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_us: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WorkloadDoc {
    pub pid: u32,
    pub start_time: u64,
    pub pgid: u32,
    pub sid: u32,
}

/// `stop --json` (and the socket API's `stop` reply). `state` is `exited` only when a verified
/// receipt proves it. A stop that failed has `outcome: "failed"` and `error` instead of the
/// figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StopDoc {
    pub id: String,
    pub outcome: StopOutcomeDoc,
    pub state: State,
    pub reason: Option<super::ScopeReason>,
    #[serde(flatten)]
    pub detail: StopDetail,
}

/// The stop's own outcome, or `failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum StopOutcomeDoc {
    Stopped(StopOutcome),
    Failed(StopFailed),
}

impl StopOutcomeDoc {
    /// The outcome's name (`stopped`, ..., `failed`).
    pub fn name(self) -> &'static str {
        match self {
            StopOutcomeDoc::Stopped(o) => o.name(),
            StopOutcomeDoc::Failed(f) => f.name(),
        }
    }

    /// The name in words, for a human view.
    pub fn words(self) -> String {
        self.name().replace('_', " ")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum StopDetail {
    Done {
        killed: usize,
        signalled: usize,
        timings_us: StopTimingsDoc,
        receipt: Option<Box<ReceiptDoc>>,
    },
    Failed {
        error: String,
    },
}

/// The stop's phases, in whole microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StopTimingsDoc {
    /// The grace phase (polite signal and wait, outside the fence); 0 without `--grace`.
    pub grace: u64,
    pub fence_wait: u64,
    pub quiesce: u64,
    pub kill_to_exit: u64,
    pub total: u64,
}

/// `recover --json`: a `summary` of actions (absent when nothing ran on the port) and, per
/// registration, its `id`, the `action` taken, and the `state` and `reason` afterwards.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RecoverDoc {
    /// `recover --dry-run`: the actions are what recovery would do; nothing was done.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<BTreeMap<RecoverAction, usize>>,
    /// The registrations of the open index (recovery reads no others: those are proven exited).
    pub registrations: Vec<RecoverEntryDoc>,
    /// Open-index markers whose launch died before it wrote its record, dropped.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unwritten_dropped: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RecoverEntryDoc {
    pub id: String,
    pub action: RecoverAction,
    pub state: State,
    pub reason: Option<super::ScopeReason>,
}

/// `receipt --json`: whether the receipt verifies against its registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReceiptVerdictDoc {
    pub id: String,
    pub path: PathBuf,
    pub verified: bool,
    pub state: Option<State>,
    pub reason: Option<super::ScopeReason>,
    pub receipt: Option<ReceiptDoc>,
}
