//! The scope-exit receipt: written by the guardian into the proof file only after `waitpid`
//! returned `ECHILD` (no child of the guardian is left), then `fdatasync`ed.
//!
//! # Layout (version 2, [`RECEIPT_LEN`] = 168 bytes, little-endian)
//!
//! Version 1 (144 bytes) is the same up to offset 136, where its CRC-32 of bytes 0..136 and a
//! reserved u32 end it; it carries no usage. Both decode; this crate writes version 2 whenever
//! the receipt has a usage (the guardian's always does), version 1 otherwise.
//!
//! ```text
//! off  size  field
//!   0     8  magic  b"RFNRCPT\0"
//!   8     2  version (2)
//!  10     2  length (168)
//!  12     4  flags (reserved, 0)
//!  16    16  registration id
//!  32    16  runtime id
//!  48    16  boot id
//!  64     4  guardian pid
//!  68     4  workload pid
//!  72     8  guardian start time (clock ticks)
//!  80     8  workload start time (clock ticks)
//!  88     8  proof st_dev
//!  96     8  proof st_ino
//! 104     1  workload status tag (0 exited, 1 signaled, 2 never started, 3 unknown)
//! 105     1  scope end (0 completed, 1 aborted: no start, 2 spawn failed, 3 guardian error)
//! 106     2  guardian failure code (scope end 3 only, else 0; `frame::guardian_failure`)
//! 108     4  status value (exit code, or signal number; 0 otherwise)
//! 112     4  errno (of the failed spawn, or behind a guardian error; 0 otherwise)
//! 116     4  processes reaped by the guardian
//! 120     8  workload exit, CLOCK_REALTIME ns (0 if it never ran)
//! 128     8  receipt written, CLOCK_REALTIME ns
//! 136     8  user CPU time of the whole tree, microseconds   } `getrusage(RUSAGE_CHILDREN)`
//! 144     8  system CPU time of the whole tree, microseconds } once `waitpid` said ECHILD
//! 152     8  largest peak RSS of any process of the tree, KiB }
//! 160     4  CRC-32 of bytes 0..160
//! 164     4  reserved (0)
//! ```
//!
//! Why `RUSAGE_CHILDREN` covers the whole tree: it sums every child the guardian waited for, and
//! each of those had folded in the usage of the children it waited for in turn. A process whose
//! parent exited without waiting for it was re-parented to the guardian (a subreaper) and waited
//! for by it. So once `waitpid` says ECHILD, every process of the tree is counted exactly once.
//! (A descendant that ignored SIGCHLD had its children auto-reaped, which the kernel does not
//! account to anyone: their usage is missing. The figures are a lower bound.)
//!
//! # Caveats
//! A receipt proves what its guardian observed; whether it belongs to a given registration is the
//! assessment's job (every bound field must equal the registration, and the proof file must still
//! be the registered inode).

use crate::codec::{crc32, Reader, Writer};
use crate::{
    BootId, DecodeError, EncodeError, ProcessWitness, ProofIdentity, RegistrationId, RuntimeId,
};

pub const RECEIPT_MAGIC: [u8; 8] = *b"RFNRCPT\0";
pub const RECEIPT_VERSION: u16 = 2;
/// Length of a version-2 receipt, the largest this crate reads.
pub const RECEIPT_LEN: usize = 168;
/// Length of a version-1 receipt (no usage), still read.
pub const RECEIPT_V1_LEN: usize = 144;
/// Largest signal number the kernel delivers (`SIGRTMAX` on Linux).
pub const MAX_SIGNAL: i32 = 64;

/// A receipt's encoding: [`RECEIPT_LEN`] bytes, or [`RECEIPT_V1_LEN`] for one without usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodedReceipt {
    buf: [u8; RECEIPT_LEN],
    len: usize,
}

impl core::ops::Deref for EncodedReceipt {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl core::ops::DerefMut for EncodedReceipt {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }
}

/// What the whole tree of a scope cost, as the kernel accounted it (H4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TreeUsage {
    pub user_us: u64,
    pub system_us: u64,
    /// The largest peak resident set of any one process of the tree (`ru_maxrss`), KiB.
    pub max_rss_kib: u64,
}

/// What a proof file holds before its receipt: the guardian reserves the receipt's block with
/// `RECEIPT_LEN` zero bytes and syncs them while the workload starts, so the receipt itself is an
/// in-place overwrite whose `fdatasync` does not wait for the file's allocation to commit. Zero
/// bytes never decode (the magic is non-zero).
pub const RESERVED: [u8; RECEIPT_LEN] = [0; RECEIPT_LEN];

/// Whether a proof file's content says "no receipt written yet": empty (created, not yet
/// reserved) or exactly the guardian's zero reservation. Anything else is a receipt to decode,
/// and a torn or damaged one fails to decode.
pub fn is_unwritten(content: &[u8]) -> bool {
    content.is_empty()
        || ((content.len() == RECEIPT_LEN || content.len() == RECEIPT_V1_LEN)
            && content.iter().all(|&b| b == 0))
}

/// How the workload (the guardian's direct child) ended. Never a made-up code: when the guardian
/// could not observe it, it says [`WorkloadStatus::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkloadStatus {
    Exited(i32),
    Signaled(i32),
    NeverStarted,
    Unknown,
}

impl WorkloadStatus {
    /// The shell's view: the exit code, or 128 + signal. `None` if it never ran, is unknown, or
    /// holds a value no kernel reports (a status decoded from a damaged record): the arithmetic
    /// never overflows.
    pub fn shell_code(&self) -> Option<i32> {
        match *self {
            WorkloadStatus::Exited(c) if (0..=255).contains(&c) => Some(c),
            WorkloadStatus::Signaled(s) if (1..=MAX_SIGNAL).contains(&s) => Some(128 + s),
            _ => None,
        }
    }

    /// Whether the value is one the kernel can report: an exit code in 0..=255, a signal in
    /// 1..=[`MAX_SIGNAL`].
    pub fn is_valid(&self) -> bool {
        match *self {
            WorkloadStatus::Exited(c) => (0..=255).contains(&c),
            WorkloadStatus::Signaled(s) => (1..=MAX_SIGNAL).contains(&s),
            WorkloadStatus::NeverStarted | WorkloadStatus::Unknown => true,
        }
    }

    fn to_wire(self) -> (u8, i32) {
        match self {
            WorkloadStatus::Exited(c) => (0, c),
            WorkloadStatus::Signaled(s) => (1, s),
            WorkloadStatus::NeverStarted => (2, 0),
            WorkloadStatus::Unknown => (3, 0),
        }
    }

    fn from_wire(tag: u8, value: i32) -> Result<Self, DecodeError> {
        let status = match tag {
            0 => WorkloadStatus::Exited(value),
            1 => WorkloadStatus::Signaled(value),
            2 | 3 if value != 0 => {
                return Err(DecodeError::InvalidField {
                    field: "workload status value",
                })
            }
            2 => WorkloadStatus::NeverStarted,
            3 => WorkloadStatus::Unknown,
            _ => {
                return Err(DecodeError::InvalidField {
                    field: "workload status",
                })
            }
        };
        if !status.is_valid() {
            return Err(DecodeError::InvalidField {
                field: "workload status value",
            });
        }
        Ok(status)
    }

    pub(crate) fn encode(self, w: &mut Writer<'_>) -> Result<(), EncodeError> {
        if !self.is_valid() {
            return Err(EncodeError::InvalidField {
                field: "workload status value",
            });
        }
        let (tag, value) = self.to_wire();
        w.u8(tag)?;
        w.i32(value)
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let tag = r.u8()?;
        let value = r.i32()?;
        Self::from_wire(tag, value)
    }
}

/// Why the scope ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScopeEnd {
    /// The workload started; every process of the scope has been reaped.
    Completed,
    /// *start* never came (timeout, abort, or channel closed): the workload never executed.
    Aborted,
    /// `execve` failed; [`Receipt::spawn_errno`] says why.
    SpawnFailed,
    /// A system call failed after the workload was forked (`code` as in
    /// [`crate::frame::guardian_failure`], the errno in [`Receipt::spawn_errno`]). The guardian
    /// still reaped until `ECHILD`; the workload status may be unknown.
    GuardianError { code: u16 },
}

impl ScopeEnd {
    /// The scope-end byte and the guardian failure code beside it.
    fn to_wire(self) -> (u8, u16) {
        match self {
            ScopeEnd::Completed => (0, 0),
            ScopeEnd::Aborted => (1, 0),
            ScopeEnd::SpawnFailed => (2, 0),
            ScopeEnd::GuardianError { code } => (3, code),
        }
    }
    fn from_wire(v: u8, code: u16) -> Result<Self, DecodeError> {
        Ok(match (v, code) {
            (0, 0) => ScopeEnd::Completed,
            (1, 0) => ScopeEnd::Aborted,
            (2, 0) => ScopeEnd::SpawnFailed,
            (3, code) if code != 0 => ScopeEnd::GuardianError { code },
            _ => return Err(DecodeError::InvalidField { field: "scope end" }),
        })
    }
}

/// The decoded receipt. See the module docs for its layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Receipt {
    pub registration: RegistrationId,
    pub runtime: RuntimeId,
    pub boot_id: BootId,
    pub guardian: ProcessWitness,
    pub workload: ProcessWitness,
    pub proof: ProofIdentity,
    pub status: WorkloadStatus,
    pub end: ScopeEnd,
    pub spawn_errno: i32,
    pub reaped: u32,
    pub workload_exited_at_ns: u64,
    pub written_at_ns: u64,
    /// The tree's CPU time and peak RSS (version 2); `None` in a version-1 receipt.
    pub usage: Option<TreeUsage>,
}

impl Receipt {
    /// Encodes into [`RECEIPT_LEN`] bytes (version 2), or [`RECEIPT_V1_LEN`] (version 1) when
    /// the receipt carries no usage.
    pub fn encode(&self) -> EncodedReceipt {
        let mut buf = [0u8; RECEIPT_LEN];
        // The buffer is RECEIPT_LEN bytes, enough for either version, so only an invalid field
        // can fail (an empty encoding then fails to decode loudly).
        let len = self.encode_into(&mut buf).unwrap_or(0);
        EncodedReceipt { buf, len }
    }

    /// Encodes into `out` (at least [`RECEIPT_LEN`] bytes); returns the length written. Refuses
    /// what [`Receipt::decode`] refuses, with its error and in its order: a guardian error
    /// without a code ("scope end"), a status no kernel reports ("workload status value").
    pub fn encode_into(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        let (end, failure) = self.end.to_wire();
        if ScopeEnd::from_wire(end, failure).is_err() {
            return Err(EncodeError::InvalidField { field: "scope end" });
        }
        if !self.status.is_valid() {
            return Err(EncodeError::InvalidField {
                field: "workload status value",
            });
        }
        let (version, len) = match self.usage {
            Some(_) => (RECEIPT_VERSION, RECEIPT_LEN),
            None => (1, RECEIPT_V1_LEN),
        };
        let mut w = Writer::new(out);
        w.bytes(&RECEIPT_MAGIC)?;
        w.u16(version)?;
        w.u16(len as u16)?;
        w.u32(0)?;
        w.bytes(&self.registration.0)?;
        w.bytes(&self.runtime.0)?;
        w.bytes(&self.boot_id.0)?;
        w.u32(self.guardian.pid)?;
        w.u32(self.workload.pid)?;
        w.u64(self.guardian.start_time)?;
        w.u64(self.workload.start_time)?;
        w.u64(self.proof.dev)?;
        w.u64(self.proof.ino)?;
        let (tag, value) = self.status.to_wire();
        w.u8(tag)?;
        w.u8(end)?;
        w.u16(failure)?;
        w.i32(value)?;
        w.i32(self.spawn_errno)?;
        w.u32(self.reaped)?;
        w.u64(self.workload_exited_at_ns)?;
        w.u64(self.written_at_ns)?;
        if let Some(u) = self.usage {
            w.u64(u.user_us)?;
            w.u64(u.system_us)?;
            w.u64(u.max_rss_kib)?;
        }
        let crc = crc32(w.written());
        w.u32(crc)?;
        w.u32(0)?;
        Ok(w.position())
    }

    /// Decodes a receipt that must be the whole of `buf` (a proof file's content).
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        if buf.len() > RECEIPT_LEN {
            // Check the prefix first so that a wrong-magic file is reported as such.
            Self::decode_prefix(&buf[..RECEIPT_LEN])?;
            return Err(DecodeError::TrailingBytes {
                extra: buf.len() - RECEIPT_LEN,
            });
        }
        Self::decode_prefix(buf)
    }

    fn decode_prefix(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        if r.remaining() < 8 {
            return Err(DecodeError::Truncated {
                need: RECEIPT_LEN,
                have: buf.len(),
            });
        }
        if r.array::<8>()? != RECEIPT_MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let version = r.u16()?;
        if version == 0 || version > RECEIPT_VERSION {
            return Err(DecodeError::UnsupportedVersion {
                got: version,
                max: RECEIPT_VERSION,
            });
        }
        let len = r.u16()? as usize;
        let expected = if version == 1 {
            RECEIPT_V1_LEN
        } else {
            RECEIPT_LEN
        };
        if len != expected {
            return Err(if len > expected {
                DecodeError::Oversized { len, max: expected }
            } else {
                DecodeError::InvalidField {
                    field: "receipt length",
                }
            });
        }
        if buf.len() < expected {
            return Err(DecodeError::Truncated {
                need: expected,
                have: buf.len(),
            });
        }
        if buf.len() > expected {
            return Err(DecodeError::TrailingBytes {
                extra: buf.len() - expected,
            });
        }
        let crc_at = expected - 8;
        let stored = u32::from_le_bytes([
            buf[crc_at],
            buf[crc_at + 1],
            buf[crc_at + 2],
            buf[crc_at + 3],
        ]);
        let computed = crc32(&buf[..crc_at]);
        if stored != computed {
            return Err(DecodeError::BadChecksum { stored, computed });
        }
        if r.u32()? != 0 {
            return Err(DecodeError::InvalidField {
                field: "receipt flags",
            });
        }
        let registration = RegistrationId(r.array()?);
        let runtime = RuntimeId(r.array()?);
        let boot_id = BootId(r.array()?);
        let guardian_pid = r.u32()?;
        let workload_pid = r.u32()?;
        let guardian_start = r.u64()?;
        let workload_start = r.u64()?;
        let proof = ProofIdentity {
            dev: r.u64()?,
            ino: r.u64()?,
        };
        let tag = r.u8()?;
        let end = r.u8()?;
        let end = ScopeEnd::from_wire(end, r.u16()?)?;
        let status = WorkloadStatus::from_wire(tag, r.i32()?)?;
        let spawn_errno = r.i32()?;
        let reaped = r.u32()?;
        let workload_exited_at_ns = r.u64()?;
        let written_at_ns = r.u64()?;
        let usage = if version >= 2 {
            Some(TreeUsage {
                user_us: r.u64()?,
                system_us: r.u64()?,
                max_rss_kib: r.u64()?,
            })
        } else {
            None
        };
        let _crc = r.u32()?;
        if r.u32()? != 0 {
            return Err(DecodeError::InvalidField {
                field: "receipt reserved tail",
            });
        }
        Ok(Receipt {
            registration,
            runtime,
            boot_id,
            guardian: ProcessWitness {
                pid: guardian_pid,
                start_time: guardian_start,
            },
            workload: ProcessWitness {
                pid: workload_pid,
                start_time: workload_start,
            },
            proof,
            status,
            end,
            spawn_errno,
            reaped,
            workload_exited_at_ns,
            written_at_ns,
            usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> Receipt {
        Receipt {
            registration: RegistrationId([1; 16]),
            runtime: RuntimeId([2; 16]),
            boot_id: BootId([3; 16]),
            guardian: ProcessWitness {
                pid: 100,
                start_time: 5000,
            },
            workload: ProcessWitness {
                pid: 101,
                start_time: 5001,
            },
            proof: ProofIdentity {
                dev: 0x803,
                ino: 424242,
            },
            status: WorkloadStatus::Signaled(9),
            end: ScopeEnd::Completed,
            spawn_errno: 0,
            reaped: 7,
            workload_exited_at_ns: 1_700_000_000_000_000_000,
            written_at_ns: 1_700_000_000_100_000_000,
            usage: Some(TreeUsage {
                user_us: 1_234_567,
                system_us: 89_000,
                max_rss_kib: 40_960,
            }),
        }
    }

    #[test]
    fn a_version_1_receipt_still_decodes_without_usage() {
        let old = Receipt {
            usage: None,
            ..sample()
        };
        let bytes = old.encode();
        assert_eq!(bytes.len(), RECEIPT_V1_LEN);
        assert_eq!(&bytes[8..10], &1u16.to_le_bytes());
        assert_eq!(Receipt::decode(&bytes), Ok(old));
        assert!(is_unwritten(&[0u8; RECEIPT_V1_LEN]));
        let new = sample().encode();
        assert_eq!(new.len(), RECEIPT_LEN);
        assert_eq!(Receipt::decode(&new), Ok(sample()));
        // A version-1 header on a version-2 body (and the reverse) is refused.
        let mut mixed = new;
        mixed[8] = 1;
        assert!(Receipt::decode(&mixed).is_err());
    }

    #[test]
    fn round_trip_every_status() {
        for status in [
            WorkloadStatus::Exited(0),
            WorkloadStatus::Exited(255),
            WorkloadStatus::Signaled(15),
            WorkloadStatus::NeverStarted,
            WorkloadStatus::Unknown,
        ] {
            for end in [
                ScopeEnd::Completed,
                ScopeEnd::Aborted,
                ScopeEnd::SpawnFailed,
                ScopeEnd::GuardianError { code: 19 },
            ] {
                let r = Receipt {
                    status,
                    end,
                    ..sample()
                };
                assert_eq!(Receipt::decode(&r.encode()), Ok(r));
            }
        }
    }

    #[test]
    fn every_error_class() {
        let good = sample().encode();
        assert!(matches!(
            Receipt::decode(&good[..100]),
            Err(DecodeError::Truncated { .. })
        ));
        assert!(matches!(
            Receipt::decode(&[]),
            Err(DecodeError::Truncated { .. })
        ));
        let mut bad = good;
        bad[0] = b'X';
        assert_eq!(Receipt::decode(&bad), Err(DecodeError::BadMagic));
        let mut bad = good;
        bad[8] = 3;
        assert!(matches!(
            Receipt::decode(&bad),
            Err(DecodeError::UnsupportedVersion { got: 3, max: 2 })
        ));
        let mut bad = good;
        bad[10] = 0xff;
        bad[11] = 0xff;
        assert!(matches!(
            Receipt::decode(&bad),
            Err(DecodeError::Oversized { .. })
        ));
        let mut bad = good;
        bad[70] ^= 1;
        assert!(matches!(
            Receipt::decode(&bad),
            Err(DecodeError::BadChecksum { .. })
        ));
        let mut long = [0u8; RECEIPT_LEN + 3];
        long[..RECEIPT_LEN].copy_from_slice(&good);
        assert_eq!(
            Receipt::decode(&long),
            Err(DecodeError::TrailingBytes { extra: 3 })
        );
    }

    #[test]
    fn every_single_bit_flip_is_rejected() {
        let good = sample().encode();
        for i in 0..RECEIPT_LEN {
            for bit in 0..8 {
                let mut bad = good;
                bad[i] ^= 1 << bit;
                assert!(
                    Receipt::decode(&bad).is_err(),
                    "flip at byte {i} bit {bit} accepted"
                );
            }
        }
    }
}
