//! Argument extractors for `#[pyo3(from_py_with = ...)]` that report wrong types the way the
//! official package does.
//!
//! pyo3 names the expected Rust-side type in its cast failures ("'int' object cannot be
//! converted to 'PyString'"); the official package reports the Python type instead ("'int'
//! object cannot be cast as 'str'"). Constructor and method arguments of the conversation and
//! encoding classes and of the image classes are extracted with these helpers so both the type and the text of the
//! error match. pyo3 still prefixes a `TypeError` with `argument '<name>': `, as the official
//! package does. Errors that are not type errors (a lone surrogate in a `str`, a byte value out
//! of range) come from Python or pyo3 unchanged.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PySequence, PyString, PyTuple};
use pyo3::{PyClass, PyTypeInfo};

/// `'<type of obj>' object cannot be cast as '<expected>'`.
pub fn cast_error(obj: &Bound<'_, PyAny>, expected: &str) -> PyErr {
    let name = obj
        .get_type()
        .qualname()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".to_owned());
    PyTypeError::new_err(format!("'{name}' object cannot be cast as '{expected}'"))
}

/// A `str` (or subclass) as an owned string.
pub fn string(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    match obj.downcast::<PyString>() {
        Ok(s) => Ok(s.to_cow()?.into_owned()),
        Err(_) => Err(cast_error(obj, "str")),
    }
}

/// `None` or a `str`.
pub fn opt_string(obj: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    if obj.is_none() {
        return Ok(None);
    }
    string(obj).map(Some)
}

/// A `bool` (integers are not accepted).
pub fn boolean(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    match obj.downcast::<PyBool>() {
        Ok(b) => Ok(b.is_true()),
        Err(_) => Err(cast_error(obj, "bool")),
    }
}

/// `None` or a `bool`.
pub fn opt_boolean(obj: &Bound<'_, PyAny>) -> PyResult<Option<bool>> {
    if obj.is_none() {
        return Ok(None);
    }
    boolean(obj).map(Some)
}

/// A sequence that is not a `str`; each item goes through `item`.
fn sequence<'py, T>(
    obj: &Bound<'py, PyAny>,
    item: impl Fn(&Bound<'py, PyAny>) -> PyResult<T>,
) -> PyResult<Vec<T>> {
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err("Can't extract `str` to `Vec`"));
    }
    let seq = obj
        .downcast::<PySequence>()
        .map_err(|_| cast_error(obj, "Sequence"))?;
    let mut out = Vec::with_capacity(seq.len().unwrap_or(0));
    for x in seq.try_iter()? {
        out.push(item(&x?)?);
    }
    Ok(out)
}

/// An instance of the class `T` (or a subclass).
pub fn instance<'py, T: PyClass + PyTypeInfo>(obj: &Bound<'py, PyAny>) -> PyResult<PyRef<'py, T>> {
    match obj.downcast::<T>() {
        Ok(x) => Ok(x.borrow()),
        Err(_) => Err(cast_error(obj, T::NAME)),
    }
}

/// A mutable borrow of an instance of the class `T` (or a subclass).
pub fn instance_mut<'py, T: PyClass<Frozen = pyo3::pyclass::boolean_struct::False> + PyTypeInfo>(
    obj: &Bound<'py, PyAny>,
) -> PyResult<PyRefMut<'py, T>> {
    match obj.downcast::<T>() {
        Ok(x) => Ok(x.try_borrow_mut()?),
        Err(_) => Err(cast_error(obj, T::NAME)),
    }
}

/// A copy of an instance of the class `T` (or a subclass): for small value classes and enums.
pub fn value<T: PyClass + PyTypeInfo + Clone>(obj: &Bound<'_, PyAny>) -> PyResult<T> {
    instance::<T>(obj).map(|x| x.clone())
}

/// `None` or a copy of an instance of the class `T`.
pub fn opt_value<T: PyClass + PyTypeInfo + Clone>(obj: &Bound<'_, PyAny>) -> PyResult<Option<T>> {
    if obj.is_none() {
        return Ok(None);
    }
    value(obj).map(Some)
}

/// `None` or an instance of the class `T`.
pub fn opt_instance<'py, T: PyClass + PyTypeInfo>(
    obj: &Bound<'py, PyAny>,
) -> PyResult<Option<PyRef<'py, T>>> {
    if obj.is_none() {
        return Ok(None);
    }
    instance(obj).map(Some)
}

/// `None` or a sequence of `str`.
pub fn opt_strings(obj: &Bound<'_, PyAny>) -> PyResult<Option<Vec<String>>> {
    if obj.is_none() {
        return Ok(None);
    }
    sequence(obj, string).map(Some)
}

/// A `(str, str)` tuple.
pub fn string_pair(obj: &Bound<'_, PyAny>) -> PyResult<(String, String)> {
    let tuple = obj
        .downcast::<PyTuple>()
        .map_err(|_| cast_error(obj, "tuple"))?;
    if tuple.len() != 2 {
        return Err(PyValueError::new_err(format!(
            "expected tuple of length 2, but got tuple of length {}",
            tuple.len()
        )));
    }
    Ok((string(&tuple.get_item(0)?)?, string(&tuple.get_item(1)?)?))
}

/// A `dict` with `str` keys; each value goes through `item`.
pub fn string_map<'py, T>(
    obj: &Bound<'py, PyAny>,
    item: impl Fn(&Bound<'py, PyAny>) -> PyResult<T>,
) -> PyResult<std::collections::BTreeMap<String, T>> {
    let dict = obj
        .downcast::<PyDict>()
        .map_err(|_| cast_error(obj, "dict"))?;
    let mut out = std::collections::BTreeMap::new();
    for (k, v) in dict.iter() {
        out.insert(string(&k)?, item(&v)?);
    }
    Ok(out)
}

/// A sequence of instances of `T`.
pub fn instances<'py, T: PyClass + PyTypeInfo>(
    obj: &Bound<'py, PyAny>,
) -> PyResult<Vec<PyRef<'py, T>>> {
    sequence(obj, instance::<T>)
}

/// `None` or a sequence of instances of `T`.
pub fn opt_instances<'py, T: PyClass + PyTypeInfo>(
    obj: &Bound<'py, PyAny>,
) -> PyResult<Option<Vec<PyRef<'py, T>>>> {
    if obj.is_none() {
        return Ok(None);
    }
    instances(obj).map(Some)
}

/// Bytes: a `bytes` object, or any other sequence of integers in 0..=255 (not a `str`).
pub fn byte_vec(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    sequence(obj, |x| x.extract::<u8>())
}
