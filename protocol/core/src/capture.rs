//! The guardian's capture (SPEC L1, L2): how a stream it drained ended, and the time index it
//! keeps beside each artifact.
//!
//! A launch that asks for it (frame flag `CAPTURE`) has its guardian drain the workload's stdout
//! and stderr into their artifacts itself (`splice` from the workload's pipe into the file), so
//! the output outlives the launcher. Beside each artifact the guardian appends an index of
//! fixed [`INDEX_RECORD_LEN`]-byte records, one per batch it moved, and one last record that
//! says how the stream ended:
//!
//! ```text
//! off size field (little-endian)
//!   0    8 CLOCK_REALTIME ns when the batch was moved (or the stream ended)
//!   8    8 artifact bytes after it (the offset its bytes end at)
//!  16    8 bytes read from the stream so far (more than the artifact's past its cap)
//!  24    4 kind: 0 batch, 1 end of file, 2 failure (errno below), 3 held outside the scope
//!  28    4 errno (kind 2), else 0
//! ```
//!
//! Records are appended whole by one `write`; a reader ignores a torn last record (shorter than
//! [`INDEX_RECORD_LEN`]) and stops at the first record it cannot decode. The artifact's bytes
//! are exactly the workload's; the index is the only place times are kept.

use crate::codec::Reader;
use crate::DecodeError;

/// Length of one index record.
pub const INDEX_RECORD_LEN: usize = 32;

/// How a stream the guardian drained ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureEnd {
    /// Read to end of file: every byte the scope wrote was moved (to the artifact, up to its cap).
    Eof,
    /// Writing the artifact failed (`ENOSPC`, `EIO`, ...) with this errno: the stream was still
    /// drained (into nothing), so no writer blocked or broke.
    Failed { errno: i32 },
    /// The scope had ended (no process of it left) while a process outside it still held the
    /// stream open: what the pipe held was moved, then the read end was closed (X10).
    HeldOutside,
}

impl CaptureEnd {
    /// The kind and errno fields of an end record.
    pub const fn to_wire(self) -> (u32, i32) {
        match self {
            CaptureEnd::Eof => (1, 0),
            CaptureEnd::Failed { errno } => (2, errno),
            CaptureEnd::HeldOutside => (3, 0),
        }
    }

    /// The end named by `kind` and `errno`; `None` for a batch (kind 0).
    pub fn from_wire(kind: u32, errno: i32) -> Result<Option<Self>, DecodeError> {
        Ok(match (kind, errno) {
            (0, 0) => None,
            (1, 0) => Some(CaptureEnd::Eof),
            (2, e) if e > 0 => Some(CaptureEnd::Failed { errno: e }),
            (3, 0) => Some(CaptureEnd::HeldOutside),
            _ => {
                return Err(DecodeError::InvalidField {
                    field: "capture index kind",
                })
            }
        })
    }
}

/// One record of a capture index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IndexRecord {
    pub at_ns: u64,
    /// Artifact bytes after this batch.
    pub offset: u64,
    /// Bytes read from the stream so far.
    pub moved: u64,
    /// `None`: a batch; otherwise the stream's end (the last record).
    pub end: Option<CaptureEnd>,
}

impl IndexRecord {
    pub fn encode(&self) -> [u8; INDEX_RECORD_LEN] {
        let mut buf = [0u8; INDEX_RECORD_LEN];
        let (kind, errno) = self.end.map_or((0, 0), CaptureEnd::to_wire);
        buf[0..8].copy_from_slice(&self.at_ns.to_le_bytes());
        buf[8..16].copy_from_slice(&self.offset.to_le_bytes());
        buf[16..24].copy_from_slice(&self.moved.to_le_bytes());
        buf[24..28].copy_from_slice(&kind.to_le_bytes());
        buf[28..32].copy_from_slice(&errno.to_le_bytes());
        buf
    }

    /// Decodes exactly one record.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        if buf.len() != INDEX_RECORD_LEN {
            return Err(DecodeError::Truncated {
                need: INDEX_RECORD_LEN,
                have: buf.len(),
            });
        }
        let mut r = Reader::new(buf);
        let at_ns = r.u64()?;
        let offset = r.u64()?;
        let moved = r.u64()?;
        let kind = r.u32()?;
        let errno = r.i32()?;
        if moved < offset {
            return Err(DecodeError::InvalidField {
                field: "capture index counts",
            });
        }
        Ok(IndexRecord {
            at_ns,
            offset,
            moved,
            end: CaptureEnd::from_wire(kind, errno)?,
        })
    }
}

/// The records of an index file's content, in order, up to the first that does not decode (a
/// torn tail or damage: what follows is not trusted).
pub fn index_records(content: &[u8]) -> impl Iterator<Item = IndexRecord> + '_ {
    content
        .chunks_exact(INDEX_RECORD_LEN)
        .map_while(|c| IndexRecord::decode(c).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_bad_ones_are_refused() {
        for end in [
            None,
            Some(CaptureEnd::Eof),
            Some(CaptureEnd::Failed { errno: 28 }),
            Some(CaptureEnd::HeldOutside),
        ] {
            let r = IndexRecord {
                at_ns: 7,
                offset: 10,
                moved: 12,
                end,
            };
            assert_eq!(IndexRecord::decode(&r.encode()), Ok(r));
        }
        let mut bad = IndexRecord {
            at_ns: 1,
            offset: 5,
            moved: 5,
            end: None,
        }
        .encode();
        bad[24] = 9;
        assert!(IndexRecord::decode(&bad).is_err());
        assert!(IndexRecord::decode(&bad[..31]).is_err());
        let mut two = [0u8; 70];
        two[..32].copy_from_slice(
            &IndexRecord {
                at_ns: 1,
                offset: 5,
                moved: 5,
                end: None,
            }
            .encode(),
        );
        two[32..64].copy_from_slice(&bad);
        assert_eq!(index_records(&two).count(), 1);
    }
}
