//! `events` (V2): the journal's events, oldest first, as `docker events` prints them; `-f`
//! follows the journal by inotify (its folder: a line appended, a segment created) until
//! `--until` passes or the reader is interrupted.

use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

use refine_protocol::docs::EventDoc;
use refine_supervisor::host::{Journal, JournalFilter as Filter};

use super::cli::{EventFilter, EventsArgs, ExitCode};
use super::error::CliError;
use super::view;

pub fn events(home: &Path, port: u16, args: EventsArgs) -> Result<ExitCode, CliError> {
    let rt = refine_supervisor::host::Runtime::open_existing(home, port)?;
    let journal = Journal::of(&rt);
    let mut filter = Filter {
        since_unix_ms: args.since,
        until_unix_ms: args.until,
        ..Filter::default()
    };
    for f in args.filter {
        match f {
            EventFilter::Kind(k) => filter.kinds.push(k),
            EventFilter::Scope(s) => filter.scopes.push(s),
        }
    }
    let mut changes = if args.follow {
        // The folder is watched before the first read, so nothing written between is missed.
        let _ = refine_supervisor::host::files::create_private_dir(journal.dir());
        super::ops::Changes::watch_dir(journal.dir())
    } else {
        super::ops::Changes::none()
    };
    let mut cursor = args.after;
    let mut out = io::stdout().lock();
    loop {
        let batch = journal.read_after(cursor)?;
        for mut ev in batch.events {
            if filter.matches(&ev) {
                print(&mut out, &mut ev, args.json).map_err(CliError::Output)?;
            }
        }
        out.flush().map_err(CliError::Output)?;
        cursor = Some(batch.end);
        let over = args
            .until
            .is_some_and(|t| refine_supervisor::host::unix_ms() >= t);
        if !args.follow || over {
            return Ok(0);
        }
        changes.wait();
    }
}

/// Fills in the reader's fields (the UTC time) and prints `ev` as JSON or as one line.
fn print(o: &mut impl Write, ev: &mut EventDoc, json: bool) -> io::Result<()> {
    let at = std::time::UNIX_EPOCH + Duration::from_millis(ev.time_unix_ms);
    ev.time = view::utc_ms(at);
    if json {
        serde_json::to_writer(&mut *o, ev)?;
        return writeln!(o);
    }
    writeln!(o, "{}", line(ev))
}

/// `TIME KIND ID (LABEL) key=value...: WORDS`: the id shortened as `ps` does, the label
/// escaped; the reason (or a `ready` event's `STATUS=`) in words at the end, escaped.
pub fn line(ev: &EventDoc) -> String {
    let short = ev.id.get(..12).unwrap_or(&ev.id);
    let mut text = format!("{} {:<14} {short}", ev.time, ev.kind.name());
    if !ev.label.is_empty() {
        text.push_str(&format!(" ({})", view::escape(&ev.label)));
    }
    let mut field = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            text.push_str(&format!(" {k}={v}"));
        }
    };
    field("kind", ev.scope_kind.map(|k| k.to_string()));
    field("pid", ev.pid.map(|p| p.to_string()));
    field("status", ev.status.map(|s| s.name().to_owned()));
    field("exit_code", ev.exit_code.map(|c| c.to_string()));
    field("signal", ev.signal.map(|s| s.to_string()));
    field("outcome", ev.outcome.map(|o| o.name().to_owned()));
    let cause = ev
        .cause
        .and_then(|c| refine_protocol::docs::variant_name(&c));
    field("cause", cause.map(str::to_owned));
    field("stop", ev.stop.map(|s| s.name().to_owned()));
    field("health", ev.health.map(|h| h.name().to_owned()));
    // The words last, after a colon, as `show` puts them after its values: the reason, or the
    // workload's `STATUS=`, escaped (X6: a workload's text, untrusted).
    for words in [&ev.reason, &ev.ready_status].into_iter().flatten() {
        text.push_str(&format!(": {}", view::escape(words)));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use refine_protocol::docs::{EventKind, HealthState};

    fn event(kind: EventKind) -> EventDoc {
        let mut ev = EventDoc::new(
            kind,
            "0123456789abcdef0123456789abcdef".into(),
            "web".into(),
            0,
            1,
        );
        ev.time = "2026-12-07T21:00:00.000Z".into();
        ev
    }

    /// A reason and a `STATUS=` are words after the fields, as `show` puts them after its
    /// values, and a workload's text is escaped as every view escapes it (X6): not Rust's
    /// debug quoting.
    #[test]
    fn reasons_and_statuses_are_worded_and_escaped() {
        let mut ev = event(EventKind::Unverified);
        ev.reason = Some("no receipt: the guardian's channel closed without one".into());
        assert_eq!(
            line(&ev),
            "2026-12-07T21:00:00.000Z unverified     0123456789ab (web): \
             no receipt: the guardian's channel closed without one"
        );
        let mut ev = event(EventKind::Ready);
        ev.ready_status = Some("serving \"all\"\u{1b}[2J\u{202e}".into());
        assert_eq!(
            line(&ev),
            "2026-12-07T21:00:00.000Z ready          0123456789ab (web): \
             serving \"all\"\\x1b[2J\\u202e"
        );
        let mut ev = event(EventKind::Health);
        ev.health = Some(HealthState::Unhealthy);
        ev.reason = Some("probe said\nno".into());
        assert_eq!(
            line(&ev),
            "2026-12-07T21:00:00.000Z health         0123456789ab (web) health=unhealthy: \
             probe said\\nno"
        );
    }
}
