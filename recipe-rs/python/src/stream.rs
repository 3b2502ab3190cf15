//! Bindings for output processing: backend chunks, the stream processor, the per-protocol
//! generators, their chunks/events and the response accumulators.

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::cell::RefCell;

use pyo3::types::{PyList, PyString};
use recipe_stream::generator::{ChatChunk, MessagesEvent, ResponsesEvent, WireJson};
use recipe_stream::sse;
use recipe_stream::{
    ChatGenerator, Generator, GeneratorConfig, InferenceChunk, InferenceFinishReason,
    MessagesGenerator, PromptUsage, ResponsesGenerator, StreamItem, StreamProcessor,
};

use crate::vocabulary::{PyParsingOptions, PyThinkingInitialStage, PyTokenizer};

/// One generated token's log probability and its top alternatives `(token_id, logprob)`.
type TokenLogprob = (f32, Vec<(u32, f32)>);

fn runtime(e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

/// Prompt-side token counts reported by the backend.
#[pyclass(name = "PromptUsage", module = "deepseek_recipe._native", frozen)]
#[derive(Clone, Copy)]
pub struct PyPromptUsage {
    pub inner: PromptUsage,
}

#[pymethods]
impl PyPromptUsage {
    #[new]
    #[pyo3(signature = (*, prompt_tokens=0, prompt_cache_hit_tokens=0))]
    fn new(prompt_tokens: u64, prompt_cache_hit_tokens: u64) -> Self {
        PyPromptUsage {
            inner: PromptUsage {
                prompt_tokens,
                prompt_cache_hit_tokens,
            },
        }
    }
    /// Tokens in the prompt.
    #[getter]
    fn prompt_tokens(&self) -> u64 {
        self.inner.prompt_tokens
    }
    /// Prompt tokens served from the prefix cache.
    #[getter]
    fn prompt_cache_hit_tokens(&self) -> u64 {
        self.inner.prompt_cache_hit_tokens
    }
    fn __repr__(&self) -> String {
        format!(
            "PromptUsage(prompt_tokens={}, prompt_cache_hit_tokens={})",
            self.inner.prompt_tokens, self.inner.prompt_cache_hit_tokens
        )
    }
}

/// Why the backend stopped; the protocol finish reason also depends on what was parsed.
///
/// `Stop`: end of sequence or a stop condition; `Length`: the token limit; `ContentFilter`:
/// the backend withheld the output.
#[pyclass(
    name = "InferenceFinishReason",
    module = "deepseek_recipe._native",
    eq,
    eq_int,
    frozen
)]
#[derive(Clone, Copy, PartialEq)]
pub enum PyInferenceFinishReason {
    Stop,
    Length,
    ContentFilter,
}

impl From<PyInferenceFinishReason> for InferenceFinishReason {
    fn from(r: PyInferenceFinishReason) -> Self {
        match r {
            PyInferenceFinishReason::Stop => InferenceFinishReason::Stop,
            PyInferenceFinishReason::Length => InferenceFinishReason::Length,
            PyInferenceFinishReason::ContentFilter => InferenceFinishReason::ContentFilter,
        }
    }
}

impl From<InferenceFinishReason> for PyInferenceFinishReason {
    fn from(r: InferenceFinishReason) -> Self {
        match r {
            InferenceFinishReason::Stop => PyInferenceFinishReason::Stop,
            InferenceFinishReason::Length => PyInferenceFinishReason::Length,
            InferenceFinishReason::ContentFilter => PyInferenceFinishReason::ContentFilter,
        }
    }
}

/// One backend update; build it with `ready`, `text`, `tokens` or `finish`.
#[pyclass(name = "InferenceChunk", module = "deepseek_recipe._native", frozen)]
#[derive(Clone)]
pub struct PyInferenceChunk {
    pub inner: InferenceChunk,
}

#[pymethods]
impl PyInferenceChunk {
    /// The prompt was processed (prompt usage and backend fingerprint are optional).
    #[staticmethod]
    #[pyo3(signature = (*, prompt_usage=None, system_fingerprint=None))]
    fn ready(
        #[pyo3(from_py_with = crate::args::opt_value::<PyPromptUsage>)] prompt_usage: Option<
            PyPromptUsage,
        >,
        #[pyo3(from_py_with = crate::args::opt_string)] system_fingerprint: Option<String>,
    ) -> Self {
        PyInferenceChunk {
            inner: InferenceChunk::Ready {
                prompt_usage: prompt_usage.map(|p| p.inner),
                system_fingerprint,
            },
        }
    }

    /// Decoded text that stands for `token_count` generated tokens.
    #[staticmethod]
    #[pyo3(signature = (content, token_count=0))]
    fn text(#[pyo3(from_py_with = crate::args::string)] content: String, token_count: u64) -> Self {
        PyInferenceChunk {
            inner: InferenceChunk::Text {
                content,
                token_count,
            },
        }
    }

    /// Generated token IDs; `logprobs` holds one `(logprob, [(token_id, logprob), ...])` per ID.
    #[staticmethod]
    #[pyo3(signature = (token_ids, logprobs=None))]
    fn tokens(token_ids: Vec<u32>, logprobs: Option<Vec<TokenLogprob>>) -> Self {
        PyInferenceChunk {
            inner: InferenceChunk::Tokens {
                token_ids,
                logprobs,
            },
        }
    }

    /// The backend stopped for `finish_reason`.
    #[staticmethod]
    fn finish(
        #[pyo3(from_py_with = crate::args::value::<PyInferenceFinishReason>)]
        finish_reason: PyInferenceFinishReason,
    ) -> Self {
        PyInferenceChunk {
            inner: InferenceChunk::Finish(finish_reason.into()),
        }
    }

    /// `"ready"`, `"text"`, `"tokens"` or `"finish"`: which constructor built the chunk.
    #[getter]
    fn kind(&self) -> &'static str {
        match self.inner {
            InferenceChunk::Ready { .. } => "ready",
            InferenceChunk::Text { .. } => "text",
            InferenceChunk::Tokens { .. } => "tokens",
            InferenceChunk::Finish(_) => "finish",
        }
    }
    /// The text of a `text` chunk.
    #[getter]
    fn content(&self) -> Option<String> {
        match &self.inner {
            InferenceChunk::Text { content, .. } => Some(content.clone()),
            _ => None,
        }
    }
    /// The token IDs of a `tokens` chunk.
    #[getter]
    fn token_ids(&self) -> Option<Vec<u32>> {
        match &self.inner {
            InferenceChunk::Tokens { token_ids, .. } => Some(token_ids.clone()),
            _ => None,
        }
    }
    /// The reason of a `finish` chunk.
    #[getter]
    fn finish_reason(&self) -> Option<PyInferenceFinishReason> {
        match &self.inner {
            InferenceChunk::Finish(r) => Some((*r).into()),
            _ => None,
        }
    }
    /// The prompt usage of a `ready` chunk (zero counts when none was given), else `None`.
    #[getter]
    fn prompt_usage(&self) -> Option<PyPromptUsage> {
        match &self.inner {
            InferenceChunk::Ready { prompt_usage, .. } => Some(PyPromptUsage {
                inner: prompt_usage.unwrap_or_default(),
            }),
            _ => None,
        }
    }
    /// The token count of a `text` chunk.
    #[getter]
    fn token_count(&self) -> Option<u64> {
        match &self.inner {
            InferenceChunk::Text { token_count, .. } => Some(*token_count),
            _ => None,
        }
    }
    /// The backend fingerprint of a `ready` chunk, if given.
    #[getter]
    fn system_fingerprint(&self) -> Option<String> {
        match &self.inner {
            InferenceChunk::Ready {
                system_fingerprint, ..
            } => system_fingerprint.clone(),
            _ => None,
        }
    }
    fn __repr__(&self) -> String {
        format!("InferenceChunk.{:?}", self.inner)
    }
}

fn consumed() -> PyErr {
    PyRuntimeError::new_err("generator has been consumed")
}

fn config(thinking_mode: bool, stage: Option<PyThinkingInitialStage>) -> GeneratorConfig {
    GeneratorConfig {
        thinking_mode,
        starts_in_reasoning: stage
            .is_some_and(|s| recipe_core::ThinkingInitialStage::from(s).starts_in_reasoning()),
    }
}

/// Declares the Python class of one protocol's chunk generator: it holds the generator until a
/// stream processor (or a `with_*` method, which returns a new object) consumes it.
///
/// With `settings`, the class gets the constructor that Chat Completions and Responses share:
/// `(id, model, *, thinking_mode=False, thinking_initial_stage=None)`. The methods in braces go
/// into the same `#[pymethods]` block (one block per class: without PyO3's
/// `multiple-pymethods` inventory, every type-object lookup stays a plain load).
macro_rules! chunk_generator_class {
    ($(#[$doc:meta])* $py:ident, $name:literal, $generator:ty, $variant:ident, settings { $($methods:tt)* }) => {
        chunk_generator_class!(@class $(#[$doc])* $py, $name, $generator, $variant);

        #[pymethods]
        impl $py {
            #[new]
            #[pyo3(signature = (id, model, *, thinking_mode=false, thinking_initial_stage=None))]
            fn py_new(
                #[pyo3(from_py_with = crate::args::string)] id: String,
                #[pyo3(from_py_with = crate::args::string)] model: String,
                #[pyo3(from_py_with = crate::args::boolean)] thinking_mode: bool,
                #[pyo3(from_py_with = crate::args::opt_value::<PyThinkingInitialStage>)]
                thinking_initial_stage: Option<PyThinkingInitialStage>,
            ) -> Self {
                $py::new(<$generator>::new(id, model, config(thinking_mode, thinking_initial_stage)))
            }
            $($methods)*
        }
    };
    ($(#[$doc:meta])* $py:ident, $name:literal, $generator:ty, $variant:ident { $($methods:tt)* }) => {
        chunk_generator_class!(@class $(#[$doc])* $py, $name, $generator, $variant);

        #[pymethods]
        impl $py {
            $($methods)*
        }
    };
    (@class $(#[$doc:meta])* $py:ident, $name:literal, $generator:ty, $variant:ident) => {
        $(#[$doc])*
        #[pyclass(name = $name, module = "deepseek_recipe._native")]
        pub struct $py {
            inner: Option<$generator>,
        }

        impl $py {
            pub fn new(generator: $generator) -> Self {
                $py { inner: Some(generator) }
            }
            /// Take the generator out; a consumed object raises.
            pub fn take(&mut self) -> PyResult<$generator> {
                self.inner.take().ok_or_else(consumed)
            }
            /// Consume this object into a new one holding `f` of its generator.
            pub fn map(&mut self, f: impl FnOnce($generator) -> $generator) -> PyResult<Self> {
                Ok($py::new(f(self.take()?)))
            }
            /// The generator of `obj` if it is one of this class, consumed.
            fn take_from(obj: &Bound<'_, PyAny>) -> Option<PyResult<Generator>> {
                let mut g = obj.downcast::<$py>().ok()?.borrow_mut();
                Some(g.take().map(Generator::$variant))
            }
        }
    };
}

chunk_generator_class!(
    /// Writes Chat Completions chunks; a stream processor consumes it.
    ///
    /// Usually obtained from `ChatCompletionRequest.chunk_generator`; the constructor builds one
    /// from the two request settings it needs.
    PyChatCompletionChunkGenerator, "ChatCompletionChunkGenerator", ChatGenerator, Chat, settings {}
);
chunk_generator_class!(
    /// Writes Responses events; a stream processor consumes it.
    PyResponsesChunkGenerator, "ResponsesChunkGenerator", ResponsesGenerator, Responses, settings {
        /// Consume this generator; the new one reports `(namespace, local name)` for the listed
        /// function names.
        fn with_namespace_tool_map(
            &mut self,
            #[pyo3(from_py_with = namespace_map)] namespace_tool_map: std::collections::BTreeMap<
                String,
                (String, String),
            >,
        ) -> PyResult<Self> {
            self.map(|g| g.with_namespace_tool_map(namespace_tool_map.into_iter().collect()))
        }

        /// Consume this generator; the new one reports the request settings given as a JSON object
        /// (`instructions`, `max_output_tokens`, `temperature`, `top_p`, `top_logprobs`, `user`,
        /// `reasoning`, `text`, `tool_choice`, `tools`). `with_echo` takes a `ResponsesEcho` instead.
        fn with_echo_json(&mut self, echo: &str) -> PyResult<Self> {
            let v: serde_json::Value = serde_json::from_str(echo)
                .map_err(|e| PyValueError::new_err(format!("invalid echo JSON: {e}")))?;
            if !v.is_object() {
                return Err(PyValueError::new_err("echo JSON must be an object"));
            }
            self.map(|g| g.with_echo(recipe_stream::generator::echo_from_json(&v)))
        }

        /// Consume this generator; the new one reports `echo` (the request settings) in its
        /// response objects.
        fn with_echo(
            &mut self,
            #[pyo3(from_py_with = crate::args::instance::<crate::protocol::PyResponsesEcho>)] echo: PyRef<
                '_,
                crate::protocol::PyResponsesEcho,
            >,
        ) -> PyResult<Self> {
            self.map(|g| g.with_echo(echo.inner.clone()))
        }
    }
);
chunk_generator_class!(
    /// Writes Anthropic Messages events; a stream processor consumes it.
    PyMessagesChunkGenerator, "MessagesChunkGenerator", MessagesGenerator, Messages {
        #[new]
        fn py_new(
            #[pyo3(from_py_with = crate::args::string)] id: String,
            #[pyo3(from_py_with = crate::args::string)] model: String,
            #[pyo3(from_py_with = crate::args::boolean)] thinking_mode: bool,
        ) -> Self {
            PyMessagesChunkGenerator::new(MessagesGenerator::new(id, model, thinking_mode))
        }

        /// Consume this generator; the new one ends each thinking block with `signature` (the
        /// default is the response ID).
        fn with_signature(
            &mut self,
            #[pyo3(from_py_with = crate::args::string)] signature: String,
        ) -> PyResult<Self> {
            self.map(|g| g.with_signature(signature))
        }
    }
);

/// `{"ns::name": ("ns", "name")}` with the official package's type errors.
fn namespace_map(
    obj: &Bound<'_, PyAny>,
) -> PyResult<std::collections::BTreeMap<String, (String, String)>> {
    crate::args::string_map(obj, crate::args::string_pair)
}

thread_local! {
    /// The buffer `to_json` writes into, reused so a chunk costs no allocation of its own.
    static JSON_BUF: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(4096));
}

/// A chunk or event as compact JSON, written straight from its wire type into a Python string.
fn json_string<'py>(py: Python<'py>, item: &impl WireJson) -> Bound<'py, PyString> {
    JSON_BUF.with_borrow_mut(|buf| {
        buf.clear();
        item.write_json(buf);
        debug_assert!(std::str::from_utf8(buf).is_ok());
        // SAFETY: serde_json writes only valid UTF-8 (whole `&str` values, ASCII punctuation,
        // digits and escapes; its own `to_string` relies on that the same way), so checking the
        // buffer again here would only cost time on every chunk.
        let text = unsafe { std::str::from_utf8_unchecked(buf) };
        let s = PyString::new(py, text);
        // A rare huge item (a whole response object) does not pin its memory for the thread.
        if buf.capacity() > 1 << 20 {
            *buf = Vec::with_capacity(4096);
        }
        s
    })
}

/// One `chat.completion.chunk`.
#[pyclass(
    name = "ChatCompletionChunk",
    module = "deepseek_recipe._native",
    frozen
)]
pub struct PyChatCompletionChunk {
    pub inner: ChatChunk,
}

#[pymethods]
impl PyChatCompletionChunk {
    /// The chunk as compact JSON.
    fn to_json<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        json_string(py, &self.inner)
    }
    /// The chunk framed as one server-sent event (`data: ...` and a blank line).
    fn to_sse(&self) -> String {
        sse::frame(None, &self.inner.to_json())
    }
    fn __repr__(&self) -> String {
        format!("ChatCompletionChunk({})", self.inner.to_json())
    }
}

/// Declares the Python class of one named stream event (Responses or Messages): its JSON, its
/// SSE framing under its `type`, and the `type` itself.
macro_rules! named_event_class {
    ($(#[$doc:meta])* $py:ident, $name:literal, $event:ty) => {
        $(#[$doc])*
        #[pyclass(name = $name, module = "deepseek_recipe._native", frozen)]
        pub struct $py {
            pub inner: $event,
        }

        #[pymethods]
        impl $py {
            /// The event as compact JSON.
            fn to_json<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
                json_string(py, &self.inner)
            }
            /// The event framed as one server-sent event (`event: <type>`, `data: ...`, blank line).
            fn to_sse(&self) -> String {
                sse::frame(Some(self.inner.event_type()), &self.inner.to_json())
            }
            /// The event's `type`, which is also its SSE event name.
            #[getter]
            fn r#type(&self) -> &'static str {
                self.inner.event_type()
            }
            fn __repr__(&self) -> String {
                format!(concat!($name, "({})"), self.inner.to_json())
            }
        }
    };
}

named_event_class!(
    /// One Responses stream event.
    PyResponsesStreamEvent, "ResponsesStreamEvent", ResponsesEvent
);
named_event_class!(
    /// One Anthropic Messages stream event.
    PyMessagesStreamEvent, "MessagesStreamEvent", MessagesEvent
);

/// The SSE event name of a chunk or event: its `type`, or none for Chat Completions chunks.
trait SseEventName {
    fn sse_event_name(&self) -> Option<String>;
}

impl SseEventName for PyChatCompletionChunk {
    fn sse_event_name(&self) -> Option<String> {
        None
    }
}

impl SseEventName for PyResponsesStreamEvent {
    fn sse_event_name(&self) -> Option<String> {
        Some(self.inner.event_type().to_owned())
    }
}

impl SseEventName for PyMessagesStreamEvent {
    fn sse_event_name(&self) -> Option<String> {
        Some(self.inner.event_type().to_owned())
    }
}

/// Declares the Python class of one response accumulator: it folds the chunks or events of one
/// protocol into the complete response, and tells how that protocol frames them as SSE.
macro_rules! response_accumulator_class {
    ($(#[$doc:meta])* $py:ident, $name:literal, $response:ty, $item:ty, $protocol:expr) => {
        $(#[$doc])*
        #[pyclass(name = $name, module = "deepseek_recipe._native")]
        pub struct $py {
            inner: $response,
        }

        #[pymethods]
        impl $py {
            #[new]
            fn new(
                #[pyo3(from_py_with = crate::args::string)] id: String,
                #[pyo3(from_py_with = crate::args::string)] model: String,
                created: u64,
                prompt_tokens: u64,
                prompt_cache_hit_tokens: u64,
            ) -> Self {
                $py { inner: <$response>::new(id, model, created, prompt_tokens, prompt_cache_hit_tokens) }
            }
            /// Apply one chunk or event.
            fn accumulate(&mut self, #[pyo3(from_py_with = crate::args::instance::<$item>)] chunk: PyRef<'_, $item>) {
                self.inner.accumulate(&chunk.inner);
            }
            /// The response accumulated so far, as compact JSON.
            fn to_json(&self) -> String {
                self.inner.to_value().to_string()
            }
            /// The SSE event name a chunk or event is sent under (`None`: an unnamed message).
            /// Chat Completions chunks have none; Responses and Messages events use their `type`.
            #[staticmethod]
            fn sse_event_name(#[pyo3(from_py_with = crate::args::instance::<$item>)] chunk: PyRef<'_, $item>) -> Option<String> {
                chunk.sse_event_name()
            }
            /// The data of the message that ends the stream (`None`: the protocol sends none).
            /// Only Chat Completions sends one, `[DONE]`.
            #[staticmethod]
            fn sse_done_data() -> Option<&'static str> {
                $protocol.done_data()
            }
        }
    };
}

response_accumulator_class!(
    /// A complete `chat.completion` folded from chunks.
    PyChatCompletionResponse, "ChatCompletionResponse", recipe_stream::ChatCompletionResponse,
    PyChatCompletionChunk, sse::Protocol::ChatCompletions
);
response_accumulator_class!(
    /// A complete Responses `response` folded from events.
    PyResponsesResponse, "ResponsesResponse", recipe_stream::ResponsesResponse,
    PyResponsesStreamEvent, sse::Protocol::Responses
);
response_accumulator_class!(
    /// A complete Anthropic `message` folded from events.
    PyMessagesResponse, "MessagesResponse", recipe_stream::MessagesResponse,
    PyMessagesStreamEvent, sse::Protocol::Messages
);

/// Turns backend chunks into protocol chunks or events for one response.
///
/// The constructor consumes `generator`, which decides the protocol of the output; `tokenizer`
/// decodes `tokens` chunks (without one they raise `RuntimeError`).
#[pyclass(name = "StreamProcessor", module = "deepseek_recipe._native")]
pub struct PyStreamProcessor {
    inner: StreamProcessor,
}

fn items_to_list(py: Python<'_>, items: Vec<StreamItem>) -> PyResult<Py<PyList>> {
    let len = pyo3::ffi::Py_ssize_t::try_from(items.len())
        .map_err(|_| PyRuntimeError::new_err("too many stream items"))?;
    // SAFETY: `PyList_New` returns a new reference (or NULL with an exception set); each slot
    // below is filled once with a new reference, which `PyList_SetItem` steals. Should one
    // `Py::new` fail, the list is dropped with its remaining slots NULL, which CPython allows.
    let list = unsafe { Bound::from_owned_ptr_or_err(py, pyo3::ffi::PyList_New(len))? };
    for (i, item) in items.into_iter().enumerate() {
        let obj = match item {
            StreamItem::Chat(c) => Py::new(py, PyChatCompletionChunk { inner: c })?.into_any(),
            StreamItem::Responses(e) => {
                Py::new(py, PyResponsesStreamEvent { inner: e })?.into_any()
            }
            StreamItem::Messages(e) => Py::new(py, PyMessagesStreamEvent { inner: e })?.into_any(),
        };
        // SAFETY: `i < len`, and the list is new, so the slot is empty.
        unsafe {
            pyo3::ffi::PyList_SetItem(list.as_ptr(), i as pyo3::ffi::Py_ssize_t, obj.into_ptr())
        };
    }
    // SAFETY: `PyList_New` made a list.
    Ok(unsafe { list.downcast_into_unchecked::<PyList>() }.unbind())
}

#[pymethods]
impl PyStreamProcessor {
    /// Consume `generator`; `tokenizer` decodes `tokens` chunks (without one they raise).
    #[new]
    #[pyo3(signature = (generator, options, tokenizer=None))]
    fn new(
        generator: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = crate::args::instance::<PyParsingOptions>)] options: PyRef<
            '_,
            PyParsingOptions,
        >,
        #[pyo3(from_py_with = crate::args::opt_instance::<PyTokenizer>)] tokenizer: Option<
            PyRef<'_, PyTokenizer>,
        >,
    ) -> PyResult<Self> {
        let g = PyChatCompletionChunkGenerator::take_from(generator)
            .or_else(|| PyResponsesChunkGenerator::take_from(generator))
            .or_else(|| PyMessagesChunkGenerator::take_from(generator))
            .ok_or_else(|| PyTypeError::new_err("expected a protocol chunk generator"))??;
        Ok(PyStreamProcessor {
            inner: StreamProcessor::new(g, &options.inner, tokenizer.map(|t| t.inner.clone())),
        })
    }

    /// Whether the stream completed normally and was not closed.
    #[getter]
    fn finished(&self) -> bool {
        self.inner.finished()
    }

    /// Process one backend chunk; returns the chunks or events it produced.
    ///
    /// `RuntimeError` once the stream finished or was closed, and for a `tokens` chunk that cannot
    /// be decoded (no tokenizer, an unknown ID, a log-probability count that does not match),
    /// which also closes the processor.
    fn push(
        &mut self,
        py: Python<'_>,
        #[pyo3(from_py_with = crate::args::instance::<PyInferenceChunk>)] chunk: PyRef<
            '_,
            PyInferenceChunk,
        >,
    ) -> PyResult<Py<PyList>> {
        let items = match &chunk.inner {
            InferenceChunk::Tokens {
                token_ids,
                logprobs,
            } => self.inner.push_tokens(token_ids, logprobs.as_deref()),
            other => self.inner.push(other.clone()),
        }
        .map_err(runtime)?;
        items_to_list(py, items)
    }

    /// End the input and flush what is held back; after completion it returns an empty list.
    fn finish(&mut self, py: Python<'_>) -> PyResult<Py<PyList>> {
        let items = self.inner.finish().map_err(runtime)?;
        items_to_list(py, items)
    }

    /// Abandon the stream without completing it; later calls raise.
    fn close(&mut self) {
        self.inner.close();
    }
}

/// The SSE message that ends a stream of `protocol` (`"chat"`, `"responses"` or `"messages"`),
/// or `None` when that protocol sends none.
#[pyfunction]
fn sse_done_message(protocol: &str) -> PyResult<Option<String>> {
    let p = match protocol {
        "chat" | "chat_completions" => sse::Protocol::ChatCompletions,
        "responses" => sse::Protocol::Responses,
        "messages" => sse::Protocol::Messages,
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown protocol {other:?}; expected chat, responses or messages"
            )))
        }
    };
    Ok(sse::done_message(p))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPromptUsage>()?;
    m.add_class::<PyInferenceFinishReason>()?;
    m.add_class::<PyInferenceChunk>()?;
    m.add_class::<PyChatCompletionChunkGenerator>()?;
    m.add_class::<PyResponsesChunkGenerator>()?;
    m.add_class::<PyMessagesChunkGenerator>()?;
    m.add_class::<PyChatCompletionChunk>()?;
    m.add_class::<PyResponsesStreamEvent>()?;
    m.add_class::<PyMessagesStreamEvent>()?;
    m.add_class::<PyChatCompletionResponse>()?;
    m.add_class::<PyResponsesResponse>()?;
    m.add_class::<PyMessagesResponse>()?;
    m.add_class::<PyStreamProcessor>()?;
    m.add_function(wrap_pyfunction!(sse_done_message, m)?)?;
    Ok(())
}
