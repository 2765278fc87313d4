//! `wait`: until scopes end or are healthy, as a bounded look-again (no tokio).

use super::*;

/// How often [`wait_ended`] and [`wait_healthy`] look again. The end and a health record have
/// no event a caller of another process can block on (the launcher, not the caller, reaps), so
/// the wait is a bounded look-again; its cost is one registry read per scope per period.
pub const WAIT_PERIOD: Duration = Duration::from_millis(100);

/// What [`wait_ended`] found: per scope (in the order asked) its state, `wait`'s exit code and
/// the text `wait` prints, or `None` for one still live when the time ran out.
#[derive(Debug, Clone)]
pub struct Waited {
    pub ended: Vec<Option<(State, i32, String)>>,
    pub timed_out: bool,
}

/// Waits until every scope in `regs` has ended as `wait` means it (see [`ended`]), or until
/// `timeout` (none: without a bound) has passed.
pub fn wait_ended(rt: &Runtime, regs: &[Registration], timeout: Option<Duration>) -> Waited {
    let started = std::time::Instant::now();
    let mut ended: Vec<Option<(State, i32, String)>> = vec![None; regs.len()];
    loop {
        for (reg, slot) in regs.iter().zip(ended.iter_mut()) {
            if slot.is_some() {
                continue;
            }
            let a = assess_one(rt, reg);
            if a.state == State::Live || !rt.let_go(reg.id) {
                continue;
            }
            let reported = rt
                .read_result(reg.id)
                .ok()
                .flatten()
                .map(|r| r.workload_status);
            let (code, text) = wait_code(a.receipt.map(|r| r.status).or(reported));
            *slot = Some((a.state, code, text));
        }
        if ended.iter().all(Option::is_some) {
            return Waited {
                ended,
                timed_out: false,
            };
        }
        let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
        if left == Some(Duration::ZERO) {
            return Waited {
                ended,
                timed_out: true,
            };
        }
        std::thread::sleep(left.map_or(WAIT_PERIOD, |l| l.min(WAIT_PERIOD)));
    }
}

/// What [`wait_healthy`] found (H7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitedHealth {
    /// Its last probe succeeded.
    Healthy,
    /// The launch asked for no health check: it never becomes healthy.
    NoCheck,
    /// The scope ended (in this state) before a probe found it healthy.
    Ended(State),
    /// The time ran out; the health state it had then.
    TimedOut(refine_protocol::docs::HealthState),
}

/// Waits until the scope's health check finds it `healthy` (an `unhealthy` one may recover, as
/// docker's does, so that is waited through), until it ends, or until `timeout` has passed.
pub fn wait_healthy(
    rt: &Runtime,
    reg: &Registration,
    timeout: Option<Duration>,
) -> Result<WaitedHealth, RegistryError> {
    use refine_protocol::docs::HealthState;
    if reg.health.is_none() {
        return Ok(WaitedHealth::NoCheck);
    }
    let started = std::time::Instant::now();
    loop {
        let state = rt
            .read_health(reg.id)?
            .map_or(HealthState::Starting, |r| r.state);
        if state == HealthState::Healthy {
            return Ok(WaitedHealth::Healthy);
        }
        let a = assess_one(rt, reg);
        if a.state != State::Live {
            return Ok(WaitedHealth::Ended(a.state));
        }
        let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
        if left == Some(Duration::ZERO) {
            return Ok(WaitedHealth::TimedOut(state));
        }
        std::thread::sleep(left.map_or(WAIT_PERIOD, |l| l.min(WAIT_PERIOD)));
    }
}

/// What `wait` prints and exits with for a workload status: its code, 128+N for signal N, 127
/// for a workload that never started; when nothing says, `-1` is printed (as `podman wait`
/// does) and the exit code is 255.
pub fn wait_code(status: Option<refine_protocol::WorkloadStatus>) -> (i32, String) {
    use refine_protocol::WorkloadStatus as W;
    match status {
        Some(W::Exited(c)) => (c, c.to_string()),
        Some(W::Signaled(s)) => (128 + s, (128 + s).to_string()),
        Some(W::NeverStarted) => (127, "127".into()),
        Some(W::Unknown) | None => (255, "-1".into()),
    }
}
