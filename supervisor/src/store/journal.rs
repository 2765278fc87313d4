//! V2: the events journal, `run/P/events/`: what happened to the runtime's scopes, one JSON line
//! per event ([`refine_protocol::docs::EventDoc`]), written by whichever process saw it (a `run`,
//! the service, a `stop`, `gc`, a recovery).
//!
//! The journal is a few segment files, `NNNNNNNNNNNNNNNNNNNN.jsonl` by generation. A writer
//! takes the folder's `flock` (held only for one append, waited for at most 2 s), appends its line to the newest
//! segment with one `write`, and opens the next one once the newest holds
//! [`Journal::segment_bytes`]; it then removes the oldest so that at most [`KEEP_SEGMENTS`]
//! remain (the size cap: `KEEP_SEGMENTS × segment_bytes`, 8 MiB by default).
//!
//! A [`Cursor`] is a place in the journal: a segment's generation and the offset just after an
//! event's line. Positions only grow (a segment is only appended to; a new one has a larger
//! generation), so "the events after this cursor" is exact: a reader that comes back with the
//! cursor of the last event it took sees every later event still kept exactly once. A cursor
//! whose segment has been removed since resumes at the oldest kept event (the events between
//! were dropped by the size cap).
//!
//! # Caveats
//! - Display and integration only, like the launch result: lines are not fsynced, and an event
//!   that cannot be written (a full disk) is logged and lost; no operation fails for it.
//! - A writer killed in its `write` can leave a torn line; readers skip a line that does not
//!   parse (and do not take a last line that has no newline yet).
//! - A process that sees an event writes it once; the same fact seen by two processes (two
//!   services adopting one scope in turn) is two events, each true when written.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use refine_protocol::docs::EventDoc;

use crate::store::durable;
use crate::store::registry::Runtime;

/// Segments kept: the newest is appended to, the others are history.
pub const KEEP_SEGMENTS: u64 = 8;
/// A segment's size before the next one is opened (`REFINE_EVENTS_SEGMENT_BYTES` overrides it).
pub const SEGMENT_BYTES: u64 = 1 << 20;
/// The longest line written (a longer event loses its `reason`).
const MAX_LINE: usize = 16 * 1024;
/// How long a writer waits for another's append.
const LOCK_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot {op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Lock(#[from] crate::store::fence::FenceError),
    #[error("cannot encode the event")]
    Encode(#[source] serde_json::Error),
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> JournalError + 'a {
    move |source| JournalError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// A place in the journal: after the event that ends at `offset` of segment `segment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Cursor {
    pub segment: u64,
    pub offset: u64,
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.segment, self.offset)
    }
}

impl std::str::FromStr for Cursor {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is no events cursor (SEGMENT:OFFSET, as an event's `cursor`)");
        let (g, o) = s.split_once(':').ok_or_else(bad)?;
        Ok(Cursor {
            segment: g.parse().map_err(|_| bad())?,
            offset: o.parse().map_err(|_| bad())?,
        })
    }
}

/// What [`Journal::read_after`] found: the events (each with its `cursor`) and where to resume.
#[derive(Debug, Default)]
pub struct Batch {
    pub events: Vec<EventDoc>,
    pub end: Cursor,
}

/// The journal of one runtime.
#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
    segment_bytes: u64,
}

impl Journal {
    /// `run/P/events` of `rt`, with the segment size of [`SEGMENT_BYTES`] or of
    /// `REFINE_EVENTS_SEGMENT_BYTES` (at least 1 KiB).
    pub fn of(rt: &Runtime) -> Journal {
        let segment_bytes = std::env::var("REFINE_EVENTS_SEGMENT_BYTES")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(SEGMENT_BYTES, |n| n.max(1024));
        Journal::at(rt.dir().join("events"), segment_bytes)
    }

    /// A journal in `dir` (tests give a small `segment_bytes`).
    pub fn at(dir: PathBuf, segment_bytes: u64) -> Journal {
        Journal { dir, segment_bytes }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }

    fn segment_path(&self, generation: u64) -> PathBuf {
        self.dir.join(format!("{generation:020}.jsonl"))
    }

    /// The generations present, oldest first.
    fn segments(&self) -> Result<Vec<u64>, JournalError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err("read", &self.dir)(e)),
        };
        let mut found: Vec<u64> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name();
                let stem = name.to_str()?.strip_suffix(".jsonl")?;
                (stem.len() == 20).then(|| stem.parse().ok())?
            })
            .collect();
        found.sort_unstable();
        Ok(found)
    }

    /// Appends `event` (its `cursor` and `time` are the reader's, and not written).
    pub fn append(&self, event: &EventDoc) -> Result<(), JournalError> {
        let mut event = event.clone();
        event.cursor.clear();
        event.time.clear();
        let mut line = serde_json::to_vec(&event).map_err(JournalError::Encode)?;
        if line.len() > MAX_LINE {
            event.reason = Some("(too long to keep)".to_owned());
            line = serde_json::to_vec(&event).map_err(JournalError::Encode)?;
        }
        line.push(b'\n');
        // The folder's own `flock` orders the writers (no lock file: an append opens the folder
        // and its newest segment, and creates nothing once both exist, F3).
        let folder = match fs::File::open(&self.dir) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                durable::create_private_dir(&self.dir).map_err(io_err("create", &self.dir))?;
                fs::File::open(&self.dir).map_err(io_err("open", &self.dir))?
            }
            Err(e) => return Err(io_err("open", &self.dir)(e)),
        };
        let _lock = crate::store::fence::acquire_open(folder, &self.dir, LOCK_WAIT)?;
        let segments = self.segments()?;
        let mut generation = segments.last().copied().unwrap_or(1);
        let path = self.segment_path(generation);
        let full = fs::metadata(&path).is_ok_and(|m| m.len() >= self.segment_bytes);
        if full {
            generation += 1;
            for old in segments
                .iter()
                .filter(|&&g| g + KEEP_SEGMENTS <= generation)
            {
                let p = self.segment_path(*old);
                if let Err(e) = fs::remove_file(&p) {
                    if e.kind() != io::ErrorKind::NotFound {
                        return Err(io_err("remove", &p)(e));
                    }
                }
            }
        }
        let path = self.segment_path(generation);
        let mut f = match OpenOptions::new().read(true).append(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => durable::open_private(
                OpenOptions::new().read(true).append(true).create(true),
                &path,
            )
            .map_err(io_err("create", &path))?,
            Err(e) => return Err(io_err("open", &path)(e)),
        };
        // A writer killed in its write left a line without its newline: end it, so that this
        // one is whole (the torn one is skipped by readers).
        let len = f.metadata().map_err(io_err("stat", &path))?.len();
        let mut last = [b'\n'];
        if len > 0 {
            use std::os::unix::fs::FileExt;
            f.read_exact_at(&mut last, len - 1)
                .map_err(io_err("read", &path))?;
        }
        if last[0] != b'\n' {
            line.insert(0, b'\n');
        }
        f.write_all(&line).map_err(io_err("append to", &path))
    }

    /// The events after `after` (absent: from the oldest kept), each with its cursor, and the
    /// cursor to resume from (`after` itself when nothing followed it).
    pub fn read_after(&self, after: Option<Cursor>) -> Result<Batch, JournalError> {
        let segments = self.segments()?;
        let mut batch = Batch {
            events: Vec::new(),
            end: after.unwrap_or_default(),
        };
        for generation in segments {
            let from = match after {
                Some(c) if c.segment == generation => c.offset,
                Some(c) if c.segment > generation => continue,
                _ => 0,
            };
            let path = self.segment_path(generation);
            let mut f = match fs::File::open(&path) {
                Ok(f) => f,
                // Removed by a writer's rotation since the listing.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err("open", &path)(e)),
            };
            f.seek(SeekFrom::Start(from))
                .map_err(io_err("seek", &path))?;
            let mut bytes = Vec::new();
            // A segment holds at most its size and one line past it, unless a writer with a
            // larger segment size shares the journal: bounded all the same.
            f.take(self.segment_bytes.max(SEGMENT_BYTES) * 2 + MAX_LINE as u64)
                .read_to_end(&mut bytes)
                .map_err(io_err("read", &path))?;
            let mut at = from;
            let mut rest = &bytes[..];
            while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
                at += nl as u64 + 1;
                let cursor = Cursor {
                    segment: generation,
                    offset: at,
                };
                if let Ok(mut ev) = serde_json::from_slice::<EventDoc>(&rest[..nl]) {
                    ev.cursor = cursor.to_string();
                    batch.events.push(ev);
                }
                rest = &rest[nl + 1..];
            }
            batch.end = batch.end.max(Cursor {
                segment: generation,
                offset: at,
            });
        }
        Ok(batch)
    }
}

/// Which events a reader wants: of these kinds (none: all), of these scopes (an id, a prefix of
/// one or a label; none: all), and at or after `since_unix_ms`, before `until_unix_ms`.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub kinds: Vec<refine_protocol::docs::EventKind>,
    pub scopes: Vec<String>,
    pub since_unix_ms: Option<u64>,
    pub until_unix_ms: Option<u64>,
}

impl Filter {
    pub fn matches(&self, ev: &EventDoc) -> bool {
        (self.kinds.is_empty() || self.kinds.contains(&ev.kind))
            && (self.scopes.is_empty()
                || self.scopes.iter().any(|s| {
                    ev.label == *s
                        || s.len() >= 4
                            && s.bytes().all(|b| b.is_ascii_hexdigit())
                            && ev.id.starts_with(&s.to_ascii_lowercase())
                }))
            && self.since_unix_ms.is_none_or(|t| ev.time_unix_ms >= t)
            && self.until_unix_ms.is_none_or(|t| ev.time_unix_ms < t)
    }
}

/// Writes `event` to `rt`'s journal, best effort: a failure is logged, never returned (nothing
/// waits on the journal).
pub fn record(rt: &Runtime, event: &EventDoc) {
    if !rt.writes_events() {
        return;
    }
    if let Err(e) = Journal::of(rt).append(event) {
        tracing::warn!(id = %event.id, kind = %event.kind, error = %crate::error::error_chain(&e), "cannot write the event");
    }
}

/// An event of `kind` about `id` (labelled `label`), now, by this process.
pub fn event(
    kind: refine_protocol::docs::EventKind,
    id: refine_protocol::RegistrationId,
    label: &str,
) -> EventDoc {
    EventDoc::new(
        kind,
        id.to_string(),
        label.to_owned(),
        crate::kernel::clock::unix_ms(),
        std::process::id(),
    )
}

/// Sets `event`'s `status`, with its `exit_code` or `signal`.
pub fn with_status(event: &mut EventDoc, status: refine_protocol::WorkloadStatus) {
    use refine_protocol::docs::StatusName;
    use refine_protocol::WorkloadStatus as W;
    (event.status, event.exit_code, event.signal) = match status {
        W::Exited(code) => (Some(StatusName::Exited), Some(code), None),
        W::Signaled(sig) => (Some(StatusName::Signaled), None, Some(sig)),
        W::NeverStarted => (Some(StatusName::NeverStarted), None, None),
        W::Unknown => (Some(StatusName::Unknown), None, None),
    };
}

/// The end of a launch: `receipt` with the outcome and the workload's status when its receipt
/// is in, else `unverified`.
pub fn ended(
    id: refine_protocol::RegistrationId,
    label: &str,
    outcome: refine_protocol::docs::Outcome,
    receipt: Option<&refine_protocol::Receipt>,
) -> EventDoc {
    use refine_protocol::docs::EventKind;
    let mut ev = match receipt {
        Some(r) => {
            let mut ev = event(EventKind::Receipt, id, label);
            with_status(&mut ev, r.status);
            ev
        }
        None => {
            let mut ev = event(EventKind::Unverified, id, label);
            ev.reason = Some("no receipt: the guardian's channel closed without one".to_owned());
            ev
        }
    };
    ev.outcome = Some(outcome);
    ev
}

#[cfg(test)]
mod tests {
    use super::*;
    use refine_protocol::docs::EventKind;

    fn ev(n: u32) -> EventDoc {
        EventDoc::new(
            EventKind::Launched,
            format!("{n:032x}"),
            String::new(),
            1,
            n,
        )
    }

    fn pids(b: &Batch) -> Vec<u32> {
        b.events.iter().map(|e| e.by_pid).collect()
    }

    #[test]
    fn a_reader_resuming_at_its_cursor_sees_each_later_event_once() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::at(dir.path().join("events"), 1024);
        let first = j.read_after(None).unwrap();
        assert!(first.events.is_empty());
        for n in 0..5 {
            j.append(&ev(n)).unwrap();
        }
        let a = j.read_after(Some(first.end)).unwrap();
        assert_eq!(pids(&a), [0, 1, 2, 3, 4]);
        for n in 5..40 {
            j.append(&ev(n)).unwrap();
        }
        let b = j.read_after(Some(a.end)).unwrap();
        assert_eq!(pids(&b), (5..40).collect::<Vec<_>>());
        assert!(
            j.segments().unwrap().len() > 1,
            "40 events of ~120 B in 1 KiB segments"
        );
        // Each event's own cursor resumes just after it.
        let mid: Cursor = b.events[10].cursor.parse().unwrap();
        assert_eq!(pids(&j.read_after(Some(mid)).unwrap())[0], 16);
        assert!(j.read_after(Some(b.end)).unwrap().events.is_empty());
    }

    #[test]
    fn the_size_cap_drops_the_oldest_segments_and_a_stale_cursor_resumes_at_the_oldest_kept() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::at(dir.path().join("events"), 1024);
        j.append(&ev(0)).unwrap();
        let stale = j.read_after(None).unwrap().end;
        for n in 1..400 {
            j.append(&ev(n)).unwrap();
        }
        let kept = j.segments().unwrap();
        assert_eq!(kept.len() as u64, KEEP_SEGMENTS, "{kept:?}");
        let all = j.read_after(None).unwrap();
        let resumed = j.read_after(Some(stale)).unwrap();
        assert_eq!(pids(&resumed), pids(&all));
        assert_eq!(*pids(&all).last().unwrap(), 399);
        let on_disk: u64 = kept
            .iter()
            .map(|g| fs::metadata(j.segment_path(*g)).unwrap().len())
            .sum();
        assert!(on_disk <= KEEP_SEGMENTS * (1024 + 200), "{on_disk}");
    }

    #[test]
    fn a_torn_line_is_skipped_and_an_unfinished_one_waits() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::at(dir.path().join("events"), 1 << 20);
        j.append(&ev(1)).unwrap();
        let seg = j.segment_path(1);
        let mut f = OpenOptions::new().append(true).open(&seg).unwrap();
        f.write_all(b"{\"kind\":\"lau").unwrap();
        let b = j.read_after(None).unwrap();
        assert_eq!(pids(&b), [1], "the unfinished line is not taken");
        j.append(&ev(2)).unwrap();
        let c = j.read_after(Some(b.end)).unwrap();
        assert_eq!(pids(&c), [2], "the torn line is skipped, the next one read");
    }
}
