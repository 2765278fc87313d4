//! The time index beside an artifact (SPEC L2): which bytes the guardian moved when.
//!
//! The guardian appends one record per batch it moved (`refine_protocol::capture`): the time,
//! the artifact's length after the batch, and the bytes read. Read back, the records cut the
//! artifact into [`Segment`]s, each written at one time (at the batch's granularity: the bytes
//! of one batch may have been written by the workload over the moment before it). The artifact
//! itself holds exactly the workload's bytes; the times are only here.
//!
//! A torn last record (a guardian killed in its `write`) and anything after a record that does
//! not decode are ignored: what is left is still in order. An artifact with no index (a
//! launch whose launcher captured it, or one from before the index) has no times: [`read`]
//! says so with `None`, and a caller refuses a question about time rather than answering
//! another.

use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use refine_protocol::capture::{index_records, CaptureEnd, IndexRecord};

use crate::store::registry::read_bounded;

/// Largest index read (two million batches); a longer one is an error, never a partial answer.
const MAX_INDEX: usize = 64 * 1024 * 1024;

/// Bytes `start..end` of the artifact, moved at `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub at: SystemTime,
    pub start: u64,
    pub end: u64,
}

/// An artifact's index, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputIndex {
    pub segments: Vec<Segment>,
    /// How the stream ended, once it did.
    pub end: Option<CaptureEnd>,
    /// Bytes read from the stream (more than the artifact holds past its cap).
    pub moved: u64,
}

impl OutputIndex {
    /// The artifact's bytes moved within `[since, until]` (either bound open): one range, since
    /// the segments are in order.
    pub fn range(&self, since: Option<SystemTime>, until: Option<SystemTime>) -> (u64, u64) {
        let inside =
            |s: &&Segment| since.is_none_or(|t| s.at >= t) && until.is_none_or(|t| s.at <= t);
        let mut hits = self.segments.iter().filter(inside);
        match hits.next() {
            None => (0, 0),
            Some(first) => (first.start, hits.next_back().map_or(first.end, |l| l.end)),
        }
    }
}

/// The index at `path`; `None` when there is none (no times are known for that artifact).
pub fn read(path: &Path) -> io::Result<Option<OutputIndex>> {
    let bytes = match read_bounded(path, MAX_INDEX) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(Some(from_records(index_records(&bytes))))
}

fn from_records(records: impl Iterator<Item = IndexRecord>) -> OutputIndex {
    let mut out = OutputIndex::default();
    let mut offset = 0u64;
    for r in records {
        if r.offset > offset {
            out.segments.push(Segment {
                at: UNIX_EPOCH + Duration::from_nanos(r.at_ns),
                start: offset,
                end: r.offset,
            });
            offset = r.offset;
        }
        out.moved = out.moved.max(r.moved);
        if r.end.is_some() {
            out.end = r.end;
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(at_ns: u64, offset: u64, end: Option<CaptureEnd>) -> IndexRecord {
        IndexRecord {
            at_ns,
            offset,
            moved: offset,
            end,
        }
    }

    #[test]
    fn segments_cut_the_artifact_and_a_window_is_one_range() {
        let idx = from_records(
            [
                rec(10, 5, None),
                rec(20, 9, None),
                rec(30, 9, None),
                rec(40, 12, Some(CaptureEnd::Eof)),
                rec(50, 99, None),
            ]
            .into_iter(),
        );
        assert_eq!(idx.segments.len(), 3, "{idx:?}");
        assert_eq!(idx.end, Some(CaptureEnd::Eof));
        let t = |ns| Some(UNIX_EPOCH + Duration::from_nanos(ns));
        assert_eq!(idx.range(None, None), (0, 12));
        assert_eq!(idx.range(t(15), None), (5, 12));
        assert_eq!(idx.range(None, t(25)), (0, 9));
        assert_eq!(idx.range(t(15), t(25)), (5, 9));
        assert_eq!(idx.range(t(41), None), (0, 0));
    }
}
