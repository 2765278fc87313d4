//! The per-port service (`serve`, SPEC O2).
//!
//! `serve` holds `run/P/locks/service.lock` (an `flock`, so one service per port; a second one
//! fails with a clear message and a SIGKILLed one never wedges it), listens on the Unix socket
//! `run/P/supervisor.sock` (created with mode 0600; every connection's peer credentials are
//! checked: same uid or root), and only then runs the recovery pass, in the background (bind
//! first: the socket accepts within milliseconds of a restart, whatever recovery has to stop).
//! Requests during recovery are answered from the records as they are: `ps` and `show` give
//! each scope's state by the one assessment (an orphan not stopped yet is `live`), and a stop or
//! recovery of the same scope are serialized by its registration lock and the stop fence. Requests and responses are JSON lines defined
//! in [`refine_protocol::api`]. A maintenance loop enforces the deadlines of registrations this
//! service did not launch (through the one shared stop), settles the open index and samples
//! capacity — all over the open index only, so a pass costs O(open registrations), not
//! O(history) (F1) — and, every [`RETENTION_EVERY`], runs housekeeping over the history:
//! retention and forgetting (R4). Logs go through `tracing` to `run/P/service.log`.
//!
//! # Shutdown (SPEC W8)
//! SIGTERM/SIGINT end the service and its own launches, like `docker stop` on each: the service
//! stops accepting, sends SIGTERM to each launch's process group (the shared stop's grace
//! signal), waits up to `--shutdown-grace` (default 10 s) for their scopes to end, ends the rest
//! through the shared stop, and waits (bounded) for their engines to record their results. Every
//! one ends `exited` with the guardian's receipt. A service that is SIGKILLed cannot do this: its
//! launches ask for no parent-death signal, so they keep running, `live`, and the next service's
//! recovery pass (or `recover`) stops them.
//!
//! # Caveats
//! Requests are handled on tokio's blocking pool: the engine, the stop and the assessment are
//! blocking by design, and the supervisor never reaps anything but its own guardians by pid.

use std::collections::HashSet;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use refine_protocol::api::{self, ErrorKind, LaunchAsk, Reply, Request, Response, MAX_MESSAGE};
use refine_protocol::{Registration, RegistrationId, StopCause};

use super::docs::{json_line, to_value, RecoverAction, State, StopDetail, StopDoc};
use super::error::{io_err, CliError, ServiceError};
use super::metrics::{self, Metrics, RequestResult};
use super::ops::{self, admit, assess_one, launch_request, recover_all, retire, stop_one};
use crate::deadline::{expired_on_record, Expired};
use crate::error_chain;
use crate::fence;
use crate::launch::{LaunchHandle, Supervisor};
use crate::open_index::{self, Settled};
use crate::registry::{RegistryError, Runtime};
use crate::signal::Signal;
use crate::stall::{self, sample::Watcher, StallConfig};
use crate::stop;
use crate::{assess, forget, retention};
/// What the maintenance loop's housekeeping keeps and forgets.
#[derive(Debug, Clone, Copy)]
pub struct Housekeeping {
    /// Retention's age limit for artifacts and capture receipts.
    pub retain: Duration,
    /// Forgetting's horizon for whole exited registrations.
    pub forget_after: Duration,
}

/// Launches for the service: the engine keeps running in the shared loop; the handle is not
/// awaited (the record and the receipt carry the result), so the service holds no per-launch
/// state beyond the id.
fn launch_detached(sup: &Supervisor, spec: LaunchAsk) -> Result<LaunchHandle, Response> {
    let rt = sup.runtime();
    let slot = admit(rt, &spec).map_err(|e| match e {
        ServiceError::NoCapacity { .. } => Response::err(ErrorKind::NoCapacity, e.to_string()),
        ServiceError::LabelHeld { .. } => Response::err(ErrorKind::LabelHeld, e.to_string()),
        other => Response::err(ErrorKind::BadRequest, other.to_string()),
    })?;
    let mut req =
        launch_request(&spec).map_err(|e| Response::err(ErrorKind::BadRequest, e.to_string()))?;
    // The service ends its launches itself when it stops (W8); when it is killed, they outlive
    // it until recovery rather than die with no receipt reader.
    req.pdeath_signal = None;
    let handle = sup
        .launch(req)
        .map_err(|e| Response::err(ErrorKind::LaunchFailed, error_chain(&e)))?;
    drop(slot);
    // The caller learns a spawn failure now rather than an id of something that never ran.
    if let Some(Err(errno)) = handle.wait_spawned(SPAWN_WORD_WAIT) {
        return Err(Response::ok(Reply::SpawnFailed {
            id: handle.id().to_string(),
            errno,
        }));
    }
    Ok(handle)
}

/// How long a detached launch waits for the guardian's word on the `execve` (it comes within
/// milliseconds of *start*).
const SPAWN_WORD_WAIT: Duration = Duration::from_secs(5);

/// How a launch request ended, for the metrics.
fn request_result(r: &Result<LaunchHandle, Response>) -> RequestResult {
    let kind = match r {
        Ok(_) => return RequestResult::Started,
        // A reply without an error: the spawn failed (`Reply::SpawnFailed`).
        Err(resp) => match &resp.error {
            None => return RequestResult::Failed,
            Some(e) => e.kind,
        },
    };
    match kind {
        ErrorKind::NoCapacity => RequestResult::NoCapacity,
        ErrorKind::LaunchFailed => RequestResult::Failed,
        _ => RequestResult::Rejected,
    }
}

// ---------------------------------------------------------------------------------------------
// Service.

struct Service {
    rt: Runtime,
    /// One engine for the service's lifetime: the login environment is captured once (S8).
    sup: Supervisor,
    /// Registrations this service launched (it enforces their deadlines through their handles).
    launched: Mutex<HashSet<RegistrationId>>,
    /// The engines of launches whose workload still runs (finished ones are dropped by the
    /// maintenance pass); joined at shutdown so their results are recorded.
    engines: Mutex<Vec<crate::launch::EngineThread>>,
    /// When retention last ran (it runs at most every [`RETENTION_EVERY`]).
    last_retention: Mutex<Option<Instant>>,
    /// Counters and gauges for `--metrics` (kept whether or not they are served).
    metrics: Arc<Metrics>,
}

impl Service {
    /// The shared stop, observed by the metrics when it returned a report.
    fn stop(
        &self,
        reg: &Registration,
        cause: StopCause,
        grace: Option<(Duration, Signal)>,
    ) -> StopDoc {
        let doc = stop_one(&self.rt, reg, cause, grace);
        if let StopDetail::Done { timings_ms, .. } = &doc.detail {
            let name = match cause {
                StopCause::Operator => "operator",
                StopCause::CompletionDeadline => "completion_deadline",
                StopCause::IdleDeadline => "idle_deadline",
            };
            let took = Duration::from_secs_f64(timings_ms.total.max(0.0) / 1e3);
            self.metrics.stopped(name, took);
        }
        doc
    }
}

/// How the service writes its log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per line.
    Json,
}

/// How `serve` runs: its loops' periods, the stall watch, the metrics address, the shutdown
/// grace and the log format (the `serve` flags).
pub struct ServeConfig {
    pub maintenance_every: Duration,
    pub keep: Housekeeping,
    pub watch: StallConfig,
    pub metrics_addr: Option<SocketAddr>,
    pub shutdown_grace: Duration,
    pub log_format: LogFormat,
}

/// Runs the service in the foreground until SIGTERM or SIGINT, then ends its launches (see the
/// module docs: [`shutdown`]).
pub fn serve(home: &Path, port: u16, config: ServeConfig) -> Result<(), ServiceError> {
    let ServeConfig {
        maintenance_every,
        keep,
        watch,
        metrics_addr,
        shutdown_grace,
        log_format,
    } = config;
    let rt = Runtime::open(home, port)?;
    let lock = rt.service_lock_path();
    let _held = fence::try_acquire(&lock)?.ok_or_else(|| ServiceError::AlreadyRunning {
        port,
        lock: lock.clone(),
    })?;
    init_tracing(&rt, log_format)?;
    tracing::info!(port, home = %home.display(), pid = std::process::id(), "service starting");

    crate::limits::raise_nofile_ceiling();
    let metrics = Arc::new(Metrics::new());
    // One loop drives the engines of all the service's launches: a fixed number of threads
    // for any number of detached scopes (F1).
    let shared = crate::launch::SharedLoop::start().map_err(|e| ServiceError::Io {
        op: "start the shared event loop",
        source: std::io::Error::other(error_chain(&e)),
    })?;
    let state = Arc::new(Service {
        sup: Supervisor::new(rt.clone())
            .with_shared_loop(shared)
            .with_result_hook(metrics.result_hook())
            .with_receipt_hook(metrics.receipt_hook()),
        rt,
        launched: Mutex::new(HashSet::new()),
        engines: Mutex::new(Vec::new()),
        last_retention: Mutex::new(None),
        metrics,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64)
        .enable_all()
        .build()
        .map_err(io_err("start the async runtime"))?;
    let result = runtime.block_on(serve_async(
        state.clone(),
        maintenance_every,
        keep,
        watch,
        metrics_addr,
    ));
    shutdown(&state, shutdown_grace);
    runtime.shutdown_background();
    let _ = std::fs::remove_file(state.rt.socket_path());
    tracing::info!("service stopped");
    result
}

/// The service log: `run/P/service.log`, filtered by `RUST_LOG` (default `info`), as text or
/// JSON lines.
fn init_tracing(rt: &Runtime, format: LogFormat) -> Result<(), ServiceError> {
    let path = rt.service_log_path();
    let file =
        crate::durable::open_private(std::fs::OpenOptions::new().create(true).append(true), &path)
            .map_err(io_err("open the service log"))?;
    // A second init (tests calling serve twice in one process) keeps the first subscriber.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Mutex::new(file))
        .with_ansi(false);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
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
    state: Arc<Service>,
    every: Duration,
    keep: Housekeeping,
    watch: StallConfig,
    metrics_addr: Option<SocketAddr>,
) -> Result<(), ServiceError> {
    use tokio::signal::unix::{signal, SignalKind};
    let listener = bind_socket(&state.rt.socket_path())?;
    let exposition = match metrics_addr {
        Some(addr) => {
            let l = metrics::bind(addr)
                .await
                .map_err(|source| ServiceError::MetricsBind { addr, source })?;
            tracing::info!(addr = %addr, "metrics on /metrics");
            let (m, rt) = (state.metrics.clone(), state.rt.clone());
            Some(tokio::spawn(async move {
                if let Err(e) = metrics::serve(l, m, rt).await {
                    tracing::error!(error = %e, "metrics listener failed");
                }
            }))
        }
        None => None,
    };
    let mut term = signal(SignalKind::terminate()).map_err(io_err("install SIGTERM handler"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(io_err("install SIGINT handler"))?;
    tracing::info!(socket = %state.rt.socket_path().display(), "listening");
    // Recovery runs behind the socket (bind first): requests meanwhile are answered from the
    // records as they are, each scope's state decided by the one assessment, and the
    // registration locks serialize recovery with a stop or a launch of the same scope.
    let recovery = {
        let rt = state.rt.clone();
        tokio::task::spawn_blocking(move || recover_at_start(&rt))
    };

    let maint = {
        let state = state.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let st = state.clone();
                let _ = tokio::task::spawn_blocking(move || maintenance(&st, keep)).await;
            }
        })
    };

    let stall = {
        let rt = state.rt.clone();
        let metrics = state.metrics.clone();
        tokio::spawn(async move {
            let watcher = Arc::new(Mutex::new(Watcher::new(watch)));
            let mut tick = tokio::time::interval(watch.period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let (rt, watcher, metrics) = (rt.clone(), watcher.clone(), metrics.clone());
                let _ = tokio::task::spawn_blocking(move || {
                    let Ok(mut w) = watcher.lock() else { return };
                    let events = w.pass(
                        &rt,
                        &crate::assess::KERNEL_BOOT,
                        stall::sample::boottime(),
                        crate::deadline::unix_ms(),
                    );
                    for (id, event) in events {
                        log_stall(id, &event);
                    }
                    let (stalled, silent) = w.counts();
                    metrics.set_watch(stalled, silent);
                })
                .await;
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
    stall.abort();
    if !recovery.is_finished() {
        tracing::info!("recovery at start still going; the next start resumes it");
    }
    if let Some(task) = exposition {
        task.abort();
    }
    Ok(())
}

/// The recovery pass of a service start (the one `recover` runs), logged: a summary line, and
/// one line per registration it did not simply release.
fn recover_at_start(rt: &Runtime) {
    let t = Instant::now();
    match recover_all(rt) {
        Ok(doc) => {
            let elapsed_ms = t.elapsed().as_millis() as u64;
            tracing::info!(elapsed_ms, summary = %json_line(&doc.summary), "recovery at start");
            for e in doc
                .registrations
                .iter()
                .filter(|e| e.action != RecoverAction::Released)
            {
                tracing::info!(entry = %json_line(e), "recovery");
            }
        }
        Err(e) => tracing::error!(error = %error_chain(&e), "recovery at start failed"),
    }
}

/// One line in the service log when a stall watch incident begins, and one when it clears.
fn log_stall(id: RegistrationId, event: &stall::Event) {
    match event {
        stall::Event::Began(i) => tracing::warn!(
            %id,
            signal = stall::signal_name(i.signal),
            samples = i.samples,
            cpu_percent = f64::from(i.cpu_permille) / 10.0,
            last_write = %super::docs::utc(i.last_write_unix_ms),
            "stall watch: began"
        ),
        stall::Event::Ended { incident, reason } => tracing::info!(
            %id,
            signal = stall::signal_name(incident.signal),
            since = %super::docs::utc(incident.since_unix_ms),
            samples = incident.samples,
            reason = stall::cleared_name(*reason),
            "stall watch: cleared"
        ),
    }
}

async fn handle_conn(state: Arc<Service>, stream: tokio::net::UnixStream) -> io::Result<()> {
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
    let resp = match api::decode_request_explained(&line) {
        Err(why) => Response::err(ErrorKind::BadRequest, format!("bad request: {why}")),
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

fn handle(state: &Service, req: Request) -> Response {
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
        Request::Launch(spec) => {
            let launched = launch_detached(&state.sup, spec);
            state.metrics.request(request_result(&launched));
            launched
        }
        .map(|handle| {
            let id = handle.id();
            if let Ok(mut l) = state.launched.lock() {
                l.insert(id);
            }
            if let Ok(mut e) = state.engines.lock() {
                e.retain(|h| !h.is_finished());
                // Only the engine: a handle would keep the control channel open (a descriptor
                // per detached scope for nothing).
                e.push(handle.into_engine());
            }
            tracing::info!(%id, "launched");
            Reply::Launched { id: id.to_string() }
        }),
        Request::List { all } => ops::list_views(rt, all)
            .map(Reply::List)
            .map_err(registry_response),
        Request::Show { id } => parse(&id).and_then(|id| {
            ops::show_doc(rt, id)
                .map(|doc| Reply::Show(to_value(&doc)))
                .map_err(|e| match e {
                    CliError::Registry(r) => registry_response(r),
                    other => Response::err(ErrorKind::Internal, other.to_string()),
                })
        }),
        Request::Stop { id, grace, signal } => parse(&id).and_then(|id| {
            let grace = match (grace, signal) {
                (None, None) => None,
                (None, Some(_)) => {
                    return Err(Response::err(
                        ErrorKind::BadRequest,
                        "`signal` is the grace's signal: it needs `grace_ms`".to_owned(),
                    ))
                }
                (Some(g), sig) => Some((
                    g,
                    match sig {
                        None => Signal::TERM,
                        Some(text) => crate::signal::parse(&text)
                            .map_err(|e| Response::err(ErrorKind::BadRequest, e))?,
                    },
                )),
            };
            let reg = rt.read_registration(id).map_err(registry_response)?;
            let doc = state.stop(&reg, StopCause::Operator, grace);
            tracing::info!(%id, result = %json_line(&doc), "stop");
            Ok(Reply::Stop(to_value(&doc)))
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

/// How long shutdown waits for its launches' engines to record their results after the stops.
const ENGINES_AT_SHUTDOWN: Duration = Duration::from_secs(10);

/// W8: SIGTERM to every live launch of this service, the grace, then the shared stop for the
/// rest; then the engines are joined (bounded) so each result is on disk.
fn shutdown(state: &Service, grace: Duration) {
    let rt = &state.rt;
    let ids: Vec<RegistrationId> = state
        .launched
        .lock()
        .map(|l| l.iter().copied().collect())
        .unwrap_or_default();
    let live: Vec<Registration> = ids
        .into_iter()
        .filter_map(|id| rt.read_registration(id).ok())
        .filter(|reg| assess_one(rt, reg).state == State::Live)
        .collect();
    tracing::info!(
        launches = live.len(),
        grace_ms = grace.as_millis() as u64,
        "shutdown: SIGTERM to the service's launches"
    );
    let polite = stop::StopOptions {
        cause: Some(StopCause::Operator),
        ..stop::StopOptions::default()
    };
    for reg in &live {
        if let Err(e) = stop::signal_politely(rt, reg, Signal::TERM, &polite) {
            tracing::warn!(id = %reg.id, error = %error_chain(&e), "shutdown: cannot send SIGTERM");
        }
    }
    let end = Instant::now() + grace;
    let mut left = live;
    loop {
        left.retain(|reg| assess_one(rt, reg).state == State::Live);
        if left.is_empty() || Instant::now() >= end {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for reg in &left {
        let doc = stop_one(rt, reg, StopCause::Operator, None);
        tracing::info!(id = %reg.id, result = %json_line(&doc), "shutdown: stopped after the grace");
    }
    let engines = std::mem::take(&mut *state.engines.lock().unwrap_or_else(|p| p.into_inner()));
    let (tx, rx) = std::sync::mpsc::channel();
    let joiner = std::thread::spawn(move || {
        for h in engines {
            let _ = h.wait();
        }
        let _ = tx.send(());
    });
    if rx.recv_timeout(ENGINES_AT_SHUTDOWN).is_ok() {
        let _ = joiner.join();
    } else {
        tracing::warn!("shutdown: launch engines still running; leaving them");
    }
    tracing::info!(
        stopped_after_grace = left.len(),
        "shutdown: the service's launches ended"
    );
}

/// Retention runs at start and then at most this often (its limit is days, not seconds).
const RETENTION_EVERY: Duration = Duration::from_secs(600);

/// One maintenance pass over the open index (O(open), F1): deadlines of registrations this
/// service did not launch, settling what the assessment proves exited (under each lock), and
/// capacity sampling; then, when due, housekeeping over the history. Every failure is logged
/// and the loop goes on.
fn maintenance(state: &Service, keep: Housekeeping) {
    let rt = &state.rt;
    let started = Instant::now();
    let ours = state.launched.lock().map(|l| l.clone()).unwrap_or_default();
    let (mut open, mut settled) = (0usize, 0usize);
    if let Ok(ids) = rt.open_ids() {
        for id in ids {
            open += 1;
            // This service's own launches: their engines enforce deadlines and settle.
            if ours.contains(&id) {
                continue;
            }
            let reg = match rt.read_registration(id) {
                Ok(reg) => reg,
                // A marker whose launch may still be writing its record, or died before it.
                Err(RegistryError::NotFound(_)) => {
                    if let Ok(Some(Settled::Unwritten { dropped: true })) =
                        open_index::settle_if_free(rt, id, &assess::KERNEL_BOOT)
                    {
                        settled += 1;
                    }
                    continue;
                }
                Err(_) => continue,
            };
            match assess_one(rt, &reg).state {
                State::Live => {
                    if let Some(cause) = deadline_passed(&reg) {
                        let grace = reg.limits.kill_after_ms.map(Duration::from_millis);
                        let doc = state.stop(&reg, cause, grace.map(|g| (g, Signal::TERM)));
                        tracing::info!(%id, ?cause, result = %json_line(&doc), "deadline stop");
                    }
                }
                State::Exited => {
                    if let Ok(Some(Settled::Closed(_))) =
                        open_index::settle_if_free(rt, id, &assess::KERNEL_BOOT)
                    {
                        settled += 1;
                    }
                }
                State::Unverified | State::Corrupt => {}
            }
        }
    }
    sample_capacity(rt);
    let elapsed_us = started.elapsed().as_micros() as u64;
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
        tracing::debug!(elapsed_us, open, settled, "maintenance pass");
        return;
    }
    // Logged at info with housekeeping (at start, then every RETENTION_EVERY), not every pass.
    tracing::info!(elapsed_us, open, settled, "maintenance pass");
    housekeeping(state, keep);
}

/// Retention and forgetting over the whole history (R1–R4); the only O(history) part of the
/// service, run at start and then every [`RETENTION_EVERY`].
fn housekeeping(state: &Service, keep: Housekeeping) {
    let rt = &state.rt;
    let started = Instant::now();
    match retire(
        rt,
        retention::Options {
            older_than: keep.retain,
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
    let opts = forget::Options {
        after: keep.forget_after,
        dry_run: false,
    };
    match forget::forget(rt, opts, &assess::KERNEL_BOOT) {
        Ok(r) => tracing::info!(
            forgotten = r.forgotten,
            resumed = r.resumed,
            kept = r.entries.len().saturating_sub(r.forgotten),
            young = r.young,
            "forget"
        ),
        Err(e) => tracing::warn!(error = %error_chain(&e), "forgetting failed"),
    }
    // Launches of this service that left the open index need no tracking any more.
    if let Ok(mut l) = state.launched.lock() {
        l.retain(|id| rt.open_marker_path(*id).exists());
    }
    let elapsed_ms = started.elapsed().as_millis() as u64;
    tracing::info!(elapsed_ms, "housekeeping");
}

fn sample_capacity(rt: &Runtime) {
    let mut probe = ops::probe();
    match ops::capacity_report(Some(rt), crate::capacity::Policy::default(), &mut *probe) {
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

/// Which deadline of `reg` has passed, if any (the one definition of activity, W7).
fn deadline_passed(reg: &Registration) -> Option<StopCause> {
    expired_on_record(reg, Instant::now()).map(|e| match e {
        Expired::Completion => StopCause::CompletionDeadline,
        Expired::Idle => StopCause::IdleDeadline,
    })
}
