//! The one formatter of human durations and sizes, for every view, verdict and log line:
//! durations through `jiff`'s friendly format (`1h 30m`, `30d`, `200ms`), sizes through
//! `bytesize` in binary units (`1.5 KiB`). JSON never uses these: it carries integers in the
//! unit its key names (`*_ms`, `*_bytes`).
//!
//! # Caveats
//! Durations are rounded for reading: to the millisecond below ten seconds, to the second
//! below a day, to the minute above; a day is 24 hours (elapsed times, not calendar spans).

use std::time::Duration;

use jiff::fmt::friendly::{Designator, Spacing, SpanPrinter};
use jiff::{RoundMode, SignedDuration, Span, SpanRound, Unit};

/// The unit `d` is rounded to before it is shown.
fn smallest_unit(d: Duration) -> Unit {
    match d.as_secs() {
        0..10 => Unit::Millisecond,
        10..86_400 => Unit::Second,
        _ => Unit::Minute,
    }
}

/// `d` as `jiff` writes it friendly and compact: `200ms`, `1s 3ms`, `12m 39s`, `1h 30m`,
/// `30d`, `0s`.
pub fn duration(d: Duration) -> String {
    write(d, smallest_unit(d), RoundMode::HalfExpand, usize::MAX)
}

/// An age at a glance: the two largest units of [`duration`] (`45s`, `12m`, `3h 5m`,
/// `2d 4h`).
pub fn age(d: Duration) -> String {
    let unit = if d.as_secs() < 120 {
        Unit::Second
    } else if d.as_secs() < 172_800 {
        Unit::Minute
    } else {
        Unit::Hour
    };
    // An age is how long at least: truncated, as `ps` ages are.
    write(d, unit, RoundMode::Trunc, 2)
}

fn write(d: Duration, smallest: Unit, mode: RoundMode, units: usize) -> String {
    let printer = SpanPrinter::new()
        .designator(Designator::Compact)
        .spacing(Spacing::BetweenUnits);
    let rounded = SignedDuration::try_from(d)
        .ok()
        .and_then(|sd| Span::try_from(sd).ok())
        .and_then(|span| {
            span.round(
                SpanRound::new()
                    .largest(Unit::Day)
                    .smallest(smallest)
                    .mode(mode)
                    .days_are_24_hours(),
            )
            .ok()
        });
    let text = match rounded {
        Some(span) => printer.span_to_string(&span),
        None => printer.unsigned_duration_to_string(&d),
    };
    text.split(' ').take(units).collect::<Vec<_>>().join(" ")
}

/// `n` bytes in binary units: `512 B`, `1.5 KiB`, `3.0 GiB`.
pub fn bytes(n: u64) -> String {
    bytesize::ByteSize::b(n).display().iec().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        let ms = Duration::from_millis;
        assert_eq!(duration(Duration::from_nanos(200_079_692)), "200ms");
        assert_eq!(duration(ms(1003)), "1s 3ms");
        assert_eq!(duration(Duration::from_secs(759)), "12m 39s");
        assert_eq!(duration(Duration::from_secs(5400)), "1h 30m");
        assert_eq!(duration(Duration::from_secs(30 * 86_400)), "30d");
        assert_eq!(duration(Duration::ZERO), "0s");
        assert_eq!(age(Duration::from_secs(45)), "45s");
        assert_eq!(age(Duration::from_secs(754)), "12m");
        assert_eq!(age(Duration::from_secs(3 * 3600 + 5 * 60 + 7)), "3h 5m");
        assert_eq!(
            age(Duration::from_secs(2 * 86_400 + 4 * 3600 + 60)),
            "2d 4h"
        );
    }

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
    }
}
