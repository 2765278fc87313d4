//! The service socket API (feature `std`): what `refine-supervisor` clients and `serve` exchange
//! over `run/P/supervisor.sock`, and the JSON documents the operator CLI prints.
//!
//! # Framing
//!
//! One JSON object per line (`\n`-terminated, UTF-8), request then response (any number of
//! them on one connection, answered in order), at most [`MAX_MESSAGE`] bytes per line; a
//! longer line is rejected before it is parsed. Every message carries `"v": 2`
//! ([`API_VERSION`]); a reader rejects a newer version instead of guessing.
//!
//! ```text
//! -> {"v":2,"op":"list","all":false}
//! <- {"v":2,"ok":true,"result":{"list":[{"id":"…","state":"live",…}]}}
//! ```
//!
//! # Caveats
//! Ids travel as 32 lowercase hex digits (the file names under `run/P`), not as byte arrays.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::record::Kind;
use crate::DecodeError;

/// 2: every `reason` (show, ps, stop, recover, receipt) is an object tagged by `kind`
/// ([`crate::docs::ScopeReason`]) instead of a string; requests did not change, so a version-1
/// request is still read (its reply is version 2).
pub const API_VERSION: u16 = 2;
/// Largest accepted message line, newline included.
pub const MAX_MESSAGE: usize = 1024 * 1024;

/// What the caller of a launch asks (`run`, `run --detach`, the service's `launch` request): the
/// kind as a [`Kind`], the deadlines as [`Duration`]s. On the wire the kind is its lowercase name
/// and the durations are whole milliseconds (`timeout_ms`, `idle_timeout_ms`,
/// `wait_for_slot_ms`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LaunchAsk {
    pub argv: Vec<String>,
    /// Absent: `command`, as `run` without `--kind`.
    #[serde(default = "command_kind")]
    pub kind: Kind,
    /// Absent: none (empty), as `run` without `--label`.
    #[serde(default)]
    pub label: String,
    /// The workload's working directory. Absent: the service's own (where `serve` was
    /// started): the service cannot know its client's, so a host passes its own.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Variables set for the workload, as `run --env`. Absent: none.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Purpose metadata (`key=value`, `run --meta`). Absent: none.
    #[serde(default)]
    pub meta: BTreeMap<String, String>,
    /// Completion deadline from the start.
    #[serde(rename = "timeout_ms", default, with = "millis")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
    pub timeout: Option<Duration>,
    /// Idle deadline.
    #[serde(rename = "idle_timeout_ms", default, with = "millis")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
    pub idle_timeout: Option<Duration>,
    /// A deadline's grace: SIGTERM first, the kill this much later (`timeout -k`).
    #[serde(rename = "kill_after_ms", default, with = "millis")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
    pub kill_after: Option<Duration>,
    /// Run the workload on a terminal. Absent: `false`.
    #[serde(default)]
    pub pty: bool,
    /// For `agent` launches when no slot is free: wait (up to this long) instead of refusing.
    #[serde(rename = "wait_for_slot_ms", default, with = "millis")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
    pub wait_for_slot: Option<Duration>,
    /// Byte cap of each output artifact: absent for the default (1 GiB), `0` for none.
    #[serde(default)]
    pub log_cap_bytes: Option<u64>,
    /// Run the workload as `USER[:GROUP]` (names or numbers; SPEC X1). Absent: as the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// One scope per label at a time (s6-style): refused while another scope with this label
    /// is live or unverified (`label_held`). Absent: `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unique: bool,
    /// Let the workload join PID and user namespaces made outside its scope (SPEC X7's
    /// opt-out): no filter against `setns` into them. Absent: `false`, the filter holds.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_setns: bool,
    /// X11: the Landlock protection (`all`, `fs`, `signals`, `none`). Absent: `all`.
    #[serde(default, skip_serializing_if = "crate::api::is_default_protect")]
    pub protect: crate::record::ProtectAsk,
    /// X12: the sandbox (`{"mode": "read_only" | "workspace_write" | "none", "paths": [...],
    /// "network": "none" | "all"}`). Absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::record::SandboxAsk>,
    /// What a restarted service does with the scope once this one is lost (L6). Absent:
    /// `keep`, but `stop` for an agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_service_loss: Option<crate::record::ServiceLoss>,
    /// The workload's stdin is a pipe the service holds, fed and closed by `input` requests.
    /// Absent: `false`, stdin is `/dev/null`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub input: bool,
    /// The scope belongs to the connection that launched it: when that connection ends (the
    /// client closed it, crashed or was dropped), the service stops the scope (SIGTERM, its
    /// shutdown grace, then the whole tree), and a restarted service stops it too (its
    /// `on_service_loss` defaults to `stop`). Absent: `false`, the scope outlives its client.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub end_with_connection: bool,
    /// H8: the whole tree's memory limit, bytes (`run --memory-max`). Absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_max_bytes: Option<u64>,
    /// H8: the tree's CPU bandwidth in thousandths of a core (`run --cpus 0.5`: 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_millis: Option<u32>,
    /// H8: the most processes and threads the tree holds at once (`run --pids-max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_max: Option<u64>,
    /// H6: how the workload says it is ready, as `run --ready` takes it: `notify`, `fd=N` or
    /// `cmd=COMMAND`. Absent: ready at its `execve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
    /// H6: how long it has to be ready before its scope is stopped (absent: 90 s; `0`: no
    /// bound).
    #[serde(
        rename = "ready_timeout_ms",
        default,
        with = "millis",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
    pub ready_timeout: Option<Duration>,
    /// H7: the health probe, a shell command line (`sh -c`), as `run --health-cmd`. Absent: no
    /// health check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_cmd: Option<String>,
    /// H7: between probes (absent: 30 s).
    #[serde(
        rename = "health_interval_ms",
        default,
        with = "millis",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
    pub health_interval: Option<Duration>,
    /// H7: a probe running longer is stopped and fails (absent: 30 s).
    #[serde(
        rename = "health_timeout_ms",
        default,
        with = "millis",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
    pub health_timeout: Option<Duration>,
    /// H7: consecutive failures that make it `unhealthy` (absent: 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_retries: Option<u32>,
    /// H7: from the start, failures do not count (absent: 0).
    #[serde(
        rename = "health_start_period_ms",
        default,
        with = "millis",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
    pub health_start_period: Option<Duration>,
}

fn command_kind() -> Kind {
    Kind::Command
}

impl LaunchAsk {
    /// An ask with no label, environment, metadata, deadlines or terminal.
    pub fn new(kind: Kind, argv: Vec<String>) -> Self {
        LaunchAsk {
            argv,
            kind,
            label: String::new(),
            cwd: None,
            env: BTreeMap::new(),
            meta: BTreeMap::new(),
            timeout: None,
            idle_timeout: None,
            kill_after: None,
            pty: false,
            wait_for_slot: None,
            log_cap_bytes: None,
            user: None,
            unique: false,
            allow_setns: false,
            protect: crate::record::ProtectAsk::All,
            sandbox: None,
            on_service_loss: None,
            input: false,
            end_with_connection: false,
            memory_max_bytes: None,
            cpu_millis: None,
            pids_max: None,
            ready: None,
            ready_timeout: None,
            health_cmd: None,
            health_interval: None,
            health_timeout: None,
            health_retries: None,
            health_start_period: None,
        }
    }
}

/// The longest duration anything takes from outside (a deadline, a grace, a wait, an age): ten
/// years. Every duration from a command line or a request is bounded by it when it is parsed,
/// so no clock arithmetic on it can overflow (SPEC W11: refused in one line, never an abort).
pub const MAX_DURATION: Duration = Duration::from_secs(3650 * 86_400);

/// An optional [`Duration`] as whole milliseconds on the wire; more than [`MAX_DURATION`] is
/// refused when it is decoded.
mod millis {
    use std::time::Duration;

    use serde::{de::Error, Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        d.map(crate::time::saturating_ms).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let max = super::MAX_DURATION.as_millis();
        match Option::<u64>::deserialize(d)? {
            Some(ms) if u128::from(ms) > max => Err(D::Error::custom(format_args!(
                "{ms} ms is longer than the clock holds (at most {max} ms, ten years)"
            ))),
            ms => Ok(ms.map(Duration::from_millis)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
// Each request is decoded once and handled: the launch's size costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
pub enum Request {
    Launch(LaunchAsk),
    List {
        #[serde(default)]
        all: bool,
    },
    Show {
        id: String,
    },
    Stop {
        id: String,
        /// T7: a grace before the quiesce: the polite signal to the workload's process group,
        /// then up to this long for the scope to end by itself (`stop --grace`). Absent: none.
        #[serde(
            rename = "grace_ms",
            default,
            with = "millis",
            skip_serializing_if = "Option::is_none"
        )]
        #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
        grace: Option<Duration>,
        /// The grace's polite signal, as `stop --signal` takes it (`TERM`, `SIGUSR1`, `15`);
        /// SIGTERM when absent. Only with `grace_ms`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
    },
    /// Until the scope is `until` (as `wait`: it ended and its launcher recorded its output and
    /// result), or `timeout_ms` passed (the reply says `timed_out`; the scope is left alone).
    Wait {
        id: String,
        #[serde(default)]
        until: WaitUntil,
        /// Absent: no limit.
        #[serde(
            rename = "timeout_ms",
            default,
            with = "millis",
            skip_serializing_if = "Option::is_none"
        )]
        #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
        timeout: Option<Duration>,
    },
    /// A signal to the workload's process group (as the grace of a stop sends it), nothing
    /// else: the scope is not stopped and no stop is recorded.
    Signal {
        id: String,
        /// A name or number, as `stop --signal` takes it (`TERM`, `SIGUSR1`, `15`).
        signal: String,
    },
    /// Text written to the stdin of a scope this service launched with `input: true` (waits
    /// at most 10 s for the workload to take it), then, with `close`, its end of file.
    Input {
        id: String,
        #[serde(default)]
        data: String,
        /// Close the stdin after `data`. Absent: `false`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        close: bool,
    },
    /// The output of a stream as it is written (L1's artifact, read from `from_offset`, or
    /// from the first batch moved at or after `from_unix_ms` by the time index; absent: the
    /// start): `output` replies as it grows, then one `followed` once the scope has exited and
    /// its output is all captured. The connection then takes requests again.
    Follow {
        id: String,
        stream: FollowStream,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_offset: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_unix_ms: Option<u64>,
    },
    /// V2: the journal's events after the cursor `since` (absent: from the oldest kept), or at
    /// or after `since_unix_ms`, before `until_unix_ms`, of the `kinds` asked (absent: all)
    /// and of the scope `scope` (an id, a prefix or a label; absent: every scope): one `event`
    /// reply each, then `events_end` with the cursor to resume from; with `follow`, then every
    /// new event as it is written, until `until_unix_ms` passes or the client closes.
    Events {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since_unix_ms: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until_unix_ms: Option<u64>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        kinds: Vec<crate::docs::EventKind>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        follow: bool,
    },
}

/// The stream a `follow` request reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FollowStream {
    Stdout,
    Stderr,
}

/// The state a `wait` request waits for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WaitUntil {
    /// Not live, its output captured and its result recorded (absent: this).
    #[default]
    Exited,
    /// H6: ready (or failed to be, or ended): for a launch with readiness.
    Ready,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Launched {
        id: String,
    },
    /// The registration was made but the workload never ran: the `step` (W13: the program,
    /// the working directory, the user switch) failed with `errno`. A service before W13 sent
    /// no step.
    SpawnFailed {
        id: String,
        errno: i32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(
            feature = "schema",
            schemars(with = "Option<crate::serde_impls::SpawnStepSchema>")
        )]
        step: Option<crate::frame::SpawnStep>,
    },
    List(Vec<ScopeView>),
    /// The `show --json` document.
    Show(Box<crate::docs::ShowDoc>),
    /// The `stop --json` document.
    Stop(Box<crate::docs::StopDoc>),
    /// The `wait --json` document, of the one scope asked about.
    Wait(crate::docs::WaitDoc),
    /// A `signal` request's answer: `delivered` is `false` when the scope was over or no
    /// process of the workload's group was left to take it.
    Signalled {
        id: String,
        delivered: bool,
    },
    /// An `input` request's answer: the bytes written, whether the stdin is now closed.
    Input {
        id: String,
        written: u64,
        closed: bool,
    },
    /// A `follow` request's bytes: `data_b64` (standard base64 of the workload's exact bytes)
    /// found in the artifact at `offset`.
    Output {
        stream: FollowStream,
        offset: u64,
        data_b64: String,
    },
    /// A `follow` request's last reply: the scope has exited and its output is all captured;
    /// `end_offset` is the artifact's length, `complete` whether the capture took every byte
    /// (no cap reached, no write failed).
    Followed {
        stream: FollowStream,
        end_offset: u64,
        complete: bool,
    },
    /// An `events` request's event.
    Event(Box<crate::docs::EventDoc>),
    /// An `events` request's last reply (without `follow`): the cursor after the last event.
    EventsEnd(crate::docs::EventsEndDoc),
}

/// Standard base64 (RFC 4648, padded) of `bytes`: how `output` carries a workload's bytes,
/// which need not be text.
pub fn base64(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                char::from(DIGITS[(n >> (18 - 6 * i) & 63) as usize])
            } else {
                '='
            });
        }
    }
    out
}

/// Why the service refused or failed a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    BadRequest,
    NotFound,
    Corrupt,
    NoCapacity,
    /// A `unique` launch whose label another open scope holds.
    LabelHeld,
    LaunchFailed,
    StopFailed,
    Internal,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Response {
    pub v: u16,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Reply>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ApiError {
    pub kind: ErrorKind,
    pub message: String,
}

impl Response {
    pub fn ok(result: Reply) -> Self {
        Response {
            v: API_VERSION,
            ok: true,
            result: Some(result),
            error: None,
        }
    }
    pub fn err(kind: ErrorKind, message: impl Into<String>) -> Self {
        Response {
            v: API_VERSION,
            ok: false,
            result: None,
            error: Some(ApiError {
                kind,
                message: message.into(),
            }),
        }
    }
}

/// One registration as `ps` shows it (human table and `--json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScopeView {
    pub id: String,
    /// The launch's kind, or `?` for a record that does not decode.
    pub kind: crate::docs::ScopeKind,
    pub label: String,
    /// `live`, `exited`, `unverified`, or `corrupt` (a record that does not decode).
    pub state: crate::docs::State,
    /// Why the scope is `unverified` (or `corrupt`); `null` otherwise.
    pub reason: Option<crate::docs::ScopeReason>,
    /// The workload's own status: `exited`, `signaled`, `never_started`, `unknown`. From the
    /// receipt; while a descendant still holds the scope, as the launching engine reported it;
    /// `null` while neither knows.
    pub status: Option<crate::docs::StatusName>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Whether the workload's own process runs now: its witness (pid and start time) names a
    /// process that is not a zombie. `false` once it ended, also while `status` is `null` (a live
    /// scope held by what it left, whose launcher died before it could report the status), and
    /// for a scope that is not `live`; `null` from a writer that did not say (an older service).
    #[serde(default)]
    pub workload_running: Option<bool>,
    /// The launch's outcome (`completed`, `stopped`, `timed_out`, ...) once its engine returned
    /// the result; `null` before that or when no engine did.
    #[serde(default)]
    pub outcome: Option<crate::docs::Outcome>,
    pub started_at_unix_ms: u64,
    pub age_secs: u64,
    pub pid: u32,
    pub guardian_pid: u32,
    pub cwd: String,
    pub argv: Vec<String>,
    pub stdout: String,
    pub stderr: String,
    /// The service's stall watch (H3): an open `stalled` incident of this live scope, with
    /// its figures; `null` when none (or no service watches).
    #[serde(default)]
    pub stalled: Option<crate::record::StallIncident>,
    /// An open `silent` incident; `null` when none.
    #[serde(default)]
    pub silent: Option<crate::record::StallIncident>,
    /// What the whole tree cost (H4), from a version-2 receipt; `null` before the receipt.
    #[serde(default)]
    pub usage: Option<crate::docs::UsageDoc>,
    /// H6: where a launch with readiness stands (`starting`, `ready`, `failed`); absent for
    /// one without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<crate::docs::ReadyState>,
    /// H7: where a launch with a health check stands (`starting`, `healthy`, `unhealthy`);
    /// absent for one without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<crate::docs::HealthState>,
}

/// A request line: the version beside the request's own keys.
#[derive(Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub(crate) struct Versioned<T> {
    /// [`API_VERSION`].
    v: u16,
    #[serde(flatten)]
    body: T,
}

/// Encodes a request as one line.
pub fn encode_request(req: &Request) -> Vec<u8> {
    encode_line(&Versioned {
        v: API_VERSION,
        body: req,
    })
}

/// Encodes a response as one line.
pub fn encode_response(resp: &Response) -> Vec<u8> {
    encode_line(resp)
}

fn encode_line<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing these plain structs (string keys only) into a Vec cannot fail.
    let mut out = serde_json::to_vec(value).unwrap_or_default();
    out.push(b'\n');
    out
}

fn check_line(line: &[u8]) -> Result<&[u8], DecodeError> {
    if line.len() > MAX_MESSAGE {
        return Err(DecodeError::Oversized {
            len: line.len(),
            max: MAX_MESSAGE,
        });
    }
    Ok(line.strip_suffix(b"\n").unwrap_or(line))
}

fn check_version(v: u16) -> Result<(), DecodeError> {
    if v == 0 || v > API_VERSION {
        return Err(DecodeError::UnsupportedVersion {
            got: v,
            max: API_VERSION,
        });
    }
    Ok(())
}

/// Decodes one request line: the version first (a newer one is reported as such, whatever its
/// fields), then the request, refusing any field it does not know (P3: a dropped field would
/// change what the request does, as a dropped `grace_ms` turns a polite stop into a kill).
pub fn decode_request(line: &[u8]) -> Result<Request, DecodeError> {
    decode_request_with_cause(line).map_err(|(e, _)| e)
}

/// [`decode_request`] with the refusal in words: serde's where it has them (they name the
/// unknown or malformed field), else the decode error's; one line (control characters
/// escaped: a field name may hold any), for the reply to carry.
pub fn decode_request_explained(line: &[u8]) -> Result<Request, String> {
    decode_request_with_cause(line).map_err(|(e, cause)| {
        let text = cause.map_or_else(|| e.to_string(), |c| format!("{e}: {c}"));
        let mut one_line = String::with_capacity(text.len());
        for c in text.chars() {
            if c.is_control() {
                one_line.extend(c.escape_default());
            } else {
                one_line.push(c);
            }
        }
        one_line
    })
}

fn decode_request_with_cause(line: &[u8]) -> Result<Request, (DecodeError, Option<String>)> {
    let invalid = |e: serde_json::Error| {
        (
            DecodeError::InvalidField { field: "request" },
            Some(e.to_string()),
        )
    };
    let line = check_line(line).map_err(|e| (e, None))?;
    let mut msg: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(line).map_err(invalid)?;
    let bad_v = |why: &str| {
        (
            DecodeError::InvalidField { field: "v" },
            Some(why.to_owned()),
        )
    };
    let v = match msg.remove("v") {
        None => return Err(bad_v("missing `v`: every request carries \"v\": 1")),
        Some(v) => v
            .as_u64()
            .and_then(|v| u16::try_from(v).ok())
            .ok_or_else(|| bad_v(&format!("`v` must be a version number such as 1, not {v}")))?,
    };
    check_version(v).map_err(|e| (e, None))?;
    serde_json::from_value(serde_json::Value::Object(msg)).map_err(invalid)
}

/// Decodes one response line.
pub fn decode_response(line: &[u8]) -> Result<Response, DecodeError> {
    let line = check_line(line)?;
    let msg: Response = serde_json::from_slice(line)
        .map_err(|_| DecodeError::InvalidField { field: "response" })?;
    check_version(msg.v)?;
    Ok(msg)
}

/// `protect` is left out of a request at its default (X11: all of it).
pub(crate) fn is_default_protect(p: &crate::record::ProtectAsk) -> bool {
    *p == crate::record::ProtectAsk::All
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4648's test vectors.
    #[test]
    fn base64_is_the_standard_one() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), coded);
        }
        assert_eq!(base64(&[0, 0xff, 0xfe]), "AP/+");
    }

    #[test]
    fn a_launch_ask_keeps_its_wire_form() {
        let ask = LaunchAsk {
            wait_for_slot: Some(Duration::from_secs(2)),
            ..LaunchAsk::new(Kind::Agent, vec!["true".into()])
        };
        let line = String::from_utf8(encode_request(&Request::Launch(ask))).unwrap();
        assert!(line.contains(r#""kind":"agent""#), "{line}");
        assert!(line.contains(r#""wait_for_slot_ms":2000"#), "{line}");
        assert!(line.contains(r#""timeout_ms":null"#), "{line}");
        let old = br#"{"v":1,"op":"launch","argv":["true"],"kind":"quality","label":"","cwd":null,"env":{},"meta":{},"timeout_ms":250,"idle_timeout_ms":null,"pty":false,"wait_for_slot_ms":null}"#;
        let Request::Launch(back) = decode_request(old).unwrap() else {
            panic!("not a launch");
        };
        assert_eq!(back.kind, Kind::Quality);
        assert_eq!(back.timeout, Some(Duration::from_millis(250)));
    }

    /// P3 for the socket: a request field this service does not know is refused, not dropped
    /// (an older service that dropped `grace_ms` would stop at once instead of politely; a
    /// misspelt `timeout` would launch without a deadline). A newer version is still reported
    /// as such, whatever its fields.
    #[test]
    fn a_request_with_a_field_it_does_not_know_is_refused() {
        let id = "0".repeat(32);
        for line in [
            format!(r#"{{"v":1,"op":"stop","id":"{id}","grace":5000}}"#),
            r#"{"v":1,"op":"list","all":true,"since":3}"#.to_owned(),
            r#"{"v":1,"op":"launch","argv":["true"],"kind":"command","label":"","cwd":null,"env":{},"meta":{},"timeout":250,"pty":false}"#.to_owned(),
        ] {
            assert_eq!(
                decode_request(line.as_bytes()),
                Err(DecodeError::InvalidField { field: "request" }),
                "{line}"
            );
        }
        assert!(decode_request(
            format!(r#"{{"v":1,"op":"stop","id":"{id}","grace_ms":5000}}"#).as_bytes()
        )
        .is_ok());
        // The refusal can say which field, in one line.
        let why = decode_request_explained(
            format!(r#"{{"v":1,"op":"stop","id":"{id}","grace":5000}}"#).as_bytes(),
        )
        .err();
        assert!(
            why.as_deref()
                .is_some_and(|w| w.contains("unknown field `grace`") && !w.contains('\n')),
            "{why:?}"
        );
        assert!(decode_request_explained(br#"{"v":1,"op":"list"}"#).is_ok());
        let odd = decode_request_explained(br#"{"v":1,"op":"list","a\nb":1}"#).unwrap_err();
        assert!(odd.contains(r"a\nb") && !odd.contains('\n'), "{odd}");
        assert_eq!(
            decode_request(br#"{"v":3,"op":"list","since":3}"#),
            Err(DecodeError::UnsupportedVersion { got: 3, max: 2 })
        );
    }

    #[test]
    fn requests_round_trip_and_are_versioned() {
        let reqs = [
            Request::Launch(LaunchAsk {
                timeout: Some(Duration::from_millis(1500)),
                ..LaunchAsk::new(Kind::Command, vec!["sleep".into(), "1".into()])
            }),
            Request::List { all: true },
            Request::Show { id: "ab".into() },
            Request::Stop {
                id: "cd".into(),
                grace: None,
                signal: None,
            },
            Request::Stop {
                id: "cd".into(),
                grace: Some(Duration::from_millis(2500)),
                signal: Some("USR1".into()),
            },
        ];
        for r in reqs {
            let line = encode_request(&r);
            assert_eq!(line.last(), Some(&b'\n'));
            assert_eq!(decode_request(&line).unwrap(), r);
        }
        assert_eq!(
            decode_request(br#"{"v":3,"op":"list"}"#),
            Err(DecodeError::UnsupportedVersion { got: 3, max: 2 })
        );
        // Version 2 (the reasons became objects tagged by `kind`) is what is written; a
        // version-1 request is still read, its keys did not change.
        assert!(encode_request(&Request::List { all: false }).starts_with(br#"{"v":2,"#));
        assert!(decode_request(br#"{"v":1,"op":"list"}"#).is_ok());
        assert!(decode_request(br#"{"v":1,"op":"explode"}"#).is_err());
        assert!(decode_request(b"\xff\xfe").is_err());
        assert!(matches!(
            decode_request(&vec![b' '; MAX_MESSAGE + 1]),
            Err(DecodeError::Oversized { .. })
        ));
    }

    /// A number in a reply reads as the nearest double and writes back as the same number
    /// (serde_json's `float_roundtrip`; without it `989e28` read as 9.889999999999999e30).
    #[test]
    fn json_numbers_round_trip_exactly() {
        use crate::docs::IncidentDoc;
        let incident = |cpu_percent: f64| IncidentDoc {
            since: "s".into(),
            samples: 1,
            cpu_percent,
            last_write: "w".into(),
        };
        let first: IncidentDoc = serde_json::from_str(
            r#"{"since":"s","samples":1,"cpu_percent":989e28,"last_write":"w"}"#,
        )
        .unwrap();
        assert_eq!(first.cpu_percent, 989e28);
        let again = serde_json::to_string(&first).unwrap();
        assert!(again.contains(r#""cpu_percent":9.89e+30"#), "{again}");
        // Every double survives text and back, at the edges too.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut values = vec![
            f64::MIN_POSITIVE,
            f64::MAX,
            -f64::MAX,
            5e-324,
            0.1,
            1.0 / 3.0,
        ];
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(x);
            if v.is_finite() {
                values.push(v);
            }
        }
        for v in values {
            let doc = incident(v);
            let back: IncidentDoc =
                serde_json::from_str(&serde_json::to_string(&doc).unwrap()).unwrap();
            assert_eq!(back, doc, "{v:e}");
        }
    }

    /// A request without `v` says that `v` is missing, not that it is not allowed (issue 40:
    /// "invalid field: v" read as a refusal of the key); a `v` that is no version says so.
    #[test]
    fn a_missing_version_is_named_as_missing() {
        let why = decode_request_explained(br#"{"op":"list"}"#).unwrap_err();
        assert!(why.contains("missing `v`"), "{why}");
        let why = decode_request_explained(br#"{"v":"1","op":"list"}"#).unwrap_err();
        assert!(why.contains("`v` must be"), "{why}");
    }

    #[test]
    fn responses_round_trip() {
        let ok = Response::ok(Reply::Launched { id: "x".into() });
        assert_eq!(decode_response(&encode_response(&ok)).unwrap(), ok);
        let err = Response::err(ErrorKind::NoCapacity, "no free slot");
        assert_eq!(decode_response(&encode_response(&err)).unwrap(), err);
    }
}
