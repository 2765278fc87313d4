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

use refine_supervisor::store::journal::{Cursor, Filter, Journal};
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
use super::ops::{self, assess_one, launch_command, maintenance_pass, recover_all, stop_one};
use super::resolve;
use super::throttle::{Backoff, LogLimit};
use refine_supervisor::capacity;
use refine_supervisor::end::stop;
use refine_supervisor::error_chain;
use refine_supervisor::host::Signal;
use refine_supervisor::host::{RegistryError, Runtime, Stream};
use refine_supervisor::hygiene::stall::{self, sample::Watcher, StallConfig};
use refine_supervisor::store::fence;
use refine_supervisor::Supervisor;
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
    slot: Option<refine_supervisor::store::fence::Fence>,
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
    let cmd = launch_command(&spec)
        .map_err(|e| Response::err(ErrorKind::BadRequest, error_chain(&e)))?
        .outlive_host()
        .on_service_loss(loss);
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
    let left = refine_supervisor::kernel::limits::descriptors_left(SERVICE_RESERVE);
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

/// How often the head of the slot queue takes a census while it waits.
const SLOT_POLL: Duration = Duration::from_millis(200);

/// Capacity admission for the service (C1–C4) without a thread per waiter (D2): an `agent`
/// launch takes its turn in one FIFO queue (an async lock: waiting in it costs no thread and no
/// census), and only the queue's head takes a census, every [`SLOT_POLL`], on the blocking pool
/// for the census alone, until a slot is free or its `wait_for_slot` is over. Returns the
/// admission lock, held until the registration is durable. Refused once shutdown began (D3).
async fn admit_queued(
    state: &Arc<Service>,
    spec: &LaunchAsk,
) -> Result<Option<refine_supervisor::store::fence::Fence>, Response> {
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
            capacity::try_admit(&rt, None, &capacity::Admission::of(&spec))
        })
        .await
        .unwrap_or_else(|e| Err(AdmitError::Task(e)))
        .map(Some)
        .map_err(admit_response);
    }
    let deadline = tokio::time::Instant::now() + spec.wait_for_slot.unwrap_or_default();
    let census = |state: &Arc<Service>| {
        let st = state.clone();
        let spec = spec.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                let mut probe = st.probe.lock().unwrap_or_else(|p| p.into_inner());
                capacity::try_admit(&st.rt, Some(&mut **probe), &capacity::Admission::of(&spec))
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
        match census(state).await {
            Ok(lock) => return Ok(Some(lock)),
            Err(e @ AdmitError::NoCapacity { .. }) => {
                let now = tokio::time::Instant::now();
                if now >= deadline {
                    return Err(admit_response(e));
                }
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline.min(now + SLOT_POLL)) => {}
                    _ = closing.wait_for(|c| *c) => {}
                }
                if state.is_closed() {
                    return Err(shutting_down());
                }
            }
            Err(e) => return Err(admit_response(e)),
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

/// The shared stop with its grace as a timer (D2, T7): the polite signal on the blocking pool,
/// the grace as a wait on the guardian's pidfd in the event loop (no thread), then the stop
/// proper (quiesce, kill, proof) on the blocking pool. The grace's signals and time are in the
/// document as if the stop had waited them out itself. A scope without a live guardian has no
/// pidfd to wait on: it is stopped at once after the polite signal.
async fn stop_async(
    state: &Arc<Service>,
    reg: Registration,
    cause: StopCause,
    grace: Option<(Duration, Signal)>,
) -> StopDoc {
    let blocking = |st: Arc<Service>, reg: Registration| async move {
        let id = reg.id;
        tokio::task::spawn_blocking(move || st.stop(&reg, cause, None))
            .await
            .unwrap_or_else(|e| StopDoc {
                id: id.to_string(),
                outcome: StopOutcomeDoc::Failed(StopFailed::Failed),
                state: State::Unverified,
                reason: None,
                detail: StopDetail::Failed {
                    error: e.to_string(),
                },
            })
    };
    let Some((grace, sig)) = grace else {
        return blocking(state.clone(), reg).await;
    };
    let t = Instant::now();
    let polite = {
        let (st, reg) = (state.clone(), reg.clone());
        tokio::task::spawn_blocking(move || {
            let opts = stop::StopOptions {
                cause: Some(cause),
                ..stop::StopOptions::default()
            };
            stop::signal_politely(&st.rt, &reg, sig, &opts)
        })
        .await
    };
    let sent = match polite {
        Ok(Ok(sent)) => sent.len(),
        Ok(Err(e)) => {
            tracing::warn!(id = %reg.id, error = %error_chain(&e), "cannot send the grace's signal");
            0
        }
        Err(_) => 0,
    };
    if sent > 0 {
        guardian_exit(reg.hello.guardian, grace).await;
    }
    let waited = t.elapsed();
    let mut doc = blocking(state.clone(), reg).await;
    if let StopDetail::Done {
        signalled,
        timings_us,
        ..
    } = &mut doc.detail
    {
        let us = refine_protocol::time::saturating_us(waited);
        *signalled += sent;
        timings_us.grace = us;
        timings_us.total = timings_us.total.saturating_add(us);
    }
    if sent > 0 {
        if let StopOutcomeDoc::Stopped(o @ stop::StopOutcome::AlreadyExited) = &mut doc.outcome {
            *o = stop::StopOutcome::Stopped;
        }
    }
    doc
}

/// How often a grace's timer looks at the guardian's pidfd.
const GRACE_POLL: Duration = Duration::from_millis(50);

/// Waits up to `within` for the guardian to exit, as a timer in the event loop (no thread): its
/// pidfd, polled without blocking every [`GRACE_POLL`], is readable once it has exited. A
/// guardian that cannot be opened is gone or reused: no wait.
async fn guardian_exit(guardian: refine_protocol::ProcessWitness, within: Duration) {
    let Ok(v) = refine_supervisor::kernel::signal::Verified::open(guardian) else {
        return;
    };
    let end = tokio::time::Instant::now() + within;
    while !v.has_exited().unwrap_or(true) {
        let now = tokio::time::Instant::now();
        if now >= end {
            return;
        }
        tokio::time::sleep_until(end.min(now + GRACE_POLL)).await;
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
    probe: Mutex<Box<dyn refine_supervisor::capacity::HostProbe + Send>>,
    /// The grace of a stop the service makes on its own (shutdown, a connection's end).
    shutdown_grace: Duration,
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
        let doc = stop_one(&self.rt, reg, cause, grace);
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
    let _held = fence::try_acquire(&lock)?.ok_or_else(|| ServiceError::AlreadyRunning {
        port,
        lock: lock.clone(),
    })?;
    init_tracing(log_format, log_file.as_deref())?;
    tracing::info!(port, home = %home.display(), pid = std::process::id(), "service starting");
    // L5: what an upgrade in place executes: the path this binary was started from (a new
    // binary renamed over it is what runs next), with the same arguments.
    let upgrade_to = Upgrade {
        exe: std::env::current_exe().map_err(io_err("find this executable"))?,
        args: std::env::args_os().skip(1).collect(),
    };

    refine_supervisor::kernel::limits::raise_nofile_ceiling();
    let metrics = Arc::new(Metrics::new());
    // One loop drives the engines of all the service's launches: a fixed number of threads
    // for any number of detached scopes (F1).
    let shared = refine_supervisor::host::SharedLoop::start().map_err(ServiceError::SharedLoop)?;
    let state = Arc::new(Service {
        sup: Supervisor::new(rt.clone())
            .with_shared_loop(shared)
            .with_result_hook(metrics.result_hook())
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
        probe: Mutex::new(capacity::probe()),
        graced: Mutex::new(HashSet::new()),
        shutdown_grace,
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
        &upgrade_to,
    ));
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

/// The environment variable that carries the listening socket across an upgrade's `execve`.
const LISTEN_FD_VAR: &str = "REFINE_LISTEN_FD";
/// How long the new binary's preflight (`version`) may take before the upgrade is refused.
const PREFLIGHT_BOUND: Duration = Duration::from_secs(10);

/// How the service ended its loop.
enum Ended {
    /// SIGTERM or SIGINT.
    Stop,
    /// SIGHUP, and the new binary passed its preflight: the listener, to carry across `execve`.
    Upgrade(std::os::unix::net::UnixListener),
}

/// L5: the upgrade in place (SIGHUP; `systemctl reload`; `refine-supervisor upgrade`). The
/// same process executes the binary at the path it was started from: its pid stays (systemd's
/// main pid, the guardians' parent), the listening socket is carried across `execve` (connects
/// meanwhile wait in its backlog, none is refused), and the new image adopts the launches by
/// its recovery at start, as after `--live-restore`. A new binary that fails its preflight
/// (`version`, bounded) is refused before anything changes: the old one goes on serving.
struct Upgrade {
    exe: std::path::PathBuf,
    args: Vec<std::ffi::OsString>,
}

impl Upgrade {
    /// Whether the binary now at the path runs (`version` exits 0 within the bound).
    fn preflight(&self) -> Result<(), String> {
        let mut child = std::process::Command::new(&self.exe)
            .arg("version")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .env_remove(LISTEN_FD_VAR)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.exe.display()))?;
        let end = Instant::now() + PREFLIGHT_BOUND;
        loop {
            match child.try_wait() {
                Ok(Some(st)) if st.success() => return Ok(()),
                Ok(Some(st)) => return Err(format!("{} version: {st}", self.exe.display())),
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("{} version did not answer", self.exe.display()));
                }
                Err(e) => return Err(format!("wait for the preflight: {e}")),
            }
        }
    }

    /// Executes the new binary with the listener as an inherited descriptor; returns only on
    /// failure.
    fn exec(&self, listener: &std::os::unix::net::UnixListener) -> io::Error {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        // A duplicate without close-on-exec: the one descriptor the new image inherits on
        // purpose (everything else of this process is close-on-exec).
        let fd = match rustix::io::dup(listener) {
            Ok(fd) => fd,
            Err(e) => return e.into(),
        };
        let err = std::process::Command::new(&self.exe)
            .args(&self.args)
            .env(LISTEN_FD_VAR, fd.as_raw_fd().to_string())
            .exec();
        drop(fd);
        err
    }
}

/// The listener an upgrade carried across `execve`, if this process is such an upgrade's new
/// image: [`LISTEN_FD_VAR`] names a descriptor that is a listening Unix socket bound to `path`.
/// Anything else is ignored (and the variable dropped), and the socket is bound afresh.
fn inherited_listener(path: &Path) -> Option<std::os::unix::net::UnixListener> {
    use std::os::fd::FromRawFd;
    let var = std::env::var(LISTEN_FD_VAR).ok()?;
    std::env::remove_var(LISTEN_FD_VAR);
    let fd: i32 = var.parse().ok().filter(|&fd| fd > 2)?;
    // SAFETY: a descriptor this process inherited for this purpose and nothing else owns; it
    // is checked to be what it should be before use, and closed if not.
    let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    // Not a socket, or not this one: closed here, and the socket is bound afresh.
    rustix::net::sockopt::socket_type(&owned).ok()?;
    let listener = std::os::unix::net::UnixListener::from(owned);
    let addr = listener.local_addr().ok()?;
    if addr.as_pathname() != Some(path) {
        return None;
    }
    Some(listener)
}

/// Each rotated log file's size, and how many are kept besides the one written.
const LOG_FILE_BYTES: usize = 10 * 1024 * 1024;
const LOG_FILES_KEPT: usize = 5;

/// The service log, filtered by `RUST_LOG` (default `info`), as text or JSON lines: on stderr
/// (journald's, under the example unit), in colour only on a terminal and never with
/// `NO_COLOR`; or, with `--log-file PATH`, in `PATH`, rotated by `file-rotate` to `PATH.1` ...
/// once it passes [`LOG_FILE_BYTES`], mode 0600.
fn init_tracing(format: LogFormat, log_file: Option<&Path>) -> Result<(), ServiceError> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    // A second init (tests calling serve twice in one process) keeps the first subscriber.
    let _ = match (log_file, format) {
        (None, format) => {
            let builder = builder
                .with_writer(std::io::stderr)
                .with_ansi(super::colour_on(&std::io::stderr()));
            match format {
                LogFormat::Text => builder.try_init(),
                LogFormat::Json => builder.json().try_init(),
            }
        }
        (Some(path), format) => {
            let writer = Mutex::new(rotating_log(path)?);
            let builder = builder.with_writer(writer).with_ansi(false);
            match format {
                LogFormat::Text => builder.try_init(),
                LogFormat::Json => builder.json().try_init(),
            }
        }
    };
    Ok(())
}

/// `--log-file PATH`, checked here (made absolute, its directory created 0700, the file opened
/// 0600) so that the rotation crate, which aborts on a directory it cannot create, never meets
/// one.
fn rotating_log(
    path: &Path,
) -> Result<file_rotate::FileRotate<file_rotate::suffix::AppendCount>, ServiceError> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let path = std::path::absolute(path).map_err(io_err("resolve the --log-file path"))?;
    let dir = match path.parent() {
        Some(d) if path.file_name().is_some() => d.to_owned(),
        _ => {
            return Err(ServiceError::Io {
                op: "open the --log-file (it names no file)",
                source: io::Error::from(io::ErrorKind::InvalidInput),
            })
        }
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(io_err("create the --log-file directory"))?;
    let mut open = std::fs::OpenOptions::new();
    open.read(true).create(true).append(true).mode(0o600);
    open.open(&path).map_err(io_err("open the --log-file"))?;
    Ok(file_rotate::FileRotate::new(
        &path,
        file_rotate::suffix::AppendCount::new(LOG_FILES_KEPT),
        file_rotate::ContentLimit::BytesSurpassed(LOG_FILE_BYTES),
        file_rotate::compression::Compression::None,
        Some(open),
    ))
}

/// Binds `path` with mode 0600 from the start (umask), replacing a stale socket file: we hold the
/// service lock, so no live service owns it.
fn bind_socket(path: &Path) -> Result<tokio::net::UnixListener, ServiceError> {
    if let Some(listener) = inherited_listener(path) {
        tracing::info!("upgraded in place: the listening socket came across execve");
        listener
            .set_nonblocking(true)
            .map_err(io_err("configure the service socket"))?;
        return tokio::net::UnixListener::from_std(listener)
            .map_err(io_err("register the service socket"));
    }
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
    upgrade: &Upgrade,
) -> Result<Ended, ServiceError> {
    use tokio::signal::unix::{signal, SignalKind};
    // The handlers before the socket: a client that sees the socket may signal at once (a
    // SIGINT between the bind and the handler killed the service outright).
    let mut term = signal(SignalKind::terminate()).map_err(io_err("install SIGTERM handler"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(io_err("install SIGINT handler"))?;
    let mut hup = signal(SignalKind::hangup()).map_err(io_err("install SIGHUP handler"))?;
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
                        &refine_supervisor::end::assess::KERNEL_BOOT,
                        stall::sample::boottime(),
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
    let cred = stream.peer_cred()?;
    let me = rustix::process::getuid().as_raw();
    let (rd, mut wr) = stream.into_split();
    if cred.uid() != me && cred.uid() != 0 {
        if let Some(suppressed) = PEER_LOG.allow() {
            tracing::warn!(
                uid = cred.uid(),
                suppressed,
                "refused a peer with another uid"
            );
        }
        let resp = Response::err(ErrorKind::BadRequest, "permission denied: peer uid differs");
        return reply(&mut wr, &resp, true).await.map(drop);
    }
    // Several requests per connection, answered in order. D1: a request that is not whole
    // within the read timeout (an idle connection waiting that long for its next line) is
    // dropped with its descriptor (an idle client must not pin one for ever).
    let mut reader = tokio::io::BufReader::new(rd);
    let mut bound = Vec::new();
    let served = serve_conn(&state, &mut reader, &mut wr, &mut bound).await;
    if !bound.is_empty() {
        end_with_connection(&state, bound);
    }
    served
}

/// The requests of one connection, in order, until it ends; `bound` gathers the scopes
/// launched on it with `end_with_connection`.
async fn serve_conn(
    state: &Arc<Service>,
    reader: &mut tokio::io::BufReader<tokio::net::unix::OwnedReadHalf>,
    wr: &mut tokio::net::unix::OwnedWriteHalf,
    bound: &mut Vec<RegistrationId>,
) -> io::Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    loop {
        let mut line = Vec::new();
        let mut limited = (&mut *reader).take(MAX_MESSAGE as u64 + 1);
        let read = limited.read_until(b'\n', &mut line);
        match tokio::time::timeout(REQUEST_READ_TIMEOUT, read).await {
            Ok(r) => {
                r?;
            }
            Err(_) => {
                if line.is_empty() {
                    // Idle between requests: the connection is over, nothing is lost; but a
                    // connection that owns a live scope is what keeps the scope (it waits on).
                    if !owns_a_live_scope(state, bound).await {
                        return Ok(());
                    }
                    continue;
                }
                if let Some(suppressed) = SLOW_LOG.allow() {
                    tracing::warn!(
                        suppressed,
                        timeout_ms = refine_protocol::time::saturating_ms(REQUEST_READ_TIMEOUT),
                        "dropped a request not whole within the read timeout"
                    );
                }
                return Ok(());
            }
        }
        if line.is_empty() {
            // The client closed (a readiness probe, or after its last request).
            return wr.shutdown().await;
        }
        // A line past the limit cannot be resynchronised: refuse it and end the connection.
        let oversized = line.len() > MAX_MESSAGE;
        // `follow` answers with several lines (its output as it comes, then its end).
        let decoded = api::decode_request_explained(&line);
        if let (
            false,
            Ok(Request::Follow {
                id,
                stream,
                from_offset,
                from_unix_ms,
            }),
        ) = (oversized, &decoded)
        {
            let from = (*from_offset, *from_unix_ms);
            if !follow_request(state, wr, id.clone(), *stream, from).await? {
                return Ok(());
            }
            if line.last() != Some(&b'\n') {
                return wr.shutdown().await;
            }
            continue;
        }
        if let (false, Ok(Request::Events { .. })) = (oversized, &decoded) {
            let Ok(Request::Events {
                since,
                since_unix_ms,
                until_unix_ms,
                kinds,
                scope,
                follow,
            }) = decoded
            else {
                unreachable!("matched above")
            };
            let filter = Filter {
                kinds,
                scopes: scope.into_iter().collect(),
                since_unix_ms,
                until_unix_ms,
            };
            if !events_request(state, reader, wr, since, filter, follow).await? {
                return Ok(());
            }
            if line.last() != Some(&b'\n') {
                return wr.shutdown().await;
            }
            continue;
        }
        let binds = matches!(&decoded, Ok(Request::Launch(ask)) if ask.end_with_connection);
        let resp = answer(state, decoded).await;
        if binds {
            if let Some(Reply::Launched { id }) = &resp.result {
                bound.extend(id.parse::<RegistrationId>());
            }
        }
        let last = oversized || line.last() != Some(&b'\n');
        // A reply the client does not take within the write timeout ends the connection.
        if !reply(wr, &resp, last).await? || last {
            return Ok(());
        }
    }
}

/// V2: the journal's events after the cursor `since` that pass `filter`, one reply each, then
/// `events_end`; with `follow`, then each new one as it is written (inotify on the journal's
/// folder, in the event loop), until `until_unix_ms` passes or the client closes. `false`: the
/// connection is over (the client went, or did not take a reply within the write timeout).
async fn events_request(
    state: &Arc<Service>,
    reader: &mut tokio::io::BufReader<tokio::net::unix::OwnedReadHalf>,
    wr: &mut tokio::net::unix::OwnedWriteHalf,
    since: Option<String>,
    filter: Filter,
    follow: bool,
) -> io::Result<bool> {
    use tokio::io::AsyncBufReadExt;
    let mut cursor = match since.map(|s| s.parse::<Cursor>()).transpose() {
        Ok(c) => c,
        Err(why) => return reply(wr, &Response::err(ErrorKind::BadRequest, why), false).await,
    };
    let journal = Journal::of(&state.rt);
    let mut changes = if follow {
        let _ = refine_supervisor::store::durable::create_private_dir(journal.dir());
        ops::Changes::watch_dir(journal.dir())
    } else {
        ops::Changes::none()
    };
    // A request line sent meanwhile waits in the buffer for the end of the stream.
    let mut pending = false;
    loop {
        let j = journal.clone();
        let batch = match tokio::task::spawn_blocking(move || j.read_after(cursor)).await {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                let resp = Response::err(ErrorKind::Internal, error_chain(&e));
                return reply(wr, &resp, false).await;
            }
            Err(e) => {
                let resp = Response::err(ErrorKind::Internal, e.to_string());
                return reply(wr, &resp, false).await;
            }
        };
        for mut ev in batch.events {
            if !filter.matches(&ev) {
                continue;
            }
            let at = std::time::UNIX_EPOCH + Duration::from_millis(ev.time_unix_ms);
            ev.time = super::view::utc_ms(at);
            if !reply(wr, &Response::ok(Reply::Event(Box::new(ev))), false).await? {
                return Ok(false);
            }
        }
        cursor = Some(batch.end);
        let over = filter
            .until_unix_ms
            .is_some_and(|t| refine_supervisor::host::unix_ms() >= t);
        if !follow || over {
            let end = refine_protocol::docs::EventsEndDoc {
                cursor: batch.end.to_string(),
            };
            return reply(wr, &Response::ok(Reply::EventsEnd(end)), false).await;
        }
        if pending {
            changes.wait_async().await;
            continue;
        }
        tokio::select! {
            _ = changes.wait_async() => {}
            read = reader.fill_buf() => match read {
                Ok([]) | Err(_) => return Ok(false),
                Ok(_) => pending = true,
            },
        }
    }
}

/// Whether a scope launched on this connection with `end_with_connection` still lives.
async fn owns_a_live_scope(state: &Arc<Service>, bound: &[RegistrationId]) -> bool {
    if bound.is_empty() {
        return false;
    }
    let (st, ids) = (state.clone(), bound.to_vec());
    tokio::task::spawn_blocking(move || {
        ids.iter().any(|id| {
            st.rt
                .read_registration(*id)
                .is_ok_and(|reg| ops::ended(&st.rt, &reg).is_none())
        })
    })
    .await
    .unwrap_or(true)
}

/// The connection that launched `bound` with `end_with_connection` has ended: each of them
/// still live is stopped, SIGTERM first and the service's shutdown grace for it, in parallel
/// and off the connection (whose task is over).
fn end_with_connection(state: &Arc<Service>, bound: Vec<RegistrationId>) {
    for id in bound {
        let st = state.clone();
        tokio::spawn(async move {
            let rt = st.clone();
            let reg = tokio::task::spawn_blocking(move || {
                let reg = rt.rt.read_registration(id).ok()?;
                ops::ended(&rt.rt, &reg).is_none().then_some(reg)
            });
            let Ok(Some(reg)) = reg.await else { return };
            let grace = Some((st.shutdown_grace, Signal::TERM));
            let doc = stop_async(&st, reg, StopCause::Operator, grace).await;
            tracing::info!(%id, result = %json_line(&doc), "stop: its connection ended");
        });
    }
}

/// The reply to one request line.
async fn answer(state: &Arc<Service>, decoded: Result<Request, String>) -> Response {
    match decoded {
        Err(why) => Response::err(ErrorKind::BadRequest, format!("bad request: {why}")),
        Ok(Request::Launch(spec)) => launch_request_async(state, spec).await,
        Ok(Request::Stop { id, grace, signal }) => stop_request(state, id, grace, signal).await,
        Ok(Request::Wait { id, until, timeout }) => wait_request(state, id, until, timeout).await,
        Ok(Request::Input { id, data, close }) => {
            let st = state.clone();
            tokio::task::spawn_blocking(move || input_request(&st, &id, data.as_bytes(), close))
                .await
                .unwrap_or_else(|e| Response::err(ErrorKind::Internal, e.to_string()))
        }
        Ok(Request::Signal { id, signal }) => {
            let st = state.clone();
            tokio::task::spawn_blocking(move || signal_request(&st, &id, &signal))
                .await
                .unwrap_or_else(|e| Response::err(ErrorKind::Internal, e.to_string()))
        }
        Ok(req) => {
            let st = state.clone();
            tokio::task::spawn_blocking(move || handle(&st, req))
                .await
                .unwrap_or_else(|e| Response::err(ErrorKind::Internal, e.to_string()))
        }
    }
}

/// O12 for the socket: `text` is an id, a prefix of one (at least 4 hex digits) or a label,
/// resolved as the CLI resolves it; a refusal is `not_found` or, for an ambiguous one,
/// `bad_request` naming the candidates on one line.
fn resolve_id(
    rt: &Runtime,
    text: &str,
    intent: resolve::Intent,
) -> Result<RegistrationId, Response> {
    resolve::resolve(Some(rt), text, intent).map_err(|e| match e {
        CliError::UnknownId(_) => Response::err(ErrorKind::NotFound, format!("no scope {text:?}")),
        CliError::Registry(r) => registry_response(r),
        other => Response::err(
            ErrorKind::BadRequest,
            other.to_string().lines().collect::<Vec<_>>().join("; "),
        ),
    })
}

/// A `wait` request: its scope resolved, then polled as `wait` polls it until it ended or the
/// timeout passed.
async fn wait_request(
    state: &Arc<Service>,
    id: String,
    until: api::WaitUntil,
    timeout: Option<Duration>,
) -> Response {
    let st = state.clone();
    let reg = tokio::task::spawn_blocking(move || {
        let id = resolve_id(&st.rt, &id, resolve::Intent::Read)?;
        st.rt.read_registration(id).map_err(registry_response)
    })
    .await;
    let reg = match reg {
        Ok(Ok(reg)) => Arc::new(reg),
        Ok(Err(resp)) => return resp,
        Err(e) => return Response::err(ErrorKind::Internal, e.to_string()),
    };
    let end = timeout.map(|t| tokio::time::Instant::now() + t);
    let for_ready = until == api::WaitUntil::Ready;
    if for_ready && reg.readiness.is_none() {
        return Response::err(
            ErrorKind::BadRequest,
            "`until: ready` is for a launch with `ready`: this one was ready at its execve",
        );
    }
    loop {
        let (st, r) = (state.clone(), reg.clone());
        let (ended, ready) = tokio::task::spawn_blocking(move || {
            let ready = for_ready
                .then(|| st.rt.read_ready(r.id).ok().flatten().map(|r| r.state))
                .map(|s| s.unwrap_or(refine_protocol::docs::ReadyState::Starting));
            (ops::ended(&st.rt, &r), ready)
        })
        .await
        .unwrap_or((None, None));
        let decided = ready.is_some_and(|s| s != refine_protocol::docs::ReadyState::Starting);
        let timed_out = end.is_some_and(|end| tokio::time::Instant::now() >= end);
        if decided && ended.is_none() {
            return Response::ok(Reply::Wait(refine_protocol::docs::WaitDoc {
                scopes: vec![refine_protocol::docs::WaitScope {
                    id: reg.id.to_string(),
                    state: State::Live,
                    exit_code: None,
                    ready,
                }],
                timed_out: false,
            }));
        }
        if ended.is_some() || timed_out {
            let (state, exit_code) = match ended {
                Some((s, code)) => (s, Some(code)),
                None => (State::Live, None),
            };
            return Response::ok(Reply::Wait(refine_protocol::docs::WaitDoc {
                scopes: vec![refine_protocol::docs::WaitScope {
                    id: reg.id.to_string(),
                    state,
                    exit_code,
                    ready,
                }],
                timed_out: ended.is_none(),
            }));
        }
        let nap = Duration::from_millis(100);
        match end {
            Some(end) => tokio::time::sleep_until(end.min(tokio::time::Instant::now() + nap)).await,
            None => tokio::time::sleep(nap).await,
        }
    }
}

/// A `follow` request. The waits between reads are tasks of the event loop (inotify through
/// the reactor, or its backstop): an idle follower holds no thread. Each read is a short job
/// of the blocking pool, at most [`FOLLOW_TURN`] chunks, written before the next is read, so
/// the reader keeps the client's pace; a client that does not read is dropped by the write
/// timeout. `false`: the connection is over.
async fn follow_request(
    state: &Arc<Service>,
    wr: &mut tokio::net::unix::OwnedWriteHalf,
    id: String,
    stream: api::FollowStream,
    from: (Option<u64>, Option<u64>),
) -> io::Result<bool> {
    let st = state.clone();
    let start = tokio::task::spawn_blocking(move || Follower::start(&st.rt, &id, stream, from))
        .await
        .unwrap_or_else(|e| Err(Response::err(ErrorKind::Internal, e.to_string())));
    let (mut follower, mut changes) = match start {
        Ok(started) => started,
        Err(resp) => return reply(wr, &resp, false).await,
    };
    loop {
        let st = state.clone();
        let turn = tokio::task::spawn_blocking(move || {
            let turn = follower.turn(&st.rt);
            (follower, turn)
        })
        .await;
        let (back, (replies, next)) = match turn {
            Ok(t) => t,
            Err(e) => {
                let resp = Response::err(ErrorKind::Internal, e.to_string());
                return reply(wr, &resp, false).await;
            }
        };
        follower = back;
        for resp in &replies {
            if !reply(wr, resp, false).await? {
                return Ok(false);
            }
        }
        match next {
            Next::More => {}
            Next::Ended => return Ok(true),
            Next::Idle => {
                changes.rewatch(&[follower.path.clone()]);
                changes.wait_async().await;
            }
        }
    }
}

/// The largest chunk of one `output` reply (before base64).
const FOLLOW_CHUNK: usize = 64 * 1024;
/// The most chunks one turn of a follower reads before they are written.
const FOLLOW_TURN: usize = 4;

/// `follow`'s reader: the artifact from its offset, and when the scope has ended as `logs -f`
/// means it (not live, its launcher let go: the output is all captured).
struct Follower {
    reg: Registration,
    stream: api::FollowStream,
    path: std::path::PathBuf,
    offset: u64,
    file: Option<std::fs::File>,
}

/// What a follower's turn leaves to do.
enum Next {
    /// The turn stopped at its chunk limit: read on at once.
    More,
    /// Nothing new: wait for a change.
    Idle,
    /// `followed` was sent.
    Ended,
}

impl Follower {
    /// The scope and the start offset (from the time index for `from_unix_ms`), and the watch
    /// on what can change; a refusal is the reply.
    fn start(
        rt: &Runtime,
        text: &str,
        stream: api::FollowStream,
        (from_offset, from_unix_ms): (Option<u64>, Option<u64>),
    ) -> Result<(Follower, ops::Changes), Response> {
        let reg = resolve_id(rt, text, resolve::Intent::Read)
            .and_then(|id| rt.read_registration(id).map_err(registry_response))?;
        let which = match stream {
            api::FollowStream::Stdout => Stream::Stdout,
            api::FollowStream::Stderr => Stream::Stderr,
        };
        let path = rt.log_path(reg.id, which);
        let offset = match (from_offset, from_unix_ms) {
            (Some(_), Some(_)) => {
                return Err(Response::err(
                    ErrorKind::BadRequest,
                    "follow takes from_offset or from_unix_ms, not both",
                ))
            }
            (Some(at), None) => at,
            (None, None) => 0,
            (None, Some(ms)) => {
                let index =
                    refine_supervisor::store::output_index::read(&rt.index_path(reg.id, which))
                        .map_err(|e| {
                            Response::err(ErrorKind::Internal, format!("read the time index: {e}"))
                        })?
                        .ok_or_else(|| {
                            Response::err(
                        ErrorKind::BadRequest,
                        "this scope's output has no time index (its launcher captured it): \
                         use from_offset",
                    )
                        })?;
                let since = std::time::UNIX_EPOCH + Duration::from_millis(ms);
                match index.range(Some(since), None) {
                    // Nothing moved since then: from what is there now.
                    (0, 0) => std::fs::metadata(&path).map_or(0, |m| m.len()),
                    (start, _) => start,
                }
            }
        };
        let changes = ops::Changes::watch(rt, reg.id, std::slice::from_ref(&path));
        let follower = Follower {
            reg,
            stream,
            path,
            offset,
            file: None,
        };
        Ok((follower, changes))
    }

    /// Reads at most [`FOLLOW_TURN`] chunks past the offset (F3: the artifact may be created
    /// by its first byte); with none, checks whether the scope had ended, and then reads once
    /// more, so that what was written before the end is all sent before `followed`.
    fn turn(&mut self, rt: &Runtime) -> (Vec<Response>, Next) {
        let mut replies = self.read();
        if replies.len() == FOLLOW_TURN {
            return (replies, Next::More);
        }
        if !replies.is_empty() {
            return (replies, Next::Idle);
        }
        if ops::assess(rt, &self.reg).state == State::Live || !rt.let_go(self.reg.id) {
            return (replies, Next::Idle);
        }
        replies = self.read();
        if !replies.is_empty() {
            return (replies, Next::More);
        }
        replies.push(Response::ok(Reply::Followed {
            stream: self.stream,
            end_offset: self.offset,
            complete: !rt.capture_receipt_path(self.reg.id).exists(),
        }));
        (replies, Next::Ended)
    }

    /// Up to [`FOLLOW_TURN`] `output` replies of what the artifact holds past the offset.
    fn read(&mut self) -> Vec<Response> {
        use std::os::unix::fs::FileExt;
        if self.file.is_none() {
            self.file = std::fs::File::open(&self.path).ok();
        }
        let mut replies = Vec::new();
        let Some(f) = &self.file else {
            return replies;
        };
        let mut buf = vec![0u8; FOLLOW_CHUNK];
        while replies.len() < FOLLOW_TURN {
            match f.read_at(&mut buf, self.offset) {
                Ok(0) => break,
                Ok(n) => {
                    replies.push(Response::ok(Reply::Output {
                        stream: self.stream,
                        offset: self.offset,
                        data_b64: api::base64(&buf[..n]),
                    }));
                    self.offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        replies
    }
}

/// An `input` request: the bytes to the workload's stdin pipe, then its close if asked. A
/// scope without one (not launched here with `input: true`, or already closed) is
/// `bad_request`; a workload that no longer reads has its pipe dropped.
fn input_request(state: &Service, text: &str, data: &[u8], close: bool) -> Response {
    let id = match resolve_id(&state.rt, text, resolve::Intent::Change) {
        Ok(id) => id,
        Err(resp) => return resp,
    };
    let inputs = state.inputs.lock().unwrap_or_else(|p| p.into_inner());
    let Some(writer) = inputs.get(&id).cloned() else {
        return Response::err(
            ErrorKind::BadRequest,
            format!("scope {id} has no open input: launch it through the service with input: true"),
        );
    };
    drop(inputs);
    let written = if data.is_empty() {
        Ok(())
    } else {
        writer.write_input(data)
    };
    if let Err(e) = written {
        writer.close_input();
        state
            .inputs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        return Response::err(
            ErrorKind::BadRequest,
            format!("input to {id}: {}", error_chain(&e)),
        );
    }
    if close {
        writer.close_input();
        state
            .inputs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }
    Response::ok(Reply::Input {
        id: id.to_string(),
        written: data.len() as u64,
        closed: close,
    })
}

/// A `signal` request: the signal to the workload's process group through a verified member.
fn signal_request(state: &Service, id: &str, signal: &str) -> Response {
    let sig = match refine_supervisor::host::parse_signal(signal) {
        Ok(sig) => sig,
        Err(e) => return Response::err(ErrorKind::BadRequest, e),
    };
    let reg = match resolve_id(&state.rt, id, resolve::Intent::Change)
        .and_then(|id| state.rt.read_registration(id).map_err(registry_response))
    {
        Ok(reg) => reg,
        Err(resp) => return resp,
    };
    match stop::signal_politely(&state.rt, &reg, sig, &stop::StopOptions::default()) {
        Ok(sent) => Response::ok(Reply::Signalled {
            id: reg.id.to_string(),
            delivered: !sent.is_empty(),
        }),
        Err(e) => Response::err(ErrorKind::Internal, error_chain(&e)),
    }
}

fn handle(state: &Service, req: Request) -> Response {
    let rt = &state.rt;
    let parse = |id: &str| resolve_id(rt, id, resolve::Intent::Read);
    let result = match req {
        // Taken before the blocking pool (`handle_conn`): admission waits on a timer.
        Request::Launch(_) => Err(Response::err(
            ErrorKind::Internal,
            "a launch is not handled here",
        )),
        Request::List { all } => ops::list_views(rt, all)
            .map(Reply::List)
            .map_err(registry_response),
        Request::Show { id } => parse(&id).and_then(|id| {
            ops::show_doc(rt, id)
                .map(|doc| Reply::Show(Box::new(doc)))
                .map_err(registry_response)
        }),
        // Taken before the blocking pool (`answer`): a grace or a wait waits on a timer.
        Request::Stop { .. }
        | Request::Wait { .. }
        | Request::Signal { .. }
        | Request::Input { .. }
        | Request::Follow { .. }
        | Request::Events { .. } => Err(Response::err(
            ErrorKind::Internal,
            "a stop, wait, signal, input, follow or events is not handled here",
        )),
    };
    result.map(Response::ok).unwrap_or_else(|e| e)
}

/// A stop request: its grace checked, the record read (blocking pool), then [`stop_async`].
async fn stop_request(
    state: &Arc<Service>,
    id: String,
    grace: Option<Duration>,
    signal: Option<String>,
) -> Response {
    let grace = match (grace, signal) {
        (None, None) => None,
        (None, Some(_)) => {
            return Response::err(
                ErrorKind::BadRequest,
                "`signal` is the grace's signal: it needs `grace_ms`".to_owned(),
            )
        }
        (Some(g), None) => Some((g, Signal::TERM)),
        (Some(g), Some(text)) => match refine_supervisor::host::parse_signal(&text) {
            Ok(sig) => Some((g, sig)),
            Err(e) => return Response::err(ErrorKind::BadRequest, e),
        },
    };
    let st = state.clone();
    let reg = tokio::task::spawn_blocking(move || {
        let id = resolve_id(&st.rt, &id, resolve::Intent::Change)?;
        st.rt.read_registration(id).map_err(registry_response)
    });
    let reg = match reg.await {
        Ok(Ok(reg)) => reg,
        Ok(Err(resp)) => return resp,
        Err(e) => return Response::err(ErrorKind::Internal, e.to_string()),
    };
    let id = reg.id;
    let doc = stop_async(state, reg, StopCause::Operator, grace).await;
    tracing::info!(%id, result = %json_line(&doc), "stop");
    Response::ok(Reply::Stop(Box::new(doc)))
}

fn registry_response(e: RegistryError) -> Response {
    let kind = match e {
        RegistryError::NotFound(_) => ErrorKind::NotFound,
        RegistryError::Corrupt { .. } => ErrorKind::Corrupt,
        _ => ErrorKind::Internal,
    };
    Response::err(kind, error_chain(&e))
}

/// How long the service lets the requests under way be answered once its launches have ended.
const ANSWERS_AT_SHUTDOWN: Duration = Duration::from_secs(2);

/// How long shutdown waits for its launches' engines to record their results after the stops.
const ENGINES_AT_SHUTDOWN: Duration = Duration::from_secs(10);

/// W8: SIGTERM to every live launch of this service, the grace, then the shared stop for the
/// rest; then the engines are joined (bounded) so each result is on disk.
fn shutdown(state: &Service, grace: Duration) {
    let rt = &state.rt;
    // D3: nothing more is admitted, waiters included; a launch under way finishes first and is
    // in the snapshot below.
    *state.closed.lock().unwrap_or_else(|p| p.into_inner()) = true;
    state.closing.send_replace(true);
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
        grace_ms = refine_protocol::time::saturating_ms(grace),
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
fn maintenance(state: &Arc<Service>, keep: Housekeeping) {
    let rt = &state.rt;
    let started = Instant::now();
    let ours = state.launched.lock().map(|l| l.clone()).unwrap_or_default();
    // This service's own launches: their engines enforce deadlines and settle. L5: a guardian
    // this process's earlier image launched is still its child after an upgrade in place.
    let pass = maintenance_pass(rt, |id| ours.contains(&id), reap_inherited_guardian);
    let (open, settled) = (pass.open, pass.settled);
    for due in pass.due {
        let (id, cause) = (due.reg.id, due.cause);
        match due.grace {
            None => {
                let doc = state.stop(&due.reg, cause, None);
                tracing::info!(%id, ?cause, result = %json_line(&doc), "deadline stop");
            }
            // D2: a grace does not hold the maintenance pass: it runs as a task of its own
            // (once per registration), its wait a timer.
            Some(grace) => graced_deadline_stop(state, due.reg, cause, grace),
        }
    }
    sample_capacity(rt);
    let elapsed_us = refine_protocol::time::saturating_us(started.elapsed());
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

/// Reaps the registration's guardian if it is an exited child of this process (launched by
/// this process's image before an upgrade in place), by its pid: a zombie keeps its pid and
/// start time, so the witness names it and nothing else.
fn reap_inherited_guardian(reg: &Registration) {
    use refine_supervisor::kernel::procfs;
    let Ok(Some(stat)) = procfs::stat_of(&reg.hello.guardian) else {
        return;
    };
    if stat.ppid as u32 == std::process::id() && stat.state.is_exited() {
        let _ = rustix::process::waitpid(Some(stat.pid), rustix::process::WaitOptions::NOHANG);
    }
}

/// A deadline stop with a grace, for a registration this service did not launch, as a task in
/// the event loop; a registration with one under way is not stopped again by the next pass.
fn graced_deadline_stop(
    state: &Arc<Service>,
    reg: Registration,
    cause: StopCause,
    grace: Duration,
) {
    let id = reg.id;
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let fresh = state
        .graced
        .lock()
        .map(|mut g| g.insert(id))
        .unwrap_or(false);
    if !fresh {
        return;
    }
    let st = state.clone();
    rt.spawn(async move {
        let doc = stop_async(&st, reg, cause, Some((grace, Signal::TERM))).await;
        tracing::info!(%id, ?cause, result = %json_line(&doc), "deadline stop");
        if let Ok(mut g) = st.graced.lock() {
            g.remove(&id);
        }
    });
}

/// Retention and forgetting over the whole history (R1–R4); the only O(history) part of the
/// service, run at start and then every [`RETENTION_EVERY`].
fn housekeeping(state: &Service, keep: Housekeeping) {
    let rt = &state.rt;
    let started = Instant::now();
    let (retired, forgot) = ops::housekeeping(rt, keep.retain, keep.forget_after);
    match retired {
        Ok(r) if r.deleted_files > 0 => {
            tracing::info!(
                files = r.deleted_files,
                bytes = r.deleted_bytes,
                "retention"
            )
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %error_chain(&e), "retention failed"),
    }
    match forgot {
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
    let elapsed_ms = refine_protocol::time::saturating_ms(started.elapsed());
    tracing::info!(elapsed_ms, "housekeeping");
}

fn sample_capacity(rt: &Runtime) {
    match ops::capacity(Some(rt), None) {
        Ok(c) => tracing::debug!(
            slots = c.slots,
            live = c.live,
            unverified = c.unverified,
            free = c.free,
            "capacity"
        ),
        Err(e) => tracing::warn!(error = %error_chain(&e), "capacity sampling failed"),
    }
}
