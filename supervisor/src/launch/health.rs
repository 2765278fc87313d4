//! H7: health checks, docker's HEALTHCHECK. A launch may carry a probe command; the process
//! that owns the scope's life runs it every interval and records where the scope stands in
//! `logs/ID.health`, with the last few probes, and an event at each change.
//!
//! ```text
//! probe    `sh -c CMD` in the workload's directory, each time a scope of its own (kind
//!          `command`, label `<label>.health`, its deadline the health timeout, no grace): it
//!          cannot leak, and a probe past its timeout is stopped with proof and fails
//! states   starting -> healthy | unhealthy. In the start period a failure does not count and
//!          a success makes it healthy; after it, `retries` failures in a row make it
//!          unhealthy; any success makes it healthy again
//! when     the first probe one interval after the start, then one interval after each
//!          probe's end (docker's rhythm); probing ends with the scope
//! who      a foreground `run` or a facade's launch: one thread of the launcher ([`watch`]);
//!          the service: one prober thread for every scope, over a [`Queue`] ([`Queue::run`]:
//!          it launches each due probe, the shared loop drives it, and its result comes back
//!          through a hook: no thread per scope or per probe waits); a restarted service
//!          resumes the probes of a scope whose prober is gone ([`prober_gone`])
//! never    the supervisor never stops or restarts a scope for its health: it reports
//! ```

use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use refine_protocol::docs::{EventKind, HealthState};
use refine_protocol::record::{HealthRecord, HealthSpec, ProbeRecord};
use refine_protocol::{Registration, RegistrationId};

use crate::store::journal;
use crate::store::registry::Runtime;

/// docker's defaults.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_RETRIES: u32 = 3;
/// Probes kept in the record (and shown).
pub const KEEP: usize = 5;
/// Output kept per probe (docker keeps 4 KiB).
pub const OUTPUT_MAX: usize = 4096;

/// A health check from its parts; a zero interval or timeout, zero retries or an empty command
/// is refused in one line.
pub fn spec(
    cmd: &str,
    interval: Duration,
    timeout: Duration,
    retries: u32,
    start_period: Duration,
) -> Result<HealthSpec, String> {
    if cmd.trim().is_empty() {
        return Err("the health command is empty".to_owned());
    }
    if interval.is_zero() || timeout.is_zero() {
        return Err("the health interval and timeout are more than zero".to_owned());
    }
    if retries == 0 {
        return Err("the health retries are at least 1".to_owned());
    }
    let ms = refine_protocol::time::saturating_ms;
    Ok(HealthSpec {
        cmd: cmd.to_owned(),
        interval_ms: ms(interval).max(1),
        timeout_ms: ms(timeout).max(1),
        retries,
        start_period_ms: ms(start_period),
    })
}

/// docker's rule: where a scope stands after a probe. `in_start`: the probe began within the
/// start period.
pub fn next(
    state: HealthState,
    streak: u32,
    success: bool,
    in_start: bool,
    retries: u32,
) -> (HealthState, u32) {
    if success {
        return (HealthState::Healthy, 0);
    }
    if in_start && state == HealthState::Starting {
        return (state, streak);
    }
    let streak = streak.saturating_add(1);
    if streak >= retries {
        (HealthState::Unhealthy, streak)
    } else {
        (state, streak)
    }
}

/// The launch of one probe: `sh -c CMD` in the workload's directory, a scope of its own
/// (label `<label>.health`, the health timeout its deadline, no grace), and what makes a probe
/// a second cheap: no lifecycle events, its registration not synced (a power loss ends it with
/// everything else), its output kept in memory ([`OUTPUT_MAX`] per stream), never in files.
pub fn probe_request(
    id: RegistrationId,
    label: &str,
    cwd: &str,
    spec: &HealthSpec,
) -> crate::launch::LaunchRequest {
    let mut req = crate::launch::LaunchRequest::new(
        refine_protocol::Kind::Command,
        ["sh", "-c", spec.cmd.as_str()],
    );
    req.cwd = Some(cwd.into());
    let owner = match label {
        "" => id.to_string()[..12].to_owned(),
        l => l.to_owned(),
    };
    req.label = format!("{owner}.health");
    req.timeout = Some(Duration::from_millis(spec.timeout_ms));
    req.kill_after = Some(Duration::ZERO);
    req.events = false;
    req.durable = false;
    req.artifacts = false;
    req.cgroup = false;
    req.keep_max = OUTPUT_MAX;
    req
}

/// One probe ([`probe_request`]), a proven scope of its own; with its scope's id when its
/// result came with the receipt.
pub fn probe(
    sup: &crate::launch::Supervisor,
    reg: &Registration,
    spec: &HealthSpec,
) -> (ProbeRecord, Option<RegistrationId>) {
    let started_unix_ms = crate::kernel::clock::unix_ms();
    let t = Instant::now();
    let req = probe_request(reg.id, &reg.label, &reg.cwd, spec);
    let (mut rec, proven) = match sup.launch(req).and_then(|h| h.wait()) {
        Ok(r) => ended(&r),
        Err(e) => not_run(&e),
    };
    rec.started_unix_ms = started_unix_ms;
    rec.duration_ms = refine_protocol::time::saturating_ms(t.elapsed());
    (rec, proven)
}

/// What a probe's result says (its start and duration are the prober's to fill in); with its
/// scope's id when the result came with the receipt.
fn ended(r: &crate::launch::LaunchResult) -> (ProbeRecord, Option<RegistrationId>) {
    let timed_out = r.outcome == crate::launch::LaunchOutcome::TimedOut;
    let exit_code = match r.status {
        refine_protocol::WorkloadStatus::Exited(c) if !timed_out => Some(c),
        _ => None,
    };
    let rec = ProbeRecord {
        scope: Some(r.id),
        started_unix_ms: 0,
        duration_ms: 0,
        exit_code,
        timed_out,
        output: output_of(&r.capture),
    };
    let proven = matches!(r.scope, crate::launch::ScopeState::Exited(_)).then_some(r.id);
    (rec, proven)
}

/// A probe that did not run: why, as its output.
fn not_run(e: &crate::launch::LaunchError) -> (ProbeRecord, Option<RegistrationId>) {
    let why = format!("the probe did not run: {}", crate::error::error_chain(e));
    let rec = ProbeRecord {
        scope: None,
        started_unix_ms: 0,
        duration_ms: 0,
        exit_code: None,
        timed_out: false,
        output: why.into_bytes(),
    };
    (rec, None)
}

/// The start of a probe's stdout, then of its stderr, at most [`OUTPUT_MAX`] bytes, as its
/// capture kept them in memory.
fn output_of(capture: &crate::launch::capture::CaptureResult) -> Vec<u8> {
    use crate::store::registry::Stream;
    let mut out = Vec::new();
    for stream in [Stream::Stdout, Stream::Stderr] {
        let left = OUTPUT_MAX.saturating_sub(out.len());
        if let Some(s) = capture.stream(stream) {
            let kept = s.kept();
            out.extend_from_slice(&kept[..kept.len().min(left)]);
        }
    }
    out
}

/// What the prober keeps of one scope between probes.
#[derive(Debug, Clone)]
pub struct Checked {
    pub reg: Registration,
    pub spec: HealthSpec,
    pub rec: HealthRecord,
    /// Probe scopes proven ended (their receipts came with their results), oldest first,
    /// whose files are still there ([`Checked::collect`]).
    pub proven: Vec<RegistrationId>,
}

impl Checked {
    /// A scope to probe: its record resumed where its last prober left it, else `starting`.
    pub fn new(rt: &Runtime, reg: Registration) -> Option<Checked> {
        let spec = reg.health.clone()?;
        let (pid, start) = own_witness();
        let mut rec = rt
            .read_health(reg.id)
            .ok()
            .flatten()
            .unwrap_or(HealthRecord {
                id: reg.id,
                runtime: rt.id(),
                state: HealthState::Starting,
                at_unix_ms: crate::kernel::clock::unix_ms(),
                failing_streak: 0,
                probes: 0,
                prober_pid: pid,
                prober_start_time: start,
                last: Vec::new(),
            });
        rec.prober_pid = pid;
        rec.prober_start_time = start;
        Some(Checked {
            reg,
            spec,
            rec,
            proven: Vec::new(),
        })
    }

    /// Records that this process probes it (before its first probe).
    pub fn claim(&self, rt: &Runtime) {
        write(rt, &self.rec);
    }

    /// Runs one probe and records it; a change of state is an event.
    pub fn probe_once(&mut self, rt: &Runtime, sup: &crate::launch::Supervisor) {
        let in_start = self.in_start();
        let (p, proven) = probe(sup, &self.reg, &self.spec);
        self.record(rt, p, proven, in_start);
    }

    /// Whether a probe starting now is within the start period.
    fn in_start(&self) -> bool {
        crate::kernel::clock::unix_ms()
            < self
                .reg
                .started_at_unix_ms
                .saturating_add(self.spec.start_period_ms)
    }

    /// Records a probe that ended (`in_start`: it began within the start period); a change of
    /// state is an event.
    fn record(
        &mut self,
        rt: &Runtime,
        p: ProbeRecord,
        proven: Option<RegistrationId>,
        in_start: bool,
    ) {
        self.proven.extend(proven);
        let success = p.exit_code == Some(0);
        let (state, streak) = next(
            self.rec.state,
            self.rec.failing_streak,
            success,
            in_start,
            self.spec.retries,
        );
        let changed = state != self.rec.state;
        let excerpt = excerpt(&p);
        self.rec.state = state;
        self.rec.failing_streak = streak;
        self.rec.probes += 1;
        self.rec.at_unix_ms = crate::kernel::clock::unix_ms();
        self.rec.last.push(p);
        if self.rec.last.len() > KEEP {
            let drop = self.rec.last.len() - KEEP;
            self.rec.last.drain(..drop);
        }
        write(rt, &self.rec);
        self.collect(rt);
        if changed {
            let mut ev = journal::event(EventKind::Health, self.reg.id, &self.reg.label);
            ev.health = Some(state);
            ev.reason = Some(excerpt);
            journal::record(rt, &ev);
        }
    }

    /// The retention of probe scopes: the files of the last [`KEEP`] proven probes stay (the
    /// record shows them); once [`KEEP`] more have ended, the older ones' registrations,
    /// receipts and the rest are removed ([`crate::history::forget::forget_proven`]). A probe
    /// whose result had no receipt is never on this list: retention decides about it.
    fn collect(&mut self, rt: &Runtime) {
        if self.proven.len() < 2 * KEEP {
            return;
        }
        let old: Vec<RegistrationId> = self.proven.drain(..self.proven.len() - KEEP).collect();
        crate::history::forget::forget_proven(rt, &old);
    }

    fn interval(&self) -> Duration {
        Duration::from_millis(self.spec.interval_ms)
    }

    /// When its next probe is due, one interval after `now` (an interval read from a record is
    /// not bounded by the parser: one past what an `Instant` holds waits a day instead).
    fn due_after(&self, now: Instant) -> Instant {
        now.checked_add(self.interval())
            .unwrap_or_else(|| now + Duration::from_secs(86_400))
    }
}

/// A short, escaped excerpt of a probe's output for an event (untrusted text).
pub fn excerpt(p: &ProbeRecord) -> String {
    let text = String::from_utf8_lossy(&p.output);
    let mut out = String::new();
    for c in text.trim().chars() {
        if out.len() >= 120 {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    match (p.timed_out, p.exit_code) {
        (true, _) => format!("timed out after {} ms {out}", p.duration_ms),
        (false, Some(c)) => format!("exit {c} {out}"),
        (false, None) => format!("no exit code {out}"),
    }
    .trim_end()
    .to_owned()
}

fn write(rt: &Runtime, rec: &HealthRecord) {
    if let Err(e) = rt.write_health(rec) {
        tracing::warn!(id = %rec.id, error = %crate::error::error_chain(&e), "cannot record the health");
    }
}

fn own_witness() -> (u32, u64) {
    let pid = std::process::id();
    let start = rustix::process::Pid::from_raw(pid as i32)
        .and_then(|p| crate::kernel::procfs::stat(p).ok())
        .map_or(0, |s| s.start_time);
    (pid, start)
}

/// Whether the process that last probed `id` is gone (or never claimed it): a restarted
/// service then resumes the probes.
pub fn prober_gone(rt: &Runtime, id: RegistrationId) -> bool {
    rt.read_health(id)
        .ok()
        .flatten()
        .is_none_or(|rec| !prober_alive(&rec))
}

/// Whether the process the record names as its prober is still there (pid and start time).
fn prober_alive(rec: &HealthRecord) -> bool {
    rustix::process::Pid::from_raw(rec.prober_pid as i32)
        .and_then(|p| crate::kernel::procfs::stat(p).ok())
        .is_some_and(|s| s.start_time == rec.prober_start_time)
}

/// Whether the scope is probed by no process but this one's queue could be: its last prober
/// is gone (or never claimed it), or it is this very process, as after an upgrade in place
/// (L5: the same pid and start time, a new image whose queue starts empty). The caller knows
/// whether its queue holds the scope.
pub fn prober_gone_or_here(rt: &Runtime, id: RegistrationId) -> bool {
    rt.read_health(id).ok().flatten().is_none_or(|rec| {
        (rec.prober_pid, rec.prober_start_time) == own_witness() || !prober_alive(&rec)
    })
}

/// Whether the scope is over (its workload's main process ended): probing stops.
fn over(reg: &Registration) -> bool {
    crate::kernel::signal::Verified::open(reg.hello.workload).is_err()
}

/// The launcher's own prober of one scope (a foreground `run`, a facade's launch): a thread
/// that sleeps on the workload's pidfd between probes, so it ends with the workload.
pub fn watch(rt: Runtime, reg: Registration) {
    let id = reg.id;
    let Some(mut c) = Checked::new(&rt, reg) else {
        return;
    };
    let spawned = std::thread::Builder::new()
        .name(format!("refine-health-{}", &id.to_string()[..8]))
        .spawn(move || {
            let Ok(workload) = crate::kernel::signal::Verified::open(c.reg.hello.workload) else {
                return;
            };
            c.claim(&rt);
            let sup = crate::launch::Supervisor::new(rt.clone());
            loop {
                if wait_or_end(&workload, c.interval()) {
                    return;
                }
                c.probe_once(&rt, &sup);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(%id, error = %e, "cannot watch the workload's health");
    }
}

/// Sleeps `pause` on the workload's pidfd: `true` when it ended.
fn wait_or_end(workload: &crate::kernel::signal::Verified, pause: Duration) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    use std::os::fd::AsFd;
    let fd = workload.as_fd();
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let ts = rustix::event::Timespec {
        tv_sec: i64::try_from(pause.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(pause.subsec_nanos()),
    };
    matches!(poll(&mut fds, Some(&ts)), Ok(n) if n > 0)
}

/// How often (in probes) the prober looks whether a queued scope's workload is still there.
const OVER_EVERY: u64 = 10;

/// Probes under way at once in the service's prober: a slow probe holds one.
pub const PROBES_AT_ONCE: usize = 8;

/// The service's probes of every scope it owns: one queue of due times, driven by one thread
/// ([`Queue::run`]). A scope is out of the queue while its probe runs; the probe's result
/// comes back through the result hook of the prober's launches ([`Queue::result_hook`]).
#[derive(Debug, Default)]
pub struct Queue {
    inner: std::sync::Mutex<QueueInner>,
    /// Signalled when a scope is added, a probe's result came, or the queue is closed.
    wake: std::sync::Condvar,
}

#[derive(Debug, Default)]
struct QueueInner {
    heap: BinaryHeap<std::cmp::Reverse<(Instant, RegistrationId)>>,
    /// Every probed scope; `None` while its probe runs (the prober holds it then).
    scopes: HashMap<RegistrationId, Option<Checked>>,
    /// Probes that ended, as their results came.
    ended: Vec<Ended>,
    closed: bool,
    /// While the prober sleeps: until when (`Some(None)`: until woken); `None` while it works
    /// (it looks at `ended` before it sleeps again).
    asleep_until: Option<Option<Instant>>,
}

/// How long a probe's result may wait for the prober's next wake-up instead of waking it: a
/// busy prober wakes often for the probes due, and takes the results with it.
const RESULT_WAITS_AT_MOST: Duration = Duration::from_millis(20);

/// A probe's result as it came back through the hook: what the record keeps of it.
#[derive(Debug)]
struct Ended {
    /// The probe scope's id.
    probe: RegistrationId,
    rec: ProbeRecord,
    /// The probe scope, when its result came with the receipt.
    proven: Option<RegistrationId>,
    at: Instant,
}

/// A probe under way: the scope it probes, and when it began.
struct Flying {
    /// Kept until the result: a handle let go early closes the engine's control channel,
    /// which costs the loop a turn.
    _handle: crate::launch::LaunchHandle,
    began: Began,
}

/// A probe as it began: the scope it probes, whether in its start period, and when.
struct Began {
    c: Checked,
    in_start: bool,
    started_unix_ms: u64,
    t: Instant,
}

impl Began {
    fn now(c: Checked) -> Began {
        Began {
            in_start: c.in_start(),
            started_unix_ms: crate::kernel::clock::unix_ms(),
            t: Instant::now(),
            c,
        }
    }

    /// Records the probe, ended at `at`, and puts its scope back in `queue`.
    fn end(
        mut self,
        rt: &Runtime,
        queue: &Queue,
        mut rec: ProbeRecord,
        proven: Option<RegistrationId>,
        at: Instant,
    ) {
        rec.started_unix_ms = self.started_unix_ms;
        rec.duration_ms =
            refine_protocol::time::saturating_ms(at.saturating_duration_since(self.t));
        self.c.record(rt, rec, proven, self.in_start);
        queue.done(self.c);
    }
}

impl Queue {
    /// Adds a scope with a health check (a launch of this process, or one adopted), its first
    /// probe one interval from now. A scope already queued, or without a check, is left.
    pub fn add(&self, rt: &Runtime, reg: Registration) {
        let Ok(mut q) = self.inner.lock() else { return };
        if q.scopes.contains_key(&reg.id) {
            return;
        }
        // A scope whose workload ended is probed no more (the service drops its own at their
        // results; the maintenance pass would bring them back while a residue keeps them
        // live).
        if over(&reg) {
            return;
        }
        let Some(c) = Checked::new(rt, reg) else {
            return;
        };
        c.claim(rt);
        let due = c.due_after(Instant::now());
        q.heap.push(std::cmp::Reverse((due, c.reg.id)));
        q.scopes.insert(c.reg.id, Some(c));
        self.wake.notify_all();
    }

    /// Whether `id` is probed here.
    pub fn contains(&self, id: RegistrationId) -> bool {
        self.inner.lock().is_ok_and(|q| q.scopes.contains_key(&id))
    }

    /// How many scopes are probed here.
    pub fn len(&self) -> usize {
        self.inner.lock().map_or(0, |q| q.scopes.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets `id` (its scope ended).
    pub fn remove(&self, id: RegistrationId) {
        if let Ok(mut q) = self.inner.lock() {
            q.scopes.remove(&id);
        }
    }

    /// Ends [`Queue::run`] (probes under way end on their own; their results are not
    /// recorded).
    pub fn close(&self) {
        if let Ok(mut q) = self.inner.lock() {
            q.closed = true;
        }
        self.wake.notify_all();
    }

    /// The hook for the prober's launches: each result (every launch of that supervisor is a
    /// probe) is handed back to [`Queue::run`] where it came, on the loop's thread: nothing
    /// but a copy of what the record keeps, and a wake-up.
    pub fn result_hook(self: &std::sync::Arc<Self>) -> crate::launch::ResultHook {
        let queue = std::sync::Arc::downgrade(self);
        std::sync::Arc::new(move |r: &crate::launch::LaunchResult| {
            let Some(queue) = queue.upgrade() else { return };
            let (rec, proven) = ended(r);
            let now = Instant::now();
            let wake = match queue.inner.lock() {
                Ok(mut q) => {
                    q.ended.push(Ended {
                        probe: r.id,
                        rec,
                        proven,
                        at: now,
                    });
                    match q.asleep_until {
                        None => false,
                        Some(None) => true,
                        Some(Some(at)) => at > now + RESULT_WAITS_AT_MOST,
                    }
                }
                Err(_) => true,
            };
            if wake {
                queue.wake.notify_all();
            }
        })
    }

    /// The prober: one thread for every scope of the queue. It sleeps until a probe is due, a
    /// scope is added or a probe ended; launches each due probe through `sup` (whose result
    /// hook is [`Queue::result_hook`]: the shared loop drives the probe, no thread waits for
    /// it), at most [`PROBES_AT_ONCE`] under way; and records each probe that ended. Returns
    /// once the queue is closed.
    pub fn run(&self, rt: &Runtime, sup: &crate::launch::Supervisor) {
        let mut flying: HashMap<RegistrationId, Flying> = HashMap::new();
        loop {
            let Some((ended, due)) = self.next_work(&flying) else {
                return;
            };
            for e in ended {
                if let Some(f) = flying.remove(&e.probe) {
                    f.began.end(rt, self, e.rec, e.proven, e.at);
                }
            }
            for c in due {
                let began = Began::now(c);
                let c = &began.c;
                match sup.launch(probe_request(c.reg.id, &c.reg.label, &c.reg.cwd, &c.spec)) {
                    // The result comes through the hook.
                    Ok(h) => {
                        flying.insert(h.id(), Flying { _handle: h, began });
                    }
                    Err(e) => began.end(rt, self, not_run(&e).0, None, Instant::now()),
                }
            }
        }
    }

    /// Waits for work: the probes that ended (of those under way) and the scopes whose probe is
    /// due, as many as there is room for; `None` once closed. A scope that is over is dropped
    /// here (its probing ends).
    fn next_work(
        &self,
        flying: &HashMap<RegistrationId, Flying>,
    ) -> Option<(Vec<Ended>, Vec<Checked>)> {
        let mut q = self.inner.lock().ok()?;
        loop {
            if q.closed {
                return None;
            }
            let (ended, later): (Vec<_>, Vec<_>) = std::mem::take(&mut q.ended)
                .into_iter()
                .partition(|e| flying.contains_key(&e.probe));
            // A result that came before its launch returned waits for the next turn.
            q.ended = later;
            let room = PROBES_AT_ONCE.saturating_sub(flying.len() - ended.len());
            let now = Instant::now();
            let due = q.take_due(now, room);
            if !ended.is_empty() || !due.is_empty() {
                return Some((ended, due));
            }
            let next = (room > 0).then(|| q.heap.peek().map(|r| r.0 .0)).flatten();
            q.asleep_until = Some(next);
            q = match next {
                Some(at) => {
                    self.wake
                        .wait_timeout(q, at.saturating_duration_since(now))
                        .ok()?
                        .0
                }
                None => self.wake.wait(q).ok()?,
            };
            q.asleep_until = None;
        }
    }

    /// A probe is over: the scope is due again one interval from now (unless it was removed
    /// meanwhile).
    fn done(&self, c: Checked) {
        let Ok(mut q) = self.inner.lock() else { return };
        let id = c.reg.id;
        let due = c.due_after(Instant::now());
        if let Some(slot) = q.scopes.get_mut(&id) {
            *slot = Some(c);
            q.heap.push(std::cmp::Reverse((due, id)));
        }
    }
}

impl QueueInner {
    /// At most `room` scopes whose probe is due at `now`, taken out of the queue.
    fn take_due(&mut self, now: Instant, room: usize) -> Vec<Checked> {
        let mut out = Vec::new();
        while out.len() < room {
            let Some(std::cmp::Reverse((at, id))) = self.heap.peek().copied() else {
                break;
            };
            if at > now {
                break;
            }
            self.heap.pop();
            let Some(slot) = self.scopes.get_mut(&id) else {
                continue;
            };
            match slot.take() {
                // The service removes a scope of its own when its workload ends; the look at
                // the workload itself (a pidfd and its `stat`) is for the scopes it adopted,
                // every [`OVER_EVERY`] probes.
                Some(c) if c.rec.probes % OVER_EVERY == 0 && over(&c.reg) => {
                    self.scopes.remove(&id);
                }
                Some(c) => out.push(c),
                None => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use HealthState::*;

    #[test]
    fn start_period_failures_do_not_count() {
        assert_eq!(next(Starting, 0, false, true, 3), (Starting, 0));
        assert_eq!(next(Starting, 0, false, true, 1), (Starting, 0));
        assert_eq!(next(Starting, 0, true, true, 3), (Healthy, 0));
    }

    #[test]
    fn retries_failures_in_a_row_make_it_unhealthy() {
        let (s, n) = next(Healthy, 0, false, false, 3);
        assert_eq!((s, n), (Healthy, 1));
        let (s, n) = next(s, n, false, false, 3);
        assert_eq!((s, n), (Healthy, 2));
        assert_eq!(next(s, n, false, false, 3), (Unhealthy, 3));
        assert_eq!(next(Unhealthy, 3, true, false, 3), (Healthy, 0));
        // Past the start period a scope never healthy fails from starting.
        assert_eq!(next(Starting, 0, false, false, 1), (Unhealthy, 1));
    }

    #[test]
    fn a_success_after_the_start_period_counts_once() {
        // A success in the start period ends it: failures count from then on.
        assert_eq!(next(Healthy, 0, false, true, 1), (Unhealthy, 1));
    }

    #[test]
    fn a_probe_is_quiet_unsynced_and_kept_in_memory() {
        let d = Duration::from_secs(1);
        let spec = spec("true", d, d, 3, Duration::ZERO).unwrap();
        let req = probe_request(RegistrationId([7; 16]), "web", "/", &spec);
        assert_eq!(req.label, "web.health");
        assert!(!req.events && !req.durable && !req.artifacts && !req.cgroup);
        assert_eq!(req.keep_max, OUTPUT_MAX);
        assert_eq!(req.timeout, Some(d));
    }

    #[test]
    fn spec_refuses_nonsense() {
        let d = Duration::from_secs(1);
        assert!(spec("", d, d, 3, Duration::ZERO).is_err());
        assert!(spec("true", Duration::ZERO, d, 3, Duration::ZERO).is_err());
        assert!(spec("true", d, d, 0, Duration::ZERO).is_err());
        assert!(spec("true", d, d, 3, Duration::ZERO).is_ok());
    }
}
