//! The wall clock: the one reading of `CLOCK_REALTIME` for records (starts, results, stop
//! requests) and their comparisons.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The wall clock (`CLOCK_REALTIME`) since the Unix epoch; zero before it.
pub fn unix_time() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// [`unix_time`] in milliseconds.
pub fn unix_ms() -> u64 {
    refine_protocol::time::saturating_ms(unix_time())
}

/// [`unix_time`] in nanoseconds (the guardian's exit stamps are in ns).
pub fn unix_ns() -> u64 {
    refine_protocol::time::saturating_ns(unix_time())
}
