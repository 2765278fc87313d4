//! The per-port service (`serve`, SPEC O2).
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

use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use refine_protocol::api::{self, ErrorKind, LaunchAsk, Reply, Request, Response, MAX_MESSAGE};
use refine_protocol::{Registration, RegistrationId, StopCause};

use super::docs::{json_line, to_value, RecoverAction, State};
use super::error::{io_err, CliError, ServiceError};
use super::ops::{self, admit, assess_one, launch_request, recover_all, retire, stop_one};
use crate::deadline::{instant_of_unix_ms, Deadlines, Expired};
use crate::error_chain;
use crate::fence;
use crate::launch::Supervisor;
use crate::registry::{RegistryError, Runtime};
use crate::retention;
use crate::stall::{self, sample::Watcher, StallConfig};

/// Launches for the service: the engine keeps running on its own thread; the handle is not
/// awaited (the record and the receipt carry the result), so the service holds no per-launch
/// state beyond the id.
fn launch_detached(sup: &Supervisor, spec: LaunchAsk) -> Result<RegistrationId, Response> {
    let rt = sup.runtime();
    let slot = admit(rt, &spec).map_err(|e| match e {
        ServiceError::NoCapacity { .. } => Response::err(ErrorKind::NoCapacity, e.to_string()),
        other => Response::err(ErrorKind::BadRequest, other.to_string()),
    })?;
    let req =
        launch_request(&spec).map_err(|e| Response::err(ErrorKind::BadRequest, e.to_string()))?;
    let handle = sup
        .launch(req)
        .map_err(|e| Response::err(ErrorKind::LaunchFailed, error_chain(&e)))?;
    drop(slot);
    Ok(handle.id())
}

// ---------------------------------------------------------------------------------------------
// Service.

struct Service {
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
    watch: StallConfig,
) -> Result<(), ServiceError> {
    let rt = Runtime::open(home, port)?;
    let lock = rt.service_lock_path();
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

    crate::limits::raise_nofile_limit();
    let state = Arc::new(Service {
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
    let result = runtime.block_on(serve_async(state.clone(), maintenance_every, retain, watch));
    // Guardians are not waited for: they outlive the service by design.
    runtime.shutdown_background();
    let _ = std::fs::remove_file(state.rt.socket_path());
    tracing::info!("service stopped");
    result
}

fn init_tracing(rt: &Runtime) -> Result<(), ServiceError> {
    let path = rt.service_log_path();
    let file =
        crate::durable::open_private(std::fs::OpenOptions::new().create(true).append(true), &path)
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
    state: Arc<Service>,
    every: Duration,
    retain: Duration,
    watch: StallConfig,
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

    let stall = {
        let rt = state.rt.clone();
        tokio::spawn(async move {
            let watcher = Arc::new(Mutex::new(Watcher::new(watch)));
            let mut tick = tokio::time::interval(watch.period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let (rt, watcher) = (rt.clone(), watcher.clone());
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
    Ok(())
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
        Request::Launch(spec) => launch_detached(&state.sup, spec).map(|id| {
            if let Ok(mut l) = state.launched.lock() {
                l.insert(id);
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
        Request::Stop { id } => parse(&id).and_then(|id| {
            let reg = rt.read_registration(id).map_err(registry_response)?;
            let doc = stop_one(rt, &reg, StopCause::Operator);
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

/// Retention runs at start and then at most this often (its limit is days, not seconds).
const RETENTION_EVERY: Duration = Duration::from_secs(600);

/// One maintenance pass: deadlines of registrations this service did not launch, retention,
/// capacity sampling. Every failure is logged and the loop goes on.
fn maintenance(state: &Service, retain: Duration) {
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
            if let Some(cause) = deadline_passed(&reg) {
                if assess_one(rt, &reg).state == State::Live {
                    let doc = stop_one(rt, &reg, cause);
                    tracing::info!(%id, ?cause, result = %json_line(&doc), "deadline stop");
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

/// Which deadline of `reg` has passed, if any: completion from the original start; idle from the
/// last artifact write (falling back to the start).
fn deadline_passed(reg: &Registration) -> Option<StopCause> {
    let mut deadlines = Deadlines::new(&reg.limits, instant_of_unix_ms(reg.started_at_unix_ms));
    for p in [&reg.stdout_path, &reg.stderr_path] {
        if let Some(written) = std::fs::metadata(p)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        {
            deadlines.activity(instant_of_unix_ms(written.as_millis() as u64));
        }
    }
    deadlines.expired(Instant::now()).map(|e| match e {
        Expired::Completion => StopCause::CompletionDeadline,
        Expired::Idle => StopCause::IdleDeadline,
    })
}
