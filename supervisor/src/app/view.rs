//! The human views (SPEC O6, O7, O10): `show` as `systemctl status` reads, the `ps` table that
//! fits the terminal, one-line verdicts for `stop`, tables for `recover` and `gc`. Every view is
//! drawn from the typed document `--json` prints ([`super::docs`]): a key added there is shown
//! here by adding one line, and the JSON contract never depends on the human layout.
//!
//! Untrusted text (labels, argv, paths, output excerpts, error messages that quote them) goes
//! through the one [`escape`] before it reaches a terminal (X6): tables escape every cell,
//! [`shell_join`] quotes a control character as the shell would type it (`$'\x1b'`).
//!
//! Conventions: times are local (`jiff`, the system time zone, looked up only when a time is
//! printed) with their age; sizes and durations through the one [`refine_supervisor::human`] formatter.
//!
//! Tables are the small aligned-column writer below rather than a table crate: the only elastic
//! column is the last one (a command line), which is cut to the terminal width with `…`. Table
//! crates that fit a width wrap cells onto several lines, which breaks `grep`/`awk` over `ps`.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

use refine_protocol::api::ScopeView;

use super::docs::{
    Found, GcDoc, Outcome, ProcessDoc, ReceiptDoc, ReceiptVerdictDoc, RecoverDoc, ResultDoc,
    RetentionAction, ShowDoc, State, StatusFields, StatusName, StopDetail, StopDoc, StrayAction,
    StrayReasonDoc, Vocabulary,
};
use refine_supervisor::host::human_bytes;

// ---------------------------------------------------------------------------------------------
// Conventions.

/// Parses a duration: a number with an optional fraction and unit (`0.5`, `1.5s`, `500ms`,
/// `1.5h`, `7d`; a bare number is seconds, as `sleep 5` and `timeout 0.5` read it), or anything
/// else a compound one `jiff` reads (`1h30m`). At most [`MAX_DURATION`] (SPEC W11): a value the clock
/// cannot hold is refused here, before it meets a clock.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!(
            "{text:?} is negative: a duration is 0 or more (examples: 0, 1.5s, 500ms, 1h30m)"
        ));
    }
    let d = match decimal_duration(t) {
        Some(d) => d,
        None => compound_duration(t).ok_or_else(|| {
            format!("{text:?} is not a duration (examples: 1h30m, 1.5s, 0.5, 500ms, 7d)")
        })?,
    };
    if d > MAX_DURATION {
        return Err(format!(
            "{text:?} is longer than the clock holds (at most 3650d, ten years)"
        ));
    }
    Ok(d)
}

/// A compound duration as `jiff`'s friendly format reads it (`1h30m`, `1h 30m`, `2 days 4
/// hours`), days as 24 hours; never negative.
fn compound_duration(t: &str) -> Option<Duration> {
    let span: jiff::Span = t.parse().ok()?;
    // Months and years have no fixed length: refused here (an error, not a guess).
    let sd = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .ok()?;
    Duration::try_from(sd).ok()
}

/// The longest duration any flag takes.
pub use refine_protocol::api::MAX_DURATION;

/// `DIGITS[.DIGITS][UNIT]`, exactly (no rounding beyond the nanosecond); `None` for any other
/// shape, and `Some(Duration::MAX)` for a number too large to hold.
fn decimal_duration(t: &str) -> Option<Duration> {
    let (number, unit) = t.split_at(
        t.find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(t.len()),
    );
    const S: u128 = 1_000_000_000;
    let per_unit: u128 = match unit {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => S,
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" | "msec" | "msecs" => 1_000_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60 * S,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3_600 * S,
        "d" | "day" | "days" => 86_400 * S,
        "w" | "week" | "weeks" => 604_800 * S,
        // A year as systemd reads one: 365.25 days.
        "y" | "year" | "years" => 31_557_600 * S,
        _ => return None,
    };
    let (int, frac) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits(int) || !digits(frac) || (number.contains('.') && frac.is_empty())
    {
        return None;
    }
    let too_big = Some(Duration::MAX);
    let Ok(int) = int.parse::<u128>() else {
        return too_big;
    };
    // Fraction digits past the nanosecond of the largest unit change nothing.
    let frac = &frac[..frac.len().min(24)];
    let scale = 10u128.pow(frac.len() as u32);
    let frac_ns = match frac.parse::<u128>() {
        Ok(f) => f * per_unit / scale,
        Err(_) => 0,
    };
    let Some(ns) = int
        .checked_mul(per_unit)
        .and_then(|n| n.checked_add(frac_ns))
    else {
        return too_big;
    };
    let Ok(secs) = u64::try_from(ns / S) else {
        return too_big;
    };
    Some(Duration::new(secs, (ns % S) as u32))
}

/// A point in time given as `DUR` (that long ago), an RFC 3339 timestamp, or a local
/// `YYYY-MM-DD[ HH:MM[:SS]]`; as Unix milliseconds.
pub fn parse_since(text: &str) -> Result<u64, String> {
    let now = refine_supervisor::host::unix_ms();
    if let Ok(d) = parse_duration(text) {
        return Ok(now.saturating_sub(refine_protocol::time::saturating_ms(d)));
    }
    let ts = text
        .parse::<jiff::Timestamp>()
        .or_else(|_| {
            let dt = text
                .parse::<jiff::civil::DateTime>()
                .or_else(|_| text.parse::<jiff::civil::Date>().map(|d| d.to_datetime(jiff::civil::Time::midnight())))?;
            dt.to_zoned_datetime(jiff::tz::TimeZone::system()).map(|z| z.timestamp())
        })
        .map_err(|e| {
            format!("{text:?} is neither a duration nor a time (e.g. 10m, 2026-01-31 12:00, 2026-01-31T12:00:00Z): {e}")
        })?;
    Ok(ts.as_millisecond().max(0) as u64)
}

/// `2026-01-31T12:00:00.123Z`: a time as `logs -t` prints it (UTC, milliseconds).
pub fn utc_ms(at: std::time::SystemTime) -> String {
    let ms = at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(ts) => format!("{ts:.3}"),
        Err(_) => "????-??-??T??:??:??.???Z".into(),
    }
}

fn zoned(unix_ms: u64) -> Option<jiff::ZonedDateTime> {
    let ts = jiff::Timestamp::from_millisecond(i64::try_from(unix_ms).ok()?).ok()?;
    Some(ts.to_zoned_datetime(jiff::tz::TimeZone::system()))
}

/// `2026-12-01 12:00:01 CET` in the system time zone.
pub fn local_time(unix_ms: u64) -> String {
    zoned(unix_ms)
        .map(|z| z.strftime("%Y-%m-%d %H:%M:%S %Z").to_string())
        .unwrap_or_else(|| "-".into())
}

/// `12:00:01` today, else the date too.
fn short_time(unix_ms: u64) -> String {
    let today = zoned(refine_supervisor::host::unix_ms()).map(|z| z.date());
    match zoned(unix_ms) {
        Some(z) if Some(z.date()) == today => z.strftime("%H:%M:%S").to_string(),
        Some(z) => z.strftime("%Y-%m-%d %H:%M:%S").to_string(),
        None => "-".into(),
    }
}

/// An age at a glance: `45s`, `12m`, `3h 5m`, `2d 4h` ([`refine_supervisor::human::age`]).
pub fn age(d: Duration) -> String {
    refine_supervisor::human::age(d)
}

fn age_since(unix_ms: u64) -> String {
    age(Duration::from_millis(
        refine_supervisor::host::unix_ms().saturating_sub(unix_ms),
    ))
}

/// Whether a terminal could act on `c`: a control character (C0, DEL, C1) or one that
/// reorders the text around it (bidirectional overrides and isolates, "Trojan source").
fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Writes `c` as an escape: `\n`, `\t`, `\r`, `\xHH` below U+0080, `\uHHHH` above (the forms
/// bash's `$'...'` reads).
fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
    }
}

/// Untrusted text made safe for a terminal (X6): every character a terminal could act on
/// ([`acts_on_terminal`]) is written as its escape, the rest as it is. The one escape of the
/// human views and errors.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(acts_on_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if acts_on_terminal(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// An argv as a shell would need it typed: plain words as they are, others in single quotes,
/// and a word with a control character in `$'...'` with that character escaped ([`escape`]'s
/// forms), so nothing a terminal acts on is printed raw (X6).
pub fn shell_join(argv: &[String]) -> String {
    let quote = |a: &String| {
        let plain = !a.is_empty()
            && a.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
        if plain {
            a.clone()
        } else if a.chars().any(acts_on_terminal) {
            let mut q = String::from("$'");
            for c in a.chars() {
                match c {
                    '\\' => q.push_str("\\\\"),
                    '\'' => q.push_str("\\'"),
                    c if acts_on_terminal(c) => push_escaped(&mut q, c),
                    c => q.push(c),
                }
            }
            q.push('\'');
            q
        } else {
            format!("'{}'", a.replace('\'', r"'\''"))
        }
    };
    argv.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// The workload's status in words: `exit 0`, `signal 9 (KILL)`, `never started`, `unknown`.
fn status_words(s: &StatusFields) -> Option<String> {
    Some(match s.status? {
        StatusName::Exited => format!("exit {}", s.exit_code.unwrap_or_default()),
        StatusName::Signaled => {
            let n = s.signal.unwrap_or_default();
            match refine_supervisor::host::signal_name(n) {
                Some(name) => format!("signal {n} ({name})"),
                None => format!("signal {n}"),
            }
        }
        StatusName::NeverStarted => "never started".into(),
        StatusName::Unknown => "unknown".into(),
    })
}

/// How many terminal columns `text` takes (a CJK character two, a combining mark none).
pub fn display_width(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// `text` cut to at most `width` terminal columns, [`ellipsis`] marking the cut.
pub fn cut_to_width(text: &str, width: usize) -> Cow<'_, str> {
    cut_with(text, width, ellipsis())
}

/// The mark of a cut: `…` where the locale's character set is UTF-8, else `...` (as systemd
/// does: a C or POSIX locale gets ASCII).
fn ellipsis() -> &'static str {
    static MARK: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    MARK.get_or_init(|| {
        if locale_is_utf8(|k| std::env::var_os(k)) {
            "…"
        } else {
            "..."
        }
    })
}

/// Whether the locale the environment names (`LC_ALL`, else `LC_CTYPE`, else `LANG`: the first
/// that is set and not empty) has UTF-8 as its character set.
fn locale_is_utf8(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> bool {
    let name = ["LC_ALL", "LC_CTYPE", "LANG"]
        .into_iter()
        .filter_map(var)
        .find(|v| !v.is_empty())
        .map(|v| v.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    name.contains("utf-8") || name.contains("utf8")
}

fn cut_with<'a>(text: &'a str, width: usize, mark: &str) -> Cow<'a, str> {
    if display_width(text) <= width {
        return Cow::Borrowed(text);
    }
    let room = width.saturating_sub(display_width(mark));
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > room {
            break;
        }
        used += w;
        out.push(c);
    }
    if width >= display_width(mark) {
        out.push_str(mark);
    }
    Cow::Owned(out)
}

/// Rows as columns aligned on the widest cell (in terminal columns), every cell [`escape`]d.
/// With `width`, the last column is cut so that every line fits (`…` marks the cut).
pub fn table_lines(rows: &[Vec<String>], width: Option<usize>) -> Vec<String> {
    let escaped: Vec<Vec<Cow<'_, str>>> = rows
        .iter()
        .map(|r| r.iter().map(|c| escape(c)).collect())
        .collect();
    let rows = &escaped;
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widest = vec![0usize; cols];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widest[i] = widest[i].max(display_width(c));
        }
    }
    rows.iter()
        .map(|r| {
            let mut line = String::new();
            for (i, c) in r.iter().enumerate() {
                line.push_str(c);
                if i + 1 < r.len() {
                    line.extend(std::iter::repeat_n(' ', widest[i] - display_width(c) + 2));
                }
            }
            let line = line.trim_end();
            match width {
                Some(w) if w > 1 => cut_to_width(line, w).into_owned(),
                _ => line.to_owned(),
            }
        })
        .collect()
}

/// The terminal's width when stdout is one, else `$COLUMNS`, else unlimited.
pub fn terminal_width() -> Option<usize> {
    let stdout = io::stdout();
    if let Ok(ws) = rustix::termios::tcgetwinsize(&stdout) {
        if ws.ws_col > 0 {
            return Some(usize::from(ws.ws_col));
        }
    }
    std::env::var("COLUMNS")
        .ok()?
        .parse()
        .ok()
        .filter(|&w| w > 0)
}

fn write_lines(o: &mut impl Write, lines: &[String]) -> io::Result<()> {
    for l in lines {
        writeln!(o, "{l}")?;
    }
    Ok(())
}

mod outcomes;
mod ps;
mod show;
pub use outcomes::*;
pub use ps::*;
pub use show::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_fits_80_columns_by_cutting_only_the_label_and_escapes_it() {
        use refine_protocol::docs::{TopScopeDoc, TopSource};
        let row = |label: &str| TopScopeDoc {
            id: "e6175589c3b10a2c459d3aa8245cb6e0".into(),
            label: label.into(),
            kind: refine_protocol::Kind::Command,
            source: TopSource::Cgroup,
            cpu_percent: 197.5,
            cpu_window_us: 1_975_000,
            window_us: 1_000_000,
            memory_bytes: 1023 * 1024 * 1024,
            memory_source: TopSource::Proc,
            pids: 1234,
            pids_source: TopSource::Proc,
            block_read_bytes: 1000 * 1024 * 1024,
            block_write_bytes: 999 * 1024 * 1024,
            io_source: TopSource::Proc,
        };
        let rows = [
            row("a-very-long-label-for-the-nightly-build\x1b[2J"),
            row(""),
        ];
        let lines = top_lines(&rows, Some(80));
        assert_eq!(lines.len(), 3, "{lines:#?}");
        for l in &lines {
            assert!(display_width(l) <= 80, "{l}");
            assert!(l.ends_with("SOURCE") || l.ends_with("cgroup"), "{l}");
            assert!(!l.contains('\x1b'), "{l}");
        }
        assert!(lines[1].starts_with("e6175589c3b1  a-very"), "{}", lines[1]);
        assert!(
            lines[1].contains("197.50%") && lines[1].contains("1023.0 MiB"),
            "{}",
            lines[1]
        );
        assert!(lines[2].contains(NO_LABEL), "{}", lines[2]);
        // Unlimited (off a terminal): the label whole, its escape shown as text.
        assert!(top_lines(&rows, None)[1].contains("build\\x1b[2J"));
    }

    #[test]
    fn durations() {
        let d = |s| parse_duration(s);
        assert_eq!(d("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(d("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(d("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(d("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(d("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(d("0s"), Ok(Duration::ZERO));
        assert_eq!(d("5"), Ok(Duration::from_secs(5)));
        assert_eq!(d("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(d("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(d("0.25h"), Ok(Duration::from_secs(900)));
        assert_eq!(d("2.5d"), Ok(Duration::from_secs(216_000)));
        assert_eq!(d("1.000000001"), Ok(Duration::new(1, 1)));
        assert_eq!(d("3650d"), Ok(MAX_DURATION));
        assert_eq!(d("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(
            d("2 days 4 hours"),
            Ok(Duration::from_secs(2 * 86_400 + 4 * 3600))
        );
        assert_eq!(d("1m30s"), Ok(Duration::from_secs(90)));
        for bad in [
            "",
            "s",
            "5x",
            "-1s",
            "99999999999999999999d",
            "1.5.5s",
            ".5",
            "5.",
            "3651d",
            "18446744073709551615",
            "300000y",
            "1e3",
        ] {
            assert!(d(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ages_read_at_a_glance() {
        assert_eq!(age(Duration::from_secs(45)), "45s");
        assert_eq!(age(Duration::from_secs(754)), "12m");
        assert_eq!(age(Duration::from_secs(3 * 3600 + 5 * 60 + 7)), "3h 5m");
    }

    #[test]
    fn shell_quoting() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            shell_join(&v(&["sh", "-c", "echo it's"])),
            r"sh -c 'echo it'\''s'"
        );
        assert_eq!(shell_join(&v(&["sleep", "30"])), "sleep 30");
        assert_eq!(
            shell_join(&v(&["printf", "\u{1b}]0;t\u{7}'\\\n\u{9b}"])),
            r"printf $'\x1b]0;t\x07\'\\\n\u009b'"
        );
    }

    #[test]
    fn escapes_what_a_terminal_acts_on() {
        assert!(matches!(escape("plain é"), Cow::Borrowed("plain é")));
        assert_eq!(
            escape("a\u{1b}[2J\u{7}\u{7f}\u{9b}\u{202e}\tb\n"),
            r"a\x1b[2J\x07\x7f\u009b\u202e\tb\n"
        );
    }

    #[test]
    fn tails_count_lines_from_the_end() {
        let mut f = tempfile::tempfile().unwrap();
        let text = "one\ntwo\nthree\n";
        f.write_all(text.as_bytes()).unwrap();
        let len = text.len() as u64;
        let at = |f: &mut std::fs::File, floor, n| tail_offset(f, floor, len, n).unwrap() as usize;
        assert_eq!(&text[at(&mut f, 0, 1)..], "three\n");
        assert_eq!(&text[at(&mut f, 0, 2)..], "two\nthree\n");
        assert_eq!(at(&mut f, 0, 9), 0);
        assert_eq!(at(&mut f, 0, 0), text.len());
        assert_eq!(at(&mut f, 6, 9), 6, "never before the floor");
    }

    #[test]
    fn tables_fit_the_width() {
        let rows = vec![
            vec!["A".to_owned(), "COMMAND".to_owned()],
            vec!["x".to_owned(), "a very long command line indeed".to_owned()],
        ];
        for l in table_lines(&rows, Some(12)) {
            assert!(display_width(&l) <= 12, "{l}");
        }
        assert_eq!(cut_with("ビルド", 5, "…"), "ビル…");
        assert_eq!(display_width("ビルド"), 6);
    }

    /// Issue 44: a C or POSIX locale gets an ASCII cut mark, a UTF-8 one `…`; the first set of
    /// LC_ALL, LC_CTYPE, LANG decides.
    #[test]
    fn the_cut_mark_follows_the_locale() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        assert!(!locale_is_utf8(env(&[("LANG", "C")])));
        assert!(!locale_is_utf8(env(&[])));
        assert!(locale_is_utf8(env(&[("LANG", "C.UTF-8")])));
        assert!(locale_is_utf8(env(&[
            ("LC_ALL", ""),
            ("LANG", "en_US.utf8")
        ])));
        assert!(!locale_is_utf8(env(&[
            ("LC_ALL", "C"),
            ("LANG", "C.UTF-8")
        ])));
        assert!(!locale_is_utf8(env(&[
            ("LC_CTYPE", "POSIX"),
            ("LANG", "C.UTF-8")
        ])));
        assert_eq!(cut_with("abcdefgh", 6, "..."), "abc...");
        assert_eq!(display_width(&cut_with("abcdefgh", 6, "...")), 6);
        assert_eq!(cut_with("abcdefgh", 6, "…"), "abcde…");
    }

    /// Issue 44: at 80 columns a long label and a long command share what the fixed columns
    /// leave (before, the label took all but 8 columns of it).
    #[test]
    fn a_long_label_leaves_the_command_half_the_room() {
        let row: ScopeView = serde_json::from_value(serde_json::json!({
            "id": "ab".repeat(16), "kind": "command", "label": "l".repeat(40), "state": "live",
            "reason": null, "status": null, "exit_code": null, "signal": null,
            "workload_running": true, "started_at_unix_ms": 1, "age_secs": 0, "pid": 2,
            "guardian_pid": 1, "cwd": "/", "argv": ["c".repeat(60)], "stdout": "/o",
            "stderr": "/e",
        }))
        .expect("a ps row");
        let mut out = Vec::new();
        ps_table(&mut out, &[row], Some(80), false).unwrap();
        let text = String::from_utf8(out).unwrap();
        let line = text.lines().nth(1).expect("a row");
        assert!(display_width(line) <= 80, "{line}");
        let label = line.chars().filter(|c| *c == 'l').count();
        let command = line.chars().filter(|c| *c == 'c').count();
        assert!(command + 4 >= label && command >= MIN_COMMAND, "{text}");
    }

    /// W16: a live scope is `running` only while its main process runs; ended with nobody to
    /// report its status (the launcher is gone), it is `residue`, `ended`.
    #[test]
    fn a_live_scope_whose_main_process_ended_is_residue() {
        let row = |state: &str, running: bool, exit_code: Option<i32>| -> ScopeView {
            serde_json::from_value(serde_json::json!({
                "id": "ab".repeat(16), "kind": "command", "label": "", "state": state,
                "reason": null, "status": exit_code.map(|_| "exited"), "exit_code": exit_code,
                "signal": null, "workload_running": running, "started_at_unix_ms": 1,
                "age_secs": 0, "pid": 2, "guardian_pid": 1, "cwd": "/", "argv": ["true"],
                "stdout": "/o", "stderr": "/e",
            }))
            .expect("a ps row")
        };
        let shown = |r: &ScopeView| (ps_state(r), ps_status(r));
        let s = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        assert_eq!(shown(&row("live", true, None)), s("live", "running"));
        assert_eq!(shown(&row("live", false, None)), s("residue", "ended"));
        assert_eq!(shown(&row("live", false, Some(0))), s("residue", "exit 0"));
        assert_eq!(shown(&row("exited", false, Some(3))), s("exited", "exit 3"));
        assert_eq!(shown(&row("unverified", false, None)), s("unverified", "-"));
        // An older service's row does not say: shown as it was before the key existed.
        let mut old = serde_json::to_value(row("live", false, None)).unwrap();
        old.as_object_mut().unwrap().remove("workload_running");
        let old: ScopeView = serde_json::from_value(old).unwrap();
        assert_eq!(old.workload_running, None);
        assert_eq!(shown(&old), s("live", "running"));
    }
}
