//! W8: the shutdown rule for a host's own launches (the service's when `serve` stops): SIGTERM to
//! each live one (the stop's own polite step, to its process group), up to the grace for them to
//! end, then the shared stop for the rest, each with its proof.
//!
//! The grace is waited on events: every guardian's pidfd is in one `poll` (a guardian exits
//! once its receipt is written, so a readable pidfd is a scope that ended), bounded by the
//! earliest grace still running. No look-again period, but for a scope whose guardian cannot be
//! held by a pidfd (it is gone, yet the scope is still assessed live): that one is looked at again
//! every [`RECHECK_UNHELD`].
//!
//! # Caveats
//! - A launch whose registration cannot be read, or that is not live, is left alone: nothing of
//!   it runs that a SIGTERM could reach.
//! - Each stop after the grace runs in turn on the caller's thread (the fence serialises them
//!   anyway).

use std::time::Instant;

use rustix::event::{PollFd, PollFlags};

use super::*;
use crate::kernel::signal::Verified;

/// How often a scope whose guardian no pidfd holds is assessed again during the grace.
pub const RECHECK_UNHELD: Duration = Duration::from_millis(100);

/// What [`shutdown`] did.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    /// The launches that ended within the grace (in the order asked).
    pub ended_in_grace: Vec<RegistrationId>,
    /// The `stop` documents of those stopped once the grace was over.
    pub stopped: Vec<StopDoc>,
}

/// One live launch during the grace.
struct Ending {
    reg: Registration,
    stopping: stop::Stopping,
    /// The guardian's pidfd; `None` when it cannot be held, or once it was readable.
    guardian: Option<Verified>,
}

/// W8 for `ids` (see the module docs): returns once each has ended within `grace` or been
/// stopped through the shared stop after it (`cause`: operator).
pub fn shutdown(rt: &Runtime, ids: &[RegistrationId], grace: Duration) -> Shutdown {
    let polite = stop::StopOptions {
        cause: Some(StopCause::Operator),
        ..stop::StopOptions::default()
    };
    let mut left: Vec<Ending> = ids
        .iter()
        .filter_map(|&id| rt.read_registration(id).ok())
        .filter(|reg| assess_one(rt, reg).state == State::Live)
        .map(|reg| {
            let guardian = Verified::open(reg.hello.guardian).ok();
            let mut stopping = stop::Stopping::new(Some(stop::Grace::term(grace)));
            if let Err(e) = stopping.signal(rt, &reg, &polite) {
                tracing::warn!(id = %reg.id, error = %error_chain(&e), "shutdown: cannot send SIGTERM");
            }
            Ending {
                reg,
                stopping,
                guardian,
            }
        })
        .collect();
    let mut done = Shutdown::default();
    loop {
        let now = Instant::now();
        left.retain_mut(|e| {
            let ended = assess_one(rt, &e.reg).state != State::Live;
            let over = e.stopping.advance(now, ended) == stop::Next::Ended;
            if over {
                done.ended_in_grace.push(e.reg.id);
            }
            !over
        });
        let mut until: Option<Instant> = None;
        for e in &mut left {
            if let stop::Next::Wait(at) = e.stopping.advance(now, false) {
                until = Some(until.map_or(at, |u| u.min(at)));
            }
        }
        // Every grace is over (or none was left to wait): the shared stop for the rest.
        let Some(mut until) = until else {
            break;
        };
        if left.iter().any(|e| e.guardian.is_none()) {
            until = until.min(now + RECHECK_UNHELD);
        }
        wait_for_an_end(&mut left, until);
    }
    for e in &left {
        done.stopped.push(stop_after_grace(
            rt,
            &e.reg,
            StopCause::Operator,
            &e.stopping,
        ));
    }
    done
}

/// Waits until one of the held guardians exits, or `until`. A guardian seen exited is let go:
/// its pidfd would stay readable, and its scope's assessment decides from here on.
fn wait_for_an_end(left: &mut [Ending], until: Instant) {
    let held: Vec<usize> = (0..left.len())
        .filter(|&i| left[i].guardian.is_some())
        .collect();
    let readable: Vec<bool> = {
        let mut fds: Vec<PollFd<'_>> = held
            .iter()
            .filter_map(|&i| left[i].guardian.as_ref())
            .map(|g| PollFd::new(g, PollFlags::IN))
            .collect();
        match crate::launch::capture::poll_until(&mut fds, Some(until)) {
            Ok(()) => fds.iter().map(|fd| !fd.revents().is_empty()).collect(),
            // `poll` itself failed: every guardian is let go, and the assessment alone decides
            // from here on, every [`RECHECK_UNHELD`] (a `poll` of nothing is that timer).
            Err(e) => {
                tracing::warn!(error = %error_chain(&e), "shutdown: cannot wait on the guardians");
                vec![true; fds.len()]
            }
        }
    };
    for (&i, ready) in held.iter().zip(readable) {
        if ready {
            left[i].guardian = None;
        }
    }
}
