//! Throttles for loops that can fail at any rate (SPEC D1): an accept loop's growing pause and a
//! log line written at most once per window. Shared by the service's socket and its metrics
//! listener.
//!
//! # Caveats
//! The pause is a timer the caller awaits, never a sleep on a worker thread; the window is read
//! from the monotonic clock, so a wall-clock step neither floods nor silences the log.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The accept loop's pause after a failure (D1): 10 ms, doubling up to 1 s while the failures
/// last; reset by the next accepted connection.
#[derive(Default)]
pub(super) struct Backoff {
    pause: Option<Duration>,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MOST: Duration = Duration::from_secs(1);

    pub(super) fn next(&mut self) -> Duration {
        let pause = self.pause.map_or(Self::FIRST, |p| (p * 2).min(Self::MOST));
        self.pause = Some(pause);
        pause
    }

    pub(super) fn reset(&mut self) {
        self.pause = None;
    }
}

/// A log line that may repeat at any rate (an accept error, a bad connection): written at most
/// once per [`LogLimit::WINDOW`], with how many were suppressed since the last one (D1).
pub(super) struct LogLimit {
    state: Mutex<(Option<Instant>, u64)>,
}

impl LogLimit {
    const WINDOW: Duration = Duration::from_secs(10);

    pub(super) const fn new() -> LogLimit {
        LogLimit {
            state: Mutex::new((None, 0)),
        }
    }

    /// `Some(suppressed since the last line)` when this line may be written now.
    pub(super) fn allow(&self) -> Option<u64> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        match s.0 {
            Some(last) if now.duration_since(last) < Self::WINDOW => {
                s.1 += 1;
                None
            }
            _ => {
                let suppressed = std::mem::take(&mut s.1);
                s.0 = Some(now);
                Some(suppressed)
            }
        }
    }
}
