//! The gate (G3, G8, X3): the workload is forked, prepared (session or process group, stdio,
//! signal dispositions and mask reset, resource limits) and then blocks on a pipe until the
//! launcher says *start*. Only then does it take the workload's credentials (`run --user`), enter
//! its working directory and `execve`. No workload code runs before the launcher has made the
//! registration durable.
//!
//! Two close-on-exec pipes connect guardian and child:
//! - the *gate* (guardian -> child): one start byte releases the child; end of file (abort, or
//!   the guardian died) makes it `_exit` without executing anything;
//! - the *report* pipe (child -> guardian): for a new session, one ready byte once the child's
//!   session is set (a process group the guardian sets from its side and does not wait for),
//!   then either end of file or the 4-byte errno and the 1-byte [`SpawnStep`] of a failed
//!   setup, credential change, `chdir` or exec (W13: the launcher names what failed).
//!
//! End of file on the report pipe has two causes: the pipe closed on a successful `execve`, or
//! the child died before it (a `SIGKILL` from outside between *start* and `execve`). The guardian
//! tells them apart by the child's `PF_FORKNOEXEC` flag in `/proc/PID/stat` (set by `fork`,
//! cleared by `execve` before it closes the close-on-exec descriptors, kept by a zombie until it
//! is reaped, see [`crate::identity::never_exec_d`]): a child that never exec'd is reported never
//! started, whatever its exit status.
//!
//! # The user switch (X2, X3)
//! A launch with credentials always gets a session of its own (no controlling terminal: it cannot
//! type into the operator's shell with `TIOCSTI`). The switch happens after *start*, immediately
//! before `execve`, so until then the gated child keeps the guardian's uid and its
//! `PR_SET_DUMPABLE 0`: no process of the target user can signal it or take its descriptors
//! (`pidfd_getfd`) at the gate. The switch is complete and checked (see
//! [`crate::sys::child::drop_privileges`]): the bounding set where the guardian may, the groups,
//! gid and uid, then the ambient, inheritable, permitted and effective capabilities; then the
//! ids, groups and capability sets are read back, and any difference is a spawn failure at the
//! user step (`EPERM`), the workload never runs.
//!
//! Every wait here is bounded and watches the channel and the signalfd too (G14): a gated child
//! stopped with `SIGSTOP` can delay a launch by at most its start bound, never hang the guardian.
//! - before *start*: abort, a closed channel, a termination signal to the guardian (`SIGTERM`,
//!   `SIGINT`: W9; `SIGHUP` and `SIGQUIT` are queued like the rest) or the start bound end the
//!   wait, and the launch is aborted;
//! - at the gate and while the child execs, the launcher's `Signal` frames and the other
//!   forwarded signals are queued, in the order they came, and delivered to the program once it
//!   runs (a direct launch would have delivered them to it, not to a child that never ran it).
//!   The queue holds each signal once, at its latest place (`STOP` then `CONT` stays in that
//!   order; `STOP`, `CONT`, `STOP` ends stopped): it never overflows, nothing is dropped (X5).
//!   After *start*, abort, a termination signal to the guardian or the bound `SIGKILL` the
//!   child; a closed channel sends it the parent-death signal (G7). The wait then goes on
//!   until the report says how it ended.
//!
//! Between `fork` and `execve` the child makes only async-signal-safe calls, allocates nothing
//! and formats nothing: argv and envp are pointer arrays built before the fork into the frame
//! buffer, a `PATH` candidate is assembled in a stack buffer. Exec failure exits 127 for `ENOENT`
//! and 126 otherwise (as tini does).
//!
//! # Caveats
//! A setup failure in the child (chdir, setrlimit, the controlling tty, the credentials of
//! `run --user`) is reported exactly like an exec failure, with its errno and its step: the
//! workload never ran. If the gated child is killed from outside before *start*, the release
//! fails and the workload is reported never started. A stopped child keeps a non-`SIGKILL`
//! signal pending: it acts only once the child continues.

use core::ffi::{c_char, CStr};

use refine_protocol_core::frame::{
    Placement, SpawnStep, FLAG_ALLOW_SETNS, FLAG_NEW_SESSION, FLAG_NO_NEW_PRIVS, FLAG_PTY,
    MAX_GROUPS,
};
use refine_protocol_core::LaunchSpec;

use crate::channel::{Channel, Control};
use crate::error::Error;
use crate::signals::Signals;
use crate::sys::{self, child, Errno, Fork, OwnedFd, Pid};

const START_BYTE: u8 = b'S';
const READY_BYTE: u8 = b'R';
/// `execvpe`'s default search path when the workload's environment has no `PATH`.
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// argv/envp as NULL-terminated pointer arrays, plus the workload's `PATH`.
pub struct ExecPlan {
    argv: &'static [*const c_char],
    envp: &'static [*const c_char],
    /// `argv[0]`, the program to run.
    program: &'static CStr,
    path: &'static [u8],
    /// Who the workload runs as (X1), `None`: the guardian's own credentials.
    credentials: Option<Credentials>,
}

/// The workload's uid, gid and supplementary groups, unpacked before the fork.
struct Credentials {
    uid: u32,
    gid: u32,
    groups: [u32; MAX_GROUPS],
    count: usize,
}

impl ExecPlan {
    /// Fills the pointer arrays (argc + 1 and envc + 1 long) from the spec; each ends with a
    /// null pointer.
    pub fn build(
        spec: &LaunchSpec<'static>,
        argv: &'static mut [*const c_char],
        envp: &'static mut [*const c_char],
    ) -> ExecPlan {
        let argc = fill(argv, spec.argv.iter());
        let envc = fill(envp, spec.env.iter());
        let path = spec
            .env
            .iter()
            .find_map(|e| e.to_bytes().strip_prefix(b"PATH="))
            .unwrap_or(DEFAULT_PATH);
        let credentials = spec.credentials.map(|c| {
            let mut groups = [0u32; MAX_GROUPS];
            let mut count = 0;
            for (slot, g) in groups.iter_mut().zip(c.groups.iter()) {
                *slot = g;
                count += 1;
            }
            Credentials {
                uid: c.uid,
                gid: c.gid,
                groups,
                count,
            }
        });
        ExecPlan {
            program: spec.argv.iter().next().unwrap_or(c""),
            argv: &argv[..argc + 1],
            envp: &envp[..envc + 1],
            path,
            credentials,
        }
    }
}

/// Writes the pointers and returns how many; the slot after them stays null.
fn fill(slots: &mut [*const c_char], items: impl Iterator<Item = &'static CStr>) -> usize {
    let mut n = 0;
    for s in items {
        if n + 1 >= slots.len() {
            break; // slots has count + 1 entries; never reached
        }
        slots[n] = s.as_ptr();
        n += 1;
    }
    slots[n] = core::ptr::null();
    n
}

/// A forked, gated workload.
pub struct Workload {
    pub pid: Pid,
    /// `None` once the workload is reaped: it is never signalled after that.
    pub pidfd: Option<OwnedFd>,
    /// Where it was forked (F4).
    pub placement: Placement,
    pub start_time: u64,
    pub pgid: u32,
    pub sid: u32,
    /// The child reached the gate (its session/group is set) and its identity is known; if
    /// not, the launch is aborted.
    pub ready: bool,
    /// A system call failed while the child was gated (the launch is aborted, and the receipt
    /// names the error).
    pub failure: Option<Error>,
    gate: Option<OwnedFd>,
    report: OwnedFd,
    /// Signals for the program, held while it is gated or execs (see the module docs).
    queued: SignalQueue,
}

/// Signals 1..=64 in arrival order, each at most once (at its latest place): 64 slots always
/// suffice, so none is ever dropped.
struct SignalQueue {
    sigs: [u8; 64],
    len: usize,
}

impl SignalQueue {
    fn push(&mut self, sig: i32) {
        if !(1..=64).contains(&sig) {
            return;
        }
        let sig = sig as u8;
        let mut kept = 0;
        for i in 0..self.len {
            if self.sigs[i] != sig {
                self.sigs[kept] = self.sigs[i];
                kept += 1;
            }
        }
        self.sigs[kept] = sig;
        self.len = kept + 1;
    }
}

/// What the launcher decided while the workload waited at the gate.
pub enum Decision {
    Start,
    Abort,
    /// Waiting failed (poll or signalfd): the launch is aborted and the receipt names the error.
    Failed(Error),
}

/// How the release went.
pub enum Release {
    Started,
    /// This step of the release failed with this errno; the child exits 126/127.
    SpawnFailed(Errno, SpawnStep),
    /// The child never exec'd: it was already gone, or died (was killed) before `execve`.
    NeverExecuted,
    /// Whether it exec'd cannot be known (the wait or `/proc` failed); the status is unknown.
    Failed(Error),
}

/// One thing a bounded gate wait saw.
enum Event {
    /// The report pipe is readable (data or end of file).
    Report,
    /// The deadline passed.
    Timeout,
    Signal(i32),
    Control(Control),
}

/// Waits for the report pipe, a signal or a channel frame, until `deadline` (monotonic ms;
/// `None`: no bound).
fn next_event(
    report: &OwnedFd,
    chan: &mut Channel,
    signals: &Signals,
    deadline: Option<u64>,
) -> Result<Event, Error> {
    loop {
        let timeout = match deadline {
            Some(d) => {
                let now = sys::monotonic_ms();
                if now >= d {
                    return Ok(Event::Timeout);
                }
                (d - now).min(i32::MAX as u64) as i32
            }
            None => -1,
        };
        let mut fds = [
            sys::poll_in(report),
            sys::poll_in(signals.fd()),
            sys::poll_none(),
        ];
        if chan.is_open() {
            fds[2] = sys::poll_in(chan.fd());
        }
        sys::poll(&mut fds, timeout).map_err(Error::Poll)?;
        if sys::ready(&fds[1]) {
            if let Some(sig) = signals.take()? {
                return Ok(Event::Signal(sig));
            }
        }
        if chan.is_open() && sys::ready(&fds[2]) {
            return Ok(Event::Control(chan.recv_control()));
        }
        if sys::ready(&fds[0]) {
            return Ok(Event::Report);
        }
    }
}

/// The deadline `ms` from now.
fn deadline_in(ms: u32) -> u64 {
    sys::monotonic_ms() + ms as u64
}

/// Forks the workload and waits (bounded by the start timeout, watching the channel and
/// signals) until it is at the gate. `stdio` descriptors are closed in the guardian afterwards
/// (so the scope's readers see EOF when the workload side closes them).
pub fn fork_gated(
    spec: &LaunchSpec<'static>,
    plan: &ExecPlan,
    stdio: [Option<OwnedFd>; 3],
    ready: Option<OwnedFd>,
    ruleset: Option<OwnedFd>,
    chan: &mut Channel,
    signals: &Signals,
) -> Result<Workload, Error> {
    let (gate_r, gate_w) = sys::pipe().map_err(Error::Pipe)?;
    let (report_r, report_w) = sys::pipe().map_err(Error::Pipe)?;
    let (forked, placement) = fork_placed(spec);
    match forked.map_err(Error::Fork)? {
        Fork::Child => {
            drop(gate_w);
            drop(report_r);
            run_child(
                spec,
                plan,
                &stdio,
                ready.as_ref(),
                ruleset,
                gate_r,
                report_w,
            )
        }
        Fork::Parent(pid) => {
            drop(gate_r);
            drop(report_w);
            drop(stdio);
            // H6: the workload holds the readiness pipe now; the launcher's reader sees its
            // end when the workload's copies go.
            drop(ready);
            // X11: only the gated child applies the ruleset; the guardian stays outside it.
            drop(ruleset);
            // From here on nothing returns an error: a child exists, so every failure becomes
            // "not ready", which the caller turns into an abort (kill, reap, receipt).
            let mut w = Workload {
                pid,
                pidfd: sys::pidfd_open(pid).ok(),
                placement,
                start_time: 0,
                pgid: 0,
                sid: 0,
                ready: false,
                failure: None,
                gate: Some(gate_w),
                report: report_r,
                queued: SignalQueue {
                    sigs: [0; 64],
                    len: 0,
                },
            };
            let at_gate = if new_session(spec) {
                // Only the child can make its session: wait (bounded) until it has.
                w.await_ready(chan, signals, deadline_in(spec.start_timeout_ms))
            } else {
                // A process group can be set from this side (the child sets it too; whichever
                // runs first wins, both agree): once it is, the hello need not wait for the
                // child to be scheduled. The child cannot exec before the gate opens.
                sys::setpgid_child(pid).is_ok()
            };
            if let (true, Some(_)) = (at_gate, &w.pidfd) {
                if let (Ok(start), Ok(pgid), Ok(sid)) = (
                    crate::identity::start_time(pid),
                    sys::getpgid(pid),
                    sys::getsid(pid),
                ) {
                    (w.start_time, w.pgid, w.sid, w.ready) = (start, pgid, sid, true);
                }
            }
            Ok(w)
        }
    }
}

/// F4: the fork, straight into the launch's cgroup where it asks for one. Where the kernel
/// refuses that clone3 (too old: ENOSYS, E2BIG, EINVAL; not a cgroup v2 directory: EBADF; no
/// permission for the delegated subtree: EACCES, EPERM; a cgroup with domain controllers and
/// processes: EBUSY; EOPNOTSUPP) or the directory cannot be opened, a plain fork instead, and
/// the refusal is reported: the scope then works through `/proc` as without one.
fn fork_placed(spec: &LaunchSpec<'static>) -> (Result<Fork, sys::Errno>, Placement) {
    let Some(path) = spec.cgroup else {
        return (sys::fork(), Placement::NotAsked);
    };
    let dir = match sys::open_dir(path) {
        Ok(dir) => dir,
        Err(e) => return (sys::fork(), Placement::Refused { errno: e.0 }),
    };
    match sys::fork_into_cgroup(&dir) {
        Err(
            e @ sys::Errno(
                libc::ENOSYS
                | libc::EINVAL
                | libc::E2BIG
                | libc::EOPNOTSUPP
                | libc::EACCES
                | libc::EPERM
                | libc::EBUSY
                | libc::EBADF,
            ),
        ) => (sys::fork(), Placement::Refused { errno: e.0 }),
        other => (other, Placement::Cgroup),
    }
}

/// Whether the workload gets a session of its own (PTY, asked for, or another user's: X2)
/// rather than a group.
fn new_session(spec: &LaunchSpec<'static>) -> bool {
    spec.flags & (FLAG_PTY | FLAG_NEW_SESSION) != 0 || spec.credentials.is_some()
}

impl Workload {
    /// Waits for *start* within `timeout_ms`. Abort, the timeout, the channel closing or a
    /// termination signal all mean: do not start. Signals for the workload are queued.
    pub fn await_start(
        &mut self,
        chan: &mut Channel,
        signals: &Signals,
        timeout_ms: u32,
    ) -> Decision {
        let deadline = deadline_in(timeout_ms);
        while chan.is_open() {
            let now = sys::monotonic_ms();
            if now >= deadline {
                return Decision::Abort;
            }
            let mut fds = [sys::poll_in(chan.fd()), sys::poll_in(signals.fd())];
            if let Err(e) = sys::poll(&mut fds, (deadline - now).min(i32::MAX as u64) as i32) {
                return Decision::Failed(Error::Poll(e));
            }
            if sys::ready(&fds[1]) {
                loop {
                    match signals.take() {
                        Ok(Some(sig)) if Signals::is_termination(sig) => return Decision::Abort,
                        Ok(Some(sig)) if Signals::is_forwarded(sig) => self.queued.push(sig),
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(e) => return Decision::Failed(e),
                    }
                }
            }
            if sys::ready(&fds[0]) {
                match chan.recv_control() {
                    Control::Start => return Decision::Start,
                    Control::Abort | Control::Closed => return Decision::Abort,
                    Control::Signal(signo) => self.queued.push(signo),
                    Control::Ignored | Control::Disown => {}
                }
            }
        }
        Decision::Abort
    }

    /// Opens the gate: the child goes on to `execve`. `false` if it was already gone (or the
    /// gate was already closed), in which case nothing was started.
    pub fn open_gate(&mut self) -> bool {
        match self.gate.take() {
            Some(gate) => sys::write_all(gate.as_raw(), &[START_BYTE]).is_ok(),
            None => false,
        }
    }

    /// Before the hello, for a new session: waits (until `deadline`) for the ready byte. Abort,
    /// a closed channel, a termination signal, the deadline or an error: not ready.
    fn await_ready(&mut self, chan: &mut Channel, signals: &Signals, deadline: u64) -> bool {
        loop {
            match next_event(&self.report, chan, signals, Some(deadline)) {
                Ok(Event::Report) => {
                    let mut byte = [0u8; 1];
                    return matches!(sys::read(&self.report, &mut byte), Ok(1))
                        && byte[0] == READY_BYTE;
                }
                Ok(Event::Signal(sig)) if !Signals::is_termination(sig) => {
                    if Signals::is_forwarded(sig) {
                        self.queued.push(sig)
                    }
                }
                Ok(Event::Control(Control::Signal(signo))) => self.queued.push(signo),
                Ok(Event::Control(Control::Ignored | Control::Disown)) => {}
                Ok(_) => return false,
                Err(e) => {
                    self.failure = Some(e);
                    return false;
                }
            }
        }
    }

    /// After [`Workload::open_gate`]: waits for the report pipe to say whether `execve`
    /// succeeded or failed (an errno), watching the channel and signals (see the module docs);
    /// `timeout_ms` bounds how long a child that neither execs nor fails may take before it is
    /// killed. End of file is an exec only if the child's `PF_FORKNOEXEC` is clear; the queued
    /// signals then go to the program, in order.
    pub fn exec_result(
        &mut self,
        chan: &mut Channel,
        signals: &Signals,
        pdeath_signal: Option<u32>,
        timeout_ms: u32,
    ) -> Release {
        let mut errno = [0u8; REPORT_LEN];
        let mut got = 0;
        let mut deadline = Some(deadline_in(timeout_ms));
        // Signals for the workload that arrive while it execs wait for the exec: sent earlier,
        // they would end a child that never ran its program (reported never started), where a
        // direct launch would have delivered them to the program.
        while got < errno.len() {
            match next_event(&self.report, chan, signals, deadline) {
                Ok(Event::Report) => match sys::read(&self.report, &mut errno[got..]) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                },
                // A termination signal to the guardian itself while the child execs asks the
                // scope to end: the program has not run, and now never will.
                Ok(Event::Signal(sig)) if Signals::is_termination(sig) => {
                    self.signal(libc::SIGKILL)
                }
                Ok(Event::Signal(sig)) if Signals::is_forwarded(sig) => self.queued.push(sig),
                Ok(Event::Signal(_)) => {}
                Ok(Event::Control(Control::Signal(signo))) => self.queued.push(signo),
                Ok(Event::Control(Control::Abort)) => self.signal(libc::SIGKILL),
                Ok(Event::Control(Control::Closed)) => {
                    if let Some(sig) = pdeath_signal {
                        self.signal(sig as i32)
                    }
                }
                Ok(Event::Control(_)) => {}
                Ok(Event::Timeout) => {
                    // Killed, it reports by end of file; no further bound is needed.
                    self.signal(libc::SIGKILL);
                    deadline = None;
                }
                Err(e) => {
                    self.signal(libc::SIGKILL);
                    return Release::Failed(e);
                }
            }
        }
        match got {
            0 => match crate::identity::never_exec_d(self.pid) {
                Ok(false) => {
                    for i in 0..self.queued.len {
                        self.signal(i32::from(self.queued.sigs[i]));
                    }
                    Release::Started
                }
                Ok(true) => Release::NeverExecuted,
                Err(e) => Release::Failed(Error::ExecUnknown(e)),
            },
            REPORT_LEN => Release::SpawnFailed(
                Errno(i32::from_ne_bytes([errno[0], errno[1], errno[2], errno[3]])),
                SpawnStep::from_code(u16::from(errno[4])).unwrap_or(SpawnStep::Setup),
            ),
            _ => Release::SpawnFailed(Errno(libc::EIO), SpawnStep::Setup),
        }
    }

    /// Kills the gated (never started) child; it is reaped by the reap loop. Closing the gate
    /// alone already makes it exit without executing (even with no pidfd); SIGKILL makes it
    /// certain even if it is stuck before the gate.
    pub fn kill_gated(&mut self) {
        self.gate = None;
        self.signal(libc::SIGKILL);
    }

    /// Sends `signo` to the workload through its pidfd, if it is still unreaped.
    pub fn signal(&self, signo: i32) {
        if let Some(fd) = &self.pidfd {
            let _ = sys::pidfd_send_signal(fd, signo);
        }
    }

    /// A signal the launcher forwards: the job-control ones (`SIGTSTP`, `SIGTTIN`, `SIGTTOU`,
    /// `SIGCONT`) go to the whole process group the workload leads, as a terminal stops and a
    /// shell's `fg` continues a whole job (W2); every other one to the workload alone. Only while
    /// the workload is unreaped, which keeps its pid, the group's id, from being reused.
    pub fn forward(&self, signo: i32) {
        let job_control = matches!(
            signo,
            libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU | libc::SIGCONT
        );
        let to_group = job_control
            && self.pidfd.is_some()
            && self.ready
            && sys::kill_group_of_child(self.pid, signo).is_ok();
        if !to_group {
            self.signal(signo);
        }
    }
}

/// A failure report on the report pipe: the errno (4 bytes), then the step's code (1 byte).
const REPORT_LEN: usize = 5;

// ---------------------------------------------------------------------------------------------
// The child side. Async-signal-safe calls only; never returns.

fn run_child(
    spec: &LaunchSpec<'static>,
    plan: &ExecPlan,
    stdio: &[Option<OwnedFd>; 3],
    ready: Option<&OwnedFd>,
    ruleset: Option<OwnedFd>,
    gate: OwnedFd,
    report: OwnedFd,
) -> ! {
    // H6: the gate, the report and the ruleset are moved off the number the readiness
    // descriptor takes.
    let off = |fd: OwnedFd| match spec.ready_fd {
        Some(n) if fd.as_raw() == n as i32 => child::moved_above(fd, 1024),
        _ => Ok(fd),
    };
    let (gate, report) = match (off(gate), off(report)) {
        (Ok(g), Ok(r)) => (g, r),
        // Nothing can be reported without the report pipe: the exec is not attempted.
        _ => sys::exit(126),
    };
    // Ready as soon as the session exists (the hello reports it; a process group the guardian
    // sets itself); the rest of the preparation overlaps with the launcher making the
    // registration durable.
    let (mut ruleset, moved) = match ruleset.map(off) {
        Some(Ok(fd)) => (Some(fd), Ok(())),
        Some(Err(e)) => (None, Err(e)),
        None => (None, Ok(())),
    };
    let mut failed = isolate(spec)
        .and(moved)
        .err()
        .map(|e| (e, SpawnStep::Setup));
    if new_session(spec) {
        let _ = sys::write_all(report.as_raw(), &[READY_BYTE]);
    }
    if failed.is_none() {
        failed = prepare(spec, stdio, ready)
            .err()
            .map(|e| (e, SpawnStep::Setup));
    }
    let mut byte = [0u8; 1];
    match sys::read(&gate, &mut byte) {
        Ok(1) if byte[0] == START_BYTE => {}
        _ => sys::exit(126), // aborted or the guardian is gone: never exec
    }
    // X11: no_new_privs when the launch asks for it (a launcher without CAP_SYS_ADMIN), then the
    // Landlock domain the launcher built, while the child still holds the guardian's
    // credentials (a root guardian needs no no_new_privs for it); its descriptor goes at once.
    if failed.is_none() && spec.flags & FLAG_NO_NEW_PRIVS != 0 {
        failed = child::no_new_privs().err().map(|e| (e, SpawnStep::Setup));
    }
    if let Some(fd) = ruleset.take() {
        if failed.is_none() {
            failed = child::landlock_restrict(&fd)
                .err()
                .map(|e| (e, SpawnStep::Setup));
        }
    }
    // X7: the setns filter, while the child still holds the guardian's credentials (a root
    // guardian needs no no_new_privs for it: see `seccomp`).
    if failed.is_none() && spec.flags & FLAG_ALLOW_SETNS == 0 {
        failed = child::install_filter(crate::seccomp::program())
            .err()
            .map(|e| (e, SpawnStep::Setup));
    }
    // X3: the credentials only now, immediately before the exec; then the directory, with the
    // workload's own permissions deciding whether it may work there (as `su` or `sudo -D`).
    if failed.is_none() {
        if let Some(c) = &plan.credentials {
            failed = child::drop_privileges(c.uid, c.gid, &c.groups[..c.count])
                .err()
                .map(|e| (e, SpawnStep::User));
        }
    }
    if failed.is_none() {
        if let Some(cwd) = spec.cwd {
            failed = child::chdir(cwd).err().map(|e| (e, SpawnStep::Cwd));
        }
    }
    let (errno, step) = match failed {
        Some(f) => f,
        None => (exec(plan), SpawnStep::Program),
    };
    let e = errno.0.to_ne_bytes();
    let _ = sys::write_all(
        report.as_raw(),
        &[e[0], e[1], e[2], e[3], step.code() as u8],
    );
    sys::exit(if errno == Errno::NOENT { 127 } else { 126 })
}

/// A new session (PTY, asked for, or `--user`) or a new process group.
fn isolate(spec: &LaunchSpec<'static>) -> Result<(), Errno> {
    if new_session(spec) {
        child::setsid()
    } else {
        child::setpgid_self()
    }
}

/// Stdio, controlling tty, signals (a clean state, or the launch's inherited one), limits: in this order, stopping at the first error. The
/// limits go before the user switch (raising a hard limit needs the privilege it gives up).
fn prepare(
    spec: &LaunchSpec<'static>,
    stdio: &[Option<OwnedFd>; 3],
    ready: Option<&OwnedFd>,
) -> Result<(), Errno> {
    for (target, fd) in stdio.iter().enumerate() {
        if let Some(fd) = fd {
            child::dup2(fd, target as i32)?;
        }
    }
    if spec.flags & FLAG_PTY != 0 {
        child::set_controlling_tty()?;
    }
    child::cloexec_from_3();
    // H6: s6's notification descriptor, the one descriptor past stdio the workload keeps.
    if let (Some(fd), Some(n)) = (ready, spec.ready_fd) {
        child::keep_on(fd, n as i32)?;
    }
    // G8, W10: a clean start, or the launcher's own inherited state (ignored, blocked).
    let st = spec.signal_state.unwrap_or_default();
    child::reset_signals(st.ignored, st.blocked)?;
    for l in spec.rlimits.iter() {
        child::setrlimit(l.resource, l.soft, l.hard)?;
    }
    Ok(())
}

/// `execve` `argv[0]`; without a `/` it is searched in the workload's `PATH` like `execvpe`.
/// Returns the errno to report.
fn exec(plan: &ExecPlan) -> Errno {
    let name = plan.program.to_bytes();
    if name.is_empty() {
        return Errno::NOENT;
    }
    if name.contains(&b'/') {
        return child::execve(plan.program.as_ptr(), plan.argv, plan.envp);
    }
    let mut candidate = [0u8; 4096];
    let mut seen_eacces = false;
    let mut last = Errno::NOENT;
    for dir in plan.path.split(|&b| b == b':') {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        let len = dir.len() + 1 + name.len();
        if len + 1 > candidate.len() {
            last = Errno(libc::ENAMETOOLONG);
            continue;
        }
        candidate[..dir.len()].copy_from_slice(dir);
        candidate[dir.len()] = b'/';
        candidate[dir.len() + 1..len].copy_from_slice(name);
        candidate[len] = 0;
        let e = child::execve(candidate.as_ptr().cast(), plan.argv, plan.envp);
        match e.0 {
            libc::EACCES => seen_eacces = true,
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
            _ => return e,
        }
        last = e;
    }
    if seen_eacces {
        Errno(libc::EACCES)
    } else {
        last
    }
}
