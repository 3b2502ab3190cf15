//! Python functions of the conformance checker (`recipe_core::check`): compare what another
//! encoder produced with the canonical encoding. Reports are returned as JSON text.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use recipe_core::check::{check_ids, check_prompt, CheckError, Report};
use recipe_core::encoding::Encoding;

use crate::conversation::PyConversation;
use crate::encoding::{PyDeepseekV41Encoding, PyDeepseekV4Encoding};

pub(crate) fn encoding_of(obj: &Bound<'_, PyAny>) -> PyResult<Encoding> {
    if let Ok(e) = obj.downcast::<PyDeepseekV41Encoding>() {
        return Ok(e.get().inner.clone());
    }
    if let Ok(e) = obj.downcast::<PyDeepseekV4Encoding>() {
        return Ok(e.get().inner.clone());
    }
    Err(crate::args::cast_error(
        obj,
        "DeepseekV4Encoding | DeepseekV41Encoding",
    ))
}

fn to_json(r: Result<Report, CheckError>) -> PyResult<String> {
    match r {
        Ok(report) => {
            serde_json::to_string(&report).map_err(|e| PyRuntimeError::new_err(e.to_string()))
        }
        Err(CheckError::UnknownId(id)) => Err(PyValueError::new_err(format!(
            "token ID {id} is not in the tokenizer's vocabulary"
        ))),
        Err(e @ CheckError::EmptyOutput(_)) => Err(PyValueError::new_err(e.to_string())),
        Err(e) => Err(PyRuntimeError::new_err(e.to_string())),
    }
}

/// Compare token IDs another encoder produced for `conversation` with `encoding.encode`;
/// returns the report as JSON text (see `docs/checker.md`).
#[pyfunction]
fn check_token_ids(
    py: Python<'_>,
    encoding: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = crate::args::instance::<PyConversation>)] conversation: PyRef<
        '_,
        PyConversation,
    >,
    token_ids: Vec<u32>,
) -> PyResult<String> {
    let enc = encoding_of(encoding)?;
    let conv = conversation.core();
    to_json(py.allow_threads(|| check_ids(&enc, conv, &token_ids)))
}

/// Compare a prompt string another encoder rendered, tokenized with the full vocabulary as a
/// render-then-tokenize backend does (no BOS added); returns the report as JSON text.
#[pyfunction]
fn check_prompt_text(
    py: Python<'_>,
    encoding: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = crate::args::instance::<PyConversation>)] conversation: PyRef<
        '_,
        PyConversation,
    >,
    prompt: &str,
) -> PyResult<String> {
    let enc = encoding_of(encoding)?;
    let conv = conversation.core();
    to_json(py.allow_threads(|| check_prompt(&enc, conv, prompt)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_token_ids, m)?)?;
    m.add_function(wrap_pyfunction!(check_prompt_text, m)?)?;
    Ok(())
}
