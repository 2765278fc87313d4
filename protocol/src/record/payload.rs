//! The records' payload decoder: bincode 2's standard configuration (what [`super`] encodes with
//! `bincode::serde`), read by a serde deserializer that checks every declared length against the
//! bytes that remain before anything is allocated.
//!
//! Why not bincode's own decoder: bincode 2.0.1 allocates a string or byte vector at its declared
//! length before reading it (only its decode limit bounded that: 16 MiB for a 59-byte record),
//! and hands a sequence's declared length to serde as its size hint (serde preallocates up to
//! 1 MiB from it). Here a string, byte vector, sequence or map that declares more than remain is
//! refused first ([`DecodeError::Truncated`]), a string allocates only bytes present in the input,
//! and sequences give no size hint: they grow with the elements actually decoded, each of which
//! takes at least one byte. So a decode allocates a small multiple of its input: what the decoded
//! value itself costs in memory (a one-byte empty string is a 24-byte `String`).
//!
//! # Format (bincode 2, standard configuration)
//!
//! ```text
//! u8, i8            one byte
//! bool, Option tag  one byte, 0 or 1
//! u16 u32 u64 usize varint: < 251 itself; 251 + u16, 252 + u32, 253 + u64 (little-endian)
//! i16 i32 i64       zigzag (0, -1, 1, -2, ... as 0, 1, 2, 3, ...), then varint
//! f32, f64          little-endian IEEE 754
//! char              its UTF-8 bytes
//! str, bytes        varint length, then the bytes
//! seq, map          varint count, then the elements (map: key, value, key, value, ...)
//! enum              varint u32 variant index, then the variant's fields
//! struct, tuple     the fields in order (an array is a tuple)
//! ```
//!
//! # Caveats
//! The count check assumes every element takes at least one byte on the wire, true of every
//! record type here (no sequence of unit or empty structs). Not self-describing:
//! `deserialize_any` is refused, as bincode refuses it.

use core::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

use crate::codec::Reader;
use crate::DecodeError;

/// Decodes a whole payload; bytes left over are [`DecodeError::TrailingBytes`]. Anything the
/// format does not allow (an unknown variant, a bool of 2, text that is not UTF-8) is
/// [`DecodeError::InvalidField`] naming `field`.
pub(super) fn decode<T: de::DeserializeOwned>(
    payload: &[u8],
    field: &'static str,
) -> Result<T, DecodeError> {
    let mut d = Deserializer {
        r: Reader::new(payload),
    };
    let value = T::deserialize(&mut d).map_err(|e| e.into_decode(field))?;
    d.r.finish()?;
    Ok(value)
}

/// A decode failure: a typed [`DecodeError`], or serde's word that a value is outside its type.
#[derive(Debug)]
pub(super) enum Error {
    Decode(DecodeError),
    Invalid,
}

impl Error {
    fn into_decode(self, field: &'static str) -> DecodeError {
        match self {
            Error::Decode(e) => e,
            Error::Invalid => DecodeError::InvalidField { field },
        }
    }
}

impl From<DecodeError> for Error {
    fn from(e: DecodeError) -> Self {
        Error::Decode(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Decode(e) => e.fmt(f),
            Error::Invalid => f.write_str("value outside its type"),
        }
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Error::Invalid
    }
}

struct Deserializer<'de> {
    r: Reader<'de>,
}

const U16_BYTE: u8 = 251;
const U32_BYTE: u8 = 252;
const U64_BYTE: u8 = 253;

impl<'de> Deserializer<'de> {
    fn varint(&mut self) -> Result<u64, Error> {
        Ok(match self.r.u8()? {
            b @ 0..=250 => u64::from(b),
            U16_BYTE => u64::from(self.r.u16()?),
            U32_BYTE => u64::from(self.r.u32()?),
            U64_BYTE => self.r.u64()?,
            _ => return Err(Error::Invalid),
        })
    }

    fn unsigned<T: TryFrom<u64>>(&mut self) -> Result<T, Error> {
        T::try_from(self.varint()?).map_err(|_| Error::Invalid)
    }

    /// Zigzag over the unsigned varint of the same width (`U`), as bincode writes it.
    fn signed<U: TryFrom<u64>, T: TryFrom<i64>>(&mut self) -> Result<T, Error> {
        let n = self.varint()?;
        U::try_from(n).map_err(|_| Error::Invalid)?;
        let v = if n & 1 == 0 {
            (n / 2) as i64
        } else {
            !((n / 2) as i64)
        };
        T::try_from(v).map_err(|_| Error::Invalid)
    }

    /// A declared length, refused when more than the bytes that remain (each byte of a string,
    /// each element of a sequence, takes at least one).
    fn len(&mut self) -> Result<usize, Error> {
        let len = self.varint()?;
        let have = self.r.remaining();
        match usize::try_from(len) {
            Ok(len) if len <= have => Ok(len),
            _ => Err(DecodeError::Truncated {
                need: usize::try_from(len).unwrap_or(usize::MAX),
                have,
            }
            .into()),
        }
    }

    fn bytes(&mut self) -> Result<&'de [u8], Error> {
        let len = self.len()?;
        Ok(self.r.bytes(len)?)
    }

    fn str(&mut self) -> Result<&'de str, Error> {
        core::str::from_utf8(self.bytes()?).map_err(|_| Error::Invalid)
    }
}

impl<'de> de::Deserializer<'de> for &mut Deserializer<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error::Invalid)
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error::Invalid)
    }
    fn deserialize_identifier<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error::Invalid)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.r.u8()? {
            0 => v.visit_bool(false),
            1 => v.visit_bool(true),
            _ => Err(Error::Invalid),
        }
    }
    fn deserialize_u8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_u8(self.r.u8()?)
    }
    fn deserialize_i8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_i8(self.r.u8()? as i8)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_u16(self.unsigned()?)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_u32(self.unsigned()?)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_u64(self.varint()?)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_i16(self.signed::<u16, i16>()?)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_i32(self.signed::<u32, i32>()?)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_i64(self.signed::<u64, i64>()?)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_f32(f32::from_bits(self.r.u32()?))
    }
    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_f64(f64::from_bits(self.r.u64()?))
    }
    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        let width = match self.r.clone().u8()? {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            _ => return Err(Error::Invalid),
        };
        let s = core::str::from_utf8(self.r.bytes(width)?).map_err(|_| Error::Invalid)?;
        v.visit_char(s.chars().next().ok_or(Error::Invalid)?)
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_borrowed_str(self.str()?)
    }
    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_borrowed_str(self.str()?)
    }
    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_borrowed_bytes(self.bytes()?)
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_borrowed_bytes(self.bytes()?)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.r.u8()? {
            0 => v.visit_none(),
            1 => v.visit_some(self),
            _ => Err(Error::Invalid),
        }
    }
    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_unit()
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_unit()
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        let left = self.len()?;
        v.visit_seq(Elements { d: self, left })
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, Error> {
        v.visit_seq(Elements { d: self, left: len })
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        len: usize,
        v: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_tuple(len, v)
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_tuple(fields.len(), v)
    }
    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        let left = self.len()?;
        v.visit_map(Elements { d: self, left })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_enum(self)
    }

    fn is_human_readable(&self) -> bool {
        false
    }
}

/// The elements of a sequence, tuple or struct, or the entries of a map: `left` more.
struct Elements<'a, 'de> {
    d: &'a mut Deserializer<'de>,
    left: usize,
}

impl<'de> de::SeqAccess<'de> for Elements<'_, 'de> {
    type Error = Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.d).map(Some)
    }
    // No size hint: a collection grows with what decodes, never from a declared count.
}

impl<'de> de::MapAccess<'de> for Elements<'_, 'de> {
    type Error = Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.d).map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        seed.deserialize(&mut *self.d)
    }
}

impl<'de> de::EnumAccess<'de> for &mut Deserializer<'de> {
    type Error = Error;
    type Variant = Self;
    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), Error> {
        let index: u32 = self.unsigned()?;
        let value = seed.deserialize(IntoDeserializer::<Error>::into_deserializer(index))?;
        Ok((value, self))
    }
}

impl<'de> de::VariantAccess<'de> for &mut Deserializer<'de> {
    type Error = Error;
    fn unit_variant(self) -> Result<(), Error> {
        Ok(())
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        seed.deserialize(self)
    }
    fn tuple_variant<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_tuple(self, len, v)
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_tuple(self, fields.len(), v)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;

    /// Every shape of the serde data model the records use, decoded as bincode encoded it.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum E {
        Unit,
        New(i32),
        Tuple(u8, i64),
        Struct { a: u16, b: Option<String> },
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct All {
        b: bool,
        u8: u8,
        i8: i8,
        u16: u16,
        u32: u32,
        u64: u64,
        i16: i16,
        i32: i32,
        i64: i64,
        f32: f32,
        f64: f64,
        c: [char; 4],
        s: String,
        v: Vec<Vec<u8>>,
        m: std::collections::BTreeMap<String, E>,
        o: Option<Box<All>>,
        arr: [u8; 16],
        unit: (),
    }

    fn sample(depth: u8) -> All {
        All {
            b: depth & 1 == 0,
            u8: 250,
            i8: -128,
            u16: 251,
            u32: 65_536,
            u64: u64::MAX,
            i16: i16::MIN,
            i32: -126,
            i64: i64::MIN,
            f32: 1.5,
            f64: -9.889e30,
            c: ['a', 'é', '€', '🦀'],
            s: "text".into(),
            v: vec![vec![], vec![0, 255]],
            m: [
                ("u".to_string(), E::Unit),
                ("n".to_string(), E::New(i32::MIN)),
                ("t".to_string(), E::Tuple(7, -1)),
                (
                    "s".to_string(),
                    E::Struct {
                        a: 300,
                        b: Some("x".into()),
                    },
                ),
            ]
            .into(),
            o: (depth > 0).then(|| Box::new(sample(depth - 1))),
            arr: [9; 16],
            unit: (),
        }
    }

    #[test]
    fn decodes_what_bincode_encodes() {
        let value = sample(2);
        let bytes = bincode::serde::encode_to_vec(&value, bincode::config::standard()).unwrap();
        assert_eq!(decode::<All>(&bytes, "all").unwrap(), value);
        for n in [0i64, 1, -1, 124, -125, 125, -126, i64::MAX, i64::MIN] {
            let bytes = bincode::serde::encode_to_vec(n, bincode::config::standard()).unwrap();
            assert_eq!(decode::<i64>(&bytes, "n").unwrap(), n);
        }
        for n in [0u64, 250, 251, 65_535, 65_536, u32::MAX as u64, u64::MAX] {
            let bytes = bincode::serde::encode_to_vec(n, bincode::config::standard()).unwrap();
            assert_eq!(decode::<u64>(&bytes, "n").unwrap(), n);
        }
    }

    #[test]
    fn refuses_a_length_past_the_input_before_allocating() {
        // A string of u64::MAX bytes, a sequence of 2^32, a map of 300 entries: in 1..9 bytes.
        let huge = [U64_BYTE, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            decode::<String>(&huge, "s"),
            Err(DecodeError::Truncated { have: 0, .. })
        ));
        let seq = [U64_BYTE, 0, 0, 0, 0, 1, 0, 0, 0, 1];
        assert_eq!(
            decode::<Vec<u8>>(&seq, "v"),
            Err(DecodeError::Truncated {
                need: 1 << 32,
                have: 1
            })
        );
        let map = [U16_BYTE, 44, 1, 0, 0];
        assert!(matches!(
            decode::<std::collections::BTreeMap<String, String>>(&map, "m"),
            Err(DecodeError::Truncated { need: 300, .. })
        ));
        // Not a bool, not an Option tag, not UTF-8, an unknown variant, trailing bytes.
        assert_eq!(
            decode::<bool>(&[2], "b"),
            Err(DecodeError::InvalidField { field: "b" })
        );
        assert!(decode::<Option<u8>>(&[2, 0], "o").is_err());
        assert!(decode::<String>(&[1, 0xff], "s").is_err());
        assert!(decode::<E>(&[4], "e").is_err());
        assert_eq!(
            decode::<u8>(&[1, 2], "u"),
            Err(DecodeError::TrailingBytes { extra: 1 })
        );
        // A varint wider than its type.
        assert!(decode::<u16>(&[U32_BYTE, 0, 0, 1, 0], "u").is_err());
        assert!(decode::<u8>(&[], "u").is_err());
    }
}
