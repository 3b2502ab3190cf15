//! Python classes of the prompt encodings: `DeepseekV4Encoding`, `DeepseekV41Encoding`,
//! `RenderedPrompt`, and the `IMAGE_SPECIAL_TOKEN_ID` constant.

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use recipe_core::encoding::{Encoding, EncodingVersion};

use crate::conversation::{image_source_to_py, PyConversation};
use crate::vocabulary::{PySpecialTokens, PyTokenizer};

/// Token ID the model uses for image content (`<｜image2｜>`), not the prompt placeholder.
pub const IMAGE_SPECIAL_TOKEN_ID: u32 = 129264;

/// A rendered prompt: the text, where the template put control tokens, and the images.
///
/// Returned by `render_conversation`; not constructible.
#[pyclass(name = "RenderedPrompt", module = "deepseek_recipe._native", frozen)]
pub struct PyRenderedPrompt {
    prompt: String,
    special_ranges: Vec<(usize, usize)>,
    image_sources: Vec<recipe_core::ImageSource>,
}

#[pymethods]
impl PyRenderedPrompt {
    #[new]
    fn no_new() -> PyResult<Self> {
        Err(PyTypeError::new_err(
            "cannot create 'deepseek_recipe._native.RenderedPrompt' instances",
        ))
    }
    /// The prompt text.
    #[getter]
    fn prompt(&self) -> String {
        self.prompt.clone()
    }
    /// Half-open code-point ranges of `prompt` holding template-inserted control tokens.
    #[getter]
    fn special_ranges(&self) -> Vec<(usize, usize)> {
        self.special_ranges.clone()
    }
    /// The images, in the order of their placeholders in `prompt`.
    #[getter]
    fn image_sources(&self, py: Python<'_>) -> PyResult<Vec<PyObject>> {
        self.image_sources
            .iter()
            .map(|s| image_source_to_py(py, s))
            .collect()
    }
    fn __repr__(&self) -> String {
        format!(
            "RenderedPrompt(prompt=<{} characters>, image_sources={})",
            self.prompt.chars().count(),
            self.image_sources.len()
        )
    }
}

fn render(enc: &Encoding, py: Python<'_>, conv: &PyConversation) -> PyRenderedPrompt {
    let rendered = py.allow_threads(|| enc.render(conv.core()));
    PyRenderedPrompt {
        prompt: rendered.prompt(),
        special_ranges: rendered.special_char_ranges(),
        image_sources: rendered.image_sources,
    }
}

fn encode(enc: &Encoding, py: Python<'_>, conv: &PyConversation) -> PyResult<Vec<u32>> {
    py.allow_threads(|| enc.encode(conv.core()))
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

macro_rules! encoding_class {
    ($rust:ident, $py:literal, $version:expr, $doc:literal) => {
        #[doc = $doc]
        ///
        /// Immutable: `with_tokenizer` and `with_special_tokens` return configured copies. `encode`
        /// needs a tokenizer; `render_conversation` does not.
        #[pyclass(name = $py, module = "deepseek_recipe._native", frozen)]
        #[derive(Clone)]
        pub struct $rust {
            pub inner: Encoding,
        }

        #[pymethods]
        impl $rust {
            #[new]
            fn new() -> Self {
                $rust {
                    inner: Encoding::new($version),
                }
            }
            /// A copy of this encoding that encodes with `tokenizer`.
            fn with_tokenizer(
                &self,
                #[pyo3(from_py_with = crate::args::instance::<PyTokenizer>)] tokenizer: PyRef<
                    '_,
                    PyTokenizer,
                >,
            ) -> Self {
                $rust {
                    inner: self.inner.clone().with_tokenizer(tokenizer.inner.clone()),
                }
            }
            /// A copy of this encoding that renders with `special_tokens`.
            fn with_special_tokens(
                &self,
                #[pyo3(from_py_with = crate::args::instance::<PySpecialTokens>)]
                special_tokens: PyRef<'_, PySpecialTokens>,
            ) -> Self {
                $rust {
                    inner: self
                        .inner
                        .clone()
                        .with_special_tokens(special_tokens.inner.clone()),
                }
            }
            /// The prompt text of `conversation`, its control-token ranges and its images.
            fn render_conversation(
                &self,
                py: Python<'_>,
                #[pyo3(from_py_with = crate::args::instance::<PyConversation>)] conversation: PyRef<
                    '_,
                    PyConversation,
                >,
            ) -> PyRenderedPrompt {
                render(&self.inner, py, &conversation)
            }
            /// Token IDs of the rendered conversation (control tokens only where the template put
            /// them). `RuntimeError` without a tokenizer or when a token is not in the vocabulary.
            fn encode(
                &self,
                py: Python<'_>,
                #[pyo3(from_py_with = crate::args::instance::<PyConversation>)] conversation: PyRef<
                    '_,
                    PyConversation,
                >,
            ) -> PyResult<Vec<u32>> {
                encode(&self.inner, py, &conversation)
            }
        }
    };
}

encoding_class!(
    PyDeepseekV4Encoding,
    "DeepseekV4Encoding",
    EncodingVersion::V4,
    "The DeepSeek V4 prompt template."
);
encoding_class!(
    PyDeepseekV41Encoding,
    "DeepseekV41Encoding",
    EncodingVersion::V41,
    "The DeepSeek V4.1 prompt template."
);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("IMAGE_SPECIAL_TOKEN_ID", IMAGE_SPECIAL_TOKEN_ID)?;
    m.add_class::<PyRenderedPrompt>()?;
    m.add_class::<PyDeepseekV4Encoding>()?;
    m.add_class::<PyDeepseekV41Encoding>()?;
    Ok(())
}
