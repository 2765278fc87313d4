//! The identity a `refine-guardian` binary carries (SPEC D4): a few bytes in a section of its own,
//! so that an outer stop recognises a nested guardian of any copy, version or path by what the
//! executable is, not by its file identity or its name.
//!
//! ```text
//! section  .refine.guardian   (SHT_PROGBITS, allocated, kept by the linker: `#[used]`)
//! offset  size  field
//!      0     8  magic  b"RFNGUARD"
//!      8     2  mark version (little endian), this layout: 1
//!     10     2  frame version it speaks (little endian)
//!     12     2  receipt version it writes (little endian)
//!     14     2  zero
//! ```
//!
//! # Caveats
//! Any file can contain these bytes: the mark says "this claims to be a guardian", and a claim
//! is all it is. The stopper never treats it as an exemption: a process carrying it is only
//! given a bounded time to end by itself before it is killed like any member.

/// The name of the section holding [`MARK`].
pub const SECTION: &str = ".refine.guardian";
/// The section's first bytes.
pub const MAGIC: [u8; 8] = *b"RFNGUARD";
/// The layout version of the mark.
pub const MARK_VERSION: u16 = 1;
/// The mark's length.
pub const MARK_LEN: usize = 16;

const fn le(v: u16) -> [u8; 2] {
    v.to_le_bytes()
}

/// The mark this build of the guardian carries.
pub const MARK: [u8; MARK_LEN] = {
    let mut m = [0u8; MARK_LEN];
    let mut i = 0;
    while i < 8 {
        m[i] = MAGIC[i];
        i += 1;
    }
    let v = le(MARK_VERSION);
    let f = le(crate::frame::FRAME_VERSION);
    let r = le(crate::receipt::RECEIPT_VERSION);
    m[8] = v[0];
    m[9] = v[1];
    m[10] = f[0];
    m[11] = f[1];
    m[12] = r[0];
    m[13] = r[1];
    m
};

/// Whether `bytes` (a section's contents) is a guardian's mark, of this layout version or a
/// later one (a later guardian still ends its scope with a receipt).
pub fn is_mark(bytes: &[u8]) -> bool {
    bytes.len() >= MARK_LEN
        && bytes[..8] == MAGIC
        && u16::from_le_bytes([bytes[8], bytes[9]]) >= MARK_VERSION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_is_recognised_and_a_wrong_magic_is_not() {
        assert!(is_mark(&MARK));
        let mut bad = MARK;
        bad[0] ^= 1;
        assert!(!is_mark(&bad));
        assert!(!is_mark(&MARK[..MARK_LEN - 1]));
    }
}
