//! The launch engine (SPEC S1–S11): the one API every caller uses to run a managed command of any
//! kind (`agent`, `quality`, `command`, `terminal`).
//!
//! [`Supervisor::launch`] prepares the environment ([`crate::env_policy`]), the output pipes or a
//! PTY ([`crate::pty`]) and the artifacts, starts the guardian, makes the registration durable and
//! only then says *start* (all through [`guardian::launch_registered`]). A thread per launch then
//! runs one `poll` loop over the output streams ([`crate::capture`]), the guardian channel and a
//! control socket (cancel, operator stop, activity from input and resize), enforcing the deadlines
//! ([`crate::deadline`]). [`LaunchHandle::wait`] returns a [`LaunchResult`] with a typed
//! [`Outcome`] as soon as the workload has exited and the fixed final drain has ended.
//!
//! A scope that outlives its workload (S9) is kept (listed live, receipt later) or stopped through
//! the shared stop after the drain; either way the result does not wait for it, and
//! [`ScopeWatch`] follows it to its receipt.
//!
//! # Caveats
//! - This process never calls `waitpid(-1)`: it reaps only the guardian, by pid; the guardian
//!   reaps the workload's whole tree (S11).
//! - If this process dies, the guardian sees its channel close, forwards the parent-death signal
//!   to the workload, reaps, and writes its receipt; the kept output tails die with us.
//! - Deadlines, cancel, capture faults and the `stop` scope policy terminate through the one
//!   shared stop ([`crate::stop::stop`], called from [`shared_stop`]); the stop proves the end by
//!   the guardian's receipt, which the engine then also reads from the channel.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use refine_protocol::record::{Kind, Limits, Registration, ScopePolicy, StopCause};
use refine_protocol::{Receipt, RegistrationId, Rlimit, WorkloadStatus};
use rustix::net::{RecvFlags, SendFlags};

use crate::capture::{
    Capture, CaptureConfig, CaptureError, CaptureFailure, CaptureResult, OutputCallback,
    StreamSource, DEFAULT_KEEP,
};
use crate::deadline::{Deadlines, Expired};
use crate::env_policy::{self, EnvInputs, EnvMap, LoginEnv, Override};
use crate::fence::Fence;
use crate::guardian::{self, GuardianEvent, GuardianLink, RegisteredLaunch, Stdio};
use crate::pty::{self, PtyError, WindowSize};
use crate::registry::{RegistryError, Runtime, Stream};
use crate::stop::{StopError, StopOptions, StopReport};

/// How long [`LaunchHandle::write_input`] waits for the workload to accept input.
pub const INPUT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the workload's stdin is (standard launches; a PTY launch reads the terminal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StdinMode {
    /// `/dev/null`.
    #[default]
    Null,
    /// A pipe fed by [`LaunchHandle::write_input`] and closed by [`LaunchHandle::close_input`].
    Pipe,
}

/// One managed launch, of any kind.
pub struct LaunchRequest {
    pub kind: Kind,
    pub argv: Vec<OsString>,
    /// `None`: this process's working directory.
    pub cwd: Option<PathBuf>,
    /// Explicit environment changes, applied last (they survive the git filter).
    pub env: Vec<Override>,
    /// A `command` that is a managed git command (git redirection is removed for it).
    pub managed_git: bool,
    pub label: String,
    pub owner: String,
    pub purpose: BTreeMap<String, String>,
    /// Completion deadline from the original start.
    pub completion_timeout: Option<Duration>,
    /// Idle deadline from the last output, input, resize or signal.
    pub idle_timeout: Option<Duration>,
    /// Per-artifact byte cap (S10).
    pub log_cap: Option<u64>,
    /// A hard budget on output bytes (all streams): past it the launch is stopped and its
    /// outcome is [`Outcome::OutputLimit`].
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
    /// Put the workload in its own session (a PTY launch always is).
    pub new_session: bool,
    /// What the guardian sends the workload if this process goes away (0: `SIGKILL`).
    pub pdeath_signal: i32,
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
    /// A request with the defaults: no deadlines, no caps, the kind's scope policy, stdin from
    /// `/dev/null` (a PTY for `terminal`).
    pub fn new(kind: Kind, argv: impl IntoIterator<Item = impl Into<OsString>>) -> Self {
        LaunchRequest {
            kind,
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: None,
            env: Vec::new(),
            managed_git: false,
            label: String::new(),
            owner: String::new(),
            purpose: BTreeMap::new(),
            completion_timeout: None,
            idle_timeout: None,
            log_cap: None,
            output_limit: None,
            scope_policy: None,
            pty: (kind == Kind::Terminal).then(WindowSize::default),
            stdin: StdinMode::Null,
            rlimits: Vec::new(),
            keep_max: DEFAULT_KEEP,
            on_output: None,
            new_session: false,
            pdeath_signal: 0,
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

/// How a launch ended (S7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The workload ran and exited on its own (any status).
    Completed,
    /// The completion deadline passed; the tree was stopped (by this engine, or by the
    /// service enforcing the registration's deadline).
    TimedOut,
    /// The idle deadline passed; the tree was stopped (likewise).
    IdleTimeout,
    /// The caller cancelled; the tree was stopped.
    Cancelled,
    /// The output budget was exceeded; the tree was stopped.
    OutputLimit,
    /// `execve` failed with this errno; the workload never ran.
    SpawnFailed { errno: i32 },
    /// Capture failed (a read or an artifact write); the tree was stopped.
    CaptureFault(CaptureFailure),
    /// An operator stopped it: through this launch's handle, or with the shared stop from
    /// anywhere (`stop ID` in another process), which records its request first.
    Stopped,
    /// The guardian reported a fatal error or vanished; the workload's status is unknown.
    GuardianLost,
}

impl Outcome {
    /// The outcome's name in documents and records (`run --json`, `ps`, the launch result).
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::TimedOut => "timed_out",
            Outcome::IdleTimeout => "idle_timeout",
            Outcome::Cancelled => "cancelled",
            Outcome::OutputLimit => "output_limit",
            Outcome::SpawnFailed { .. } => "spawn_failed",
            Outcome::CaptureFault(_) => "capture_fault",
            Outcome::Stopped => "stopped",
            Outcome::GuardianLost => "guardian_lost",
        }
    }
}

/// The scope (workload and every descendant) when the result was returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeState {
    /// The guardian's receipt arrived: nothing of the tree is left.
    Exited(Receipt),
    /// A descendant holds the scope and the policy keeps it: capacity held, receipt later.
    Live,
    /// A descendant holds the scope and the shared stop is ending it.
    Stopping,
    /// The guardian is gone without a receipt: evidence is unverified.
    Unknown,
}

/// A stop that did not prove its end.
#[derive(Debug, Clone, thiserror::Error)]
#[error("stop of {id} failed")]
pub struct StopFailure {
    pub id: RegistrationId,
    #[source]
    pub error: Arc<StopError>,
}

/// What a scope came to, once it ended.
#[derive(Debug, Clone)]
pub struct ScopeEnd {
    /// The guardian's receipt (`None`: the guardian vanished without one).
    pub receipt: Option<Receipt>,
    /// The policy's stop, if the `stop` policy ended the scope.
    pub stop_report: Option<StopReport>,
    /// The stop's failure, if the policy stopped the scope and the stop failed.
    pub stop_failure: Option<StopFailure>,
}

/// Follows a scope that outlived its workload to its receipt.
#[derive(Debug)]
pub struct ScopeWatch {
    rx: mpsc::Receiver<ScopeEnd>,
    done: Option<ScopeEnd>,
}

impl ScopeWatch {
    fn ready(end: ScopeEnd) -> Self {
        let (_tx, rx) = mpsc::channel();
        ScopeWatch {
            rx,
            done: Some(end),
        }
    }

    /// Waits up to `timeout` for the scope's end.
    pub fn wait(&mut self, timeout: Duration) -> Option<&ScopeEnd> {
        if self.done.is_none() {
            self.done = self.rx.recv_timeout(timeout).ok();
        }
        self.done.as_ref()
    }
}

/// The result of one launch.
#[derive(Debug)]
pub struct LaunchResult {
    pub id: RegistrationId,
    pub registration: Registration,
    pub outcome: Outcome,
    /// The workload's own status (`NeverStarted` for a spawn failure, `Unknown` if the guardian
    /// was lost).
    pub status: WorkloadStatus,
    /// Per-stream capture state, kept bytes and artifact paths.
    pub capture: CaptureResult,
    /// Where the capture receipt was written (incomplete capture only).
    pub capture_receipt: Option<PathBuf>,
    /// The scope at return.
    pub scope: ScopeState,
    /// Follows the scope to its receipt (already done when `scope` is `Exited`).
    pub scope_watch: ScopeWatch,
    /// The stop this launch made before returning (deadline, cancel, fault, output limit).
    pub stop_report: Option<StopReport>,
    /// That stop's failure.
    pub stop_failure: Option<StopFailure>,
}

impl LaunchResult {
    /// The one accessor for output parsers: complete output or a refusal (see
    /// [`CaptureResult::complete_output`]).
    pub fn complete_output(
        &self,
        stream: Stream,
    ) -> Result<&[u8], crate::capture::IncompleteCapture> {
        self.capture.complete_output(stream)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("empty argv")]
    EmptyArgv,
    #[error("cannot {op}")]
    Io {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Pty(#[from] PtyError),
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error("guardian launch failed")]
    Guardian(#[from] guardian::LaunchError),
    #[error("the launch thread died")]
    EngineDied,
    #[error("this launch has no {0}")]
    NotAvailable(&'static str),
    #[error("{0} is not a signal number")]
    BadSignal(i32),
}

fn io_op(op: &'static str) -> impl FnOnce(io::Error) -> LaunchError {
    move |source| LaunchError::Io { op, source }
}

/// The launch engine of one runtime.
#[derive(Debug)]
pub struct Supervisor {
    runtime: Runtime,
    login: Arc<LoginEnv>,
    daemon_env: EnvMap,
    guardian_exe: Option<PathBuf>,
}

impl Supervisor {
    /// An engine for `runtime`; the login environment is captured from `$SHELL` on first need.
    pub fn new(runtime: Runtime) -> Self {
        Supervisor {
            runtime,
            login: Arc::new(LoginEnv::from_env()),
            daemon_env: env_policy::daemon_env(),
            guardian_exe: None,
        }
    }

    /// Uses this login environment (a fixed one in tests, or a shared cache).
    pub fn with_login_env(mut self, login: Arc<LoginEnv>) -> Self {
        self.login = login;
        self
    }

    /// Uses this as the daemon environment instead of this process's own.
    pub fn with_daemon_env(mut self, env: EnvMap) -> Self {
        self.daemon_env = env;
        self
    }

    pub fn with_guardian_exe(mut self, exe: PathBuf) -> Self {
        self.guardian_exe = Some(exe);
        self
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Launches and waits for the result.
    pub fn run(&self, req: LaunchRequest) -> Result<LaunchResult, LaunchError> {
        self.launch(req)?.wait()
    }

    /// Launches: returns once the registration is durable and the workload was told to start.
    pub fn launch(&self, mut req: LaunchRequest) -> Result<LaunchHandle, LaunchError> {
        if req.argv.is_empty() {
            return Err(LaunchError::EmptyArgv);
        }
        let rt = &self.runtime;
        let id = rt.new_id()?;
        let needs_login = matches!(req.kind, Kind::Agent | Kind::Quality);
        let env = env_policy::build(EnvInputs {
            kind: req.kind,
            daemon: &self.daemon_env,
            login: if needs_login { self.login.get() } else { None },
            managed_git: req.managed_git,
            overrides: &req.env,
            owner: id,
        });
        let pty_size = match req.kind {
            Kind::Terminal => Some(req.pty.unwrap_or_default()),
            _ => req.pty,
        };

        // Streams: the workload's ends go to the guardian, ours to capture.
        let stdout_path = rt.log_path(id, Stream::Stdout);
        let stderr_path = rt.log_path(id, Stream::Stderr);
        let (stdio, sources, input) = match pty_size {
            Some(size) => {
                let p = pty::open(size)?;
                let capture_end = rustix::io::fcntl_dupfd_cloexec(&p.master, 3)
                    .map_err(|e| io_op("duplicate the PTY master")(e.into()))?;
                let sources = vec![StreamSource {
                    stream: Stream::Stdout,
                    fd: capture_end,
                    artifact: stdout_path,
                    pty: true,
                }];
                (Stdio::Pty(p.slave), sources, Some(Input::Pty(p.master)))
            }
            None => {
                let (out_r, out_w) = pipe()?;
                let (err_r, err_w) = pipe()?;
                let (stdin, input) = match req.stdin {
                    StdinMode::Null => (
                        OwnedFd::from(File::open("/dev/null").map_err(io_op("open /dev/null"))?),
                        None,
                    ),
                    StdinMode::Pipe => {
                        let (r, w) = pipe()?;
                        (r, Some(Input::Pipe(w)))
                    }
                };
                let sources = vec![
                    StreamSource {
                        stream: Stream::Stdout,
                        fd: out_r,
                        artifact: stdout_path,
                        pty: false,
                    },
                    StreamSource {
                        stream: Stream::Stderr,
                        fd: err_r,
                        artifact: stderr_path,
                        pty: false,
                    },
                ];
                (Stdio::Fds([stdin, out_w, err_w]), sources, input)
            }
        };
        let capture = Capture::new(
            sources,
            CaptureConfig {
                keep_max: req.keep_max,
                log_cap: req.log_cap,
                ..CaptureConfig::default()
            },
            req.on_output.take(),
        )?;

        let policy = req
            .scope_policy
            .unwrap_or_else(|| default_scope_policy(req.kind));
        let limits = Limits {
            completion_timeout_ms: req.completion_timeout.map(|d| d.as_millis() as u64),
            idle_timeout_ms: req.idle_timeout.map(|d| d.as_millis() as u64),
            log_cap_bytes: req.log_cap,
            rlimits: req.rlimits.clone(),
        };
        // The launcher owns the registration for the scope's whole life: recovery and retention
        // take this lock first and leave a scope whose owner is alive to it. It is taken before
        // the record exists and handed on until the receipt arrives (or this process dies).
        let owner = rt.lock(id, OWNER_LOCK_WAIT)?;
        // Input the workload takes is recorded beside its output (`logs/ID.stdin`).
        let stdin_path = input.as_ref().map(|_| rt.log_path(id, Stream::Stdin));
        let input_log = match &stdin_path {
            Some(p) => Some(
                std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .mode(0o600)
                    .open(p)
                    .map_err(io_op("create the stdin artifact"))?,
            ),
            None => None,
        };
        let (registration, link) = guardian::launch_registered(
            rt,
            id,
            RegisteredLaunch {
                kind: req.kind,
                label: req.label,
                owner: req.owner,
                purpose: req.purpose,
                argv: req.argv,
                env: env.into_iter().collect(),
                cwd: req.cwd,
                stdio,
                stdin_path,
                pty: pty_size.is_some(),
                new_session: req.new_session || pty_size.is_some(),
                limits,
                scope_policy: policy,
                pdeath_signal: req.pdeath_signal,
                start_timeout: guardian::DEFAULT_START_TIMEOUT,
                guardian_exe: self.guardian_exe.clone(),
            },
        )?;
        let deadlines = Deadlines::resume(&registration);
        // A fresh launch had its first activity at its start, not at this call.
        let mut deadlines = deadlines;
        deadlines.activity(deadlines.start());

        let (control_tx, control_rx) = rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC | rustix::net::SocketFlags::NONBLOCK,
            None,
        )
        .map_err(|e| io_op("create the control channel")(e.into()))?;
        let control = Arc::new(Control(control_tx));
        let engine = Engine {
            runtime: rt.clone(),
            registration: registration.clone(),
            link,
            capture,
            deadlines,
            output_limit: req.output_limit,
            control: control_rx,
            policy,
            owner,
        };
        let thread = std::thread::Builder::new()
            .name(format!("refine-launch-{}", &id.to_string()[..8]))
            .spawn(move || engine.run())
            .map_err(io_op("start the launch thread"))?;
        Ok(LaunchHandle {
            id,
            registration,
            thread: Some(thread),
            control: control.clone(),
            input: InputWriter {
                inner: Arc::new(InputInner {
                    control,
                    input: Mutex::new(input),
                    log: Mutex::new(input_log),
                }),
            },
        })
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), LaunchError> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| io_op("create a pipe")(e.into()))
}

/// How long a launch waits for its own, new registration lock (only a stale holder of the same
/// random id could delay it).
const OWNER_LOCK_WAIT: Duration = Duration::from_secs(5);

/// Control messages to the engine thread (one byte each).
const CTL_CANCEL: u8 = b'c';
const CTL_OPERATOR_STOP: u8 = b's';
const CTL_ACTIVITY: u8 = b'a';
/// Followed by the signal number in the same message.
const CTL_SIGNAL: u8 = b'k';

#[derive(Debug)]
struct Control(OwnedFd);

impl Control {
    fn send(&self, byte: u8) {
        self.send_msg(&[byte]);
    }

    fn send_msg(&self, msg: &[u8]) {
        // One message per request (SOCK_SEQPACKET). Best effort: once the engine has finished,
        // nobody listens (EPIPE, no SIGPIPE); a full buffer already holds a pending request.
        let _ = rustix::net::send(&self.0, msg, SendFlags::NOSIGNAL | SendFlags::DONTWAIT);
    }
}

#[derive(Debug)]
enum Input {
    Pty(OwnedFd),
    Pipe(OwnedFd),
}

/// Cancels a launch from any thread.
#[derive(Debug, Clone)]
pub struct Canceller {
    control: Arc<Control>,
}

impl Canceller {
    /// The caller no longer wants the result: the tree is stopped, the outcome is `Cancelled`.
    pub fn cancel(&self) {
        self.control.send(CTL_CANCEL);
    }
    /// An operator stops the launch: the tree is stopped, the outcome is `Stopped`.
    pub fn operator_stop(&self) {
        self.control.send(CTL_OPERATOR_STOP);
    }
}

/// A running launch.
#[derive(Debug)]
pub struct LaunchHandle {
    id: RegistrationId,
    registration: Registration,
    thread: Option<JoinHandle<LaunchResult>>,
    control: Arc<Control>,
    input: InputWriter,
}

/// The input side of a launch (stdin pipe or PTY master, window size), shareable with other
/// threads — a terminal forwarder, say — while [`LaunchHandle::wait`] blocks.
#[derive(Debug, Clone)]
pub struct InputWriter {
    inner: Arc<InputInner>,
}

#[derive(Debug)]
struct InputInner {
    control: Arc<Control>,
    input: Mutex<Option<Input>>,
    /// The `logs/ID.stdin` artifact: every byte delivered to the workload is appended to it.
    log: Mutex<Option<File>>,
}

impl LaunchHandle {
    pub fn id(&self) -> RegistrationId {
        self.id
    }

    /// The durable registration (written before the workload could start).
    pub fn registration(&self) -> &Registration {
        &self.registration
    }

    pub fn canceller(&self) -> Canceller {
        Canceller {
            control: self.control.clone(),
        }
    }

    pub fn cancel(&self) {
        self.canceller().cancel()
    }

    /// Resizes the PTY (counts as activity).
    pub fn resize(&self, size: WindowSize) -> Result<(), LaunchError> {
        self.input.resize(size)
    }

    /// Writes to the workload's stdin (PTY or pipe; counts as activity), waiting at most
    /// [`INPUT_TIMEOUT`] for it to accept the bytes.
    pub fn write_input(&self, bytes: &[u8]) -> Result<(), LaunchError> {
        self.input.write_input(bytes)
    }

    /// The input side, for a thread that forwards a terminal while this handle waits.
    pub fn input_writer(&self) -> InputWriter {
        self.input.clone()
    }

    /// Asks the guardian to forward `signo` to the workload (counts as activity). Best effort:
    /// ignored once the workload has exited. To end a launch use [`Canceller`], which stops the
    /// whole tree.
    pub fn signal(&self, signo: i32) -> Result<(), LaunchError> {
        let byte = u8::try_from(signo)
            .ok()
            .filter(|s| (1..=64).contains(s))
            .ok_or(LaunchError::BadSignal(signo))?;
        self.control.send_msg(&[CTL_SIGNAL, byte]);
        Ok(())
    }

    /// Closes a piped stdin (the workload reads EOF).
    pub fn close_input(&self) {
        self.input.close_input()
    }

    /// Waits for the result: the workload exited and the final drain ended (or it never ran).
    pub fn wait(mut self) -> Result<LaunchResult, LaunchError> {
        let thread = self.thread.take().ok_or(LaunchError::EngineDied)?;
        thread.join().map_err(|_| LaunchError::EngineDied)
    }
}

impl InputWriter {
    /// Resizes the PTY (counts as activity).
    pub fn resize(&self, size: WindowSize) -> Result<(), LaunchError> {
        let input = self.inner.input.lock().unwrap_or_else(|p| p.into_inner());
        match input.as_ref() {
            Some(Input::Pty(master)) => pty::resize(master.as_fd(), size)?,
            _ => return Err(LaunchError::NotAvailable("terminal")),
        }
        self.inner.control.send(CTL_ACTIVITY);
        Ok(())
    }

    /// Writes to the workload's stdin (PTY or pipe; counts as activity), waiting at most
    /// [`INPUT_TIMEOUT`] for it to accept the bytes.
    pub fn write_input(&self, bytes: &[u8]) -> Result<(), LaunchError> {
        let input = self.inner.input.lock().unwrap_or_else(|p| p.into_inner());
        let fd = match input.as_ref() {
            Some(Input::Pty(fd)) | Some(Input::Pipe(fd)) => fd,
            None => return Err(LaunchError::NotAvailable("input")),
        };
        if matches!(input.as_ref(), Some(Input::Pipe(_))) {
            rustix::io::ioctl_fionbio(fd, true)
                .map_err(|e| io_op("make stdin nonblocking")(e.into()))?;
        }
        pty::write_input(fd.as_fd(), bytes, INPUT_TIMEOUT)?;
        self.inner.control.send(CTL_ACTIVITY);
        if let Some(log) = self
            .inner
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            log.write_all(bytes)
                .map_err(io_op("record input in the stdin artifact"))?;
        }
        Ok(())
    }

    /// Closes a piped stdin (the workload reads EOF).
    pub fn close_input(&self) {
        let mut input = self.inner.input.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(input.as_ref(), Some(Input::Pipe(_))) {
            *input = None;
        }
    }
}

/// The shared stop (SPEC T) for this engine: deadlines, cancel, capture faults and the `stop`
/// scope policy all end the tree through [`crate::stop::stop`] (fence, quiesce, kill, proof by
/// the guardian's receipt). The guardian's link stays open meanwhile: its receipt frame is read
/// afterwards.
pub fn shared_stop(
    runtime: &Runtime,
    registration: &Registration,
) -> Result<StopReport, StopFailure> {
    crate::stop::stop(runtime, registration, &StopOptions::default()).map_err(|e| StopFailure {
        id: registration.id,
        error: Arc::new(e),
    })
}

/// Attempts at the shared stop for one cause while the workload keeps running.
const STOP_ATTEMPTS: u32 = 5;
/// Pause between stop attempts.
const STOP_RETRY: Duration = Duration::from_secs(1);

/// How long the engine waits for the guardian's receipt after a stop it made.
const RECEIPT_AFTER_STOP: Duration = Duration::from_secs(10);

struct Engine {
    /// The registration lock, held while this process owns the scope.
    owner: Fence,
    runtime: Runtime,
    registration: Registration,
    link: GuardianLink,
    capture: Capture,
    deadlines: Deadlines,
    output_limit: Option<u64>,
    control: OwnedFd,
    policy: ScopePolicy,
}

#[derive(Default)]
struct State {
    status: Option<WorkloadStatus>,
    receipt: Option<Receipt>,
    channel_closed: bool,
    /// Every handle and canceller is gone: the control socket is at EOF and leaves the poll set
    /// (a hung-up socket polls readable forever).
    control_closed: bool,
    guardian_failed: bool,
    spawn_errno: Option<i32>,
    /// The first cause that made this engine stop the tree.
    cause: Option<Outcome>,
    stopped: bool,
    stop_attempts: u32,
    retry_stop_at: Option<Instant>,
    stop_report: Option<StopReport>,
    stop_failure: Option<StopFailure>,
}

impl State {
    fn workload_over(&self) -> bool {
        self.status.is_some()
    }
}

impl Engine {
    fn run(mut self) -> LaunchResult {
        let mut st = State::default();
        loop {
            let now = Instant::now();
            if st.workload_over() {
                // Done when the drain is over, or earlier when every stream is closed and the
                // scope's end is known (its receipt usually follows the exit within ms).
                let drained = self.capture.drain_deadline().is_some_and(|d| now >= d);
                let settled =
                    self.capture.all_closed() && (st.receipt.is_some() || st.channel_closed);
                if drained || settled {
                    break;
                }
            }
            if st.cause.is_none() && !st.workload_over() {
                let cause = if let Some(e) = self.deadlines.expired(now) {
                    Some(match e {
                        Expired::Completion => Outcome::TimedOut,
                        Expired::Idle => Outcome::IdleTimeout,
                    })
                } else if self
                    .output_limit
                    .is_some_and(|l| self.capture.total_read() > l)
                {
                    Some(Outcome::OutputLimit)
                } else {
                    self.capture.failure().map(Outcome::CaptureFault)
                };
                if let Some(cause) = cause {
                    self.stop(&mut st, cause);
                }
            }
            if let (Some(at), Some(cause)) = (st.retry_stop_at, st.cause) {
                if now >= at && !st.workload_over() {
                    st.retry_stop_at = None;
                    st.stopped = false;
                    self.stop(&mut st, cause);
                }
            }
            let wake = if st.cause.is_none() && !st.workload_over() {
                self.deadlines.next()
            } else if !st.workload_over() {
                st.retry_stop_at
            } else {
                None
            };
            let ready = {
                let channel = self.link.channel();
                let control = self.control.as_fd();
                let mut extra = [channel, control];
                let mut open = 0;
                for (fd, closed) in [(channel, st.channel_closed), (control, st.control_closed)] {
                    if !closed {
                        extra[open] = fd;
                        open += 1;
                    }
                }
                match self.capture.pump(&extra[..open], wake) {
                    Ok(r) => {
                        let mut slot = 0;
                        let mut next = |open: bool| {
                            let ready = open && r.is_set(slot);
                            slot += usize::from(open);
                            ready
                        };
                        let ch = next(!st.channel_closed);
                        let ctl = next(!st.control_closed);
                        Some((ch, ctl))
                    }
                    Err(e) => {
                        tracing::error!(id = %self.registration.id, error = %e, "capture poll failed");
                        None
                    }
                }
            };
            let Some((channel_ready, control_ready)) = ready else {
                // poll itself failed: nothing more can be observed; stop and give up capture.
                self.stop(
                    &mut st,
                    Outcome::CaptureFault(CaptureFailure::Read { errno: 0 }),
                );
                self.await_workload(&mut st);
                break;
            };
            if let Some(t) = self.capture.last_output() {
                self.deadlines.activity(t);
            }
            if channel_ready {
                self.drain_events(&mut st);
            }
            if control_ready {
                self.read_control(&mut st);
            }
        }
        self.finish(st)
    }

    /// Reads every pending guardian event without blocking.
    fn drain_events(&mut self, st: &mut State) {
        while !st.channel_closed {
            match self.link.next_event(Some(Duration::ZERO)) {
                Ok(Some(ev)) => self.on_event(st, ev),
                Ok(None) => return,
                Err(e) => {
                    tracing::error!(id = %self.registration.id, error = %e, "guardian channel failed");
                    self.on_event(st, GuardianEvent::ChannelClosed);
                    return;
                }
            }
        }
    }

    fn on_event(&mut self, st: &mut State, ev: GuardianEvent) {
        let now = Instant::now();
        match ev {
            GuardianEvent::Started => {}
            GuardianEvent::SpawnFailed { errno } => {
                st.spawn_errno = Some(errno);
                st.status.get_or_insert(WorkloadStatus::NeverStarted);
                self.capture.begin_drain(now);
            }
            GuardianEvent::WorkloadExited { status, at_ns } => {
                if st.status.is_none() {
                    self.adopt_requested_stop(st, at_ns);
                }
                st.status.get_or_insert(status);
                self.capture.begin_drain(exit_instant(at_ns, now));
            }
            GuardianEvent::ScopeExited(receipt) => {
                if st.status.is_none() {
                    self.adopt_requested_stop(st, receipt.workload_exited_at_ns);
                }
                st.status.get_or_insert(receipt.status);
                st.receipt = Some(receipt);
                self.capture.begin_drain(now);
            }
            GuardianEvent::GuardianFailed { code, errno } => {
                tracing::error!(id = %self.registration.id, code, errno, "guardian failed");
                st.guardian_failed = true;
            }
            GuardianEvent::ChannelClosed => {
                st.channel_closed = true;
                if st.status.is_none() {
                    st.guardian_failed = true;
                    st.status = Some(WorkloadStatus::Unknown);
                    self.capture.begin_drain(now);
                }
            }
        }
    }

    fn read_control(&mut self, st: &mut State) {
        let mut buf = [0u8; 8];
        loop {
            match rustix::net::recv(&self.control, &mut buf, RecvFlags::DONTWAIT) {
                // Every message is at least one byte: zero is end of file.
                Ok((0, _)) => {
                    st.control_closed = true;
                    return;
                }
                Ok((n, _)) => match buf[..n.min(buf.len())] {
                    [CTL_CANCEL] => self.stop(st, Outcome::Cancelled),
                    [CTL_OPERATOR_STOP] => self.stop(st, Outcome::Stopped),
                    [CTL_SIGNAL, signo] => {
                        if !st.workload_over() && !st.channel_closed {
                            if let Err(e) = self.link.signal(i32::from(signo)) {
                                tracing::warn!(id = %self.registration.id, signo, error = %e, "cannot forward a signal");
                            }
                        }
                        self.deadlines.activity(Instant::now());
                    }
                    _ => self.deadlines.activity(Instant::now()),
                },
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return,
            }
        }
    }

    /// A stop asked for from outside this engine (an operator's `stop ID`, the service's
    /// deadline enforcement) that was recorded before the workload ended is what ended it: its
    /// cause becomes the outcome (S7), unless this engine already had one.
    fn adopt_requested_stop(&self, st: &mut State, exited_at_unix_ns: u64) {
        if st.cause.is_some() {
            return;
        }
        match self.runtime.read_stop_request(self.registration.id) {
            Ok(Some(req)) if req.requested_at_unix_ns <= exited_at_unix_ns => {
                st.cause = Some(match req.cause {
                    StopCause::Operator => Outcome::Stopped,
                    StopCause::CompletionDeadline => Outcome::TimedOut,
                    StopCause::IdleDeadline => Outcome::IdleTimeout,
                });
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(id = %self.registration.id, error = %e, "unreadable stop request")
            }
        }
    }

    /// Stops the tree through the shared stop; the first cause is kept as the outcome.
    fn stop(&mut self, st: &mut State, cause: Outcome) {
        if st.cause.is_none() && !st.workload_over() {
            st.cause = Some(cause);
        }
        if st.stopped || st.receipt.is_some() {
            return;
        }
        st.stopped = true;
        st.stop_attempts += 1;
        match shared_stop(&self.runtime, &self.registration) {
            Ok(report) => {
                st.stop_report = Some(report);
                st.stop_failure = None;
                st.retry_stop_at = None;
            }
            Err(e) => {
                tracing::warn!(id = %self.registration.id, error = %e, attempt = st.stop_attempts, "stop failed");
                st.stop_failure = Some(e);
                // The failure modes (fence held, quiescence not reached) are transient: try again
                // while the workload runs, a bounded number of times.
                if st.stop_attempts < STOP_ATTEMPTS {
                    st.retry_stop_at = Some(Instant::now() + STOP_RETRY);
                }
            }
        }
    }

    /// After poll failed: wait (bounded) for the workload's status from the guardian alone.
    fn await_workload(&mut self, st: &mut State) {
        let end = Instant::now() + RECEIPT_AFTER_STOP;
        while st.status.is_none() && !st.channel_closed {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self.link.next_event(Some(left)) {
                Ok(Some(ev)) => self.on_event(st, ev),
                Ok(None) => break,
                Err(_) => self.on_event(st, GuardianEvent::ChannelClosed),
            }
        }
        st.status.get_or_insert(WorkloadStatus::Unknown);
    }

    fn finish(mut self, mut st: State) -> LaunchResult {
        let id = self.registration.id;
        let status = st.status.unwrap_or(WorkloadStatus::Unknown);
        let outcome = if let Some(errno) = st.spawn_errno {
            Outcome::SpawnFailed { errno }
        } else if let Some(cause) = st.cause {
            cause
        } else if let Some(f) = self.capture.failure() {
            Outcome::CaptureFault(f)
        } else if st.guardian_failed && st.receipt.is_none() {
            Outcome::GuardianLost
        } else {
            Outcome::Completed
        };
        // A stop this engine made already: its receipt is due shortly; take it if it comes.
        if st.stopped && st.receipt.is_none() && !st.channel_closed {
            self.wait_receipt(&mut st, RECEIPT_AFTER_STOP);
        }
        // Any events already queued (the receipt often follows the exit immediately).
        if st.receipt.is_none() && !st.channel_closed {
            self.drain_events(&mut st);
        }
        let Engine {
            runtime,
            registration,
            mut link,
            capture,
            policy,
            owner,
            ..
        } = self;
        let result = refine_protocol::LaunchResultRecord {
            id,
            runtime: runtime.id(),
            outcome: outcome.name().to_owned(),
            workload_status: status,
            written_at_unix_ms: crate::deadline::unix_ms(),
        };
        if let Err(e) = runtime.write_result(&result) {
            tracing::warn!(%id, error = %e, "cannot record the launch result");
        }
        let capture = capture.finish();
        let capture_receipt = if capture.is_complete() {
            None
        } else {
            let path = runtime.capture_receipt_path(id);
            let receipt = capture.receipt(id, runtime.id(), Some(status));
            let written = receipt
                .encode()
                .map_err(std::io::Error::other)
                .and_then(|bytes| crate::durable::write_atomic(&path, &bytes, 0o600));
            match written {
                Ok(()) => Some(path),
                Err(e) => {
                    tracing::error!(%id, error = %e, "cannot write the capture receipt");
                    None
                }
            }
        };
        let (scope, scope_watch) = if let Some(r) = st.receipt {
            let _ = link.wait_guardian();
            (
                ScopeState::Exited(r),
                ScopeWatch::ready(ScopeEnd {
                    receipt: Some(r),
                    stop_report: None,
                    stop_failure: None,
                }),
            )
        } else if st.channel_closed {
            let _ = link.wait_guardian();
            (
                ScopeState::Unknown,
                ScopeWatch::ready(ScopeEnd {
                    receipt: None,
                    stop_report: None,
                    stop_failure: st.stop_failure.clone(),
                }),
            )
        } else {
            let stop = policy == ScopePolicy::Stop && !st.stopped;
            let state = if stop {
                ScopeState::Stopping
            } else {
                ScopeState::Live
            };
            (
                state,
                watch_scope(runtime, registration.clone(), link, owner, stop),
            )
        };
        LaunchResult {
            id,
            registration,
            outcome,
            status,
            capture,
            capture_receipt,
            scope,
            scope_watch,
            stop_report: st.stop_report,
            stop_failure: st.stop_failure,
        }
    }

    fn wait_receipt(&mut self, st: &mut State, bound: Duration) {
        let end = Instant::now() + bound;
        while st.receipt.is_none() && !st.channel_closed {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            match self.link.next_event(Some(left)) {
                Ok(Some(ev)) => self.on_event(st, ev),
                Ok(None) => return,
                Err(_) => self.on_event(st, GuardianEvent::ChannelClosed),
            }
        }
    }
}

/// Hands the link to a thread that (for the `stop` policy) stops the scope through the shared
/// stop, then waits for the receipt and reaps the guardian.
fn watch_scope(
    runtime: Runtime,
    registration: Registration,
    mut link: GuardianLink,
    owner: Fence,
    stop: bool,
) -> ScopeWatch {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("refine-scope-watch".into())
        .spawn(move || {
            let (stop_report, stop_failure) = if stop {
                match shared_stop(&runtime, &registration) {
                    Ok(r) => (Some(r), None),
                    Err(e) => (None, Some(e)),
                }
            } else {
                (None, None)
            };
            let mut receipt = None;
            loop {
                match link.next_event(None) {
                    Ok(Some(GuardianEvent::ScopeExited(r))) => {
                        receipt = Some(r);
                        break;
                    }
                    Ok(Some(GuardianEvent::ChannelClosed)) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            let _ = link.wait_guardian();
            drop(owner);
            let _ = tx.send(ScopeEnd {
                receipt,
                stop_report,
                stop_failure,
            });
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the scope watcher");
    }
    ScopeWatch { rx, done: None }
}

/// The monotonic instant of the guardian's `CLOCK_REALTIME` exit stamp, never in the future and
/// never earlier than one drain before `now` (a clock step cannot shorten the drain to nothing).
fn exit_instant(at_ns: u64, now: Instant) -> Instant {
    let age = crate::deadline::unix_time()
        .saturating_sub(Duration::from_nanos(at_ns))
        .min(crate::capture::FINAL_DRAIN);
    now.checked_sub(age).unwrap_or(now)
}
