//! Durable records (feature `std`): the registration record written before *start*, the
//! capture receipt kept when a stream's capture is incomplete, and the stop request written by a
//! stop that is not the launching engine's own.
//!
//! # Envelope layout (little-endian)
//!
//! ```text
//! off size field
//!   0    8 magic (b"RFNREG\0\0" registration, b"RFNCAP\0\0" capture receipt,
//!                 b"RFNSTOP\0" stop request, b"RFNRSLT\0" launch result,
//!                 b"RFNSTAL\0" stall watch status)
//!   8    2 version (1; a registration record is written as 2 and read as 1 or 2)
//!  10    2 reserved (0)
//!  12    4 payload length (<= MAX_RECORD - 20)
//!  16    4 CRC-32 of bytes 0..16 followed by the payload
//!  20    n payload: bincode 2 (standard config) of the record struct
//! ```
//!
//! A newer reader rejects a version it does not know ([`DecodeError::UnsupportedVersion`]); the
//! payload length is checked against the input and [`MAX_RECORD`] before anything is decoded.
//! Encoders refuse a record whose file would exceed [`MAX_RECORD`]: everything written decodes.
//!
//! Registration version 2 appends [`Registration::argv_bytes`] (the command's exact bytes when
//! one argument is not UTF-8) to version 1's fields; a version 1 payload is read as version 2
//! with that field absent (bincode encodes an absent `Option` as one zero byte).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::codec::{envelope_open, envelope_seal, envelope_start, Writer};
use crate::frame::{Hello, Rlimit};
use crate::receipt::WorkloadStatus;
use crate::{BootId, DecodeError, EncodeError, ProofIdentity, RegistrationId, RuntimeId};

mod payload;

pub const REGISTRATION_MAGIC: [u8; 8] = *b"RFNREG\0\0";
pub const CAPTURE_MAGIC: [u8; 8] = *b"RFNCAP\0\0";
pub const STOP_MAGIC: [u8; 8] = *b"RFNSTOP\0";
pub const RESULT_MAGIC: [u8; 8] = *b"RFNRSLT\0";
pub const STALL_MAGIC: [u8; 8] = *b"RFNSTAL\0";
pub const READY_MAGIC: [u8; 8] = *b"RFNREDY\0";
pub const HEALTH_MAGIC: [u8; 8] = *b"RFNHLTH\0";
pub const RECORD_VERSION: u16 = 1;
/// The registration record's version: 2 adds [`Registration::argv_bytes`] and
/// [`Limits::kill_after_ms`]; 3 appends [`Registration::cgroup`]; 4 appends
/// [`Registration::allow_setns`]; 5 appends [`Registration::supervisor_provenance`] and
/// [`Registration::guardian_provenance`]; 6 appends [`Registration::on_service_loss`]; 7
/// appends [`Registration::resources`]; 8 [`Registration::readiness`]; 9
/// [`Registration::protection`]; 10 [`Registration::sandbox`]; 11 [`Registration::health`].
pub const REGISTRATION_VERSION: u16 = 11;
/// The launch result's version: 2 adds [`LaunchResultRecord::stop_failure`] and
/// [`LaunchResultRecord::usage`]; 3 [`LaunchResultRecord::residue_stop`]; 4 appends
/// [`LaunchResultRecord::cgroup_usage`]; 5 [`LaunchResultRecord::limit_usage`].
pub const RESULT_VERSION: u16 = 5;
/// The capture receipt's version: 2 types the stream ends ([`StreamIncomplete`],
/// [`StreamFailure`]); version 1 wrote them as words, read as their `Worded` variants.
pub const CAPTURE_VERSION: u16 = 2;
pub const ENVELOPE_LEN: usize = crate::codec::envelope_len(REGISTRATION_MAGIC.len());
/// Largest record file accepted.
pub const MAX_RECORD: usize = 1024 * 1024;

/// The kind of a managed launch (SPEC S1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Agent,
    Quality,
    Command,
    Terminal,
}

impl crate::docs::Vocabulary for Kind {
    const ALL: &'static [Self] = &[Kind::Agent, Kind::Quality, Kind::Command, Kind::Terminal];
    const WHAT: &'static str = "kind";
}

impl Kind {
    /// The kind's name, as serde writes it (`agent`, `quality`, `command`, `terminal`).
    pub fn as_str(self) -> &'static str {
        crate::docs::Vocabulary::name(self)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Kind {
    type Err = DecodeError;
    fn from_str(s: &str) -> Result<Self, DecodeError> {
        crate::docs::Vocabulary::from_name(s).ok_or(DecodeError::InvalidField { field: "kind" })
    }
}

/// What recovery does with a scope whose launching service is gone (SPEC L6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ServiceLoss {
    /// Keep it running: the next service adopts it (its guardian captures its output).
    Keep,
    /// Stop it: a restarted service ends what the lost one had started.
    Stop,
}

/// What happens to a scope that outlives its workload (SPEC S9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopePolicy {
    /// Keep it: capacity stays held, it is listed live, its receipt comes later.
    Keep,
    /// Stop it through the shared stop once the final drain has ended.
    Stop,
}

/// Limits and deadlines, stored so that a later process enforces them with their original values.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Completion deadline, measured from [`Registration::started_at_unix_ms`].
    pub completion_timeout_ms: Option<u64>,
    /// Idle deadline: no output, input, resize or signal activity for this long.
    pub idle_timeout_ms: Option<u64>,
    /// Per-artifact byte cap.
    pub log_cap_bytes: Option<u64>,
    pub rlimits: Vec<Rlimit>,
    /// A deadline's grace (`--kill-after`, T7): the workload's group gets SIGTERM when a deadline
    /// passes and this long to end before the kill. `None`: the kill at once.
    pub kill_after_ms: Option<u64>,
}

/// The durable registration record (SPEC S2), written and fsynced before *start*.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    pub id: RegistrationId,
    pub runtime: RuntimeId,
    pub kind: Kind,
    pub label: String,
    pub owner: String,
    /// Free-form purpose metadata (goal, round, provider, target app, ...).
    pub purpose: BTreeMap<String, String>,
    pub argv: Vec<String>,
    pub cwd: String,
    pub stdout_path: String,
    pub stderr_path: String,
    pub stdin_path: Option<String>,
    pub pty: bool,
    pub limits: Limits,
    pub scope_policy: ScopePolicy,
    /// Original start, CLOCK_REALTIME milliseconds: deadlines survive restarts with it.
    pub started_at_unix_ms: u64,
    /// Guardian, boot, workload, pgid/sid and proof identity as the guardian reported them.
    pub hello: Hello,
    pub proof_path: String,
    /// The command's exact bytes, only when an argument is not UTF-8 (W6): `argv` then holds
    /// its text with U+FFFD for what is not UTF-8, for views. `None` in version 1 records.
    pub argv_bytes: Option<Vec<Vec<u8>>>,
    /// The cgroup v2 directory made for the scope (F4), and whether the guardian forked the
    /// workload into it. `None` in version 1 and 2 records, and where no cgroup was made.
    pub cgroup: Option<ScopeCgroup>,
    /// Whether the launch opted out of the guardian's filter against `setns` into a PID or
    /// user namespace (X7, `run --allow-setns`): `Some(false)` the filter held, `Some(true)` the
    /// workload could join outside namespaces. `None` in version 1 to 3 records (their
    /// guardians had no filter).
    pub allow_setns: Option<bool>,
    /// The build of the supervisor that registered the scope (V1). `None` in version 1 to 4
    /// records.
    pub supervisor_provenance: Option<BuildProvenance>,
    /// The build of the guardian that holds the scope, as its `Hello` said (V1). `None` in
    /// version 1 to 4 records, and from a guardian that carries none.
    pub guardian_provenance: Option<BuildProvenance>,
    /// L6: what recovery does with the scope once its launcher is gone. `None` in version 1
    /// to 5 records and for launchers that expect no scope to outlive them: recovery stops it.
    pub on_service_loss: Option<ServiceLoss>,
    /// H8: the resource limits asked for and the cgroup directories that hold them. `None` in
    /// version 1 to 6 records and for launches without a limit.
    pub resources: Option<ScopeResources>,
    /// H6: how the workload says it is ready. `None` in version 1 to 7 records and for
    /// launches that are ready at their `execve`.
    pub readiness: Option<ReadinessSpec>,
    /// X11: what kept the workload from its evidence, its guardian, other scopes and the
    /// service. `None` in version 1 to 8 records (their launches had no Landlock domain).
    pub protection: Option<Protection>,
    /// X12: the sandbox the workload ran in (`run --sandbox`, `--network`). `None` in version
    /// 1 to 9 records and for launches that asked for none.
    pub sandbox: Option<Sandbox>,
    /// H7: the health check asked for. `None` in version 1 to 10 records and for launches
    /// without one.
    pub health: Option<HealthSpec>,
}

/// X12: how much of the file system a sandboxed workload may write (`run --sandbox`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// No sandbox (the default): writes as the user may.
    #[default]
    None,
    /// Reads everywhere; writes only to a private temporary directory (`TMPDIR`) and the
    /// terminal and null-like devices.
    ReadOnly,
    /// `read_only` plus the working directory and the named paths.
    WorkspaceWrite,
}

/// X12: the network a workload may use (`run --network`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum NetworkAsk {
    /// As without a sandbox (the default).
    #[default]
    All,
    /// No TCP bind or connect (Landlock ABI 4).
    None,
}

/// X12: the sandbox a launch asks for (the socket API's `sandbox` object).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxAsk {
    /// Absent: `none`.
    #[serde(default)]
    pub mode: SandboxMode,
    /// With `workspace_write`: more writable paths (absolute, or relative to the working
    /// directory; each must exist). Absent: none.
    #[serde(default)]
    pub paths: Vec<String>,
    /// Absent: `all`.
    #[serde(default)]
    pub network: NetworkAsk,
}

impl SandboxAsk {
    /// Whether this asks for nothing (no file-system sandbox, the network as it is).
    pub fn is_none(&self) -> bool {
        self.mode == SandboxMode::None && self.network == NetworkAsk::All
    }
}

/// X12: the sandbox a launch ran in, as the record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Sandbox {
    pub mode: SandboxMode,
    pub network: NetworkAsk,
    /// The workspace's writable roots, canonical (the working directory first, then the named
    /// paths); empty for `read_only` and `none`.
    pub writable: Vec<String>,
    /// The private temporary directory made for the launch (its `TMPDIR`).
    pub tmpdir: Option<String>,
}

/// H7: a launch's health check (`run --health-cmd`), docker's HEALTHCHECK.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthSpec {
    /// The probe, a shell command line (`sh -c`), run in the workload's directory.
    pub cmd: String,
    pub interval_ms: u64,
    /// A probe running longer is stopped and counts as a failure.
    pub timeout_ms: u64,
    /// Consecutive failures (past the start period) that make it `unhealthy`.
    pub retries: u32,
    /// From the start: failures do not count, a success makes it `healthy`.
    pub start_period_ms: u64,
}

/// H7: one probe of a health check, as its record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// The probe's own scope.
    pub scope: Option<RegistrationId>,
    pub started_unix_ms: u64,
    pub duration_ms: u64,
    /// Its exit code; `None`: it timed out, was killed by a signal, or did not run.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// The start of its stdout then stderr, as written (at most 4 KiB; views escape it).
    pub output: Vec<u8>,
}

/// H7: where a scope with a health check stands (`logs/ID.health`), written by its prober.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthRecord {
    pub id: RegistrationId,
    pub runtime: RuntimeId,
    pub state: crate::docs::HealthState,
    pub at_unix_ms: u64,
    /// Consecutive failures that counted (past the start period).
    pub failing_streak: u32,
    pub probes: u64,
    /// The process that probes (a foreground `run`, the service) and its start time in clock
    /// ticks since boot: a restarted service resumes the probes of a prober that is gone.
    pub prober_pid: u32,
    pub prober_start_time: u64,
    /// The last few probes, oldest first.
    pub last: Vec<ProbeRecord>,
}

/// X11: the protection a launch asked for (`run --protect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ProtectAsk {
    /// The file-system part and the scoping (the default).
    #[default]
    All,
    /// The file-system part only: the workload may signal outside its scope.
    Fs,
    /// Scoping only (signals, abstract sockets): the workload may write the home's `run/`.
    Signals,
    /// No Landlock domain: the threat model of a same-uid workload without Landlock.
    None,
}

/// X11: how one part of the protection stood at the launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ProtectPart {
    /// In force for the workload and every descendant.
    Held,
    /// The launch opted out of it (`--protect`).
    OptedOut,
    /// The kernel has no Landlock, or an ABI too old for this part.
    Unavailable,
    /// The file-system part: the home lies beneath a shared temporary directory (world-writable
    /// and sticky), where it would break `mktemp`.
    SharedTmp,
    /// Abstract-socket scoping: `--ready notify` needs the workload to reach the launcher's
    /// abstract notify socket.
    ReadyNotify,
    /// The file-system part: a folder on the way down to `run/` could not be listed (its
    /// entries are what the rules grant), so the part was left out.
    Unlistable,
}

/// X11: what held per launch, and at what cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Protection {
    pub asked: ProtectAsk,
    /// The kernel's Landlock ABI (0: none).
    pub abi: u32,
    /// Writes, truncation, renames, links and removals under the home's `run/`, reads of
    /// scopes' output.
    pub fs: ProtectPart,
    /// Signals to processes outside the scope's domain (ABI 6).
    pub signals: ProtectPart,
    /// Connections to abstract unix sockets made outside the domain (ABI 6).
    pub abstract_sockets: ProtectPart,
    /// Whether the workload started with `no_new_privs` (item 4: set by an unprivileged
    /// launcher, which needs it for Landlock; setuid programs then gain nothing).
    pub no_new_privs: bool,
    /// The rules the domain holds.
    pub rules: u32,
}

/// H6: how a scope says it is ready (`run --ready`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReadyMode {
    /// `sd_notify`: a `READY=1` datagram on `$NOTIFY_SOCKET` from a process of the scope.
    Notify,
    /// s6's notification descriptor: a newline written on descriptor `fd`.
    Fd,
    /// A probe command, run (each time as a scope of its own) until it exits 0.
    Cmd,
}

/// H6: the readiness a launch asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadinessSpec {
    pub mode: ReadyMode,
    /// `fd`: the descriptor number the workload writes its newline on.
    pub fd: Option<u32>,
    /// `cmd`: the probe, a shell command line (`sh -c`).
    pub cmd: Option<String>,
    /// How long the workload has to be ready before its scope is stopped (`None`: no bound).
    pub timeout_ms: Option<u64>,
}

/// H6: where a scope with readiness stands (`logs/ID.ready`), written by its launcher.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyRecord {
    pub id: RegistrationId,
    pub runtime: RuntimeId,
    pub state: crate::docs::ReadyState,
    pub at_unix_ms: u64,
    /// The last `STATUS=` the workload sent (notify), escaped and at most 256 bytes.
    pub status: Option<String>,
    /// Why it is `failed`.
    pub reason: Option<String>,
    /// Probes run so far (`cmd`).
    pub probes: u32,
}

/// H8: a scope's resource limits (`--memory-max`, `--cpus`, `--pids-max`) and where they were
/// applied: the scope's own cgroup v2 directory where the unified hierarchy has the controller,
/// else a directory of the controller's v1 hierarchy that the workload joined before its
/// `execve`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeResources {
    pub memory_max_bytes: Option<u64>,
    /// CPU bandwidth in thousandths of a core (`--cpus 0.5`: 500).
    pub cpu_millis: Option<u32>,
    pub pids_max: Option<u64>,
    pub placements: Vec<LimitPlacement>,
}

/// One controller's directory of a scope with limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitPlacement {
    pub controller: LimitController,
    /// The cgroup directory (absolute path in this mount namespace).
    pub dir: String,
    /// `true`: the unified hierarchy (the scope's F4 directory); `false`: a v1 hierarchy.
    pub unified: bool,
}

/// A controller a limit is applied through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitController {
    Memory,
    Cpu,
    Pids,
}

impl LimitController {
    /// The controller's name in `/proc/self/cgroup` and `cgroup.controllers`.
    pub fn name(self) -> &'static str {
        match self {
            LimitController::Memory => "memory",
            LimitController::Cpu => "cpu",
            LimitController::Pids => "pids",
        }
    }
}

/// H8: what the limits' controllers accounted, read once the scope was empty.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitUsage {
    /// `memory.peak` (v2) or `memory.max_usage_in_bytes` (v1).
    pub memory_peak_bytes: Option<u64>,
    /// `memory.events` `oom_kill` (v2) or `memory.oom_control` `oom_kill` (v1).
    pub oom_kills: Option<u64>,
    /// `pids.peak` where the kernel has it.
    pub pids_peak: Option<u64>,
    /// Forks refused at the limit (`pids.events` `max`).
    pub pids_refused: Option<u64>,
    /// Time the scope was throttled by its CPU limit, microseconds (`cpu.stat`).
    pub throttled_us: Option<u64>,
}

/// A binary's build (V1), as records and documents carry it: the package version, the commit
/// (`None`: unknown, a build outside git), whether its sources differed from that commit
/// (`None`: unknown) and its class. Made from the fixed layout a binary embeds
/// ([`crate::provenance::Provenance`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BuildProvenance {
    pub version: String,
    pub commit: Option<String>,
    pub dirty: Option<bool>,
    pub class: BuildClass,
}

/// A build's class (V1): `release` only for a clean build of the commit tagged with the
/// package's version, `source` otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BuildClass {
    Release,
    Source,
}

impl crate::docs::Vocabulary for BuildClass {
    const ALL: &'static [Self] = &[BuildClass::Release, BuildClass::Source];
    const WHAT: &'static str = "build class";
}

impl BuildClass {
    /// The class's name, as serde writes it (`release`, `source`).
    pub fn as_str(self) -> &'static str {
        crate::docs::Vocabulary::name(self)
    }
}

impl From<crate::provenance::Provenance> for BuildProvenance {
    fn from(p: crate::provenance::Provenance) -> Self {
        BuildProvenance {
            version: p.version().to_owned(),
            commit: p.commit().map(str::to_owned),
            dirty: p.dirty(),
            class: match p.class() {
                crate::provenance::Class::Release => BuildClass::Release,
                crate::provenance::Class::Source => BuildClass::Source,
            },
        }
    }
}

/// A scope's own cgroup (F4): the directory the supervisor made for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeCgroup {
    /// The absolute path of the cgroup directory (`<mount>/<root>/refine/<id>`).
    pub path: String,
    /// `None`: the workload was forked into it (`clone3(CLONE_INTO_CGROUP)`), so its tree is
    /// exactly the cgroup's. `Some(errno)`: the kernel refused that, the workload runs in the
    /// guardian's cgroup, and the stop uses `/proc` (the directory is removed at once).
    pub refused_errno: Option<i32>,
}

impl ScopeCgroup {
    /// Whether the workload's tree is this cgroup's membership.
    pub fn holds_scope(&self) -> bool {
        self.refused_errno.is_none()
    }
}

impl Registration {
    pub fn boot_id(&self) -> BootId {
        self.hello.boot_id
    }
    pub fn proof(&self) -> ProofIdentity {
        self.hello.proof
    }
}

/// How one captured stream ended (SPEC S5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamEnd {
    /// Read to end of file: every byte is in the result and the artifact.
    Eof,
    /// Reading or writing the artifact failed.
    CaptureFailure(StreamFailure),
    /// The result does not hold every byte (memory limit, artifact cap, drain ended first).
    Incomplete(StreamIncomplete),
}

/// Why a stream's result does not hold every byte.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamIncomplete {
    /// More than `kept` bytes were produced; the artifact holds them all.
    MemoryLimit { kept: u64 },
    /// The artifact reached its cap and stopped growing; the pipe was still drained.
    ArtifactCap { cap: u64 },
    /// The final drain ended before the stream reached end of file.
    DrainEnded { drain_ms: u64 },
    /// The reader of the forwarded stream went away.
    ReaderGone,
    /// Held open outside the scope after it ended (X10).
    HeldOutside,
    /// A version 1 receipt's words (it wrote no kind).
    Worded(String),
}

/// A read or artifact write that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamFailure {
    Read {
        errno: i32,
    },
    ArtifactWrite {
        errno: i32,
    },
    /// A version 1 receipt's words (it wrote no kind).
    Worded(String),
}

impl std::fmt::Display for StreamIncomplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamIncomplete::MemoryLimit { kept } => write!(
                f,
                "output past the {kept}-byte memory limit (artifact complete)"
            ),
            StreamIncomplete::ArtifactCap { cap } => write!(
                f,
                "log cap of {cap} bytes reached (the pipe is still drained)"
            ),
            StreamIncomplete::DrainEnded { drain_ms } => {
                write!(f, "final drain of {drain_ms}ms ended before end of file")
            }
            StreamIncomplete::ReaderGone => {
                f.write_str("the reader of the forwarded stream went away")
            }
            StreamIncomplete::HeldOutside => f.write_str("held open outside the scope"),
            StreamIncomplete::Worded(words) => f.write_str(words),
        }
    }
}

impl std::fmt::Display for StreamFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamFailure::Read { errno } => {
                write!(f, "reading the stream failed (errno {errno})")
            }
            StreamFailure::ArtifactWrite { errno } => {
                write!(f, "writing the artifact failed (errno {errno})")
            }
            StreamFailure::Worded(words) => f.write_str(words),
        }
    }
}

/// `incomplete: WHY` or `capture failure: WHY`; `end of file`.
impl std::fmt::Display for StreamEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamEnd::Eof => f.write_str("end of file"),
            StreamEnd::Incomplete(why) => write!(f, "incomplete: {why}"),
            StreamEnd::CaptureFailure(why) => write!(f, "capture failure: {why}"),
        }
    }
}

/// The capture receipt as version 1 wrote it: its stream ends in words.
mod capture_v1 {
    use super::*;

    #[derive(Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub(super) enum StreamEnd {
        Eof,
        CaptureFailure(String),
        Incomplete(String),
    }

    #[derive(Deserialize)]
    pub(super) struct StreamReceipt {
        name: String,
        end: StreamEnd,
        artifact_path: String,
        artifact_bytes: u64,
        prefix: Vec<u8>,
    }

    #[derive(Deserialize)]
    pub(super) struct CaptureReceipt {
        id: RegistrationId,
        runtime: RuntimeId,
        workload_status: Option<WorkloadStatus>,
        streams: Vec<StreamReceipt>,
        written_at_unix_ms: u64,
    }

    impl From<CaptureReceipt> for super::CaptureReceipt {
        fn from(r: CaptureReceipt) -> Self {
            super::CaptureReceipt {
                id: r.id,
                runtime: r.runtime,
                workload_status: r.workload_status,
                streams: r
                    .streams
                    .into_iter()
                    .map(|s| super::StreamReceipt {
                        name: s.name,
                        end: match s.end {
                            StreamEnd::Eof => super::StreamEnd::Eof,
                            StreamEnd::CaptureFailure(w) => {
                                super::StreamEnd::CaptureFailure(StreamFailure::Worded(w))
                            }
                            StreamEnd::Incomplete(w) => {
                                super::StreamEnd::Incomplete(StreamIncomplete::Worded(w))
                            }
                        },
                        artifact_path: s.artifact_path,
                        artifact_bytes: s.artifact_bytes,
                        prefix: s.prefix,
                    })
                    .collect(),
                written_at_unix_ms: r.written_at_unix_ms,
            }
        }
    }
}

/// One stream in a capture receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamReceipt {
    pub name: String,
    pub end: StreamEnd,
    pub artifact_path: String,
    pub artifact_bytes: u64,
    /// At most [`CAPTURE_PREFIX_MAX`] leading bytes.
    pub prefix: Vec<u8>,
}

pub const CAPTURE_PREFIX_MAX: usize = 4096;

/// Kept beside an incomplete result: what was captured, what was not, and where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureReceipt {
    pub id: RegistrationId,
    pub runtime: RuntimeId,
    pub workload_status: Option<WorkloadStatus>,
    pub streams: Vec<StreamReceipt>,
    pub written_at_unix_ms: u64,
}

/// Why a stop was asked for by someone other than the engine that launched the scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum StopCause {
    /// An operator (`stop ID`, the service's stop request).
    Operator,
    /// The service's maintenance loop enforced the registration's completion deadline.
    CompletionDeadline,
    /// The service's maintenance loop enforced the registration's idle deadline.
    IdleDeadline,
    /// Recovery (a restarted service, `recover`) stopped a live scope whose launcher was gone.
    Recovery,
    /// H6: the workload was not ready within its `--ready-timeout`.
    ReadyTimeout,
}

/// Written before such a stop sends its first signal, so the engine still waiting on the
/// workload (possibly in another process) reports the cause (S7) rather than a bare signal. The
/// first request is kept: a later one never moves the recorded time past the exit it caused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopRequest {
    pub id: RegistrationId,
    pub runtime: RuntimeId,
    pub cause: StopCause,
    /// Wall clock, like the guardian's `WorkloadExited` time it is compared with.
    pub requested_at_unix_ns: u64,
    pub requester_pid: u32,
}

/// What the launching engine returned to its caller: the outcome (S7, by name: `completed`,
/// `stopped`, `timed_out`, ...) and the workload's own status. Written when the result is
/// returned, so operators see why a launch ended and how its workload exited while a descendant
/// still holds the scope. Display only: nothing is decided from it; exit is proven by the receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchResultRecord {
    pub id: RegistrationId,
    pub runtime: RuntimeId,
    /// Stored as its name (as when this field was a string): old records read the same.
    #[serde(with = "crate::docs::by_name")]
    pub outcome: crate::docs::Outcome,
    pub workload_status: WorkloadStatus,
    pub written_at_unix_ms: u64,
    /// Why the stop of the scope's residue failed, when it did (outcome `stop_failed`).
    pub stop_failure: Option<String>,
    /// What the whole tree cost (H4), from the receipt: set when the receipt is in (at the
    /// result, or later when a descendant held the scope); `None` before.
    pub usage: Option<crate::TreeUsage>,
    /// The stop of the scope's residue (what outlived the workload: the `stop` policy, a
    /// deadline), once it succeeded (D6); a failed one is `stop_failure`. Version 3.
    pub residue_stop: Option<ResidueStopRecord>,
    /// The final accounting of the scope's own cgroup (F4), read once it was empty and before
    /// it was removed. `None`: the scope had no cgroup (the `/proc` path), its accounting could
    /// not be read (the launcher was gone), or a record before version 4.
    pub cgroup_usage: Option<CgroupUsage>,
    /// H8: what the controllers of the scope's limits accounted. `None`: no limit, or a record
    /// before version 5.
    pub limit_usage: Option<LimitUsage>,
}

/// What the kernel accounted to a scope's cgroup (F4): `cpu.stat`, and where the memory
/// controller is enabled for the subtree, `memory.peak` and `memory.events`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupUsage {
    /// `cpu.stat` `usage_usec`: every member's CPU time, waited for or not.
    pub cpu_us: u64,
    /// `cpu.stat` `user_usec`.
    pub user_us: u64,
    /// `cpu.stat` `system_usec`.
    pub system_us: u64,
    /// `memory.peak` in bytes; `None`: the memory controller is not enabled for the subtree.
    pub memory_peak_bytes: Option<u64>,
    /// `memory.events` `oom_kill`; `None` likewise.
    pub oom_kills: Option<u64>,
}

/// How the stop of a launch's residue ended (D6): part of the launch's outcome document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResidueStopRecord {
    /// The stop's outcome, stored as its name (`stopped`, `already_exited`,
    /// `killed_unverified`), as when this field was a string.
    #[serde(with = "crate::docs::by_name")]
    pub outcome: crate::docs::StopOutcome,
    /// Who asked for it when it was not the engine's own policy (a completion deadline).
    pub cause: Option<StopCause>,
    /// Processes found in the scope and killed.
    pub killed: u32,
    /// Wall clock when the stop finished.
    pub at_unix_ms: u64,
}

/// A stall watch signal (SPEC H3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum StallSignal {
    /// The tree burned CPU for N samples in a row while none of its artifacts grew.
    Stalled,
    /// Nothing was written for M samples while the scope was alive.
    Silent,
}

/// An open stall watch incident and its figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StallIncident {
    pub signal: StallSignal,
    /// When the incident began (wall clock of the sample that raised it).
    pub since_unix_ms: u64,
    /// Busy samples in a row (stalled) or samples without a write (silent).
    pub samples: u32,
    /// The tree's average CPU over the last N samples, in thousandths of one core.
    pub cpu_permille: u32,
    /// The last sample at which an artifact changed (or the watch's first sample).
    pub last_write_unix_ms: u64,
}

/// What the service's stall watch says of a live scope, written at each sample that changes it
/// so that `ps` and `show` (other processes) print it. Display only: nothing is decided from it,
/// and the watch never signals anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallRecord {
    pub id: RegistrationId,
    pub runtime: RuntimeId,
    pub sampled_at_unix_ms: u64,
    pub stalled: Option<StallIncident>,
    pub silent: Option<StallIncident>,
}

/// The length of the record envelope that starts `buf` (header and payload), read from its
/// header; `None` for a header that is short or declares more than [`MAX_RECORD`]. Nothing is
/// checked beyond the length: decode the envelope to trust it. Lets a file hold a record followed
/// by another (a registration, then the launch's result).
pub fn envelope_size(buf: &[u8]) -> Option<usize> {
    let at = REGISTRATION_MAGIC.len() + 4;
    let len = buf.get(at..at + 4)?;
    let n = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let total = ENVELOPE_LEN.checked_add(n)?;
    (total <= MAX_RECORD && buf.len() >= ENVELOPE_LEN).then_some(total)
}

/// Largest payload an encoder accepts: a record file never exceeds [`MAX_RECORD`].
pub const MAX_PAYLOAD: usize = MAX_RECORD - ENVELOPE_LEN;

/// Encodes a record payload: bincode 2, standard configuration. Read back by [`payload`], which
/// never trusts a declared length (see there for why not bincode's own decoder).
fn to_payload<T: Serialize>(value: &T) -> Result<Vec<u8>, EncodeError> {
    // Serializing these plain structs (every sequence has a length) cannot fail.
    bincode::serde::encode_to_vec(value, bincode::config::standard())
        .map_err(|_| EncodeError::InvalidField { field: "record" })
}

fn seal(magic: [u8; 8], version: u16, payload: Vec<u8>) -> Vec<u8> {
    let mut out = vec![0u8; ENVELOPE_LEN + payload.len()];
    let mut w = Writer::new(&mut out);
    // The buffer is sized for exactly this envelope, so none of these writes can fail.
    let _ = envelope_start(&mut w, &magic, version, 0)
        .and_then(|()| w.bytes(&payload))
        .and_then(|()| envelope_seal(&mut w, magic.len()));
    out
}

fn open(magic: [u8; 8], buf: &[u8]) -> Result<&[u8], DecodeError> {
    open_versions(magic, RECORD_VERSION, buf).map(|(_, payload)| payload)
}

/// Opens an envelope of any version up to `max`; returns the version and the payload.
fn open_versions(magic: [u8; 8], max: u16, buf: &[u8]) -> Result<(u16, &[u8]), DecodeError> {
    if buf.len() > MAX_RECORD {
        return Err(DecodeError::Oversized {
            len: buf.len(),
            max: MAX_RECORD,
        });
    }
    let (reserved, payload) = envelope_open(buf, &magic, max, MAX_RECORD - ENVELOPE_LEN)?;
    if reserved != 0 {
        return Err(DecodeError::InvalidField {
            field: "record reserved",
        });
    }
    // envelope_open checked the version at bytes 8..10 against `max`.
    let version = u16::from_le_bytes([buf[magic.len()], buf[magic.len() + 1]]);
    Ok((version, payload))
}

/// Encodes a record and refuses one its decoder would refuse (a file over [`MAX_RECORD`]),
/// before anything is written.
fn encode_record<T: Serialize>(magic: [u8; 8], value: &T) -> Result<Vec<u8>, EncodeError> {
    encode_versioned(magic, RECORD_VERSION, value)
}

fn encode_versioned<T: Serialize>(
    magic: [u8; 8],
    version: u16,
    value: &T,
) -> Result<Vec<u8>, EncodeError> {
    let payload = to_payload(value)?;
    if payload.len() > MAX_PAYLOAD {
        return Err(EncodeError::Oversized {
            len: ENVELOPE_LEN + payload.len(),
            max: MAX_RECORD,
        });
    }
    Ok(seal(magic, version, payload))
}

/// Decodes a whole payload. What it allocates is bounded by the payload (at most
/// [`MAX_PAYLOAD`] bytes, checked by the envelope before this runs): every string, byte vector,
/// sequence and map length is checked against the bytes that remain before anything is
/// allocated for it ([`payload`]).
fn decode_payload<T: for<'de> Deserialize<'de>>(
    payload: &[u8],
    field: &'static str,
) -> Result<T, DecodeError> {
    payload::decode(payload, field)
}

impl Registration {
    /// Encodes the record; refuses one larger than [`MAX_RECORD`] (which could not be read back).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        encode_versioned(REGISTRATION_MAGIC, REGISTRATION_VERSION, self)
    }
    /// Decodes version 6 (no `resources`), version 5 (no `on_service_loss` either), version 4
    /// (no provenance either), version 3 (no `allow_setns` either),
    /// version 2 (no `cgroup` either) and version 1 (no `argv_bytes`, no `kill_after_ms`, no
    /// `cgroup`, no `allow_setns`, no provenance).
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let (version, payload) = open_versions(REGISTRATION_MAGIC, REGISTRATION_VERSION, buf)?;
        match version {
            1 => {
                let v1: v1::Registration = decode_payload(payload, "registration record")?;
                Ok(v1.into())
            }
            // Versions 3, 4, 6, 7, 8, 9, 10 and 11 each only append an `Option`, version 5 two:
            // an older payload is version 11's with each absent option's one zero byte missing.
            2..=10 => {
                let missing = match version {
                    10 => 1,
                    9 => 2,
                    8 => 3,
                    7 => 4,
                    6 => 5,
                    5 => 6,
                    v => usize::from(4 - v) + 8,
                };
                let mut current = Vec::with_capacity(payload.len() + missing);
                current.extend_from_slice(payload);
                current.resize(payload.len() + missing, 0);
                decode_payload(&current, "registration record")
            }
            _ => decode_payload(payload, "registration record"),
        }
    }
}

impl CaptureReceipt {
    /// Encodes the record; refuses one larger than [`MAX_RECORD`] (which could not be read back).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        encode_versioned(CAPTURE_MAGIC, CAPTURE_VERSION, self)
    }
    /// Decodes version 2, and version 1 (its stream ends in words).
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        match open_versions(CAPTURE_MAGIC, CAPTURE_VERSION, buf)? {
            (1, payload) => {
                decode_payload::<capture_v1::CaptureReceipt>(payload, "capture receipt")
                    .map(Into::into)
            }
            (_, payload) => decode_payload(payload, "capture receipt"),
        }
    }
}

impl StopRequest {
    /// Encodes the record; refuses one larger than [`MAX_RECORD`] (which could not be read back).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        encode_record(STOP_MAGIC, self)
    }
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        decode_payload(open(STOP_MAGIC, buf)?, "stop request")
    }
}

impl ReadyRecord {
    /// Encodes the record; refuses one larger than [`MAX_RECORD`] (which could not be read back).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        encode_record(READY_MAGIC, self)
    }
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        decode_payload(open(READY_MAGIC, buf)?, "ready record")
    }
}

impl HealthRecord {
    /// Encodes the record; refuses one larger than [`MAX_RECORD`] (which could not be read back).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        encode_record(HEALTH_MAGIC, self)
    }
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        decode_payload(open(HEALTH_MAGIC, buf)?, "health record")
    }
}

impl StallRecord {
    /// Encodes the record; refuses one larger than [`MAX_RECORD`] (which could not be read back).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        encode_record(STALL_MAGIC, self)
    }
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        decode_payload(open(STALL_MAGIC, buf)?, "stall record")
    }
}

impl LaunchResultRecord {
    /// Encodes the record; refuses one larger than [`MAX_RECORD`] (which could not be read back).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        encode_versioned(RESULT_MAGIC, RESULT_VERSION, self)
    }
    /// Decodes version 4 (no `limit_usage`), version 3 (no `cgroup_usage` either), version 2 (no `residue_stop`
    /// either) and version 1 (no `stop_failure`, no `usage` either).
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let (version, payload) = open_versions(RESULT_MAGIC, RESULT_VERSION, buf)?;
        if version < RESULT_VERSION {
            // An older version is the current one without its last fields (version 1: four,
            // version 2: two, version 3: one), each an `Option`: read it with each absent
            // (bincode's one-byte absent `Option`) appended.
            let missing = match version {
                1 => 5,
                2 => 3,
                3 => 2,
                _ => 1,
            };
            let mut current = Vec::with_capacity(payload.len() + missing);
            current.extend_from_slice(payload);
            current.resize(payload.len() + missing, 0);
            return decode_payload(&current, "launch result");
        }
        decode_payload(payload, "launch result")
    }
}

/// Version-1 layouts, read and converted; never written.
mod v1 {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use crate::frame::{Hello, Rlimit};
    use crate::{RegistrationId, RuntimeId};

    #[derive(Deserialize)]
    pub(super) struct Limits {
        completion_timeout_ms: Option<u64>,
        idle_timeout_ms: Option<u64>,
        log_cap_bytes: Option<u64>,
        rlimits: Vec<Rlimit>,
    }

    #[derive(Deserialize)]
    pub(super) struct Registration {
        id: RegistrationId,
        runtime: RuntimeId,
        kind: super::Kind,
        label: String,
        owner: String,
        purpose: BTreeMap<String, String>,
        argv: Vec<String>,
        cwd: String,
        stdout_path: String,
        stderr_path: String,
        stdin_path: Option<String>,
        pty: bool,
        limits: Limits,
        scope_policy: super::ScopePolicy,
        started_at_unix_ms: u64,
        hello: Hello,
        proof_path: String,
    }

    impl From<Registration> for super::Registration {
        fn from(r: Registration) -> Self {
            super::Registration {
                id: r.id,
                runtime: r.runtime,
                kind: r.kind,
                label: r.label,
                owner: r.owner,
                purpose: r.purpose,
                argv: r.argv,
                cwd: r.cwd,
                stdout_path: r.stdout_path,
                stderr_path: r.stderr_path,
                stdin_path: r.stdin_path,
                pty: r.pty,
                limits: super::Limits {
                    completion_timeout_ms: r.limits.completion_timeout_ms,
                    idle_timeout_ms: r.limits.idle_timeout_ms,
                    log_cap_bytes: r.limits.log_cap_bytes,
                    rlimits: r.limits.rlimits,
                    kill_after_ms: None,
                },
                scope_policy: r.scope_policy,
                started_at_unix_ms: r.started_at_unix_ms,
                hello: r.hello,
                proof_path: r.proof_path,
                argv_bytes: None,
                cgroup: None,
                allow_setns: None,
                supervisor_provenance: None,
                guardian_provenance: None,
                on_service_loss: None,
                resources: None,
                readiness: None,
                protection: None,
                sandbox: None,
                health: None,
            }
        }
    }
}

#[cfg(test)]
mod result_versions {
    use super::*;

    /// Version 2 of the launch result, as its writer laid it out (no `residue_stop`).
    #[derive(Serialize)]
    struct ResultV2 {
        id: RegistrationId,
        runtime: RuntimeId,
        outcome: String,
        workload_status: WorkloadStatus,
        written_at_unix_ms: u64,
        stop_failure: Option<String>,
        usage: Option<crate::TreeUsage>,
    }

    /// Version 3, as its writer laid it out (no `cgroup_usage`).
    #[derive(Serialize)]
    struct ResultV3 {
        id: RegistrationId,
        runtime: RuntimeId,
        outcome: String,
        workload_status: WorkloadStatus,
        written_at_unix_ms: u64,
        stop_failure: Option<String>,
        usage: Option<crate::TreeUsage>,
        residue_stop: Option<ResidueStopRecord>,
    }

    #[test]
    fn a_version_3_result_still_decodes_without_its_cgroup_usage() {
        let residue = ResidueStopRecord {
            outcome: crate::docs::StopOutcome::Stopped,
            cause: None,
            killed: 2,
            at_unix_ms: 8,
        };
        let v3 = ResultV3 {
            id: RegistrationId([1; 16]),
            runtime: RuntimeId([2; 16]),
            outcome: "stopped".into(),
            workload_status: WorkloadStatus::Signaled(9),
            written_at_unix_ms: 7,
            stop_failure: None,
            usage: Some(crate::TreeUsage {
                user_us: 1,
                system_us: 2,
                max_rss_kib: 3,
            }),
            residue_stop: Some(residue.clone()),
        };
        let bytes = seal(RESULT_MAGIC, 3, to_payload(&v3).unwrap());
        let back = LaunchResultRecord::decode(&bytes).unwrap();
        assert_eq!(back.residue_stop, Some(residue));
        assert_eq!(back.usage.map(|u| u.max_rss_kib), Some(3));
        assert_eq!(back.cgroup_usage, None);
    }

    #[test]
    fn a_version_2_result_still_decodes_without_its_residue_stop() {
        let v2 = ResultV2 {
            id: RegistrationId([1; 16]),
            runtime: RuntimeId([2; 16]),
            outcome: "completed".into(),
            workload_status: WorkloadStatus::Exited(0),
            written_at_unix_ms: 7,
            stop_failure: Some("x".into()),
            usage: None,
        };
        let bytes = seal(RESULT_MAGIC, 2, to_payload(&v2).unwrap());
        let back = LaunchResultRecord::decode(&bytes).unwrap();
        assert_eq!(back.outcome, crate::docs::Outcome::Completed);
        assert_eq!(back.stop_failure.as_deref(), Some("x"));
        assert_eq!(back.residue_stop, None);
        assert_eq!(back.cgroup_usage, None);
        let current = LaunchResultRecord {
            cgroup_usage: Some(CgroupUsage {
                cpu_us: 5,
                user_us: 3,
                system_us: 2,
                memory_peak_bytes: None,
                oom_kills: Some(1),
            }),
            residue_stop: Some(ResidueStopRecord {
                outcome: crate::docs::StopOutcome::Stopped,
                cause: Some(StopCause::CompletionDeadline),
                killed: 3,
                at_unix_ms: 9,
            }),
            ..back
        };
        assert_eq!(
            LaunchResultRecord::decode(&current.encode().unwrap()).unwrap(),
            current
        );
    }

    /// The current layout with `outcome` as a string, as its writer laid it out while it was
    /// one.
    #[derive(Serialize)]
    struct ResultStrings {
        id: RegistrationId,
        runtime: RuntimeId,
        outcome: String,
        workload_status: WorkloadStatus,
        written_at_unix_ms: u64,
        stop_failure: Option<String>,
        usage: Option<crate::TreeUsage>,
        residue_stop: Option<ResidueStopStrings>,
        cgroup_usage: Option<CgroupUsage>,
        limit_usage: Option<LimitUsage>,
    }

    #[derive(Serialize)]
    struct ResidueStopStrings {
        outcome: String,
        cause: Option<StopCause>,
        killed: u32,
        at_unix_ms: u64,
    }

    /// The outcomes became enums; the records on disk keep their names: every name an older
    /// writer stored decodes to its variant, the bytes written now are the bytes it wrote, and a
    /// name no outcome has is refused, never guessed at.
    #[test]
    fn outcomes_written_as_strings_read_as_enums() {
        use crate::docs::{Outcome, StopOutcome, Vocabulary};
        for (i, &outcome) in Outcome::ALL.iter().enumerate() {
            let residue = StopOutcome::ALL[i % StopOutcome::ALL.len()];
            let old = ResultStrings {
                id: RegistrationId([1; 16]),
                runtime: RuntimeId([2; 16]),
                outcome: outcome.name().to_owned(),
                workload_status: WorkloadStatus::Signaled(9),
                written_at_unix_ms: 7,
                stop_failure: None,
                usage: None,
                residue_stop: Some(ResidueStopStrings {
                    outcome: residue.name().to_owned(),
                    cause: None,
                    killed: 1,
                    at_unix_ms: 8,
                }),
                cgroup_usage: None,
                limit_usage: None,
            };
            let bytes = seal(RESULT_MAGIC, RESULT_VERSION, to_payload(&old).unwrap());
            let back = LaunchResultRecord::decode(&bytes).unwrap();
            assert_eq!(back.outcome, outcome);
            assert_eq!(back.residue_stop.as_ref().map(|r| r.outcome), Some(residue));
            assert_eq!(back.encode().unwrap(), bytes, "{outcome}");
        }
        let odd = ResultStrings {
            id: RegistrationId([1; 16]),
            runtime: RuntimeId([2; 16]),
            outcome: "exploded".into(),
            workload_status: WorkloadStatus::Unknown,
            written_at_unix_ms: 7,
            stop_failure: None,
            usage: None,
            residue_stop: None,
            cgroup_usage: None,
            limit_usage: None,
        };
        let bytes = seal(RESULT_MAGIC, RESULT_VERSION, to_payload(&odd).unwrap());
        assert!(LaunchResultRecord::decode(&bytes).is_err());
    }
}
