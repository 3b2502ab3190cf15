//! Python classes of incremental encoding: `EncodingSession` and its per-turn `SessionTurn`
//! report (`recipe_core::encoding::session`).

use std::sync::Mutex;

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use recipe_core::encoding::session::{EncodingSession, TurnReport, DEFAULT_MAX_CACHED_TOKENS};

use crate::check::encoding_of;
use crate::conversation::PyConversation;

/// Encodes the successive requests of one conversation, re-tokenizing only what changed.
///
/// `EncodingSession(encoding, max_cached_tokens=1048576)`: `encoding` is a `DeepseekV4Encoding`
/// or `DeepseekV41Encoding` with a tokenizer. `encode(conversation)` returns the same IDs as
/// `encoding.encode(conversation)`; `last_turn` says how the prompt relates to the previous one.
#[pyclass(name = "EncodingSession", module = "deepseek_recipe._native", frozen)]
pub struct PyEncodingSession {
    inner: Mutex<EncodingSession>,
}

impl PyEncodingSession {
    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, EncodingSession>> {
        self.inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("encoding session is poisoned"))
    }
}

#[pymethods]
impl PyEncodingSession {
    #[new]
    #[pyo3(signature = (encoding, max_cached_tokens = DEFAULT_MAX_CACHED_TOKENS))]
    #[pyo3(text_signature = "(encoding, max_cached_tokens=1048576)")]
    fn new(encoding: &Bound<'_, PyAny>, max_cached_tokens: usize) -> PyResult<Self> {
        let encoding = encoding_of(encoding)?;
        Ok(PyEncodingSession {
            inner: Mutex::new(EncodingSession::with_max_cached_tokens(
                encoding,
                max_cached_tokens,
            )),
        })
    }

    /// Token IDs of `conversation` (identical to a cold `encode`), reusing the previous turn.
    fn encode(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = crate::args::instance::<PyConversation>)] conversation: PyRef<
            '_,
            PyConversation,
        >,
    ) -> PyResult<Vec<u32>> {
        let mut guard = self.lock()?;
        let session: &mut EncodingSession = &mut guard;
        let conv = conversation.core();
        py.allow_threads(|| session.encode(conv))
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// The report of the latest `encode` call.
    #[getter]
    fn last_turn(&self) -> PyResult<PySessionTurn> {
        Ok(PySessionTurn {
            inner: self.lock()?.last_turn().clone(),
        })
    }

    /// Bytes held for the previous turn (spans, token IDs, segment table, message digests).
    #[getter]
    fn memory_bytes(&self) -> PyResult<usize> {
        Ok(self.lock()?.memory_bytes())
    }

    /// Prompts longer than this many tokens are not kept for the next turn.
    #[getter]
    fn max_cached_tokens(&self) -> PyResult<usize> {
        Ok(self.lock()?.max_cached_tokens())
    }

    /// Forget the previous turn; the next `encode` starts cold.
    fn reset(&self) -> PyResult<()> {
        self.lock()?.reset();
        Ok(())
    }

    fn __repr__(&self) -> PyResult<String> {
        let s = self.lock()?;
        Ok(format!(
            "EncodingSession(tokens={}, memory_bytes={})",
            s.last_turn().tokens,
            s.memory_bytes()
        ))
    }
}

/// How one `EncodingSession.encode` call related to the previous one.
#[pyclass(name = "SessionTurn", module = "deepseek_recipe._native", frozen)]
pub struct PySessionTurn {
    inner: TurnReport,
}

#[pymethods]
impl PySessionTurn {
    #[new]
    fn no_new() -> PyResult<Self> {
        Err(PyTypeError::new_err(
            "cannot create 'deepseek_recipe._native.SessionTurn' instances",
        ))
    }
    /// Token count of the previous prompt (0 on a first turn).
    #[getter]
    fn previous_tokens(&self) -> usize {
        self.inner.previous_tokens
    }
    /// Token count of this prompt.
    #[getter]
    fn tokens(&self) -> usize {
        self.inner.tokens
    }
    /// Leading tokens this prompt shares with the previous one.
    #[getter]
    fn common_prefix_tokens(&self) -> usize {
        self.inner.common_prefix_tokens
    }
    /// Tokens copied from the previous turn rather than tokenized again.
    #[getter]
    fn reused_tokens(&self) -> usize {
        self.inner.reused_tokens
    }
    /// True when a previous prompt exists and this one starts with all of its tokens.
    #[getter]
    fn extends_previous(&self) -> bool {
        self.inner.extends_previous
    }
    /// Index of the first token that differs from the previous prompt, or None.
    #[getter]
    fn divergence_token(&self) -> Option<usize> {
        self.inner.divergence.as_ref().map(|d| d.token_index)
    }
    /// Why the prompt diverges (`"reasoning_dropped_from_history"`, ...), or None.
    #[getter]
    fn cause(&self) -> Option<&'static str> {
        self.inner.divergence.as_ref().map(|d| d.cause.as_str())
    }
    /// Index of the message the cause points at, or None.
    #[getter]
    fn message_index(&self) -> Option<usize> {
        self.inner.divergence.as_ref().and_then(|d| d.message_index)
    }
    /// A human-readable account of the divergence, or None.
    #[getter]
    fn detail(&self) -> Option<String> {
        self.inner.divergence.as_ref().map(|d| d.detail.clone())
    }
    /// All fields as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("previous_tokens", self.previous_tokens())?;
        d.set_item("tokens", self.tokens())?;
        d.set_item("common_prefix_tokens", self.common_prefix_tokens())?;
        d.set_item("reused_tokens", self.reused_tokens())?;
        d.set_item("extends_previous", self.extends_previous())?;
        d.set_item("divergence_token", self.divergence_token())?;
        d.set_item("cause", self.cause())?;
        d.set_item("message_index", self.message_index())?;
        d.set_item("detail", self.detail())?;
        Ok(d)
    }
    fn __repr__(&self) -> String {
        match &self.inner.divergence {
            None => format!(
                "SessionTurn(tokens={}, extends_previous={}, reused_tokens={})",
                self.inner.tokens,
                if self.inner.extends_previous {
                    "True"
                } else {
                    "False"
                },
                self.inner.reused_tokens
            ),
            Some(d) => format!(
                "SessionTurn(tokens={}, divergence_token={}, cause={:?}, reused_tokens={})",
                self.inner.tokens,
                d.token_index,
                d.cause.as_str(),
                self.inner.reused_tokens
            ),
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEncodingSession>()?;
    m.add_class::<PySessionTurn>()?;
    Ok(())
}
