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
use refine_supervisor::capacity::human_bytes;

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
    let now = refine_supervisor::kernel::clock::unix_ms();
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
    let today = zoned(refine_supervisor::kernel::clock::unix_ms()).map(|z| z.date());
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
        refine_supervisor::kernel::clock::unix_ms().saturating_sub(unix_ms),
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
            match refine_supervisor::kernel::signal::name(n) {
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

// ---------------------------------------------------------------------------------------------
// ps.

/// The word for a registration without a label, everywhere a label is shown.
pub const NO_LABEL: &str = "(none)";

/// A label as the views show it.
pub fn label_or_none(label: &str) -> &str {
    if label.is_empty() {
        NO_LABEL
    } else {
        label
    }
}

/// The workload's status, short (podman style): `running`, `exit 0`, `signal 9`, `ended` (a live
/// scope whose main process is gone with nobody left to report how, W16), or, when the launch did
/// not simply complete, its outcome (`stopped`, `timed out`, `spawn failed`); `show` has both.
fn ps_status(r: &ScopeView) -> String {
    match r.outcome {
        None | Some(Outcome::Completed) => {}
        Some(o) => return o.words(),
    }
    match (r.status, r.exit_code, r.signal) {
        (_, Some(c), _) => format!("exit {c}"),
        (_, _, Some(s)) => format!("signal {s}"),
        (Some(s), _, _) => s.words(),
        (None, _, _) => match (r.state, r.ready) {
            (State::Live, _) if r.workload_running == Some(false) => "ended",
            // H6: a running workload with readiness says where it stands.
            (State::Live, Some(refine_protocol::docs::ReadyState::Starting)) => "starting",
            (State::Live, Some(refine_protocol::docs::ReadyState::Ready)) => "ready",
            (State::Live, Some(refine_protocol::docs::ReadyState::Failed)) => "not ready",
            (State::Live, None) => "running",
            _ => "-",
        }
        .to_owned(),
    }
}

/// Whether a live scope's workload has ended and only what it left behind holds the scope: its
/// status is known, or its witness names no running process (W16: the launcher that would have
/// reported the status may be gone).
pub(super) fn is_residue(r: &ScopeView) -> bool {
    r.state == State::Live
        && (r.status.is_some()
            || r.exit_code.is_some()
            || r.signal.is_some()
            || r.workload_running == Some(false))
}

/// The state: `residue` for a live scope whose workload has ended (a descendant still holds
/// it), with the stall watch's open incidents (`live (stalled)`).
fn ps_state(r: &ScopeView) -> String {
    let open: Vec<&str> = [
        ("stalled", r.stalled.is_some()),
        ("silent", r.silent.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, open)| open.then_some(name))
    .collect();
    let state = if is_residue(r) {
        "residue"
    } else {
        r.state.name()
    };
    if open.is_empty() {
        state.to_owned()
    } else {
        format!("{state} ({})", open.join(", "))
    }
}

/// The fewest columns the command keeps before the label is cut too.
const MIN_COMMAND: usize = 8;
/// A label this wide (an id's short form) is cut only to keep the command MIN_COMMAND columns.
const SHORT_LABEL: usize = 12;

/// The `ps` table: newest first (the rows' order), the command last and cut to `width`.
pub fn ps_table(
    o: &mut impl Write,
    rows: &[ScopeView],
    width: Option<usize>,
    full_ids: bool,
) -> io::Result<()> {
    let mut table = vec![[
        "ID", "KIND", "STATE", "STATUS", "PID", "AGE", "LABEL", "COMMAND",
    ]
    .map(String::from)
    .to_vec()];
    for r in rows {
        let id = if full_ids {
            r.id.clone()
        } else {
            r.id.chars().take(12).collect()
        };
        table.push(vec![
            id,
            r.kind.name().to_owned(),
            ps_state(r),
            ps_status(r),
            r.pid.to_string(),
            if r.started_at_unix_ms == 0 {
                "-".into()
            } else {
                age(Duration::from_secs(r.age_secs))
            },
            escape(label_or_none(&r.label)).into_owned(),
            shell_join(&r.argv),
        ]);
    }
    // Only the command is cut to fit; when even the fixed columns leave it fewer than
    // MIN_COMMAND columns, the labels are cut as well (a label is free text of any length).
    if let Some(w) = width {
        let widest = |i: usize| {
            table
                .iter()
                .map(|r| display_width(&escape(&r[i])) + 2)
                .max()
                .unwrap_or(0)
        };
        const LABEL: usize = 6;
        let fixed: usize = (0..LABEL).map(widest).sum();
        let left = w.saturating_sub(fixed);
        // When the label and the command do not both fit, a label keeps at most half of what
        // the fixed columns leave (the command is what a reader scans for), or SHORT_LABEL
        // columns while the command keeps MIN_COMMAND.
        if widest(LABEL) + widest(LABEL + 1) > left {
            let half = (left / 2).saturating_sub(2);
            let short = SHORT_LABEL.min(left.saturating_sub(MIN_COMMAND + 2));
            let room = half.max(short).max(NO_LABEL.len());
            for r in table.iter_mut().skip(1) {
                r[LABEL] = cut_to_width(&r[LABEL], room).into_owned();
            }
        }
    }
    write_lines(o, &table_lines(&table, width))
}

// ---------------------------------------------------------------------------------------------
// top.

/// The `top` table, as `podman stats` prints its own: the short id, the label, CPU share, memory,
/// tasks, block I/O read / written, and where the row was read. Only the label gives way to fit
/// `width` (down to the width of [`NO_LABEL`]; past that the line is cut).
pub fn top_lines(rows: &[refine_protocol::docs::TopScopeDoc], width: Option<usize>) -> Vec<String> {
    let mut table = vec![
        ["ID", "LABEL", "CPU %", "MEM", "PIDS", "BLOCK I/O", "SOURCE"]
            .map(String::from)
            .to_vec(),
    ];
    for r in rows {
        table.push(vec![
            r.id.chars().take(12).collect(),
            escape(label_or_none(&r.label)).into_owned(),
            format!("{:.2}%", r.cpu_percent),
            refine_supervisor::human::bytes(r.memory_bytes),
            r.pids.to_string(),
            format!(
                "{} / {}",
                refine_supervisor::human::bytes(r.block_read_bytes),
                refine_supervisor::human::bytes(r.block_write_bytes)
            ),
            r.source.name().to_owned(),
        ]);
    }
    const LABEL: usize = 1;
    if let Some(w) = width {
        let widest = |i: usize| {
            table
                .iter()
                .map(|r| display_width(&r[i]))
                .max()
                .unwrap_or(0)
        };
        // Every other column with its two spaces of gap (the last one has none).
        let cols = table[0].len();
        let fixed: usize = (0..cols)
            .filter(|&i| i != LABEL)
            .map(|i| widest(i) + if i + 1 < cols { 2 } else { 0 })
            .sum::<usize>()
            + 2;
        let room = w.saturating_sub(fixed).max(NO_LABEL.len());
        for r in table.iter_mut().skip(1) {
            r[LABEL] = cut_to_width(&r[LABEL], room).into_owned();
        }
    }
    table_lines(&table, width)
}

// ---------------------------------------------------------------------------------------------
// show.

/// `show ID` as `systemctl status` reads: headline, state, command, processes, receipt, output.
pub fn show(o: &mut impl Write, doc: &ShowDoc, tail: &[(String, Vec<String>)]) -> io::Result<()> {
    let rec = &doc.record;
    let dot = match doc.state {
        State::Live => "●",
        State::Exited => "○",
        State::Unverified | State::Corrupt => "×",
    };
    let label = label_or_none(&rec.label);
    writeln!(o, "{dot} {}  {}  ({})", doc.id, escape(label), rec.kind)?;

    let mut lines: Vec<(&str, String)> = Vec::new();
    // State, its reason and since when.
    let since = match (&doc.state, &doc.receipt) {
        (State::Exited, Some(r)) if r.workload_exited_at_ns > 0 || r.written_at_ns > 0 => {
            r.written_at_ns / 1_000_000
        }
        _ => rec.started_at_unix_ms,
    };
    // As `ps` names it: a live scope whose workload has ended is `residue`.
    let name = if doc.state == State::Live && !workload_listed(doc) {
        "residue (the workload ended; what it left still runs)"
    } else {
        doc.state.name()
    };
    let mut state = format!(
        "{} since {} ({} ago)",
        name,
        local_time(since),
        age_since(since)
    );
    if let Some(reason) = &doc.reason {
        let _ = write!(state, ": {reason}");
    }
    lines.push(("State", state));
    lines.push((
        "Started",
        format!(
            "{} ({} ago)",
            local_time(rec.started_at_unix_ms),
            age_since(rec.started_at_unix_ms)
        ),
    ));
    lines.push(("Command", shell_join(&rec.argv)));
    lines.push(("Cwd", rec.cwd.clone()));
    lines.push(("Main PID", main_pid(doc)));
    if let Some(ResultDoc::Written {
        outcome,
        residue_stop,
        reason,
        ..
    }) = &doc.result
    {
        // Who stopped it, when it was not the launch's own engine (recovery, an operator).
        let cause = residue_stop
            .as_ref()
            .and_then(|r| r.cause)
            .and_then(|c| refine_protocol::docs::variant_name(&c));
        let mut words = match cause {
            Some(c) => format!("{} (cause: {})", outcome.words(), c.replace('_', " ")),
            None => outcome.words(),
        };
        if let Some(refine_protocol::docs::ResultReason::Oom) = reason {
            words.push_str("; killed out of memory (oom) at its --memory-max");
        }
        lines.push(("Outcome", words));
    }
    // H6: where the workload's readiness stands.
    if let Some(r) = &doc.readiness {
        let how = match (r.mode, &r.cmd) {
            (refine_protocol::record::ReadyMode::Cmd, Some(c)) => format!("cmd={}", escape(c)),
            (refine_protocol::record::ReadyMode::Fd, _) => format!("fd={}", r.fd.unwrap_or(0)),
            _ => "notify".to_owned(),
        };
        let mut text = format!("{} ({how}", r.state.words());
        if r.probes > 0 {
            text.push_str(&format!(
                ", {} probe{}",
                r.probes,
                if r.probes == 1 { "" } else { "s" }
            ));
        }
        text.push(')');
        if let Some(since) = &r.since {
            text.push_str(&format!(" since {since}"));
        }
        if let Some(s) = &r.status {
            text.push_str(&format!(": {}", escape(s)));
        }
        if let Some(why) = &r.reason {
            text.push_str(&format!(": {}", escape(why)));
        }
        lines.push(("Ready", text));
    }
    lines.push(("Receipt", receipt_line(doc)));
    // F4: the kernel's accounting of the scope's own cgroup: live while it exists, then the
    // final figures the result kept.
    let kept = match &doc.result {
        Some(ResultDoc::Written { cgroup_usage, .. }) => *cgroup_usage,
        _ => None,
    };
    let accounting = |u: &refine_protocol::docs::CgroupUsageDoc| {
        format!(
            "CPU {:.2}s; memory peak {}; OOM kills {}",
            u.cpu_us as f64 / 1e6,
            u.memory_peak_bytes.map_or(
                "not available (no memory controller)".to_owned(),
                human_bytes
            ),
            u.oom_kills
                .map_or("not available".to_owned(), |n| n.to_string()),
        )
    };
    let cgroup = match &rec.cgroup {
        Some(cg) => match (&cg.usage, cg.refused_errno, kept) {
            (_, Some(errno), _) => format!(
                "{} (not used: clone3 refused, errno {errno}; the stop uses /proc): \
                 accounting not available",
                escape(&cg.path)
            ),
            (Some(u), None, _) => format!("{}: {}", escape(&cg.path), accounting(u)),
            (None, None, Some(u)) => format!(
                "{} (removed after the receipt): {}",
                escape(&cg.path),
                accounting(&u)
            ),
            (None, None, None) => format!(
                "{} (removed after the receipt): accounting not available",
                escape(&cg.path)
            ),
        },
        None => "none (the /proc path): accounting not available".to_owned(),
    };
    lines.push(("Cgroup", cgroup));
    // H8: the limits, where they were applied, and what their controllers counted.
    if !rec.limits.placements.is_empty() {
        let mut asked = Vec::new();
        if let Some(b) = rec.limits.memory_max_bytes {
            asked.push(format!("memory {}", human_bytes(b)));
        }
        if let Some(m) = rec.limits.cpu_millis {
            asked.push(format!("cpus {}", f64::from(m) / 1000.0));
        }
        if let Some(n) = rec.limits.pids_max {
            asked.push(format!("pids {n}"));
        }
        let hierarchy = if rec.limits.placements.iter().all(|p| p.unified) {
            "cgroup v2"
        } else if rec.limits.placements.iter().any(|p| p.unified) {
            "cgroup v2 and v1"
        } else {
            "cgroup v1"
        };
        let mut text = format!("{} ({hierarchy})", asked.join(", "));
        if let Some(ResultDoc::Written {
            limit_usage: Some(u),
            ..
        }) = &doc.result
        {
            let mut seen = Vec::new();
            if let Some(b) = u.memory_peak_bytes {
                seen.push(format!("memory peak {}", human_bytes(b)));
            }
            if let Some(n) = u.oom_kills {
                seen.push(format!("{n} OOM kill{}", if n == 1 { "" } else { "s" }));
            }
            if let Some(n) = u.pids_peak {
                seen.push(format!("pids peak {n}"));
            }
            if let Some(n) = u.pids_refused {
                seen.push(format!("{n} fork{} refused", if n == 1 { "" } else { "s" }));
            }
            if let Some(us) = u.throttled_us {
                seen.push(format!("throttled {:.2}s", us as f64 / 1e6));
            }
            if !seen.is_empty() {
                text.push_str(&format!(": {}", seen.join(", ")));
            }
        }
        lines.push(("Limits", text));
    }
    // X7: whether the workload could join PID and user namespaces made outside its scope.
    let setns = match rec.allow_setns {
        Some(false) => "refused into PID and user namespaces (seccomp)",
        Some(true) => "allowed (--allow-setns): outside namespaces could be joined",
        None => "not recorded (an older launch: no filter)",
    };
    lines.push(("Setns", setns.to_owned()));
    // X11: what the Landlock domain held.
    lines.push(("Protected", protection_words(rec.protection.as_ref())));
    // V1: the builds that registered and hold the scope.
    let built = |who: &str, p: &Option<refine_protocol::BuildProvenance>| match p {
        Some(p) => format!("{who} {}", build_words(p, 12)),
        None => format!("{who} not recorded"),
    };
    lines.push((
        "Built",
        format!(
            "{}; {}",
            built("supervisor", &rec.provenance.supervisor),
            built("guardian", &rec.provenance.guardian)
        ),
    ));
    if let Some(u) = doc.receipt.as_ref().and_then(|r| r.usage) {
        // H4: what the whole tree cost, from the receipt.
        lines.push((
            "Cost",
            format!(
                "CPU {:.2}s user, {:.2}s system; largest peak RSS {}",
                u.user_us as f64 / 1e6,
                u.system_us as f64 / 1e6,
                human_bytes(u.max_rss_kib.saturating_mul(1024))
            ),
        ));
    }
    for (heading, a) in [
        ("Stdout", &doc.artifacts.stdout),
        ("Stderr", &doc.artifacts.stderr),
    ] {
        // An artifact is created by the stream's first byte (F3): none means no output.
        let size = if a.exists {
            human_bytes(a.bytes)
        } else {
            "no output".into()
        };
        let line = match &a.incomplete {
            Some(why) => format!("{} ({size}; {why})", a.path.display()),
            None => format!("{} ({size})", a.path.display()),
        };
        lines.push((heading, line));
    }
    if !rec.purpose.is_empty() {
        let meta: Vec<String> = rec
            .purpose
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        lines.push(("Purpose", meta.join(" ")));
    }
    for (k, v) in &lines {
        writeln!(o, "{k:>10}: {}", escape(v))?;
    }
    if !doc.processes.is_empty() {
        writeln!(o, "{:>10}:", "Processes")?;
        let mut rows = vec![["PID", "PPID", "STATE", "CPU", "RSS", "PROGRAM", "ARGS"]
            .map(String::from)
            .to_vec()];
        for p in &doc.processes {
            rows.push(process_row(p));
        }
        let width = terminal_width().map(|w| w.saturating_sub(12));
        for l in table_lines(&rows, width) {
            writeln!(o, "            {l}")?;
        }
    }
    for (stream, tail) in tail {
        if tail.is_empty() {
            continue;
        }
        writeln!(o)?;
        let n = tail.len();
        writeln!(
            o,
            "Last {n} line{} of {stream}:",
            if n == 1 { "" } else { "s" }
        )?;
        for l in tail {
            writeln!(o, "  {}", escape(l))?;
        }
    }
    Ok(())
}

/// A build in words (V1): `0.1.0 source 0123456789ab dirty`, the commit cut to `commit_len`
/// digits; what is not known says `unknown`. Escape before printing (the text is a file's).
pub fn build_words(p: &refine_protocol::BuildProvenance, commit_len: usize) -> String {
    let commit = p
        .commit
        .as_deref()
        .map_or("commit unknown".to_owned(), |c| {
            c.chars().take(commit_len).collect()
        });
    let tree = match p.dirty {
        Some(true) => "dirty",
        Some(false) => "clean",
        None => "tree unknown",
    };
    format!("{} {} {commit} {tree}", p.version, p.class.as_str())
}

/// `version`: one line per binary.
pub fn version(o: &mut impl Write, doc: &refine_protocol::docs::VersionDoc) -> io::Result<()> {
    writeln!(
        o,
        "refine-supervisor {}",
        escape(&build_words(&doc.supervisor, 64))
    )?;
    let g = &doc.guardian;
    match (&g.provenance, &g.problem) {
        (Some(p), _) => writeln!(
            o,
            "refine-guardian {} ({})",
            escape(&build_words(p, 64)),
            escape(&g.path)
        ),
        (None, problem) => writeln!(
            o,
            "refine-guardian unknown: {}",
            escape(problem.as_deref().unwrap_or("no provenance"))
        ),
    }
}

fn process_row(p: &ProcessDoc) -> Vec<String> {
    let mut program = p.program.clone();
    if p.found == Found::OwnerMarker {
        program.push_str(" (marker)");
    }
    vec![
        p.pid.to_string(),
        p.ppid.to_string(),
        p.state.clone(),
        format!("{:.2}s", p.cpu_ms as f64 / 1000.0),
        human_bytes(p.rss_bytes),
        program,
        shell_join(&p.args),
    ]
}

/// `1234 (sh): running`, or the workload's status once it ended; the guardian's pid beside it.
/// Whether the workload is among the scope's processes now.
fn workload_listed(doc: &ShowDoc) -> bool {
    let w = &doc.record.workload;
    doc.processes
        .iter()
        .any(|p| p.pid == w.pid && p.start_time == w.start_time)
}

fn main_pid(doc: &ShowDoc) -> String {
    let w = &doc.record.workload;
    let program = doc
        .record
        .argv
        .first()
        .map(|a| {
            Path::new(a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| a.clone())
        })
        .unwrap_or_default();
    let status = if workload_listed(doc) {
        "running".to_owned()
    } else {
        let from_receipt = doc.receipt.as_ref().map(|r| r.status);
        let from_result = match &doc.result {
            Some(ResultDoc::Written { status, .. }) => Some(*status),
            _ => None,
        };
        from_receipt
            .or(from_result)
            .and_then(|s| status_words(&s))
            .map(|s| format!("ended, {s}"))
            .unwrap_or_else(|| "ended, status not known yet".into())
    };
    format!(
        "{} ({program}): {status}; guardian {}",
        w.pid, doc.record.guardian.pid
    )
}

/// `verified, 3 processes reaped, written 12:00:01`, or why there is none.
fn receipt_line(doc: &ShowDoc) -> String {
    match (&doc.state, &doc.receipt) {
        (State::Exited, Some(r)) => verified_receipt(r),
        (State::Exited, None) => "none needed: its boot has ended".into(),
        (State::Live, _) => "not yet: the guardian is alive and still reaping".into(),
        (_, _) => format!(
            "none verifies{}",
            doc.reason
                .as_ref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ),
    }
}

fn verified_receipt(r: &ReceiptDoc) -> String {
    let status = status_words(&r.status).unwrap_or_else(|| "status unknown".into());
    format!(
        "verified, {} process{} reaped, workload {status}, written {}",
        r.reaped,
        if r.reaped == 1 { "" } else { "es" },
        short_time(r.written_at_ns / 1_000_000)
    )
}

/// The last `n` lines of a file, for display: at most the last 64 KiB of it (a workload that
/// writes one endless line does not fill the screen or the memory of `show`).
pub fn tail_lines(path: &Path, n: usize) -> io::Result<Vec<String>> {
    const SHOWN: u64 = 64 * 1024;
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut f = std::fs::File::open(path)?;
    let len = f.seek(SeekFrom::End(0))?;
    let start = tail_offset(&mut f, len.saturating_sub(SHOWN), len, n)?;
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    f.take(len - start).read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    Ok(text.lines().map(str::to_owned).collect())
}

/// The offset where the last `n` lines of the bytes `floor..len` of `f` start (`floor` when
/// there are fewer).
pub fn tail_offset(f: &mut std::fs::File, floor: u64, len: u64, n: usize) -> io::Result<u64> {
    const CHUNK: u64 = 16 * 1024;
    if n == 0 {
        return Ok(len);
    }
    let mut pos = len;
    let mut newlines = 0usize;
    let mut buf = vec![0u8; CHUNK as usize];
    // A final newline ends the last line rather than starting an empty one.
    let mut skip_last = true;
    while pos > floor {
        let step = CHUNK.min(pos - floor);
        pos -= step;
        f.seek(SeekFrom::Start(pos))?;
        let chunk = &mut buf[..step as usize];
        f.read_exact(chunk)?;
        for i in (0..chunk.len()).rev() {
            if chunk[i] != b'\n' {
                skip_last = false;
                continue;
            }
            if skip_last {
                skip_last = false;
                continue;
            }
            newlines += 1;
            if newlines == n {
                return Ok(pos + i as u64 + 1);
            }
        }
    }
    Ok(floor)
}

/// `receipt`: one line.
pub fn receipt_verdict(doc: &ReceiptVerdictDoc) -> String {
    let line = match (&doc.receipt, doc.verified) {
        (Some(r), true) => format!("{}: receipt {}", doc.id, verified_receipt(r)),
        (_, _) => format!(
            "{}: receipt does not verify{} ({})",
            doc.id,
            doc.state
                .map(|s| format!(", scope {}", s.name()))
                .unwrap_or_default(),
            doc.reason
                .as_ref()
                .map_or_else(|| "no receipt".to_owned(), ToString::to_string)
        ),
    };
    escape(&line).into_owned()
}

// ---------------------------------------------------------------------------------------------
// stop, recover, gc.

/// `stop`: one line, naming the scope by its id and, when it has one, its label.
pub fn stop_line(doc: &StopDoc, label: &str) -> String {
    let line = stop_line_raw(doc);
    match label {
        "" => escape(&line).into_owned(),
        l => {
            let rest = line.strip_prefix(doc.id.as_str()).unwrap_or(&line);
            format!("{} ({}){}", escape(&doc.id), escape(l), escape(rest))
        }
    }
}

fn stop_line_raw(doc: &StopDoc) -> String {
    match &doc.detail {
        StopDetail::Done {
            killed,
            timings_us,
            receipt,
            ..
        } => {
            let proof = match receipt {
                Some(r) if doc.state == State::Exited => format!("receipt {}", verified_receipt(r)),
                _ => format!(
                    "{}{}",
                    doc.state.name(),
                    doc.reason
                        .as_ref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ),
            };
            format!(
                "{}: {} ({killed} killed in {}); {proof}",
                doc.id,
                doc.outcome.words(),
                refine_supervisor::human::duration(Duration::from_micros(timings_us.total)),
            )
        }
        StopDetail::Failed { error } => format!("{}: stop failed: {error}", doc.id),
    }
}

/// `recover` (and `recover --dry-run`): one row per registration and a summary line.
pub fn recover(o: &mut impl Write, doc: &RecoverDoc) -> io::Result<()> {
    if doc.registrations.is_empty() {
        return writeln!(o, "nothing to recover");
    }
    let mut rows = vec![["ID", "ACTION", "STATE", "REASON"]
        .map(String::from)
        .to_vec()];
    for e in &doc.registrations {
        rows.push(vec![
            e.id.clone(),
            e.action.words(),
            e.state.name().to_owned(),
            e.reason
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
        ]);
    }
    write_lines(o, &table_lines(&rows, None))?;
    let summary: Vec<String> = doc
        .summary
        .iter()
        .flatten()
        .map(|(a, n)| format!("{n} {}", a.words()))
        .collect();
    let head = if doc.dry_run {
        "dry run, nothing done: "
    } else {
        ""
    };
    writeln!(o, "{head}{}", summary.join(", "))
}

/// `gc`: one row per registration considered, sizes in binary units, and a total.
/// `gc`: one row per thing removed (or, with `--dry-run`, that would be), each with its reason;
/// what is kept is only counted (`--json` has every entry and why it was kept).
pub fn gc(o: &mut impl Write, report: &GcDoc) -> io::Result<()> {
    let mut rows = vec![["ID", "ACTION", "FILES", "SIZE", "REASON"]
        .map(String::from)
        .to_vec()];
    for e in &report.retention.entries {
        if !matches!(
            e.action,
            RetentionAction::Deleted | RetentionAction::WouldDelete
        ) {
            continue;
        }
        let reason = match e.age_secs {
            Some(s) => format!(
                "exited (verified), {} old (limit {})",
                age(Duration::from_secs(s)),
                age(Duration::from_secs(report.retention.older_than_secs))
            ),
            None => escape(&e.reason).into_owned(),
        };
        rows.push(vec![
            e.id.clone(),
            e.action.words(),
            e.files.len().to_string(),
            human_bytes(e.bytes),
            reason,
        ]);
    }
    for e in &report.forget.entries {
        if e.action == refine_supervisor::history::forget::Action::Kept {
            continue;
        }
        let reason = match e.unchanged_secs {
            Some(s) => format!(
                "exited, nothing changed for {} (limit {})",
                age(Duration::from_secs(s)),
                age(Duration::from_secs(report.forget.forget_after_secs))
            ),
            None => escape(&e.reason).into_owned(),
        };
        rows.push(vec![
            e.id.clone(),
            e.action.words(),
            "-".into(),
            "-".into(),
            reason,
        ]);
    }
    let mut strays_kept = 0;
    for e in &report.strays {
        if e.action == StrayAction::Kept {
            strays_kept += 1;
            continue;
        }
        let file = e
            .path
            .file_name()
            .map(|n| escape(&n.to_string_lossy()).into_owned())
            .unwrap_or_default();
        let why = match &e.reason {
            StrayReasonDoc::NoRecord => format!(
                "{file}: no record names it (an aborted or forgotten launch), older than {}",
                age(refine_supervisor::history::strays::SAFETY_AGE)
            ),
            StrayReasonDoc::Temporary => {
                format!("{file}: temporary file of an interrupted replacement")
            }
            StrayReasonDoc::Young {
                age_secs,
                limit_secs,
            } => format!(
                "{file}: only {} old (limit {})",
                age(Duration::from_secs(*age_secs)),
                age(Duration::from_secs(*limit_secs))
            ),
            StrayReasonDoc::Locked => format!("{file}: its registration lock is held"),
            StrayReasonDoc::Failed { error } => format!("{file}: {}", escape(error)),
            StrayReasonDoc::EndedScopeCgroup => format!(
                "cgroup {}: its scope ended (the launcher died before removing it)",
                escape(&e.path.to_string_lossy())
            ),
            StrayReasonDoc::UnnamedCgroup => format!(
                "cgroup {}: no record names it (its launch never registered)",
                escape(&e.path.to_string_lossy())
            ),
        };
        rows.push(vec![
            e.id.clone().unwrap_or_else(|| "-".into()),
            e.action.words(),
            "1".into(),
            human_bytes(e.bytes),
            why,
        ]);
    }
    if rows.len() > 1 {
        write_lines(o, &table_lines(&rows, None))?;
    }
    let (files, bytes) = report
        .retention
        .entries
        .iter()
        .filter(|e| {
            matches!(
                e.action,
                RetentionAction::Deleted | RetentionAction::WouldDelete
            )
        })
        .fold((0, 0), |(f, b), e| (f + e.files.len(), b + e.bytes));
    writeln!(
        o,
        "{} {files} files, {}",
        if report.retention.dry_run {
            "would delete"
        } else {
            "deleted"
        },
        human_bytes(bytes)
    )?;
    let would = report
        .forget
        .entries
        .iter()
        .filter(|e| e.action == refine_supervisor::history::forget::Action::WouldForget)
        .count();
    writeln!(
        o,
        "{} {} registrations (exited, older than {}); {} younger kept",
        if report.forget.dry_run {
            "would forget"
        } else {
            "forgot"
        },
        report.forget.forgotten + report.forget.resumed + would,
        refine_supervisor::human::duration(Duration::from_secs(report.forget.forget_after_secs)),
        report.forget.young,
    )?;
    let strays = report.strays.len() - strays_kept;
    writeln!(
        o,
        "{} {strays} files no record covers; {strays_kept} kept (young or in use)",
        if report.retention.dry_run {
            "would remove"
        } else {
            "removed"
        },
    )
}

/// X11: `show`'s `Protected:` line, from the record's protection.
pub(crate) fn protection_words(p: Option<&refine_protocol::record::Protection>) -> String {
    use refine_protocol::record::{ProtectAsk, ProtectPart};
    let Some(p) = p else {
        return "not recorded (an older launch: no Landlock domain)".to_owned();
    };
    if p.asked == ProtectAsk::None {
        return "none (--protect none): the workload could reach its evidence, its guardian, other scopes and the service".to_owned();
    }
    let part = |what: &str, s: ProtectPart| match s {
        ProtectPart::Held => format!("{what} held"),
        ProtectPart::OptedOut => format!("{what} off (--protect)"),
        ProtectPart::Unavailable => {
            format!("{what} missing (Landlock ABI {} too old or absent)", p.abi)
        }
        ProtectPart::SharedTmp => {
            format!("{what} not applied (evidence under a shared temporary directory)")
        }
        ProtectPart::ReadyNotify => format!("{what} not scoped (--ready notify)"),
        ProtectPart::Unlistable => {
            format!("{what} not applied (a folder above run/ cannot be listed)")
        }
    };
    format!(
        "Landlock ABI {}: {}; {}; {}; no_new_privs {}; {} rules",
        p.abi,
        part("run/ files", p.fs),
        part("signals", p.signals),
        part("abstract sockets", p.abstract_sockets),
        if p.no_new_privs { "set" } else { "not set" },
        p.rules
    )
}

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
