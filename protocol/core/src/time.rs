//! Durations as the records and frames carry them: whole milliseconds (micro-, nanoseconds) in a
//! `u64`. The one conversion, for every field: it saturates (a [`Duration`] longer than a `u64`
//! of milliseconds holds, some 584 million years, becomes `u64::MAX`), never truncates.

use core::time::Duration;

/// `v` as a `u64`, `u64::MAX` past what one holds.
const fn saturate(v: u128) -> u64 {
    if v > u64::MAX as u128 {
        u64::MAX
    } else {
        v as u64
    }
}

/// `d` in whole milliseconds, `u64::MAX` past what a `u64` holds.
pub const fn saturating_ms(d: Duration) -> u64 {
    saturate(d.as_millis())
}

/// `d` in whole microseconds, `u64::MAX` past what a `u64` holds.
pub const fn saturating_us(d: Duration) -> u64 {
    saturate(d.as_micros())
}

/// `d` in whole nanoseconds, `u64::MAX` past what a `u64` holds (some 584 years).
pub const fn saturating_ns(d: Duration) -> u64 {
    saturate(d.as_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_duration_saturates_instead_of_wrapping() {
        assert_eq!(saturating_ms(Duration::MAX), u64::MAX);
        assert_eq!(saturating_ns(Duration::MAX), u64::MAX);
        assert_eq!(saturating_us(Duration::MAX), u64::MAX);
        // `as u64` would keep the low bits: 2^64 ms wraps to 0.
        let wrap = Duration::from_millis(u64::MAX) + Duration::from_millis(1);
        assert_eq!(saturating_ms(wrap), u64::MAX);
        assert_eq!(wrap.as_millis() as u64, 0);
        let wrap_ns = Duration::from_nanos(u64::MAX) + Duration::from_nanos(1);
        assert_eq!(saturating_ns(wrap_ns), u64::MAX);
    }

    #[test]
    fn ordinary_durations_convert_exactly() {
        assert_eq!(saturating_ms(Duration::from_micros(1_999)), 1);
        assert_eq!(
            saturating_ms(Duration::from_secs(3650 * 86_400)),
            315_360_000_000
        );
        assert_eq!(saturating_ns(Duration::from_millis(3)), 3_000_000);
        assert_eq!(saturating_ms(Duration::ZERO), 0);
    }
}
