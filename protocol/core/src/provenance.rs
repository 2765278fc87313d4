//! A binary's provenance (SPEC V1): the package version, the commit it was built from, whether
//! its sources differed from that commit, and its class (`release` only for a clean build of
//! the commit tagged with the version, `source` otherwise). Built at compile time from what the
//! build script found (`refine-build-info`: `REFINE_BUILD_COMMIT`, `REFINE_BUILD_DIRTY`,
//! `REFINE_BUILD_CLASS`), carried by the guardian in a section of its own and in its `Hello`.
//!
//! ```text
//! section  .refine.provenance   (SHT_PROGBITS, allocated, kept by the linker: `#[used]`)
//! offset  size  field
//!      0     8  magic  b"RFNPROV\0"
//!      8     2  layout version (little endian): 1
//!     10     1  dirty: 0 clean, 1 dirty, 2 unknown
//!     11     1  class: 0 source, 1 release
//!     12     1  version length (1..=32)
//!     13     1  commit length: 0 unknown, 40 (SHA-1) or 64 (SHA-256)
//!     14     2  zero
//!     16    32  version: printable ASCII, zero padded
//!     48    64  commit: lowercase hex, zero padded
//! ```
//!
//! # Caveats
//! It says what the build script saw, no more: a build outside git has an unknown commit and
//! tree (and is `source`), never a guessed one. A file can carry any bytes; a decoder only
//! promises the layout is well formed (printable, bounded), so its text is still escaped before
//! it reaches a terminal.

use crate::codec::Reader;
use crate::DecodeError;

/// The name of the guardian's section holding its [`Provenance`].
pub const SECTION: &str = ".refine.provenance";
/// The layout's first bytes.
pub const MAGIC: [u8; 8] = *b"RFNPROV\0";
/// The layout's version.
pub const LAYOUT_VERSION: u16 = 1;
/// The layout's length.
pub const LEN: usize = 112;
/// Longest version text.
pub const MAX_VERSION: usize = 32;
/// Longest commit id (SHA-256, in hex).
pub const MAX_COMMIT: usize = 64;

const VERSION_AT: usize = 16;
const COMMIT_AT: usize = VERSION_AT + MAX_VERSION;

/// A build's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// A clean build of the commit tagged with the package's version.
    Release,
    /// Any other build.
    Source,
}

impl Class {
    /// The class's one name (`release`, `source`), as serde writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Class::Release => "release",
            Class::Source => "source",
        }
    }
}

/// One binary's provenance, always well formed (see the layout above).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Provenance {
    bytes: [u8; LEN],
}

impl core::fmt::Debug for Provenance {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Provenance")
            .field("version", &self.version())
            .field("commit", &self.commit())
            .field("dirty", &self.dirty())
            .field("class", &self.class())
            .finish()
    }
}

const fn eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn printable(b: u8) -> bool {
    b.is_ascii_graphic()
}

const fn hex(b: u8) -> bool {
    b.is_ascii_digit() || (b >= b'a' && b <= b'f')
}

/// Why [`Provenance::new`] refused its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProvenanceError {
    /// The version is empty, longer than [`MAX_VERSION`], or not printable ASCII.
    Version,
    /// The commit is not 40 or 64 lowercase hex digits.
    Commit,
}

impl Provenance {
    /// The provenance of `version` built from `commit` (`None`: unknown) with a tree that was
    /// `dirty` (`None`: unknown), of `class`. A release needs a known commit and a clean tree:
    /// anything else asked for as a release is recorded as `source`.
    pub const fn new(
        version: &str,
        commit: Option<&str>,
        dirty: Option<bool>,
        class: Class,
    ) -> Result<Provenance, ProvenanceError> {
        let v = version.as_bytes();
        if v.is_empty() || v.len() > MAX_VERSION {
            return Err(ProvenanceError::Version);
        }
        let mut b = [0u8; LEN];
        let mut i = 0;
        while i < 8 {
            b[i] = MAGIC[i];
            i += 1;
        }
        let lv = LAYOUT_VERSION.to_le_bytes();
        b[8] = lv[0];
        b[9] = lv[1];
        b[10] = match dirty {
            Some(false) => 0,
            Some(true) => 1,
            None => 2,
        };
        let release =
            matches!(class, Class::Release) && commit.is_some() && matches!(dirty, Some(false));
        b[11] = if release { 1 } else { 0 };
        b[12] = v.len() as u8;
        let mut i = 0;
        while i < v.len() {
            if !printable(v[i]) {
                return Err(ProvenanceError::Version);
            }
            b[VERSION_AT + i] = v[i];
            i += 1;
        }
        if let Some(c) = commit {
            let c = c.as_bytes();
            if c.len() != 40 && c.len() != 64 {
                return Err(ProvenanceError::Commit);
            }
            b[13] = c.len() as u8;
            let mut i = 0;
            while i < c.len() {
                if !hex(c[i]) {
                    return Err(ProvenanceError::Commit);
                }
                b[COMMIT_AT + i] = c[i];
                i += 1;
            }
        }
        Ok(Provenance { bytes: b })
    }

    /// The provenance a build script handed the compiler (`REFINE_BUILD_*`, see the module
    /// docs): `commit` empty is unknown, `dirty` is `true`, `false` or anything else (unknown),
    /// `class` is `release` or anything else (source). For a `const`: bad input fails the build.
    pub const fn from_build(version: &str, commit: &str, dirty: &str, class: &str) -> Provenance {
        let commit = if commit.is_empty() {
            None
        } else {
            Some(commit)
        };
        let dirty = if eq(dirty.as_bytes(), b"true") {
            Some(true)
        } else if eq(dirty.as_bytes(), b"false") {
            Some(false)
        } else {
            None
        };
        let class = if eq(class.as_bytes(), b"release") {
            Class::Release
        } else {
            Class::Source
        };
        match Provenance::new(version, commit, dirty, class) {
            Ok(p) => p,
            Err(ProvenanceError::Version) => {
                panic!("the package version is not printable ASCII of at most 32 bytes")
            }
            Err(ProvenanceError::Commit) => panic!("REFINE_BUILD_COMMIT is not a commit id"),
        }
    }

    /// The layout's bytes.
    pub const fn as_bytes(&self) -> &[u8; LEN] {
        &self.bytes
    }

    /// Decodes exactly [`LEN`] bytes (more is [`DecodeError::TrailingBytes`]).
    pub fn decode(buf: &[u8]) -> Result<Provenance, DecodeError> {
        let mut r = Reader::new(buf);
        let p = Provenance::read(&mut r)?;
        r.finish()?;
        Ok(p)
    }

    /// Reads the layout from `r` (its next [`LEN`] bytes).
    pub fn read(r: &mut Reader<'_>) -> Result<Provenance, DecodeError> {
        let bytes: [u8; LEN] = r.array()?;
        if bytes[..8] != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        if version != LAYOUT_VERSION {
            return Err(DecodeError::UnsupportedVersion {
                got: version,
                max: LAYOUT_VERSION,
            });
        }
        let invalid = |field| Err(DecodeError::InvalidField { field });
        if bytes[10] > 2 {
            return invalid("provenance dirty flag");
        }
        let (vlen, clen) = (usize::from(bytes[12]), usize::from(bytes[13]));
        if vlen == 0 || vlen > MAX_VERSION {
            return invalid("provenance version");
        }
        if !matches!(clen, 0 | 40 | 64) {
            return invalid("provenance commit");
        }
        let release_ok = bytes[10] == 0 && clen != 0;
        if bytes[11] > 1 || (bytes[11] == 1 && !release_ok) {
            return invalid("provenance class");
        }
        if bytes[14..16] != [0, 0] {
            return invalid("provenance reserved");
        }
        let (v, vpad) = bytes[VERSION_AT..COMMIT_AT].split_at(vlen);
        if !v.iter().all(|&b| printable(b)) || vpad.iter().any(|&b| b != 0) {
            return invalid("provenance version");
        }
        let (c, cpad) = bytes[COMMIT_AT..].split_at(clen);
        if !c.iter().all(|&b| hex(b)) || cpad.iter().any(|&b| b != 0) {
            return invalid("provenance commit");
        }
        Ok(Provenance { bytes })
    }

    /// The package version.
    pub fn version(&self) -> &str {
        let n = usize::from(self.bytes[12]);
        // Checked printable ASCII when built or decoded.
        core::str::from_utf8(&self.bytes[VERSION_AT..VERSION_AT + n]).unwrap_or("")
    }

    /// The commit id; `None`: unknown (a build outside git).
    pub fn commit(&self) -> Option<&str> {
        let n = usize::from(self.bytes[13]);
        if n == 0 {
            return None;
        }
        core::str::from_utf8(&self.bytes[COMMIT_AT..COMMIT_AT + n]).ok()
    }

    /// Whether the sources differed from the commit; `None`: unknown.
    pub fn dirty(&self) -> Option<bool> {
        match self.bytes[10] {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    pub fn class(&self) -> Class {
        if self.bytes[11] == 1 {
            Class::Release
        } else {
            Class::Source
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA1: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn what_the_build_script_said_is_what_reads_back() {
        let p = Provenance::from_build("0.1.0", SHA1, "false", "release");
        assert_eq!(p.version(), "0.1.0");
        assert_eq!(p.commit(), Some(SHA1));
        assert_eq!(p.dirty(), Some(false));
        assert_eq!(p.class(), Class::Release);
        assert_eq!(Provenance::decode(p.as_bytes()), Ok(p));

        let outside = Provenance::from_build("0.1.0", "", "unknown", "source");
        assert_eq!(outside.commit(), None);
        assert_eq!(outside.dirty(), None);
        assert_eq!(outside.class(), Class::Source);
        assert_eq!(Provenance::decode(outside.as_bytes()), Ok(outside));
    }

    #[test]
    fn a_release_needs_a_known_commit_and_a_clean_tree() {
        let dirty = Provenance::new("1.0.0", Some(SHA1), Some(true), Class::Release).unwrap();
        assert_eq!(dirty.class(), Class::Source);
        let unknown = Provenance::new("1.0.0", None, Some(false), Class::Release).unwrap();
        assert_eq!(unknown.class(), Class::Source);
    }

    #[test]
    fn bad_input_is_refused_with_a_typed_error() {
        assert_eq!(
            Provenance::new("", None, None, Class::Source),
            Err(ProvenanceError::Version)
        );
        assert_eq!(
            Provenance::new("1.0\u{1b}", None, None, Class::Source),
            Err(ProvenanceError::Version)
        );
        assert_eq!(
            Provenance::new("1", Some("abc"), None, Class::Source),
            Err(ProvenanceError::Commit)
        );
        let good = *Provenance::from_build("0.1.0", SHA1, "false", "release").as_bytes();
        let with = |at: usize, v: u8| {
            let mut b = good;
            b[at] = v;
            Provenance::decode(&b)
        };
        assert_eq!(with(0, b'X'), Err(DecodeError::BadMagic));
        assert_eq!(
            with(8, 2),
            Err(DecodeError::UnsupportedVersion { got: 2, max: 1 })
        );
        assert!(matches!(with(10, 3), Err(DecodeError::InvalidField { .. })));
        // A release that is dirty is not well formed.
        assert!(matches!(with(10, 1), Err(DecodeError::InvalidField { .. })));
        assert!(matches!(with(12, 0), Err(DecodeError::InvalidField { .. })));
        assert!(matches!(
            with(12, 33),
            Err(DecodeError::InvalidField { .. })
        ));
        assert!(matches!(
            with(13, 41),
            Err(DecodeError::InvalidField { .. })
        ));
        assert!(matches!(with(14, 1), Err(DecodeError::InvalidField { .. })));
        assert!(matches!(
            with(16, 0x1b),
            Err(DecodeError::InvalidField { .. })
        ));
        assert!(matches!(
            with(30, b'x'),
            Err(DecodeError::InvalidField { .. })
        ));
        assert!(matches!(
            with(48, b'G'),
            Err(DecodeError::InvalidField { .. })
        ));
        assert!(matches!(
            with(100, b'a'),
            Err(DecodeError::InvalidField { .. })
        ));
        assert!(matches!(
            Provenance::decode(&good[..LEN - 1]),
            Err(DecodeError::Truncated { .. })
        ));
        let mut long = [0u8; LEN + 1];
        long[..LEN].copy_from_slice(&good);
        assert_eq!(
            Provenance::decode(&long),
            Err(DecodeError::TrailingBytes { extra: 1 })
        );
    }
}
