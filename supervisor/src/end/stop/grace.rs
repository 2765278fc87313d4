//! T7's grace as a value of the one stop, and the [`Stopping`] step that every caller drives.
//!
//! ```text
//! Signal   the polite signal (SIGTERM, or the grace's own) to the workload's process group,
//!          through a verified member, at T ([`Stopping::signal`])
//! Wait     until T + within, or until the tree is empty, whichever comes first
//! Force    the grace is over with the tree still there: the forceful stop and its proof
//!          ([`Stopping::finish`], or the engine's own shared stop)
//! Ended    the tree ended within the grace: only the proof is left
//! ```
//!
//! The step holds no clock and waits for nothing: [`Stopping::advance`] is told "now" and
//! whether the tree is empty, and answers what is due. The blocking stop ([`super::stop`]) waits
//! on the guardian's pidfd between two advances, the engine and the scope watcher make the
//! deadline a timer of their loop, the service a timer of its event loop. A polite signal that
//! reached nobody (no member of the workload's group is left) ends the grace at once: nothing
//! is left that could answer it.

use std::time::{Duration, Instant};

use refine_protocol::record::Registration;
use refine_protocol::BootId;

use super::{open_scope, Opened, Sent, StopError, StopOptions, Target};
use crate::kernel::signal::{self, Signal, SignalError, Verified};
use crate::kernel::tree::{self, Roots};
use crate::store::registry::Runtime;

/// T7's grace: the polite signal, and how long the tree has to end after it before the forceful
/// stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grace {
    pub within: Duration,
    pub signal: Signal,
}

impl Grace {
    /// A grace with SIGTERM, the default polite signal.
    pub fn term(within: Duration) -> Self {
        Grace {
            within,
            signal: Signal::TERM,
        }
    }
}

/// What the driver of a [`Stopping`] does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Send the polite signal now ([`Stopping::signal`]).
    Signal,
    /// Wait for the tree's end until this instant, then advance again.
    Wait(Instant),
    /// The grace is over (or there is none): the forceful stop and its proof.
    Force,
    /// The tree ended within the grace: the proof alone.
    Ended,
}

/// The one stop's grace in progress: what was sent, when, and until when the tree may end by
/// itself. See the module docs.
#[derive(Debug, Clone)]
pub struct Stopping {
    grace: Option<Grace>,
    /// When the polite signal went out (T), monotonic and as wall time (the stop request's
    /// withdrawal compares with the latter).
    sent_at: Option<(Instant, u64)>,
    sent: Vec<Sent>,
}

impl Stopping {
    /// A stop with this grace (`None`: forceful at once).
    pub fn new(grace: Option<Grace>) -> Self {
        Stopping {
            grace,
            sent_at: None,
            sent: Vec::new(),
        }
    }

    /// What is due at `now`, the tree being empty (`tree_empty`) or not. Never blocks.
    pub fn advance(&mut self, now: Instant, tree_empty: bool) -> Next {
        if tree_empty {
            return Next::Ended;
        }
        let Some(grace) = self.grace else {
            return Next::Force;
        };
        match self.sent_at {
            None => Next::Signal,
            Some(_) if self.sent.is_empty() => Next::Force,
            Some((t, _)) if now >= t + grace.within => Next::Force,
            Some((t, _)) => Next::Wait(t + grace.within),
        }
    }

    /// When the grace ends (T + within), once the polite signal has gone out.
    pub fn deadline(&self) -> Option<Instant> {
        let (t, _) = self.sent_at?;
        Some(t + self.grace?.within)
    }

    /// The grace's signals so far.
    pub fn sent(&self) -> &[Sent] {
        &self.sent
    }

    /// The time from the polite signal to `now` (zero before it).
    pub fn waited(&self, now: Instant) -> Duration {
        self.sent_at
            .map_or(Duration::ZERO, |(t, _)| now.saturating_duration_since(t))
    }

    /// Records that the polite signal went out at `at` (`at_unix_ns` as wall time) and reached
    /// what `sent` says (nothing: nobody was left to reach).
    pub fn record_sent(&mut self, at: Instant, at_unix_ns: u64, sent: Vec<Sent>) {
        self.sent_at = Some((at, at_unix_ns));
        self.sent = sent;
    }

    /// The wall time at which the polite signal went out (the stop request was recorded just
    /// after it).
    pub(super) fn sent_at_unix_ns(&self) -> Option<u64> {
        self.sent_at.map(|(_, ns)| ns)
    }

    /// The [`Next::Signal`] step: records [`StopOptions::cause`] (a live scope), then sends the
    /// grace's signal to the workload's process group through a verified member. A scope that
    /// is over, or a group with no member left, is sent nothing (and the grace ends at once).
    /// An error leaves the step as if nothing was sent, so that the forceful stop follows.
    pub fn signal(
        &mut self,
        runtime: &Runtime,
        reg: &Registration,
        opts: &StopOptions<'_>,
    ) -> Result<(), StopError> {
        let (at, ns) = (Instant::now(), crate::kernel::clock::unix_ns());
        self.record_sent(at, ns, Vec::new());
        if let Opened::Scope { roots, boot, .. } = open_scope(runtime, reg, opts, true)? {
            self.signal_politely(reg, &roots, boot, at, ns)?;
        }
        Ok(())
    }

    /// The polite signal itself, to a scope already opened ([`Stopping::signal`], the
    /// blocking stop).
    pub(super) fn signal_politely(
        &mut self,
        reg: &Registration,
        roots: &Roots,
        boot: BootId,
        at: Instant,
        at_unix_ns: u64,
    ) -> Result<(), StopError> {
        let signal = self.grace.map_or(Signal::TERM, |g| g.signal);
        let mut sent = Vec::new();
        let result = graceful(reg, roots, boot, signal, &mut sent);
        self.record_sent(at, at_unix_ns, sent);
        result
    }
}

/// `sig` (SIGTERM by default) to the workload's process group, only through a verified member of
/// that group, never the guardian's own group, never a group id of 1 or less.
pub(super) fn graceful(
    reg: &Registration,
    roots: &Roots,
    boot: BootId,
    sig: Signal,
    signalled: &mut Vec<Sent>,
) -> Result<(), StopError> {
    let pgid = reg.hello.workload_pgid as i32;
    if signal::checked_group(pgid).is_err() {
        return Ok(());
    }
    let scope = tree::discover(roots, boot)?;
    if scope.guardian_pgid == Some(pgid) {
        return Ok(());
    }
    for m in scope.live().filter(|m| m.pgid == pgid) {
        let Ok(member) = Verified::open(m.witness) else {
            continue;
        };
        match signal::signal_group(&member, pgid, sig) {
            Ok(()) => {
                signalled.push(Sent {
                    target: Target::Group {
                        pgid,
                        member: m.witness,
                    },
                    signal: sig.as_raw(),
                });
                return Ok(());
            }
            Err(SignalError::Gone(_)) | Err(SignalError::NotMember { .. }) => continue,
            Err(e) => return Err(StopError::Signal(e)),
        }
    }
    Ok(())
}

/// Without a guardian: waits until the scope has no live member, or `until`.
pub(super) fn wait_scope_empty(
    roots: &Roots,
    boot: BootId,
    until: Instant,
) -> Result<bool, StopError> {
    let mut pause = Duration::from_micros(500);
    loop {
        if tree::discover(roots, boot)?.live().next().is_none() {
            return Ok(true);
        }
        let now = Instant::now();
        if now >= until {
            return Ok(false);
        }
        std::thread::sleep(pause.min(until - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::{Grace, Next, Stopping};
    use crate::end::stop::{Sent, Target};
    use crate::kernel::signal::Signal;
    use std::time::{Duration, Instant};

    fn sent() -> Vec<Sent> {
        vec![Sent {
            target: Target::Cgroup { members: 1 },
            signal: Signal::TERM.as_raw(),
        }]
    }

    /// The grace is a state machine over an injected clock: the polite signal at T, a wait until
    /// T + within, then the forceful stop, without anyone waiting.
    #[test]
    fn the_grace_ends_at_its_deadline_on_an_injected_clock() {
        let within = Duration::from_secs(3600);
        let mut s = Stopping::new(Some(Grace::term(within)));
        let t = Instant::now();
        assert_eq!(s.advance(t, false), Next::Signal);
        s.record_sent(t, crate::kernel::clock::unix_ns(), sent());
        assert_eq!(s.advance(t, false), Next::Wait(t + within));
        assert_eq!(s.advance(t + within / 2, false), Next::Wait(t + within));
        assert_eq!(s.deadline(), Some(t + within));
        assert_eq!(s.advance(t + within, false), Next::Force);
        assert_eq!(s.advance(t + 2 * within, false), Next::Force);
        assert_eq!(s.waited(t + within), within);
    }

    #[test]
    fn a_tree_that_ends_within_the_grace_needs_only_the_proof() {
        let mut s = Stopping::new(Some(Grace::term(Duration::from_secs(60))));
        let t = Instant::now();
        s.record_sent(t, 0, sent());
        assert_eq!(s.advance(t + Duration::from_secs(1), true), Next::Ended);
    }

    #[test]
    fn no_grace_or_a_signal_that_reached_nobody_stops_at_once() {
        let t = Instant::now();
        assert_eq!(Stopping::new(None).advance(t, false), Next::Force);
        let mut s = Stopping::new(Some(Grace::term(Duration::from_secs(60))));
        s.record_sent(t, 0, Vec::new());
        assert_eq!(s.advance(t, false), Next::Force);
    }
}
