//! Reading a request body: bytes → JSON value → typed request.
//!
//! Memory: a JSON value costs many times its text (a one-element array is a 32-byte value plus a
//! heap block), so a body is never held as a whole value when only part of it is read. The
//! top-level fields no request reads are checked while parsing, exactly as a value parse checks
//! them (syntax, number range, string escapes, the 128-level nesting limit), but not stored.
//! Errors and accepted bodies are therefore the same as parsing the whole body into a value.

use std::any::Any;
use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{
    self as serde_de, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess,
    Visitor,
};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::RequestError;

/// Parse JSON text (serde_json's own 128-level nesting limit applies).
pub fn parse_json(bytes: &[u8]) -> Result<Value, RequestError> {
    serde_json::from_slice(bytes).map_err(|e| RequestError::Json(e.to_string()))
}

/// Parse JSON text like [`parse_json`], keeping of a top-level object only the members named in
/// `keep` (the others are validated and dropped). Any other top-level value is kept whole.
pub fn parse_json_keeping(bytes: &[u8], keep: &[&str]) -> Result<Value, RequestError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = TopLevel::<serde_de::IgnoredAny> {
        keep,
        prepare: None,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    value.map_err(|e| RequestError::Json(e.to_string()))
}

/// The field names a derived `Deserialize` struct reads (an empty list for other types).
pub fn struct_fields<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldNames { out: &mut fields });
    fields
}

/// Parse JSON text like [`parse_json_keeping`], except that when the top-level member `field`
/// is an array, its elements are read into `E` one at a time (each element as a value, then
/// typed), so the whole array never exists as a JSON value: a long message list costs its typed
/// form only. The value keeps `null` in the member's place, so member order and errors stay
/// those of a value parse followed by typing, provided the typing runs inside [`with_prepared`]
/// and the field reads itself with [`de_prepared_list`].
pub fn parse_json_preparing<E: DeserializeOwned>(
    bytes: &[u8],
    keep: &[&str],
    field: &str,
) -> Result<(Value, Option<Prepared<E>>), RequestError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let mut prepared = None;
    let value = TopLevel {
        keep,
        prepare: Some((field, &mut prepared)),
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    let value = value.map_err(|e| RequestError::Json(e.to_string()))?;
    Ok((value, prepared))
}

/// A member read by [`parse_json_preparing`]: its typed elements, or the message of the first
/// element that failed to type.
pub type Prepared<E> = Result<Vec<E>, String>;

thread_local! {
    static PREPARED: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// Run `f` (the typing of the parsed value) with `prepared` available to [`de_prepared_list`];
/// whatever `f` leaves untaken is dropped afterwards.
pub fn with_prepared<E: 'static, R>(prepared: Option<Prepared<E>>, f: impl FnOnce() -> R) -> R {
    PREPARED.with(|p| *p.borrow_mut() = prepared.map(|x| Box::new(x) as Box<dyn Any>));
    let out = f();
    PREPARED.with(|p| p.borrow_mut().take());
    out
}

/// The list [`parse_json_preparing`] read for the field being typed, if there is one (for
/// fields whose own deserializer is not [`de_prepared_list`]).
pub(crate) fn take_prepared<E: 'static>() -> Option<Prepared<E>> {
    PREPARED.with(|p| {
        let mut slot = p.borrow_mut();
        match slot.take()?.downcast::<Prepared<E>>() {
            Ok(x) => Some(*x),
            Err(other) => {
                *slot = Some(other);
                None
            }
        }
    })
}

/// Deserialize a `Vec<E>` field that [`parse_json_preparing`] may have read already; use with
/// `#[serde(deserialize_with = "...")]`.
pub fn de_prepared_list<'de, D: Deserializer<'de>, E: DeserializeOwned + 'static>(
    d: D,
) -> Result<Vec<E>, D::Error> {
    let v = Value::deserialize(d)?;
    match take_prepared::<E>() {
        Some(p) => p.map_err(serde_de::Error::custom),
        None => serde_json::from_value(v).map_err(serde_de::Error::custom),
    }
}

struct TopLevel<'k, 'p, T> {
    keep: &'k [&'k str],
    prepare: Option<(&'k str, &'p mut Option<Prepared<T>>)>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for TopLevel<'_, '_, T> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for TopLevel<'_, '_, T> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if let Some((_, slot)) = self.prepare.as_mut().filter(|(f, _)| *f == key) {
                // A repeated key replaces the earlier value (its position stays the first one's).
                match map.next_value_seed(ListOrValue::<T>(PhantomData))? {
                    ListOrValueOut::List(list) => {
                        **slot = Some(list);
                        out.insert(key, Value::Null);
                    }
                    ListOrValueOut::Value(v) => {
                        **slot = None;
                        out.insert(key, v);
                    }
                }
            } else if self.keep.contains(&key.as_str()) {
                // Same as a value parse: a repeated key replaces the earlier value.
                out.insert(key, map.next_value::<Value>()?);
            } else {
                map.next_value_seed(Checked)?;
            }
        }
        Ok(Value::Object(out))
    }
    // Bodies that are not objects are rejected later; keep them whole for that message.
    fn visit_bool<E: serde_de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: serde_de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: serde_de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: serde_de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: serde_de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_unit<E: serde_de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element::<Value>()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
}

/// A member that is either an array, read element by element into `T` (see
/// [`parse_json_preparing`]), or any other value, kept as it is.
struct ListOrValue<T>(PhantomData<T>);

enum ListOrValueOut<T> {
    List(Prepared<T>),
    Value(Value),
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for ListOrValue<T> {
    type Value = ListOrValueOut<T>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for ListOrValue<T> {
    type Value = ListOrValueOut<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(v) = seq.next_element::<Value>()? {
            match serde_json::from_value::<T>(v) {
                Ok(item) => items.push(item),
                Err(e) => {
                    // The first element that fails names the error; the rest is still read
                    // (and checked) as a value parse would.
                    while seq.next_element_seed(Checked)?.is_some() {}
                    return Ok(ListOrValueOut::List(Err(e.to_string())));
                }
            }
        }
        Ok(ListOrValueOut::List(Ok(items)))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(serde_de::value::MapAccessDeserializer::new(map))
            .map(ListOrValueOut::Value)
    }
    fn visit_bool<E: serde_de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(ListOrValueOut::Value(Value::Bool(v)))
    }
    fn visit_i64<E: serde_de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(ListOrValueOut::Value(Value::from(v)))
    }
    fn visit_u64<E: serde_de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(ListOrValueOut::Value(Value::from(v)))
    }
    fn visit_f64<E: serde_de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(ListOrValueOut::Value(
            serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_str<E: serde_de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(ListOrValueOut::Value(Value::String(v.to_owned())))
    }
    fn visit_string<E: serde_de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(ListOrValueOut::Value(Value::String(v)))
    }
    fn visit_unit<E: serde_de::Error>(self) -> Result<Self::Value, E> {
        Ok(ListOrValueOut::Value(Value::Null))
    }
}

/// Reads one value the way a value parse does (numbers and strings fully decoded, nesting
/// counted by the parser), storing nothing. `IgnoredAny` would skip numbers without the range
/// check that a value parse applies, so a body would be accepted here that a value parse rejects.
struct Checked;

impl<'de> DeserializeSeed<'de> for Checked {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(Checked)
    }
}

impl<'de> Visitor<'de> for Checked {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: serde_de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: serde_de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: serde_de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: serde_de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: serde_de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: serde_de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Checked)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Checked)?.is_some() {
            map.next_value_seed(Checked)?;
        }
        Ok(())
    }
}

/// A deserializer that only records the field list a derived struct asks for.
struct FieldNames<'a> {
    out: &'a mut &'static [&'static str],
}

impl<'de> Deserializer<'de> for FieldNames<'_> {
    type Error = serde_de::value::Error;
    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde_de::Error::custom("not a struct"))
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.out = fields;
        Err(serde_de::Error::custom("fields recorded"))
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
        unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// Deserialize a parsed value into a typed request.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, RequestError> {
    serde_json::from_value(value).map_err(|e| RequestError::Body(e.to_string()))
}

/// Parse and deserialize in one step (only the fields `T` reads are kept while parsing).
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, RequestError> {
    from_value(parse_json_keeping(bytes, struct_fields::<T>())?)
}

/// Deserialize helpers for fields whose accepted shapes serde cannot express with a derive.
pub(crate) mod de {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer};
    use serde_json::Value;

    /// A `content` that is either a string or a list of typed parts.
    #[derive(Debug)]
    pub enum StringOrList<T> {
        String(String),
        List(Vec<T>),
    }

    impl<'de, T: serde::de::DeserializeOwned> StringOrList<T> {
        pub fn deserialize_with<D: Deserializer<'de>>(
            d: D,
            message: &str,
        ) -> Result<Self, D::Error> {
            match Value::deserialize(d)? {
                Value::String(s) => Ok(StringOrList::String(s)),
                v @ Value::Array(_) => serde_json::from_value(v)
                    .map(StringOrList::List)
                    .map_err(D::Error::custom),
                _ => Err(D::Error::custom(message)),
            }
        }
    }
}
