//! The scope-exit receipt: written by the guardian into the proof file only after `waitpid`
//! returned `ECHILD` (no child of the guardian is left), then `fdatasync`ed.
//!
//! # Layout (version 1, [`RECEIPT_LEN`] = 144 bytes, little-endian)
//!
//! ```text
//! off  size  field
//!   0     8  magic  b"RFNRCPT\0"
//!   8     2  version (1)
//!  10     2  length (144)
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
//! 105     1  scope end (0 completed, 1 aborted: no start, 2 spawn failed)
//! 106     2  reserved (0)
//! 108     4  status value (exit code, or signal number; 0 otherwise)
//! 112     4  spawn errno (0 unless spawn failed)
//! 116     4  processes reaped by the guardian
//! 120     8  workload exit, CLOCK_REALTIME ns (0 if it never ran)
//! 128     8  receipt written, CLOCK_REALTIME ns
//! 136     4  CRC-32 of bytes 0..136
//! 140     4  reserved (0)
//! ```
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
pub const RECEIPT_VERSION: u16 = 1;
pub const RECEIPT_LEN: usize = 144;
/// Largest signal number the kernel delivers (`SIGRTMAX` on Linux).
pub const MAX_SIGNAL: i32 = 64;
const CRC_AT: usize = 136;

/// What a proof file holds before its receipt: the guardian reserves the receipt's block with
/// `RECEIPT_LEN` zero bytes and syncs them while the workload starts, so the receipt itself is an
/// in-place overwrite whose `fdatasync` does not wait for the file's allocation to commit. Zero
/// bytes never decode (the magic is non-zero).
pub const RESERVED: [u8; RECEIPT_LEN] = [0; RECEIPT_LEN];

/// Whether a proof file's content says "no receipt written yet": empty (created, not yet
/// reserved) or exactly the guardian's zero reservation. Anything else is a receipt to decode,
/// and a torn or damaged one fails to decode.
pub fn is_unwritten(content: &[u8]) -> bool {
    content.is_empty() || content == RESERVED
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
                field: "workload status",
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
}

impl ScopeEnd {
    fn to_wire(self) -> u8 {
        match self {
            ScopeEnd::Completed => 0,
            ScopeEnd::Aborted => 1,
            ScopeEnd::SpawnFailed => 2,
        }
    }
    fn from_wire(v: u8) -> Result<Self, DecodeError> {
        Ok(match v {
            0 => ScopeEnd::Completed,
            1 => ScopeEnd::Aborted,
            2 => ScopeEnd::SpawnFailed,
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
}

impl Receipt {
    /// Encodes into exactly [`RECEIPT_LEN`] bytes.
    pub fn encode(&self) -> [u8; RECEIPT_LEN] {
        let mut out = [0u8; RECEIPT_LEN];
        // The buffer is exactly RECEIPT_LEN bytes and the layout below writes exactly that many,
        // so no write can fail; a failure would be a layout bug caught by the round-trip tests.
        let _ = self.encode_into(&mut out);
        out
    }

    /// Encodes into `out` (at least [`RECEIPT_LEN`] bytes); returns the length written.
    pub fn encode_into(&self, out: &mut [u8]) -> Result<usize, EncodeError> {
        let mut w = Writer::new(out);
        w.bytes(&RECEIPT_MAGIC)?;
        w.u16(RECEIPT_VERSION)?;
        w.u16(RECEIPT_LEN as u16)?;
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
        if !self.status.is_valid() {
            return Err(EncodeError::InvalidField {
                field: "workload status",
            });
        }
        let (tag, value) = self.status.to_wire();
        w.u8(tag)?;
        w.u8(self.end.to_wire())?;
        w.u16(0)?;
        w.i32(value)?;
        w.i32(self.spawn_errno)?;
        w.u32(self.reaped)?;
        w.u64(self.workload_exited_at_ns)?;
        w.u64(self.written_at_ns)?;
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
        if len != RECEIPT_LEN {
            return Err(if len > RECEIPT_LEN {
                DecodeError::Oversized {
                    len,
                    max: RECEIPT_LEN,
                }
            } else {
                DecodeError::InvalidField {
                    field: "receipt length",
                }
            });
        }
        if buf.len() < RECEIPT_LEN {
            return Err(DecodeError::Truncated {
                need: RECEIPT_LEN,
                have: buf.len(),
            });
        }
        let stored = u32::from_le_bytes([
            buf[CRC_AT],
            buf[CRC_AT + 1],
            buf[CRC_AT + 2],
            buf[CRC_AT + 3],
        ]);
        let computed = crc32(&buf[..CRC_AT]);
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
        let end = ScopeEnd::from_wire(r.u8()?)?;
        if r.u16()? != 0 {
            return Err(DecodeError::InvalidField {
                field: "receipt reserved",
            });
        }
        let status = WorkloadStatus::from_wire(tag, r.i32()?)?;
        let spawn_errno = r.i32()?;
        let reaped = r.u32()?;
        let workload_exited_at_ns = r.u64()?;
        let written_at_ns = r.u64()?;
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
        }
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
        bad[8] = 2;
        assert!(matches!(
            Receipt::decode(&bad),
            Err(DecodeError::UnsupportedVersion { got: 2, max: 1 })
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
