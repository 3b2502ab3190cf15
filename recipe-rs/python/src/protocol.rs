//! Bindings for request conversion: the three request classes, `ConversionOptions`,
//! `ConversationRequest` (with `InferenceOptions` / `OutputConstraint`), `ResponsesEcho` and the
//! `ConversionError` exception.
//!
//! The request classes hold the parsed body until `convert` takes it: after that (even when
//! conversion fails) the object is consumed.

use std::collections::BTreeMap;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyString};
use serde_json::Value;

use recipe_core::ResponsesEcho;
use recipe_protocol::{
    chat, messages, responses, ConversationRequest, ConversionError as RequestConversionError,
    ConversionOptions, InferenceOptions, OutputConstraint, ReasoningContentBehavior, RequestError,
    WebSearchBehavior,
};

use crate::conversation::PyConversation;
use crate::py_json::py_to_json;
use crate::py_serde::{from_py, from_py_preparing};
use crate::vocabulary::{PyModelVersion, PyParsingOptions, PySpecialTokens};

// The class is named and placed exactly as the official one (`_native.ConversionError`, a
// direct subclass of `Exception`), so `type(e).__name__`, `repr(e)`, `__module__` and pickling
// (which fails there, as the module `_native` cannot be imported by that name) all match.
create_exception!(
    _native,
    ConversionError,
    PyException,
    "A request that is well-formed but cannot be served; `status_code` and `body` hold the HTTP answer."
);

/// Raise a `ConversionError` carrying `status_code` and `body`.
pub fn conversion_error(py: Python<'_>, e: &RequestConversionError) -> PyErr {
    let err = ConversionError::new_err(e.message.clone());
    let value = err.value(py);
    let _ = value.setattr("status_code", e.status_code);
    let _ = value.setattr("body", e.body());
    err
}

fn request_error(e: RequestError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn consumed() -> PyErr {
    PyRuntimeError::new_err("protocol request has been consumed")
}

/// A request body: JSON text (`str` / `bytes`) or an already-decoded object.
/// JSON text is read by the request's own `from_slice`, an object by `from_py` (see
/// [`crate::py_serde`]); both keep only the top-level fields the request reads (the others are
/// checked as fully, with the same errors, but not stored), and both type the request without
/// holding the whole body as one JSON value.
fn request_from_body<R>(
    body: &Bound<'_, PyAny>,
    from_slice: fn(&[u8]) -> Result<R, RequestError>,
    from_py: fn(&Bound<'_, PyAny>) -> PyResult<Result<R, serde_json::Error>>,
) -> PyResult<R> {
    if let Ok(s) = body.downcast::<PyString>() {
        let text = s.to_cow()?;
        return from_slice(text.as_bytes()).map_err(request_error);
    }
    if let Ok(b) = body.downcast::<PyBytes>() {
        return from_slice(b.as_bytes()).map_err(request_error);
    }
    if body.downcast::<PyByteArray>().is_ok() {
        return Err(PyTypeError::new_err("bytearray is not a JSON value"));
    }
    from_py(body)?.map_err(|e| request_error(RequestError::Body(e.to_string())))
}

fn chat_from_py(
    body: &Bound<'_, PyAny>,
) -> PyResult<Result<chat::ChatCompletionRequest, serde_json::Error>> {
    from_py_preparing::<_, chat::ChatCompletionRequestMessage>(body, "messages")
}

/// As `ResponsesRequest::from_value`: `reasoning` and `text` are also kept as given (non-null),
/// for the response objects to echo.
fn responses_from_py(
    body: &Bound<'_, PyAny>,
) -> PyResult<Result<responses::ResponsesRequest, serde_json::Error>> {
    let mut req = match from_py::<responses::ResponsesRequest>(body)? {
        Ok(req) => req,
        Err(e) => return Ok(Err(e)),
    };
    if let Ok(d) = body.downcast::<PyDict>() {
        let raw = |key: &str| -> PyResult<Option<Value>> {
            match d.get_item(key)? {
                Some(v) if !v.is_none() => py_to_json(&v).map(Some),
                _ => Ok(None),
            }
        };
        req.raw_reasoning = raw("reasoning")?;
        req.raw_text = raw("text")?;
    }
    Ok(Ok(req))
}

fn messages_from_py(
    body: &Bound<'_, PyAny>,
) -> PyResult<Result<messages::MessagesRequest, serde_json::Error>> {
    from_py_preparing::<_, messages::MessagesMessage>(body, "messages")
}

// ---------------------------------------------------------------------------------------------
// Options

/// Handling of web-search tools and server-tool blocks.
///
/// `Drop` removes them from the request; `Reject` refuses the request.
#[pyclass(
    name = "WebSearchBehavior",
    module = "deepseek_recipe._native",
    eq,
    eq_int,
    frozen
)]
#[derive(Clone, Copy, PartialEq)]
pub enum PyWebSearchBehavior {
    Drop,
    Reject,
}

impl From<PyWebSearchBehavior> for WebSearchBehavior {
    fn from(v: PyWebSearchBehavior) -> Self {
        match v {
            PyWebSearchBehavior::Drop => WebSearchBehavior::Drop,
            PyWebSearchBehavior::Reject => WebSearchBehavior::Reject,
        }
    }
}

impl From<WebSearchBehavior> for PyWebSearchBehavior {
    fn from(v: WebSearchBehavior) -> Self {
        match v {
            WebSearchBehavior::Drop => PyWebSearchBehavior::Drop,
            WebSearchBehavior::Reject => PyWebSearchBehavior::Reject,
        }
    }
}

/// Handling of assistant turns without reasoning content in thinking mode.
///
/// `FillEmpty` uses empty reasoning; `Reject` refuses a request that lacks reasoning it needs.
#[pyclass(
    name = "ReasoningContentBehavior",
    module = "deepseek_recipe._native",
    eq,
    eq_int,
    frozen
)]
#[derive(Clone, Copy, PartialEq)]
pub enum PyReasoningContentBehavior {
    FillEmpty,
    Reject,
}

impl From<PyReasoningContentBehavior> for ReasoningContentBehavior {
    fn from(v: PyReasoningContentBehavior) -> Self {
        match v {
            PyReasoningContentBehavior::FillEmpty => ReasoningContentBehavior::FillEmpty,
            PyReasoningContentBehavior::Reject => ReasoningContentBehavior::Reject,
        }
    }
}

impl From<ReasoningContentBehavior> for PyReasoningContentBehavior {
    fn from(v: ReasoningContentBehavior) -> Self {
        match v {
            ReasoningContentBehavior::FillEmpty => PyReasoningContentBehavior::FillEmpty,
            ReasoningContentBehavior::Reject => PyReasoningContentBehavior::Reject,
        }
    }
}

/// Server-side conversion policy (immutable; the `with_*` methods return modified copies).
///
/// By default a request without a thinking setting uses thinking mode, missing reasoning is
/// filled with an empty string, web search is dropped from Responses and rejected in Messages
/// requests, `max_tokens` may reach 393216, and the accepted model names are `DeepSeek-V4-Pro`
/// and `DeepSeek-V4.1-Flash`.
#[pyclass(name = "ConversionOptions", module = "deepseek_recipe._native", frozen)]
#[derive(Clone, Default)]
pub struct PyConversionOptions {
    pub inner: ConversionOptions,
}

/// `{name: ModelVersion}` with the official package's type errors.
fn model_version_map(obj: &Bound<'_, PyAny>) -> PyResult<BTreeMap<String, PyModelVersion>> {
    crate::args::string_map(obj, crate::args::value::<PyModelVersion>)
}

#[pymethods]
impl PyConversionOptions {
    #[new]
    #[pyo3(signature = (*, default_thinking_mode=true,
        reasoning_content_behavior=PyReasoningContentBehavior::FillEmpty,
        responses_web_search=PyWebSearchBehavior::Drop,
        messages_web_search=PyWebSearchBehavior::Reject,
        thinking_max_tokens_upper_bound=393216,
        non_thinking_max_tokens_upper_bound=393216))]
    fn new(
        #[pyo3(from_py_with = crate::args::boolean)] default_thinking_mode: bool,
        #[pyo3(from_py_with = crate::args::value::<PyReasoningContentBehavior>)]
        reasoning_content_behavior: PyReasoningContentBehavior,
        #[pyo3(from_py_with = crate::args::value::<PyWebSearchBehavior>)]
        responses_web_search: PyWebSearchBehavior,
        #[pyo3(from_py_with = crate::args::value::<PyWebSearchBehavior>)]
        messages_web_search: PyWebSearchBehavior,
        thinking_max_tokens_upper_bound: u32,
        non_thinking_max_tokens_upper_bound: u32,
    ) -> Self {
        PyConversionOptions {
            inner: ConversionOptions {
                default_thinking_mode,
                reasoning_content_behavior: reasoning_content_behavior.into(),
                responses_web_search: responses_web_search.into(),
                messages_web_search: messages_web_search.into(),
                thinking_max_tokens_upper_bound,
                non_thinking_max_tokens_upper_bound,
                ..ConversionOptions::default()
            },
        }
    }

    /// Whether a request that does not say uses thinking mode.
    #[getter]
    fn default_thinking_mode(&self) -> bool {
        self.inner.default_thinking_mode
    }
    /// The accepted request `model` names and the version each targets.
    #[getter]
    fn model_versions_by_name(&self) -> BTreeMap<String, PyModelVersion> {
        self.inner
            .model_versions_by_name
            .iter()
            .map(|(k, v)| (k.clone(), (*v).into()))
            .collect()
    }
    /// The largest `max_tokens` accepted in thinking mode.
    #[getter]
    fn thinking_max_tokens_upper_bound(&self) -> u32 {
        self.inner.thinking_max_tokens_upper_bound
    }
    /// The largest `max_tokens` accepted outside thinking mode.
    #[getter]
    fn non_thinking_max_tokens_upper_bound(&self) -> u32 {
        self.inner.non_thinking_max_tokens_upper_bound
    }
    /// What to do with assistant history that lacks reasoning in thinking mode.
    #[getter]
    fn reasoning_content_behavior(&self) -> PyReasoningContentBehavior {
        self.inner.reasoning_content_behavior.into()
    }
    /// What to do with web search in Responses requests.
    #[getter]
    fn responses_web_search(&self) -> PyWebSearchBehavior {
        self.inner.responses_web_search.into()
    }
    /// What to do with web search in Messages requests.
    #[getter]
    fn messages_web_search(&self) -> PyWebSearchBehavior {
        self.inner.messages_web_search.into()
    }
    /// The control-token spellings conversion uses.
    #[getter]
    fn special_tokens(&self) -> PySpecialTokens {
        PySpecialTokens {
            inner: self.inner.special_tokens.clone(),
        }
    }

    /// A copy with another default thinking mode.
    fn with_default_thinking_mode(
        &self,
        #[pyo3(from_py_with = crate::args::boolean)] default_thinking_mode: bool,
    ) -> Self {
        let mut inner = self.inner.clone();
        inner.default_thinking_mode = default_thinking_mode;
        PyConversionOptions { inner }
    }
    /// A copy with another handling of missing reasoning content.
    fn with_reasoning_content_behavior(
        &self,
        #[pyo3(from_py_with = crate::args::value::<PyReasoningContentBehavior>)]
        reasoning_content_behavior: PyReasoningContentBehavior,
    ) -> Self {
        let mut inner = self.inner.clone();
        inner.reasoning_content_behavior = reasoning_content_behavior.into();
        PyConversionOptions { inner }
    }
    /// A copy with another web-search handling for Responses requests.
    fn with_responses_web_search(
        &self,
        #[pyo3(from_py_with = crate::args::value::<PyWebSearchBehavior>)]
        responses_web_search: PyWebSearchBehavior,
    ) -> Self {
        let mut inner = self.inner.clone();
        inner.responses_web_search = responses_web_search.into();
        PyConversionOptions { inner }
    }
    /// A copy with another web-search handling for Messages requests.
    fn with_messages_web_search(
        &self,
        #[pyo3(from_py_with = crate::args::value::<PyWebSearchBehavior>)]
        messages_web_search: PyWebSearchBehavior,
    ) -> Self {
        let mut inner = self.inner.clone();
        inner.messages_web_search = messages_web_search.into();
        PyConversionOptions { inner }
    }
    /// A copy with other control-token spellings.
    fn with_special_tokens(
        &self,
        #[pyo3(from_py_with = crate::args::value::<PySpecialTokens>)]
        special_tokens: PySpecialTokens,
    ) -> Self {
        let mut inner = self.inner.clone();
        inner.special_tokens = special_tokens.inner;
        PyConversionOptions { inner }
    }
    /// A copy that also accepts `model` as a name of `model_version` (or re-targets it).
    fn with_model_alias(
        &self,
        #[pyo3(from_py_with = crate::args::string)] model: String,
        #[pyo3(from_py_with = crate::args::value::<PyModelVersion>)] model_version: PyModelVersion,
    ) -> Self {
        PyConversionOptions {
            inner: self
                .inner
                .clone()
                .with_model_alias(model, model_version.into()),
        }
    }
    /// A copy whose accepted model names are exactly `model_versions_by_name`.
    fn with_model_versions_by_name(
        &self,
        #[pyo3(from_py_with = model_version_map)] model_versions_by_name: BTreeMap<
            String,
            PyModelVersion,
        >,
    ) -> Self {
        let mut inner = self.inner.clone();
        inner.model_versions_by_name = model_versions_by_name
            .into_iter()
            .map(|(k, v)| (k, v.into()))
            .collect();
        PyConversionOptions { inner }
    }
    /// A copy with another `max_tokens` bound for thinking mode.
    fn with_thinking_max_tokens_upper_bound(&self, thinking_max_tokens_upper_bound: u32) -> Self {
        let mut inner = self.inner.clone();
        inner.thinking_max_tokens_upper_bound = thinking_max_tokens_upper_bound;
        PyConversionOptions { inner }
    }
    /// A copy with another `max_tokens` bound outside thinking mode.
    fn with_non_thinking_max_tokens_upper_bound(
        &self,
        non_thinking_max_tokens_upper_bound: u32,
    ) -> Self {
        let mut inner = self.inner.clone();
        inner.non_thinking_max_tokens_upper_bound = non_thinking_max_tokens_upper_bound;
        PyConversionOptions { inner }
    }
}

// ---------------------------------------------------------------------------------------------
// Result

/// A constraint the backend may enforce on the output.
#[pyclass(name = "OutputConstraint", module = "deepseek_recipe._native", frozen)]
#[derive(Clone)]
pub struct PyOutputConstraint {
    pub inner: OutputConstraint,
}

#[pymethods]
impl PyOutputConstraint {
    /// `"json"`, `"regex"`, `"tool_call"` or `"tool_call_required"`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind.as_str()
    }
    /// The constraint text: compact JSON Schema, regular expression or tool list (may be empty).
    #[getter]
    fn schema(&self) -> String {
        self.inner.schema.clone()
    }
    fn __repr__(&self) -> String {
        format!(
            "OutputConstraint(kind={:?}, schema={:?})",
            self.inner.kind.as_str(),
            self.inner.schema
        )
    }
}

/// Sampling settings extracted from a request.
#[pyclass(name = "InferenceOptions", module = "deepseek_recipe._native", frozen)]
#[derive(Clone)]
pub struct PyInferenceOptions {
    pub inner: InferenceOptions,
}

#[pymethods]
impl PyInferenceOptions {
    /// The requested output limit; `None` leaves it to `ConversationRequest.resolve_max_tokens`.
    #[getter]
    fn max_tokens(&self) -> Option<u32> {
        self.inner.max_tokens
    }
    /// The sampling temperature to use.
    #[getter]
    fn temperature(&self) -> Option<f64> {
        self.inner.temperature.map(f64::from)
    }
    /// The nucleus-sampling `top_p` to use.
    #[getter]
    fn top_p(&self) -> Option<f64> {
        self.inner.top_p.map(f64::from)
    }
    /// Whether the request asks for log probabilities of the output tokens.
    #[getter]
    fn logprobs(&self) -> bool {
        self.inner.logprobs
    }
    /// How many alternatives to report per output token, if asked.
    #[getter]
    fn top_logprobs(&self) -> Option<u32> {
        self.inner.top_logprobs
    }
    /// The sampling seed, if the request gives one.
    #[getter]
    fn seed(&self) -> Option<u64> {
        self.inner.seed
    }
    /// What constrained decoding would enforce on the output, if anything.
    #[getter]
    fn output_constraint(&self) -> Option<PyOutputConstraint> {
        self.inner
            .output_constraint
            .clone()
            .map(|inner| PyOutputConstraint { inner })
    }
}

/// A converted request: conversation, backend settings, parser settings, target model.
///
/// Usually returned by a request's `convert`; the constructor wraps a conversation with default
/// inference and parsing options, not streamed.
#[pyclass(
    name = "ConversationRequest",
    module = "deepseek_recipe._native",
    frozen
)]
#[derive(Clone)]
pub struct PyConversationRequest {
    pub inner: ConversationRequest,
}

#[pymethods]
impl PyConversationRequest {
    #[new]
    fn new(
        #[pyo3(from_py_with = crate::args::instance::<PyConversation>)] conversation: PyRef<
            '_,
            PyConversation,
        >,
        #[pyo3(from_py_with = crate::args::value::<PyModelVersion>)] model_version: PyModelVersion,
    ) -> Self {
        PyConversationRequest {
            inner: ConversationRequest::new(conversation.core().clone(), model_version.into()),
        }
    }
    /// The conversation to render.
    #[getter]
    fn conversation(&self) -> PyConversation {
        PyConversation::from_core(self.inner.conversation.clone())
    }
    /// The sampling settings for the backend.
    #[getter]
    fn inference_options(&self) -> PyInferenceOptions {
        PyInferenceOptions {
            inner: self.inner.inference_options.clone(),
        }
    }
    /// The parser settings for the output (a copy).
    #[getter]
    fn parsing_options(&self) -> PyParsingOptions {
        PyParsingOptions {
            inner: self.inner.parsing_options.clone(),
        }
    }
    /// The model the conversation targets.
    #[getter]
    fn model_version(&self) -> PyModelVersion {
        self.inner.model_version.into()
    }
    /// Whether the client asked for a streamed response.
    #[getter]
    fn stream(&self) -> bool {
        self.inner.stream
    }
    /// The `max_tokens` to send to the backend for a prompt of `prompt_tokens` tokens in a
    /// context of `context_limit` tokens.
    fn resolve_max_tokens(
        &self,
        py: Python<'_>,
        prompt_tokens: u32,
        context_limit: u32,
    ) -> PyResult<u32> {
        self.inner
            .resolve_max_tokens(prompt_tokens, context_limit)
            .map_err(|e| conversion_error(py, &e))
    }
}

/// Request settings that a Responses response reports back.
///
/// Usually read from a request with `ResponsesRequest.echo`; the constructor gives the settings
/// of a request that specifies none.
#[pyclass(name = "ResponsesEcho", module = "deepseek_recipe._native", frozen)]
#[derive(Clone, Default)]
pub struct PyResponsesEcho {
    pub inner: ResponsesEcho,
}

#[pymethods]
impl PyResponsesEcho {
    #[new]
    fn new() -> Self {
        PyResponsesEcho::default()
    }
    /// The request's `instructions`.
    #[getter]
    fn instructions(&self) -> Option<String> {
        self.inner.instructions.clone()
    }
    /// The request's `max_output_tokens`.
    #[getter]
    fn max_output_tokens(&self) -> Option<u64> {
        self.inner.max_output_tokens
    }
    /// The request's `temperature` (1.0 when unset).
    #[getter]
    fn temperature(&self) -> f64 {
        self.inner.temperature
    }
    /// The request's `top_p` (1.0 when unset).
    #[getter]
    fn top_p(&self) -> f64 {
        self.inner.top_p
    }
    /// The request's `top_logprobs` (0 when unset).
    #[getter]
    fn top_logprobs(&self) -> u64 {
        self.inner.top_logprobs
    }
    /// The request's `user`.
    #[getter]
    fn user(&self) -> Option<String> {
        self.inner.user.clone()
    }
}

// ---------------------------------------------------------------------------------------------
// Requests

/// Declares the Python class of one request format: built from a `dict`, `str` or `bytes` body
/// (a malformed body is a `ValueError`), with its `model` and a `convert` that consumes it.
///
/// `chunk_generator` (its doc first) builds that protocol's generator; the methods in braces go
/// into the same `#[pymethods]` block.
macro_rules! request_class {
    ($(#[$doc:meta])* $py:ident, $name:literal, $request:ty, $from_py:ident,
     $(#[$gen_doc:meta])* $py_generator:ident($generator:ty) { $($methods:tt)* }) => {
        $(#[$doc])*
        ///
        /// The body is JSON text (`str` or `bytes`) or the decoded object (a `dict`); a body that
        /// does not parse, or is not a request of this format, raises `ValueError`.
        #[pyclass(name = $name, module = "deepseek_recipe._native")]
        pub struct $py {
            pub inner: Option<$request>,
        }

        #[pymethods]
        impl $py {
            #[new]
            fn new(body: &Bound<'_, PyAny>) -> PyResult<Self> {
                let inner = request_from_body(body, <$request>::from_slice, $from_py)?;
                Ok($py { inner: Some(inner) })
            }
            /// The requested model name (read it before `convert`).
            #[getter]
            fn model(&self) -> PyResult<String> {
                self.inner.as_ref().map(|r| r.model.clone()).ok_or_else(consumed)
            }
            /// Convert into a conversation request; the request is consumed even when this fails.
            fn convert(
                &mut self,
                py: Python<'_>,
                #[pyo3(from_py_with = crate::args::instance::<PyConversionOptions>)] options: PyRef<'_, PyConversionOptions>,
            ) -> PyResult<PyConversationRequest> {
                let req = self.inner.take().ok_or_else(consumed)?;
                let opts = &options.inner;
                py.allow_threads(|| req.convert(opts))
                    .map(|inner| PyConversationRequest { inner })
                    .map_err(|e| conversion_error(py, &e))
            }
            $(#[$gen_doc])*
            #[staticmethod]
            fn chunk_generator(
                #[pyo3(from_py_with = crate::args::instance::<PyConversationRequest>)]
                request: PyRef<'_, PyConversationRequest>,
                #[pyo3(from_py_with = crate::args::string)] id: String,
                #[pyo3(from_py_with = crate::args::string)] model: String,
            ) -> crate::stream::$py_generator {
                crate::stream::$py_generator::new(crate::stream_glue::generator_for::<$generator>(
                    id, model, &request,
                ))
            }
            $($methods)*
        }
    };
}

request_class!(
    /// A Chat Completions request body; `convert` consumes it.
    PyChatCompletionRequest, "ChatCompletionRequest", chat::ChatCompletionRequest, chat_from_py,
    /// A Chat Completions generator for the converted `request`, writing chunks with `id` and
    /// `model`.
    PyChatCompletionChunkGenerator(recipe_stream::ChatGenerator) {}
);
request_class!(
    /// An OpenAI Responses request body; `convert` consumes it.
    PyResponsesRequest, "ResponsesRequest", responses::ResponsesRequest, responses_from_py,
    /// A Responses generator for the converted `request`. A request converted from a Responses
    /// body reports that body's settings (instructions, temperature, reasoning, tools, …) in
    /// its response objects; `with_echo` replaces them.
    PyResponsesChunkGenerator(recipe_stream::ResponsesGenerator) {
        /// The request settings a Responses response reports back.
        fn echo(&self) -> PyResult<PyResponsesEcho> {
            self.inner
                .as_ref()
                .map(|r| PyResponsesEcho { inner: r.echo() })
                .ok_or_else(consumed)
        }
        /// `{"ns::name": ("ns", "name")}` for the functions declared in namespace tools.
        fn namespace_tool_map(
            &self,
            py: Python<'_>,
            #[pyo3(from_py_with = crate::args::instance::<PyConversionOptions>)] options: PyRef<
                '_,
                PyConversionOptions,
            >,
        ) -> PyResult<BTreeMap<String, (String, String)>> {
            let req = self.inner.as_ref().ok_or_else(consumed)?;
            req.namespace_tool_map(&options.inner)
                .map_err(|e| conversion_error(py, &e))
        }
    }
);
request_class!(
    /// An Anthropic Messages request body; `convert` consumes it.
    PyMessagesRequest, "MessagesRequest", messages::MessagesRequest, messages_from_py,
    /// A Messages generator for the converted `request`.
    PyMessagesChunkGenerator(recipe_stream::MessagesGenerator) {}
);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ConversionError", m.py().get_type::<ConversionError>())?;
    m.add_class::<PyWebSearchBehavior>()?;
    m.add_class::<PyReasoningContentBehavior>()?;
    m.add_class::<PyConversionOptions>()?;
    m.add_class::<PyOutputConstraint>()?;
    m.add_class::<PyInferenceOptions>()?;
    m.add_class::<PyConversationRequest>()?;
    m.add_class::<PyResponsesEcho>()?;
    m.add_class::<PyChatCompletionRequest>()?;
    m.add_class::<PyResponsesRequest>()?;
    m.add_class::<PyMessagesRequest>()?;
    Ok(())
}
