//! Deadlines of a managed launch (SPEC S6): completion, measured from the registration's original
//! start, and idle, measured from the last activity (output, input, resize, signal) and falling
//! back to the start when there was none.
//!
//! Both are stored in the registration ([`Limits`]) with the original start
//! ([`Registration::started_at_unix_ms`]), so a later process ([`Deadlines::resume`]) enforces
//! them with their original values. The engine keeps them on the monotonic clock; the wall clock
//! is only used to translate the recorded start into it.
//!
//! Activity has one definition for the engine and for a later process (the service enforcing a
//! registration it did not launch): output, input, resize and signal. The engine sees it live;
//! on disk it is the latest modification time of the launch's artifacts ([`recorded_activity`]):
//! output and input are appended to them, and the engine stamps resizes and forwarded signals on
//! the stdout artifact ([`stamp_activity`]).
//!
//! # Caveats
//! A wall-clock step between the original start and a resume shifts the resumed deadlines by the
//! step (the record cannot hold a monotonic time across processes meaningfully). Activity is not
//! recorded durably, so a resumed idle deadline counts from the later of the start and the resume.

use std::time::{Duration, Instant, UNIX_EPOCH};

use refine_protocol::record::{Limits, Registration};

/// Which deadline passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    Completion,
    Idle,
}

/// The deadlines of one launch on the monotonic clock.
#[derive(Debug, Clone)]
pub struct Deadlines {
    start: Instant,
    completion: Option<Duration>,
    idle: Option<Duration>,
    last_activity: Instant,
}

impl Deadlines {
    /// Deadlines for a launch that started at `start`.
    pub fn new(limits: &Limits, start: Instant) -> Self {
        Deadlines {
            start,
            completion: limits.completion_timeout_ms.map(Duration::from_millis),
            idle: limits.idle_timeout_ms.map(Duration::from_millis),
            last_activity: start,
        }
    }

    /// The deadlines of a registered launch, with its original start, from this process's clock.
    pub fn resume(reg: &Registration) -> Self {
        let start = instant_of_unix_ms(reg.started_at_unix_ms);
        let mut d = Deadlines::new(&reg.limits, start);
        // No durable activity record: idle counts from now at the earliest.
        d.last_activity = Instant::now().max(start);
        d
    }

    /// The start on the monotonic clock.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Records activity at `at` (later than the last one, or ignored).
    pub fn activity(&mut self, at: Instant) {
        if at > self.last_activity {
            self.last_activity = at;
        }
    }

    pub(crate) fn completion_at(&self) -> Option<Instant> {
        self.completion.map(|c| self.start + c)
    }

    pub(crate) fn idle_at(&self) -> Option<Instant> {
        self.idle.map(|i| self.last_activity + i)
    }

    /// The earliest deadline still ahead (or just passed).
    pub fn next(&self) -> Option<Instant> {
        match (self.completion_at(), self.idle_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The deadline that has passed at `now`, completion first.
    pub(crate) fn expired(&self, now: Instant) -> Option<Expired> {
        if self.completion_at().is_some_and(|c| now >= c) {
            return Some(Expired::Completion);
        }
        if self.idle_at().is_some_and(|i| now >= i) {
            return Some(Expired::Idle);
        }
        None
    }
}

/// The latest recorded activity of `reg` (see the module docs), in Unix milliseconds.
pub fn recorded_activity(reg: &Registration) -> Option<u64> {
    [
        Some(&reg.stdout_path),
        Some(&reg.stderr_path),
        reg.stdin_path.as_ref(),
        // Stamped while the stdout artifact does not exist yet (see `stamp_activity`).
        Some(&reg.proof_path),
    ]
    .into_iter()
    .flatten()
    .filter_map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
    .filter_map(|t| t.duration_since(UNIX_EPOCH).ok())
    .map(refine_protocol::time::saturating_ms)
    .max()
}

/// Records activity that writes no artifact (a resize, a forwarded signal) for
/// [`recorded_activity`]: the stdout artifact's modification time becomes now, or, while a silent
/// stdout has no artifact (F3: created by its first byte), the proof file's (its device, inode
/// and content, which the assessment checks, do not change). Best effort.
pub fn stamp_activity(reg: &Registration) {
    use rustix::fs::{Timespec, Timestamps, UTIME_NOW, UTIME_OMIT};
    let times = Timestamps {
        last_access: Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_OMIT,
        },
        last_modification: Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_NOW,
        },
    };
    for path in [reg.stdout_path.as_str(), reg.proof_path.as_str()] {
        match rustix::fs::utimensat(rustix::fs::CWD, path, &times, rustix::fs::AtFlags::empty()) {
            Err(rustix::io::Errno::NOENT) => continue,
            _ => return,
        }
    }
}

/// Which deadline of `reg` has passed at `now`, if any, from the record alone: completion from
/// the original start, idle from the [`recorded_activity`] (falling back to the start).
pub fn expired_on_record(reg: &Registration, now: Instant) -> Option<Expired> {
    let mut deadlines = Deadlines::new(&reg.limits, instant_of_unix_ms(reg.started_at_unix_ms));
    if let Some(at) = recorded_activity(reg) {
        deadlines.activity(instant_of_unix_ms(at));
    }
    deadlines.expired(now)
}

/// The monotonic instant that corresponds to a wall-clock time (clamped to what `Instant` can
/// represent: a start further back than this process's clock reaches maps to its earliest point).
pub(crate) fn instant_of_unix_ms(unix_ms: u64) -> Instant {
    let now = Instant::now();
    let wall_now = crate::kernel::clock::unix_time();
    let then = Duration::from_millis(unix_ms);
    if then >= wall_now {
        now + (then - wall_now)
    } else {
        let ago = wall_now - then;
        now.checked_sub(ago).unwrap_or_else(|| earliest(now, ago))
    }
}

fn earliest(now: Instant, mut ago: Duration) -> Instant {
    // Halve until representable; only reached for starts older than the monotonic clock.
    while !ago.is_zero() {
        ago /= 2;
        if let Some(t) = now.checked_sub(ago) {
            return t;
        }
    }
    now
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn limits(completion: Option<u64>, idle: Option<u64>) -> Limits {
        Limits {
            completion_timeout_ms: completion,
            idle_timeout_ms: idle,
            ..Limits::default()
        }
    }

    #[test]
    fn completion_counts_from_start_and_idle_from_activity() {
        let t0 = Instant::now();
        let mut d = Deadlines::new(&limits(Some(1000), Some(300)), t0);
        assert_eq!(d.next(), Some(t0 + Duration::from_millis(300)));
        assert_eq!(d.expired(t0 + Duration::from_millis(299)), None);
        assert_eq!(
            d.expired(t0 + Duration::from_millis(300)),
            Some(Expired::Idle)
        );
        d.activity(t0 + Duration::from_millis(250));
        assert_eq!(d.expired(t0 + Duration::from_millis(500)), None);
        d.activity(t0 + Duration::from_millis(100)); // older: ignored
        assert_eq!(d.idle_at(), Some(t0 + Duration::from_millis(550)));
        d.activity(t0 + Duration::from_millis(900));
        assert_eq!(
            d.expired(t0 + Duration::from_millis(1000)),
            Some(Expired::Completion)
        );
    }

    #[test]
    fn no_limits_no_deadline() {
        let d = Deadlines::new(&Limits::default(), Instant::now());
        assert_eq!(d.next(), None);
        assert_eq!(d.expired(Instant::now() + Duration::from_secs(3600)), None);
    }

    #[test]
    fn wall_clock_start_maps_back() {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let t = instant_of_unix_ms(wall - 5_000);
        let ago = Instant::now().duration_since(t);
        assert!(ago >= Duration::from_millis(4_900) && ago < Duration::from_secs(60));
    }
}
