//! Python values ↔ JSON: the one walk over Python objects that every binding uses to read JSON
//! from Python (tool parameters, response schemas, request bodies), and the way back.
//!
//! A Python value is JSON when it is `None`, a `bool`, an `int` in the 64-bit range, a finite
//! `float`, a `str`, or a `list` / `tuple` / `dict` (with `str` keys) of such values, nested at
//! most [`MAX_JSON_DEPTH`] containers deep. Anything else raises the error the official package
//! raises, in the same walk order (a dict's members in insertion order, depth first), so the
//! first offending value names the error:
//!
//! | value                         | error                                                       |
//! |-------------------------------|-------------------------------------------------------------|
//! | `int` outside i64 ∪ u64       | `OverflowError` "integer is outside the JSON number range"   |
//! | NaN / ±inf                    | `ValueError` "{v} is not a finite JSON number"               |
//! | non-`str` dict key            | `TypeError` "JSON object keys must be str"                   |
//! | container 129 levels deep     | `RecursionError` "JSON input exceeds the maximum nesting depth of 128" |
//! | any other type                | `TypeError` "{type name} is not a JSON value"                |
//!
//! The walk recurses at most [`MAX_JSON_DEPTH`] frames: deeper input is refused before it can
//! exhaust the native stack here, in the renderer or when the value is dropped.

use pyo3::exceptions::{PyOverflowError, PyRecursionError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// Deepest container nesting accepted from Python (the official package's limit).
pub const MAX_JSON_DEPTH: usize = 128;

/// Convert a Python value to JSON (see the module docs for what is accepted).
pub fn py_to_json(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    walk(obj, 0, true)
}

/// Check that a Python value is JSON, raising exactly what [`py_to_json`] raises, without
/// building anything (strings are only checked to be encodable).
pub fn check_json(obj: &Bound<'_, PyAny>) -> PyResult<()> {
    walk(obj, 0, false).map(drop)
}

/// A JSON scalar as a value; `None` for a container (a list, tuple or dict). The caller has
/// checked `obj` with [`check_json`], so an error here comes only from Python itself.
pub fn scalar_to_json(obj: &Bound<'_, PyAny>) -> PyResult<Option<Value>> {
    if is_container(obj) {
        return Ok(None);
    }
    walk(obj, 0, true).map(Some)
}

/// Whether `obj` is a JSON container (`list`, `tuple` or `dict`).
pub fn is_container(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<PyList>()
        || obj.is_instance_of::<PyTuple>()
        || obj.is_instance_of::<PyDict>()
}

/// A dict key as text, or the official `TypeError`.
pub fn json_key<'a>(key: &'a Bound<'_, PyAny>) -> PyResult<std::borrow::Cow<'a, str>> {
    match key.downcast::<PyString>() {
        Ok(s) => s.to_cow(),
        Err(_) => Err(PyTypeError::new_err("JSON object keys must be str")),
    }
}

/// The walk behind [`py_to_json`] and [`check_json`]. `depth` counts the containers around
/// `obj`; `store`: build the value, otherwise only check it and return `Null`.
fn walk(obj: &Bound<'_, PyAny>, depth: usize, store: bool) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.downcast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(v) = obj.extract::<i64>() {
            return Ok(Value::Number(v.into()));
        }
        if let Ok(v) = obj.extract::<u64>() {
            return Ok(Value::Number(v.into()));
        }
        return Err(PyOverflowError::new_err(
            "integer is outside the JSON number range",
        ));
    }
    if let Ok(f) = obj.downcast::<PyFloat>() {
        let v = f.value();
        return match Number::from_f64(v) {
            Some(n) => Ok(Value::Number(n)),
            None => Err(PyValueError::new_err(format!(
                "{v} is not a finite JSON number"
            ))),
        };
    }
    if let Ok(s) = obj.downcast::<PyString>() {
        let text = s.to_cow()?;
        return Ok(if store {
            Value::String(text.into_owned())
        } else {
            Value::Null
        });
    }
    if !is_container(obj) {
        let name = obj.get_type().name()?;
        return Err(PyTypeError::new_err(format!("{name} is not a JSON value")));
    }
    if depth >= MAX_JSON_DEPTH {
        return Err(PyRecursionError::new_err(format!(
            "JSON input exceeds the maximum nesting depth of {MAX_JSON_DEPTH}"
        )));
    }
    if let Ok(d) = obj.downcast::<PyDict>() {
        let mut map = Map::with_capacity(if store { d.len() } else { 0 });
        for (k, v) in d.iter() {
            let key = json_key(&k)?;
            let v = walk(&v, depth + 1, store)?;
            if store {
                map.insert(key.into_owned(), v);
            }
        }
        return Ok(if store {
            Value::Object(map)
        } else {
            Value::Null
        });
    }
    if let Ok(l) = obj.downcast::<PyList>() {
        return walk_array(l.iter(), depth, store);
    }
    walk_array(obj.downcast::<PyTuple>()?.iter(), depth, store)
}

/// The elements of a list or a tuple (both are JSON arrays), as [`walk`] reads them.
fn walk_array<'py>(
    items: impl ExactSizeIterator<Item = Bound<'py, PyAny>>,
    depth: usize,
    store: bool,
) -> PyResult<Value> {
    let mut out = Vec::with_capacity(if store { items.len() } else { 0 });
    for x in items {
        let v = walk(&x, depth + 1, store)?;
        if store {
            out.push(v);
        }
    }
    Ok(if store {
        Value::Array(out)
    } else {
        Value::Null
    })
}

/// Convert JSON to the equivalent Python value (objects become dicts, arrays lists).
pub fn json_to_py(py: Python<'_>, v: &Value) -> PyResult<PyObject> {
    Ok(match v {
        Value::Null => py.None(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any().unbind(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any().unbind()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any().unbind()
            } else {
                n.as_f64()
                    .unwrap_or(f64::NAN)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any().unbind(),
        Value::Array(a) => {
            let items = a
                .iter()
                .map(|x| json_to_py(py, x))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any().unbind()
        }
        Value::Object(m) => {
            let d = PyDict::new(py);
            for (k, x) in m {
                d.set_item(k, json_to_py(py, x)?)?;
            }
            d.into_any().unbind()
        }
    })
}
