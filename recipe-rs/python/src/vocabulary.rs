//! Bindings for the vocabulary shared by every part of the codec: special tokens, the tokenizer,
//! model versions and the parser settings.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use recipe_core::{
    ModelVersion, ParsingOptions, SpecialToken, SpecialTokens, ThinkingInitialStage, Tokenizer,
};

macro_rules! declare_py_special_token {
    ($($kind:ident => $spelling:literal,)*) => {
        /// A kind of control token.
        ///
        /// One member per token the templates know: `Bos`, `Eos`, `ThinkingStart`, `ThinkingEnd`,
        /// `System`, `User`, `Assistant`, `LatestReminder`, `Dsml`, `Image`, and the grounding pairs
        /// `Ref`/`RefEnd`, `Box`/`BoxEnd`, `Point`/`PointEnd`, `Polygon`/`PolygonEnd`. A member
        /// compares equal to its position in that list as an `int`.
        #[pyclass(name = "SpecialToken", module = "deepseek_recipe._native", eq, eq_int, frozen)]
        #[derive(Clone, Copy, PartialEq)]
        pub enum PySpecialToken {
            $($kind,)*
        }

        impl From<PySpecialToken> for SpecialToken {
            fn from(t: PySpecialToken) -> Self {
                match t {
                    $(PySpecialToken::$kind => SpecialToken::$kind,)*
                }
            }
        }
    };
}

recipe_core::for_each_special_token!(declare_py_special_token);

#[pymethods]
impl PySpecialToken {
    /// The spelling this kind has in the released vocabulary.
    fn default_str(&self) -> &'static str {
        SpecialToken::from(*self).default_str()
    }
}

/// The spelling of every control token; keywords override single spellings.
///
/// A keyword left as `None` keeps the released spelling. Encodings, `ConversionOptions` and
/// `ParsingOptions` take a table to render or parse with other spellings.
#[pyclass(name = "SpecialTokens", module = "deepseek_recipe._native")]
#[derive(Clone, Default)]
pub struct PySpecialTokens {
    pub inner: SpecialTokens,
}

#[pymethods]
impl PySpecialTokens {
    #[new]
    #[pyo3(signature = (*, bos=None, eos=None, thinking_start=None, thinking_end=None, system=None,
        user=None, assistant=None, latest_reminder=None, dsml=None, image=None, r#ref=None,
        ref_end=None, r#box=None, box_end=None, point=None, point_end=None, polygon=None,
        polygon_end=None))]
    #[pyo3(
        text_signature = "(*, bos=None, eos=None, thinking_start=None, thinking_end=None, system=None, user=None, assistant=None, latest_reminder=None, dsml=None, image=None, ref=None, ref_end=None, box=None, box_end=None, point=None, point_end=None, polygon=None, polygon_end=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        #[pyo3(from_py_with = crate::args::opt_string)] bos: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] eos: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] thinking_start: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] thinking_end: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] system: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] user: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] assistant: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] latest_reminder: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] dsml: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] image: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] r#ref: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] ref_end: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] r#box: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] box_end: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] point: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] point_end: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] polygon: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] polygon_end: Option<String>,
    ) -> Self {
        let overrides = [
            bos,
            eos,
            thinking_start,
            thinking_end,
            system,
            user,
            assistant,
            latest_reminder,
            dsml,
            image,
            r#ref,
            ref_end,
            r#box,
            box_end,
            point,
            point_end,
            polygon,
            polygon_end,
        ];
        let mut inner = SpecialTokens::default();
        for (token, spelling) in SpecialToken::ALL.into_iter().zip(overrides) {
            if let Some(s) = spelling {
                inner.set(token, s);
            }
        }
        PySpecialTokens { inner }
    }

    /// The spelling of `token` in this table.
    fn token(
        &self,
        #[pyo3(from_py_with = crate::args::instance::<PySpecialToken>)] token: PyRef<
            '_,
            PySpecialToken,
        >,
    ) -> String {
        self.inner.get((*token).into()).to_owned()
    }
}

/// The model a conversation targets.
///
/// `DeepseekV4Pro` is rendered by `DeepseekV4Encoding`, `DeepseekV41Flash` by
/// `DeepseekV41Encoding`. Conversion picks the version from the request's `model` through
/// `ConversionOptions.model_versions_by_name`. Members are hashable.
#[pyclass(
    name = "ModelVersion",
    module = "deepseek_recipe._native",
    eq,
    eq_int,
    hash,
    frozen
)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum PyModelVersion {
    DeepseekV4Pro,
    DeepseekV41Flash,
}

impl From<PyModelVersion> for ModelVersion {
    fn from(v: PyModelVersion) -> Self {
        match v {
            PyModelVersion::DeepseekV4Pro => ModelVersion::DeepseekV4Pro,
            PyModelVersion::DeepseekV41Flash => ModelVersion::DeepseekV41Flash,
        }
    }
}

impl From<ModelVersion> for PyModelVersion {
    fn from(v: ModelVersion) -> Self {
        match v {
            ModelVersion::DeepseekV4Pro => PyModelVersion::DeepseekV4Pro,
            ModelVersion::DeepseekV41Flash => PyModelVersion::DeepseekV41Flash,
        }
    }
}

/// Where output parsing begins in thinking mode.
///
/// `ReasoningStart`: a new assistant turn, reasoning first (leading newlines dropped).
/// `ReasoningContinuation`: a prefix continuation still inside its reasoning.
/// `ContentContinuation`: a prefix continuation whose reasoning already ended. The two
/// continuations keep leading newlines.
#[pyclass(
    name = "ThinkingInitialStage",
    module = "deepseek_recipe._native",
    eq,
    eq_int,
    frozen
)]
#[derive(Clone, Copy, PartialEq)]
pub enum PyThinkingInitialStage {
    ReasoningStart,
    ReasoningContinuation,
    ContentContinuation,
}

impl From<PyThinkingInitialStage> for ThinkingInitialStage {
    fn from(s: PyThinkingInitialStage) -> Self {
        match s {
            PyThinkingInitialStage::ReasoningStart => ThinkingInitialStage::ReasoningStart,
            PyThinkingInitialStage::ReasoningContinuation => {
                ThinkingInitialStage::ReasoningContinuation
            }
            PyThinkingInitialStage::ContentContinuation => {
                ThinkingInitialStage::ContentContinuation
            }
        }
    }
}

impl From<ThinkingInitialStage> for PyThinkingInitialStage {
    fn from(s: ThinkingInitialStage) -> Self {
        match s {
            ThinkingInitialStage::ReasoningStart => PyThinkingInitialStage::ReasoningStart,
            ThinkingInitialStage::ReasoningContinuation => {
                PyThinkingInitialStage::ReasoningContinuation
            }
            ThinkingInitialStage::ContentContinuation => {
                PyThinkingInitialStage::ContentContinuation
            }
        }
    }
}

#[pymethods]
impl PyThinkingInitialStage {
    /// Whether parsing starts inside reasoning content.
    fn starts_in_reasoning(&self) -> bool {
        ThinkingInitialStage::from(*self).starts_in_reasoning()
    }
}

/// Settings for the output parser.
///
/// Every setting is a read-write attribute. `ConversationRequest.parsing_options` holds the
/// settings conversion derived from a request; a `StreamProcessor` copies them when built.
#[pyclass(name = "ParsingOptions", module = "deepseek_recipe._native")]
#[derive(Clone)]
pub struct PyParsingOptions {
    pub inner: ParsingOptions,
}

#[pymethods]
impl PyParsingOptions {
    #[new]
    #[pyo3(signature = (*, parse_tool_calls=true, starts_in_tool_calls=false, parse_json_output=false,
        thinking_initial_stage=None, stop_sequences=None, special_tokens=None))]
    fn new(
        #[pyo3(from_py_with = crate::args::boolean)] parse_tool_calls: bool,
        #[pyo3(from_py_with = crate::args::boolean)] starts_in_tool_calls: bool,
        #[pyo3(from_py_with = crate::args::boolean)] parse_json_output: bool,
        #[pyo3(from_py_with = crate::args::opt_value::<PyThinkingInitialStage>)]
        thinking_initial_stage: Option<PyThinkingInitialStage>,
        #[pyo3(from_py_with = crate::args::opt_strings)] stop_sequences: Option<Vec<String>>,
        #[pyo3(from_py_with = crate::args::opt_value::<PySpecialTokens>)] special_tokens: Option<
            PySpecialTokens,
        >,
    ) -> Self {
        PyParsingOptions {
            inner: ParsingOptions {
                parse_tool_calls,
                starts_in_tool_calls,
                parse_json_output,
                thinking_initial_stage: thinking_initial_stage.map(Into::into),
                stop_sequences: stop_sequences.unwrap_or_default(),
                special_tokens: special_tokens.map(|s| s.inner).unwrap_or_default(),
            },
        }
    }

    /// Whether DSML tool-call blocks in the output become tool calls.
    #[getter]
    fn get_parse_tool_calls(&self) -> bool {
        self.inner.parse_tool_calls
    }
    #[setter]
    fn set_parse_tool_calls(&mut self, v: bool) {
        self.inner.parse_tool_calls = v;
    }
    /// Whether the prompt already opened the tool-call block (a required tool choice).
    ///
    /// Takes precedence over `thinking_initial_stage`.
    #[getter]
    fn get_starts_in_tool_calls(&self) -> bool {
        self.inner.starts_in_tool_calls
    }
    #[setter]
    fn set_starts_in_tool_calls(&mut self, v: bool) {
        self.inner.starts_in_tool_calls = v;
    }
    /// Whether the answer is reduced to its JSON value (fenced or bare).
    ///
    /// The prose around the value is replaced by single spaces.
    #[getter]
    fn get_parse_json_output(&self) -> bool {
        self.inner.parse_json_output
    }
    #[setter]
    fn set_parse_json_output(&mut self, v: bool) {
        self.inner.parse_json_output = v;
    }
    /// Where parsing begins in thinking mode; `None` when thinking mode is off.
    #[getter]
    fn get_thinking_initial_stage(&self) -> Option<PyThinkingInitialStage> {
        self.inner.thinking_initial_stage.map(Into::into)
    }
    #[setter]
    fn set_thinking_initial_stage(&mut self, v: Option<PyThinkingInitialStage>) {
        self.inner.thinking_initial_stage = v.map(Into::into);
    }
    /// Strings that end the answer where they appear in the output.
    #[getter]
    fn get_stop_sequences(&self) -> Vec<String> {
        self.inner.stop_sequences.clone()
    }
    #[setter]
    fn set_stop_sequences(&mut self, v: Vec<String>) {
        self.inner.stop_sequences = v;
    }
    /// The control-token spellings the parser recognises (a copy).
    #[getter]
    fn get_special_tokens(&self) -> PySpecialTokens {
        PySpecialTokens {
            inner: self.inner.special_tokens.clone(),
        }
    }
    #[setter]
    fn set_special_tokens(&mut self, v: PySpecialTokens) {
        self.inner.special_tokens = v.inner;
    }
}

/// A Hugging Face tokenizer (`tokenizer.json`).
///
/// An encoding uses it, after `with_tokenizer`, to turn conversations into token IDs; a
/// `StreamProcessor` uses it to decode `tokens` chunks.
#[pyclass(name = "Tokenizer", module = "deepseek_recipe._native", frozen)]
#[derive(Clone)]
pub struct PyTokenizer {
    pub inner: Tokenizer,
    /// The vocabulary as output grammars see it, built by the first `OutputGrammar.compile`
    /// with this tokenizer and shared by every later one (see `grammar.rs`).
    pub grammar_vocabulary:
        std::sync::Arc<std::sync::OnceLock<std::sync::Arc<recipe_grammar::GrammarVocabulary>>>,
}

fn runtime_error(e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

#[pymethods]
impl PyTokenizer {
    /// Load a `tokenizer.json` file.
    #[staticmethod]
    fn from_file(#[pyo3(from_py_with = crate::args::string)] path: String) -> PyResult<Self> {
        // Same messages as the official package: the I/O or parse error alone.
        let text = std::fs::read_to_string(&path).map_err(runtime_error)?;
        Self::from_str(text)
    }

    /// Load a tokenizer from the text of a `tokenizer.json` file.
    #[staticmethod]
    fn from_str(#[pyo3(from_py_with = crate::args::string)] text: String) -> PyResult<Self> {
        Tokenizer::from_json(&text)
            .map(|inner| PyTokenizer {
                inner,
                grammar_vocabulary: Default::default(),
            })
            .map_err(|e| match e {
                recipe_core::tokenizer::TokenizerError::Load(msg) => PyRuntimeError::new_err(msg),
                other => runtime_error(other),
            })
    }

    /// Load `tokenizer.json` of a Hub repository from the local Hugging Face cache.
    ///
    /// Nothing is downloaded: the file must already be in the cache (`HF_HUB_CACHE`,
    /// `HF_HOME/hub` or `~/.cache/huggingface/hub`).
    #[staticmethod]
    #[pyo3(signature = (identifier, revision=None, token=None))]
    fn from_pretrained(
        #[pyo3(from_py_with = crate::args::string)] identifier: String,
        #[pyo3(from_py_with = crate::args::opt_string)] revision: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_string)] token: Option<String>,
    ) -> PyResult<Self> {
        let _ = token; // Only needed for downloads, which this codec never performs.
        let path = recipe_core::tokenizer::find_in_hf_cache(&identifier, revision.as_deref())
            .map_err(runtime_error)?;
        Self::from_file(path.to_string_lossy().into_owned())
    }

    /// Encode text with the full vocabulary (control-token spellings become their IDs); no BOS.
    fn encode(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = crate::args::string)] text: String,
    ) -> PyResult<Vec<u32>> {
        py.allow_threads(|| self.inner.encode_with_special(&text))
            .map_err(runtime_error)
    }

    /// Decode token IDs to text; control tokens are kept as their spellings.
    fn decode(&self, py: Python<'_>, ids: Vec<u32>) -> PyResult<String> {
        py.allow_threads(|| self.inner.decode(&ids))
            .map_err(runtime_error)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySpecialToken>()?;
    m.add_class::<PySpecialTokens>()?;
    m.add_class::<PyModelVersion>()?;
    m.add_class::<PyThinkingInitialStage>()?;
    m.add_class::<PyParsingOptions>()?;
    m.add_class::<PyTokenizer>()?;
    Ok(())
}
