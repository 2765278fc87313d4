//! Typed codec errors. No variant carries a heap string: the guardian reports them as static text.

use core::fmt;

/// Why bytes could not be decoded. Every decoder in this crate returns one of these, never panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The input ends before a field of `need` bytes; `have` bytes were left.
    Truncated { need: usize, have: usize },
    /// A length field (or the input itself) exceeds the format's maximum.
    Oversized { len: usize, max: usize },
    /// The leading magic is not this format's.
    BadMagic,
    /// A version this reader does not understand (newer, or zero).
    UnsupportedVersion { got: u16, max: u16 },
    /// The stored checksum does not match the bytes.
    BadChecksum { stored: u32, computed: u32 },
    /// Bytes remain after a complete value.
    TrailingBytes { extra: usize },
    /// A field holds a value outside its domain (unknown frame kind, status tag, a string without
    /// its terminating NUL, ...).
    InvalidField { field: &'static str },
}

impl DecodeError {
    /// A static one-line description, for contexts that cannot format (the guardian).
    pub const fn as_str(&self) -> &'static str {
        match self {
            DecodeError::Truncated { .. } => "truncated input",
            DecodeError::Oversized { .. } => "length exceeds maximum",
            DecodeError::BadMagic => "wrong magic",
            DecodeError::UnsupportedVersion { .. } => "unsupported version",
            DecodeError::BadChecksum { .. } => "checksum mismatch",
            DecodeError::TrailingBytes { .. } => "trailing bytes after value",
            DecodeError::InvalidField { .. } => "invalid field",
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DecodeError::Truncated { need, have } => {
                write!(f, "truncated input: need {need} bytes, have {have}")
            }
            DecodeError::Oversized { len, max } => {
                write!(f, "length {len} exceeds maximum {max}")
            }
            DecodeError::BadMagic => f.write_str("wrong magic"),
            DecodeError::UnsupportedVersion { got, max } => {
                write!(
                    f,
                    "unsupported version {got} (this reader understands up to {max})"
                )
            }
            DecodeError::BadChecksum { stored, computed } => {
                write!(
                    f,
                    "checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
                )
            }
            DecodeError::TrailingBytes { extra } => write!(f, "{extra} trailing bytes after value"),
            DecodeError::InvalidField { field } => write!(f, "invalid field: {field}"),
        }
    }
}

impl core::error::Error for DecodeError {}

/// Why a value could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError {
    /// The output buffer holds `have` bytes, `need` are required.
    BufferTooSmall { need: usize, have: usize },
    /// The encoded value would exceed the format's maximum.
    Oversized { len: usize, max: usize },
    /// A string meant to be NUL-terminated for the kernel contains a NUL.
    InteriorNul { field: &'static str },
    /// [`crate::Frame::Launch`] is encoded from its parts with [`crate::frame::encode_launch`].
    UseEncodeLaunch,
    /// A field holds a value its decoder would reject (a signal outside 1..=64, a start timeout
    /// past the guardian's bound, ...): nothing is written that cannot be read back.
    InvalidField { field: &'static str },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EncodeError::BufferTooSmall { need, have } => {
                write!(f, "output buffer too small: need {need} bytes, have {have}")
            }
            EncodeError::Oversized { len, max } => {
                write!(f, "encoded length {len} exceeds maximum {max}")
            }
            EncodeError::InteriorNul { field } => write!(f, "{field} contains a NUL byte"),
            EncodeError::UseEncodeLaunch => {
                f.write_str("launch frames are encoded with encode_launch")
            }
            EncodeError::InvalidField { field } => {
                write!(f, "{field} holds a value its reader would reject")
            }
        }
    }
}

impl core::error::Error for EncodeError {}
