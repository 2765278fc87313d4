//! What the caller of a launch asks: [`LaunchRequest`] (kind, command, deadlines as
//! [`Duration`]s, terminal, stdin, limits) and the kind's default scope policy.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use refine_protocol::record::{Kind, ScopePolicy};
use refine_protocol::Rlimit;

use crate::launch::capture::{Forward, OutputCallback, DEFAULT_KEEP};
use crate::launch::env_policy::Override;
use crate::launch::pty::WindowSize;

/// What the workload's stdin is (standard launches; a PTY launch reads the terminal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StdinMode {
    /// `/dev/null`.
    #[default]
    Null,
    /// A pipe fed by [`LaunchHandle::write_input`](super::LaunchHandle::write_input) and closed by [`LaunchHandle::close_input`](super::LaunchHandle::close_input).
    Pipe,
    /// This process's own stdin, passed to the workload as it is (a pipe, a file: its end of
    /// file, offsets and seeks are the workload's own, as with `tini`); `/dev/null` if this
    /// process has no fd 0.
    Inherit,
}

/// The per-artifact byte cap a launch gets unless it asks otherwise (W4): 1 GiB.
pub const DEFAULT_LOG_CAP: u64 = 1 << 30;

/// One managed launch, of any kind.
pub struct LaunchRequest {
    pub kind: Kind,
    pub argv: Vec<OsString>,
    /// `None`: this process's working directory.
    pub cwd: Option<PathBuf>,
    /// Explicit environment changes, applied last (they survive the git filter).
    pub env: Vec<Override>,
    /// Start the environment from nothing (then [`LaunchRequest::env`]); `false`: from the
    /// kind's base (the daemon's or the login environment, S3).
    pub env_clear: bool,
    /// A `command` that is a managed git command (git redirection is removed for it).
    pub managed_git: bool,
    pub label: String,
    pub owner: String,
    pub purpose: BTreeMap<String, String>,
    /// Completion deadline from the original start (`--timeout`, the socket's `timeout_ms`;
    /// recorded as the registration's `limits.completion_timeout_ms`).
    pub timeout: Option<Duration>,
    /// Idle deadline from the last output, input, resize or signal.
    pub idle_timeout: Option<Duration>,
    /// A deadline's grace (T7, `timeout -k`): SIGTERM to the workload's group when a deadline
    /// passes, the shared stop this much later. `None`: the stop at once.
    pub kill_after: Option<Duration>,
    /// W9: the grace a workload has after the first termination request its host relays
    /// ([`crate::launch::LaunchHandle::termination_request`]); default
    /// [`crate::launch::escalation::DEFAULT_STOP_GRACE`].
    pub stop_grace: Duration,
    /// H7's probe scopes: no lifecycle events in the journal (`false`); every other launch
    /// writes them.
    pub events: bool,
    /// H7's probe scopes: the registration is written but not synced (`false`; see
    /// [`Runtime::without_sync`](crate::store::registry::Runtime::without_sync)); every other
    /// launch is synced before it starts.
    pub durable: bool,
    /// H7's probe scopes: the output is kept in memory only (the first
    /// [`LaunchRequest::keep_max`] bytes of each stream), no artifact files (`false`).
    pub artifacts: bool,
    /// H7's probe scopes: no cgroup of their own (`false`; see
    /// [`Runtime::without_cgroup`](crate::store::registry::Runtime::without_cgroup)); every
    /// other launch gets one where the host allows.
    pub cgroup: bool,
    /// Per-artifact byte cap (S10, W4); [`DEFAULT_LOG_CAP`] unless set, `None` for no cap.
    pub log_cap: Option<u64>,
    /// A hard budget on output bytes (all streams): past it the launch is stopped and its
    /// outcome is [`LaunchOutcome::OutputLimit`](super::LaunchOutcome::OutputLimit).
    pub output_limit: Option<u64>,
    /// `None`: the kind's default (`quality` stops, the others keep).
    pub scope_policy: Option<ScopePolicy>,
    /// A PTY with this window size (always for `terminal`; default size if `None` there).
    pub pty: Option<WindowSize>,
    pub stdin: StdinMode,
    pub rlimits: Vec<Rlimit>,
    /// Bytes kept in memory per stream ([`DEFAULT_KEEP`]).
    pub keep_max: usize,
    pub on_output: Option<OutputCallback>,
    /// Also write stdout (the PTY's output, for a terminal launch) here as it is read, at the
    /// reader's pace (W3: back-pressure, and a reader that goes away breaks the stream).
    pub forward_stdout: Option<Forward>,
    /// Likewise for stderr.
    pub forward_stderr: Option<Forward>,
    /// Put the workload in its own session (a PTY launch always is).
    pub new_session: bool,
    /// What the guardian sends the workload if this process goes away (default `SIGKILL`);
    /// `None`: nothing, the workload outlives this process (the service's launches).
    pub pdeath_signal: Option<crate::kernel::signal::Signal>,
    /// L6: what recovery does with the scope once its launcher is gone (`None`: stop it, as a
    /// stale scope). The service sets it: `keep` but for agents.
    pub on_service_loss: Option<refine_protocol::record::ServiceLoss>,
    /// Run the workload as this user (X1; `None`: as this process).
    pub user: Option<crate::launch::credentials::Credentials>,
    /// The signal state the workload starts with: `None` (the default) a clean one, every
    /// disposition default and an empty mask (G8); `run` passes what it inherited (W10,
    /// [`crate::kernel::child_signals::inherited`]).
    pub signal_state: Option<refine_protocol::frame::SignalState>,
    /// Let the workload join PID and user namespaces made outside its scope (X7's opt-out,
    /// `run --allow-setns`). `false` (the default): the guardian's seccomp filter refuses
    /// `setns` into them, the one route out of the subreaper's reach the kernel lets it close.
    pub allow_setns: bool,
    /// Make the workload's process group this terminal's foreground group before it starts
    /// (W15, `run` in the foreground of a terminal; its stdin should be that terminal).
    pub foreground: Option<std::sync::Arc<crate::kernel::terminal::Foreground>>,
    /// H8: memory, CPU and pids limits through the scope's cgroups (none by default). A limit
    /// this host cannot apply refuses the launch before anything runs.
    pub resources: crate::kernel::resources::ResourceAsk,
    /// H6: how the workload says it is ready (none: ready at its `execve`).
    pub readiness: Option<crate::launch::readiness::Readiness>,
    /// H7: the health check (none by default); see [`crate::launch::health`].
    pub health: Option<refine_protocol::record::HealthSpec>,
    /// H7: the queue of the process's one health timer (the service's); none: the launcher
    /// probes in a thread of its own.
    pub health_queue: Option<std::sync::Arc<crate::launch::health::Queue>>,
    /// X11: the Landlock protection asked for (`run --protect`; all of it by default).
    pub protect: refine_protocol::record::ProtectAsk,
    /// X12: the sandbox asked for (`run --sandbox`, `--network`; none by default).
    pub sandbox: crate::launch::sandbox::SandboxRequest,
}

impl std::fmt::Debug for LaunchRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchRequest")
            .field("kind", &self.kind)
            .field("argv", &self.argv)
            .field("cwd", &self.cwd)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl LaunchRequest {
    /// A request with the defaults: no deadlines, the 1 GiB log cap, the kind's scope policy, stdin from
    /// `/dev/null` (a PTY for `terminal`).
    pub fn new(kind: Kind, argv: impl IntoIterator<Item = impl Into<OsString>>) -> Self {
        LaunchRequest {
            kind,
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: None,
            env: Vec::new(),
            env_clear: false,
            managed_git: false,
            label: String::new(),
            owner: String::new(),
            purpose: BTreeMap::new(),
            timeout: None,
            idle_timeout: None,
            kill_after: None,
            stop_grace: crate::launch::escalation::DEFAULT_STOP_GRACE,
            events: true,
            durable: true,
            artifacts: true,
            cgroup: true,
            log_cap: Some(DEFAULT_LOG_CAP),
            output_limit: None,
            scope_policy: None,
            pty: (kind == Kind::Terminal).then(WindowSize::default),
            stdin: StdinMode::Null,
            rlimits: Vec::new(),
            keep_max: DEFAULT_KEEP,
            on_output: None,
            forward_stdout: None,
            forward_stderr: None,
            new_session: false,
            pdeath_signal: Some(crate::kernel::signal::Signal::KILL),
            on_service_loss: None,
            user: None,
            signal_state: None,
            allow_setns: false,
            foreground: None,
            resources: crate::kernel::resources::ResourceAsk::default(),
            readiness: None,
            health: None,
            health_queue: None,
            protect: refine_protocol::record::ProtectAsk::All,
            sandbox: Default::default(),
        }
    }
}

/// The scope policy a kind gets when the request does not say (S9).
pub fn default_scope_policy(kind: Kind) -> ScopePolicy {
    match kind {
        Kind::Quality => ScopePolicy::Stop,
        Kind::Agent | Kind::Command | Kind::Terminal => ScopePolicy::Keep,
    }
}
