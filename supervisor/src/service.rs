//! The per-port service (`serve`, SPEC O2) and the operations the CLI and the service share.
//!
//! `serve` holds `run/P/locks/service.lock` (an `flock`, so one service per port; a second one
//! fails with a clear message and a SIGKILLed one never wedges it), runs the recovery pass, then
//! listens on the Unix socket `run/P/supervisor.sock` (created with mode 0600; every connection's
//! peer credentials are checked: same uid or root). Requests and responses are JSON lines defined
//! in [`refine_protocol::api`]. A maintenance loop enforces the deadlines of registrations this
//! service did not launch (through the one shared stop), runs retention, and samples capacity.
//! Logs go through `tracing` to `run/P/service.log`.
//!
//! # Caveats
//! SIGTERM/SIGINT end the service, not the workloads: the guardians it launched outlive it (their
//! launch asks for no parent-death signal) and the next service's recovery pass finds them.
//! Requests are handled on tokio's blocking pool: the engine, the stop and the assessment are
//! blocking by design, and the supervisor never reaps anything but its own guardians by pid.

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read as _, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use refine_protocol::api::{self, ErrorKind, LaunchSpec, Reply, Request, Response, MAX_MESSAGE};
use refine_protocol::{Kind, Registration, RegistrationId, StopCause, WorkloadStatus};
use serde_json::json;

use crate::capture::StreamState;
use crate::cli::{self, Assessed, CliError};
use crate::error_chain;
use crate::fence::{self, FenceError};
use crate::launch::{LaunchRequest, LaunchResult, Outcome, ScopeState, Supervisor};
use crate::pty::WindowSize;
use crate::registry::{RegistryError, Runtime, Stream};
use crate::{assess, capacity, recover, retention, stop};

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("a service is already running for port {port} (lock {lock} is held)")]
    AlreadyRunning { port: u16, lock: PathBuf },
    #[error("no service is running for port {port} (no socket at {socket}): start `refine-supervisor serve`")]
    NotRunning {
        port: u16,
        socket: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("service request failed: {op}")]
    Io {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("service sent a malformed response")]
    Decode(#[source] refine_protocol::DecodeError),
    #[error("service refused ({kind:?}): {message}")]
    Refused { kind: ErrorKind, message: String },
    #[error("service sent an unexpected reply: {0}")]
    Unexpected(String),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Fence(#[from] FenceError),
    #[error("invalid launch: {0}")]
    BadSpec(String),
    #[error("launch failed")]
    Launch(#[source] crate::launch::LaunchError),
    #[error("capacity sampling failed: {0}")]
    Capacity(String),
    #[error("no capacity slot free for an agent ({slots} slots, {live} live, {unverified} unverified); retry later or pass --wait-for-slot DUR")]
    NoCapacity {
        slots: usize,
        live: usize,
        unverified: usize,
    },
    #[error("recovery failed")]
    Recover(#[from] recover::RecoverError),
}

fn io_err(op: &'static str) -> impl FnOnce(io::Error) -> ServiceError {
    move |source| ServiceError::Io { op, source }
}

// ---------------------------------------------------------------------------------------------
// Shared operations (CLI and service).

/// The one shared assessment (A1), flattened for display.
pub fn assess_one(rt: &Runtime, reg: &Registration) -> Assessed {
    flatten(&assess::assess(rt, reg, &assess::KERNEL_BOOT))
}

/// An [`assess::Assessment`] as the CLI shows it.
pub fn flatten(a: &assess::Assessment) -> Assessed {
    match a {
        assess::Assessment::Live => Assessed {
            state: "live",
            reason: None,
            receipt: None,
        },
        assess::Assessment::Exited { proof } => match proof {
            assess::ExitProof::Receipt(r) => Assessed {
                state: "exited",
                reason: None,
                receipt: Some(*r),
            },
            assess::ExitProof::EarlierBoot { boot_id } => Assessed {
                state: "exited",
                reason: Some(format!("boot {boot_id} has ended (no receipt needed)")),
                receipt: None,
            },
        },
        assess::Assessment::Unverified { reason } => Assessed {
            state: "unverified",
            reason: Some(reason_text(reason)),
            receipt: None,
        },
    }
}

/// `guardian gone without receipt`, or the reason's fields as compact JSON.
fn reason_text(reason: &impl serde::Serialize) -> String {
    match serde_json::to_value(reason) {
        Ok(serde_json::Value::String(s)) => s.replace('_', " "),
        Ok(serde_json::Value::Object(m)) if m.len() == 1 => {
            let (k, v) = m.into_iter().next().unwrap_or_default();
            format!("{}: {v}", k.replace('_', " "))
        }
        Ok(v) => v.to_string(),
        Err(e) => e.to_string(),
    }
}

/// The shared stop for one registration; the `stop --json` document. `state` is `exited` only
/// when a verified receipt proves it.
pub fn stop_one(rt: &Runtime, reg: &Registration, cause: StopCause) -> serde_json::Value {
    let opts = stop::StopOptions {
        cause: Some(cause),
        ..stop::StopOptions::default()
    };
    match stop::stop(rt, reg, &opts) {
        Ok(report) => {
            let a = flatten(&report.assessment);
            json!({
                "id": reg.id.to_string(),
                "outcome": report.outcome,
                "state": a.state,
                "reason": a.reason,
                "killed": report.killed,
                "signalled": report.signalled.len(),
                "timings_ms": {
                    "fence_wait": report.timings.fence_wait.as_secs_f64() * 1e3,
                    "quiesce": report.timings.quiesce.as_secs_f64() * 1e3,
                    "kill_to_exit": report.timings.kill_to_exit.as_secs_f64() * 1e3,
                    "total": report.timings.total.as_secs_f64() * 1e3,
                },
                "receipt": a.receipt.as_ref().map(cli::receipt_json),
            })
        }
        Err(e) => {
            let a = assess_one(rt, reg);
            json!({
                "id": reg.id.to_string(),
                "outcome": "failed",
                "state": a.state,
                "reason": error_chain(&e),
                "error": error_chain(&e),
            })
        }
    }
}

/// The recovery pass (A4); the `recover --json` document: a `summary` of actions and, per
/// registration, its `id`, the `action` taken, and the `state` and `reason` afterwards.
pub fn recover_all(rt: &Runtime) -> Result<serde_json::Value, ServiceError> {
    use recover::RecoveryAction as A;
    let report = recover::recover(rt, &recover::RecoverOptions::default())?;
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut entries = Vec::with_capacity(report.entries.len());
    for e in &report.entries {
        let (action, after) = match &e.action {
            A::Stopped { report } => ("stopped", flatten(&report.assessment)),
            A::Released { assessment } => ("released", flatten(assessment)),
            A::Kept { reason, .. } => (
                "kept",
                Assessed {
                    state: "unverified",
                    reason: Some(reason_text(reason)),
                    receipt: None,
                },
            ),
            A::StopFailed { error, assessment } => {
                let mut a = flatten(assessment);
                a.reason = Some(error_chain(error));
                ("stop_failed", a)
            }
            A::Owned => (
                "owned",
                match rt.read_registration(e.id) {
                    Ok(reg) => assess_one(rt, &reg),
                    Err(err) => corrupt(&err),
                },
            ),
            A::Corrupt { error } => ("corrupt", corrupt(error)),
        };
        *counts.entry(action).or_default() += 1;
        entries.push(json!({
            "id": e.id.to_string(),
            "action": action,
            "state": after.state,
            "reason": after.reason,
        }));
    }
    Ok(json!({ "summary": counts, "registrations": entries }))
}

fn corrupt(err: &RegistryError) -> Assessed {
    Assessed {
        state: "corrupt",
        reason: Some(error_chain(err)),
        receipt: None,
    }
}

/// One retention pass with the shared assessment as the evidence.
pub fn retire(
    rt: &Runtime,
    opts: retention::Options,
) -> Result<retention::Report, retention::RetentionError> {
    retention::retire(rt, opts, &|rt, reg| {
        let a = assess_one(rt, reg);
        if a.state == "exited" {
            retention::Evidence::Exited(a.receipt)
        } else {
            retention::Evidence::NotExited {
                state: a.state,
                reason: a.reason.unwrap_or_default(),
            }
        }
    })
}

/// The engine request for an API launch spec.
fn launch_request(spec: &LaunchSpec) -> Result<LaunchRequest, ServiceError> {
    let kind: Kind = spec
        .kind
        .parse()
        .map_err(|_| ServiceError::BadSpec(format!("unknown kind {:?}", spec.kind)))?;
    if spec.argv.is_empty() {
        return Err(ServiceError::BadSpec("empty command".into()));
    }
    let mut req = LaunchRequest::new(kind, spec.argv.iter().map(OsString::from));
    req.cwd = spec.cwd.as_ref().map(PathBuf::from);
    req.env = spec
        .env
        .iter()
        .map(|(k, v)| (OsString::from(k), Some(OsString::from(v))))
        .collect();
    req.label = spec.label.clone();
    req.owner = std::env::var("USER").unwrap_or_default();
    req.purpose = spec.meta.clone();
    req.completion_timeout = spec.timeout_ms.map(Duration::from_millis);
    req.idle_timeout = spec.idle_timeout_ms.map(Duration::from_millis);
    if spec.pty {
        req.pty = Some(WindowSize::default());
    }
    Ok(req)
}

/// Capacity admission for `agent` launches (C1–C4): `Ok` when a slot is free now or frees up
/// within the spec's `wait_for_slot_ms`, with the admission lock held: the caller keeps it until
/// the launch's registration is durable (C4).
fn admit(rt: &Runtime, spec: &LaunchSpec) -> Result<Option<crate::fence::Fence>, ServiceError> {
    if spec.kind != Kind::Agent.as_str() {
        return Ok(None);
    }
    let deadline = Instant::now() + Duration::from_millis(spec.wait_for_slot_ms.unwrap_or(0));
    let mut probe = cli::probe();
    loop {
        let lock =
            capacity::admission_lock(rt).map_err(|e| ServiceError::Capacity(e.to_string()))?;
        let report = cli::capacity_report(Some(rt), capacity::Policy::default(), &mut *probe)
            .map_err(|e| ServiceError::Capacity(e.to_string()))?;
        if report.free > 0 {
            return Ok(Some(lock));
        }
        drop(lock);
        if Instant::now() >= deadline {
            return Err(ServiceError::NoCapacity {
                slots: report.slots,
                live: report.live,
                unverified: report.unverified,
            });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `run` without `--detach`: launch in this process, stream, exit with the workload's code.
/// Forwards the operator's keys and window resizes to an interactive launch's terminal, on two
/// detached threads that end with the input (or the process).
fn forward_terminal(input: crate::launch::InputWriter) -> Result<(), CliError> {
    let keys = input.clone();
    std::thread::Builder::new()
        .name("refine-keys".into())
        .spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match rustix::io::read(io::stdin(), &mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if keys.write_input(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    Err(rustix::io::Errno::INTR) => {}
                    Err(_) => break,
                }
            }
        })
        .map_err(|source| ServiceError::Io {
            op: "start the key forwarder",
            source,
        })?;
    let mut winch =
        signal_hook::iterator::Signals::new([signal_hook::consts::SIGWINCH]).map_err(|source| {
            ServiceError::Io {
                op: "install the window-size handler",
                source,
            }
        })?;
    std::thread::Builder::new()
        .name("refine-winch".into())
        .spawn(move || {
            for _ in winch.forever() {
                if let Ok(size) = crate::pty::window_size(io::stdin().as_fd()) {
                    let _ = input.resize(size);
                }
            }
        })
        .map_err(|source| ServiceError::Io {
            op: "start the window-size forwarder",
            source,
        })?;
    Ok(())
}

pub fn run_embedded(rt: &Runtime, spec: LaunchSpec, json_out: bool) -> Result<i32, CliError> {
    let slot = admit(rt, &spec)?;
    let mut req = launch_request(&spec)?;
    if !json_out {
        req.on_output = Some(Box::new(|stream, bytes| {
            // Live streaming; a closed stdout of ours must not stop the capture.
            let _ = match stream {
                Stream::Stderr => io::stderr().write_all(bytes),
                _ => io::stdout()
                    .write_all(bytes)
                    .and_then(|()| io::stdout().flush()),
            };
        }));
    }
    // `run --pty` on a terminal is interactive: the workload's terminal takes the operator's
    // size, keys and resizes, and ours is raw meanwhile (restored when this function returns).
    let interactive = req.pty.is_some() && rustix::termios::isatty(io::stdin());
    if interactive {
        if let Ok(size) = crate::pty::window_size(io::stdin().as_fd()) {
            req.pty = Some(size);
        }
    }
    let sup = Supervisor::new(rt.clone());
    let handle = sup.launch(req).map_err(ServiceError::Launch)?;
    drop(slot);
    let _raw = if interactive {
        let raw =
            crate::pty::RawMode::enter(io::stdin().as_fd()).map_err(|e| ServiceError::Io {
                op: "put the terminal in raw mode",
                source: io::Error::other(e),
            })?;
        forward_terminal(handle.input_writer())?;
        Some(raw)
    } else {
        None
    };
    // SIGINT/SIGTERM/SIGHUP to `run` cancel the launch (the tree is stopped through the shared
    // stop); the workload's own process group does not see the terminal's SIGINT.
    let canceller = handle.canceller();
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ])
    .map_err(|e| ServiceError::Io {
        op: "install signal handlers",
        source: e,
    })?;
    let sig_handle = signals.handle();
    let forwarder = std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            canceller.cancel();
        }
    });
    let result = handle.wait().map_err(ServiceError::Launch);
    sig_handle.close();
    let _ = forwarder.join();
    let mut result = result?;
    let code = exit_code(&result);
    // The `stop` scope policy (quality) is ending the scope on the engine's watch thread: see it
    // through before this process exits, or the stop would die with us.
    let mut scope = scope_name(&result.scope);
    let mut stop_failure = result.stop_failure.as_ref().map(|f| error_chain(f));
    if result.scope == ScopeState::Stopping {
        scope = match result.scope_watch.wait(POLICY_STOP_WAIT) {
            Some(end) if end.receipt.is_some() => "exited",
            Some(end) => {
                stop_failure = end.stop_failure.as_ref().map(|f| error_chain(f));
                "unknown"
            }
            None => "stopping",
        };
    }
    if json_out {
        let mut doc = run_doc(&result);
        doc["scope"] = json!(scope);
        doc["stop_failure"] = json!(stop_failure);
        cli::print_run_result(&doc)?;
    } else if let Some(f) = stop_failure {
        tracing::warn!(id = %result.id, error = %f, "scope stop failed");
        eprintln!(
            "refine-supervisor: warning: stopping the scope of {} failed: {f}",
            result.id
        );
    }
    Ok(code)
}

/// How long `run` waits for the `stop` scope policy to prove the scope's end.
const POLICY_STOP_WAIT: Duration = Duration::from_secs(10);

fn scope_name(s: &ScopeState) -> &'static str {
    match s {
        ScopeState::Exited(_) => "exited",
        ScopeState::Live => "live",
        ScopeState::Stopping => "stopping",
        ScopeState::Unknown => "unknown",
    }
}

/// The shell's view of a launch: the workload's code, 128+signal, 127/126 for a spawn failure.
fn exit_code(r: &LaunchResult) -> i32 {
    match (r.outcome, r.status.shell_code()) {
        (_, Some(c)) => c,
        (Outcome::SpawnFailed { errno }, None) if errno == libc::ENOENT => 127,
        (Outcome::SpawnFailed { .. }, None) => 126,
        _ => 1,
    }
}

/// The `run --json` document: id, outcome, exit_code or signal, stdout/stderr {complete, path}.
fn run_doc(r: &LaunchResult) -> serde_json::Value {
    let (exit_code, signal) = match r.status {
        WorkloadStatus::Exited(c) => (Some(c), None),
        WorkloadStatus::Signaled(s) => (None, Some(s)),
        _ => (None, None),
    };
    let stream = |s: Stream| match r.capture.stream(s) {
        Some(c) => json!({
            "complete": c.state == StreamState::Eof,
            "path": c.artifact,
            "bytes": c.artifact_bytes,
            "end": match c.state {
                StreamState::Eof => "eof".to_owned(),
                StreamState::Failed(f) => format!("capture failure: {f}"),
                StreamState::Incomplete(i) => format!("incomplete: {i}"),
            },
        }),
        None => json!({ "complete": false, "path": null, "bytes": 0, "end": "not captured" }),
    };
    json!({
        "id": r.id.to_string(),
        "outcome": r.outcome.name(),
        "errno": match r.outcome { Outcome::SpawnFailed { errno } => Some(errno), _ => None },
        "exit_code": exit_code,
        "signal": signal,
        "status": match r.status {
            WorkloadStatus::Exited(_) => "exited",
            WorkloadStatus::Signaled(_) => "signaled",
            WorkloadStatus::NeverStarted => "never_started",
            WorkloadStatus::Unknown => "unknown",
        },
        "stdout": stream(Stream::Stdout),
        "stderr": stream(Stream::Stderr),
        "scope": scope_name(&r.scope),
        "capture_receipt": r.capture_receipt,
        "stop_failure": r.stop_failure.as_ref().map(|f| error_chain(f)),
    })
}

/// Launches for the service: the engine keeps running on its own thread; the handle is not
/// awaited (the record and the receipt carry the result), so the service holds no per-launch
/// state beyond the id.
fn launch_detached(sup: &Supervisor, spec: LaunchSpec) -> Result<RegistrationId, Response> {
    let rt = sup.runtime();
    let slot = admit(rt, &spec).map_err(|e| match e {
        ServiceError::NoCapacity { .. } => Response::err(ErrorKind::NoCapacity, e.to_string()),
        other => Response::err(ErrorKind::BadRequest, other.to_string()),
    })?;
    let mut req =
        launch_request(&spec).map_err(|e| Response::err(ErrorKind::BadRequest, e.to_string()))?;
    req.rlimits.extend(original_nofile());
    let handle = sup
        .launch(req)
        .map_err(|e| Response::err(ErrorKind::LaunchFailed, error_chain(&e)))?;
    drop(slot);
    Ok(handle.id())
}

// ---------------------------------------------------------------------------------------------
// Client.

/// Sends one request to the port's service and returns its reply.
pub fn request(rt: &Runtime, req: &Request) -> Result<Reply, ServiceError> {
    let socket = rt.socket_path();
    let mut stream =
        StdUnixStream::connect(&socket).map_err(|source| ServiceError::NotRunning {
            port: rt.port(),
            socket: socket.clone(),
            source,
        })?;
    stream
        .write_all(&api::encode_request(req))
        .map_err(io_err("send"))?;
    let mut line = Vec::new();
    BufReader::new(stream)
        .take(MAX_MESSAGE as u64 + 1)
        .read_until(b'\n', &mut line)
        .map_err(io_err("receive"))?;
    let resp = api::decode_response(&line).map_err(ServiceError::Decode)?;
    match (resp.ok, resp.result, resp.error) {
        (true, Some(r), _) => Ok(r),
        (_, _, Some(e)) => Err(ServiceError::Refused {
            kind: e.kind,
            message: e.message,
        }),
        _ => Err(ServiceError::Unexpected("empty response".into())),
    }
}

// ---------------------------------------------------------------------------------------------
// Service.

struct State {
    rt: Runtime,
    /// One engine for the service's lifetime: the login environment is captured once (S8).
    sup: Supervisor,
    /// Registrations this service launched (it enforces their deadlines through their handles).
    launched: Mutex<HashSet<RegistrationId>>,
    /// When retention last ran (it runs at most every [`RETENTION_EVERY`]).
    last_retention: Mutex<Option<Instant>>,
}

/// Runs the service in the foreground until SIGTERM or SIGINT.
pub fn serve(
    home: &Path,
    port: u16,
    maintenance_every: Duration,
    retain: Duration,
) -> Result<(), ServiceError> {
    let rt = Runtime::open(home, port)?;
    let lock = rt.dir().join("locks").join("service.lock");
    let _held = fence::try_acquire(&lock)?.ok_or_else(|| ServiceError::AlreadyRunning {
        port,
        lock: lock.clone(),
    })?;
    init_tracing(&rt)?;
    tracing::info!(port, home = %home.display(), pid = std::process::id(), "service starting");

    let t = std::time::Instant::now();
    match recover_all(&rt) {
        Ok(doc) => {
            let elapsed_ms = t.elapsed().as_millis() as u64;
            tracing::info!(elapsed_ms, summary = %doc["summary"], "recovery at start");
            for e in doc["registrations"].as_array().into_iter().flatten() {
                if e["action"] != "released" {
                    tracing::info!(entry = %e, "recovery");
                }
            }
        }
        Err(e) => tracing::error!(error = %error_chain(&e), "recovery at start failed"),
    }

    raise_nofile();
    let state = Arc::new(State {
        sup: Supervisor::new(rt.clone()),
        rt,
        launched: Mutex::new(HashSet::new()),
        last_retention: Mutex::new(None),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64)
        .enable_all()
        .build()
        .map_err(io_err("start the async runtime"))?;
    let result = runtime.block_on(serve_async(state.clone(), maintenance_every, retain));
    // Guardians are not waited for: they outlive the service by design.
    runtime.shutdown_background();
    let _ = std::fs::remove_file(state.rt.socket_path());
    tracing::info!("service stopped");
    result
}

/// The soft `RLIMIT_NOFILE` this process started with, kept for workloads (G8).
static ORIGINAL_NOFILE: std::sync::OnceLock<rustix::process::Rlimit> = std::sync::OnceLock::new();

/// The service holds a few descriptors per launch (channel, capture pipes, control): raise the
/// soft descriptor limit to the hard one. Workloads get the original back ([`original_nofile`]).
fn raise_nofile() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let orig = getrlimit(Resource::Nofile);
    let _ = ORIGINAL_NOFILE.set(orig);
    if orig.current != orig.maximum {
        let raised = Rlimit {
            current: orig.maximum,
            maximum: orig.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!(error = %e, "cannot raise the descriptor limit");
        }
    }
}

/// The original descriptor limit as a launch rlimit, when [`raise_nofile`] changed it.
fn original_nofile() -> Option<refine_protocol::Rlimit> {
    let orig = ORIGINAL_NOFILE.get()?;
    let now = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    (now.current != orig.current).then(|| refine_protocol::Rlimit {
        resource: libc::RLIMIT_NOFILE,
        soft: orig.current.unwrap_or(u64::MAX),
        hard: orig.maximum.unwrap_or(u64::MAX),
    })
}

fn init_tracing(rt: &Runtime) -> Result<(), ServiceError> {
    let path = rt.dir().join("service.log");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(io_err("open the service log"))?;
    // A second init (tests calling serve twice in one process) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_writer(Mutex::new(file))
        .with_ansi(false)
        .try_init();
    Ok(())
}

/// Binds `path` with mode 0600 from the start (umask), replacing a stale socket file: we hold the
/// service lock, so no live service owns it.
fn bind_socket(path: &Path) -> Result<tokio::net::UnixListener, ServiceError> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("remove a stale socket")(e)),
    }
    let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o177));
    let bound = std::os::unix::net::UnixListener::bind(path);
    rustix::process::umask(old);
    let listener = bound.map_err(io_err("bind the service socket"))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io_err("chmod the service socket"))?;
    listener
        .set_nonblocking(true)
        .map_err(io_err("configure the service socket"))?;
    tokio::net::UnixListener::from_std(listener).map_err(io_err("register the service socket"))
}

async fn serve_async(
    state: Arc<State>,
    every: Duration,
    retain: Duration,
) -> Result<(), ServiceError> {
    use tokio::signal::unix::{signal, SignalKind};
    let listener = bind_socket(&state.rt.socket_path())?;
    let mut term = signal(SignalKind::terminate()).map_err(io_err("install SIGTERM handler"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(io_err("install SIGINT handler"))?;
    tracing::info!(socket = %state.rt.socket_path().display(), "listening");

    let maint = {
        let state = state.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let st = state.clone();
                let _ = tokio::task::spawn_blocking(move || maintenance(&st, retain)).await;
            }
        })
    };

    loop {
        tokio::select! {
            _ = term.recv() => { tracing::info!("SIGTERM"); break; }
            _ = int.recv() => { tracing::info!("SIGINT"); break; }
            conn = listener.accept() => match conn {
                Ok((stream, _)) => {
                    let st = state.clone();
                    tokio::spawn(async move {
                        if let Err(e) = handle_conn(st, stream).await {
                            tracing::warn!(error = %e, "connection failed");
                        }
                    });
                }
                Err(e) => tracing::warn!(error = %e, "accept failed"),
            }
        }
    }
    maint.abort();
    Ok(())
}

async fn handle_conn(state: Arc<State>, stream: tokio::net::UnixStream) -> io::Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let cred = stream.peer_cred()?;
    let me = rustix::process::getuid().as_raw();
    let (rd, mut wr) = stream.into_split();
    if cred.uid() != me && cred.uid() != 0 {
        tracing::warn!(uid = cred.uid(), "refused a peer with another uid");
        let resp = Response::err(ErrorKind::BadRequest, "permission denied: peer uid differs");
        wr.write_all(&api::encode_response(&resp)).await?;
        return Ok(());
    }
    let mut line = Vec::new();
    tokio::io::BufReader::new(rd)
        .take(MAX_MESSAGE as u64 + 1)
        .read_until(b'\n', &mut line)
        .await?;
    if line.is_empty() {
        // A client that connected and closed (a readiness probe): nothing to answer.
        return Ok(());
    }
    let resp = match api::decode_request(&line) {
        Err(e) => Response::err(ErrorKind::BadRequest, format!("bad request: {e}")),
        Ok(req) => {
            let st = state.clone();
            tokio::task::spawn_blocking(move || handle(&st, req))
                .await
                .unwrap_or_else(|e| Response::err(ErrorKind::Internal, e.to_string()))
        }
    };
    wr.write_all(&api::encode_response(&resp)).await?;
    wr.shutdown().await
}

fn handle(state: &State, req: Request) -> Response {
    let rt = &state.rt;
    let parse = |id: &str| {
        RegistrationId::parse(id).ok_or_else(|| {
            Response::err(
                ErrorKind::BadRequest,
                format!("invalid registration id {id:?}"),
            )
        })
    };
    let result = match req {
        Request::Launch(spec) => launch_detached(&state.sup, spec).map(|id| {
            if let Ok(mut l) = state.launched.lock() {
                l.insert(id);
            }
            tracing::info!(%id, "launched");
            Reply::Launched { id: id.to_string() }
        }),
        Request::List { all } => cli::list_views(rt, all)
            .map(Reply::List)
            .map_err(registry_response),
        Request::Show { id } => parse(&id).and_then(|id| {
            cli::show_doc(rt, id).map(Reply::Show).map_err(|e| match e {
                CliError::Registry(r) => registry_response(r),
                other => Response::err(ErrorKind::Internal, other.to_string()),
            })
        }),
        Request::Stop { id } => parse(&id).and_then(|id| {
            let reg = rt.read_registration(id).map_err(registry_response)?;
            let doc = stop_one(rt, &reg, StopCause::Operator);
            tracing::info!(%id, result = %doc, "stop");
            Ok(Reply::Stop(doc))
        }),
    };
    result.map(Response::ok).unwrap_or_else(|e| e)
}

fn registry_response(e: RegistryError) -> Response {
    let kind = match e {
        RegistryError::NotFound(_) => ErrorKind::NotFound,
        RegistryError::Corrupt { .. } => ErrorKind::Corrupt,
        _ => ErrorKind::Internal,
    };
    Response::err(kind, e.to_string())
}

/// Retention runs at start and then at most this often (its limit is days, not seconds).
const RETENTION_EVERY: Duration = Duration::from_secs(600);

/// One maintenance pass: deadlines of registrations this service did not launch, retention,
/// capacity sampling. Every failure is logged and the loop goes on.
fn maintenance(state: &State, retain: Duration) {
    let rt = &state.rt;
    let ours = state.launched.lock().map(|l| l.clone()).unwrap_or_default();
    if let Ok(ids) = rt.list_ids() {
        for id in ids {
            if ours.contains(&id) {
                continue;
            }
            let Ok(reg) = rt.read_registration(id) else {
                continue;
            };
            if let Some(cause) = deadline_passed(rt, &reg) {
                if assess_one(rt, &reg).state == "live" {
                    let doc = stop_one(rt, &reg, cause);
                    tracing::info!(%id, ?cause, result = %doc, "deadline stop");
                }
            }
        }
    }
    let due = state
        .last_retention
        .lock()
        .map(|mut last| {
            let due = last.is_none_or(|t| t.elapsed() >= RETENTION_EVERY);
            if due {
                *last = Some(Instant::now());
            }
            due
        })
        .unwrap_or(false);
    if !due {
        sample_capacity(rt);
        return;
    }
    match retire(
        rt,
        retention::Options {
            older_than: retain,
            dry_run: false,
        },
    ) {
        Ok(r) if r.deleted_files > 0 => {
            tracing::info!(
                files = r.deleted_files,
                bytes = r.deleted_bytes,
                "retention"
            )
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "retention failed"),
    }
    sample_capacity(rt);
}

fn sample_capacity(rt: &Runtime) {
    let mut probe = cli::probe();
    match cli::capacity_report(Some(rt), crate::capacity::Policy::default(), &mut *probe) {
        Ok(c) => tracing::debug!(
            slots = c.slots,
            live = c.live,
            unverified = c.unverified,
            free = c.free,
            "capacity"
        ),
        Err(e) => tracing::warn!(error = %e, "capacity sampling failed"),
    }
}

/// Which deadline of `reg` has passed, if any: completion from the original start; idle from the
/// last artifact write (falling back to the start).
fn deadline_passed(rt: &Runtime, reg: &Registration) -> Option<StopCause> {
    let now = crate::deadline::unix_ms();
    if let Some(t) = reg.limits.completion_timeout_ms {
        if now >= reg.started_at_unix_ms.saturating_add(t) {
            return Some(StopCause::CompletionDeadline);
        }
    }
    if let Some(t) = reg.limits.idle_timeout_ms {
        let mut last = reg.started_at_unix_ms;
        for p in [&reg.stdout_path, &reg.stderr_path] {
            if let Some(ms) = std::fs::metadata(p)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            {
                last = last.max(ms.as_millis() as u64);
            }
        }
        let _ = rt;
        if now >= last.saturating_add(t) {
            return Some(StopCause::IdleDeadline);
        }
    }
    None
}
