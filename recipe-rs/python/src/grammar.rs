//! Bindings for output grammars (`recipe-grammar`): `OutputGrammar`, `GrammarMatcher` and the
//! `GrammarError` / `UnsupportedSchemaError` exceptions.
//!
//! The tokenizer's grammar vocabulary is built by the first compile with a `Tokenizer` and kept
//! on that object (`PyTokenizer::grammar_vocabulary`), so later requests pay only for their own
//! grammar. A bitmask is written straight into the caller's int32 array: a NumPy array (anything
//! with `__array_interface__`, e.g. `torch_tensor.numpy()`) or a CPU torch tensor (`data_ptr`),
//! shape `[n, words]`, rows contiguous.

use std::sync::{Arc, Mutex};

use pyo3::create_exception;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use recipe_grammar::{GrammarError as CrateGrammarError, GrammarMatcher, GrammarVocabulary};

use crate::protocol::PyConversationRequest;
use crate::vocabulary::PyTokenizer;

create_exception!(
    _native,
    GrammarError,
    PyValueError,
    "An output grammar could not be built (a malformed regex, schema or Lark grammar, a tokenizer without the needed control tokens) or a matcher call was given bad arguments."
);
create_exception!(
    _native,
    UnsupportedSchemaError,
    GrammarError,
    "A tool parameter schema or response schema that the output grammar cannot express."
);

fn raise(e: CrateGrammarError) -> PyErr {
    match e {
        CrateGrammarError::UnsupportedSchema(_) => UnsupportedSchemaError::new_err(e.to_string()),
        other => GrammarError::new_err(other.to_string()),
    }
}

fn vocabulary(py: Python<'_>, tokenizer: &PyTokenizer) -> PyResult<Arc<GrammarVocabulary>> {
    if let Some(v) = tokenizer.grammar_vocabulary.get() {
        return Ok(v.clone());
    }
    let inner = tokenizer.inner.clone();
    let built = py
        .allow_threads(|| GrammarVocabulary::from_tokenizer(&inner))
        .map_err(raise)?;
    Ok(tokenizer.grammar_vocabulary.get_or_init(|| built).clone())
}

/// The grammar of one request's valid outputs, compiled for one tokenizer.
///
/// Built by `OutputGrammar.compile`; `matcher()` gives one independent matcher per sequence.
#[pyclass(name = "OutputGrammar", module = "deepseek_recipe._native", frozen)]
pub struct PyOutputGrammar {
    inner: Mutex<recipe_grammar::OutputGrammar>,
    vocab_size: usize,
}

#[pymethods]
impl PyOutputGrammar {
    /// The grammar of the request's output constraint, or `None` when it carries none.
    ///
    /// Reasoning runs until `</think>` when the prompt opened it (at most `thinking_budget`
    /// tokens, then `</think>` is forced); then tool calls in the version's DSML dialect (by
    /// `tool_choice` and `parallel_tool_calls`), or the JSON, regex or `lark` (llguidance Lark,
    /// replacing the request's answer constraint) answer. The tokenizer's grammar vocabulary is
    /// built on first use and kept on `tokenizer`. Raises `UnsupportedSchemaError` for a schema
    /// the grammar cannot express and `GrammarError` for other bad input.
    #[staticmethod]
    #[pyo3(signature = (request, tokenizer, *, thinking_budget=None, lark=None))]
    fn compile(
        py: Python<'_>,
        #[pyo3(from_py_with = crate::args::instance::<PyConversationRequest>)] request: PyRef<
            '_,
            PyConversationRequest,
        >,
        #[pyo3(from_py_with = crate::args::instance::<PyTokenizer>)] tokenizer: PyRef<
            '_,
            PyTokenizer,
        >,
        thinking_budget: Option<u32>,
        #[pyo3(from_py_with = crate::args::opt_string)] lark: Option<String>,
    ) -> PyResult<Option<Self>> {
        let vocab = vocabulary(py, &tokenizer)?;
        let req = request.inner.clone();
        let compiled = py
            .allow_threads(|| {
                recipe_grammar::OutputGrammar::compile(
                    &req,
                    &vocab,
                    thinking_budget,
                    lark.as_deref(),
                )
            })
            .map_err(raise)?;
        Ok(compiled.map(|g| PyOutputGrammar {
            vocab_size: g.vocab_size(),
            inner: Mutex::new(g),
        }))
    }

    /// Number of token IDs a bitmask covers (its row is `ceil(vocab_size / 32)` int32 words).
    #[getter]
    fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The grammar as llguidance Lark text.
    fn lark(&self) -> String {
        self.lock().lark().to_owned()
    }

    /// The same output shape as an xgrammar structural tag (JSON text), for engines that
    /// constrain with xgrammar.
    fn structural_tag_json(&self) -> String {
        self.lock().structural_tag_json()
    }

    /// A matcher at the start of the output.
    fn matcher(&self) -> PyGrammarMatcher {
        PyGrammarMatcher {
            inner: self.lock().matcher(),
        }
    }

    fn __repr__(&self) -> String {
        format!("OutputGrammar(vocab_size={})", self.vocab_size)
    }
}

impl PyOutputGrammar {
    fn lock(&self) -> std::sync::MutexGuard<'_, recipe_grammar::OutputGrammar> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Where one sequence stands in an `OutputGrammar`.
///
/// A rejected token leaves the matcher unchanged (`accept_token` answers `False`).
#[pyclass(name = "GrammarMatcher", module = "deepseek_recipe._native")]
pub struct PyGrammarMatcher {
    inner: GrammarMatcher,
}

/// Where row `index` of an int32 array starts, and how many words it has.
fn row_of(buf: &Bound<'_, PyAny>, index: usize) -> PyResult<(usize, usize)> {
    let (ptr, shape, strides, itemsize) = if let Ok(ai) = buf.getattr("__array_interface__") {
        let ai = ai.downcast::<PyDict>()?;
        let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
            ai.get_item(k)?
                .ok_or_else(|| PyTypeError::new_err(format!("__array_interface__ lacks {k:?}")))
        };
        let typestr: String = get("typestr")?.extract()?;
        if !matches!(typestr.as_str(), "<i4" | "<u4" | "|i4" | "|u4") {
            return Err(PyTypeError::new_err(format!(
                "the bitmask must hold 32-bit integers, not {typestr:?}"
            )));
        }
        let (ptr, readonly): (usize, bool) = get("data")?.extract()?;
        if readonly {
            return Err(PyValueError::new_err("the bitmask array is read-only"));
        }
        let shape: Vec<usize> = get("shape")?.extract()?;
        let strides: Option<Vec<isize>> = match ai.get_item("strides")? {
            Some(s) if !s.is_none() => Some(s.extract()?),
            _ => None,
        };
        (ptr, shape, strides, 4isize)
    } else if buf.hasattr("data_ptr")? {
        let dtype = buf.getattr("dtype")?.str()?.to_string();
        if dtype != "torch.int32" {
            return Err(PyTypeError::new_err(format!(
                "the bitmask tensor must be torch.int32, not {dtype}"
            )));
        }
        let device = buf.getattr("device")?.getattr("type")?.str()?.to_string();
        if device != "cpu" {
            return Err(PyValueError::new_err(format!(
                "the bitmask tensor must be on the CPU, not {device} (fill a CPU tensor, then copy)"
            )));
        }
        let ptr: usize = buf.call_method0("data_ptr")?.extract()?;
        let shape: Vec<usize> = buf.getattr("shape")?.extract()?;
        let strides: Vec<isize> = buf.call_method0("stride")?.extract()?;
        let strides = strides.iter().map(|s| s * 4).collect();
        (ptr, shape, Some(strides), 4)
    } else {
        return Err(PyTypeError::new_err(
            "the bitmask must be an int32 NumPy array or CPU torch tensor of shape [n, words]",
        ));
    };
    let (rows, words, row_stride, item_stride) = match (shape.as_slice(), strides.as_deref()) {
        ([w], None) => (1, *w, 0, itemsize),
        ([w], Some([s])) => (1, *w, 0, *s),
        ([n, w], None) => (*n, *w, *w as isize * itemsize, itemsize),
        ([n, w], Some([s0, s1])) => (*n, *w, *s0, *s1),
        _ => {
            return Err(PyValueError::new_err(format!(
                "the bitmask must have shape [n, words], not {shape:?}"
            )))
        }
    };
    if item_stride != itemsize && words > 1 {
        return Err(PyValueError::new_err("the bitmask rows must be contiguous"));
    }
    if index >= rows {
        return Err(PyValueError::new_err(format!(
            "row {index} is outside the bitmask ({rows} rows)"
        )));
    }
    if ptr == 0 || ptr % 4 != 0 {
        return Err(PyValueError::new_err(
            "the bitmask's data is not 4-byte aligned",
        ));
    }
    let start = ptr as isize + index as isize * row_stride;
    Ok((start as usize, words))
}

#[pymethods]
impl PyGrammarMatcher {
    /// Write the tokens allowed next into row `index` of `buf` (an int32 array of shape
    /// `[n, ceil(vocab_size / 32)]`): bit `i % 32` of word `i // 32` set when token `i` may
    /// come next. Once the output is complete only EOS is set; after EOS, nothing.
    ///
    /// `max_tokens`: the most tokens the output may have in all (EOS included, counted from
    /// the matcher's start). Near that budget the mask holds only the next token of a short
    /// valid end (the closing planner), so the output is complete when the budget runs out;
    /// a complete output may then no longer open new structure.
    #[pyo3(signature = (buf, index=0, *, max_tokens=None))]
    fn fill_bitmask(
        &mut self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        index: usize,
        max_tokens: Option<usize>,
    ) -> PyResult<()> {
        let (addr, words) = row_of(buf, index)?;
        let inner = &mut self.inner;
        py.allow_threads(move || {
            // SAFETY: `row_of` checked that `addr` is the aligned start of a writable row of
            // `words` contiguous 32-bit integers inside the caller's array, which the caller
            // keeps alive for the call (it holds a reference to `buf`).
            let row = unsafe { std::slice::from_raw_parts_mut(addr as *mut u32, words) };
            match max_tokens {
                Some(max_tokens) => inner.fill_bitmask_within(row, max_tokens),
                None => inner.fill_bitmask(row),
            }
        })
        .map_err(raise)
    }

    /// `fill_bitmask` of several matchers in one call, matcher `i` into row `i` of `buf`, with
    /// `max_tokens[i]` (`None`: no budget), without the GIL for the whole batch (an engine fills
    /// a step's rows this way on a worker thread while the model runs). Returns, per matcher,
    /// whether it is accepting after the fill, or `None` when it failed (its row is then
    /// cleared; `fill_bitmask` on that matcher alone raises the error).
    #[staticmethod]
    fn fill_bitmasks(
        py: Python<'_>,
        mut matchers: Vec<PyRefMut<'_, PyGrammarMatcher>>,
        buf: &Bound<'_, PyAny>,
        max_tokens: Vec<Option<usize>>,
    ) -> PyResult<Vec<Option<bool>>> {
        if max_tokens.len() != matchers.len() {
            return Err(PyValueError::new_err(format!(
                "{} matchers but {} budgets",
                matchers.len(),
                max_tokens.len()
            )));
        }
        let rows = (0..matchers.len())
            .map(|i| row_of(buf, i))
            .collect::<PyResult<Vec<_>>>()?;
        let mut inners: Vec<&mut GrammarMatcher> =
            matchers.iter_mut().map(|m| &mut m.inner).collect();
        Ok(py.allow_threads(move || {
            inners
                .iter_mut()
                .zip(rows)
                .zip(max_tokens)
                .map(|((inner, (addr, words)), budget)| {
                    // SAFETY: as in `fill_bitmask`: `row_of` checked each row of the caller's
                    // array, which the caller keeps alive for the call.
                    let row = unsafe { std::slice::from_raw_parts_mut(addr as *mut u32, words) };
                    let filled = match budget {
                        Some(budget) => inner.fill_bitmask_within(row, budget),
                        None => inner.fill_bitmask(row),
                    };
                    match filled {
                        Ok(()) => Some(inner.is_accepting()),
                        Err(_) => {
                            row.fill(0);
                            None
                        }
                    }
                })
                .collect()
        }))
    }

    /// The valid end the closing planner finds from here: at most `limit` tokens after which
    /// the output may end (EOS not included; empty when it may end now), or `None`. The
    /// matcher is not changed.
    fn closing_tokens(&mut self, py: Python<'_>, limit: usize) -> Option<Vec<u32>> {
        let inner = &mut self.inner;
        py.allow_threads(move || inner.closing_tokens(limit))
    }

    /// Accept `token` if the grammar allows it here (`True`); otherwise leave the matcher as it
    /// was (`False`).
    fn accept_token(&mut self, token: u32) -> PyResult<bool> {
        self.inner.accept_token(token).map_err(raise)
    }

    /// Accept the longest allowed prefix of `tokens`; returns how many were accepted.
    fn accept_tokens(&mut self, tokens: Vec<u32>) -> PyResult<usize> {
        self.inner.accept_tokens(&tokens).map_err(raise)
    }

    /// Take back the last `n` accepted tokens (EOS included).
    fn rollback(&mut self, n: usize) -> PyResult<()> {
        self.inner.rollback(n).map_err(raise)
    }

    /// Whether the output may end here (EOS allowed now, or already accepted).
    fn is_accepting(&mut self) -> bool {
        self.inner.is_accepting()
    }

    /// Whether EOS was accepted: the output is over.
    fn is_terminated(&self) -> bool {
        self.inner.is_terminated()
    }

    /// Number of tokens accepted so far.
    #[getter]
    fn num_accepted(&self) -> usize {
        self.inner.accepted()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("GrammarError", py.get_type::<GrammarError>())?;
    m.add(
        "UnsupportedSchemaError",
        py.get_type::<UnsupportedSchemaError>(),
    )?;
    m.add_class::<PyOutputGrammar>()?;
    m.add_class::<PyGrammarMatcher>()?;
    Ok(())
}
