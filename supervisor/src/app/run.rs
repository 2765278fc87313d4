//! `run` without `--detach`: launch in this process, stream the output, exit with the workload's
//! code — and otherwise behave like the bare command (SPEC W1–W5, W9–W12):
//!
//! - **stdin** (W1): this process's own fd 0 is the workload's, passed as it is (a pipe or a
//!   file keeps its end of file, offsets and seeks, as under `tini`). In the foreground of a
//!   terminal (a job of its own, [`refine_supervisor::host::terminal`]) the workload's group
//!   gets the terminal's foreground while it runs (W15): the terminal's keys reach the whole job,
//!   a Ctrl-Z that stops it stops `run` too (seen by a poll: the workload is not `run`'s child),
//!   and `fg` hands the terminal back to it. Two cases relay stdin through a pipe instead: a
//!   terminal not handed on (the workload runs in its own process group, so reading the
//!   terminal itself would stop it with `SIGTTIN`; `run` reads it only while its own group is
//!   in the foreground) and `--idle-timeout` (input is activity). `--detach` launches read
//!   `/dev/null`. A `--pty` launch whose stdin is not a terminal gets that input relayed into its
//!   terminal and then the terminal's end of file (W12).
//! - **signals** (W2, W9): every catchable signal `run` receives is forwarded to the workload
//!   (through the guardian), except `SIGCHLD` (about `run`'s own child) and the kernel's
//!   `SIGPIPE` for `run`'s own write to a gone reader (a broken stdout reaches the workload as
//!   a broken pipe instead; a `SIGPIPE` another process sends with `kill` is forwarded, told
//!   apart by its sender in the `signalfd` record); a fault signal sent with `kill` is
//!   forwarded too (a real fault still ends `run`).
//!   Only `SIGINT` and `SIGTERM` are requests to end: forwarded, then the workload has
//!   `--stop-grace`; once it has ended (or the grace has passed: outcome `cancelled`), what is
//!   left of its scope ends through the shared stop and `run` exits with the workload's
//!   status. The same one again ends the scope at once; the other one is only forwarded, as
//!   is every other signal (`SIGHUP` reloads a daemon and starts no timer).
//!   A signal `run` inherited as ignored is neither caught nor relayed, and the workload starts
//!   with the ignored set and blocked mask `run` inherited (W10; `SIGPIPE` aside).
//!   `SIGTSTP`/`SIGTTIN`/`SIGTTOU` are forwarded (the guardian sends them, and `SIGCONT`, to
//!   the workload's whole process group, as a terminal stops a whole job) and then `run` stops
//!   itself (`SIGSTOP`), while a stand-in process keeps the output flowing to `run`'s reader
//!   (whatever of the workload still runs writes on, as it would to the terminal); `fg`
//!   (`SIGCONT`) continues `run`, which takes the stand-in's bytes into the artifacts and
//!   forwards the `SIGCONT`.
//!   `SIGWINCH` resizes the PTY of an interactive `--pty` launch and is forwarded otherwise.
//! - **pipes** (W3): stdout and stderr are forwarded at the reader's pace
//!   ([`refine_supervisor::host::terminal::Forward`]); a reader that goes away breaks the workload's stream.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use refine_protocol::frame::SpawnStep;
use refine_protocol::ProcessWitness;
use rustix::process::Signal;

use super::cli::RunArgs;
use super::docs::{stream_doc, RunDoc, RunScope, StatusFields};
use super::error::{CliError, ServiceError};
use super::ops::{launch_options, print_json, LaunchOptions};
use refine_supervisor::error_chain;
use refine_supervisor::host::admission::{admit, Admission};
use refine_supervisor::host::observe;
use refine_supervisor::host::signals::{inherited_ignored, read_signal, Blocked};
use refine_supervisor::host::terminal::{self, Foreground, Forward};
use refine_supervisor::host::Command;
use refine_supervisor::host::{
    Beside, InputWriter, LaunchAsks, LaunchOutcome, LaunchResult, ScopeState, StdinMode, Supervisor,
};
use refine_supervisor::host::{Runtime, Stream, Timeout};

/// Forwards the operator's keys and window resizes to an interactive launch's terminal, on two
/// detached threads that end with the input (or the process).
fn forward_terminal(input: InputWriter) -> Result<(), CliError> {
    let keys = input.clone();
    std::thread::Builder::new()
        .name("refine-keys".into())
        .spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match rustix::io::read(rustix::stdio::stdin(), &mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if keys.write_input(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    Err(rustix::io::Errno::INTR) => {}
                    Err(_) => break,
                }
            }
        })
        .map_err(|source| ServiceError::Io {
            op: "start the key forwarder",
            source,
        })?;
    let mut winch =
        signal_hook::iterator::Signals::new([signal_hook::consts::SIGWINCH]).map_err(|source| {
            ServiceError::Io {
                op: "install the window-size handler",
                source,
            }
        })?;
    std::thread::Builder::new()
        .name("refine-winch".into())
        .spawn(move || {
            for _ in winch.forever() {
                if let Ok(size) = terminal::window_size(rustix::stdio::stdin()) {
                    let _ = input.resize(size);
                }
            }
        })
        .map_err(|source| ServiceError::Io {
            op: "start the window-size forwarder",
            source,
        })?;
    Ok(())
}

/// Relays this process's stdin into the workload's stdin pipe until end of file (then closes
/// it) or until the workload closes its end. On a terminal, reads only while this process's
/// group is the terminal's foreground group (a background read would stop `run`).
///
/// With `pty` (a `--pty` launch whose stdin is a pipe, a file or `/dev/null`, W12) the input
/// goes into the workload's terminal, and its end is the terminal's end-of-file character, as
/// `script` gives it: one after a complete line (or no input), two after a partial one (the
/// first hands the partial line to the reader, the second reads as the end).
fn relay_stdin(input: InputWriter, terminal: bool, pty: bool) -> Result<(), CliError> {
    // A terminal that is not our controlling terminal has no foreground group for us.
    let foreground = move || {
        !terminal
            || rustix::termios::tcgetpgrp(rustix::stdio::stdin())
                .map_or(true, |pg| pg == rustix::process::getpgrp())
    };
    std::thread::Builder::new()
        .name("refine-stdin".into())
        .spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            let mut partial_line = false;
            loop {
                if !foreground() {
                    std::thread::sleep(BACKGROUND_RECHECK);
                    continue;
                }
                match rustix::io::read(rustix::stdio::stdin(), &mut buf) {
                    Ok(0) => {
                        if pty {
                            let eof = [PTY_EOF; 2];
                            let _ = input.feed_input(&eof[..1 + usize::from(partial_line)]);
                        }
                        break;
                    }
                    Ok(n) => {
                        partial_line = buf[n - 1] != b'\n';
                        if input.feed_input(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    Err(rustix::io::Errno::INTR) => {}
                    // A terminal read from the background group.
                    Err(rustix::io::Errno::IO) if terminal => {
                        std::thread::sleep(BACKGROUND_RECHECK)
                    }
                    Err(_) => break,
                }
            }
            input.close_input();
        })
        .map_err(|source| ServiceError::Io {
            op: "start the stdin relay",
            source,
        })?;
    Ok(())
}

/// The end-of-file character (`VEOF`, Ctrl-D) of the terminal a PTY launch gets: the kernel's
/// default, which the guardian leaves as it is.
const PTY_EOF: u8 = 0x04;

/// How often a stdin relay on a terminal looks whether `run` is back in the foreground.
const BACKGROUND_RECHECK: Duration = Duration::from_millis(100);

/// Every signal `run` takes: all catchable ones but `SIGCHLD` (about `run`'s own children;
/// `main` has set it to its default, G11). `SIGPIPE` is taken, and forwarded only when another
/// process sent it (`kill -PIPE`): the kernel's one for `run`'s own write to a gone reader
/// must not reach the workload (its own stream breaks instead, W3); blocked, it leaves the
/// write failing with `EPIPE` as the ignored one did. The fault signals are taken too: one sent
/// with `kill` is forwarded like any other, while a real fault in `run` still ends it (the
/// kernel unblocks a synchronous fault and restores its default action before it delivers it;
/// no handler runs, so none can return into the faulting instruction).
fn relayed_signals() -> Vec<i32> {
    use signal_hook::consts::*;
    let mut v = vec![
        SIGILL,
        SIGTRAP,
        SIGBUS,
        SIGFPE,
        SIGSEGV,
        libc::SIGSYS,
        SIGHUP,
        SIGINT,
        SIGQUIT,
        SIGABRT,
        SIGPIPE,
        SIGUSR1,
        SIGUSR2,
        SIGALRM,
        SIGTERM,
        SIGCONT,
        SIGTSTP,
        SIGTTIN,
        SIGTTOU,
        SIGURG,
        SIGXCPU,
        SIGXFSZ,
        SIGVTALRM,
        SIGPROF,
        SIGWINCH,
        SIGIO,
        libc::SIGPWR,
        libc::SIGSTKFLT,
    ];
    v.extend(libc::SIGRTMIN()..=libc::SIGRTMAX());
    v
}

/// The relay of `run`'s signals to the workload (W2), served by `run`'s main thread beside the
/// launch's engine, which that thread drives too (what each signal does is in the module docs).
/// The signals stay blocked and are read from a `signalfd`: no handler, no thread.
struct Relay {
    signals: std::os::fd::OwnedFd,
    /// A termination request (`SIGINT` or `SIGTERM`, W9) came: the launch's engine applies
    /// the rule ([`refine_supervisor::host::Escalation`]: the grace, the same one again at
    /// once, the residue with the workload); `run` still ends a residue its engine left.
    asked_to_end: bool,
    /// The last termination request that came and [`Relay::wait`] has not told yet.
    unseen_end: Option<i32>,
    /// The last termination request that came once the workload had ended (X10): `run`'s own.
    after_workload: Option<i32>,
    /// The terminal given to the workload's group (W15), and the workload: when job control
    /// stops it (Ctrl-Z reaches its group, not `run`), `run` takes the terminal back and stops
    /// itself, as the job its shell knows; `fg` gives the terminal to the workload again.
    terminal: Option<(Arc<Foreground>, ProcessWitness)>,
    /// `run` followed a stop of the workload and has not yet seen it continued (the `SIGCONT`
    /// goes through the guardian): until then the stop is the same one.
    followed_stop: bool,
}

/// Gives the terminal back to `run`'s group when dropped.
struct TakeBack(Arc<Foreground>);

impl Drop for TakeBack {
    fn drop(&mut self) {
        self.0.take_back();
    }
}

/// How often `run` looks whether job control stopped the workload that holds the terminal: the
/// workload is the guardian's child, not `run`'s, so no `SIGCHLD` tells `run`.
const STOPPED_RECHECK: Duration = Duration::from_millis(100);

/// The launch once its engine has returned: nothing more reaches its workload.
struct Ended;

impl LaunchAsks for Ended {
    fn signal(&mut self, _: i32) {}
    fn cancel(&mut self) {}
    fn termination_request(&mut self, _: i32) {}
    fn stopped(&mut self, stop: &mut dyn FnMut()) {
        stop();
    }
    fn workload_running(&self) -> bool {
        false
    }
}

impl Relay {
    fn new(signals: Blocked) -> Result<Relay, CliError> {
        let signals = signals.signalfd().map_err(|source| ServiceError::Io {
            op: "start the signal relay",
            source,
        })?;
        Ok(Relay {
            signals,
            asked_to_end: false,
            unseen_end: None,
            after_workload: None,
            terminal: None,
            followed_stop: false,
        })
    }

    /// Relays every pending signal to `launch`.
    fn take(&mut self, launch: &mut dyn LaunchAsks) {
        while let Some(taken) = read_signal(self.signals.as_fd()) {
            let sig = taken.signo;
            match sig {
                // `run`'s own write to a gone reader: not for the workload (W3, W12).
                libc::SIGPIPE if !taken.sent_by_another_process() => {}
                libc::SIGINT | libc::SIGTERM => {
                    self.unseen_end = Some(sig);
                    if !launch.workload_running() {
                        self.after_workload = Some(sig);
                    }
                    // W9, kept by the engine: forwarded, the grace, the same one again at once.
                    self.asked_to_end = true;
                    launch.termination_request(sig);
                }
                libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU => {
                    // Passed on (the guardian stops the workload's whole group) before `run`
                    // stops itself; the output keeps flowing meanwhile, as the workload's
                    // writes would reach the terminal without the wrapper.
                    launch.signal(sig);
                    launch.stopped(&mut || {
                        let _ =
                            rustix::process::kill_process(rustix::process::getpid(), Signal::STOP);
                    });
                }
                libc::SIGCONT => {
                    // `fg`: the shell gave `run`'s group the terminal; the workload gets it
                    // before the continue reaches it.
                    if let Some((tty, _)) = &self.terminal {
                        tty.give_again();
                    }
                    launch.signal(sig);
                }
                _ => launch.signal(sig),
            }
        }
    }

    /// Job control stopped the workload that holds the terminal (Ctrl-Z, or a `SIGTTOU`): the
    /// shell must see its job stopped, so `run` takes the terminal back and stops itself; the
    /// `SIGCONT` that continues it continues the workload too (see [`Relay::take`]).
    fn follow_job_control(&mut self, launch: &mut dyn LaunchAsks) {
        let Some((tty, workload)) = &self.terminal else {
            return;
        };
        let stopped = observe::stat_of(workload)
            .is_ok_and(|st| st.is_some_and(|st| st.state == observe::State::Stopped));
        if self.followed_stop {
            self.followed_stop = stopped;
            return;
        }
        if stopped && tty.held_by_given() {
            self.followed_stop = true;
            tty.take_back();
            launch.stopped(&mut || {
                let _ = rustix::process::kill_process(rustix::process::getpid(), Signal::STOP);
            });
        }
    }

    /// After the launch: waits for a signal up to `bound` and takes what came; the last
    /// `SIGINT`/`SIGTERM` that came since the last call (or while the launch ran).
    fn wait(&mut self, bound: Duration) -> Option<i32> {
        use rustix::event::{PollFd, PollFlags};
        let mut fds = [PollFd::new(&self.signals, PollFlags::IN)];
        let _ = terminal::poll_until(&mut fds, Some(Instant::now() + bound));
        self.take(&mut Ended);
        self.unseen_end.take()
    }
}

impl Beside for Relay {
    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.signals.as_fd()
    }

    fn wake(&self) -> Option<Instant> {
        self.terminal
            .as_ref()
            .map(|_| Instant::now() + STOPPED_RECHECK)
    }

    fn ready(&mut self, launch: &mut dyn LaunchAsks) {
        self.take(launch);
        self.follow_job_control(launch);
    }
}

/// A forward of one of this process's streams, or `None` when it cannot be made (the output
/// then goes to the artifact only).
fn forward_of(fd: std::os::fd::BorrowedFd<'_>) -> Option<Forward> {
    match Forward::new(fd) {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::warn!(error = %e, "cannot forward the output");
            None
        }
    }
}

pub fn run_embedded(rt: &Runtime, args: RunArgs) -> Result<i32, CliError> {
    if args.end_with_parent {
        end_with_parent()?;
    }
    // Before anything is started (and while this process has one thread, so that every thread
    // inherits the mask): from here on no catchable signal ends `run` by itself. An interactive
    // terminal launch keeps SIGWINCH for its window-size forwarder.
    let interactive_pty = args.pty && rustix::termios::isatty(rustix::stdio::stdin());
    // W10: a signal inherited as ignored stays ignored here (neither caught nor relayed), and the
    // workload starts with the ignored set and the mask this process inherited.
    let relayed: Vec<i32> = relayed_signals()
        .into_iter()
        .filter(|&s| !(interactive_pty && s == libc::SIGWINCH))
        .filter(|&s| !inherited_ignored(s))
        .collect();
    let signals = Blocked::block(&relayed);
    // C4: the admission lock is held from the check until the registration is durable.
    let slot = admit(
        rt,
        &Admission {
            kind: args.kind.kind(),
            label: &args.label,
            unique: args.unique,
            wait_for_slot: args.wait_for_slot,
        },
    )
    .map_err(ServiceError::from)?;
    // The request straight from the arguments, as bytes (W6): no text form on the way.
    let failed = Failed {
        program: args.command.first().map(OsString::as_os_str),
        cwd: args.cwd.as_deref(),
        user: args.user.as_deref(),
    };
    let mut cmd = Command::new(args.command.first().cloned().unwrap_or_default())
        .args(args.command.iter().skip(1))
        .envs(args.env.iter().map(|(k, v)| (k, v)))
        .label(args.label.clone())
        .stop_grace(args.stop_grace);
    if let Some(cwd) = &args.cwd {
        cmd = cmd.current_dir(cwd);
    }
    for (k, v) in &args.meta {
        cmd = cmd.purpose(k.clone(), v.clone());
    }
    if args.command.is_empty() {
        return Err(ServiceError::from(super::error::SpecError::EmptyCommand).into());
    }
    // W11: the deadlines as coreutils `timeout` has them, the face's rule.
    cmd = cmd.deadline(Timeout::of(
        args.timeout,
        args.idle_timeout,
        args.kill_after,
    ));
    let mut cmd = launch_options(
        cmd,
        LaunchOptions {
            kind: args.kind.kind(),
            timeout: None,
            idle_timeout: None,
            kill_after: None,
            log_cap_bytes: Some(args.log_cap),
            pty: args.pty,
            user: args.user.as_deref(),
            allow_setns: args.allow_setns,
            protect: args.protect,
            sandbox: args.sandbox_ask().as_ref(),
            memory_max_bytes: args.memory_max,
            cpu_millis: args.cpus,
            pids_max: args.pids_max,
            ready: args.ready.clone().map(|a| (a, args.ready_timeout)),
            health: super::ops::health_spec(
                args.health_cmd.as_deref(),
                Some(args.health_interval),
                Some(args.health_timeout),
                Some(args.health_retries),
                Some(args.health_start_period),
            )?,
        },
    )?;
    let req = cmd.request_mut();
    req.signal_state = Some(refine_supervisor::host::signals::inherited());
    if !args.json {
        req.forward_stdout = forward_of(io::stdout().as_fd());
        req.forward_stderr = forward_of(io::stderr().as_fd());
    }
    let stdin_is_terminal = rustix::termios::isatty(rustix::stdio::stdin());
    // `run --pty` on a terminal is interactive: the workload's terminal takes the operator's
    // size, keys and resizes, and ours is raw meanwhile (restored when this function returns).
    let interactive = req.pty.is_some() && stdin_is_terminal;
    if interactive {
        if let Ok(size) = terminal::window_size(rustix::stdio::stdin()) {
            req.pty = Some(size);
        }
    }
    // W15: in the foreground of a terminal (a job of its own, see `kernel::terminal`), the
    // workload reads the terminal itself and its group gets the foreground while it runs, as a
    // job-control shell's job does. With `--idle-timeout` the input stays relayed: it is
    // activity (W1).
    let foreground = (req.pty.is_none() && stdin_is_terminal && req.idle_timeout.is_none())
        .then(|| Foreground::claim(rustix::stdio::stdin()))
        .flatten()
        .map(Arc::new);
    req.foreground = foreground.clone();
    let relay = req.pty.is_none()
        && foreground.is_none()
        && (stdin_is_terminal || req.idle_timeout.is_some());
    req.stdin = match (req.pty.is_some(), relay) {
        (true, _) => StdinMode::Null,
        (false, true) => StdinMode::Pipe,
        (false, false) => StdinMode::Inherit,
    };
    let req_pty = req.pty.is_some();
    // This thread drives the launch's engine (below) and relays signals beside it.
    let sup = Supervisor::new(rt.clone()).driven_by_caller();
    let handle = sup.spawn(cmd).map_err(ServiceError::Launch)?.into_handle();
    // However this function returns, the terminal comes back (a `SIGKILL` aside: the shell
    // takes it back then).
    let _terminal_back = foreground.clone().map(TakeBack);
    let workload = handle.registration().hello.workload;
    drop(slot);
    let _raw = if interactive {
        let raw =
            terminal::RawMode::enter(rustix::stdio::stdin()).map_err(|e| ServiceError::Io {
                op: "put the terminal in raw mode",
                source: io::Error::other(e),
            })?;
        forward_terminal(handle.input_writer())?;
        Some(raw)
    } else {
        None
    };
    if relay {
        relay_stdin(handle.input_writer(), stdin_is_terminal, false)?;
    } else if req_pty && !interactive {
        // W12: a pipe, a file or `/dev/null` on stdin reaches the terminal, then its end.
        relay_stdin(handle.input_writer(), false, true)?;
    }
    let mut relay = Relay::new(signals)?;
    relay.terminal = foreground.clone().map(|tty| (tty, workload));
    let mut result = handle
        .wait_beside(&mut relay)
        .map_err(ServiceError::Launch)?;
    // The workload has ended: the terminal is `run`'s again for what it still prints.
    if let Some(tty) = relay.terminal.take() {
        tty.0.take_back();
    }
    let mut code = result.exit_code();
    // The `stop` scope policy (quality), or the completion deadline, which bounds the whole
    // scope (W7), ends the residue on the engine's watch thread: see it through before this
    // process exits, or the stop would die with us.
    let mut doc = run_doc(&result);
    let stop_residue = |result: &LaunchResult| {
        if let Err(e) = refine_supervisor::host::stopping::shared_stop(rt, &result.registration) {
            tracing::warn!(id = %result.id, error = %error_chain(&e), "residue stop failed");
        }
    };
    // W9: after a termination request, what is left of the scope once the workload has ended
    // is stopped through the shared stop, as `docker stop` and `tini -g` end the group: the
    // engine does it before its result ([`refine_supervisor::host::Escalation`]); a residue it
    // could not end (a failed stop, a receipt late) is stopped here once more.
    // W14: as the init of a PID namespace, `run`'s exit kills every process of the namespace
    // (the guardian too, before its receipt): what is left of the scope is stopped first, as
    // after a termination request, and `run` exits once the receipt proves the end.
    let namespace_init = rustix::process::getpid().as_raw_nonzero().get() == 1;
    let mut residue_stopped = false;
    if result.scope == ScopeState::Live && (relay.asked_to_end || namespace_init) {
        stop_residue(&result);
        residue_stopped = true;
    }
    if result.scope == ScopeState::Stopping || residue_stopped {
        let at = match result.scope_watch.stop_at() {
            Some(at) if !residue_stopped => at,
            _ => Instant::now(),
        };
        let mut end = at + RESIDUE_STOP_WAIT;
        let mut ended = None;
        while ended.is_none() && Instant::now() < end {
            let slice = end
                .saturating_duration_since(Instant::now())
                .min(SIGNAL_POLL);
            ended = result.scope_watch.wait(slice).is_some().then_some(());
            // SIGINT/SIGTERM: the residue is not held to its deadline any longer (W7, W9).
            if ended.is_none() && relay.wait(Duration::ZERO).is_some() && !residue_stopped {
                stop_residue(&result);
                residue_stopped = true;
                end = end.min(Instant::now() + RESIDUE_STOP_WAIT);
            }
        }
        match result.scope_watch.wait(Duration::ZERO) {
            Some(end) if end.receipt.is_some() => doc.scope = RunScope::Exited,
            Some(end) => {
                doc.scope = RunScope::Unknown;
                doc.stop_failure = end.stop_failure.as_ref().map(|f| error_chain(f));
            }
            None => doc.scope = RunScope::Stopping,
        }
    }
    if doc.scope == RunScope::Exited && result.outcome == LaunchOutcome::Completed {
        // The workload ended by itself and nothing holds the streams any more: what it wrote
        // reaches our reader (at its pace) before we exit, as its own writes would have had
        // to. A workload that was ended (deadline, cancel) leaves what it wrote unread.
        // X10: a stream still open after the drain was closed (a holder outside the scope
        // cannot keep `run` here): what is left is a slow reader's pace. A SIGINT or SIGTERM
        // that came after the workload's exit (none is left to take it: `run`'s own) ends
        // `run` at once with 128+n, as it would end a bare command's shell.
        while !result.capture.wait_delivered_for(SIGNAL_POLL) {
            relay.wait(Duration::ZERO);
            if let Some(sig) = relay.after_workload {
                code = 128 + sig;
                break;
            }
        }
    }
    if args.json {
        // The reader went away (`run --json | true`) or the output failed: the document cannot
        // be given, the status still is (W12).
        if let Err(CliError::Output(e)) = print_json(&doc) {
            if e.kind() != io::ErrorKind::BrokenPipe {
                eprintln!("refine-supervisor: cannot print the result document: {e}");
            }
        }
    } else {
        if let LaunchOutcome::SpawnFailed { errno, step } = result.outcome {
            eprintln!("refine-supervisor: {}", failed.line(errno, Some(step)));
        }
        if let Some(f) = doc.stop_failure {
            tracing::warn!(id = %result.id, error = %f, "scope stop failed");
            eprintln!(
                "refine-supervisor: warning: stopping the scope of {} failed: {}",
                result.id,
                super::view::escape(&f.to_string())
            );
        }
    }
    Ok(code)
}

/// What a launch that never ran names in its one line (W5, W13): the caller's program,
/// `--cwd` and `--user`.
pub(crate) struct Failed<'a> {
    pub program: Option<&'a OsStr>,
    pub cwd: Option<&'a Path>,
    pub user: Option<&'a str>,
}

impl Failed<'_> {
    /// One line for a launch that never ran: what failed, as the guardian's report names it
    /// (`step`), and the error as the workload's credentials saw it: the program, the `--cwd`
    /// directory, or the `--user` switch. Without a step (an older service's reply), the
    /// directory when `--cwd` is not one this process can enter, the program otherwise.
    pub(crate) fn line(&self, errno: i32, step: Option<SpawnStep>) -> String {
        let error = io::Error::from_raw_os_error(errno).to_string();
        let error = match error.rfind(" (os error") {
            Some(i) => error[..i].to_owned(),
            None => error,
        };
        // X6: the program, the directory and the user are the caller's text: escaped for the
        // terminal.
        let esc = super::view::escape;
        let program = esc(&self.program.unwrap_or_default().to_string_lossy()).to_string();
        let cwd = self.cwd.map(|d| esc(&d.to_string_lossy()).to_string());
        match (step, &cwd, self.user) {
            (Some(SpawnStep::Program), _, _) => return format!("{program}: {error}"),
            (Some(SpawnStep::Cwd), Some(cwd), _) => return format!("{cwd}: {error}"),
            (Some(SpawnStep::User), _, Some(user)) => {
                return format!("--user {}: cannot switch to the user: {error}", esc(user))
            }
            (Some(SpawnStep::Setup), _, _) => {
                return format!("{program}: cannot prepare the workload ({SETUP_STEPS}): {error}")
            }
            _ => {}
        }
        let bad_cwd = self
            .cwd
            .is_some_and(|d| !std::fs::metadata(d).is_ok_and(|m| m.is_dir()));
        match (bad_cwd, cwd) {
            (true, Some(cwd)) => format!("{cwd}: {error}"),
            _ => format!("{program}: {error}"),
        }
    }
}

/// What the setup step of a spawn covers, for its one line.
const SETUP_STEPS: &str = "stdio, terminal, signals or limits";

/// How long `run` waits, from the residue stop's time, for it to prove the scope's end (its
/// retries included).
const RESIDUE_STOP_WAIT: Duration = Duration::from_secs(20);
/// How often the residue wait looks for a signal to `run`.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

pub(crate) use refine_supervisor::host::spawn_failure_code;

/// The `run --json` document: id, outcome, exit_code or signal, stdout/stderr {complete, path}.
fn run_doc(r: &LaunchResult) -> RunDoc {
    let stream = |s: Stream| stream_doc(r.capture.stream(s));
    RunDoc {
        id: r.id.to_string(),
        outcome: r.outcome.kind(),
        errno: match r.outcome {
            LaunchOutcome::SpawnFailed { errno, .. } => Some(errno),
            _ => None,
        },
        status: StatusFields::of(Some(r.status)),
        stdout: stream(Stream::Stdout),
        stderr: stream(Stream::Stderr),
        scope: r.scope.shown(),
        capture_receipt: r.capture_receipt.clone(),
        stop_failure: r.stop_failure.as_ref().map(|f| error_chain(f)),
    }
}

/// `--end-with-parent`: SIGKILL when the parent dies, before anything is started. A parent that
/// died before the request (this process was reparented meanwhile) is refused in one line.
fn end_with_parent() -> Result<(), CliError> {
    let parent = rustix::process::getppid();
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL)).map_err(
        |_| CliError::Unanswerable {
            flag: "--end-with-parent",
            why: "the kernel refused a parent-death signal (PR_SET_PDEATHSIG)",
        },
    )?;
    if rustix::process::getppid() != parent || parent.is_none() {
        return Err(CliError::Unanswerable {
            flag: "--end-with-parent",
            why: "the parent has already exited",
        });
    }
    Ok(())
}
