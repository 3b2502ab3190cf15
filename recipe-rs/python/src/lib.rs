//! The `deepseek_recipe._native` extension module: bindings only, no logic.
//!
//! Each binding module wraps one codec area and registers its classes here. A class is defined
//! once, by the module of its area; other modules may add methods to it in their own
//! `#[pymethods]` blocks (pyo3's `multiple-pymethods`) when a method crosses areas.

use pyo3::prelude::*;

mod args;
mod check;
pub mod conversation;
pub mod encoding;
mod grammar;
pub mod images;
pub mod protocol;
mod py_json;
mod py_serde;
mod session;
mod stream;
mod stream_glue;
mod vocabulary;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    vocabulary::register(m)?;
    conversation::register(m)?;
    encoding::register(m)?;
    protocol::register(m)?;
    stream::register(m)?;
    session::register(m)?;
    check::register(m)?;
    images::register(m)?;
    grammar::register(m)?;
    Ok(())
}
