//! The one stop (SPEC T1–T4), for every caller: operator stop, deadlines, capture faults, recovery.
//!
//! ```text
//! grace      optional, outside the fence: SIGTERM (or the chosen signal) to the workload's
//!            process group (only with a verified member), then wait up to the grace period
//!            for the guardian to exit (T7)
//! fence      locks/stop.lock (bounded wait): overlapping stops of a runtime are serialized;
//!            a stop lease a killed stop left is finished first (see `lease`), and this one
//!            keeps its own from before its first freeze or SIGSTOP to its last SIGKILL/SIGCONT
//! assess     already exited -> report that; an earlier/unknown boot -> nothing is signalled
//! cgroup     a scope with a cgroup of its own (F4), with or without its guardian (X9):
//!            freeze (bounded: a member in an unanswered FUSE/NFS request never freezes, then
//!            cgroup.kill all the same), read cgroup.procs, cgroup.kill; thaw only what this
//!            stop froze (see `stop_cgroup`). No proof within half the budget (a member that
//!            left the cgroup) -> the /proc path below kills the rest; its count adds up
//! quiesce    discover the scope, SIGSTOP each witnessed process through a verified pidfd
//!            (opened before its stat is read), re-scan until two scans agree and the last
//!            one saw every member stopped (see `quiesce`)
//! kill       SIGKILL every member through its pidfd; the guardian (never signalled) reaps them,
//!            writes its receipt and exits
//! proof      wait for the guardian's exit on its pidfd, then the assessment must say `exited`
//! ```
//!
//! Every signal goes through a pidfd whose identity was checked after it was opened (X8): a
//! `/proc` witness (pid and start time), or on the cgroup path a pid `cgroup.procs` lists again
//! after its pidfd was open; nested guardians are recognised off this thread within a bound
//! ([`crate::kernel::nested`], X9): no step waits on a file the scope can serve.
//!
//! A stop that sends no signal that can end a process withdraws the request it recorded, so
//! a later natural end keeps its own outcome.
//!
//! A member that refuses a signal (EPERM) is reported and left out: the others are still stopped
//! and killed, and the stop ends in [`StopError::Refused`] unless the guardian's receipt proves
//! the scope ended after all (T6). A member whose pidfd cannot be held (descriptor limit) is
//! parked and re-verified before each later signal (`Held`).
//!
//! One monotonic budget (default 2 s, [`StopOptions::budget`]) covers coordination and proof; an
//! optional grace period comes before it. The grace wait does not hold the runtime's fence: a
//! polite stop that waits ten seconds for a workload's trap must not delay every other stop of
//! the runtime; only the quiesce, kill and proof phase is serialized. If quiescence cannot finish within the budget, exactly
//! the processes this attempt stopped are resumed (SIGCONT), and the evidence is returned in
//! [`StopError::Quiescence`].
//!
//! A scope whose guardian is already gone without a receipt (same boot) is still killed, through
//! verified witnesses only (the workload and anything carrying the owner marker), and reported
//! as unverified: there is no proof. Nothing from an earlier boot is ever signalled.
//!
//! # Caveats
//! Every signal goes through [`crate::kernel::signal`]: a pid reused since discovery is not signalled.
//! Processes that were already stopped before this attempt (by someone else) are killed on
//! success, but are never resumed by a failed attempt. A vfork parent whose child is stopped
//! never reaches the stopped state (it waits in the kernel, state D); it counts as quiet, since it
//! cannot run until that child execs or exits. A process stuck in D for another reason keeps
//! quiescence from completing: the stop then fails within its budget and resumes what it stopped. The guardian is never signalled: it must
//! stay alive to adopt and reap, and only its receipt proves the scope ended.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use refine_protocol::record::{Registration, StopCause, StopRequest};
use refine_protocol::{BootId, ProcessWitness, RegistrationId};
use rustix::process::Pid;

use crate::end::assess::{self, Assessment, BootSource, KERNEL_BOOT};
use crate::kernel::nested::NestedGuardians;
use crate::kernel::procfs::{self, ProcfsError};
use crate::kernel::signal::{Signal, SignalError, Verified};
use crate::kernel::tree::{Member, Roots, TreeError};
use crate::store::fence::Fence;
use crate::store::registry::{RegistryError, Runtime};

mod cgroup;
mod grace;
mod lease;
mod quiesce;
mod unowned;

pub use grace::{Grace, Next, Stopping};
pub(crate) use lease::complete_abandoned;
pub use lease::{complete_if_abandoned, Completed};

use cgroup::{let_nested_guardians_finish, scope_cgroup, stop_cgroup, CgroupTarget};
use grace::{graceful, wait_scope_empty};
use quiesce::{quiesce, Held};
pub use unowned::{kill_unowned, UnownedKill};

/// The default budget for coordination and proof (T4).
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(2);

/// How to stop.
#[derive(Clone, Copy)]
pub struct StopOptions<'a> {
    /// Optional graceful phase: [`StopOptions::grace_signal`] to the workload's group, then
    /// wait this long (outside the fence) before the quiesce.
    pub grace: Option<Duration>,
    /// The polite signal of the graceful phase (`docker stop --signal`); SIGTERM by default.
    pub grace_signal: Signal,
    /// Budget for coordination (fence, quiescence) and proof; the grace period is added to it.
    pub budget: Duration,
    /// The current boot id's source ([`KERNEL_BOOT`] in production).
    pub boot: &'a dyn BootSource,
    /// Who asks, when it is not the engine that launched the scope (an operator, the service's
    /// deadline enforcement): recorded as a stop request before the first signal of a live
    /// scope, so that engine, wherever it runs, reports this cause. `None`: record nothing.
    pub cause: Option<StopCause>,
}

impl Default for StopOptions<'static> {
    fn default() -> Self {
        StopOptions {
            grace: None,
            grace_signal: Signal::TERM,
            budget: DEFAULT_BUDGET,
            boot: &KERNEL_BOOT,
            cause: None,
        }
    }
}

impl StopOptions<'_> {
    /// The grace these options ask for, as the one stop's value ([`Grace`]).
    pub fn graced(&self) -> Option<Grace> {
        self.grace.map(|within| Grace {
            within,
            signal: self.grace_signal,
        })
    }
}

impl std::fmt::Debug for StopOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopOptions")
            .field("grace", &self.grace)
            .field("grace_signal", &self.grace_signal)
            .field("budget", &self.budget)
            .field("cause", &self.cause)
            .finish_non_exhaustive()
    }
}

/// What a stop achieved: the contract's closed enum (`already_exited`, `stopped`,
/// `killed_unverified`, `not_signalled`).
pub use refine_protocol::docs::StopOutcome;

/// Whom a signal went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Process(ProcessWitness),
    /// `kill(-pgid)`, with the verified member that justified it.
    Group {
        pgid: i32,
        member: ProcessWitness,
    },
    /// `cgroup.kill` on the scope's own cgroup (F4), which had this many members when frozen.
    Cgroup {
        members: usize,
    },
}

/// One signal sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub target: Target,
    pub signal: i32,
}

/// Where the time went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StopTimings {
    pub fence_wait: Duration,
    pub grace: Duration,
    pub quiesce: Duration,
    /// From the first SIGKILL to the guardian's exit (or the witnesses' exit without one).
    pub kill_to_exit: Duration,
    pub total: Duration,
    /// Discovery scans during quiescence.
    pub rounds: u32,
}

/// The result of a stop.
#[derive(Debug, Clone)]
pub struct StopReport {
    pub id: RegistrationId,
    pub outcome: StopOutcome,
    /// The assessment after the stop (for [`StopOutcome::Stopped`]: `exited` by receipt).
    pub assessment: Assessment,
    /// Every signal this attempt sent, in order.
    pub signalled: Vec<Sent>,
    /// Processes found in the scope and killed.
    pub killed: usize,
    pub timings: StopTimings,
}

/// What a failed quiescence leaves behind (T4).
#[derive(Debug, Clone)]
pub struct QuiescenceEvidence {
    /// Processes this attempt stopped (all resumed since, unless gone).
    pub stopped: Vec<ProcessWitness>,
    /// Of those, the ones SIGCONT reached.
    pub resumed: Vec<ProcessWitness>,
    /// Members that were already stopped by someone else (left stopped).
    pub found_stopped: Vec<ProcessWitness>,
    /// The last scan.
    pub last_scan: Vec<Member>,
    pub rounds: u32,
    pub elapsed: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum StopError {
    #[error("cannot take the stop fence")]
    Fence(#[source] RegistryError),
    #[error("cannot read the current boot id")]
    Boot(#[source] ProcfsError),
    #[error("cannot discover the scope")]
    Tree(#[from] TreeError),
    #[error("cannot signal")]
    Signal(#[source] SignalError),
    #[error("the scope did not quiesce within the budget ({} processes resumed)", .0.resumed.len())]
    Quiescence(Box<QuiescenceEvidence>),
    #[error("no proof within the budget ({elapsed:?}): assessment {}", .assessment.name())]
    ProofTimeout {
        elapsed: Duration,
        assessment: Box<Assessment>,
        signalled: Vec<Sent>,
    },
    /// T6: these members refused our signals (EPERM); every other member was killed, but the
    /// scope is not proven ended.
    #[error("{} member(s) refused the stop's signals (first: pid {}); the others were killed; no proof: assessment {}", .refused.len(), .refused.first().map_or(0, |w| w.pid), .assessment.name())]
    Refused {
        refused: Vec<ProcessWitness>,
        assessment: Box<Assessment>,
        signalled: Vec<Sent>,
    },
    /// F4: a write to the scope's cgroup failed after it was frozen (it is thawed again).
    #[error("cannot write {op} of the scope's cgroup")]
    Cgroup {
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the guardian exited but the receipt does not verify: {assessment:?}")]
    Unproven {
        assessment: Box<Assessment>,
        signalled: Vec<Sent>,
    },
}

/// Stops `reg`'s scope: the optional grace phase (without the fence), then the runtime stop
/// fence (bounded by the budget) for the quiesce, kill and proof; see the module docs.
pub fn stop(
    runtime: &Runtime,
    reg: &Registration,
    opts: &StopOptions<'_>,
) -> Result<StopReport, StopError> {
    let start = Instant::now();
    let since = crate::kernel::clock::unix_ns();
    record_stop_event(runtime, reg, opts, None);
    let mut grace_sent = false;
    let result = (|| {
        let pre = match grace_phase(runtime, reg, opts, start)? {
            Graced::Done(report) => return Ok(report),
            Graced::Go(pre) => pre,
        };
        grace_sent = any_ending_signal(&pre.signalled);
        let t = Instant::now();
        let fence = runtime.stop_fence(opts.budget).map_err(StopError::Fence)?;
        // Item 7: a stop that died while it held the fence left its lease; this one finishes it
        // (its own scope's in `run`).
        complete_abandoned(runtime, opts.boot, Some(reg.id), &fence);
        let report = run(runtime, reg, opts, start, t, pre);
        drop(fence);
        report
    })();
    withdraw_unless_sent(runtime, reg, since, grace_sent, &result);
    record_stop_event(runtime, reg, opts, Some(&result));
    result
}

/// [`stop`] after a grace its caller drove ([`Stopping`]: the service's event loop, W8's
/// shutdown): the fence, then the quiesce, kill and proof. The grace's signals and time are the
/// report's own (its total counts from the polite signal); a tree that ended within the grace
/// is reported `stopped` when the grace's signal reached it. `opts.grace` is not used.
pub fn stop_after(
    runtime: &Runtime,
    reg: &Registration,
    opts: &StopOptions<'_>,
    stopping: &Stopping,
) -> Result<StopReport, StopError> {
    let now = Instant::now();
    let start = now.checked_sub(stopping.waited(now)).unwrap_or(now);
    let since = stopping
        .sent_at_unix_ns()
        .unwrap_or_else(crate::kernel::clock::unix_ns);
    record_stop_event(runtime, reg, opts, None);
    let pre = Prelude::after(stopping, now);
    let grace_sent = any_ending_signal(&pre.signalled);
    let result = (|| {
        let fence = runtime.stop_fence(opts.budget).map_err(StopError::Fence)?;
        complete_abandoned(runtime, opts.boot, Some(reg.id), &fence);
        let report = run(runtime, reg, opts, start, Instant::now(), pre);
        drop(fence);
        report
    })();
    withdraw_unless_sent(runtime, reg, since, grace_sent, &result);
    record_stop_event(runtime, reg, opts, Some(&result));
    result
}

/// V2: `stop_requested` before a stop (`result` absent), `stop_ended` after it.
fn record_stop_event(
    runtime: &Runtime,
    reg: &Registration,
    opts: &StopOptions<'_>,
    result: Option<&Result<StopReport, StopError>>,
) {
    use refine_protocol::docs::EventKind;
    let kind = match result {
        None => EventKind::StopRequested,
        Some(_) => EventKind::StopEnded,
    };
    let mut ev = crate::store::journal::event(kind, reg.id, &reg.label);
    ev.cause = opts.cause;
    match result {
        Some(Ok(report)) => ev.stop = Some(report.outcome),
        Some(Err(e)) => ev.reason = Some(crate::error::error_chain(e)),
        None => {}
    }
    crate::store::journal::record(runtime, &ev);
}

/// Whether `sent` holds a signal that can end a process (not only SIGSTOP and SIGCONT).
fn any_ending_signal(sent: &[Sent]) -> bool {
    sent.iter()
        .any(|s| s.signal != Signal::STOP.as_raw() && s.signal != Signal::CONT.as_raw())
}

/// Item 7: a stop that ended without sending a signal that can end a process withdraws the
/// request it recorded, so a later natural end stays `completed`. Only this process's request
/// recorded since `since` is removed: an earlier stop's (whose signal may have been sent) stays.
fn withdraw_unless_sent(
    runtime: &Runtime,
    reg: &Registration,
    since: u64,
    grace_sent: bool,
    result: &Result<StopReport, StopError>,
) {
    let sent = grace_sent
        || match result {
            Ok(r) => r.killed > 0 || any_ending_signal(&r.signalled),
            Err(StopError::ProofTimeout { signalled, .. })
            | Err(StopError::Refused { signalled, .. }) => any_ending_signal(signalled),
            // The other failures come before any SIGKILL (a `cgroup.kill` that failed killed
            // nobody) or after a quiesce that resumed what it stopped.
            Err(_) => false,
        };
    if !sent {
        runtime.withdraw_stop_request(reg.id, since);
    }
}

/// Records who asked for this stop (see [`StopOptions::cause`]). A failure to record it never
/// prevents the stop.
fn record_request(runtime: &Runtime, reg: &Registration, cause: Option<StopCause>) {
    let Some(cause) = cause else { return };
    let req = StopRequest {
        id: reg.id,
        runtime: runtime.id(),
        cause,
        requested_at_unix_ns: crate::kernel::clock::unix_ns(),
        requester_pid: std::process::id(),
    };
    if let Err(e) = runtime.write_stop_request(&req) {
        tracing::warn!(id = %reg.id, error = %crate::error::error_chain(&e), "could not record the stop request");
    }
}

/// [`stop`] for a caller that already holds the runtime stop fence (recovery). A grace, if
/// asked for, is waited out holding it.
pub(crate) fn stop_fenced(
    runtime: &Runtime,
    reg: &Registration,
    opts: &StopOptions<'_>,
    _fence: &Fence,
) -> Result<StopReport, StopError> {
    let start = Instant::now();
    let since = crate::kernel::clock::unix_ns();
    record_stop_event(runtime, reg, opts, None);
    let mut grace_sent = false;
    let result = (|| {
        let pre = match grace_phase(runtime, reg, opts, start)? {
            Graced::Done(report) => return Ok(report),
            Graced::Go(pre) => pre,
        };
        grace_sent = any_ending_signal(&pre.signalled);
        run(runtime, reg, opts, start, Instant::now(), pre)
    })();
    withdraw_unless_sent(runtime, reg, since, grace_sent, &result);
    record_stop_event(runtime, reg, opts, Some(&result));
    result
}

/// A signal to the workload's process group through a verified member (the `signal` request):
/// no stop, no grace, no recorded cause. Returns what was sent: nothing when the scope is over
/// or no member of the group is left. (A grace's polite signal is [`Stopping::signal`].)
pub fn signal_workload(
    runtime: &Runtime,
    reg: &Registration,
    sig: Signal,
) -> Result<Vec<Sent>, StopError> {
    let mut sent = Vec::new();
    let opts = StopOptions::default();
    if let Opened::Scope { roots, boot, .. } = open_scope(runtime, reg, &opts, false)? {
        graceful(reg, &roots, boot, sig, &mut sent)?;
    }
    Ok(sent)
}

/// The scope as a stop finds it: nothing to do, or its roots and its guardian held by pidfd.
enum Opened {
    Over(StopOutcome, Assessment),
    Scope {
        guardian: Option<Verified>,
        roots: Roots,
        boot: BootId,
    },
}

/// Assesses `reg` and, for a scope of this boot, opens its guardian (recording the stop's cause
/// first when `record`).
fn open_scope(
    runtime: &Runtime,
    reg: &Registration,
    opts: &StopOptions<'_>,
    record: bool,
) -> Result<Opened, StopError> {
    let first = assess::assess(runtime, reg, opts.boot);
    let current = opts.boot.boot_id().map_err(StopError::Boot)?;
    let same_boot = reg.boot_id() != BootId::default() && reg.boot_id() == current;
    let guardian = match &first {
        Assessment::Exited { .. } => return Ok(Opened::Over(StopOutcome::AlreadyExited, first)),
        Assessment::Unverified { .. } if !same_boot => {
            return Ok(Opened::Over(StopOutcome::NotSignalled, first))
        }
        Assessment::Live => {
            if record {
                record_request(runtime, reg, opts.cause);
            }
            match Verified::open(reg.hello.guardian) {
                Ok(g) => Some(g),
                // Gone between the assessment and now: treat as a guardian-less scope.
                Err(SignalError::Gone(_)) | Err(SignalError::Reused { .. }) => None,
                Err(e) => return Err(StopError::Signal(e)),
            }
        }
        Assessment::Unverified { .. } => None,
    };
    let roots = Roots {
        guardian: guardian.as_ref().map(|g| g.witness()),
        // Without a guardian, the workload itself (if it still is the witnessed process) roots
        // the scope; with one, it is found below the guardian.
        members: if guardian.is_none() {
            vec![reg.hello.workload]
        } else {
            Vec::new()
        },
        // A7: while its guardian lives, a process that carries the owner marker but is outside
        // the guardian's tree (an `at` job that inherited the environment) is a witness for
        // reports only, never a kill target: the marker scan covers guardian-less scopes only.
        owner: guardian.is_none().then_some(reg.id),
    };
    Ok(Opened::Scope {
        guardian,
        roots,
        boot: current,
    })
}

/// What the grace phase leaves for the fenced phase.
#[derive(Default)]
struct Prelude {
    signalled: Vec<Sent>,
    timings: StopTimings,
    /// The cause was recorded already (once: the engine compares its time with the exit's).
    recorded: bool,
}

impl Prelude {
    /// What a driven [`Stopping`] leaves at `now`: its signals and the time waited since the
    /// polite signal.
    fn after(stopping: &Stopping, now: Instant) -> Prelude {
        Prelude {
            signalled: stopping.sent().to_vec(),
            timings: StopTimings {
                grace: stopping.waited(now),
                ..StopTimings::default()
            },
            recorded: true,
        }
    }
}

enum Graced {
    /// The scope ended within the grace (or was over already).
    Done(StopReport),
    /// Go on with the quiesce.
    Go(Prelude),
}

/// T7: with a grace, the [`Stopping`] step driven on this thread: the polite signal to the
/// workload's group, then the wait on the guardian's pidfd (or the scope's emptiness), without
/// the fence; without one, the stop goes on at once.
fn grace_phase(
    runtime: &Runtime,
    reg: &Registration,
    opts: &StopOptions<'_>,
    start: Instant,
) -> Result<Graced, StopError> {
    let Some(grace) = opts.graced() else {
        return Ok(Graced::Go(Prelude::default()));
    };
    let (guardian, roots, boot) = match open_scope(runtime, reg, opts, true)? {
        Opened::Over(outcome, assessment) => {
            return Ok(Graced::Done(StopReport {
                id: reg.id,
                outcome,
                assessment,
                signalled: Vec::new(),
                killed: 0,
                timings: StopTimings {
                    total: start.elapsed(),
                    ..StopTimings::default()
                },
            }))
        }
        Opened::Scope {
            guardian,
            roots,
            boot,
        } => (guardian, roots, boot),
    };
    let mut stopping = Stopping::new(Some(grace));
    let mut empty = false;
    loop {
        match stopping.advance(Instant::now(), empty) {
            Next::Signal => {
                let (at, ns) = (Instant::now(), crate::kernel::clock::unix_ns());
                stopping.signal_politely(reg, &roots, boot, at, ns)?;
            }
            Next::Wait(until) => {
                empty = match &guardian {
                    Some(g) => g
                        .wait_exit(Some(until.saturating_duration_since(Instant::now())))
                        .map_err(StopError::Signal)?,
                    None => wait_scope_empty(&roots, boot, until)?,
                };
            }
            Next::Force | Next::Ended => break,
        }
    }
    let prelude = Prelude::after(&stopping, Instant::now());
    match (empty, &guardian) {
        (true, Some(g)) => StopAttempt {
            runtime,
            reg,
            opts,
            start,
            deadline: Instant::now() + opts.budget,
            signalled: prelude.signalled,
            killed: 0,
            timings: prelude.timings,
        }
        .prove(g, None)
        .map(Graced::Done),
        _ => Ok(Graced::Go(prelude)),
    }
}

/// The fenced phase: quiesce, kill, proof. `budget_from` starts the budget (before the fence
/// wait, after any grace).
fn run(
    runtime: &Runtime,
    reg: &Registration,
    opts: &StopOptions<'_>,
    start: Instant,
    budget_from: Instant,
    pre: Prelude,
) -> Result<StopReport, StopError> {
    let deadline = budget_from + opts.budget;
    let mut timings = StopTimings {
        fence_wait: budget_from.elapsed(),
        ..pre.timings
    };
    let finish = |outcome, assessment, signalled, killed, mut timings: StopTimings| {
        timings.total = start.elapsed();
        Ok(StopReport {
            id: reg.id,
            outcome,
            assessment,
            signalled,
            killed,
            timings,
        })
    };

    let mut signalled = pre.signalled;
    // Item 7: a lease found under the fence is a dead stop's (see `lease`).
    let inherited = lease::left(runtime, reg.id);
    let (guardian, roots, current) = match open_scope(runtime, reg, opts, !pre.recorded)? {
        // Exited within the grace, or before: the grace's signals are still reported.
        Opened::Over(outcome, assessment) => {
            if let Some(left) = inherited {
                lease::clear(runtime, reg, left);
            }
            let outcome = if signalled.is_empty() {
                outcome
            } else {
                StopOutcome::Stopped
            };
            return finish(outcome, assessment, signalled, 0, timings);
        }
        Opened::Scope {
            guardian,
            roots,
            boot,
        } => (guardian, roots, boot),
    };
    let attempt = |signalled, killed, timings| StopAttempt {
        runtime,
        reg,
        opts,
        start,
        deadline,
        signalled,
        killed,
        timings,
    };
    // F4: a scope in a cgroup of its own is frozen, read and killed by the kernel. A member
    // that left the cgroup (a root workload can move itself) keeps the guardian alive: when no
    // proof comes within half the budget, the `/proc` path below finds and kills the rest.
    // Without a guardian (gone, same boot) the cgroup is killed all the same (X9: an orphan
    // that dropped the owner marker is still a member), and the `/proc` path then sweeps what
    // carries the marker outside it and reports.
    let inherited_freeze = inherited.is_some_and(|l| l.froze);
    let cgroup = scope_cgroup(reg);
    let froze = cgroup
        .as_ref()
        .is_some_and(|(dir, _)| inherited_freeze || !crate::kernel::cgroup::freeze_requested(dir));
    // From before the first freeze or SIGSTOP until this function returns (every path).
    let _lease = lease::Lease::take(runtime, reg.id, froze);
    let mut cgroup_killed = 0;
    if let Some((dir, events)) = cgroup {
        let mut refused = Vec::new();
        let half = Instant::now() + deadline.saturating_duration_since(Instant::now()) / 2;
        let target = CgroupTarget {
            dir: &dir,
            events: &events,
            inherited_freeze,
        };
        if let Some((killed, kill_at)) = stop_cgroup(
            &target,
            guardian.as_ref(),
            half,
            &mut signalled,
            &mut timings,
            &mut refused,
        )? {
            // Counted whichever path ends the stop: the `/proc` path adds what it kills.
            cgroup_killed = killed;
            if let Some(g) = &guardian {
                let proved = StopAttempt {
                    deadline: half,
                    ..attempt(signalled, killed, timings)
                }
                .prove(g, Some(kill_at));
                match proved {
                    Err(StopError::ProofTimeout { signalled: s, .. }) if refused.is_empty() => {
                        tracing::warn!(id = %reg.id, "no proof after cgroup.kill; stopping the rest through /proc");
                        signalled = s;
                    }
                    other => return other.map_err(|e| with_refused(e, refused)),
                }
            }
        }
    }
    let t = Instant::now();
    // T6: members that refuse our signals (EPERM). The rest is still stopped and killed; the
    // stop then stays unproven unless the guardian proves the scope ended after all.
    let mut refused: Vec<ProcessWitness> = Vec::new();
    let held = quiesce(
        &roots,
        current,
        deadline,
        &mut signalled,
        &mut timings.rounds,
        &mut refused,
    )
    .inspect_err(|e| {
        // Completing a dead stop that failed: what that stop had SIGSTOPped is resumed too.
        if let (Some(_), StopError::Quiescence(ev)) = (inherited, e) {
            lease::resume_found_stopped(&ev.found_stopped);
        }
    })?;
    timings.quiesce = t.elapsed();

    let t = Instant::now();
    let mut killed = cgroup_killed;
    // T5, D4: nested guardians are not killed with the rest (see [`crate::kernel::nested`]),
    // recognised off this thread within a bound (X9: a member's executable may be served by a
    // member stopped now).
    let spared: BTreeSet<u32> = match &guardian {
        Some(g) => {
            let pids: Vec<Pid> = held
                .iter()
                .filter_map(|h| procfs::pid_of(&h.witness))
                .collect();
            nested_guardians(g, &pids, deadline)
        }
        None => BTreeSet::new(),
    };
    let mut nested: Vec<&Held> = Vec::new();
    // Children before parents (reverse discovery order): a stopped process group whose last
    // outside parent exits is orphaned, and the kernel sends it SIGHUP + SIGCONT, which would
    // resume a SIGHUP-ignoring member before its SIGKILL. Killed first, it is not stopped then.
    for h in held.iter().rev() {
        if spared.contains(&h.witness.pid) {
            nested.push(h);
            continue;
        }
        if kill_member(h, &mut signalled, &mut refused)? {
            killed += 1;
        }
    }
    if !nested.is_empty() {
        killed += let_nested_guardians_finish(&nested, deadline, &mut signalled, &mut refused)?;
    }
    let held = held;
    match &guardian {
        Some(g) => attempt(signalled, killed, timings)
            .prove(g, Some(t))
            .map_err(|e| with_refused(e, refused)),
        None => {
            // No guardian to reap and prove: wait until every killed witness has exited.
            for h in &held {
                let left = deadline.saturating_duration_since(Instant::now());
                match h.with(|v| v.wait_exit(Some(left))) {
                    Ok(_) | Err(SignalError::Gone(_)) | Err(SignalError::Reused { .. }) => {}
                    Err(e) => return Err(StopError::Signal(e)),
                }
            }
            timings.kill_to_exit = t.elapsed();
            let after = assess::assess(runtime, reg, opts.boot);
            if !refused.is_empty() && after.receipt().is_none() {
                return Err(StopError::Refused {
                    refused,
                    assessment: Box::new(after),
                    signalled,
                });
            }
            // A guardian that exited between the first assessment and the pidfd may still have
            // written its receipt: then the stop is proven after all.
            let outcome = if after.receipt().is_some() {
                StopOutcome::Stopped
            } else {
                StopOutcome::KilledUnverified
            };
            finish(outcome, after, signalled, killed, timings)
        }
    }
}

/// SIGKILL to a held member through its verified pidfd: `true` when sent (and recorded in
/// `signalled`); `false` when it was gone already, or refused by the kernel (recorded in
/// `refused`: the stop goes on without it, T6).
fn kill_member(
    h: &Held,
    signalled: &mut Vec<Sent>,
    refused: &mut Vec<ProcessWitness>,
) -> Result<bool, StopError> {
    match h.signal(Signal::KILL) {
        Ok(()) => {
            signalled.push(Sent {
                target: Target::Process(h.witness),
                signal: Signal::KILL.as_raw(),
            });
            Ok(true)
        }
        Err(SignalError::Gone(_)) | Err(SignalError::Reused { .. }) => Ok(false),
        Err(e) if is_refused(&e) => {
            refused.push(h.witness);
            Ok(false)
        }
        Err(e) => Err(StopError::Signal(e)),
    }
}

/// Whether a signal failed because the kernel refused it (EPERM: another user's process, an LSM).
fn is_refused(e: &SignalError) -> bool {
    matches!(e, SignalError::Os { source, .. } if *source == rustix::io::Errno::PERM)
}

/// A failed proof of a scope with refused members is reported as [`StopError::Refused`].
fn with_refused(e: StopError, refused: Vec<ProcessWitness>) -> StopError {
    match e {
        StopError::ProofTimeout {
            assessment,
            signalled,
            ..
        }
        | StopError::Unproven {
            assessment,
            signalled,
        } if !refused.is_empty() => StopError::Refused {
            refused,
            assessment,
            signalled,
        },
        other => other,
    }
}

/// One stop that has signalled what it could and must now prove the scope's end: what it stops,
/// under which options, its start and deadline, and what it has done so far.
struct StopAttempt<'a> {
    runtime: &'a Runtime,
    reg: &'a Registration,
    opts: &'a StopOptions<'a>,
    start: Instant,
    deadline: Instant,
    signalled: Vec<Sent>,
    killed: usize,
    timings: StopTimings,
}

impl StopAttempt<'_> {
    /// Waits for the guardian to exit (its pidfd), then the assessment must be `exited`.
    /// `kill_at` is when the SIGKILLs went out (none after a graceful exit).
    fn prove(
        mut self,
        guardian: &Verified,
        kill_at: Option<Instant>,
    ) -> Result<StopReport, StopError> {
        // The pidfd held since the assessment: readable once the guardian has exited.
        let left = self.deadline.saturating_duration_since(Instant::now());
        let exited = guardian.wait_exit(Some(left)).map_err(StopError::Signal)?;
        if let Some(t) = kill_at {
            self.timings.kill_to_exit = t.elapsed();
        }
        let assessment = assess::assess(self.runtime, self.reg, self.opts.boot);
        if assessment.is_exited() {
            self.timings.total = self.start.elapsed();
            return Ok(StopReport {
                id: self.reg.id,
                outcome: StopOutcome::Stopped,
                assessment,
                signalled: self.signalled,
                killed: self.killed,
                timings: self.timings,
            });
        }
        let assessment = Box::new(assessment);
        let signalled = self.signalled;
        if exited {
            Err(StopError::Unproven {
                assessment,
                signalled,
            })
        } else {
            Err(StopError::ProofTimeout {
                elapsed: self.start.elapsed(),
                assessment,
                signalled,
            })
        }
    }
}

/// T5, D4: the pids among `pids` to spare as nested guardians of `guardian`'s kind (see
/// [`crate::kernel::nested`]), recognised off this thread within
/// [`crate::kernel::nested::RECOGNITION_BOUND`] and never past `deadline` (X9: a member's
/// executable may be served by a member stopped now). The one recognition of both stop paths:
/// the tree walk's and the cgroup's.
fn nested_guardians(guardian: &Verified, pids: &[Pid], deadline: Instant) -> BTreeSet<u32> {
    let until = deadline.min(Instant::now() + crate::kernel::nested::RECOGNITION_BOUND);
    NestedGuardians::like(guardian.witness())
        .recognise(pids, until)
        .into_iter()
        .map(|i| pids[i].as_raw_nonzero().get() as u32)
        .collect()
}
