//! The quiesce (SPEC T3): every witnessed member SIGSTOPped through a verified pidfd, scans
//! repeated until two agree and the last saw every member quiet; the members come back held by
//! pidfd (or parked, past the descriptor budget) for the kill.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use refine_protocol::{BootId, ProcessWitness};
use rustix::process::Pid;

use super::{is_refused, QuiescenceEvidence, Sent, StopError, Target};
use crate::kernel::procfs::{self, Comm, State};
use crate::kernel::signal::{Pinned, Signal, SignalError, Verified};
use crate::kernel::tree::{self, Found, Member, Roots, Scope, TreeError};

/// Whether `pid` (in state D) is a vfork parent waiting on a stopped child: it cannot run, fork or
/// take its SIGSTOP until that child execs or exits, which a stopped child does not. (It shows
/// as sleeping in the clone call; the function's name depends on the kernel version.)
pub(super) fn in_vfork_wait(pid: Pid) -> bool {
    const VFORK_WAIT: [&str; 4] = ["wait_for_vfork_done", "kernel_clone", "_do_fork", "do_fork"];
    let waiting = procfs::wchan(pid)
        .ok()
        .flatten()
        .is_some_and(|w| VFORK_WAIT.contains(&w.trim()));
    waiting
        && procfs::children(pid).ok().flatten().is_some_and(|kids| {
            kids.into_iter().any(|k| {
                procfs::stat(k)
                    .is_ok_and(|c| c.ppid == pid.as_raw_nonzero().get() && c.state.is_stopped())
            })
        })
}

/// Descriptors a stop leaves free for everything but member pidfds (`/proc` reads, the fence,
/// other threads of a service).
pub(super) const DESCRIPTOR_RESERVE: usize = 64;

/// A quiesced member (T6): held by its pidfd while descriptors allow, else parked (pidfd
/// closed). A parked member is re-opened and re-verified (start time after `pidfd_open`) for each
/// later signal, exactly as at discovery, so a pid reused meanwhile is never signalled; a tree
/// with more members than this process may hold descriptors still stops.
pub(super) struct Held {
    pub(super) witness: ProcessWitness,
    pub(super) pidfd: Option<Verified>,
    /// The command name at the last scan (all stopped by the last one: it cannot exec).
    pub(super) comm: Comm,
}

impl Held {
    /// Runs `f` on the held pidfd, or on a freshly opened and verified one.
    pub(super) fn with<T>(
        &self,
        f: impl FnOnce(&Verified) -> Result<T, SignalError>,
    ) -> Result<T, SignalError> {
        match &self.pidfd {
            Some(v) => f(v),
            None => f(&Verified::open(self.witness)?),
        }
    }

    pub(super) fn signal(&self, sig: Signal) -> Result<(), SignalError> {
        self.with(|v| v.signal(sig))
    }
}

/// The stop's [`tree::Pin`]: a pidfd for each process a scan finds that is not held yet (nor
/// refused), opened before its stat is read, while descriptors allow (taken from the scan
/// reader's room first: kept `/proc` files give way to pidfds).
struct PinNew<'a> {
    /// Pids held or refused: not pinned again.
    known: &'a BTreeSet<u32>,
}

impl tree::Pin for PinNew<'_> {
    type Pinned = Pinned;
    fn pin(&mut self, pid: Pid, files: &mut procfs::Reader) -> Option<Pinned> {
        if self.known.contains(&(pid.as_raw_nonzero().get() as u32)) || !files.take_room() {
            return None;
        }
        // Any failure (gone, EMFILE): not pinned; the member is then opened and verified
        // through `Verified::open`, which reports the error. (Its room comes back with the next
        // scan's count.)
        Pinned::open(pid).ok().flatten()
    }
}

/// Whether a member, as its stat in a scan shows it, can no longer fork: stopped, exited, or a
/// vfork parent waiting on a stopped child.
fn quiet(state: State, pid: Pid) -> bool {
    state.is_stopped() || state.is_exited() || (state == State::DiskSleep && in_vfork_wait(pid))
}

/// SIGSTOPs every witnessed member and re-scans until membership is stable and every member is
/// stopped (or exited). Returns the verified members, held by pidfd. On failure, resumes exactly
/// what this attempt stopped.
///
/// Each scan reads every member's stat once, then its children list, and opens a pidfd (before
/// that stat) only for a process it has not seen before; a new member is SIGSTOPped right after
/// the scan that found it. The scan that ends the quiesce (T3: two scans agree)
/// must find the same live members as the scan before it, and show each of them quiet *in its
/// own stat read*, which comes before that member's children list is read: the list of a process
/// that can no longer fork is final (a stopped process cannot fork, and orphans are reparented
/// only when a member exits, which changes the live set and fails the comparison). That is the
/// guarantee of a separate wait for the stopped state before the second scan, without the extra
/// pass of stat reads: the second scan is the wait's check. A member the second scan sees still
/// running is waited for, and a third scan decides.
///
/// The scans share one [`procfs::Reader`] that keeps each member's `stat` and `children`
/// descriptors with the room the pidfds leave (2 per member), so a later scan re-reads them
/// with one `pread` each; they are closed when the quiesce returns.
pub(super) fn quiesce(
    roots: &Roots,
    boot: BootId,
    deadline: Instant,
    signalled: &mut Vec<Sent>,
    rounds: &mut u32,
    refused: &mut Vec<ProcessWitness>,
) -> Result<Vec<Held>, StopError> {
    let start = Instant::now();
    let mut q = Quiesce::new(roots, boot, deadline, signalled, refused)?;
    loop {
        *rounds += 1;
        match q.round() {
            Ok(Round::Stable) => return Ok(q.into_held()),
            Ok(Round::Again) => {}
            Err((error, scope)) => {
                let resumed = q.resume();
                if let Some(e) = error {
                    return Err(e);
                }
                return Err(StopError::Quiescence(Box::new(QuiescenceEvidence {
                    stopped: q.stopped,
                    resumed,
                    found_stopped: q.found_stopped,
                    last_scan: scope.or(q.previous).map(|s| s.members).unwrap_or_default(),
                    rounds: *rounds,
                    elapsed: start.elapsed(),
                })));
            }
        }
    }
}

/// What one scan of [`quiesce`] concluded.
enum Round {
    /// Two scans agree and the last saw every member quiet: done.
    Stable,
    /// New members were stopped, or some were not quiet yet: scan again.
    Again,
}

/// Why a round failed: a read or signal error (`None`: the deadline passed), and the scan it saw.
type RoundError = (Option<StopError>, Option<Scope>);

/// The state of one quiesce attempt, carried from scan to scan.
struct Quiesce<'a> {
    roots: &'a Roots,
    boot: BootId,
    deadline: Instant,
    signalled: &'a mut Vec<Sent>,
    refused: &'a mut Vec<ProcessWitness>,
    held: BTreeMap<(u32, u64), Held>,
    /// Pids held or refused (never pinned again).
    known: BTreeSet<u32>,
    /// Pidfds this attempt may keep open; past it, members are parked (see [`Held`]).
    fd_budget: usize,
    held_fds: usize,
    /// The scans' reader: the `/proc` files it keeps share `fd_budget` with the pidfds, which
    /// come first (see [`PinNew`]).
    files: procfs::Reader,
    /// Discovery order: parents before their descendants.
    order: Vec<(u32, u64)>,
    /// What this attempt SIGSTOPped (and resumes if it fails).
    stopped: Vec<ProcessWitness>,
    /// Members found stopped already (by someone else): never resumed by a failed attempt.
    found_stopped: Vec<ProcessWitness>,
    previous: Option<Scope>,
    /// Processes the first scan found by the owner marker.
    marked: Vec<ProcessWitness>,
}

impl<'a> Quiesce<'a> {
    fn new(
        roots: &'a Roots,
        boot: BootId,
        deadline: Instant,
        signalled: &'a mut Vec<Sent>,
        refused: &'a mut Vec<ProcessWitness>,
    ) -> Result<Self, StopError> {
        Ok(Quiesce {
            roots,
            boot,
            deadline,
            signalled,
            refused,
            held: BTreeMap::new(),
            known: BTreeSet::new(),
            fd_budget: crate::kernel::limits::descriptors_left(DESCRIPTOR_RESERVE),
            held_fds: 0,
            files: procfs::Reader::new().map_err(|e| StopError::Tree(TreeError::Procfs(e)))?,
            order: Vec::new(),
            stopped: Vec::new(),
            found_stopped: Vec::new(),
            previous: None,
            marked: Vec::new(),
        })
    }

    /// The roots of this round's scan. The owner-marker scan reads every process's environment,
    /// by far the costliest part of a scan: it runs in the first round only; later rounds walk
    /// from the marked processes it found (and re-walk the guardian's tree), which is what the
    /// stability check needs.
    fn round_roots(&self) -> Roots {
        match &self.previous {
            None => self.roots.clone(),
            Some(_) => Roots {
                guardian: self.roots.guardian,
                members: self
                    .roots
                    .members
                    .iter()
                    .copied()
                    .chain(self.marked.iter().copied())
                    .collect(),
                owner: None,
            },
        }
    }

    /// One scan: stops every new member, notes held ones not yet quiet, decides stability, and
    /// otherwise waits (within the deadline) before the next scan.
    fn round(&mut self) -> Result<Round, RoundError> {
        let round_roots = self.round_roots();
        let mut pin = PinNew { known: &self.known };
        self.files.set_room(
            self.fd_budget
                .saturating_sub(self.held_fds + self.files.kept()),
        );
        let (scope, pinned) = tree::discover_pinning(
            &round_roots,
            self.boot,
            tree::Walk::ChildrenLists,
            &mut pin,
            &mut self.files,
        )
        .map_err(|e| (Some(e.into()), None))?;
        let mut pinned = pinned.into_iter().peekable();
        if self.previous.is_none() {
            self.marked = scope
                .live()
                .filter(|m| m.found == Found::OwnerMarker)
                .map(|m| m.witness)
                .collect();
        }
        // Held members this scan saw not yet quiet, and the last member it stopped.
        let mut pending: Vec<(u32, u64)> = Vec::new();
        let mut last_new: Option<(u32, u64)> = None;
        for (i, m) in scope.members.iter().enumerate() {
            let pin = pinned.next_if(|(at, _)| *at == i).map(|(_, p)| p);
            if m.state.is_exited() {
                continue;
            }
            let key = (m.witness.pid, m.witness.start_time);
            if let Some(h) = self.held.get_mut(&key) {
                h.comm = m.comm;
                let pid = procfs::pid_of(&m.witness);
                if !pid.is_some_and(|p| quiet(m.state, p)) {
                    pending.push(key);
                }
                continue;
            }
            if self.refused.contains(&m.witness) {
                continue;
            }
            if self.stop_new(m, pin).map_err(|e| (Some(e), None))? {
                last_new = Some(key);
            }
        }
        let stable = last_new.is_none()
            && pending.is_empty()
            && self
                .previous
                .as_ref()
                .is_some_and(|p| p.live_witnesses() == scope.live_witnesses());
        if stable {
            return Ok(Round::Stable);
        }
        // Before the next scan: after new members, until the last one stopped is seen stopped
        // (SIGSTOP is delivered asynchronously; the others were signalled before it, so the next
        // scan then rarely finds one running); else until those this scan saw running are
        // quiet. Only the next scan's own reads count for stability.
        let wait: Vec<(u32, u64)> = match last_new {
            Some(key) => vec![key],
            None => pending,
        };
        if let Err(e) = wait_quiet(&self.held, wait, self.deadline) {
            return Err((e, Some(scope)));
        }
        if Instant::now() >= self.deadline {
            return Err((None, Some(scope)));
        }
        self.previous = Some(scope);
        Ok(Round::Again)
    }

    /// A member this attempt has not seen before: verified (through the pidfd pinned before
    /// the scan read its stat, or opened now), SIGSTOPped unless stopped already, and held.
    /// `Ok(false)` when it is gone or refuses the signal (then recorded in `refused`).
    fn stop_new(&mut self, m: &Member, pin: Option<Pinned>) -> Result<bool, StopError> {
        // Pinned before this scan read the stat that shows `m`: verified as it stands.
        // Otherwise (out of descriptors, a root, a marked process) opened and verified now.
        let pinned_here = pin.is_some();
        let (v, state) = match pin {
            Some(p) => (p.verified(m.witness), m.state),
            None => match Verified::open_with_stat(m.witness) {
                Ok((v, now)) => (v, now.state),
                // Exited (or its pid reused) since the scan: nothing to stop.
                Err(SignalError::Gone(_)) | Err(SignalError::Reused { .. }) => return Ok(false),
                Err(e) => return Err(StopError::Signal(e)),
            },
        };
        let v = Held {
            witness: m.witness,
            pidfd: Some(v),
            comm: m.comm,
        };
        if state.is_stopped() {
            self.found_stopped.push(m.witness);
        } else {
            match v.signal(Signal::STOP) {
                Ok(()) => {
                    self.stopped.push(m.witness);
                    self.signalled.push(Sent {
                        target: Target::Process(m.witness),
                        signal: Signal::STOP.as_raw(),
                    });
                }
                Err(SignalError::Gone(_)) => return Ok(false),
                // Not held, not waited for: it cannot be stopped, and must not keep the
                // others from being killed.
                Err(e) if is_refused(&e) => {
                    self.refused.push(m.witness);
                    self.known.insert(m.witness.pid);
                    return Ok(false);
                }
                Err(e) => return Err(StopError::Signal(e)),
            }
        }
        // A pinned member took its room at the pin; any other takes it now (from the kept
        // files, if need be), or is parked.
        let v = if pinned_here || self.files.take_room() {
            self.held_fds += 1;
            v
        } else {
            Held { pidfd: None, ..v }
        };
        let key = (m.witness.pid, m.witness.start_time);
        self.held.insert(key, v);
        self.known.insert(m.witness.pid);
        self.order.push(key);
        Ok(true)
    }

    /// The held members in discovery order (parents before their descendants).
    fn into_held(mut self) -> Vec<Held> {
        let order = std::mem::take(&mut self.order);
        order.iter().filter_map(|k| self.held.remove(k)).collect()
    }

    /// After a failure: resumes exactly what this attempt stopped, leaves everything else as it
    /// was; returns what it resumed.
    fn resume(&mut self) -> Vec<ProcessWitness> {
        let mut resumed = Vec::new();
        for w in &self.stopped {
            if let Some(v) = self.held.get(&(w.pid, w.start_time)) {
                if v.signal(Signal::CONT).is_ok() {
                    resumed.push(*w);
                    self.signalled.push(Sent {
                        target: Target::Process(*w),
                        signal: Signal::CONT.as_raw(),
                    });
                }
            }
        }
        resumed
    }
}

/// How long [`wait_quiet`] re-reads at once (yielding the CPU between reads) before it sleeps:
/// a SIGSTOP takes effect when its target next runs, usually within tens of microseconds, far
/// less than the shortest sleep the kernel's timer slack gives.
const QUIET_SPIN: Duration = Duration::from_micros(500);

/// Waits until each of `pending` (held members) is quiet (stopped, exited, or a vfork parent
/// waiting on a stopped child), or `deadline`: `Err(None)` then, `Err(Some(_))` on a read error.
fn wait_quiet(
    held: &BTreeMap<(u32, u64), Held>,
    mut pending: Vec<(u32, u64)>,
    deadline: Instant,
) -> Result<(), Option<StopError>> {
    let mut pause = Duration::from_micros(50);
    let spin_until = Instant::now() + QUIET_SPIN;
    loop {
        let mut still = Vec::new();
        for key in pending.drain(..) {
            let Some(v) = held.get(&key) else { continue };
            match procfs::stat_of(&v.witness) {
                Ok(Some(s)) if !quiet(s.state, s.pid) => still.push(key),
                Ok(_) => {}
                Err(e) => return Err(Some(StopError::Signal(e.into()))),
            }
        }
        pending = still;
        if pending.is_empty() {
            return Ok(());
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(None);
        }
        if now < spin_until {
            std::thread::yield_now();
            continue;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(2));
    }
}
