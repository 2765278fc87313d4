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
//! retention and forgetting (R4). Logs go through `tracing` to stderr (or `--log-file`).
//!
//! # Shutdown (SPEC W8)
//! SIGTERM/SIGINT end the service and its own launches, like `docker stop` on each: the service
//! stops accepting, sends SIGTERM to each launch's process group (the shared stop's grace
//! signal), waits up to `--shutdown-grace` (default 10 s) for their scopes to end, ends the rest
//! through the shared stop, and waits (bounded) for their engines to record their results. Every
//! one ends `exited` with the guardian's receipt. A service that is SIGKILLed cannot do this: its
//! launches ask for no parent-death signal, so they keep running, `live`, their guardians
//! capturing their output (L1), and the next service's recovery pass (or `recover`) adopts or
//! stops each by its `on_service_loss` (L6: `keep` but for agents).
//!
//! # Nothing waits on a thread (SPEC D2)
//! What only waits is a timer in the event loop, never a thread: a stop's grace (the polite
//! signal, then the guardian's pidfd looked at on a timer, then the stop proper), an `agent`
//! launch waiting for a slot (one FIFO queue; only its head takes a census, every 200 ms), a
//! deadline's grace for a registration this service did not launch. The engines' own graces,
//! retries and receipt waits are timers of the shared loop ([`refine_supervisor::host::SharedLoop`]).
//!
//! # Caveats
//! The work that blocks (the engine's launch, the stop's quiesce, kill and proof, the
//! assessment) runs on tokio's blocking pool, bounded by the stop's budget; the supervisor never
//! reaps anything but its own guardians by pid.

use refine_supervisor::host::{Journal, JournalCursor as Cursor, JournalFilter as Filter};
use std::collections::HashSet;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use refine_protocol::api::{self, ErrorKind, LaunchAsk, Reply, Request, Response, MAX_MESSAGE};
use refine_protocol::record::{Kind, ServiceLoss};
use refine_protocol::{Registration, RegistrationId, StopCause};

use super::docs::{
    json_line, RecoverAction, State, StopDetail, StopDoc, StopFailed, StopOutcomeDoc,
};
use super::error::{io_err, AdmitError, CliError, ServiceError};
use super::metrics::{self, Metrics, RequestResult};
use super::ops::{self, launch_command, maintenance_pass, recover_all, stop_one};
use super::resolve;
use super::throttle::{Backoff, LogLimit};
use refine_supervisor::error_chain;
use refine_supervisor::host::admission;
use refine_supervisor::host::service::{self, Watcher};
use refine_supervisor::host::stopping as stop;
use refine_supervisor::host::Signal;
use refine_supervisor::host::StallConfig;
use refine_supervisor::host::Supervisor;
use refine_supervisor::host::{RegistryError, Runtime, SlotTurn, SlotWait, Stream};
/// What the maintenance loop's housekeeping keeps and forgets.
#[derive(Debug, Clone, Copy)]
pub struct Housekeeping {
    /// Retention's age limit for artifacts and capture receipts.
    pub retain: Duration,
    /// Forgetting's horizon for whole exited registrations.
    pub forget_after: Duration,
}

/// Launches for the service (after [`admit_queued`]): the engine keeps running in the shared
/// loop; the handle is not awaited (the record and the receipt carry the result), so the service
/// holds no per-launch state beyond the id and the engine. Refused once shutdown has begun (D3):
/// the check, the launch and its entry among the service's launches happen under one lock that
/// shutdown takes before its snapshot, so a launch is either refused or ended by the shutdown.
fn launch_admitted(
    state: &Service,
    spec: LaunchAsk,
    slot: Option<refine_supervisor::host::Fence>,
) -> Result<RegistrationId, Response> {
    // The service ends its launches itself when it stops (W8); when it is killed, they outlive
    // it (their guardians capture their output, L1), and the next service adopts them, but an
    // agent's, which it stops (L6: a restarted daemon ends the stale workers it owned).
    // A scope that ends with its connection ends with the service too: the connection goes
    // with it.
    let loss = spec.on_service_loss.unwrap_or(match spec.kind {
        _ if spec.end_with_connection => ServiceLoss::Stop,
        Kind::Agent => ServiceLoss::Stop,
        _ => ServiceLoss::Keep,
    });
    let mut cmd = launch_command(&spec)
        .map_err(|e| Response::err(ErrorKind::BadRequest, error_chain(&e)))?
        .outlive_host()
        .on_service_loss(loss);
    // H7: the service probes its launches from its one timer.
    cmd.request_mut().health_queue = Some(state.health.clone());
    let handle = {
        let closed = state.closed.lock().unwrap_or_else(|p| p.into_inner());
        if *closed {
            return Err(shutting_down());
        }
        descriptor_budget()?;
        let handle = state
            .sup
            .spawn(cmd)
            .map_err(|e| Response::err(ErrorKind::LaunchFailed, error_chain(&e)))?
            .into_handle();
        drop(slot);
        if let Ok(mut l) = state.launched.lock() {
            l.insert(handle.id());
        }
        handle
    };
    let id = handle.id();
    if spec.input {
        if let Ok(mut inputs) = state.inputs.lock() {
            // The pipes of scopes that ended since are dropped here, so their descriptors do
            // not pile up in a service whose hosts never close their inputs.
            let rt = &state.rt;
            inputs.retain(|id, _| {
                rt.read_registration(*id)
                    .is_ok_and(|reg| ops::ended(rt, &reg).is_none())
            });
            inputs.insert(id, handle.input_writer());
        }
    }
    // The caller learns a spawn failure now rather than an id of something that never ran.
    let spawned = handle.wait_spawned(SPAWN_WORD_WAIT);
    if let Ok(mut e) = state.engines.lock() {
        e.retain(|h| !h.is_finished());
        // Only the engine: a handle would keep the control channel open (a descriptor per
        // detached scope for nothing).
        e.push(handle.into_engine());
    }
    if let Some(Err((errno, step))) = spawned {
        return Err(Response::ok(Reply::SpawnFailed {
            id: id.to_string(),
            errno,
            step: Some(step),
        }));
    }
    Ok(id)
}

/// Descriptors a launch may hold at its peak (its pipes, the guardian's channel and pidfd, its
/// lock, proof and artifacts, the spawn's own), of which one stays while the scope lives (the
/// guardian's channel: the guardian holds the lock, L3).
const SCOPE_DESCRIPTORS: usize = 24;
/// Descriptors kept for the service itself (connections, stops, `/proc` reads, the log).
const SERVICE_RESERVE: usize = 32;

/// D1: a launch is let through only while the descriptor limit leaves room for one more scope
/// beside the service's reserve; else it is refused before anything is created. The count reads
/// `/proc/self/fd` (O(open descriptors)), skipped where the limit is the kernel's ceiling.
fn descriptor_budget() -> Result<(), Response> {
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    if soft.is_none_or(|s| s >= 1 << 20) {
        return Ok(());
    }
    let left = refine_supervisor::host::descriptors_left(SERVICE_RESERVE);
    if left >= SCOPE_DESCRIPTORS {
        return Ok(());
    }
    Err(Response::err(
        ErrorKind::NoCapacity,
        format!(
            "descriptor limit: {left} descriptors left beside the service's reserve of \
             {SERVICE_RESERVE} (RLIMIT_NOFILE {}), a scope needs {SCOPE_DESCRIPTORS}",
            soft.unwrap_or(0)
        ),
    ))
}

/// The refusal of a launch asked for once shutdown has begun (D3).
fn shutting_down() -> Response {
    Response::err(
        ErrorKind::LaunchFailed,
        "the service is shutting down: nothing more is launched",
    )
}

/// Admission's refusal as the service answers it; a census that could not be taken is the
/// service's failure, not the request's.
fn admit_response(e: AdmitError) -> Response {
    let kind = match e {
        AdmitError::NoCapacity { .. } => ErrorKind::NoCapacity,
        AdmitError::LabelHeld { .. } => ErrorKind::LabelHeld,
        AdmitError::UniqueWithoutLabel => ErrorKind::BadRequest,
        AdmitError::Lock(_) | AdmitError::Census(_) | AdmitError::Task(_) => ErrorKind::Internal,
    };
    Response::err(kind, error_chain(&e))
}

/// Capacity admission for the service (C1–C4) without a thread per waiter (D2): an `agent`
/// launch takes its turn in one FIFO queue (an async lock: waiting in it costs no thread and no
/// census), and only the queue's head takes a census, on the blocking pool for the census alone,
/// when the library's [`SlotWait`] says (every [`SlotWait::PERIOD`]), until a slot is free or
/// its `wait_for_slot` is over. Returns the
/// admission lock, held until the registration is durable. Refused once shutdown began (D3).
async fn admit_queued(
    state: &Arc<Service>,
    spec: &LaunchAsk,
) -> Result<Option<refine_supervisor::host::Fence>, Response> {
    if spec.unique && spec.label.is_empty() {
        return Err(admit_response(AdmitError::UniqueWithoutLabel));
    }
    if spec.kind != refine_protocol::Kind::Agent {
        if !spec.unique {
            return Ok(None);
        }
        // Not an agent: no census, only the label under the admission lock.
        let (rt, spec) = (state.rt.clone(), spec.clone());
        return tokio::task::spawn_blocking(move || {
            admission::try_admit(&rt, None, &admission::Admission::of(&spec))
        })
        .await
        .unwrap_or_else(|e| Err(AdmitError::Task(e)))
        .map(Some)
        .map_err(admit_response);
    }
    let wait = SlotWait::new(std::time::Instant::now(), spec.wait_for_slot);
    let deadline = tokio::time::Instant::from_std(wait.until());
    let census = |state: &Arc<Service>| {
        let st = state.clone();
        let spec = spec.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                let mut probe = st.probe.lock().unwrap_or_else(|p| p.into_inner());
                admission::try_admit(&st.rt, Some(&mut **probe), &admission::Admission::of(&spec))
            })
            .await
            .unwrap_or_else(|e| Err(AdmitError::Task(e)))
        }
    };
    let mut closing = state.closing.subscribe();
    let turn = tokio::select! {
        turn = tokio::time::timeout_at(deadline, state.slot_queue.lock()) => turn,
        _ = closing.wait_for(|c| *c) => return Err(shutting_down()),
    };
    if state.is_closed() {
        return Err(shutting_down());
    }
    let Ok(_turn) = turn else {
        // Its wait is over while others were ahead of it: one last census decides.
        return census(state).await.map(Some).map_err(admit_response);
    };
    loop {
        let check = census(state).await;
        match wait.after(check, std::time::Instant::now()) {
            SlotTurn::Admitted(lock) => return Ok(Some(lock)),
            SlotTurn::Refused(e) => return Err(admit_response(e)),
            SlotTurn::LookAgainAt(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {}
                    _ = closing.wait_for(|c| *c) => {}
                }
                if state.is_closed() {
                    return Err(shutting_down());
                }
            }
        }
    }
}

/// A launch request: admission (queued, D2), then the launch on the blocking pool.
async fn launch_request_async(state: &Arc<Service>, spec: LaunchAsk) -> Response {
    let launched = match admit_queued(state, &spec).await {
        Err(resp) => Err(resp),
        Ok(slot) => {
            let st = state.clone();
            tokio::task::spawn_blocking(move || launch_admitted(&st, spec, slot))
                .await
                .unwrap_or_else(|e| Err(Response::err(ErrorKind::Internal, e.to_string())))
        }
    };
    state.metrics.request(request_result(&launched));
    match launched {
        Ok(id) => {
            tracing::info!(%id, "launched");
            Response::ok(Reply::Launched { id: id.to_string() })
        }
        Err(resp) => resp,
    }
}

/// The shared stop with its grace as a timer (D2, T7): the event loop drives the stop's
/// [`stop::Stopping`] step: the polite signal on the blocking pool, the grace as a wait on the
/// guardian's pidfd in the event loop (no thread), then the stop proper (quiesce, kill, proof)
/// on the blocking pool, whose report holds the grace's signals and time. A scope without a
/// live guardian has no pidfd to wait on: it is stopped at once after the polite signal.
async fn stop_async(
    state: &Arc<Service>,
    reg: Registration,
    cause: StopCause,
    grace: Option<(Duration, Signal)>,
) -> StopDoc {
    let failed = |id: RegistrationId, e: tokio::task::JoinError| StopDoc {
        id: id.to_string(),
        outcome: StopOutcomeDoc::Failed(StopFailed::Failed),
        state: State::Unverified,
        reason: None,
        detail: StopDetail::Failed {
            error: e.to_string(),
        },
    };
    let id = reg.id;
    let Some((within, signal)) = grace else {
        let st = state.clone();
        return tokio::task::spawn_blocking(move || st.stop(&reg, cause, None))
            .await
            .unwrap_or_else(|e| failed(id, e));
    };
    let mut stopping = stop::Stopping::new(Some(stop::Grace { within, signal }));
    if stopping.advance(Instant::now(), false) == stop::Next::Signal {
        let (st, reg) = (state.clone(), reg.clone());
        let polite = tokio::task::spawn_blocking(move || {
            let opts = stop::StopOptions {
                cause: Some(cause),
                ..stop::StopOptions::default()
            };
            let sent = stopping.signal(&st.rt, &reg, &opts);
            (stopping, sent)
        })
        .await;
        match polite {
            Ok((s, sent)) => {
                if let Err(e) = sent {
                    tracing::warn!(%id, error = %error_chain(&e), "cannot send the grace's signal");
                }
                stopping = s;
            }
            Err(e) => return failed(id, e),
        }
    }
    grace_over(reg.hello.guardian, &mut stopping).await;
    let st = state.clone();
    tokio::task::spawn_blocking(move || st.stop_after_grace(&reg, cause, &stopping))
        .await
        .unwrap_or_else(|e| failed(id, e))
}

/// How often a grace's timer looks at the guardian's pidfd.
const GRACE_POLL: Duration = Duration::from_millis(50);

/// Drives `stopping` in the event loop until its grace is over or the tree is empty (its
/// guardian has exited), as a timer (no thread): the guardian's pidfd, polled without blocking
/// every [`GRACE_POLL`], is readable once it has exited. A guardian that cannot be opened is
/// gone or reused: the tree counts as empty, and the stop's proof follows at once.
async fn grace_over(guardian: refine_protocol::ProcessWitness, stopping: &mut stop::Stopping) {
    let v = stop::Verified::open(guardian).ok();
    loop {
        let empty = v.as_ref().is_none_or(|v| v.has_exited().unwrap_or(true));
        match stopping.advance(Instant::now(), empty) {
            stop::Next::Wait(until) => {
                let now = Instant::now();
                let at = until.min(now + GRACE_POLL);
                tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
            }
            _ => return,
        }
    }
}

/// How long a client has to send its whole request line (D1).
const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client has to take its whole reply (D1's twin): a reply larger than the socket
/// buffers waits for its reader, and one never read must not pin a descriptor for ever.
const REPLY_WRITE_TIMEOUT: Duration = Duration::from_secs(5);

static ACCEPT_LOG: LogLimit = LogLimit::new();
static CONN_LOG: LogLimit = LogLimit::new();
static PEER_LOG: LogLimit = LogLimit::new();
static SLOW_LOG: LogLimit = LogLimit::new();
static UNREAD_LOG: LogLimit = LogLimit::new();

/// Writes `resp` and ends the connection, or drops it (with its descriptor) when the client
/// has not taken it within [`REPLY_WRITE_TIMEOUT`].
async fn reply(
    wr: &mut tokio::net::unix::OwnedWriteHalf,
    resp: &Response,
    last: bool,
) -> io::Result<bool> {
    use tokio::io::AsyncWriteExt;
    let bytes = api::encode_response(resp);
    let write = async {
        wr.write_all(&bytes).await?;
        if last {
            wr.shutdown().await?;
        }
        io::Result::Ok(())
    };
    match tokio::time::timeout(REPLY_WRITE_TIMEOUT, write).await {
        Ok(r) => r.map(|()| true),
        Err(_) => {
            if let Some(suppressed) = UNREAD_LOG.allow() {
                tracing::warn!(
                    suppressed,
                    bytes = bytes.len(),
                    timeout_ms = refine_protocol::time::saturating_ms(REPLY_WRITE_TIMEOUT),
                    "dropped a reply not taken within the write timeout"
                );
            }
            Ok(false)
        }
    }
}

/// How long a detached launch waits for the guardian's word on the `execve` (it comes within
/// milliseconds of *start*).
const SPAWN_WORD_WAIT: Duration = Duration::from_secs(5);

/// How a launch request ended, for the metrics.
fn request_result(r: &Result<RegistrationId, Response>) -> RequestResult {
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
    engines: Mutex<Vec<refine_supervisor::host::EngineThread>>,
    /// The stdin pipes of launches that asked for one (`input: true`), until an `input`
    /// request closes one or finds its workload gone.
    inputs: Mutex<std::collections::HashMap<RegistrationId, refine_supervisor::host::InputWriter>>,
    /// When retention last ran (it runs at most every [`RETENTION_EVERY`]).
    last_retention: Mutex<Option<Instant>>,
    /// Counters and gauges for `--metrics` (kept whether or not they are served).
    metrics: Arc<Metrics>,
    /// Set when shutdown begins: nothing more is launched (D3). Held across a launch and its
    /// entry in `launched`, so shutdown's snapshot has every launch that was let through.
    closed: Mutex<bool>,
    /// Tells the slot waiters that shutdown has begun (they are refused at once).
    closing: tokio::sync::watch::Sender<bool>,
    /// Connections being answered (shutdown lets them finish, bounded).
    answering: std::sync::atomic::AtomicUsize,
    /// The FIFO of `agent` launches waiting for a slot (D2): only its head takes censuses.
    slot_queue: tokio::sync::Mutex<()>,
    /// Registrations with a graced deadline stop under way ([`graced_deadline_stop`]).
    graced: Mutex<HashSet<RegistrationId>>,
    /// The host probe of the censuses of admission.
    probe: Mutex<Box<dyn admission::HostProbe + Send>>,
    /// The grace of a stop the service makes on its own (shutdown, a connection's end).
    shutdown_grace: Duration,
    /// H7: the scopes this service probes, driven by one thread ([`service::HealthQueue::run`]).
    health: Arc<service::HealthQueue>,
}

impl Service {
    fn is_closed(&self) -> bool {
        *self.closed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The shared stop, observed by the metrics when it returned a report.
    fn stop(
        &self,
        reg: &Registration,
        cause: StopCause,
        grace: Option<(Duration, Signal)>,
    ) -> StopDoc {
        self.stopped(cause, stop_one(&self.rt, reg, cause, grace))
    }

    /// [`Service::stop`] after a grace the event loop drove.
    fn stop_after_grace(
        &self,
        reg: &Registration,
        cause: StopCause,
        stopping: &stop::Stopping,
    ) -> StopDoc {
        self.stopped(cause, ops::stop_after_grace(&self.rt, reg, cause, stopping))
    }

    /// The metrics of a stop's document.
    fn stopped(&self, cause: StopCause, doc: StopDoc) -> StopDoc {
        let name = match cause {
            StopCause::Operator => "operator",
            StopCause::CompletionDeadline => "completion_deadline",
            StopCause::IdleDeadline => "idle_deadline",
            StopCause::Recovery => "recovery",
            StopCause::ReadyTimeout => "ready_timeout",
        };
        if let StopDetail::Done { timings_us, .. } = &doc.detail {
            let took = Duration::from_micros(timings_us.total);
            self.metrics.stopped(name, took);
        }
        if matches!(doc.outcome, StopOutcomeDoc::Failed(_)) {
            self.metrics.stop_failed(name);
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
    /// L6: SIGTERM/SIGINT leave the launches running for the next service to adopt.
    pub live_restore: bool,
    pub log_format: LogFormat,
    /// `--log-file`: a size-rotated file instead of stderr.
    pub log_file: Option<std::path::PathBuf>,
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
        live_restore,
        log_format,
        log_file,
    } = config;
    let rt = Runtime::open(home, port)?;
    let lock = rt.service_lock_path();
    let _held = service::try_acquire(&lock)?.ok_or_else(|| ServiceError::AlreadyRunning {
        port,
        lock: lock.clone(),
    })?;
    init_tracing(log_format, log_file.as_deref())?;
    tracing::info!(port, home = %home.display(), pid = std::process::id(), "service starting");
    // L5: what an upgrade in place executes: the path this binary was started from (a new
    // binary renamed over it is what runs next), with the same arguments.
    let upgrade_to = Upgrade {
        exe: setup::install_path(std::env::current_exe().map_err(io_err("find this executable"))?),
        args: std::env::args_os().skip(1).collect(),
    };

    refine_supervisor::host::raise_nofile_ceiling();
    let metrics = Arc::new(Metrics::new());
    // One loop drives the engines of all the service's launches: a fixed number of threads
    // for any number of detached scopes (F1).
    let shared = refine_supervisor::host::SharedLoop::start().map_err(ServiceError::SharedLoop)?;
    let shared_loop = shared.clone();
    let health: Arc<service::HealthQueue> = Arc::default();
    // A launch's result comes when its workload has ended: its probing ends with it.
    let ended = {
        let (counted, health) = (metrics.result_hook(), health.clone());
        Arc::new(move |r: &refine_supervisor::host::LaunchResult| {
            counted(r);
            health.remove(r.id);
        })
    };
    let state = Arc::new(Service {
        sup: Supervisor::new(rt.clone())
            .with_shared_loop(shared)
            .with_result_hook(ended)
            .with_receipt_hook(metrics.receipt_hook()),
        rt,
        launched: Mutex::new(HashSet::new()),
        engines: Mutex::new(Vec::new()),
        inputs: Mutex::new(std::collections::HashMap::new()),
        last_retention: Mutex::new(None),
        metrics,
        closed: Mutex::new(false),
        closing: tokio::sync::watch::Sender::new(false),
        answering: std::sync::atomic::AtomicUsize::new(0),
        slot_queue: tokio::sync::Mutex::new(()),
        probe: Mutex::new(refine_supervisor::host::capacity_probe()),
        graced: Mutex::new(HashSet::new()),
        shutdown_grace,
        health,
    });
    let prober = start_prober(&state, shared_loop)?;
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
        &upgrade_to,
    ));
    prober.close();
    let (result, listener) = match result {
        Ok(Ended::Upgrade(l)) => (Ok(()), Some(l)),
        Ok(Ended::Stop) => (Ok(()), None),
        Err(e) => (Err(e), None),
    };
    if listener.is_some() {
        // L5: the launches run on, as under --live-restore; the next image adopts them.
        let left = state.launched.lock().map(|l| l.len()).unwrap_or(0);
        tracing::info!(
            left,
            "upgrade: the launches keep running for the new binary"
        );
    } else if live_restore {
        // L6: the launches run on, capturing (L1); the next service adopts or stops each by
        // its `on_service_loss`, as after a crash, but nothing was lost on the way.
        let left = state.launched.lock().map(|l| l.len()).unwrap_or(0);
        tracing::info!(
            left,
            "live restore: the launches keep running for the next service"
        );
    } else {
        shutdown(&state, shutdown_grace);
    }
    // The requests under way (a slot waiter's refusal) are answered before the runtime goes.
    runtime.block_on(async {
        let end = tokio::time::Instant::now() + ANSWERS_AT_SHUTDOWN;
        while state.answering.load(std::sync::atomic::Ordering::Acquire) > 0
            && tokio::time::Instant::now() < end
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    runtime.shutdown_background();
    if let Some(listener) = listener {
        // Only an exec that failed comes back: the launches keep running, the socket goes.
        let e = upgrade_to.exec(&listener);
        tracing::error!(error = %e, "upgrade: exec failed; the next serve adopts the launches");
        let _ = std::fs::remove_file(state.rt.socket_path());
        return Err(io_err("execute the new binary")(e));
    }
    let _ = std::fs::remove_file(state.rt.socket_path());
    tracing::info!("service stopped");
    result
}

async fn serve_async(
    state: Arc<Service>,
    every: Duration,
    keep: Housekeeping,
    watch: StallConfig,
    metrics_addr: Option<SocketAddr>,
    upgrade: &Upgrade,
) -> Result<Ended, ServiceError> {
    use tokio::signal::unix::{signal, SignalKind};
    // The handlers before the socket: a client that sees the socket may signal at once (a
    // SIGINT between the bind and the handler killed the service outright).
    let mut term = signal(SignalKind::terminate()).map_err(io_err("install SIGTERM handler"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(io_err("install SIGINT handler"))?;
    let mut hup = signal(SignalKind::hangup()).map_err(io_err("install SIGHUP handler"))?;
    // An upgrade carried these blocked across its execve; with the handlers in place, one
    // sent meanwhile is taken now. (Unblocked on every start: an inherited block is reset.)
    refine_supervisor::host::signals::unblock(setup::HELD_ACROSS_EXEC);
    let listener = bind_socket(&state.rt.socket_path())?;
    let mut upgrading = false;
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
    tracing::info!(socket = %state.rt.socket_path().display(), "listening");
    let mut backoff = Backoff::default();
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
                        &service::KERNEL_BOOT,
                        service::boottime(),
                        refine_supervisor::host::unix_ms(),
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
            _ = hup.recv() => {
                let check = {
                    let exe = upgrade.exe.clone();
                    let probe = Upgrade { exe, args: Vec::new() };
                    tokio::task::spawn_blocking(move || probe.preflight()).await
                };
                match check {
                    Ok(Ok(())) => {
                        tracing::info!(exe = %upgrade.exe.display(), "SIGHUP: upgrading in place");
                        upgrading = true;
                        break;
                    }
                    Ok(Err(why)) => tracing::error!(why, "SIGHUP: upgrade refused, serving on"),
                    Err(e) => tracing::error!(error = %e, "SIGHUP: upgrade refused, serving on"),
                }
            }
            conn = listener.accept() => match conn {
                Ok((stream, _)) => {
                    backoff.reset();
                    let st = state.clone();
                    st.answering.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                    tokio::spawn(async move {
                        if let Err(e) = handle_conn(st.clone(), stream).await {
                            if let Some(suppressed) = CONN_LOG.allow() {
                                tracing::warn!(error = %e, suppressed, "connection failed");
                            }
                        }
                        st.answering.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                    });
                }
                Err(e) => {
                    // D1: at the descriptor limit (EMFILE, ENFILE) or short of memory, retrying
                    // at once only spins: back off (doubling, up to a second), and say so at
                    // most once per window.
                    let pause = backoff.next();
                    if let Some(suppressed) = ACCEPT_LOG.allow() {
                        tracing::warn!(error = %e, suppressed, pause_ms = refine_protocol::time::saturating_ms(pause), "accept failed");
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = term.recv() => { tracing::info!("SIGTERM"); break; }
                        _ = int.recv() => { tracing::info!("SIGINT"); break; }
                    }
                }
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
    if upgrading {
        let listener = listener
            .into_std()
            .map_err(io_err("take the service socket back"))?;
        return Ok(Ended::Upgrade(listener));
    }
    Ok(Ended::Stop)
}

/// The recovery pass of a service start (the one `recover` runs), logged: a summary line, and
/// one line per registration it did not simply release.
fn recover_at_start(rt: &Runtime) {
    let t = Instant::now();
    match recover_all(rt) {
        Ok(doc) => {
            let elapsed_ms = refine_protocol::time::saturating_ms(t.elapsed());
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
fn log_stall(id: RegistrationId, event: &service::StallEvent) {
    match event {
        service::StallEvent::Began(i) => tracing::warn!(
            %id,
            signal = service::stall_signal_name(i.signal),
            samples = i.samples,
            cpu_percent = f64::from(i.cpu_permille) / 10.0,
            last_write = %super::docs::utc(i.last_write_unix_ms),
            "stall watch: began"
        ),
        service::StallEvent::Ended { incident, reason } => tracing::info!(
            %id,
            signal = service::stall_signal_name(incident.signal),
            since = %super::docs::utc(incident.since_unix_ms),
            samples = incident.samples,
            reason = service::stall_cleared_name(*reason),
            "stall watch: cleared"
        ),
    }
}

mod housekeeping;
mod setup;
mod socket;
use housekeeping::*;
use setup::*;
use socket::*;
