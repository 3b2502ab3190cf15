//! Compact JSON writer for the stream's wire types: the same bytes as `serde_json::to_writer`
//! (compact formatter), written with less work per string.
//!
//! A chunk is mostly short strings: a dozen keys and a few values such as the response ID and a
//! one-token delta. serde_json escapes each through its generic `io::Write` path, which costs
//! more per string than the string's bytes do; here a string without anything to escape (nearly
//! all of them) is checked with one table lookup per byte and copied in one piece into the output
//! buffer. Numbers go through serde_json's own [`CompactFormatter`], so integers and floats are
//! spelled exactly as serde_json spells them; non-finite floats are `null`, as there.
//!
//! Debug builds check every write against `serde_json::to_vec` (see [`write`]), so the whole test
//! suite exercises the equivalence on every chunk and event it produces.

use serde::ser::{self, Serialize};
use serde_json::ser::{CompactFormatter, Formatter};

/// Append the compact JSON of `value` to `out`.
pub fn write<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result<(), Error> {
    #[cfg(debug_assertions)]
    let start = out.len();
    value.serialize(&mut Writer { out })?;
    #[cfg(debug_assertions)]
    if let Ok(reference) = serde_json::to_vec(value) {
        debug_assert!(
            out[start..] == reference[..],
            "wire_json differs from serde_json:\n{}\n{}",
            String::from_utf8_lossy(&out[start..]),
            String::from_utf8_lossy(&reference)
        );
    }
    Ok(())
}

/// A value that cannot be written as JSON (a map key that is not a string, number, bool or
/// char; 128-bit integers are supported by serde_json only with its `arbitrary_precision`).
#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

/// Bytes a JSON string must escape: 0 passes, otherwise the letter of the short escape
/// (`b'u'` for `\u00XX`). The same table as serde_json's.
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0a] = b'n';
    t[0x0c] = b'f';
    t[0x0d] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// `s` as a quoted, escaped JSON string. Most strings of a chunk are keys and short values with
/// nothing to escape: those are copied byte by byte into reserved space (a `memcpy` call costs
/// more than a few bytes do); longer ones are scanned first and copied in runs.
fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    if bytes.len() <= 24 {
        for (i, &b) in bytes.iter().enumerate() {
            if ESCAPE[b as usize] != 0 {
                return write_escaped(out, &bytes[i..]);
            }
            out.push(b);
        }
        out.push(b'"');
        return;
    }
    write_escaped(out, bytes);
}

/// The rest of a string whose opening quote is written: runs without escapes copied whole.
fn write_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc = ESCAPE[b as usize];
        if esc == 0 {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        if esc == b'u' {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 0xf) as usize],
            ]);
        } else {
            out.extend_from_slice(&[b'\\', esc]);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

/// An open array or object: whether an element was written (a comma goes before the next).
pub struct Compound<'w, 'a> {
    w: &'w mut Writer<'a>,
    first: bool,
    /// An object opened by a `{"variant":` wrapper, which needs its own closing brace.
    wrapped: bool,
}

impl Compound<'_, '_> {
    fn comma(&mut self) {
        if !self.first {
            self.w.out.push(b',');
        }
        self.first = false;
    }
}

macro_rules! number {
    ($($method:ident($ty:ty) => $write:ident;)*) => {
        $(fn $method(self, v: $ty) -> Result<(), Error> {
            CompactFormatter.$write(self.out, v).map_err(|e| Error(e.to_string()))
        })*
    };
}

impl<'w, 'a> ser::Serializer for &'w mut Writer<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'w, 'a>;
    type SerializeTuple = Compound<'w, 'a>;
    type SerializeTupleStruct = Compound<'w, 'a>;
    type SerializeTupleVariant = Compound<'w, 'a>;
    type SerializeMap = Compound<'w, 'a>;
    type SerializeStruct = Compound<'w, 'a>;
    type SerializeStructVariant = Compound<'w, 'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    number! {
        serialize_i8(i8) => write_i8;
        serialize_i16(i16) => write_i16;
        serialize_i32(i32) => write_i32;
        serialize_i64(i64) => write_i64;
        serialize_u8(u8) => write_u8;
        serialize_u16(u16) => write_u16;
        serialize_u32(u32) => write_u32;
        serialize_u64(u64) => write_u64;
        serialize_i128(i128) => write_i128;
        serialize_u128(u128) => write_u128;
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        if !v.is_finite() {
            return self.serialize_unit();
        }
        CompactFormatter
            .write_f32(self.out, v)
            .map_err(|e| Error(e.to_string()))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        if !v.is_finite() {
            return self.serialize_unit();
        }
        CompactFormatter
            .write_f64(self.out, v)
            .map_err(|e| Error(e.to_string()))
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        use ser::SerializeSeq;
        let mut seq = self.serialize_seq(Some(v.len()))?;
        for b in v {
            seq.serialize_element(b)?;
        }
        seq.end()
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'w, 'a>, Error> {
        self.out.push(b'[');
        Ok(Compound {
            w: self,
            first: true,
            wrapped: false,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'w, 'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'w, 'a>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'w, 'a>, Error> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.extend_from_slice(b":[");
        Ok(Compound {
            w: self,
            first: true,
            wrapped: true,
        })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'w, 'a>, Error> {
        self.out.push(b'{');
        Ok(Compound {
            w: self,
            first: true,
            wrapped: false,
        })
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<Compound<'w, 'a>, Error> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'w, 'a>, Error> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.extend_from_slice(b":{");
        Ok(Compound {
            w: self,
            first: true,
            wrapped: true,
        })
    }
}

impl Compound<'_, '_> {
    fn close(self, bracket: u8) -> Result<(), Error> {
        self.w.out.push(bracket);
        if self.wrapped {
            self.w.out.push(b'}');
        }
        Ok(())
    }
}

/// The array-like compounds: elements separated by commas, closed by `]`.
macro_rules! array_like {
    ($($trait:ident::$method:ident;)*) => {
        $(impl ser::$trait for Compound<'_, '_> {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.comma();
                value.serialize(&mut *self.w)
            }
            fn end(self) -> Result<(), Error> {
                self.close(b']')
            }
        })*
    };
}

array_like! {
    SerializeSeq::serialize_element;
    SerializeTuple::serialize_element;
    SerializeTupleStruct::serialize_field;
    SerializeTupleVariant::serialize_field;
}

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.comma();
        key.serialize(KeyWriter {
            out: &mut *self.w.out,
        })
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.w.out.push(b':');
        value.serialize(&mut *self.w)
    }
    fn end(self) -> Result<(), Error> {
        self.close(b'}')
    }
}

impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.comma();
        write_str(self.w.out, key);
        self.w.out.push(b':');
        value.serialize(&mut *self.w)
    }
    fn end(self) -> Result<(), Error> {
        self.close(b'}')
    }
}

impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        ser::SerializeStruct::serialize_field(self, key, value)
    }
    fn end(self) -> Result<(), Error> {
        self.close(b'}')
    }
}

/// A map key: strings as they are, numbers, bools and chars quoted (as serde_json writes them).
struct KeyWriter<'a> {
    out: &'a mut Vec<u8>,
}

impl KeyWriter<'_> {
    fn quoted(self, f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> Result<(), Error> {
        self.out.push(b'"');
        f(self.out).map_err(|e| Error(e.to_string()))?;
        self.out.push(b'"');
        Ok(())
    }
}

fn key_error() -> Error {
    Error("key must be a string".to_owned())
}

macro_rules! key_number {
    ($($method:ident($ty:ty) => $write:ident;)*) => {
        $(fn $method(self, v: $ty) -> Result<(), Error> {
            self.quoted(|out| CompactFormatter.$write(out, v))
        })*
    };
}

macro_rules! key_refused {
    ($($method:ident($($arg:ty),*);)*) => {
        $(fn $method(self, $(_: $arg),*) -> Result<(), Error> {
            Err(key_error())
        })*
    };
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = ser::Impossible<(), Error>;
    type SerializeTuple = ser::Impossible<(), Error>;
    type SerializeTupleStruct = ser::Impossible<(), Error>;
    type SerializeTupleVariant = ser::Impossible<(), Error>;
    type SerializeMap = ser::Impossible<(), Error>;
    type SerializeStruct = ser::Impossible<(), Error>;
    type SerializeStructVariant = ser::Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.quoted(|out| CompactFormatter.write_bool(out, v))
    }
    key_number! {
        serialize_i8(i8) => write_i8;
        serialize_i16(i16) => write_i16;
        serialize_i32(i32) => write_i32;
        serialize_i64(i64) => write_i64;
        serialize_u8(u8) => write_u8;
        serialize_u16(u16) => write_u16;
        serialize_u32(u32) => write_u32;
        serialize_u64(u64) => write_u64;
        serialize_i128(i128) => write_i128;
        serialize_u128(u128) => write_u128;
    }
    key_refused! {
        serialize_f32(f32);
        serialize_f64(f64);
        serialize_bytes(&[u8]);
        serialize_none();
        serialize_unit();
        serialize_unit_struct(&'static str);
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), Error> {
        Err(key_error())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_error())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_error())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_error())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_error())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_error())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Error> {
        Err(key_error())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn same(v: &serde_json::Value) {
        let mut out = Vec::new();
        write(v, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            serde_json::to_string(v).unwrap()
        );
    }

    #[test]
    fn equals_serde_json_on_every_kind_of_value() {
        let all_bytes: String = (0u8..0x80).map(char::from).collect();
        same(&json!({
            "s": all_bytes, "u": "日本 \u{7f} \u{2028} é", "e": "", "q": "\"\\",
            "short": ["a\n", "\tb", "x\u{1}y", "24 bytes of plain text..", "25 bytes of plain text...",
                      "long text with an escape at its end, past the short path\n"],
            "n": [0, -1, u64::MAX, i64::MIN, 0.1, 1e300, -2.5e-8, 3.0], "b": [true, false, null],
            "o": {}, "a": [], "nested": [{"k": [[]]}]
        }));
    }

    #[derive(serde::Serialize)]
    enum E {
        Unit,
        New(u8),
        Tuple(u8, String),
        Struct { a: Option<f32>, b: char },
    }

    #[derive(serde::Serialize)]
    struct S {
        e: Vec<E>,
        t: (u8, f64, f32),
        m: std::collections::BTreeMap<u32, bool>,
        bytes: serde_bytes_like::Bytes,
    }

    mod serde_bytes_like {
        pub struct Bytes(pub Vec<u8>);
        impl serde::Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(&self.0)
            }
        }
    }

    #[test]
    fn equals_serde_json_on_enums_tuples_maps_and_non_finite_floats() {
        let s = S {
            e: vec![
                E::Unit,
                E::New(7),
                E::Tuple(1, "x\n".into()),
                E::Struct {
                    a: Some(f32::NAN),
                    b: '"',
                },
                E::Struct { a: None, b: 'é' },
            ],
            t: (255, f64::INFINITY, 0.3),
            m: [(1, true), (20, false)].into_iter().collect(),
            bytes: serde_bytes_like::Bytes(vec![0, 9, 255]),
        };
        let mut out = Vec::new();
        write(&s, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            serde_json::to_string(&s).unwrap()
        );
    }
}
