//! W9's termination requests as a value: what a `SIGINT` or `SIGTERM` that a host received
//! does to the launch it supervises, as `docker stop`, `tini -g` and dumb-init have it.
//!
//! - The first request is forwarded to the workload, which then has the grace
//!   ([`Escalation::end_at`]) to end; once the grace is over the scope ends through the shared
//!   stop (outcome `cancelled`).
//! - The same request a second time ends the scope at once; a different one is only forwarded.
//! - Once a request came, whatever is left of the scope when the workload has ended (by
//!   itself or by the signal) is stopped through the shared stop ([`Escalation::asked`]).
//! - Every other signal is forwarded and nothing more: it starts no timer (`SIGHUP` reloads a
//!   daemon).
//!
//! The engine holds one per launch and drives it on its turns (its wake-up bounds the engine's
//! `poll`): `run` hands it the signals it reads from its `signalfd`, a Rust host the ones it
//! receives ([`crate::host::Child::on_termination_request`]). Pure policy: no clock of its own,
//! the caller passes `now`.
//!
//! # Caveats
//! - Signals coalesce: two `SIGTERM`s the kernel merged before the host read them are one
//!   request.

use std::time::{Duration, Instant};

/// The grace a workload has after the first termination request (`run --stop-grace`): 10 s.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(10);

/// What to do with a signal a host received ([`Escalation::request`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Forward it to the workload, and nothing more (a first request's grace is
    /// [`Escalation::end_at`]).
    Forward,
    /// End the scope now through the shared stop (the same request a second time).
    EndNow,
}

/// The state of W9's rule for one launch.
#[derive(Debug, Clone)]
pub struct Escalation {
    grace: Duration,
    /// The first termination request that was forwarded.
    first: Option<i32>,
    /// When that one's grace is over; `None` once it was told ([`Escalation::grace_over`]).
    end_at: Option<Instant>,
}

impl Default for Escalation {
    fn default() -> Self {
        Escalation::new(DEFAULT_STOP_GRACE)
    }
}

impl Escalation {
    /// The rule with this grace after the first request.
    pub fn new(grace: Duration) -> Escalation {
        Escalation {
            grace,
            first: None,
            end_at: None,
        }
    }

    /// The grace after the first request.
    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// Whether `signo` is a request to end (`SIGINT`, `SIGTERM`).
    pub fn is_request(signo: i32) -> bool {
        matches!(signo, libc::SIGINT | libc::SIGTERM)
    }

    /// What `signo`, received at `now`, does.
    pub fn request(&mut self, signo: i32, now: Instant) -> Answer {
        if !Escalation::is_request(signo) {
            return Answer::Forward;
        }
        match self.first {
            Some(first) if first == signo => Answer::EndNow,
            Some(_) => Answer::Forward,
            None => {
                self.first = Some(signo);
                // A grace the clock cannot hold has no end: the workload waits for a second request.
                self.end_at = now.checked_add(self.grace);
                Answer::Forward
            }
        }
    }

    /// Whether a termination request came: the rest of the scope ends with the workload.
    pub fn asked(&self) -> bool {
        self.first.is_some()
    }

    /// When the grace of the first request is over (a wake-up for the caller's wait).
    pub fn end_at(&self) -> Option<Instant> {
        self.end_at
    }

    /// Whether the grace is over at `now`: `true` once, then the scope is to be ended.
    pub fn grace_over(&mut self, now: Instant) -> bool {
        match self.end_at {
            Some(at) if now >= at => {
                self.end_at = None;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Answer, Escalation};
    use std::time::{Duration, Instant};

    const GRACE: Duration = Duration::from_secs(10);

    #[test]
    fn the_first_request_is_forwarded_and_starts_the_grace() {
        let now = Instant::now();
        let mut e = Escalation::new(GRACE);
        assert_eq!(e.request(libc::SIGTERM, now), Answer::Forward);
        assert!(e.asked());
        assert_eq!(e.end_at(), Some(now + GRACE));
        assert!(!e.grace_over(now));
        assert!(e.grace_over(now + GRACE));
        assert!(!e.grace_over(now + GRACE), "told once");
    }

    #[test]
    fn the_same_request_again_ends_at_once_and_the_other_is_only_forwarded() {
        let now = Instant::now();
        let mut e = Escalation::new(GRACE);
        e.request(libc::SIGINT, now);
        assert_eq!(e.request(libc::SIGTERM, now), Answer::Forward);
        assert_eq!(
            e.end_at(),
            Some(now + GRACE),
            "the other one starts no timer"
        );
        assert_eq!(e.request(libc::SIGINT, now), Answer::EndNow);
    }

    #[test]
    fn other_signals_start_no_timer() {
        let now = Instant::now();
        let mut e = Escalation::new(GRACE);
        for s in [libc::SIGHUP, libc::SIGUSR1, libc::SIGQUIT, libc::SIGWINCH] {
            assert_eq!(e.request(s, now), Answer::Forward);
        }
        assert!(!e.asked());
        assert_eq!(e.end_at(), None);
    }

    #[test]
    fn a_grace_the_clock_cannot_hold_has_no_end_rather_than_a_panic() {
        let now = Instant::now();
        let mut e = Escalation::new(Duration::MAX);
        assert_eq!(e.request(libc::SIGTERM, now), Answer::Forward);
        assert_eq!(e.end_at(), None);
        assert!(!e.grace_over(now));
        assert_eq!(e.request(libc::SIGTERM, now), Answer::EndNow);
    }
}
