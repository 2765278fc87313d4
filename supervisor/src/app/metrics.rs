//! The service's fleet view (`serve --metrics ADDR`, SPEC F2): Prometheus text exposition on
//! `GET /metrics`, one scrape target per node.
//!
//! The metrics are kept in a [`prometheus::Registry`] and encoded by its `TextEncoder` (text
//! format 0.0.4); nothing here writes exposition text by hand. Counters are bumped where the
//! service sees the event (a launch request, a launch's result on its engine thread, a stop);
//! gauges of scope states and capacity are set at scrape time from one [`Census`] of the open
//! registrations, so a scrape costs what a `ps` of the live scopes costs, and history is never
//! read.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `refine_scopes` | gauge | `state` (`live`, `unverified`, `corrupt`), `kind` |
//! | `refine_scopes_unverified` | gauge | |
//! | `refine_scopes_health` | gauge | `state` (`starting`, `healthy`, `unhealthy`): open scopes with a health check (H7), at scrape time |
//! | `refine_scopes_ready` | gauge | `state` (`starting`, `ready`, `failed`): open scopes with a readiness (H6), at scrape time |
//! | `refine_scopes_stalled`, `refine_scopes_silent` | gauge | (set by the stall watch, H3) |
//! | `refine_capacity_slots`, `refine_capacity_free` | gauge | |
//! | `refine_launch_requests_total` | counter | `result` (`started`, `no_capacity`, `rejected`, `failed`) |
//! | `refine_launches_total` | counter | `outcome` (S7: `completed`, `timed_out`, `stopped`, ...) |
//! | `refine_stop_duration_seconds` | histogram | `cause` |
//! | `refine_stop_failures_total` | counter | `cause` (V3: a stop that did not prove the end; `residue` for what outlived a workload) |
//! | `refine_receipt_failures_total` | counter | `reason` (why a scope is unverified) |
//! | `refine_build_info` | gauge (1) | `version`, `commit`, `dirty`, `class` (V1; `unknown` where not known) |
//! | `refine_guardian_build_info` | gauge (1) | the same, of the guardian it launches (absent when that carries none) |
//! | `refine_scope_cpu_seconds_total` | counter | `kind` (F4: from the scopes' own cgroups) |
//! | `refine_scope_memory_peak_bytes` | histogram | `kind` (F4: `memory.peak`) |
//! | `refine_scope_oom_kills_total` | counter | `kind` (F4: `memory.events` `oom_kill`) |
//!
//! Every labelled series exists from the start at zero (each result, outcome, stop cause,
//! reason and kind), so the first scrape shows them all, except the cgroup accounting (F4): a
//! `refine_scope_*` series appears with the first ended scope of its kind whose cgroup
//! accounted it, and is absent (not 0) where there is none: the `/proc` path, or for memory
//! and OOM kills, no memory controller for the scopes' cgroups.
//!
//! The HTTP side is `hyper`'s HTTP/1.1 server on the service's tokio runtime: one request per
//! connection, its head at most [`MAX_REQUEST_HEAD`] bytes within [`REQUEST_TIMEOUT`]; `GET`
//! and `HEAD` of `/metrics` (a query string is ignored) answer the exposition.
//!
//! # Caveats
//! - `refine_receipt_failures_total` counts a registration once, at the first scrape that finds it
//!   unverified (it is counted again only if it was seen verified or live in between); a scope
//!   that turned unverified and was forgotten between two scrapes is not counted.
//! - `refine_launches_total` counts launches of this service only (`run` in the foreground reports
//!   its own outcome); its counters start at zero with each service. A stop of one of them from
//!   the command line (`refine-supervisor stop ID`, in its own process) is counted there as
//!   `stopped`, but its latency is not in `refine_stop_duration_seconds`, which observes the
//!   stops this service makes (its `stop --json` has the timings).
//! - The listener has no authentication: bind it to loopback or a management network.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus::{
    CounterVec, Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};
use refine_protocol::{Kind, RegistrationId};

use super::docs::State;
use refine_protocol::docs::{UnverifiedCheck, Vocabulary};
use refine_supervisor::host::{
    capacity_probe, CapacityPolicy, CapacityReport, Census, LaunchOutcome, LaunchResult,
    ResultHook, Runtime, UNKNOWN_KIND,
};

/// The longest request head the listener reads (`hyper`'s smallest buffer).
pub const MAX_REQUEST_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request head.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The labels of `refine_build_info` and `refine_guardian_build_info`, in their order.
const BUILD_LABELS: [&str; 4] = ["class", "commit", "dirty", "version"];

/// A build's label values (V1): what is not known is `unknown`.
fn build_labels(b: &refine_protocol::BuildProvenance) -> [&str; 4] {
    [
        b.class.as_str(),
        b.commit.as_deref().unwrap_or("unknown"),
        match b.dirty {
            Some(true) => "true",
            Some(false) => "false",
            None => "unknown",
        },
        &b.version,
    ]
}

/// Stop latency buckets, in seconds: a stop usually takes milliseconds; a quiescence retry or a
/// slow tree takes seconds.
const STOP_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The kinds, as the labelled series carry them.
const KINDS: [Kind; 4] = [Kind::Agent, Kind::Quality, Kind::Command, Kind::Terminal];

/// The causes of `refine_stop_duration_seconds`: the service's own stops (operator and
/// deadlines), and the outcomes for which a launch's engine stops its scope itself.
const STOP_CAUSES: [&str; 8] = [
    "operator",
    "completion_deadline",
    "idle_deadline",
    "timed_out",
    "idle_timeout",
    "cancelled",
    "output_limit",
    "capture_fault",
];

/// The cause `refine_stop_failures_total` gives a failed stop of a launch's residue (what
/// outlived its workload).
const RESIDUE: &str = "residue";

/// How a launch request to the service ended.
#[derive(Debug, Clone, Copy)]
pub enum RequestResult {
    /// Registered and told to start.
    Started,
    /// Refused by capacity admission.
    NoCapacity,
    /// A malformed ask (empty command, bad limits).
    Rejected,
    /// The engine could not launch it.
    Failed,
}

impl RequestResult {
    const ALL: [RequestResult; 4] = [
        RequestResult::Started,
        RequestResult::NoCapacity,
        RequestResult::Rejected,
        RequestResult::Failed,
    ];

    fn name(self) -> &'static str {
        match self {
            RequestResult::Started => "started",
            RequestResult::NoCapacity => "no_capacity",
            RequestResult::Rejected => "rejected",
            RequestResult::Failed => "failed",
        }
    }
}

/// The service's metrics.
pub struct Metrics {
    registry: Registry,
    scopes: IntGaugeVec,
    /// H6: open scopes with a readiness, by where it stands.
    ready: IntGaugeVec,
    /// H7: open scopes with a health check, by where it stands.
    health: IntGaugeVec,
    unverified: IntGauge,
    /// Set by [`Metrics::set_watch`] only.
    #[allow(dead_code)]
    stalled: IntGauge,
    #[allow(dead_code)]
    silent: IntGauge,
    slots: IntGauge,
    free: IntGauge,
    requests: IntCounterVec,
    launches: IntCounterVec,
    stop_seconds: HistogramVec,
    stop_failures: IntCounterVec,
    receipt_failures: IntCounterVec,
    /// What the scopes of this service's launches cost (H4), from their receipts.
    tree_cpu_seconds: CounterVec,
    tree_max_rss_bytes: HistogramVec,
    /// What the scopes' own cgroups accounted (F4), at their end; absent where not available.
    scope_cpu_seconds: CounterVec,
    scope_memory_peak_bytes: HistogramVec,
    scope_oom_kills: IntCounterVec,
    /// Registrations already counted in `receipt_failures` (those unverified at the last scrape).
    counted_unverified: Mutex<HashSet<RegistrationId>>,
}

/// A metric this module defines is rejected by the registry (a name twice): a programming error.
fn register<C: prometheus::core::Collector + Clone + 'static>(r: &Registry, c: C) -> C {
    r.register(Box::new(c.clone()))
        .expect("metric names are unique and valid");
    c
}

impl Metrics {
    pub fn new() -> Metrics {
        let r = Registry::new();
        let gauge =
            |name: &str, help: &str| register(&r, IntGauge::new(name, help).expect("valid metric"));
        let counter = |name: &str, help: &str, label: &str| {
            register(
                &r,
                IntCounterVec::new(Opts::new(name, help), &[label]).expect("valid metric"),
            )
        };
        let scopes = register(
            &r,
            IntGaugeVec::new(
                Opts::new(
                    "refine_scopes",
                    "Open scopes (not proven exited) by state and kind, at scrape time.",
                ),
                &["state", "kind"],
            )
            .expect("valid metric"),
        );
        let ready = register(
            &r,
            IntGaugeVec::new(
                Opts::new(
                    "refine_scopes_ready",
                    "Open scopes launched with a readiness (H6), by where it stands, at scrape time.",
                ),
                &["state"],
            )
            .expect("valid metric"),
        );
        let health = register(
            &r,
            IntGaugeVec::new(
                Opts::new(
                    "refine_scopes_health",
                    "Open scopes launched with a health check (H7), by where it stands, at scrape time.",
                ),
                &["state"],
            )
            .expect("valid metric"),
        );
        let stop_seconds = register(
            &r,
            HistogramVec::new(
                HistogramOpts::new(
                    "refine_stop_duration_seconds",
                    "Shared stops by this service, from the request to the proven end.",
                )
                .buckets(STOP_BUCKETS.to_vec()),
                &["cause"],
            )
            .expect("valid metric"),
        );
        let tree_cpu_seconds = register(
            &r,
            CounterVec::new(
                Opts::new(
                    "refine_tree_cpu_seconds_total",
                    "CPU time of whole scopes (every process of the tree) of this service's \
                     launches, from their receipts, by kind and mode (user, system).",
                ),
                &["kind", "mode"],
            )
            .expect("valid metric"),
        );
        let tree_max_rss_bytes = register(
            &r,
            HistogramVec::new(
                HistogramOpts::new(
                    "refine_tree_max_rss_bytes",
                    "Largest peak RSS of any process of a scope's tree, from its receipt.",
                )
                .buckets(
                    prometheus::exponential_buckets(1024.0 * 1024.0, 4.0, 8)
                        .expect("valid buckets"),
                ),
                &["kind"],
            )
            .expect("valid metric"),
        );
        let scope_cpu_seconds = register(
            &r,
            CounterVec::new(
                Opts::new(
                    "refine_scope_cpu_seconds_total",
                    "CPU time of ended scopes of this service's launches, from their own cgroups \
                     (cpu.stat usage_usec, F4), by kind; absent where scopes get no cgroup.",
                ),
                &["kind"],
            )
            .expect("valid metric"),
        );
        let scope_memory_peak_bytes = register(
            &r,
            HistogramVec::new(
                HistogramOpts::new(
                    "refine_scope_memory_peak_bytes",
                    "memory.peak of ended scopes' own cgroups (F4), by kind; absent where the \
                     memory controller is not enabled for them.",
                )
                .buckets(
                    prometheus::exponential_buckets(1024.0 * 1024.0, 4.0, 8)
                        .expect("valid buckets"),
                ),
                &["kind"],
            )
            .expect("valid metric"),
        );
        let scope_oom_kills = register(
            &r,
            IntCounterVec::new(
                Opts::new(
                    "refine_scope_oom_kills_total",
                    "OOM kills in ended scopes' own cgroups (memory.events oom_kill, F4), by \
                     kind; absent where the memory controller is not enabled for them.",
                ),
                &["kind"],
            )
            .expect("valid metric"),
        );
        // V1: the build that serves, and the guardian's it launches (read from its executable
        // once, at the start; absent when it carries none).
        let supervisor = refine_supervisor::host::own_provenance();
        let guardian =
            refine_supervisor::host::guardian_provenance(&refine_supervisor::host::guardian_exe());
        for (name, help, build) in [
            (
                "refine_build_info",
                "1, labelled with the build of the refine-supervisor that serves (V1).",
                Some(&supervisor),
            ),
            (
                "refine_guardian_build_info",
                "1, labelled with the build of the refine-guardian it launches (V1); absent \
                 when that carries no provenance.",
                guardian.as_ref().ok(),
            ),
        ] {
            let info = register(
                &r,
                IntGaugeVec::new(Opts::new(name, help), &BUILD_LABELS).expect("valid metric"),
            );
            if let Some(b) = build {
                info.with_label_values(&build_labels(b)).set(1);
            }
        }
        let metrics = Metrics {
            ready,
            health,
            scope_cpu_seconds,
            scope_memory_peak_bytes,
            scope_oom_kills,
            tree_cpu_seconds,
            tree_max_rss_bytes,
            scopes,
            unverified: gauge(
                "refine_scopes_unverified",
                "Scopes neither proven alive nor proven ended (corrupt records included).",
            ),
            stalled: gauge(
                "refine_scopes_stalled",
                "Live scopes the stall watch finds busy without progress.",
            ),
            silent: gauge(
                "refine_scopes_silent",
                "Live scopes the stall watch finds silent (no output for long).",
            ),
            slots: gauge("refine_capacity_slots", "Capacity slots for agents (C1)."),
            free: gauge(
                "refine_capacity_free",
                "Free capacity slots: slots less live and unverified scopes.",
            ),
            requests: counter(
                "refine_launch_requests_total",
                "Launch requests to this service, by how admission and launch ended.",
                "result",
            ),
            launches: counter(
                "refine_launches_total",
                "Launches of this service whose engine returned, by outcome.",
                "outcome",
            ),
            stop_seconds,
            stop_failures: counter(
                "refine_stop_failures_total",
                "Shared stops by this service that did not prove the end (V3), by cause \
                 (`residue`: the stop of what outlived a workload).",
                "cause",
            ),
            receipt_failures: counter(
                "refine_receipt_failures_total",
                "Scopes found unverified (no receipt proves their end), by reason.",
                "reason",
            ),
            registry: r,
            counted_unverified: Mutex::new(HashSet::new()),
        };
        metrics.expose_every_series();
        metrics
    }

    /// Creates every labelled series at zero, so that the first scrape shows all of them (a
    /// series that appears only with its first event breaks `rate()` and `absent()`).
    fn expose_every_series(&self) {
        for result in RequestResult::ALL {
            self.requests.with_label_values(&[result.name()]);
        }
        for outcome in LaunchOutcome::kinds() {
            self.launches.with_label_values(&[outcome.name()]);
        }
        for cause in STOP_CAUSES {
            self.stop_seconds.with_label_values(&[cause]);
            self.stop_failures.with_label_values(&[cause]);
        }
        self.stop_failures.with_label_values(&[RESIDUE]);
        for reason in UnverifiedCheck::ALL {
            self.receipt_failures.with_label_values(&[reason.name()]);
        }
        for kind in KINDS {
            self.tree_max_rss_bytes.with_label_values(&[kind.as_str()]);
            for mode in ["user", "system"] {
                self.tree_cpu_seconds
                    .with_label_values(&[kind.as_str(), mode]);
            }
        }
    }

    /// Counts what a scope cost once its receipt came ([`refine_supervisor::host::ReceiptHook`]).
    pub fn receipt_hook(self: &Arc<Self>) -> refine_supervisor::host::ReceiptHook {
        let me = self.clone();
        Arc::new(move |reg, receipt, cgroup| {
            let kind = reg.kind.as_str();
            if let Some(c) = cgroup {
                me.scope_cpu_seconds
                    .with_label_values(&[kind])
                    .inc_by(c.cpu_us as f64 / 1e6);
                if let Some(peak) = c.memory_peak_bytes {
                    me.scope_memory_peak_bytes
                        .with_label_values(&[kind])
                        .observe(peak as f64);
                }
                if let Some(n) = c.oom_kills {
                    me.scope_oom_kills.with_label_values(&[kind]).inc_by(n);
                }
            }
            let Some(u) = receipt.usage else { return };
            for (mode, us) in [("user", u.user_us), ("system", u.system_us)] {
                me.tree_cpu_seconds
                    .with_label_values(&[kind, mode])
                    .inc_by(us as f64 / 1e6);
            }
            me.tree_max_rss_bytes
                .with_label_values(&[kind])
                .observe(u.max_rss_kib as f64 * 1024.0);
        })
    }

    /// Counts a launch request's result.
    pub fn request(&self, result: RequestResult) {
        self.requests.with_label_values(&[result.name()]).inc();
    }

    /// Counts a launch's result (called on its engine thread) and observes its own stop, the
    /// stop first: a scrape that sees the outcome sees its stop too.
    pub fn launch_ended(&self, result: &LaunchResult) {
        let outcome = result.outcome.name();
        if let Some(report) = &result.stop_report {
            self.stopped(outcome, report.timings.total);
        }
        if result.stop_failure.is_some() {
            let cause = if STOP_CAUSES.contains(&outcome) {
                outcome
            } else {
                RESIDUE
            };
            self.stop_failed(cause);
        }
        self.launches.with_label_values(&[outcome]).inc();
    }

    /// The hook that feeds [`Metrics::launch_ended`], for the service's engine.
    pub fn result_hook(self: &Arc<Self>) -> ResultHook {
        let me = self.clone();
        Arc::new(move |r: &LaunchResult| me.launch_ended(r))
    }

    /// Counts a shared stop that did not prove the end, by its cause.
    pub fn stop_failed(&self, cause: &str) {
        self.stop_failures.with_label_values(&[cause]).inc();
    }

    /// Observes a shared stop that returned a report, by its cause.
    pub fn stopped(&self, cause: &str, took: Duration) {
        self.stop_seconds
            .with_label_values(&[cause])
            .observe(took.as_secs_f64());
    }

    /// The stall watch's counts (H3): scopes stalled and silent now. Until the watch exists
    /// nothing calls it and both gauges read 0.
    #[allow(dead_code)]
    pub fn set_watch(&self, stalled: usize, silent: usize) {
        self.stalled.set(stalled as i64);
        self.silent.set(silent as i64);
    }

    /// Sets the state and capacity gauges from one census and counts newly unverified scopes.
    pub fn observe(&self, census: &Census, cap: &CapacityReport) {
        self.scopes.reset();
        for state in [State::Live, State::Unverified] {
            for kind in KINDS {
                let n = census.scopes.get(&(state, kind.as_str())).copied();
                self.scopes
                    .with_label_values(&[state.name(), kind.as_str()])
                    .set(n.unwrap_or(0) as i64);
            }
        }
        self.scopes
            .with_label_values(&[State::Corrupt.name(), UNKNOWN_KIND])
            .set(census.count(State::Corrupt) as i64);
        self.unverified.set(census.unverified.len() as i64);
        self.slots.set(cap.slots as i64);
        self.free.set(cap.free as i64);

        let Ok(mut counted) = self.counted_unverified.lock() else {
            return;
        };
        let now: HashSet<RegistrationId> = census.unverified.iter().map(|(id, _)| *id).collect();
        for (id, reason) in &census.unverified {
            if !counted.contains(id) {
                self.receipt_failures.with_label_values(&[reason]).inc();
            }
        }
        *counted = now;
    }

    /// H6: the open scopes with a readiness, by where it stands (`starting` until recorded).
    fn observe_ready(&self, rt: &Runtime) {
        use refine_protocol::docs::{ReadyState, Vocabulary};
        let mut counts = std::collections::BTreeMap::new();
        for id in rt.open_ids().unwrap_or_default() {
            let Ok(reg) = rt.read_registration(id) else {
                continue;
            };
            if reg.readiness.is_none() {
                continue;
            }
            let state = rt
                .read_ready(id)
                .ok()
                .flatten()
                .map_or(ReadyState::Starting, |r| r.state);
            *counts.entry(state).or_insert(0i64) += 1;
        }
        for state in ReadyState::ALL {
            self.ready
                .with_label_values(&[state.name()])
                .set(counts.get(state).copied().unwrap_or(0));
        }
    }

    /// H7: the open scopes with a health check, by where it stands (`starting` until recorded).
    fn observe_health(&self, rt: &Runtime) {
        use refine_protocol::docs::{HealthState, Vocabulary};
        let mut counts = std::collections::BTreeMap::new();
        for id in rt.open_ids().unwrap_or_default() {
            match rt.read_registration(id) {
                Ok(reg) if reg.health.is_some() => {}
                _ => continue,
            }
            let state = rt
                .read_health(id)
                .ok()
                .flatten()
                .map_or(HealthState::Starting, |r| r.state);
            *counts.entry(state).or_insert(0i64) += 1;
        }
        for state in HealthState::ALL {
            self.health
                .with_label_values(&[state.name()])
                .set(counts.get(state).copied().unwrap_or(0));
        }
    }

    /// One scrape: a census of `rt`, then the exposition.
    pub fn scrape(&self, rt: &Runtime) -> Vec<u8> {
        self.observe_ready(rt);
        self.observe_health(rt);
        match Census::take(rt) {
            Ok(census) => {
                let cap = census.capacity(CapacityPolicy::default(), &mut *capacity_probe());
                self.observe(&census, &cap);
            }
            // The gauges keep their last values; the failure is the service log's to tell.
            Err(e) => {
                tracing::warn!(error = %refine_supervisor::error_chain(&e), "metrics census failed")
            }
        }
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "metrics encoding failed");
        }
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Binds the metrics listener (before the service says it is listening, so a bad address
/// fails the start).
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

/// Serves `/metrics` on `listener` until the task is dropped: HTTP/1.1 by `hyper`, one request
/// per connection. `scrape` runs on the blocking pool (a census assesses every open
/// registration).
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    rt: Runtime,
) -> std::io::Result<()> {
    let mut backoff = super::throttle::Backoff::default();
    loop {
        // D6: an accept error (EMFILE at the descriptor limit, a connection aborted before it
        // was taken) ends no listener: it pauses, backing off, and says so at most once per
        // window.
        let (stream, peer) = match listener.accept().await {
            Ok(conn) => {
                backoff.reset();
                conn
            }
            Err(e) => {
                let pause = backoff.next();
                if let Some(suppressed) = ACCEPT_LOG.allow() {
                    tracing::warn!(error = %e, suppressed, pause_ms = refine_protocol::time::saturating_ms(pause), "metrics accept failed");
                }
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        let (metrics, rt) = (metrics.clone(), rt.clone());
        tokio::spawn(async move {
            let service = service_fn(move |req| answer(req, metrics.clone(), rt.clone()));
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(REQUEST_TIMEOUT)
                .max_buf_size(MAX_REQUEST_HEAD)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "metrics request failed");
            }
        });
    }
}

static ACCEPT_LOG: super::throttle::LogLimit = super::throttle::LogLimit::new();

/// One request: `GET` or `HEAD` of `/metrics` (any query string) is the exposition (`HEAD`:
/// its head alone, `hyper` leaves the body out); another method there is 405 with `Allow`;
/// any other path is 404.
async fn answer(
    req: Request<Incoming>,
    metrics: Arc<Metrics>,
    rt: Runtime,
) -> Result<Response<Full<Bytes>>, std::io::Error> {
    let plain = |status: StatusCode, text: &'static str| {
        let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
        *r.status_mut() = status;
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        r
    };
    if req.uri().path() != "/metrics" {
        return Ok(plain(
            StatusCode::NOT_FOUND,
            "not found: the metrics are on /metrics\n",
        ));
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "GET or HEAD /metrics only\n",
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Ok(r);
    }
    let body = tokio::task::spawn_blocking(move || metrics.scrape(&rt))
        .await
        .map_err(std::io::Error::other)?;
    let mut r = Response::new(Full::new(Bytes::from(body)));
    let content_type = HeaderValue::from_str(TextEncoder::new().format_type())
        .unwrap_or(HeaderValue::from_static("text/plain"));
    r.headers_mut().insert(header::CONTENT_TYPE, content_type);
    Ok(r)
}
