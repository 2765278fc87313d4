//! V2: the events of scopes, as `refine-supervisor events --json` prints them and the socket's
//! `events` subscription sends them, one document per event.

use serde::{Deserialize, Serialize};

use super::vocab::{Outcome, StatusName, StopOutcome};

crate::vocabulary! {
    /// What happened to a scope.
    pub enum EventKind: "event kind" {
        /// Its registration is durable (before the workload runs).
        Launched,
        /// Its workload's `execve` succeeded (`pid`).
        Started,
        /// Its workload's main process ended (`status` with `exit_code` or `signal`); the rest
        /// of its tree may live on.
        Exited,
        /// Its guardian's receipt is in: everything it started has ended (`outcome`).
        Receipt,
        /// A stop was asked for (`cause`), before its first signal.
        StopRequested,
        /// A stop is over (`stop`: what it achieved, or `reason` for one that failed).
        StopEnded,
        /// Its launch ended without a receipt: nothing proves the tree ended (`reason`).
        Unverified,
        /// A restarted service took over a live scope whose launcher was gone.
        Adopted,
        /// `gc` or the service's housekeeping forgot its registration.
        Collected,
        /// H6: it said it is ready (`status`: its `STATUS=`, if any).
        Ready,
        /// H6: it was not ready in time, or ended before it was (`reason`).
        NotReady,
        /// H7: its health changed (`health`: the new state, `reason`: the last probe's
        /// excerpt, escaped).
        Health,
    }
}

/// One event. Every field but `kind`, `id` and the time may be absent; a reader ignores keys it
/// does not know (new kinds of detail come as new keys).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EventDoc {
    /// Its place in the journal: given back as `since`, the events after it are read.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cursor: String,
    pub kind: EventKind,
    pub time_unix_ms: u64,
    /// `time_unix_ms` as a UTC string (`2026-11-29T19:41:06.123Z`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub time: String,
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
    /// `launched`: the kind of workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_kind: Option<crate::Kind>,
    /// `started`: the workload's pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// `exited`, `receipt`: how the workload ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// `receipt`, `unverified`: how the launch ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// `stop_requested`: who asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<crate::record::StopCause>,
    /// `stop_ended`: what the stop achieved (absent for one that failed: see `reason`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopOutcome>,
    /// `unverified`, a failed `stop_ended`, `not_ready`: why, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `ready`: the workload's last `STATUS=` (sd_notify), as it sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_status: Option<String>,
    /// `health`: the state it changed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<super::vocab::HealthState>,
    /// The process that saw the event and wrote it (a `run`, the service, a `stop`, `gc`).
    pub by_pid: u32,
}

impl EventDoc {
    /// An event of `kind` about `id`, now, written by this process; the details are set after.
    pub fn new(kind: EventKind, id: String, label: String, time_unix_ms: u64, by_pid: u32) -> Self {
        EventDoc {
            cursor: String::new(),
            kind,
            time_unix_ms,
            time: String::new(),
            id,
            label,
            scope_kind: None,
            pid: None,
            status: None,
            exit_code: None,
            signal: None,
            outcome: None,
            cause: None,
            stop: None,
            reason: None,
            ready_status: None,
            health: None,
            by_pid,
        }
    }
}

/// The last reply of an `events` request without `follow`: the journal's end, to give as
/// `since` next time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EventsEndDoc {
    pub cursor: String,
}
