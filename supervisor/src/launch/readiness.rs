//! H6: readiness. A launch may say how its workload tells it is ready; until then its scope is
//! `starting`, then `ready`, or `failed` (not ready within its timeout, or its main process
//! ended first). The launcher records each step in `logs/ID.ready` and the events journal.
//!
//! ```text
//! notify   an abstract datagram socket `@refine-notify/<id>`, bound before the spawn, with
//!          SO_PASSCRED; the workload gets NOTIFY_SOCKET=@refine-notify/<id> (sd_notify's
//!          protocol: newline-separated assignments). A datagram counts only when its
//!          sender's pid (the kernel's SCM_CREDENTIALS) is a process of the scope: a descendant
//!          of its guardian, checked against the guardian's start time. READY=1 makes it ready;
//!          STATUS=text is kept (escaped, at most 256 bytes)
//! fd       s6's notification descriptor: a pipe whose write end the guardian puts on
//!          descriptor N of the workload (the one descriptor past stdio it keeps across the
//!          exec); a newline written on it makes the scope ready, its end without one (every
//!          copy closed) fails it
//! cmd      the probe `sh -c CMD` in the workload's directory, each time a scope of its own
//!          (kind `command`, label `<label>.ready`, a 10 s deadline), every second until one
//!          exits 0
//! wait     poll(2) on the socket (notify) and on the workload's pidfd, bounded by the
//!          timeout: no busy loop, and the main process's exit ends the wait at once
//! timeout  the state becomes `failed`, then the scope is stopped through the shared stop
//!          (cause `ready_timeout`: the launch's outcome is `timed_out`), its group getting
//!          SIGTERM and its `kill_after` (5 s by default) first
//! ```
//!
//! # Caveats
//! - The watch is a thread of the launcher, for the scope's start only; a launcher that dies
//!   first leaves the record `starting` (the views then read the scope as it is: live).
//! - An abstract socket belongs to the network namespace: a workload that unshares its network
//!   namespace before it notifies cannot reach it (as with systemd).

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use refine_protocol::docs::{EventKind, ReadyState};
use refine_protocol::record::{ReadinessSpec, ReadyMode, ReadyRecord, StopCause};
use refine_protocol::{ProcessWitness, Registration};

use crate::store::journal;
use crate::store::registry::Runtime;

/// How long a workload has to be ready when the launch does not say (systemd's start timeout).
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(90);
const PROBE_EVERY: Duration = Duration::from_secs(1);
const PROBE_DEADLINE: Duration = Duration::from_secs(10);
const MAX_STATUS: usize = 256;

/// How the workload says it is ready (`run --ready`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadyAsk {
    Notify,
    Fd(u32),
    Cmd(String),
}

impl std::str::FromStr for ReadyAsk {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        if text == "notify" {
            return Ok(ReadyAsk::Notify);
        }
        if let Some(n) = text.strip_prefix("fd=") {
            return match n.parse::<u32>() {
                Ok(n) if (3..=1023).contains(&n) => Ok(ReadyAsk::Fd(n)),
                _ => Err(format!(
                    "{text:?}: the descriptor is a number from 3 to 1023 (0-2 are stdio)"
                )),
            };
        }
        if let Some(cmd) = text.strip_prefix("cmd=") {
            if cmd.trim().is_empty() {
                return Err(format!("{text:?}: the probe command is empty"));
            }
            return Ok(ReadyAsk::Cmd(cmd.to_owned()));
        }
        Err(format!(
            "{text:?} is not a readiness: notify, fd=N or cmd=COMMAND"
        ))
    }
}

impl std::fmt::Display for ReadyAsk {
    /// As `run --ready` and the socket's `ready` take it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadyAsk::Notify => write!(f, "notify"),
            ReadyAsk::Fd(n) => write!(f, "fd={n}"),
            ReadyAsk::Cmd(c) => write!(f, "cmd={c}"),
        }
    }
}

/// A launch's readiness: how, and how long it may take (`None`: no bound).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    pub ask: ReadyAsk,
    pub timeout: Option<Duration>,
}

impl Readiness {
    /// What the registration records.
    pub fn spec(&self) -> ReadinessSpec {
        let (mode, fd, cmd) = match &self.ask {
            ReadyAsk::Notify => (ReadyMode::Notify, None, None),
            ReadyAsk::Fd(n) => (ReadyMode::Fd, Some(*n), None),
            ReadyAsk::Cmd(c) => (ReadyMode::Cmd, None, Some(c.clone())),
        };
        ReadinessSpec {
            mode,
            fd,
            cmd,
            timeout_ms: self.timeout.map(refine_protocol::time::saturating_ms),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReadinessError {
    #[error("cannot {op} for --ready notify")]
    Socket {
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot make the pipe for --ready fd=N")]
    Pipe(#[source] std::io::Error),
}

/// What a launch with readiness holds from before its spawn: the notify socket or the pipe's
/// read end (the watch's), the environment entry the workload gets (notify), and the pipe's
/// write end with its number (fd, for the guardian).
#[derive(Debug)]
pub struct Prepared {
    socket: Option<OwnedFd>,
    pub env: Option<OsString>,
    pub child_fd: Option<(OwnedFd, u32)>,
}

fn notify_name(id: refine_protocol::RegistrationId) -> String {
    format!("refine-notify/{id}")
}

/// Binds the notify socket (notify) before the spawn.
pub fn prepare(
    r: &Readiness,
    id: refine_protocol::RegistrationId,
) -> Result<Prepared, ReadinessError> {
    use rustix::net::{
        bind, socket_with, sockopt, AddressFamily, SocketAddrUnix, SocketFlags, SocketType,
    };
    let err = |op| {
        move |e: rustix::io::Errno| ReadinessError::Socket {
            op,
            source: e.into(),
        }
    };
    match &r.ask {
        ReadyAsk::Cmd(_) => Ok(Prepared {
            socket: None,
            env: None,
            child_fd: None,
        }),
        ReadyAsk::Fd(n) => {
            let (r, w) = rustix::pipe::pipe_with(
                rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
            )
            .map_err(|e| ReadinessError::Pipe(e.into()))?;
            // The workload's end blocks as a pipe it was given would (only ours polls).
            let _ = rustix::fs::fcntl_setfl(&w, rustix::fs::OFlags::empty());
            Ok(Prepared {
                socket: Some(r),
                env: None,
                child_fd: Some((w, *n)),
            })
        }
        ReadyAsk::Notify => {
            let name = notify_name(id);
            let fd = socket_with(
                AddressFamily::UNIX,
                SocketType::DGRAM,
                SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
                None,
            )
            .map_err(err("make the socket"))?;
            sockopt::set_socket_passcred(&fd, true).map_err(err("ask for credentials"))?;
            let addr = SocketAddrUnix::new_abstract_name(name.as_bytes())
                .map_err(err("name the socket"))?;
            bind(&fd, &addr).map_err(err("bind the socket"))?;
            let mut env = OsString::from("NOTIFY_SOCKET=@");
            env.push(name);
            Ok(Prepared {
                socket: Some(fd),
                env: Some(env),
                child_fd: None,
            })
        }
    }
}

/// Starts the watch of a registered launch's readiness (a thread, until it is decided).
pub fn watch(rt: Runtime, reg: Registration, r: Readiness, p: Prepared) {
    let id = reg.id;
    let spawned = std::thread::Builder::new()
        .name(format!("refine-ready-{}", &reg.id.to_string()[..8]))
        .spawn(move || {
            let outcome = decide(&rt, &reg, &r, p);
            settle(&rt, &reg, outcome);
        });
    if let Err(e) = spawned {
        tracing::warn!(%id, error = %e, "cannot watch the workload's readiness");
    }
}

/// How the watch ended.
#[derive(Debug)]
enum Decided {
    Ready {
        status: Option<String>,
        probes: u32,
    },
    TimedOut {
        after: Duration,
        probes: u32,
    },
    Ended {
        probes: u32,
    },
    /// `fd`: every copy of the pipe's write end closed, no newline written.
    Closed,
}

enum Line {
    Newline,
    Closed,
    NotYet,
}

/// What the readiness pipe holds: a newline (ready), its end, or bytes without a newline yet.
fn read_newline(pipe: &OwnedFd) -> Line {
    let mut buf = [0u8; 512];
    loop {
        match rustix::io::read(pipe, &mut buf) {
            Ok(0) => return Line::Closed,
            Ok(n) if buf[..n].contains(&b'\n') => return Line::Newline,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return Line::NotYet,
        }
    }
}

fn record(
    rt: &Runtime,
    reg: &Registration,
    state: ReadyState,
    status: Option<String>,
    reason: Option<String>,
    probes: u32,
) {
    let rec = ReadyRecord {
        id: reg.id,
        runtime: rt.id(),
        state,
        at_unix_ms: crate::kernel::clock::unix_ms(),
        status,
        reason,
        probes,
    };
    if let Err(e) = rt.write_ready(&rec) {
        tracing::warn!(id = %reg.id, error = %crate::error::error_chain(&e), "cannot record the readiness");
    }
}

/// Serializes the decisions of this process (its watches and its engines' ends), so that a
/// scope is decided once, and its event written once.
static DECIDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Records `state` unless the readiness is decided already; then its event. `false`: it was.
fn decide_once(
    rt: &Runtime,
    reg: &Registration,
    state: ReadyState,
    status: Option<String>,
    reason: Option<String>,
    probes: u32,
) -> bool {
    let _one = DECIDING.lock().unwrap_or_else(|p| p.into_inner());
    let decided = rt
        .read_ready(reg.id)
        .ok()
        .flatten()
        .is_some_and(|r| r.state != ReadyState::Starting);
    if decided {
        return false;
    }
    record(rt, reg, state, status.clone(), reason.clone(), probes);
    let kind = match state {
        ReadyState::Ready => EventKind::Ready,
        _ => EventKind::NotReady,
    };
    let mut ev = journal::event(kind, reg.id, &reg.label);
    ev.ready_status = status;
    ev.reason = reason;
    journal::record(rt, &ev);
    true
}

/// The launch's engine at its end: a readiness its watch has not decided yet (the watch's
/// process may exit now) fails as the main process's end does.
pub fn ended(rt: &Runtime, reg: &Registration) {
    if reg.readiness.is_some() {
        let why = "the workload ended before it was ready".to_owned();
        decide_once(rt, reg, ReadyState::Failed, None, Some(why), 0);
    }
}

fn settle(rt: &Runtime, reg: &Registration, outcome: Decided) {
    match outcome {
        Decided::Ready { status, probes } => {
            decide_once(rt, reg, ReadyState::Ready, status, None, probes);
        }
        Decided::Closed => {
            let why = "the workload closed its readiness descriptor without a newline".to_owned();
            decide_once(rt, reg, ReadyState::Failed, None, Some(why), 0);
        }
        Decided::Ended { probes } => {
            let why = "the workload ended before it was ready".to_owned();
            decide_once(rt, reg, ReadyState::Failed, None, Some(why), probes);
        }
        Decided::TimedOut { after, probes } => {
            let why = format!("not ready within {}", crate::human::duration(after));
            if !decide_once(rt, reg, ReadyState::Failed, None, Some(why), probes) {
                return;
            }
            let opts = crate::end::stop::StopOptions {
                cause: Some(StopCause::ReadyTimeout),
                grace: Some(
                    reg.limits
                        .kill_after_ms
                        .map_or(Duration::from_secs(5), Duration::from_millis),
                ),
                ..crate::end::stop::StopOptions::default()
            };
            if let Err(e) = crate::end::stop::stop(rt, reg, &opts) {
                tracing::warn!(id = %reg.id, error = %crate::error::error_chain(&e), "cannot stop a scope not ready in time");
            }
        }
    }
}

/// Waits for the decision: ready, the timeout, or the main process's end.
fn decide(rt: &Runtime, reg: &Registration, r: &Readiness, p: Prepared) -> Decided {
    record(rt, reg, ReadyState::Starting, None, None, 0);
    let started = Instant::now();
    let deadline = r.timeout.map(|t| started + t);
    let Ok(workload) = crate::kernel::signal::Verified::open(reg.hello.workload) else {
        return Decided::Ended { probes: 0 };
    };
    let mut probes = 0;
    let mut status = None;
    loop {
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            return Decided::TimedOut {
                after: r.timeout.unwrap_or_default(),
                probes,
            };
        }
        match (&r.ask, &p.socket) {
            (ReadyAsk::Notify, Some(sock)) => {
                match poll_two(sock.as_fd(), workload.as_fd(), left) {
                    Woke::Workload => return Decided::Ended { probes },
                    Woke::Timeout => {}
                    Woke::Socket => {
                        let (ready, said) = drain(sock, reg.hello.guardian);
                        if said.is_some() && said != status {
                            status = said;
                            record(rt, reg, ReadyState::Starting, status.clone(), None, 0);
                        }
                        if ready {
                            return Decided::Ready { status, probes };
                        }
                    }
                }
            }
            (ReadyAsk::Fd(_), Some(pipe)) => match poll_two(pipe.as_fd(), workload.as_fd(), left) {
                Woke::Workload => return Decided::Ended { probes },
                Woke::Timeout => {}
                Woke::Socket => match read_newline(pipe) {
                    Line::Newline => return Decided::Ready { status, probes },
                    // Its end with the workload's is the workload's end.
                    Line::Closed => match poll_one(workload.as_fd(), Duration::ZERO) {
                        Woke::Workload => return Decided::Ended { probes },
                        _ => return Decided::Closed,
                    },
                    Line::NotYet => {}
                },
            },
            (ReadyAsk::Cmd(cmd), _) => {
                probes += 1;
                if probe(rt, reg, cmd, left) {
                    return Decided::Ready { status, probes };
                }
                record(rt, reg, ReadyState::Starting, None, None, probes);
                let pause = left.map_or(PROBE_EVERY, |l| l.min(PROBE_EVERY));
                if let Woke::Workload = poll_one(workload.as_fd(), pause) {
                    return Decided::Ended { probes };
                }
            }
            // Refused at `prepare`.
            _ => return Decided::Ended { probes },
        }
    }
}

enum Woke {
    Socket,
    Workload,
    Timeout,
}

fn timespec(d: Duration) -> rustix::event::Timespec {
    rustix::event::Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}

fn poll_two(
    sock: std::os::fd::BorrowedFd<'_>,
    workload: std::os::fd::BorrowedFd<'_>,
    left: Option<Duration>,
) -> Woke {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [
        PollFd::new(&workload, PollFlags::IN),
        PollFd::new(&sock, PollFlags::IN),
    ];
    let limit = left.map(timespec);
    // What the workload sent before it ended is read first: a READY=1 and the exit together
    // are a scope that was ready.
    match poll(&mut fds, limit.as_ref()) {
        Ok(0) | Err(_) => Woke::Timeout,
        Ok(_) if !fds[1].revents().is_empty() => Woke::Socket,
        Ok(_) => Woke::Workload,
    }
}

fn poll_one(workload: std::os::fd::BorrowedFd<'_>, pause: Duration) -> Woke {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(&workload, PollFlags::IN)];
    match poll(&mut fds, Some(&timespec(pause))) {
        Ok(n) if n > 0 => Woke::Workload,
        _ => Woke::Timeout,
    }
}

/// Reads every queued datagram: whether one from the scope said `READY=1`, and its last
/// `STATUS=`. Datagrams from outside the scope are dropped (and logged once each).
fn drain(sock: &OwnedFd, guardian: ProcessWitness) -> (bool, Option<String>) {
    use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut ready = false;
    let mut status = None;
    loop {
        let mut buf = [0u8; 4096];
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmCredentials(1))];
        let mut ancillary = RecvAncillaryBuffer::new(&mut space);
        let got = recvmsg(
            sock,
            &mut [std::io::IoSliceMut::new(&mut buf)],
            &mut ancillary,
            RecvFlags::DONTWAIT,
        );
        let Ok(msg) = got else { break };
        let sender = ancillary.drain().find_map(|m| match m {
            RecvAncillaryMessage::ScmCredentials(c) => Some(c.pid),
            _ => None,
        });
        let Some(pid) = sender.filter(|p| in_scope(p.as_raw_nonzero().get(), guardian)) else {
            tracing::warn!(pid = ?sender, "dropped a notify datagram from outside the scope");
            continue;
        };
        let _ = pid;
        let text = String::from_utf8_lossy(&buf[..msg.bytes]);
        for line in text.lines() {
            if line == "READY=1" {
                ready = true;
            } else if let Some(s) = line.strip_prefix("STATUS=") {
                // Kept as sent (the views escape it): only its length is bounded here.
                let mut cut = s.to_owned();
                if cut.len() > MAX_STATUS {
                    let mut at = MAX_STATUS;
                    while !cut.is_char_boundary(at) {
                        at -= 1;
                    }
                    cut.truncate(at);
                }
                status = Some(cut);
            }
        }
    }
    (ready, status)
}

/// `pid` is a process of the scope: the guardian (checked against its start time) is one of
/// its ancestors.
fn in_scope(pid: i32, guardian: ProcessWitness) -> bool {
    let Ok(g) = crate::kernel::procfs::stat_of(&guardian) else {
        return false;
    };
    if g.is_none_or(|s| s.start_time != guardian.start_time) {
        return false;
    }
    let mut at = pid;
    for _ in 0..256 {
        let Some(p) = rustix::process::Pid::from_raw(at) else {
            return false;
        };
        let Ok(st) = crate::kernel::procfs::stat(p) else {
            return false;
        };
        if st.ppid == guardian.pid as i32 {
            return true;
        }
        if st.ppid <= 1 {
            return false;
        }
        at = st.ppid;
    }
    false
}

/// One probe: `sh -c CMD` in the workload's directory, a proven scope of its own.
fn probe(rt: &Runtime, reg: &Registration, cmd: &str, left: Option<Duration>) -> bool {
    let mut req =
        crate::launch::LaunchRequest::new(refine_protocol::Kind::Command, ["sh", "-c", cmd]);
    req.cwd = Some(reg.cwd.clone().into());
    let owner = match reg.label.as_str() {
        "" => reg.id.to_string()[..12].to_owned(),
        l => l.to_owned(),
    };
    req.label = format!("{owner}.ready");
    req.timeout = Some(left.map_or(PROBE_DEADLINE, |l| l.min(PROBE_DEADLINE)));
    req.kill_after = Some(Duration::ZERO);
    let sup = crate::launch::Supervisor::new(rt.clone());
    match sup.launch(req).and_then(|h| h.wait()) {
        Ok(r) => r.status == refine_protocol::WorkloadStatus::Exited(0),
        Err(e) => {
            tracing::warn!(id = %reg.id, error = %crate::error::error_chain(&e), "the readiness probe did not run");
            false
        }
    }
}

/// How [`wait_ready`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitedReady {
    /// Recorded `ready` or `failed`.
    Decided(ReadyRecord),
    /// Nothing decided within the wait (the record, if any, still says `starting`).
    TimedOut(Option<ReadyRecord>),
    /// The launch asked for no readiness: it was ready at its `execve`.
    NotAsked,
    /// The scope is over and no launcher recorded a decision (it died first).
    Undecided,
}

/// Waits until `id`'s readiness is decided (its launcher records `ready` or `failed`), at most
/// `timeout` (`None`: no bound): inotify on `logs/` (the record is replaced by a rename), with a
/// 1 s backstop that also notices a scope over without a decision.
pub fn wait_ready(
    rt: &Runtime,
    id: refine_protocol::RegistrationId,
    timeout: Option<Duration>,
) -> Result<WaitedReady, crate::store::registry::RegistryError> {
    use rustix::fs::inotify::{add_watch, init, CreateFlags, WatchFlags};
    let reg = rt.read_registration(id)?;
    if reg.readiness.is_none() {
        return Ok(WaitedReady::NotAsked);
    }
    let watch = init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok();
    if let Some(fd) = &watch {
        let _ = add_watch(
            fd,
            rt.dir().join("logs"),
            WatchFlags::MOVED_TO | WatchFlags::CREATE,
        );
    }
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        let rec = rt.read_ready(id)?;
        if let Some(r) = rec.as_ref().filter(|r| r.state != ReadyState::Starting) {
            return Ok(WaitedReady::Decided(r.clone()));
        }
        let over = crate::end::assess::assess(rt, &reg, &crate::end::assess::KERNEL_BOOT);
        if over.is_exited() || over.name() == "unverified" {
            // The launcher may have written its decision just before the end.
            return Ok(match rt.read_ready(id)? {
                Some(r) if r.state != ReadyState::Starting => WaitedReady::Decided(r),
                _ => WaitedReady::Undecided,
            });
        }
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            return Ok(WaitedReady::TimedOut(rec));
        }
        let pause = left.map_or(Duration::from_secs(1), |l| l.min(Duration::from_secs(1)));
        match &watch {
            Some(fd) => {
                let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
                let _ = rustix::event::poll(&mut fds, Some(&timespec(pause)));
                let mut buf = [0u8; 4096];
                while matches!(rustix::io::read(fd, &mut buf), Ok(n) if n > 0) {}
            }
            None => std::thread::sleep(pause.min(Duration::from_millis(100))),
        }
    }
}
