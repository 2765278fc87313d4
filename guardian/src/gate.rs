//! The gate (G3, G8): the workload is forked, prepared (session or process group, stdio,
//! signal dispositions and mask reset, resource limits, cwd) and then blocks on a pipe until the
//! launcher says *start*. Only then does it `execve`. No workload code runs before the launcher
//! has made the registration durable.
//!
//! Two close-on-exec pipes connect guardian and child:
//! - the *gate* (guardian -> child): one start byte releases the child; end of file (abort, or
//!   the guardian died) makes it `_exit` without executing anything;
//! - the *report* pipe (child -> guardian): for a new session, one ready byte once the child's
//!   session is set (a process group the guardian sets from its side and does not wait for),
//!   then either end of file (the pipe closed on a successful `execve`) or the 4-byte errno of a
//!   failed setup or exec.
//!
//! Between `fork` and `execve` the child makes only async-signal-safe calls, allocates nothing
//! and formats nothing: argv and envp are pointer arrays built before the fork into the frame
//! buffer, a `PATH` candidate is assembled in a stack buffer. Exec failure exits 127 for `ENOENT`
//! and 126 otherwise (as tini does).
//!
//! # Caveats
//! A setup failure in the child (chdir, setrlimit, the controlling tty) is reported exactly like
//! an exec failure, with its errno: the workload never ran. If the gated child is killed from
//! outside before *start*, the release fails and the workload is reported never started.

use core::ffi::{c_char, CStr};

use refine_protocol::frame::{FLAG_NEW_SESSION, FLAG_PTY};
use refine_protocol::LaunchSpec;

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
    /// argv[0], the program to run.
    program: &'static CStr,
    path: &'static [u8],
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
        ExecPlan {
            program: spec.argv.iter().next().unwrap_or(c""),
            argv: &argv[..argc + 1],
            envp: &envp[..envc + 1],
            path,
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
    pub start_time: u64,
    pub pgid: u32,
    pub sid: u32,
    /// The child reached the gate (its session/group is set) and its identity is known; if
    /// not, the launch is aborted.
    pub ready: bool,
    gate: Option<OwnedFd>,
    report: OwnedFd,
}

/// What the launcher decided while the workload waited at the gate.
pub enum Decision {
    Start,
    Abort,
}

/// How the release went.
pub enum Release {
    Started,
    /// The setup or `execve` failed with this errno; the child exits 126/127.
    SpawnFailed(Errno),
    /// The gated child was already gone.
    Vanished,
}

/// Forks the workload and waits until it is at the gate. `stdio` descriptors are closed in the
/// guardian afterwards (so the scope's readers see EOF when the workload side closes them).
pub fn fork_gated(
    spec: &LaunchSpec<'static>,
    plan: &ExecPlan,
    stdio: [Option<OwnedFd>; 3],
) -> Result<Workload, Error> {
    let (gate_r, gate_w) = sys::pipe().map_err(Error::Pipe)?;
    let (report_r, report_w) = sys::pipe().map_err(Error::Pipe)?;
    match sys::fork().map_err(Error::Fork)? {
        Fork::Child => {
            drop(gate_w);
            drop(report_r);
            run_child(spec, plan, &stdio, gate_r, report_w)
        }
        Fork::Parent(pid) => {
            drop(gate_r);
            drop(report_w);
            drop(stdio);
            // From here on nothing returns an error: a child exists, so every failure becomes
            // "not ready", which the caller turns into an abort (kill, reap, receipt).
            let mut w = Workload {
                pid,
                pidfd: sys::pidfd_open(pid).ok(),
                start_time: 0,
                pgid: 0,
                sid: 0,
                ready: false,
                gate: Some(gate_w),
                report: report_r,
            };
            let at_gate = if new_session(spec) {
                // Only the child can make its session: wait until it has.
                let mut byte = [0u8; 1];
                matches!(sys::read(&w.report, &mut byte), Ok(1)) && byte[0] == READY_BYTE
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

/// Whether the workload gets a session of its own (PTY, or asked for) rather than a group.
fn new_session(spec: &LaunchSpec<'static>) -> bool {
    spec.flags & (FLAG_PTY | FLAG_NEW_SESSION) != 0
}

/// Waits for *start* within `timeout_ms`. Abort, the timeout, the channel closing or a
/// termination signal all mean: do not start. Other signals are not forwarded to a gated child.
pub fn await_start(
    chan: &mut Channel,
    signals: &Signals,
    timeout_ms: u32,
) -> Result<Decision, Error> {
    let deadline = sys::monotonic_ms() + timeout_ms as u64;
    while chan.is_open() {
        let now = sys::monotonic_ms();
        if now >= deadline {
            return Ok(Decision::Abort);
        }
        let mut fds = [sys::poll_in(chan.fd()), sys::poll_in(signals.fd())];
        sys::poll(&mut fds, (deadline - now).min(i32::MAX as u64) as i32)
            .map_err(Error::ChannelIo)?;
        if sys::ready(&fds[1]) {
            while let Some(sig) = signals.take()? {
                if Signals::is_termination(sig) {
                    return Ok(Decision::Abort);
                }
            }
        }
        if sys::ready(&fds[0]) {
            match chan.recv_control() {
                Control::Start => return Ok(Decision::Start),
                Control::Abort | Control::Closed => return Ok(Decision::Abort),
                Control::Signal(_) | Control::Ignored => {}
            }
        }
    }
    Ok(Decision::Abort)
}

impl Workload {
    /// Opens the gate: the child goes on to `execve`. `false` if it was already gone (or the
    /// gate was already closed), in which case nothing was started.
    pub fn open_gate(&mut self) -> bool {
        match self.gate.take() {
            Some(gate) => sys::write_all(gate.as_raw(), &[START_BYTE]).is_ok(),
            None => false,
        }
    }

    /// After [`Workload::open_gate`]: waits for the report pipe to say whether `execve`
    /// succeeded (end of file: the pipe closed on exec) or failed (an errno).
    pub fn exec_result(&mut self) -> Release {
        let mut errno = [0u8; 4];
        let mut got = 0;
        while got < errno.len() {
            match sys::read(&self.report, &mut errno[got..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        match got {
            0 => Release::Started,
            4 => Release::SpawnFailed(Errno(i32::from_ne_bytes(errno))),
            _ => Release::SpawnFailed(Errno(libc::EIO)),
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
}

// ---------------------------------------------------------------------------------------------
// The child side. Async-signal-safe calls only; never returns.

fn run_child(
    spec: &LaunchSpec<'static>,
    plan: &ExecPlan,
    stdio: &[Option<OwnedFd>; 3],
    gate: OwnedFd,
    report: OwnedFd,
) -> ! {
    // Ready as soon as the session exists (the hello reports it; a process group the guardian
    // sets itself); the rest of the preparation overlaps with the launcher making the
    // registration durable.
    let mut failed = isolate(spec).err();
    if new_session(spec) {
        let _ = sys::write_all(report.as_raw(), &[READY_BYTE]);
    }
    if failed.is_none() {
        failed = prepare(spec, stdio).err();
    }
    let mut byte = [0u8; 1];
    match sys::read(&gate, &mut byte) {
        Ok(1) if byte[0] == START_BYTE => {}
        _ => sys::exit(126), // aborted or the guardian is gone: never exec
    }
    let errno = match failed {
        Some(e) => e,
        None => exec(plan),
    };
    let _ = sys::write_all(report.as_raw(), &errno.0.to_ne_bytes());
    sys::exit(if errno == Errno::NOENT { 127 } else { 126 })
}

/// A new session (PTY or asked for) or a new process group.
fn isolate(spec: &LaunchSpec<'static>) -> Result<(), Errno> {
    if new_session(spec) {
        child::setsid()
    } else {
        child::setpgid_self()
    }
}

/// Stdio, controlling tty, signals, limits, cwd: in this order, stopping at the first error.
fn prepare(spec: &LaunchSpec<'static>, stdio: &[Option<OwnedFd>; 3]) -> Result<(), Errno> {
    for (target, fd) in stdio.iter().enumerate() {
        if let Some(fd) = fd {
            child::dup2(fd, target as i32)?;
        }
    }
    if spec.flags & FLAG_PTY != 0 {
        child::set_controlling_tty()?;
    }
    child::cloexec_from_3();
    child::reset_signals()?;
    for l in spec.rlimits.iter() {
        child::setrlimit(l.resource, l.soft, l.hard)?;
    }
    if let Some(cwd) = spec.cwd {
        child::chdir(cwd)?;
    }
    Ok(())
}

/// `execve` argv[0]; without a `/` it is searched in the workload's `PATH` like `execvpe`.
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
