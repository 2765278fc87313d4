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
        let _ = refine_supervisor::store::durable::create_private_dir(journal.dir());
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

/// `TIME KIND ID (LABEL) key=value...`: the id shortened as `ps` does, the label escaped.
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
    field("reason", ev.reason.as_deref().map(|r| format!("{:?}", r)));
    field(
        "status",
        ev.ready_status.as_deref().map(|r| format!("{:?}", r)),
    );
    text
}
