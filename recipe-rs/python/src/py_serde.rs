//! Typing a Python JSON value (a request body given as a `dict`) straight into a serde type,
//! with no `serde_json::Value` of the whole body in between.
//!
//! Memory: a `Value` costs two to three times the JSON text it holds (a map per object, a heap
//! block per key), and the typed request plus the converted conversation cost about as much
//! again, so a body that went through a whole `Value` peaked near 6x its size. Read directly,
//! only the typed request (plus small per-field values that the request types ask for) exists.
//!
//! Errors are those of the value path they replace, in the same order:
//! 1. the whole object is first checked with [`check_json`] (the Python errors of
//!    [`crate::py_json`], in walk order), so a Python error always wins over a typing error;
//! 2. typing then behaves exactly as `serde_json::from_value` on the equivalent value: every
//!    scalar (and every container in a place that is not read as a sequence, map, struct or
//!    option) is handed to `serde_json::Value`'s own deserializer, and sequences and maps follow
//!    its rules (elements in order, "fewer elements" checks, `null` options).

use pyo3::prelude::*;
use pyo3::types::iter::{BoundDictIterator, BoundListIterator, BoundTupleIterator};
use pyo3::types::{PyDict, PyList, PyTuple};
use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess};
use serde_json::{Error, Value};

use crate::py_json::{check_json, json_key, py_to_json, scalar_to_json};

/// Type `obj` as `T`: the outer `PyResult` carries the Python errors of [`check_json`], the
/// inner `Result` a typing error with serde_json's message.
pub fn from_py<T: DeserializeOwned>(obj: &Bound<'_, PyAny>) -> PyResult<Result<T, Error>> {
    check_json(obj)?;
    Ok(T::deserialize(PyValue::new(obj)))
}

/// Like [`from_py`], for a request whose top-level member `field` reads itself with
/// `recipe_protocol::body::de_prepared_list`: when that member is a list, its elements are typed
/// one at a time before the request (as the JSON text path does), so the list never exists as a
/// whole `Value`; the request then sees `null` there and takes the prepared elements.
pub fn from_py_preparing<T: DeserializeOwned, E: DeserializeOwned + 'static>(
    obj: &Bound<'_, PyAny>,
    field: &str,
) -> PyResult<Result<T, Error>> {
    check_json(obj)?;
    let member = match obj.downcast::<PyDict>() {
        Ok(d) => d.get_item(field)?,
        Err(_) => None,
    };
    let Some(items) = member.as_ref().and_then(|m| PyValue::new(m).array()) else {
        return Ok(T::deserialize(PyValue::new(obj)));
    };
    let prepared = items
        .map(|item| E::deserialize(PyValue::new(&item)).map_err(|e| e.to_string()))
        .collect::<Result<Vec<E>, String>>();
    let top = PyValue {
        obj: obj.clone(),
        hidden: Some(field),
    };
    Ok(recipe_protocol::body::with_prepared(Some(prepared), || {
        T::deserialize(top)
    }))
}

/// A checked Python JSON value as a serde `Deserializer`. `hidden`: a member of this dict that
/// reads as `null` (its elements were typed already, see [`from_py_preparing`]).
struct PyValue<'a, 'py> {
    obj: Bound<'py, PyAny>,
    hidden: Option<&'a str>,
}

impl<'py> PyValue<'_, 'py> {
    fn new(obj: &Bound<'py, PyAny>) -> Self {
        PyValue {
            obj: obj.clone(),
            hidden: None,
        }
    }

    /// The equivalent `serde_json::Value` (only for scalars, or for containers in places where
    /// `Value`'s own rules decide, usually to reject them).
    fn to_value(&self) -> Result<Value, Error> {
        match scalar_to_json(&self.obj) {
            Ok(Some(v)) => Ok(v),
            Ok(None) => py_to_json(&self.obj).map_err(de::Error::custom),
            Err(e) => Err(de::Error::custom(e)),
        }
    }

    fn array(&self) -> Option<Array<'py>> {
        if let Ok(l) = self.obj.downcast::<PyList>() {
            return Some(Array::List(l.iter()));
        }
        if let Ok(t) = self.obj.downcast::<PyTuple>() {
            return Some(Array::Tuple(t.iter()));
        }
        None
    }
}

/// Hands one `Deserializer` method to `serde_json::Value`.
macro_rules! by_value {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method<V: de::Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, Error> {
            self.to_value()?.$method($($arg,)* visitor)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for PyValue<'_, '_> {
    type Error = Error;

    fn deserialize_any<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if let Some(items) = self.array() {
            return visit_array(items, visitor);
        }
        if let Ok(d) = self.obj.downcast::<PyDict>() {
            return visit_dict(d, self.hidden, visitor);
        }
        self.to_value()?.deserialize_any(visitor)
    }

    fn deserialize_option<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.obj.is_none() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_seq<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.array() {
            Some(items) => visit_array(items, visitor),
            None => self.to_value()?.deserialize_seq(visitor),
        }
    }

    fn deserialize_tuple<V: de::Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: de::Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.obj.downcast::<PyDict>() {
            Ok(d) => visit_dict(d, self.hidden, visitor),
            Err(_) => self.to_value()?.deserialize_map(visitor),
        }
    }

    fn deserialize_struct<V: de::Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        if let Some(items) = self.array() {
            return visit_array(items, visitor);
        }
        match self.obj.downcast::<PyDict>() {
            Ok(d) => visit_dict(d, self.hidden, visitor),
            Err(_) => self.to_value()?.deserialize_struct(name, fields, visitor),
        }
    }

    fn deserialize_newtype_struct<V: de::Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    by_value! {
        deserialize_bool(); deserialize_i8(); deserialize_i16(); deserialize_i32();
        deserialize_i64(); deserialize_i128(); deserialize_u8(); deserialize_u16();
        deserialize_u32(); deserialize_u64(); deserialize_u128(); deserialize_f32();
        deserialize_f64(); deserialize_char(); deserialize_str(); deserialize_string();
        deserialize_bytes(); deserialize_byte_buf(); deserialize_unit();
        deserialize_unit_struct(name: &'static str); deserialize_identifier();
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
    }
}

/// The elements of a list or a tuple.
enum Array<'py> {
    List(BoundListIterator<'py>),
    Tuple(BoundTupleIterator<'py>),
}

impl<'py> Iterator for Array<'py> {
    type Item = Bound<'py, PyAny>;
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Array::List(i) => i.next(),
            Array::Tuple(i) => i.next(),
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Array::List(i) => i.size_hint(),
            Array::Tuple(i) => i.size_hint(),
        }
    }
}

impl ExactSizeIterator for Array<'_> {}

/// As `serde_json` visits an array: elements in order, all of them read.
fn visit_array<'de, V: de::Visitor<'de>>(items: Array<'_>, visitor: V) -> Result<V::Value, Error> {
    let len = items.len();
    let mut access = Elements(items);
    let out = visitor.visit_seq(&mut access)?;
    if access.0.len() == 0 {
        Ok(out)
    } else {
        Err(de::Error::invalid_length(len, &"fewer elements in array"))
    }
}

struct Elements<'py>(Array<'py>);

impl<'de> SeqAccess<'de> for Elements<'_> {
    type Error = Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        match self.0.next() {
            Some(item) => seed.deserialize(PyValue::new(&item)).map(Some),
            None => Ok(None),
        }
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// As `serde_json` visits an object: members in order, all of them read.
fn visit_dict<'de, V: de::Visitor<'de>>(
    dict: &Bound<'_, PyDict>,
    hidden: Option<&str>,
    visitor: V,
) -> Result<V::Value, Error> {
    let len = dict.len();
    let mut access = Members {
        items: dict.iter(),
        value: None,
        hidden,
    };
    let out = visitor.visit_map(&mut access)?;
    if access.items.len() == 0 {
        Ok(out)
    } else {
        Err(de::Error::invalid_length(len, &"fewer elements in map"))
    }
}

struct Members<'a, 'py> {
    items: BoundDictIterator<'py>,
    /// The value of the key just read (`None` inside: a hidden member, read as `null`).
    value: Option<Option<Bound<'py, PyAny>>>,
    hidden: Option<&'a str>,
}

impl<'de> MapAccess<'de> for Members<'_, '_> {
    type Error = Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.items.next() else {
            return Ok(None);
        };
        let key = json_key(&key).map_err(de::Error::custom)?.into_owned();
        let hide = self.hidden == Some(key.as_str());
        self.value = Some((!hide).then_some(value));
        seed.deserialize(Value::String(key)).map(Some)
    }
    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, Error> {
        match self.value.take() {
            Some(Some(value)) => seed.deserialize(PyValue::new(&value)),
            Some(None) => seed.deserialize(Value::Null),
            None => Err(de::Error::custom("value is missing")),
        }
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}
