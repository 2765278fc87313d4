//! The byte-level codec every format in this crate is built from: little-endian integers and
//! length-prefixed byte strings over caller-owned slices, plus CRC-32 (IEEE) checksums.
//!
//! This module is the only place that knows how integers and strings are laid out, so the
//! serializer can be swapped here. It never allocates and never panics: a [`Reader`] checks every
//! length against what is left before slicing, a [`Writer`] checks every write against its buffer.

use crate::{DecodeError, EncodeError};

/// Reads fields front to back from a borrowed slice.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub const fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Takes exactly `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let have = self.remaining();
        if n > have {
            return Err(DecodeError::Truncated { need: n, have });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_le_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A `u32` length followed by that many bytes, the length bounded by `max`.
    pub fn len_prefixed(&mut self, max: usize) -> Result<&'a [u8], DecodeError> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(DecodeError::Oversized { len, max });
        }
        self.bytes(len)
    }

    /// Fails with [`DecodeError::TrailingBytes`] unless every byte was consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            extra => Err(DecodeError::TrailingBytes { extra }),
        }
    }
}

/// Writes fields front to back into a caller-owned slice.
#[derive(Debug)]
pub struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    pub fn new(buf: &'a mut [u8]) -> Self {
        Writer { buf, pos: 0 }
    }

    /// Bytes written so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn bytes(&mut self, data: &[u8]) -> Result<(), EncodeError> {
        let have = self.buf.len() - self.pos;
        if data.len() > have {
            return Err(EncodeError::BufferTooSmall {
                need: self.pos + data.len(),
                have: self.buf.len(),
            });
        }
        self.buf[self.pos..self.pos + data.len()].copy_from_slice(data);
        self.pos += data.len();
        Ok(())
    }

    pub fn u8(&mut self, v: u8) -> Result<(), EncodeError> {
        self.bytes(&[v])
    }
    pub fn u16(&mut self, v: u16) -> Result<(), EncodeError> {
        self.bytes(&v.to_le_bytes())
    }
    pub fn u32(&mut self, v: u32) -> Result<(), EncodeError> {
        self.bytes(&v.to_le_bytes())
    }
    pub fn i32(&mut self, v: i32) -> Result<(), EncodeError> {
        self.bytes(&v.to_le_bytes())
    }
    pub fn u64(&mut self, v: u64) -> Result<(), EncodeError> {
        self.bytes(&v.to_le_bytes())
    }

    /// A `u32` length and the bytes; `max` bounds the length.
    pub fn len_prefixed(&mut self, data: &[u8], max: usize) -> Result<(), EncodeError> {
        if data.len() > max {
            return Err(EncodeError::Oversized {
                len: data.len(),
                max,
            });
        }
        self.u32(data.len() as u32)?;
        self.bytes(data)
    }

    /// Overwrites 4 bytes at `at` (for back-patched lengths and checksums).
    pub fn patch_u32(&mut self, at: usize, v: u32) -> Result<(), EncodeError> {
        if at + 4 > self.pos {
            return Err(EncodeError::BufferTooSmall {
                need: at + 4,
                have: self.pos,
            });
        }
        self.buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
        Ok(())
    }

    /// The bytes written so far.
    pub fn written(&self) -> &[u8] {
        &self.buf[..self.pos]
    }
}

/// The envelope every checksummed format shares: `magic`, `u16` version, `u16` tag, `u32`
/// payload length, `u32` CRC-32 of the header bytes before the CRC followed by the payload, then
/// the payload. Frames use a 4-byte magic and the tag as the frame kind; records an 8-byte magic
/// and a reserved tag.
pub const fn envelope_len(magic_len: usize) -> usize {
    magic_len + 12
}

/// Checks an envelope that must be the whole of `buf` and returns `(tag, payload)`. Checks run
/// in order: header present, magic, version (`1..=max_version`), declared length against
/// `max_payload`, declared length against the input (truncated / trailing), checksum.
pub fn envelope_open<'a>(
    buf: &'a [u8],
    magic: &[u8],
    max_version: u16,
    max_payload: usize,
) -> Result<(u16, &'a [u8]), DecodeError> {
    let header = envelope_len(magic.len());
    let mut r = Reader::new(buf);
    if r.remaining() < header {
        return Err(DecodeError::Truncated {
            need: header,
            have: buf.len(),
        });
    }
    if r.bytes(magic.len())? != magic {
        return Err(DecodeError::BadMagic);
    }
    let version = r.u16()?;
    if version == 0 || version > max_version {
        return Err(DecodeError::UnsupportedVersion {
            got: version,
            max: max_version,
        });
    }
    let tag = r.u16()?;
    let len = r.u32()? as usize;
    if len > max_payload {
        return Err(DecodeError::Oversized {
            len,
            max: max_payload,
        });
    }
    let stored = r.u32()?;
    let have = r.remaining();
    if len > have {
        return Err(DecodeError::Truncated { need: len, have });
    }
    if len < have {
        return Err(DecodeError::TrailingBytes { extra: have - len });
    }
    let payload = r.bytes(len)?;
    let computed = crc32_update(crc32(&buf[..header - 4]), payload);
    if stored != computed {
        return Err(DecodeError::BadChecksum { stored, computed });
    }
    Ok((tag, payload))
}

/// Writes an envelope header with zero length and checksum; [`envelope_seal`] fills them in once
/// the payload follows it.
pub fn envelope_start(
    w: &mut Writer<'_>,
    magic: &[u8],
    version: u16,
    tag: u16,
) -> Result<(), EncodeError> {
    w.bytes(magic)?;
    w.u16(version)?;
    w.u16(tag)?;
    w.u32(0)?;
    w.u32(0)
}

/// Patches the length and checksum of the envelope at the start of `w` (magic of `magic_len`
/// bytes); returns the whole envelope's length.
pub fn envelope_seal(w: &mut Writer<'_>, magic_len: usize) -> Result<usize, EncodeError> {
    let header = envelope_len(magic_len);
    let total = w.position();
    if total < header {
        return Err(EncodeError::BufferTooSmall {
            need: header,
            have: total,
        });
    }
    w.patch_u32(magic_len + 4, (total - header) as u32)?;
    let bytes = w.written();
    let crc = crc32_update(crc32(&bytes[..header - 4]), &bytes[header..]);
    w.patch_u32(header - 4, crc)?;
    Ok(total)
}

const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// CRC-32 (IEEE 802.3, reflected, as zlib's `crc32`).
pub fn crc32(data: &[u8]) -> u32 {
    crc32_update(0, data)
}

/// Continues a CRC-32 over more data (`crc32_update(crc32(a), b) == crc32(a ++ b)`).
pub fn crc32_update(crc: u32, data: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in data {
        c = CRC_TABLE[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_known_vector() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32_update(crc32(b"1234"), b"56789"), 0xCBF4_3926);
    }

    #[test]
    fn reader_bounds() {
        let mut r = Reader::new(&[1, 0, 0, 0, 9]);
        assert_eq!(r.u32(), Ok(1));
        assert_eq!(r.u32(), Err(DecodeError::Truncated { need: 4, have: 1 }));
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(
            r.len_prefixed(16),
            Err(DecodeError::Oversized { .. })
        ));
    }

    #[test]
    fn writer_bounds() {
        let mut buf = [0u8; 3];
        let mut w = Writer::new(&mut buf);
        assert!(matches!(w.u32(7), Err(EncodeError::BufferTooSmall { .. })));
    }
}
