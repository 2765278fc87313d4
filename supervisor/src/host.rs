//! One face for Rust hosts (SPEC E1): open a runtime, build a launch as [`std::process::Command`]
//! builds a process, spawn it, and hold a [`Child`]: wait (blocking, bounded or `async`), stop
//! with a grace, signal, feed its stdin, and read its result and the guardian's receipt.
//!
//! Everything goes through the one launch engine ([`crate::launch`]): the guardian, the durable
//! registration before the workload starts, capture to `logs/ID.*`, the deadlines, the shared
//! stop, the receipt that proves the whole tree ended.
//!
//! ```
//! use std::time::Duration;
//! use refine_supervisor::{Command, Supervisor};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let Some(guardian) = refine_supervisor::host::built_guardian() else {
//! #     eprintln!("skipped: no refine-guardian binary (cargo build -p refine-guardian)");
//! #     return Ok(());
//! # };
//! let state = tempfile::tempdir()?; // a host's state directory (`Supervisor::open_default()`: the CLI's)
//! let supervisor = Supervisor::open(state.path())?
//! #   .with_guardian_exe(guardian)
//!     ;
//! let child = supervisor.spawn(Command::new("sh").args(["-c", "echo hi"]).label("greeting"))?;
//! let result = child.wait()?;
//! println!("{:?}, {:?}", result.outcome, result.status);
//! assert_eq!(result.complete_output(refine_supervisor::store::registry::Stream::Stdout)?, b"hi\n");
//! if let refine_supervisor::ScopeState::Exited(receipt) = &result.scope {
//!     println!("the whole tree ended: {:?}", receipt.end);
//! }
//!
//! // A timeout, then a stop: SIGTERM to the group, 2 s to end, then the whole tree is killed
//! // and the receipt proves it ended. (`sh` leaves a `sleep` of its own behind: it ends too.)
//! let mut child = supervisor.spawn(Command::new("sh").args(["-c", "sleep 60 & sleep 60"]))?;
//! let result = match child.wait_timeout(Duration::from_millis(200))? {
//!     Some(result) => result,
//!     None => {
//!         child.stop(Duration::from_secs(2))?;
//!         child.wait()?
//!     }
//! };
//! assert_eq!(result.outcome, refine_supervisor::LaunchOutcome::Stopped);
//! assert!(matches!(result.scope, refine_supervisor::ScopeState::Exited(_)));
//! # Ok(())
//! # }
//! ```
//!
//! A tokio host awaits [`Child::wait_async`]: the engine's thread wakes the task when the result
//! is there, no thread of tokio's pool blocks on it.
//!
//! # Caveats
//! - The guardian binary is found as [`crate::launch::guardian::guardian_exe`] says
//!   (`$REFINE_GUARDIAN`, else beside the executable), or given with
//!   [`Supervisor::with_guardian_exe`].
//! - If the host process dies, each guardian forwards the parent-death signal (SIGKILL unless
//!   [`Command::outlive_host`]) to its workload, reaps the tree and writes its receipt; recovery
//!   in a later process finds the scope.
//! - A [`Child`] dropped unwaited goes on: its engine runs to the result (a thread of its own).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use refine_protocol::record::{Registration, ScopePolicy, StopCause};
use refine_protocol::{RegistrationId, Rlimit};

use crate::end::stop::{StopError, StopOptions, StopReport};
use crate::launch::credentials::Credentials;
use crate::launch::LaunchRequest;
use crate::store::registry::{self, DEFAULT_PORT};

pub use crate::launch::{
    LaunchError, LaunchOutcome, LaunchResult, ScopeState, StdinMode, Supervisor,
};
pub use refine_protocol::record::{Kind, SandboxMode};
pub use refine_protocol::{Receipt, WorkloadStatus};

pub mod admission;
pub mod cgroup;
pub mod docs;
pub mod files;
pub mod observe;
pub mod ops;
pub mod receipts;
pub mod service;
pub mod signals;
pub mod stopping;
pub mod terminal;

// The types an application on the face names (E3, issue 41 item 2): its runtime, its errors,
// the values it parses and passes on. The mechanisms stay in their modules.
pub use crate::capacity::{human_bytes, AdmitError, SlotTurn, SlotWait};
pub use crate::end::assess::ReceiptFileError;
pub use crate::end::recover::RecoverError;
pub use crate::history::forget::{ForgetError, Options as ForgetOptions, Report as ForgetReport};
pub use crate::history::retention::{
    Options as RetentionOptions, Report as RetentionReport, RetentionError,
};
pub use crate::history::strays::SAFETY_AGE as STRAY_SAFETY_AGE;
pub use crate::hygiene::holders::HoldersError;
pub use crate::hygiene::reap_checkout::ReapError;
pub use crate::hygiene::stall::StallConfigError;
pub use crate::kernel::clock::unix_ms;
pub use crate::kernel::limits::{descriptors_left, raise_nofile_ceiling};
pub use crate::kernel::provenance::{of_guardian as guardian_provenance, own as own_provenance};
pub use crate::kernel::signal::{
    name as signal_name, parse as parse_signal, Signal, NAMES as SIGNAL_NAMES,
};
pub use crate::launch::credentials::CredentialsError;
pub use crate::launch::credentials::{require_privilege, resolve as resolve_user};
pub use crate::launch::escalation::{Escalation, DEFAULT_STOP_GRACE};
pub use crate::launch::guardian::guardian_exe;
pub use crate::launch::pty::WindowSize;
pub use crate::launch::readiness::{ReadyAsk, DEFAULT_READY_TIMEOUT};
pub use crate::launch::{Beside, LaunchAsks};
pub use crate::launch::{EngineThread, SharedLoop};
pub use crate::launch::{InputWriter, LaunchHandle, ReceiptHook};
pub use crate::store::fence::{Fence, FenceError};
pub use crate::store::journal::Cursor as JournalCursor;
pub use crate::store::journal::JournalError;
pub use crate::store::registry::{default_home, RegistryError, Runtime, Stream};

// And what else the app names that a host needs too (issue 41 item 2): a health check's
// defaults and spec, the sandbox a launch asks for, the wait for readiness, a stream's time
// index, the events journal, the capacity census and policy, the stall watch's settings.
pub use crate::capacity::{
    probe as capacity_probe, CapacityReport, Census, Policy as CapacityPolicy,
    DEFAULT_LIMIT_PERCENT as CAPACITY_LIMIT_PERCENT, UNKNOWN_KIND,
};
pub use crate::hygiene::stall::{StallConfig, DEFAULT_SILENT_SAMPLES, DEFAULT_STALLED_SAMPLES};
pub use crate::launch::health::{
    spec as health_check, DEFAULT_INTERVAL as HEALTH_INTERVAL, DEFAULT_RETRIES as HEALTH_RETRIES,
    DEFAULT_TIMEOUT as HEALTH_TIMEOUT,
};
pub use crate::launch::readiness::{wait_ready, WaitedReady};
pub use crate::launch::sandbox::SandboxRequest;
pub use crate::launch::ResultHook;
pub use crate::store::journal::{Filter as JournalFilter, Journal};
pub use crate::store::output_index::{read as read_output_index, OutputIndex};
pub use crate::store::registry::{create_home, DEFAULT_PORT as DEFAULT_SERVICE_PORT};

pub use ops::{GcOptions, OpsError};
pub use refine_protocol::api::ScopeView;
pub use refine_protocol::docs::{GcDoc, RecoverDoc, ShowDoc, State, StopDoc, StopOutcomeDoc};

/// Why a runtime could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot derive the home from this executable")]
    NoHome(#[source] std::io::Error),
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

impl Supervisor {
    /// Opens the runtime of `home` on the default port, creating the home (0700, and the
    /// folders above it) and its runtime when missing: the state lives in `home/run/7411`
    /// (registrations, proofs, logs). [`Supervisor::new`] takes a runtime of another port.
    pub fn open(home: impl AsRef<Path>) -> Result<Supervisor, RegistryError> {
        registry::create_home(home.as_ref())?;
        Runtime::open(home.as_ref(), DEFAULT_PORT).map(Supervisor::new)
    }

    /// [`Supervisor::open`] of the home the CLI uses by default
    /// ([`registry::default_home`]: derived from the executable's place, never from the cwd).
    pub fn open_default() -> Result<Supervisor, OpenError> {
        let home = registry::default_home().map_err(OpenError::NoHome)?;
        Ok(Supervisor::open(home)?)
    }

    /// Launches `command`: returns once the registration is durable and the workload was told to
    /// start.
    pub fn spawn(&self, command: Command) -> Result<Child, LaunchError> {
        Ok(Child {
            handle: self.launch(command.request)?,
            runtime: self.runtime().clone(),
        })
    }
}

/// A launch being built, as [`std::process::Command`] builds a process: the program and its
/// arguments as bytes, the environment, the working directory, and what the supervisor adds:
/// kind, label, purpose, deadlines, caps, user, terminal.
#[derive(Debug)]
pub struct Command {
    request: LaunchRequest,
}

impl Command {
    /// A `command`-kind launch of `program` (no deadline, the 1 GiB log cap, stdin from
    /// `/dev/null`, this process's environment and working directory).
    pub fn new(program: impl AsRef<OsStr>) -> Command {
        Command {
            request: LaunchRequest::new(Kind::Command, [program.as_ref()]),
        }
    }

    /// Adds an argument (any bytes).
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Command {
        self.request.argv.push(arg.as_ref().to_owned());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for a in args {
            self = self.arg(a);
        }
        self
    }

    /// Sets an environment variable (applied last, over the kind's base environment).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Command {
        self.request
            .env
            .push((key.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    /// Sets several environment variables.
    pub fn envs<I, K, V>(mut self, vars: I) -> Command
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            self = self.env(k, v);
        }
        self
    }

    /// Removes an environment variable.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Command {
        self.request.env.push((key.as_ref().to_owned(), None));
        self
    }

    /// Starts from an empty environment: only what [`Command::env`] sets (and the owner marker
    /// `REFINE_OWNER`, which every managed workload carries).
    pub fn env_clear(mut self) -> Command {
        self.request.env.clear();
        self.request.env_clear = true;
        self
    }

    /// The workload's working directory (any bytes; default: this process's).
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Command {
        self.request.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// The kind (`agent`, `quality`, `command`, `terminal`): its environment, scope policy and
    /// admission (S3, S9). A `terminal` gets a PTY.
    pub fn kind(mut self, kind: Kind) -> Command {
        self.request.kind = kind;
        if kind == Kind::Terminal && self.request.pty.is_none() {
            self.request.pty = Some(WindowSize::default());
        }
        self
    }

    /// A label for people (`ps`, `--unique`).
    pub fn label(mut self, label: impl Into<String>) -> Command {
        self.request.label = label.into();
        self
    }

    /// Who launched it, as recorded (default: nobody named).
    pub fn owner(mut self, owner: impl Into<String>) -> Command {
        self.request.owner = owner.into();
        self
    }

    /// One entry of purpose metadata, stored in the record.
    pub fn purpose(mut self, key: impl Into<String>, value: impl Into<String>) -> Command {
        self.request.purpose.insert(key.into(), value.into());
        self
    }

    /// The completion deadline, from the start, for the whole scope.
    pub fn timeout(mut self, timeout: Duration) -> Command {
        self.request.timeout = Some(timeout);
        self
    }

    /// The idle deadline: no output, input, resize or signal for this long.
    pub fn idle_timeout(mut self, timeout: Duration) -> Command {
        self.request.idle_timeout = Some(timeout);
        self
    }

    /// W11: the deadlines as coreutils `timeout` has them ([`Timeout`]): zero is none, and a
    /// deadline without a kill-after gets [`Timeout::DEFAULT_KILL_AFTER`] (SIGTERM first, the
    /// stop 5 s later), as `run --timeout` does. Replaces what [`Command::timeout`],
    /// [`Command::idle_timeout`] and [`Command::kill_after`] set.
    pub fn deadline(mut self, timeout: Timeout) -> Command {
        self.request.timeout = timeout.completion();
        self.request.idle_timeout = timeout.idle_deadline();
        self.request.kill_after = timeout.grace();
        self
    }

    /// A deadline's grace (`timeout -k`): SIGTERM to the workload's group when a deadline
    /// passes, the stop this much later. Zero: the stop at once (the default here; with
    /// [`Command::deadline`], 5 s).
    pub fn kill_after(mut self, grace: Duration) -> Command {
        self.request.kill_after = (!grace.is_zero()).then_some(grace);
        self
    }

    /// W9: the grace the workload has after the first termination request the host relays
    /// ([`Child::on_termination_request`]); default 10 s
    /// ([`crate::launch::escalation::DEFAULT_STOP_GRACE`], `run --stop-grace`).
    pub fn stop_grace(mut self, grace: Duration) -> Command {
        self.request.stop_grace = grace;
        self
    }

    /// The byte cap of each output artifact (`None`: no cap; default 1 GiB).
    pub fn log_cap(mut self, bytes: Option<u64>) -> Command {
        self.request.log_cap = bytes;
        self
    }

    /// A budget on all output bytes: past it the launch is stopped
    /// ([`LaunchOutcome::OutputLimit`]).
    pub fn output_limit(mut self, bytes: u64) -> Command {
        self.request.output_limit = Some(bytes);
        self
    }

    /// Bytes kept in memory per stream for [`LaunchResult::complete_output`].
    pub fn keep(mut self, bytes: usize) -> Command {
        self.request.keep_max = bytes;
        self
    }

    /// A resource limit the workload starts with.
    pub fn rlimit(mut self, limit: Rlimit) -> Command {
        self.request.rlimits.push(limit);
        self
    }

    /// What happens to a scope that outlives its workload (default: the kind's).
    pub fn scope_policy(mut self, policy: ScopePolicy) -> Command {
        self.request.scope_policy = Some(policy);
        self
    }

    /// Run as this user (the host must be privileged; [`crate::launch::credentials::resolve`]
    /// turns `USER[:GROUP]` into credentials).
    pub fn user(mut self, user: Credentials) -> Command {
        self.request.user = Some(user);
        self
    }

    /// Let the workload join PID and user namespaces made outside its scope (SPEC X7's
    /// opt-out; `run --allow-setns`). By default the guardian's seccomp filter refuses `setns`
    /// into them: a process forked in such a namespace is out of the subreaper's reach, and only
    /// the scope's cgroup, where it has one, still witnesses it.
    pub fn allow_setns(mut self) -> Command {
        self.request.allow_setns = true;
        self
    }

    /// X11: what the workload's Landlock domain takes away (`run --protect`; all of it by
    /// default: [`refine_protocol::record::ProtectAsk`]).
    pub fn protect(mut self, ask: refine_protocol::record::ProtectAsk) -> Command {
        self.request.protect = ask;
        self
    }

    /// X12: a sandbox ([`refine_protocol::record::SandboxMode`]; `run --sandbox`): `ReadOnly`
    /// writes only to a private `TMPDIR` and the null-like devices, `WorkspaceWrite` also to
    /// the working directory and each [`Command::sandbox_path`]. A kernel that cannot hold it
    /// refuses the launch.
    pub fn sandbox(mut self, mode: SandboxMode) -> Command {
        self.request.sandbox.mode = mode;
        self
    }

    /// X12: one more writable path of a `WorkspaceWrite` sandbox (relative: to the working
    /// directory; it must exist).
    pub fn sandbox_path(mut self, path: impl AsRef<Path>) -> Command {
        self.request.sandbox.paths.push(path.as_ref().to_owned());
        self
    }

    /// X12: no TCP bind or connect (`run --network none`; Landlock ABI 4).
    pub fn network_none(mut self) -> Command {
        self.request.sandbox.network = refine_protocol::record::NetworkAsk::None;
        self
    }

    /// H8: at most `bytes` of memory for the whole tree (its cgroup's limit; an OOM kill is the
    /// result's reason). A host without a memory controller refuses the launch.
    pub fn memory_max(mut self, bytes: u64) -> Command {
        self.request.resources.memory_max_bytes = Some(bytes);
        self
    }

    /// H8: at most `millis` thousandths of a core for the whole tree (CFS bandwidth).
    pub fn cpu_millis(mut self, millis: u32) -> Command {
        self.request.resources.cpu_millis = Some(millis);
        self
    }

    /// H8: at most `n` processes and threads in the tree at once (forks past it fail).
    pub fn pids_max(mut self, n: u64) -> Command {
        self.request.resources.pids_max = Some(n);
        self
    }

    /// H6: the workload says when it is ready (`sd_notify`, a probe command); until then its
    /// scope is `starting`, and not ready within `timeout` (`None`: no bound) it is stopped.
    /// [`Child::wait_ready`] waits for it.
    pub fn ready(
        mut self,
        ask: crate::launch::readiness::ReadyAsk,
        timeout: Option<Duration>,
    ) -> Command {
        self.request.readiness = Some(crate::launch::readiness::Readiness { ask, timeout });
        self
    }

    /// H7: a health check (docker's HEALTHCHECK, [`crate::launch::health::spec`]): probed every
    /// interval by this process (a thread of it) while the scope lives, reported only.
    pub fn health(mut self, spec: refine_protocol::record::HealthSpec) -> Command {
        self.request.health = Some(spec);
        self
    }

    /// A pseudo-terminal of this size for stdin, stdout and stderr.
    pub fn pty(mut self, size: WindowSize) -> Command {
        self.request.pty = Some(size);
        self
    }

    /// What stdin is ([`StdinMode::Pipe`] for [`Child::write_input`]).
    pub fn stdin(mut self, mode: StdinMode) -> Command {
        self.request.stdin = mode;
        self
    }

    /// Puts the workload in a session of its own (a PTY launch always is).
    pub fn new_session(mut self, yes: bool) -> Command {
        self.request.new_session = yes;
        self
    }

    /// The workload outlives this process (no parent-death signal): recovery finds it later.
    pub fn outlive_host(mut self) -> Command {
        self.request.pdeath_signal = None;
        self
    }

    /// L6: what recovery does with the scope once this process is gone: `keep` (the next
    /// service adopts it) or `stop`. Unset: stop it, as any stale scope.
    pub fn on_service_loss(mut self, policy: refine_protocol::record::ServiceLoss) -> Command {
        self.request.on_service_loss = Some(policy);
        self
    }

    /// The request as the engine takes it, for what this builder does not cover (output
    /// callbacks, forwards, the signal state).
    pub fn request_mut(&mut self) -> &mut LaunchRequest {
        &mut self.request
    }

    /// The request this command built.
    pub fn into_request(self) -> LaunchRequest {
        self.request
    }
}

impl From<LaunchRequest> for Command {
    fn from(request: LaunchRequest) -> Command {
        Command { request }
    }
}

/// W11: a launch's deadlines as coreutils `timeout` has them, the rule `run` applies: a
/// completion deadline (`--timeout`) and an idle one (`--idle-timeout`), zero being none (as
/// `timeout 0`); when one passes, SIGTERM to the workload's process group, then the scope's
/// stop after the kill-after (`--kill-after`, default [`Timeout::DEFAULT_KILL_AFTER`]; zero:
/// the stop at once). [`LaunchResult::exit_code`] then says 124, or 137 when it had to kill.
/// The service API keeps its own rule (a socket launch without `kill_after_ms` is killed at
/// its deadline): a host opts in with [`Command::deadline`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timeout {
    completion: Option<Duration>,
    idle: Option<Duration>,
    kill_after: Option<Duration>,
}

impl Timeout {
    /// The grace a deadline gets unless it asks for another (coreutils has none by default;
    /// `run` gives 5 s, SPEC W11).
    pub const DEFAULT_KILL_AFTER: Duration = Duration::from_secs(5);

    /// A completion deadline, from the start, for the whole scope (zero: none).
    pub fn after(completion: Duration) -> Timeout {
        Timeout::default().completion_opt(Some(completion))
    }

    /// The three as a command line gives them (each `None` when not given).
    pub fn of(
        completion: Option<Duration>,
        idle: Option<Duration>,
        kill_after: Option<Duration>,
    ) -> Timeout {
        Timeout {
            kill_after,
            ..Timeout::default().completion_opt(completion)
        }
        .idle_opt(idle)
    }

    fn completion_opt(mut self, d: Option<Duration>) -> Timeout {
        self.completion = d.filter(|d| !d.is_zero());
        self
    }

    fn idle_opt(mut self, d: Option<Duration>) -> Timeout {
        self.idle = d.filter(|d| !d.is_zero());
        self
    }

    /// An idle deadline too: no output, input, resize or signal for this long (zero: none).
    pub fn idle(self, idle: Duration) -> Timeout {
        self.idle_opt(Some(idle))
    }

    /// The grace between the SIGTERM and the stop (zero: the stop at once).
    pub fn kill_after(mut self, grace: Duration) -> Timeout {
        self.kill_after = Some(grace);
        self
    }

    /// The completion deadline, if any.
    pub fn completion(&self) -> Option<Duration> {
        self.completion
    }

    /// The idle deadline, if any.
    pub fn idle_deadline(&self) -> Option<Duration> {
        self.idle
    }

    /// The grace a passed deadline gives: the one asked for, else
    /// [`Timeout::DEFAULT_KILL_AFTER`]; `None` (the stop at once) for a zero one, and when no
    /// deadline is set.
    pub fn grace(&self) -> Option<Duration> {
        if self.completion.is_none() && self.idle.is_none() {
            return None;
        }
        Some(self.kill_after.unwrap_or(Timeout::DEFAULT_KILL_AFTER)).filter(|d| !d.is_zero())
    }
}

/// The exit status a shell gives a program that could not be run: 127 when it (or its
/// directory) was not found, 126 otherwise.
pub fn spawn_failure_code(errno: i32) -> i32 {
    if errno == libc::ENOENT {
        127
    } else {
        126
    }
}

impl LaunchResult {
    /// The shell's view of the launch, as `run` exits and coreutils `timeout` would (W11): the
    /// workload's code, 128+signal, 127/126 for a spawn failure ([`spawn_failure_code`]); a
    /// deadline that ended the workload with its polite signal is 124 whatever the workload's
    /// own status, and one that had to kill it 137 (the result keeps the status and the
    /// outcome).
    pub fn exit_code(&self) -> i32 {
        let deadline = matches!(
            self.outcome,
            LaunchOutcome::TimedOut | LaunchOutcome::IdleTimeout
        );
        match (self.outcome, self.status.shell_code()) {
            _ if deadline && self.status != WorkloadStatus::Signaled(libc::SIGKILL) => TIMED_OUT,
            (_, Some(c)) => c,
            (LaunchOutcome::SpawnFailed { errno, .. }, None) => spawn_failure_code(errno),
            _ => 1,
        }
    }
}

/// Exit status of a launch that a deadline ended without the kill, as coreutils `timeout`.
const TIMED_OUT: i32 = 124;

/// A running launch: its registration, its input, and the way to its result.
#[derive(Debug)]
pub struct Child {
    handle: LaunchHandle,
    runtime: Runtime,
}

impl Child {
    /// The registration's id (`ps`, `show ID`, `stop ID`).
    pub fn id(&self) -> RegistrationId {
        self.handle.id()
    }

    /// H6: waits until the workload is ready (or failed to be), at most `timeout`.
    pub fn wait_ready(
        &self,
        timeout: Option<Duration>,
    ) -> Result<crate::launch::readiness::WaitedReady, RegistryError> {
        crate::launch::readiness::wait_ready(&self.runtime, self.id(), timeout)
    }

    /// The durable registration (written before the workload could start).
    pub fn registration(&self) -> &Registration {
        self.handle.registration()
    }

    /// Waits for the result: the workload exited and its output was drained (or it never ran).
    /// [`LaunchResult::scope`] says whether the whole tree had ended, with the receipt.
    pub fn wait(self) -> Result<LaunchResult, LaunchError> {
        self.handle.wait()
    }

    /// [`Child::wait`] with a bound: `Ok(None)` if the result has not come within `timeout`.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<LaunchResult>, LaunchError> {
        self.handle.wait_timeout(timeout)
    }

    /// [`Child::wait`] for a tokio host: no thread blocks on it.
    ///
    /// Borrows the child: a wait bounded by `tokio::time::timeout` that runs out leaves it to
    /// [`Child::stop_async`] and to wait again (see the example at the top).
    pub async fn wait_async(&mut self) -> Result<LaunchResult, LaunchError> {
        self.handle.wait_async().await
    }

    /// Stops the whole scope through the shared stop: `grace` first (SIGTERM to the
    /// workload's group, then up to this long for it to end by itself; zero: none), then the
    /// quiesce, the kill and the proof by the receipt. The result ([`Child::wait`]) then says
    /// [`LaunchOutcome::Stopped`] (or how it ended, if it ended by itself first).
    pub fn stop(&self, grace: Duration) -> Result<StopReport, StopError> {
        let opts = StopOptions {
            grace: (!grace.is_zero()).then_some(grace),
            cause: Some(StopCause::Operator),
            ..StopOptions::default()
        };
        crate::end::stop::stop(&self.runtime, self.handle.registration(), &opts)
    }

    /// [`Child::stop`] for a tokio host (the stop's waits run on the blocking pool).
    pub async fn stop_async(&self, grace: Duration) -> Result<StopReport, StopError> {
        let runtime = self.runtime.clone();
        let reg = self.handle.registration().clone();
        let opts_grace = (!grace.is_zero()).then_some(grace);
        tokio::task::spawn_blocking(move || {
            let opts = StopOptions {
                grace: opts_grace,
                cause: Some(StopCause::Operator),
                ..StopOptions::default()
            };
            crate::end::stop::stop(&runtime, &reg, &opts)
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }

    /// Forwards `signal` to the workload (through the guardian; counts as activity).
    pub fn signal(&self, signal: Signal) -> Result<(), LaunchError> {
        self.handle.signal(signal.as_raw())
    }

    /// W9: a signal the host received (its own `SIGINT` or `SIGTERM`, say), relayed as `run`
    /// relays its own. A termination request (`SIGINT`, `SIGTERM`) is forwarded, then the
    /// workload has [`Command::stop_grace`] to end before its scope ends through the shared stop
    /// ([`LaunchOutcome::Cancelled`]); the same request a second time ends it at once, the other
    /// one is only forwarded; once the workload has ended (by itself or by the signal), what
    /// is left of its scope is stopped through the shared stop whatever the scope's policy, so
    /// the result's receipt proves the end. Every other signal is forwarded and nothing more
    /// (it starts no timer). The engine keeps the rule ([`crate::launch::escalation`]): it
    /// holds whichever thread waits.
    pub fn on_termination_request(&self, signal: Signal) -> Result<(), LaunchError> {
        self.handle.termination_request(signal.as_raw())
    }

    /// Ends the launch at once: the tree is stopped, the outcome is
    /// [`LaunchOutcome::Cancelled`].
    pub fn cancel(&self) {
        self.handle.cancel()
    }

    /// Writes to the workload's stdin ([`StdinMode::Pipe`] or a PTY).
    pub fn write_input(&self, bytes: &[u8]) -> Result<(), LaunchError> {
        self.handle.write_input(bytes)
    }

    /// Closes a piped stdin: the workload reads its end.
    pub fn close_input(&self) {
        self.handle.close_input()
    }

    /// The input side, for another thread (a terminal forwarder).
    pub fn input(&self) -> InputWriter {
        self.handle.input_writer()
    }

    /// Resizes the PTY.
    pub fn resize(&self, size: WindowSize) -> Result<(), LaunchError> {
        self.handle.resize(size)
    }

    /// The engine's handle, for what the facade does not cover (waiting beside another
    /// descriptor, detaching the engine).
    pub fn into_handle(self) -> LaunchHandle {
        self.handle
    }
}

/// The `refine-guardian` of this build, for the examples and doc tests: `$REFINE_GUARDIAN`,
/// else the one beside the executable, else the one of the profile this crate was built in (then
/// the release one); `None` when none exists.
#[doc(hidden)]
pub fn built_guardian() -> Option<PathBuf> {
    let found = crate::launch::guardian::guardian_exe();
    if found.is_file() {
        return Some(found);
    }
    // Set by the build script: the profile directory (`target/debug`) of this build.
    let profile = Path::new(env!("REFINE_PROFILE_DIR"));
    [
        profile.join("refine-guardian"),
        profile.with_file_name("release").join("refine-guardian"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}
