//! The shared event loop (SPEC F1): a fixed number of threads drive every engine of a
//! [`super::Supervisor`] that uses it — the service's detached launches — instead of one thread
//! per launch.
//!
//! One loop thread holds one `epoll` instance over the descriptors of all its engines (each
//! engine's [`Engine::interest`], registered one-shot and re-armed after each of its turns) and a
//! timer heap of their wake-ups; it runs [`Engine::step`] when an engine's descriptor is ready or
//! its time has come, lending one read buffer to all of them. What blocks is handed to a small
//! pool: a due shared stop ([`Engine::run_due_stop`]; the engine then comes back to the loop) and
//! the result ([`Engine::finish`]: the bounded wait for the receipt, the result's write). The
//! engine logic is the one the CLI's own thread runs ([`Engine::drive`]).
//!
//! Registrations are one-shot, re-armed after each turn for what the engine still waits on, and
//! never deleted (deleting needs the descriptor, which the engine may have closed in its turn):
//! a registration the engine no longer wants (a hung-up channel, a closed stream whose file
//! another descriptor keeps open, an engine in the pool) fires at most once, into a turn that
//! finds nothing to read; the kernel drops it when the file is closed. A descriptor number
//! registered again (an engine back from the pool) is re-armed with its new token.
//!
//! What outlives a launch's result runs in the loop too: the [`Watch`] of a scope a residue holds
//! (its stop at a deadline goes to the pool like the engine's) and the [`Tail`] of the streams
//! the residue still writes to.
//!
//! Nothing that only waits goes to the pool (SPEC D2): a grace (`--kill-after`: the polite
//! signal, then a timer), a stop's retry and the wait for the receipt after a stop are wake-ups
//! in the timer heap; the pool runs only the bounded work of a stop and of a result.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use rustix::event::epoll;
use rustix::event::PollFlags;

use super::engine::{Engine, Residues, Source, State, Step, Watch, Woken};
use super::{LaunchError, LaunchResult, ResultHook};
use crate::launch::capture::Tail;

/// Threads of the pool that runs the blocking work of the loop's engines.
const POOL_THREADS: usize = 2;
/// epoll events taken per wait.
const EVENTS_PER_WAIT: usize = 256;
/// The loop's own token: its wake-up eventfd.
const WAKE_TOKEN: u64 = u64::MAX;

/// An engine between turns, with where its result goes.
pub(super) struct Parked {
    engine: Engine,
    st: State,
    done: ResultSink,
}

impl Parked {
    /// Whether its result can be made on the loop's thread: nothing of it is synced (a
    /// probe's), it has its receipt, and its guardian has exited (the result's wait for it and
    /// its reads are then immediate; a failed or stopped launch goes to the pool).
    fn light(&mut self) -> bool {
        !self.engine.runtime.syncs()
            && self.st.receipt.is_some()
            && self.st.stop_report.is_none()
            && self.engine.link.guardian_exited()
    }
}

/// Where a launch's result goes: the launch's hook, then its handle.
struct ResultSink {
    hook: Option<ResultHook>,
    tx: mpsc::SyncSender<LaunchResult>,
    finished: Arc<Finished>,
}

/// Set once the result is sent; an async waiter is woken (a permit is stored if none waits yet).
#[derive(Debug, Default)]
pub(super) struct Finished {
    set: AtomicBool,
    notify: tokio::sync::Notify,
}

impl ResultSink {
    fn deliver(self, result: LaunchResult) {
        if let Some(hook) = &self.hook {
            hook(&result);
        }
        let _ = self.tx.send(result);
        self.finished.set.store(true, Ordering::Release);
        self.finished.notify.notify_one();
    }
}

/// The result of a launch driven by the shared loop, for its handle.
#[derive(Debug)]
pub(super) struct SharedResult {
    rx: mpsc::Receiver<LaunchResult>,
    /// A result [`SharedResult::wait_for`] received.
    early: Mutex<Option<Box<LaunchResult>>>,
    finished: Arc<Finished>,
}

impl SharedResult {
    pub(super) fn is_finished(&self) -> bool {
        self.finished.set.load(Ordering::Acquire)
    }

    /// Until the result is there, without blocking a thread: cancel-safe (dropping the future
    /// leaves the result to a later wait).
    pub(super) async fn arrived(&self) {
        while !self.is_finished() {
            self.finished.notify.notified().await;
        }
    }

    pub(super) fn wait(self) -> Result<LaunchResult, LaunchError> {
        match self.early.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(r) => Ok(*r),
            None => self.rx.recv().map_err(|_| LaunchError::EngineDied),
        }
    }

    /// Whether the result came within `timeout` (kept for [`SharedResult::wait`]).
    pub(super) fn wait_for(&self, timeout: std::time::Duration) -> bool {
        let mut early = self.early.lock().unwrap_or_else(|p| p.into_inner());
        if early.is_none() {
            *early = self.rx.recv_timeout(timeout).ok().map(Box::new);
        }
        early.is_some()
    }
}

/// What the loop drives: a launch's engine, and what outlives its result.
enum Task {
    Launch(Box<Parked>),
    Tail(Box<Tail>),
    Watch(Box<Watch>),
}

impl Task {
    fn step(&mut self, woken: Option<Woken>, buf: &mut [u8]) -> Step {
        match self {
            Task::Launch(p) => {
                let Parked { engine, st, .. } = &mut **p;
                engine.step(st, woken, Some(buf))
            }
            Task::Tail(t) => {
                if t.service(woken.map_or(0, |w| w.streams), buf) {
                    Step::Done
                } else {
                    Step::Wait(None)
                }
            }
            Task::Watch(w) => w.step(woken.is_some_and(|w| w.channel)),
        }
    }

    fn interest(&self, now: Instant) -> Vec<(Source, BorrowedFd<'_>, PollFlags)> {
        match self {
            Task::Launch(p) => p.engine.interest(&p.st, now),
            Task::Tail(t) => t
                .interest()
                .into_iter()
                .map(|(i, fd, flags)| (Source::Stream(i), fd, flags))
                .collect(),
            Task::Watch(w) => w
                .interest()
                .into_iter()
                .map(|fd| (Source::Channel, fd, PollFlags::IN))
                .collect(),
        }
    }
}

enum Job {
    Stop(Task),
    Finish(Task),
}

/// The shared loop as the place where a launch's residues run.
struct LoopResidues(std::sync::Weak<Inner>);

impl Residues for LoopResidues {
    fn tail(&self, tail: Tail) {
        hand_over(&self.0, Task::Tail(Box::new(tail)));
    }
    fn watch(&self, watch: Watch) {
        hand_over(&self.0, Task::Watch(Box::new(watch)));
    }
}

/// Hands a task to the loop, or to a thread of its own when the loop is gone.
fn hand_over(inner: &std::sync::Weak<Inner>, task: Task) {
    match inner.upgrade() {
        Some(inner) => inner.hand_over(task),
        None => own_thread(task),
    }
}

/// A handle on the shared loop; clones share it.
#[derive(Clone)]
pub struct SharedLoop {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SharedLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedLoop").finish_non_exhaustive()
    }
}

struct Inner {
    adopt: Mutex<mpsc::Sender<Task>>,
    /// An eventfd the loop waits on beside its engines: written when an engine is handed to it.
    wake: OwnedFd,
}

impl Inner {
    fn hand_over(&self, task: Task) {
        let sent = self
            .adopt
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(task);
        match sent {
            Ok(()) => {
                let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
            }
            // The loop thread is gone: drive this task on a thread of its own.
            Err(mpsc::SendError(task)) => own_thread(task),
        }
    }
}

impl SharedLoop {
    /// Starts the loop thread and its pool.
    pub fn start() -> Result<SharedLoop, LaunchError> {
        let io = |op: &'static str| move |e: rustix::io::Errno| super::io_op(op)(e.into());
        let epoll =
            epoll::create(epoll::CreateFlags::CLOEXEC).map_err(io("create an epoll set"))?;
        let wake = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )
        .map_err(io("create an eventfd"))?;
        epoll::add(
            &epoll,
            &wake,
            epoll::EventData::new_u64(WAKE_TOKEN),
            epoll::EventFlags::IN,
        )
        .map_err(io("watch the eventfd"))?;
        let (adopt_tx, adopt_rx) = mpsc::channel();
        let inner = Arc::new(Inner {
            adopt: Mutex::new(adopt_tx),
            wake,
        });
        let (job_tx, job_rx) = mpsc::channel::<Job>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        for n in 0..POOL_THREADS {
            let (rx, inner) = (job_rx.clone(), Arc::downgrade(&inner));
            std::thread::Builder::new()
                .name(format!("refine-pool-{n}"))
                .spawn(move || pool(&rx, &inner))
                .map_err(super::io_op("start the loop's pool"))?;
        }
        let loop_inner = inner.clone();
        std::thread::Builder::new()
            .name("refine-loop".into())
            .spawn(move || {
                Loop {
                    epoll,
                    slots: Vec::new(),
                    free: Vec::new(),
                    timers: BinaryHeap::new(),
                    buf: vec![0; crate::launch::capture::READ_CHUNK],
                    jobs: job_tx,
                }
                .run(&adopt_rx, &loop_inner)
            })
            .map_err(super::io_op("start the shared loop"))?;
        Ok(SharedLoop { inner })
    }

    /// Hands a new engine to the loop; its result comes through the returned [`SharedResult`],
    /// after `hook`.
    pub(super) fn adopt(&self, mut engine: Engine, hook: Option<ResultHook>) -> SharedResult {
        let (tx, rx) = mpsc::sync_channel(1);
        let finished = Arc::new(Finished::default());
        engine.residues = Some(Arc::new(LoopResidues(Arc::downgrade(&self.inner))));
        self.inner.hand_over(Task::Launch(Box::new(Parked {
            engine,
            st: State::default(),
            done: ResultSink {
                hook,
                tx,
                finished: finished.clone(),
            },
        })));
        SharedResult {
            rx,
            early: Mutex::new(None),
            finished,
        }
    }
}

/// Runs a task on a thread of its own (the loop cannot take it).
fn own_thread(task: Task) {
    let spawned = std::thread::Builder::new()
        .name("refine-launch".into())
        .spawn(move || match task {
            Task::Launch(p) => {
                let Parked { engine, st, done } = *p;
                done.deliver(engine.drive(st, None, None));
            }
            Task::Tail(t) => t.run(),
            Task::Watch(w) => w.run(),
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start a thread for a launch");
    }
}

/// The pool: blocking work of the loop's tasks.
fn pool(rx: &Mutex<mpsc::Receiver<Job>>, inner: &std::sync::Weak<Inner>) {
    loop {
        let job = match rx.lock().unwrap_or_else(|p| p.into_inner()).recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        match job {
            Job::Stop(mut task) => {
                match &mut task {
                    Task::Launch(p) => {
                        let Parked { engine, st, .. } = &mut **p;
                        engine.run_due_stop(st);
                    }
                    Task::Watch(w) => w.run_due_stop(),
                    Task::Tail(_) => {}
                }
                hand_over(inner, task);
            }
            Job::Finish(Task::Launch(p)) => {
                let Parked { engine, st, done } = *p;
                done.deliver(engine.finish(st));
            }
            Job::Finish(Task::Watch(w)) => w.finish(),
            Job::Finish(Task::Tail(_)) => {}
        }
    }
}

/// An engine in the loop, with the descriptors it has registered.
struct Slot {
    task: Task,
    /// What is in the epoll set for this engine: source, descriptor number, flags.
    registered: Vec<(Source, RawFd, PollFlags)>,
    /// Its wake-up (a timer-heap entry is current only while it matches this).
    wake: Option<Instant>,
}

struct Loop {
    epoll: OwnedFd,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    /// The one read buffer of every engine of this loop.
    buf: Vec<u8>,
    jobs: mpsc::Sender<Job>,
}

fn token(slot: usize, source: Source) -> u64 {
    let code = match source {
        Source::Stream(i) => i as u64 & 0x3f,
        Source::Channel => 0x40,
        Source::Control => 0x41,
    };
    ((slot as u64) << 8) | code
}

fn untoken(t: u64) -> (usize, Option<Source>) {
    let source = match t & 0xff {
        i @ 0..=0x3f => Some(Source::Stream(i as usize)),
        0x40 => Some(Source::Channel),
        0x41 => Some(Source::Control),
        _ => None,
    };
    ((t >> 8) as usize, source)
}

fn epoll_flags(flags: PollFlags) -> epoll::EventFlags {
    let mut e = epoll::EventFlags::ONESHOT;
    if flags.contains(PollFlags::IN) {
        e |= epoll::EventFlags::IN;
    }
    if flags.contains(PollFlags::OUT) {
        e |= epoll::EventFlags::OUT;
    }
    e
}

impl Loop {
    fn run(mut self, adopt: &mpsc::Receiver<Task>, inner: &Inner) {
        let mut events: Vec<epoll::Event> = Vec::with_capacity(EVENTS_PER_WAIT);
        let mut ready: Vec<(usize, Woken)> = Vec::new();
        loop {
            while let Ok(task) = adopt.try_recv() {
                self.adopt(task);
            }
            let timeout = self.next_timer().map(|at| {
                let left = at.saturating_duration_since(Instant::now());
                rustix::time::Timespec {
                    tv_sec: left.as_secs() as i64,
                    tv_nsec: i64::from(left.subsec_nanos()),
                }
            });
            events.clear();
            match epoll::wait(
                &self.epoll,
                rustix::buffer::spare_capacity(&mut events),
                timeout.as_ref(),
            ) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => {
                    tracing::error!(error = %e, "the shared loop's epoll_wait failed");
                    return;
                }
            }
            ready.clear();
            for ev in &events {
                let t = ev.data.u64();
                if t == WAKE_TOKEN {
                    let mut b = [0u8; 8];
                    let _ = rustix::io::read(&inner.wake, &mut b);
                    continue;
                }
                let (slot, Some(source)) = untoken(t) else {
                    continue;
                };
                match ready.iter_mut().find(|(s, _)| *s == slot) {
                    Some((_, w)) => w.set(source),
                    None => {
                        let mut w = Woken::default();
                        w.set(source);
                        ready.push((slot, w));
                    }
                }
            }
            for (slot, woken) in std::mem::take(&mut ready) {
                self.turn(slot, Some(woken));
            }
            let now = Instant::now();
            while let Some(Reverse((at, slot))) = self.timers.peek().copied() {
                if at > now {
                    break;
                }
                self.timers.pop();
                if let Some(s) = self.slots.get_mut(slot).and_then(Option::as_mut) {
                    if s.wake == Some(at) {
                        // Its entry is used up: whatever wake-up the turn asks for is pushed.
                        s.wake = None;
                        self.turn(slot, None);
                    }
                }
            }
        }
    }

    /// The earliest current wake-up (stale heap entries are dropped on the way).
    fn next_timer(&mut self) -> Option<Instant> {
        while let Some(Reverse((at, slot))) = self.timers.peek().copied() {
            let current = self
                .slots
                .get(slot)
                .and_then(Option::as_ref)
                .map(|s| s.wake);
            if current == Some(Some(at)) {
                return Some(at);
            }
            self.timers.pop();
        }
        None
    }

    /// Rebuilds the timer heap from the engines' current wake-ups once stale entries (a busy
    /// engine's idle deadline moves on every read) outnumber them: the heap stays O(engines).
    fn compact_timers(&mut self) {
        if self.timers.len() <= 2 * self.slots.len() + 64 {
            return;
        }
        self.timers = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some(Reverse((s.as_ref()?.wake?, i))))
            .collect();
    }

    fn adopt(&mut self, task: Task) {
        let slot = Slot {
            task,
            registered: Vec::new(),
            wake: None,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(slot);
                i
            }
            None => {
                self.slots.push(Some(slot));
                self.slots.len() - 1
            }
        };
        self.turn(i, None);
    }

    /// One step of the engine in `i`, then its registrations and wake-up, or its hand-over to
    /// the pool.
    fn turn(&mut self, i: usize, woken: Option<Woken>) {
        let Some(slot) = self.slots.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        let step = slot.task.step(woken, &mut self.buf);
        let wake = match step {
            Step::Wait(wake) => wake,
            Step::StopDue | Step::Done => {
                let Some(mut slot) = self.slots[i].take() else {
                    return;
                };
                self.free.push(i);
                let light = match (&step, &mut slot.task) {
                    (Step::Done, Task::Launch(p)) => p.light(),
                    _ => false,
                };
                let job = match (step, slot.task) {
                    // A tail is done when its streams are: nothing blocking is left.
                    (_, Task::Tail(_)) => return,
                    // A quiet launch (a probe: nothing synced) whose guardian has exited has
                    // nothing left to wait for: its result is made here, without a hand-off.
                    (Step::Done, Task::Launch(p)) if light => {
                        let Parked { engine, st, done } = *p;
                        done.deliver(engine.finish(st));
                        return;
                    }
                    (Step::Done, task) => Job::Finish(task),
                    (_, task) => Job::Stop(task),
                };
                if let Err(mpsc::SendError(job)) = self.jobs.send(job) {
                    let (Job::Stop(task) | Job::Finish(task)) = job;
                    own_thread(task);
                }
                return;
            }
        };
        let interest = slot.task.interest(Instant::now());
        let mut failed = false;
        let mut now_registered = Vec::with_capacity(interest.len());
        for (source, fd, flags) in &interest {
            let raw = std::os::fd::AsRawFd::as_raw_fd(fd);
            let was = slot
                .registered
                .iter()
                .find(|(s, r, _)| s == source && *r == raw)
                .copied();
            let fired = woken.is_some_and(|w| w.has(*source));
            let data = epoll::EventData::new_u64(token(i, *source));
            let ef = epoll_flags(*flags);
            let res = match was {
                // Armed and not fired: still armed (one-shot).
                Some((_, _, f)) if f == *flags && !fired => Ok(()),
                Some(_) => match epoll::modify(&self.epoll, fd.as_fd(), data, ef) {
                    Err(rustix::io::Errno::NOENT) => epoll::add(&self.epoll, fd.as_fd(), data, ef),
                    other => other,
                },
                None => match epoll::add(&self.epoll, fd.as_fd(), data, ef) {
                    Err(rustix::io::Errno::EXIST) => {
                        epoll::modify(&self.epoll, fd.as_fd(), data, ef)
                    }
                    other => other,
                },
            };
            if let Err(e) = res {
                tracing::warn!(error = %e, "cannot watch a descriptor in the shared loop");
                failed = true;
            }
            now_registered.push((*source, raw, *flags));
        }
        drop(interest);
        slot.registered = now_registered;
        let previous = std::mem::replace(&mut slot.wake, wake);
        if let Some(at) = wake.filter(|_| wake != previous) {
            self.timers.push(Reverse((at, i)));
            self.compact_timers();
        }
        if failed {
            // The loop cannot watch this engine: it goes on on a thread of its own.
            let Some(slot) = self.slots[i].take() else {
                return;
            };
            self.free.push(i);
            own_thread(slot.task);
        }
    }
}
