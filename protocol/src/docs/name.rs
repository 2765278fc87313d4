//! Names from serde, and nowhere else: the one name of an enum's variant is the one its
//! `#[derive(Serialize)]` writes (`rename_all` applied), read back by a serializer that keeps
//! only the variant's name. Views print it, records store it, metrics label by it; no table of
//! names sits beside the derive.

use std::fmt;

use serde::ser::{self, Impossible, Serialize, Serializer};

/// The serialized name of `value`'s variant: a unit variant's string, or the tag of a newtype,
/// tuple or struct variant of an externally tagged enum. `None` for anything else (a struct,
/// a number, an internally tagged or untagged enum).
pub fn variant_name<T: Serialize + ?Sized>(value: &T) -> Option<&'static str> {
    value.serialize(VariantName).ok()
}

struct VariantName;

#[derive(Debug)]
struct NotAVariant;

impl fmt::Display for NotAVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not an enum variant")
    }
}

impl std::error::Error for NotAVariant {}

impl ser::Error for NotAVariant {
    fn custom<T: fmt::Display>(_: T) -> Self {
        NotAVariant
    }
}

/// The data of a tuple or struct variant, ignored: only its name is kept.
struct Fields(&'static str);

impl ser::SerializeTupleVariant for Fields {
    type Ok = &'static str;
    type Error = NotAVariant;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, _: &T) -> Result<(), NotAVariant> {
        Ok(())
    }
    fn end(self) -> Result<&'static str, NotAVariant> {
        Ok(self.0)
    }
}

impl ser::SerializeStructVariant for Fields {
    type Ok = &'static str;
    type Error = NotAVariant;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _: &'static str,
        _: &T,
    ) -> Result<(), NotAVariant> {
        Ok(())
    }
    fn end(self) -> Result<&'static str, NotAVariant> {
        Ok(self.0)
    }
}

macro_rules! refuse {
    ($($f:ident($t:ty)),* $(,)?) => {
        $(fn $f(self, _: $t) -> Result<&'static str, NotAVariant> {
            Err(NotAVariant)
        })*
    };
}

impl Serializer for VariantName {
    type Ok = &'static str;
    type Error = NotAVariant;
    type SerializeSeq = Impossible<&'static str, NotAVariant>;
    type SerializeTuple = Impossible<&'static str, NotAVariant>;
    type SerializeTupleStruct = Impossible<&'static str, NotAVariant>;
    type SerializeTupleVariant = Fields;
    type SerializeMap = Impossible<&'static str, NotAVariant>;
    type SerializeStruct = Impossible<&'static str, NotAVariant>;
    type SerializeStructVariant = Fields;

    refuse!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );

    fn serialize_none(self) -> Result<&'static str, NotAVariant> {
        Err(NotAVariant)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<&'static str, NotAVariant> {
        Err(NotAVariant)
    }
    fn serialize_unit(self) -> Result<&'static str, NotAVariant> {
        Err(NotAVariant)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<&'static str, NotAVariant> {
        Ok(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<&'static str, NotAVariant> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: &T,
    ) -> Result<&'static str, NotAVariant> {
        Ok(variant)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, NotAVariant> {
        Err(NotAVariant)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, NotAVariant> {
        Err(NotAVariant)
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, NotAVariant> {
        Err(NotAVariant)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Fields, NotAVariant> {
        Ok(Fields(variant))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, NotAVariant> {
        Err(NotAVariant)
    }
    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, NotAVariant> {
        Err(NotAVariant)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Fields, NotAVariant> {
        Ok(Fields(variant))
    }
    fn collect_str<T: fmt::Display + ?Sized>(self, _: &T) -> Result<&'static str, NotAVariant> {
        Err(NotAVariant)
    }
}

/// A closed set of names: every variant, and each one's serde name.
pub trait Vocabulary: Copy + Serialize + 'static {
    /// Every variant, in declaration order.
    const ALL: &'static [Self];
    /// What the set names, for an error about a name it does not hold (`launch outcome`).
    const WHAT: &'static str;

    /// The variant's name, as serde writes it.
    fn name(self) -> &'static str {
        variant_name(&self).unwrap_or_default()
    }

    /// The name in words, for a human view (`already_exited` → `already exited`).
    fn words(self) -> String {
        self.name().replace('_', " ")
    }

    /// The variant of that name.
    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.name() == name)
    }

    /// Every name, in declaration order.
    fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|v| v.name()).collect()
    }
}

/// A [`Vocabulary`] field stored as its name (a string in every format, bincode included):
/// `#[serde(with = "by_name")]`. A record written when the field was a plain string reads the
/// same; a name the set does not hold is refused as invalid data.
pub mod by_name {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    use super::Vocabulary;

    pub fn serialize<T: Vocabulary, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v.name())
    }

    pub fn deserialize<'de, T: Vocabulary, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        let name = String::deserialize(d)?;
        T::from_name(&name)
            .ok_or_else(|| D::Error::custom(format_args!("{name:?} is not a {}", T::WHAT)))
    }
}

/// Declares a closed, field-less enum of the contract: serde's `snake_case` names, a
/// [`Vocabulary`] (every variant and its name), `Display` through that name, and (feature
/// `schema`) its JSON Schema.
#[macro_export]
#[doc(hidden)]
macro_rules! vocabulary {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident: $what:literal {
            $($(#[$vmeta:meta])* $variant:ident,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash,
            serde::Serialize, serde::Deserialize,
        )]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        #[serde(rename_all = "snake_case")]
        $vis enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $crate::docs::Vocabulary for $name {
            const ALL: &'static [Self] = &[$($name::$variant),*];
            const WHAT: &'static str = $what;
        }

        impl $name {
            /// The variant's name, as serde writes it.
            pub fn name(self) -> &'static str {
                $crate::docs::Vocabulary::name(self)
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}
