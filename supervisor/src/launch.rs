//! The launch engine (SPEC S1–S11): the one API every caller uses to run a managed command of any
//! kind (`agent`, `quality`, `command`, `terminal`).
//!
//! [`Supervisor::launch`] prepares the environment ([`crate::launch::env_policy`]), the output pipes or a
//! PTY ([`crate::launch::pty`]) and the artifacts, starts the guardian, makes the registration durable and
//! only then says *start* (all through [`launch_registered`]). The launch's engine then waits on
//! the output streams ([`crate::launch::capture`]), the guardian channel and a control socket (cancel,
//! operator stop, activity from input and resize), enforcing the deadlines
//! ([`crate::launch::deadline`]): with one `poll` on a thread of its own or on the caller's
//! ([`Supervisor::driven_by_caller`]), or, for a [`Supervisor`] given a [`SharedLoop`] (the
//! service), in one epoll loop with every other engine. [`LaunchHandle::wait`] returns a
//! [`LaunchResult`] with a typed [`LaunchOutcome`] as soon as the workload has exited and the
//! fixed final drain has ended.
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
//!   shared stop ([`crate::end::stop::stop`], called from [`shared_stop`]); the stop proves the end by
//!   the guardian's receipt, which the engine then also reads from the channel.

pub mod capture;
pub mod credentials;
pub mod deadline;
pub mod env_policy;
pub mod escalation;
pub mod guardian;
pub mod health;
pub mod protect;
pub mod pty;
pub mod readiness;
pub mod sandbox;

mod engine;
mod handle;
mod register;
mod request;
mod shared;

pub use engine::{shared_stop, Beside, LaunchAsks};
use engine::{Engine, Owner};
pub use handle::{Canceller, EngineThread, InputWriter, LaunchHandle, INPUT_TIMEOUT};
pub use register::{launch_registered, launch_registered_into, RegisteredLaunch};
pub use request::{default_scope_policy, LaunchRequest, StdinMode, DEFAULT_LOG_CAP};
pub use shared::SharedLoop;

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use refine_protocol::docs::{Outcome, RunScope};
use refine_protocol::record::{Kind, Limits, Registration};
use refine_protocol::{Receipt, RegistrationId, WorkloadStatus};

use crate::end::stop::{StopError, StopReport};
use crate::launch::capture::{
    Capture, CaptureConfig, CaptureError, CaptureFailure, CaptureResult, StreamSource,
};
use crate::launch::deadline::Deadlines;
use crate::store::registry::{RegistryError, Runtime, Stream};
use env_policy::{EnvInputs, EnvMap, LoginEnv};
use guardian::Stdio;
use handle::{Control, Driver, Input, InputInner};
use pty::PtyError;

/// How a launch ended (S7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchOutcome {
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
    /// A step of the release failed with this errno (W13: `step` says which: the program, the
    /// working directory, the user switch); the workload never ran.
    SpawnFailed {
        errno: i32,
        step: refine_protocol::frame::SpawnStep,
    },
    /// Capture failed (a read or an artifact write); the tree was stopped.
    CaptureFault(CaptureFailure),
    /// An operator stopped it: through this launch's handle, or with the shared stop from
    /// anywhere (`stop ID` in another process), which records its request first.
    Stopped,
    /// The guardian reported a fatal error or vanished; the workload's status is unknown.
    GuardianLost,
}

impl LaunchOutcome {
    /// The outcome as documents and records name it (`run --json`, `ps`, the launch result):
    /// the contract's closed enum, without this outcome's details.
    pub fn kind(&self) -> Outcome {
        match self {
            LaunchOutcome::Completed => Outcome::Completed,
            LaunchOutcome::TimedOut => Outcome::TimedOut,
            LaunchOutcome::IdleTimeout => Outcome::IdleTimeout,
            LaunchOutcome::Cancelled => Outcome::Cancelled,
            LaunchOutcome::OutputLimit => Outcome::OutputLimit,
            LaunchOutcome::SpawnFailed { .. } => Outcome::SpawnFailed,
            LaunchOutcome::CaptureFault(_) => Outcome::CaptureFault,
            LaunchOutcome::Stopped => Outcome::Stopped,
            LaunchOutcome::GuardianLost => Outcome::GuardianLost,
        }
    }

    /// The outcome's name (`completed`, `timed_out`, ...).
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Every outcome an engine returns (all but `stop_failed`, which only a launch result
    /// record says), in declaration order: the metrics expose each from the start.
    pub fn kinds() -> impl Iterator<Item = Outcome> {
        use refine_protocol::docs::Vocabulary;
        Outcome::ALL
            .iter()
            .copied()
            .filter(|o| *o != Outcome::StopFailed)
    }
}

impl ScopeState {
    /// The scope at return, as `run --json` names it.
    pub fn shown(&self) -> RunScope {
        match self {
            ScopeState::Exited(_) => RunScope::Exited,
            ScopeState::Live => RunScope::Live,
            ScopeState::Stopping => RunScope::Stopping,
            ScopeState::Unknown => RunScope::Unknown,
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
    /// A descendant holds the scope and the shared stop ends it: now (the `stop` policy, a
    /// deadline that passed) or at the completion deadline, which holds for the whole scope
    /// (W7); see [`ScopeWatch::stop_at`].
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
pub struct ScopeEnded {
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
    rx: mpsc::Receiver<ScopeEnded>,
    done: Option<ScopeEnded>,
    /// When the watcher stops the residue (the `stop` policy, a deadline), if it does.
    stop_at: Option<std::time::Instant>,
}

impl ScopeWatch {
    fn ready(end: ScopeEnded) -> Self {
        let (_tx, rx) = mpsc::channel();
        ScopeWatch {
            rx,
            done: Some(end),
            stop_at: None,
        }
    }

    /// When the watcher stops the scope's residue, if it does ([`ScopeState::Stopping`]).
    pub fn stop_at(&self) -> Option<std::time::Instant> {
        self.stop_at
    }

    /// Waits up to `timeout` for the scope's end.
    pub fn wait(&mut self, timeout: Duration) -> Option<&ScopeEnded> {
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
    pub outcome: LaunchOutcome,
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
    ) -> Result<&[u8], crate::launch::capture::IncompleteCapture> {
        self.capture.complete_output(stream)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("empty argv")]
    EmptyArgv,
    /// A deadline or grace longer than the clock can hold (SPEC W11): refused before anything
    /// is created, as the CLI and the API refuse it.
    #[error("{what} is longer than the longest duration the supervisor accepts ({max:?})")]
    DurationTooLong { what: &'static str, max: Duration },
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
    Guardian(#[from] guardian::HandshakeError),
    #[error("the launch thread died")]
    EngineDied,
    #[error("this launch has no {0}")]
    NotAvailable(&'static str),
    #[error("{0} is not a signal number")]
    BadSignal(i32),
    #[error("a --user workload cannot take this process's terminal as its stdin: relay it through a pipe or give it a PTY")]
    TerminalToOtherUser,
    /// H8: a limit this host cannot apply, refused before anything is created.
    #[error(transparent)]
    Resources(#[from] crate::kernel::resources::ResourceError),
    /// H6: a readiness this launch cannot watch, refused before anything is created.
    #[error(transparent)]
    Readiness(#[from] readiness::ReadinessError),
    /// X12: a sandbox this kernel cannot honour, refused before anything is created.
    #[error(transparent)]
    Sandbox(#[from] sandbox::SandboxError),
}

fn io_op(op: &'static str) -> impl FnOnce(io::Error) -> LaunchError {
    move |source| LaunchError::Io { op, source }
}

/// Called on the engine's thread (or the shared loop's pool) with every result of a [`Supervisor`]'s launches, before the
/// result goes to [`LaunchHandle::wait`] (a service that never waits counts outcomes with it).
pub type ResultHook = Arc<dyn Fn(&LaunchResult) + Send + Sync>;

/// Called once per launch with its scope's receipt when it comes (at the result, or later when
/// a descendant held the scope), on the engine's or the scope watcher's thread, with the final
/// accounting of the scope's own cgroup (F4) where it had one and it could be read.
pub type ReceiptHook = Arc<
    dyn Fn(&Registration, &refine_protocol::Receipt, Option<refine_protocol::CgroupUsage>)
        + Send
        + Sync,
>;

/// The launch engine of one runtime.
pub struct Supervisor {
    runtime: Runtime,
    login: Arc<LoginEnv>,
    daemon_env: EnvMap,
    guardian_exe: Option<PathBuf>,
    on_result: Option<ResultHook>,
    on_receipt: Option<ReceiptHook>,
    /// Drives the engines of this supervisor's launches (else: a thread per launch).
    shared: Option<SharedLoop>,
    /// Each launch's engine is driven by the thread that waits for it
    /// ([`Supervisor::driven_by_caller`]).
    by_caller: bool,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("runtime", &self.runtime)
            .field("guardian_exe", &self.guardian_exe)
            .field("on_result", &self.on_result.is_some())
            .finish_non_exhaustive()
    }
}

impl Supervisor {
    /// An engine for `runtime`; the login environment is captured from `$SHELL` on first need.
    pub fn new(runtime: Runtime) -> Self {
        Supervisor {
            runtime,
            login: Arc::new(LoginEnv::from_env()),
            daemon_env: env_policy::daemon_env(),
            guardian_exe: None,
            on_result: None,
            on_receipt: None,
            shared: None,
            by_caller: false,
        }
    }

    /// Drives every launch's engine on `shared` (a fixed number of threads for any number of
    /// launches) instead of a thread per launch.
    pub fn with_shared_loop(mut self, shared: SharedLoop) -> Self {
        self.shared = Some(shared);
        self
    }

    /// Drives each launch's engine on the thread that waits for it ([`LaunchHandle::wait`],
    /// [`LaunchHandle::wait_beside`]) instead of a thread of its own: the launch does nothing
    /// until then (its workload runs, its output waits in the pipes). `run` uses this: one
    /// thread less to start and to hand over to.
    pub fn driven_by_caller(mut self) -> Self {
        self.by_caller = true;
        self
    }

    /// Calls `hook` with each launch's receipt when it comes ([`ReceiptHook`]).
    pub fn with_receipt_hook(mut self, hook: ReceiptHook) -> Self {
        self.on_receipt = Some(hook);
        self
    }

    /// Calls `hook` with the result of every launch, where its engine ran ([`ResultHook`]).
    pub fn with_result_hook(mut self, hook: ResultHook) -> Self {
        self.on_result = Some(hook);
        self
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
    ///
    /// In steps: check the request, plan the sandbox, build the environment, start the guardian
    /// (F3), open the streams and the capture, take the registration lock, prepare readiness and
    /// the Landlock domain, register and start the workload, start its watchers (readiness,
    /// health), and hand the engine to its driver.
    pub fn launch(&self, mut req: LaunchRequest) -> Result<LaunchHandle, LaunchError> {
        check_request(&req)?;
        let quiet;
        let rt = if req.events && req.durable && req.cgroup {
            &self.runtime
        } else {
            let mut r = self.runtime.clone();
            if !req.events {
                r = r.without_events();
            }
            if !req.durable {
                r = r.without_sync();
            }
            if !req.cgroup {
                r = r.without_cgroup();
            }
            quiet = r;
            &quiet
        };
        let mut sandbox = plan_sandbox(&req, rt)?;
        let id = rt.new_id()?;
        let env = self.environment(&req, id);
        let pty_size = match req.kind {
            Kind::Terminal => Some(req.pty.unwrap_or_default()),
            _ => req.pty,
        };

        // F3: the guardian starts first, so that its exec overlaps what follows (the streams, the
        // record, the cgroup); its launch is sent once they are ready. Dropped on a failure
        // below, it is told nothing and exits.
        let started = guardian::start(self.guardian_exe.clone(), false)?;

        let (stdio, sources, input) = open_streams(&mut req, rt, id, pty_size)?;
        let capture = start_capture(&mut req, sources)?;

        let policy = req
            .scope_policy
            .unwrap_or_else(|| default_scope_policy(req.kind));
        let limits = limits(&req);
        // The launcher owns the registration for the scope's whole life: recovery and retention
        // take this lock first and leave a scope whose owner is alive to it. It is taken before
        // the record exists and handed on until the receipt arrives (or this process dies).
        // The lock is the record itself, taken on it while it has no name yet (F3).
        let (owner, pending) = rt.begin_registration(id)?;
        // L3: a scope the service keeps costs it one descriptor: the guardian that drains its
        // output holds the lock for the service too, and lets go when the service does.
        let mut stdio = stdio;
        let owner = match &mut stdio {
            Stdio::Captured { owner_lock, .. } if self.shared.is_some() => {
                *owner_lock = Some(
                    owner
                        .share()
                        .map_err(io_op("share the registration lock"))?,
                );
                Owner::Guardian
            }
            _ => Owner::Here(owner),
        };
        // Input the workload takes is recorded beside its output (`logs/ID.stdin`).
        let (stdin_path, input_log) = open_input_log(rt, id, input.is_some())?;
        // H6: the notify socket is bound before the spawn, so a workload that notifies at once
        // is heard.
        let mut readiness = match req.readiness.take() {
            Some(r) => Some((readiness::prepare(&r, id)?, r)),
            None => None,
        };
        let ready_fd = readiness.as_mut().and_then(|(p, _)| p.child_fd.take());
        // X11: the workload's Landlock domain, built here and applied by the gated child.
        let ready_notify = readiness
            .as_ref()
            .is_some_and(|(_, r)| r.spec().mode == refine_protocol::record::ReadyMode::Notify);
        if let Some(plan) = sandbox.as_mut() {
            plan.make_tmpdir(id)?;
        }
        let protection = protect::build(req.protect, rt.home(), ready_notify, sandbox.as_ref())
            .map_err(io_op("build the workload's Landlock domain"))?;
        let entries = workload_entries(
            &env,
            readiness.as_ref().and_then(|(p, _)| p.env.clone()),
            protect::nested_home(&protection.record, &env, rt.home(), id),
            sandbox.as_ref().and_then(sandbox::Plan::env_entry),
        );
        let health_queue = req.health_queue.take();
        let (registration, link) = register::launch_started(
            rt,
            pending,
            id,
            RegisteredLaunch {
                kind: req.kind,
                label: req.label,
                owner: req.owner,
                purpose: req.purpose,
                readiness: readiness.as_ref().map(|(_, r)| r.spec()),
                health: req.health.take(),
                protection: Some(protection.record),
                sandbox: sandbox.as_ref().map(sandbox::Plan::record),
                guardian: guardian::LaunchConfig {
                    env: entries,
                    cwd: req.cwd,
                    // X2: another user's workload never shares this session (nor its terminal).
                    new_session: req.new_session || pty_size.is_some() || req.user.is_some(),
                    pdeath_signal: req.pdeath_signal,
                    guardian_exe: self.guardian_exe.clone(),
                    credentials: req.user,
                    signal_state: req.signal_state,
                    allow_setns: req.allow_setns,
                    ready_fd,
                    ruleset: protection.ruleset,
                    no_new_privs: protection.no_new_privs,
                    ..guardian::LaunchConfig::new(req.argv, stdio)
                },
                stdin_path,
                pty: pty_size.is_some(),
                limits,
                scope_policy: policy,
                on_service_loss: req.on_service_loss,
                foreground: req.foreground.take(),
                resources: req.resources,
            },
            started,
        )?;
        if let Some((prepared, r)) = readiness {
            readiness::watch(rt.clone(), registration.clone(), r, prepared);
        }
        start_health(health_queue, rt, &registration);
        let deadlines = Deadlines::resume(&registration);
        // A fresh launch had its first activity at its start, not at this call.
        let mut deadlines = deadlines;
        deadlines.activity(deadlines.start());

        let (control_tx, control_rx) = control_channel()?;
        let control = Arc::new(Control(control_tx));
        let (spawned_tx, spawned_rx) = mpsc::sync_channel(1);
        let engine = Engine {
            runtime: rt.clone(),
            registration: registration.clone(),
            link,
            capture,
            deadlines,
            escalation: escalation::Escalation::new(req.stop_grace),
            output_limit: req.output_limit,
            control: Some(control_rx),
            policy,
            owner,
            spawned: Some(spawned_tx),
            on_receipt: sandbox::removing_tmpdir(
                self.on_receipt.clone(),
                sandbox.as_ref().and_then(|p| p.tmpdir.clone()),
            ),
            residues: None,
        };
        let thread = self.drive(engine, id)?;
        Ok(LaunchHandle {
            id,
            registration,
            thread: Some(thread),
            spawned: Mutex::new(spawned_rx),
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

    /// The workload's environment (the kind's policy, the login's, the request's overrides).
    fn environment(&self, req: &LaunchRequest, id: RegistrationId) -> EnvMap {
        let needs_login = matches!(req.kind, Kind::Agent | Kind::Quality);
        env_policy::build(EnvInputs {
            kind: req.kind,
            daemon: &self.daemon_env,
            login: if needs_login { self.login.get() } else { None },
            managed_git: req.managed_git,
            clear: req.env_clear,
            overrides: &req.env,
            owner: id,
        })
    }

    /// Hands the engine to what drives it: the shared loop, the caller, or a thread of its own.
    fn drive(&self, engine: Engine, id: RegistrationId) -> Result<Driver, LaunchError> {
        let on_result = self.on_result.clone();
        Ok(match &self.shared {
            Some(shared) => Driver::Shared(shared.adopt(engine, on_result)),
            None if self.by_caller => Driver::Caller(Box::new(engine), on_result),
            None => {
                let done = Arc::new(handle::Completion::default());
                let delivered = done.clone();
                let thread = std::thread::Builder::new()
                    .name(format!("refine-launch-{}", &id.to_string()[..8]))
                    .spawn(move || {
                        let result = engine.run();
                        if let Some(hook) = on_result {
                            hook(&result);
                        }
                        delivered.deliver(result);
                    })
                    .map_err(io_op("start the launch thread"))?;
                Driver::Thread(thread, done)
            }
        })
    }
}

/// The one bound on a launch's durations (SPEC W11), for every caller of the library: each
/// deadline and grace is at most [`refine_protocol::api::MAX_DURATION`], so that it converts to
/// the record's milliseconds and meets a clock (`Instant + d`) without overflow.
fn check_durations(req: &LaunchRequest) -> Result<(), LaunchError> {
    let max = refine_protocol::api::MAX_DURATION;
    for (what, d) in [
        ("timeout", req.timeout),
        ("idle_timeout", req.idle_timeout),
        ("kill_after", req.kill_after),
    ] {
        if d.is_some_and(|d| d > max) {
            return Err(LaunchError::DurationTooLong { what, max });
        }
    }
    Ok(())
}

/// A capture index (L1), created empty, appended to by the guardian.
fn open_index(path: &std::path::Path) -> Result<OwnedFd, LaunchError> {
    crate::store::durable::open_private(
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .truncate(false),
        path,
    )
    .map(OwnedFd::from)
    .map_err(io_op("create the capture index"))
}

fn pipe() -> Result<(OwnedFd, OwnedFd), LaunchError> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| io_op("create a pipe")(e.into()))
}

/// Step 1 of [`Supervisor::launch`]: what the request itself must satisfy.
fn check_request(req: &LaunchRequest) -> Result<(), LaunchError> {
    if req.argv.is_empty() {
        return Err(LaunchError::EmptyArgv);
    }
    check_durations(req)?;
    crate::kernel::resources::check(&req.resources)?;
    Ok(())
}

/// X12: the request's sandbox, planned against this kernel's Landlock ABI.
fn plan_sandbox(req: &LaunchRequest, rt: &Runtime) -> Result<Option<sandbox::Plan>, LaunchError> {
    let abi = crate::kernel::landlock::abi().unwrap_or(0);
    Ok(sandbox::plan(
        &req.sandbox,
        req.cwd.as_deref(),
        rt.home(),
        abi,
    )?)
}

/// The streams to capture: sources this process reads, or (guarded) artifacts the guardian writes.
type Sources = Result<Vec<StreamSource>, Vec<(Stream, PathBuf)>>;

/// The workload's standard streams, what capture reads, and this side's input end.
fn open_streams(
    req: &mut LaunchRequest,
    rt: &Runtime,
    id: RegistrationId,
    pty_size: Option<pty::WindowSize>,
) -> Result<(Stdio, Sources, Option<Input>), LaunchError> {
    // Streams: the workload's ends go to the guardian, ours to capture. L1: a launch that
    // outlives its launcher (no parent-death signal: the service's, a detached host's) has
    // its output drained by its guardian, unless this process wants the bytes as they come
    // (a forward, a callback) or a terminal is involved.
    let stdout_path = rt.log_path(id, Stream::Stdout);
    let stderr_path = rt.log_path(id, Stream::Stderr);
    let guarded = req.pdeath_signal.is_none()
        && pty_size.is_none()
        && req.forward_stdout.is_none()
        && req.forward_stderr.is_none()
        && req.on_output.is_none()
        && req.artifacts;
    Ok(match pty_size {
        Some(size) => {
            let p = pty::open(size)?;
            if let Some(u) = &req.user {
                pty::give_to(&p.slave, u.uid, u.gid)?;
            }
            let capture_end = rustix::io::fcntl_dupfd_cloexec(&p.master, 3)
                .map_err(|e| io_op("duplicate the PTY master")(e.into()))?;
            let sources = vec![StreamSource {
                stream: Stream::Stdout,
                fd: capture_end,
                artifact: stdout_path,
                pty: true,
                forward: req.forward_stdout.take(),
            }];
            (Stdio::Pty(p.slave), Ok(sources), Some(Input::Pty(p.master)))
        }
        None => {
            let (stdin, input) = open_stdin(req)?;
            if guarded {
                let stdio = Stdio::Captured {
                    stdin,
                    artifacts: [
                        OwnedFd::from(capture::open_artifact(&stdout_path)?),
                        OwnedFd::from(capture::open_artifact(&stderr_path)?),
                    ],
                    indexes: [
                        open_index(&rt.index_path(id, Stream::Stdout))?,
                        open_index(&rt.index_path(id, Stream::Stderr))?,
                    ],
                    log_cap: req.log_cap,
                    owner_lock: None,
                };
                let streams = vec![(Stream::Stdout, stdout_path), (Stream::Stderr, stderr_path)];
                (stdio, Err(streams), input)
            } else {
                let (out_r, out_w) = pipe()?;
                let (err_r, err_w) = pipe()?;
                let sources = vec![
                    StreamSource {
                        stream: Stream::Stdout,
                        fd: out_r,
                        artifact: stdout_path,
                        pty: false,
                        forward: req.forward_stdout.take(),
                    },
                    StreamSource {
                        stream: Stream::Stderr,
                        fd: err_r,
                        artifact: stderr_path,
                        pty: false,
                        forward: req.forward_stderr.take(),
                    },
                ];
                (Stdio::Fds([stdin, out_w, err_w]), Ok(sources), input)
            }
        }
    })
}

/// The workload's stdin (a standard launch): its descriptor, and this side's end of a pipe.
fn open_stdin(req: &LaunchRequest) -> Result<(OwnedFd, Option<Input>), LaunchError> {
    Ok(match req.stdin {
        StdinMode::Null => (
            OwnedFd::from(File::open("/dev/null").map_err(io_op("open /dev/null"))?),
            None,
        ),
        StdinMode::Pipe => {
            let (r, w) = pipe()?;
            (r, Some(Input::Pipe(w)))
        }
        // X2: no descriptor of this process's terminal reaches another user.
        StdinMode::Inherit
            if req.user.is_some() && rustix::termios::isatty(rustix::stdio::stdin()) =>
        {
            return Err(LaunchError::TerminalToOtherUser);
        }
        StdinMode::Inherit => match rustix::io::fcntl_dupfd_cloexec(rustix::stdio::stdin(), 3) {
            Ok(fd) => (fd, None),
            Err(_) => (
                OwnedFd::from(File::open("/dev/null").map_err(io_op("open /dev/null"))?),
                None,
            ),
        },
    })
}

/// The capture of the launch's output.
fn start_capture(req: &mut LaunchRequest, sources: Sources) -> Result<Capture, LaunchError> {
    let capture_config = CaptureConfig {
        keep_max: req.keep_max,
        log_cap: req.log_cap,
        artifacts: req.artifacts,
        ..CaptureConfig::default()
    };
    Ok(match sources {
        Ok(sources) => Capture::new(sources, capture_config, req.on_output.take())?,
        Err(guarded) => Capture::guarded(guarded, capture_config),
    })
}

/// The limits the record keeps.
fn limits(req: &LaunchRequest) -> Limits {
    Limits {
        completion_timeout_ms: req.timeout.map(refine_protocol::time::saturating_ms),
        idle_timeout_ms: req.idle_timeout.map(refine_protocol::time::saturating_ms),
        log_cap_bytes: req.log_cap,
        rlimits: req.rlimits.clone(),
        kill_after_ms: req.kill_after.map(refine_protocol::time::saturating_ms),
    }
}

/// Input the workload takes is recorded beside its output (`logs/ID.stdin`).
fn open_input_log(
    rt: &Runtime,
    id: RegistrationId,
    has_input: bool,
) -> Result<(Option<PathBuf>, Option<File>), LaunchError> {
    if !has_input {
        return Ok((None, None));
    }
    let path = rt.log_path(id, Stream::Stdin);
    let log = crate::store::durable::open_private(
        std::fs::OpenOptions::new().append(true).create(true),
        &path,
    )
    .map_err(io_op("create the stdin artifact"))?;
    Ok((Some(path), Some(log)))
}

/// The workload's environment entries, with what the launch itself sets replacing the same
/// names: H6's `NOTIFY_SOCKET`, X11's nested `REFINE_HOME` (a home of its own, which the domain
/// lets it write: `protect::nested_home`), X12's sandbox `TMPDIR`.
fn workload_entries(
    env: &EnvMap,
    notify: Option<OsString>,
    nested_home: Option<OsString>,
    tmpdir: Option<OsString>,
) -> Vec<OsString> {
    let mut entries = env_policy::to_entries(env);
    for (prefix, entry) in [
        (&b"NOTIFY_SOCKET="[..], notify),
        (&b"REFINE_HOME="[..], nested_home),
        (&b"TMPDIR="[..], tmpdir),
    ] {
        if let Some(entry) = entry {
            entries.retain(|e| !e.as_encoded_bytes().starts_with(prefix));
            entries.push(entry);
        }
    }
    entries
}

/// H7: the owner of the scope's life probes it: the service's one queue, else a thread of this
/// launcher.
fn start_health(queue: Option<Arc<health::Queue>>, rt: &Runtime, registration: &Registration) {
    if registration.health.is_some() {
        match queue {
            Some(q) => q.add(rt, registration.clone()),
            None => health::watch(rt.clone(), registration.clone()),
        }
    }
}

/// The control channel between a launch's handle and its engine.
fn control_channel() -> Result<(OwnedFd, OwnedFd), LaunchError> {
    rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC | rustix::net::SocketFlags::NONBLOCK,
        None,
    )
    .map_err(|e| io_op("create the control channel")(e.into()))
}
