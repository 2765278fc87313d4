//! Every JSON document the application prints or serves, in one place: the contract of
//! `run --json`, `ps --json`, `show --json`, `stop --json`, `recover --json`, `receipt --json`,
//! `gc --json`, `capacity --json`, `holders --json` and `reap --json` (and the `show`/`stop` replies of the socket API, which carry
//! the same documents). A key added, renamed or removed here is a change for every caller.
//!
//! The state a document reports is a [`State`], decided on as an enum and written as its
//! lowercase name. Key order follows the field order below.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use refine_protocol::api::ScopeView;
use refine_protocol::record::{StallIncident, StallRecord};
use refine_protocol::{Receipt, Registration, WorkloadStatus};
use serde::Serialize;

use refine_supervisor::{capacity, history::forget, history::retention};

/// What the evidence says about a registration's scope, as every document shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum State {
    /// The guardian is alive: the scope may still hold processes.
    Live,
    /// A verified receipt (or an ended boot) proves every process of the scope ended.
    Exited,
    /// Neither proven alive nor proven ended.
    Unverified,
    /// The registration record does not decode: shown, never guessed at.
    Corrupt,
}

impl State {
    pub(crate) fn name(self) -> &'static str {
        match self {
            State::Live => "live",
            State::Exited => "exited",
            State::Unverified => "unverified",
            State::Corrupt => "corrupt",
        }
    }
}

/// How the workload ended, as `status` (`exited`, `signaled`, `never_started`, `unknown`) with
/// `exit_code` or `signal`.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StatusName {
    Exited,
    Signaled,
    NeverStarted,
    Unknown,
}

/// The three status keys every document that reports a workload status carries.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct StatusFields {
    pub status: Option<StatusName>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
}

impl StatusFields {
    pub(crate) fn of(status: Option<WorkloadStatus>) -> Self {
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

    /// The status name for the socket API's `ScopeView` (a string there).
    pub(crate) fn status_string(&self) -> Option<String> {
        self.status
            .and_then(|s| serde_json::to_value(s).ok())
            .and_then(|v| v.as_str().map(str::to_owned))
    }
}

/// A process witness: `{pid, start_time}`.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct WitnessDoc {
    pub pid: u32,
    pub start_time: u64,
}

impl From<refine_protocol::ProcessWitness> for WitnessDoc {
    fn from(w: refine_protocol::ProcessWitness) -> Self {
        WitnessDoc {
            pid: w.pid,
            start_time: w.start_time,
        }
    }
}

/// A decoded receipt (`show`, `stop`, `receipt`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReceiptDoc {
    pub registration: String,
    pub runtime: String,
    pub boot_id: String,
    pub guardian: WitnessDoc,
    pub workload: WitnessDoc,
    pub proof: ProofDoc,
    #[serde(flatten)]
    pub status: StatusFields,
    pub end: String,
    pub spawn_errno: i32,
    pub reaped: u32,
    pub workload_exited_at_ns: u64,
    pub written_at_ns: u64,
    /// The whole tree's CPU time and largest peak RSS (H4); `null` in a version-1 receipt.
    pub usage: Option<refine_protocol::TreeUsage>,
}

/// A proof file's identity, with its path where the record names it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ProofDoc {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub dev: u64,
    pub ino: u64,
}

impl ReceiptDoc {
    pub(crate) fn of(r: &Receipt) -> Self {
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
                refine_protocol::ScopeEnd::GuardianError { code } => format!(
                    "guardian_error {code}: {}",
                    refine_protocol::frame::guardian_failure(code)
                ),
                other => format!("{other:?}").to_lowercase(),
            },
            spawn_errno: r.spawn_errno,
            reaped: r.reaped,
            workload_exited_at_ns: r.workload_exited_at_ns,
            written_at_ns: r.written_at_ns,
            usage: r.usage,
        }
    }
}

/// `run --json`: the launch's result as its engine returned it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunDoc {
    pub id: String,
    pub outcome: &'static str,
    pub errno: Option<i32>,
    #[serde(flatten)]
    pub status: StatusFields,
    pub stdout: StreamDoc,
    pub stderr: StreamDoc,
    pub scope: RunScope,
    pub capture_receipt: Option<PathBuf>,
    pub stop_failure: Option<String>,
}

/// The scope when `run` returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RunScope {
    Exited,
    Live,
    Stopping,
    Unknown,
}

/// One captured stream of a `run`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StreamDoc {
    pub complete: bool,
    pub path: Option<PathBuf>,
    pub bytes: u64,
    pub end: String,
}

/// `run --detach --json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LaunchedDoc {
    pub id: String,
}

/// `run --detach --json` when the workload never ran: `outcome` is `spawn_failed`, as in
/// `run --json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DetachedSpawnFailedDoc {
    pub id: String,
    pub outcome: &'static str,
    pub errno: i32,
}

/// `wait --json`: the scopes in the order given.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WaitDoc {
    pub scopes: Vec<WaitScope>,
    /// `--timeout` passed first (the exit is 124).
    pub timed_out: bool,
}

/// One scope of `wait --json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WaitScope {
    pub id: String,
    /// `exited` or `unverified` once it ended, `live` when the wait timed out first.
    pub state: &'static str,
    /// The code `run` would exit with (128+N for signal N, 127 never started, 255 unknown);
    /// `null` while live.
    pub exit_code: Option<i32>,
}

/// `ps --json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PsDoc {
    pub port: u16,
    /// The rows, as the socket API's `List` reply carries them.
    pub registrations: Vec<ScopeView>,
}

/// `show --json`: record, result, receipt, assessment, artifacts.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ShowDoc {
    pub id: String,
    pub state: State,
    pub reason: Option<String>,
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
}

/// One process of a live scope, as `show` lists it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ProcessDoc {
    pub pid: u32,
    pub ppid: i32,
    pub start_time: u64,
    /// `running`, `sleeping`, `stopped`, `zombie`, ...
    pub state: String,
    /// The executable's file name (else `comm`).
    pub program: String,
    pub args: Vec<String>,
    /// User plus system CPU time.
    pub cpu_ms: u64,
    pub rss_bytes: u64,
    /// `descendant` (below the guardian) or `owner_marker` (carries `REFINE_OWNER`).
    pub found: String,
}

/// The stall watch's open incidents of a scope, as `show` prints them.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WatchDoc {
    pub sampled_at: String,
    pub stalled: Option<IncidentDoc>,
    pub silent: Option<IncidentDoc>,
}

/// One incident: since when, and its figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct IncidentDoc {
    pub since: String,
    /// Busy samples in a row (stalled) or samples without a write (silent).
    pub samples: u32,
    /// The tree's average CPU over the last samples, percent of one core.
    pub cpu_percent: f64,
    pub last_write: String,
}

impl WatchDoc {
    pub(crate) fn of(r: &StallRecord) -> WatchDoc {
        let incident = |i: &StallIncident| IncidentDoc {
            since: utc(i.since_unix_ms),
            samples: i.samples,
            cpu_percent: f64::from(i.cpu_permille) / 10.0,
            last_write: utc(i.last_write_unix_ms),
        };
        WatchDoc {
            sampled_at: utc(r.sampled_at_unix_ms),
            stalled: r.stalled.as_ref().map(incident),
            silent: r.silent.as_ref().map(incident),
        }
    }
}

/// `holders --json` (H1): the library's answer, as it is.
pub(crate) type HoldersDoc = refine_supervisor::hygiene::holders::Holders;

/// `reap --checkout --json` (H2): the library's answer, as it is.
pub(crate) type ReapDoc = refine_supervisor::hygiene::reap_checkout::ReapReport;

#[derive(Debug, Clone, Serialize)]
pub(crate) struct AssessmentDoc {
    pub state: State,
    pub reason: Option<String>,
}

/// The launch result record (`logs/ID.result`), or why it cannot be read.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(crate) enum ResultDoc {
    Written {
        outcome: String,
        #[serde(flatten)]
        status: StatusFields,
        written_at: String,
        /// Why the stop of the scope's residue failed (outcome `stop_failed`).
        #[serde(skip_serializing_if = "Option::is_none")]
        stop_failure: Option<String>,
        /// What the tree cost (H4), once the receipt is in.
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<refine_protocol::TreeUsage>,
        /// How the stop of the scope's residue ended, once it did (D6).
        #[serde(skip_serializing_if = "Option::is_none")]
        residue_stop: Option<refine_protocol::ResidueStopRecord>,
        /// The final accounting of the scope's own cgroup (F4), read after the receipt;
        /// absent where there was none (the `/proc` path) or it could not be read.
        #[serde(skip_serializing_if = "Option::is_none")]
        cgroup_usage: Option<refine_protocol::CgroupUsage>,
    },
    Unreadable {
        error: String,
    },
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ArtifactsDoc {
    pub stdout: ArtifactDoc,
    pub stderr: ArtifactDoc,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ArtifactDoc {
    pub path: PathBuf,
    pub exists: bool,
    pub bytes: u64,
}

impl ArtifactDoc {
    pub(crate) fn of(p: &Path) -> Self {
        let bytes = std::fs::metadata(p).map(|m| m.len());
        ArtifactDoc {
            path: p.to_owned(),
            exists: bytes.is_ok(),
            bytes: bytes.unwrap_or(0),
        }
    }
}

/// The registration record as `show` prints it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RecordDoc {
    pub id: String,
    pub runtime: String,
    pub kind: &'static str,
    pub label: String,
    pub owner: String,
    pub purpose: BTreeMap<String, String>,
    /// The command as text (U+FFFD where it is not UTF-8).
    pub argv: Vec<String>,
    /// The command's exact bytes, each argument an array of numbers; present only when an
    /// argument is not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupDoc>,
}

/// A scope's cgroup as `show` prints it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CgroupDoc {
    pub path: String,
    /// `false`: the kernel refused the clone3 (`refused_errno`); the scope runs outside it.
    pub forked_into: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused_errno: Option<i32>,
    /// What the kernel accounted to it so far; `None` once it is removed (after the receipt:
    /// the result's `cgroup_usage` then holds the final figures).
    pub usage: Option<refine_supervisor::kernel::cgroup::CgroupUsage>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct LimitsDoc {
    pub completion_timeout_ms: Option<u64>,
    pub idle_timeout_ms: Option<u64>,
    pub log_cap_bytes: Option<u64>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct WorkloadDoc {
    pub pid: u32,
    pub start_time: u64,
    pub pgid: u32,
    pub sid: u32,
}

impl RecordDoc {
    pub(crate) fn of(reg: &Registration) -> Self {
        let h = &reg.hello;
        RecordDoc {
            id: reg.id.to_string(),
            runtime: reg.runtime.to_string(),
            kind: reg.kind.as_str(),
            label: reg.label.clone(),
            owner: reg.owner.clone(),
            purpose: reg.purpose.clone(),
            argv: reg.argv.clone(),
            argv_bytes: reg.argv_bytes.clone(),
            cwd: reg.cwd.clone(),
            stdout: reg.stdout_path.clone(),
            stderr: reg.stderr_path.clone(),
            stdin: reg.stdin_path.clone(),
            pty: reg.pty,
            scope_policy: format!("{:?}", reg.scope_policy).to_lowercase(),
            limits: LimitsDoc {
                completion_timeout_ms: reg.limits.completion_timeout_ms,
                idle_timeout_ms: reg.limits.idle_timeout_ms,
                log_cap_bytes: reg.limits.log_cap_bytes,
            },
            started_at_unix_ms: reg.started_at_unix_ms,
            started: utc(reg.started_at_unix_ms),
            boot_id: h.boot_id.to_string(),
            guardian: h.guardian.into(),
            workload: WorkloadDoc {
                pid: h.workload.pid,
                start_time: h.workload.start_time,
                pgid: h.workload_pgid,
                sid: h.workload_sid,
            },
            proof: ProofDoc {
                path: Some(reg.proof_path.clone()),
                dev: h.proof.dev,
                ino: h.proof.ino,
            },
            cgroup: reg.cgroup.as_ref().map(|c| CgroupDoc {
                path: c.path.clone(),
                forked_into: c.holds_scope(),
                refused_errno: c.refused_errno,
                usage: c
                    .holds_scope()
                    .then(|| refine_supervisor::kernel::cgroup::usage(Path::new(&c.path)))
                    .flatten(),
            }),
        }
    }
}

/// `stop --json` (and the socket API's `Stop` reply). `state` is `exited` only when a verified
/// receipt proves it. A stop that failed has `outcome: "failed"` and `error` instead of the
/// figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StopDoc {
    pub id: String,
    pub outcome: StopOutcomeDoc,
    pub state: State,
    pub reason: Option<String>,
    #[serde(flatten)]
    pub detail: StopDetail,
}

/// The stop's own outcome, or `failed`.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(untagged)]
pub(crate) enum StopOutcomeDoc {
    Stopped(refine_supervisor::end::stop::StopOutcome),
    Failed(&'static str),
}

#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(crate) enum StopDetail {
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
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct StopTimingsDoc {
    /// The grace phase (polite signal and wait, outside the fence); 0 without `--grace`.
    pub grace: u64,
    pub fence_wait: u64,
    pub quiesce: u64,
    pub kill_to_exit: u64,
    pub total: u64,
}

/// `recover --json`: a `summary` of actions (absent when nothing ran on the port) and, per
/// registration, its `id`, the `action` taken, and the `state` and `reason` afterwards.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct RecoverDoc {
    /// `recover --dry-run`: the actions are what recovery would do; nothing was done.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<BTreeMap<RecoverAction, usize>>,
    /// The registrations of the open index (recovery reads no others: those are proven exited).
    pub registrations: Vec<RecoverEntryDoc>,
    /// Open-index markers whose launch died before it wrote its record, dropped.
    #[serde(skip_serializing_if = "is_zero")]
    pub unwritten_dropped: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct RecoverEntryDoc {
    pub id: String,
    pub action: RecoverAction,
    pub state: State,
    pub reason: Option<String>,
}

/// What recovery did with one registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RecoverAction {
    Stopped,
    Released,
    Kept,
    StopFailed,
    Owned,
    Corrupt,
    /// `--dry-run`: live and stale, recovery would stop it.
    WouldStop,
    /// `--dry-run`: exited, recovery would release it.
    WouldRelease,
    /// `--dry-run`: unverified, recovery would keep it (and kill what is still witnessed for it
    /// if its guardian is gone).
    WouldKeep,
}

/// `receipt --json`: whether the receipt verifies against its registration.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReceiptVerdictDoc {
    pub id: String,
    pub path: PathBuf,
    pub verified: bool,
    pub state: Option<State>,
    pub reason: Option<String>,
    pub receipt: Option<ReceiptDoc>,
}

/// `gc --json`: retention, forgetting and re-indexing, as the library reports them.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct GcDoc {
    /// Retention (artifacts and capture receipts), its keys at the top level as before.
    #[serde(flatten)]
    pub retention: retention::Report,
    /// Forgetting whole exited registrations.
    pub forget: forget::Report,
    /// Records without an open-index marker that the assessment does not call `exited`, put
    /// back into the index.
    pub reindexed: Vec<String>,
    /// Files no record covers (D5): removed, would be removed, or kept and why.
    pub strays: Vec<refine_supervisor::history::strays::Entry>,
}

/// `capacity --json`: the admission figures, as the library returns them.
pub(crate) type CapacityDoc = capacity::CapacityReport;

/// A document as `key=value` fields on one log line (`outcome=stopped killed=2
/// timings_ms.total=12`): nested keys joined with `.`, nulls and empty lists left out, text
/// quoted only when it holds a space, `"` or `=`. A log event stays one line of fields that
/// journald and `grep` read, never an embedded JSON document.
pub(crate) fn json_line(doc: &impl Serialize) -> String {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut Vec<String>) {
        use serde_json::Value;
        let key = |k: &str| {
            if prefix.is_empty() {
                k.to_owned()
            } else {
                format!("{prefix}.{k}")
            }
        };
        match v {
            Value::Null => {}
            Value::Object(m) => {
                for (k, v) in m {
                    walk(&key(k), v, out);
                }
            }
            Value::Array(a) if a.is_empty() => {}
            Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    walk(&key(&i.to_string()), v, out);
                }
            }
            Value::String(t) => {
                let shown = if t.is_empty()
                    || t.chars()
                        .any(|c| c.is_control() || matches!(c, ' ' | '"' | '='))
                {
                    format!("{t:?}")
                } else {
                    t.clone()
                };
                out.push(format!("{prefix}={shown}"));
            }
            v => out.push(format!("{prefix}={v}")),
        }
    }
    match serde_json::to_value(doc) {
        Ok(v) => {
            let mut fields = Vec::new();
            walk("", &v, &mut fields);
            fields.join(" ")
        }
        Err(e) => format!("unserializable document: {e}"),
    }
}

/// A document as the socket API's `show`/`stop` reply carries it.
pub(crate) fn to_value(doc: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(doc).unwrap_or_else(|e| serde_json::Value::String(e.to_string()))
}

/// `YYYY-MM-DDTHH:MM:SSZ` for a Unix time in milliseconds.
pub(crate) fn utc(unix_ms: u64) -> String {
    i64::try_from(unix_ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| format!("{unix_ms} ms after the epoch"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_795_981_266_000), "2026-11-29T19:41:06Z");
    }
}
