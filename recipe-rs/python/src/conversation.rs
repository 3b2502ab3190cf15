//! Python classes of the conversation model: `Conversation`, the `Message` family, `ToolCall`,
//! `ToolDefinition` and the `ImageSource` family.
//!
//! # Interface for other binding modules
//!
//! * [`PyConversation`] (Python `Conversation`) wraps a [`recipe_core::Conversation`].
//!   Build one from core data with [`PyConversation::from_core`] (or `PyConversation::from`),
//!   read the core value with [`PyConversation::core`], or take it with
//!   [`PyConversation::into_core`].
//! * [`message_to_py`], [`image_source_to_py`], [`PyToolCall`] and [`PyToolDefinition`] turn core
//!   values into Python objects of the right class.
//! * Python values become JSON (tool parameters, response schemas) through [`crate::py_json`].
//!
//! Every object is immutable from Python, as in the official package.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use recipe_core::{
    AssistantMessage, Conversation, ImageData, ImageDetail, ImageSource, LatestReminderMessage,
    Message, ReasoningEffort, ResponseFormat, SpecialToken, SystemMessage, ToolCall, ToolChoice,
    ToolDefinition, ToolMessage, UserMessage,
};
use serde_json::Value;

use crate::py_json::{json_to_py, py_to_json};

// ---------------------------------------------------------------------------------------------
// Image sources

fn parse_detail(detail: &str) -> PyResult<ImageDetail> {
    ImageDetail::parse(detail).ok_or_else(|| {
        PyValueError::new_err(format!(
            "invalid detail {detail:?}; expected \"low\", \"high\", \"original\", or \"auto\""
        ))
    })
}

/// Base class of image sources; only a placeholder is rendered for an image.
///
/// Not constructible: build a `DataUrlImageSource`, `UrlImageSource` or `BytesImageSource`.
/// Exactly one of `data_url`, `url` and `data` is set, as `kind` says.
#[pyclass(
    name = "ImageSource",
    module = "deepseek_recipe._native",
    subclass,
    frozen
)]
#[derive(Clone)]
pub struct PyImageSource {
    pub inner: ImageSource,
}

#[pymethods]
impl PyImageSource {
    #[new]
    fn abstract_new() -> PyResult<Self> {
        Err(PyTypeError::new_err(
            "cannot create 'deepseek_recipe._native.ImageSource' instances",
        ))
    }
    /// `"data_url"`, `"url"` or `"bytes"`: which of the three sources this is.
    #[getter]
    fn kind(&self) -> &'static str {
        match self.inner.data {
            ImageData::DataUrl(_) => "data_url",
            ImageData::Url(_) => "url",
            ImageData::Bytes(_) => "bytes",
        }
    }
    /// The requested detail level: `"low"`, `"high"`, `"original"` or `"auto"`.
    #[getter]
    fn detail(&self) -> &'static str {
        self.inner.detail.as_str()
    }
    /// The `data:` URL of a `DataUrlImageSource`, else `None`.
    #[getter]
    fn data_url(&self) -> Option<String> {
        match &self.inner.data {
            ImageData::DataUrl(s) => Some(s.clone()),
            _ => None,
        }
    }
    /// The external URL of a `UrlImageSource`, else `None`.
    #[getter]
    fn url(&self) -> Option<String> {
        match &self.inner.data {
            ImageData::Url(s) => Some(s.clone()),
            _ => None,
        }
    }
    /// The encoded image of a `BytesImageSource`, else `None`.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        match &self.inner.data {
            ImageData::Bytes(b) => Some(PyBytes::new(py, b)),
            _ => None,
        }
    }
    /// Where the image sat in the request (e.g. `messages.0.content[1]`); may be empty.
    #[getter]
    fn path(&self) -> String {
        self.inner.path.clone()
    }
    fn __repr__(&self) -> String {
        image_source_repr(&self.inner)
    }
}

fn image_source_repr(s: &ImageSource) -> String {
    let (class, first) = match &s.data {
        ImageData::DataUrl(u) => ("DataUrlImageSource", format!("{u:?}")),
        ImageData::Url(u) => ("UrlImageSource", format!("{u:?}")),
        ImageData::Bytes(b) => ("BytesImageSource", format!("<{} bytes>", b.len())),
    };
    format!(
        "{class}({first}, detail={:?}, path={:?})",
        s.detail.as_str(),
        s.path
    )
}

fn new_image_source(data: ImageData, detail: &str, path: String) -> PyResult<PyImageSource> {
    Ok(PyImageSource {
        inner: ImageSource {
            data,
            detail: parse_detail(detail)?,
            path,
        },
    })
}

/// An image given by a `data:` URL.
#[pyclass(name = "DataUrlImageSource", module = "deepseek_recipe._native", extends = PyImageSource, frozen)]
pub struct PyDataUrlImageSource;

#[pymethods]
impl PyDataUrlImageSource {
    #[new]
    #[pyo3(signature = (data_url, detail=String::from("high"), *, path=String::new()))]
    #[pyo3(text_signature = "(data_url, detail='high', *, path='')")]
    fn new(
        #[pyo3(from_py_with = crate::args::string)] data_url: String,
        #[pyo3(from_py_with = crate::args::string)] detail: String,
        #[pyo3(from_py_with = crate::args::string)] path: String,
    ) -> PyResult<(Self, PyImageSource)> {
        Ok((
            PyDataUrlImageSource,
            new_image_source(ImageData::DataUrl(data_url), &detail, path)?,
        ))
    }
}

/// An image given by an external URL.
#[pyclass(name = "UrlImageSource", module = "deepseek_recipe._native", extends = PyImageSource, frozen)]
pub struct PyUrlImageSource;

#[pymethods]
impl PyUrlImageSource {
    #[new]
    #[pyo3(signature = (url, detail=String::from("high"), *, path=String::new()))]
    #[pyo3(text_signature = "(url, detail='high', *, path='')")]
    fn new(
        #[pyo3(from_py_with = crate::args::string)] url: String,
        #[pyo3(from_py_with = crate::args::string)] detail: String,
        #[pyo3(from_py_with = crate::args::string)] path: String,
    ) -> PyResult<(Self, PyImageSource)> {
        Ok((
            PyUrlImageSource,
            new_image_source(ImageData::Url(url), &detail, path)?,
        ))
    }
}

/// An image given as encoded bytes.
#[pyclass(name = "BytesImageSource", module = "deepseek_recipe._native", extends = PyImageSource, frozen)]
pub struct PyBytesImageSource;

#[pymethods]
impl PyBytesImageSource {
    #[new]
    #[pyo3(signature = (data, detail=String::from("high"), *, path=String::new()))]
    #[pyo3(text_signature = "(data, detail='high', *, path='')")]
    fn new(
        #[pyo3(from_py_with = crate::args::byte_vec)] data: Vec<u8>,
        #[pyo3(from_py_with = crate::args::string)] detail: String,
        #[pyo3(from_py_with = crate::args::string)] path: String,
    ) -> PyResult<(Self, PyImageSource)> {
        Ok((
            PyBytesImageSource,
            new_image_source(ImageData::Bytes(data), &detail, path)?,
        ))
    }
}

/// A Python object of the right `ImageSource` subclass for `src`.
pub fn image_source_to_py(py: Python<'_>, src: &ImageSource) -> PyResult<PyObject> {
    let base = PyImageSource { inner: src.clone() };
    let init = PyClassInitializer::from(base);
    Ok(match src.data {
        ImageData::DataUrl(_) => Py::new(py, init.add_subclass(PyDataUrlImageSource))?.into_any(),
        ImageData::Url(_) => Py::new(py, init.add_subclass(PyUrlImageSource))?.into_any(),
        ImageData::Bytes(_) => Py::new(py, init.add_subclass(PyBytesImageSource))?.into_any(),
    })
}

fn image_sources_to_py(py: Python<'_>, srcs: &[ImageSource]) -> PyResult<Vec<PyObject>> {
    srcs.iter().map(|s| image_source_to_py(py, s)).collect()
}

// ---------------------------------------------------------------------------------------------
// Tools

/// A tool call made by the assistant earlier in the conversation.
#[pyclass(name = "ToolCall", module = "deepseek_recipe._native", frozen)]
#[derive(Clone)]
pub struct PyToolCall {
    pub inner: ToolCall,
}

#[pymethods]
impl PyToolCall {
    #[new]
    fn new(
        #[pyo3(from_py_with = crate::args::string)] id: String,
        #[pyo3(from_py_with = crate::args::string)] name: String,
        #[pyo3(from_py_with = crate::args::string)] arguments: String,
    ) -> Self {
        PyToolCall {
            inner: ToolCall {
                id,
                name,
                arguments,
            },
        }
    }
    /// The call's ID, which a later `ToolMessage.tool_call_id` refers to.
    #[getter]
    fn id(&self) -> String {
        self.inner.id.clone()
    }
    /// The name of the called tool.
    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }
    /// The arguments string as given (meant to be a JSON object; not checked).
    #[getter]
    fn arguments(&self) -> String {
        self.inner.arguments.clone()
    }
    fn __repr__(&self) -> String {
        format!(
            "ToolCall(id={:?}, name={:?}, arguments={:?})",
            self.inner.id, self.inner.name, self.inner.arguments
        )
    }
}

/// A tool the model may call. `parameters` is kept exactly as given (no strict normalisation).
#[pyclass(name = "ToolDefinition", module = "deepseek_recipe._native", frozen)]
#[derive(Clone)]
pub struct PyToolDefinition {
    pub inner: ToolDefinition,
}

#[pymethods]
impl PyToolDefinition {
    #[new]
    #[pyo3(signature = (name, description=None, parameters=None, strict=None, defer_loading=false))]
    fn new(
        #[pyo3(from_py_with = crate::args::string)] name: String,
        #[pyo3(from_py_with = crate::args::opt_string)] description: Option<String>,
        parameters: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = crate::args::opt_boolean)] strict: Option<bool>,
        #[pyo3(from_py_with = crate::args::boolean)] defer_loading: bool,
    ) -> PyResult<Self> {
        let parameters = match parameters {
            Some(p) => py_to_json(p)?,
            None => Value::Null,
        };
        Ok(PyToolDefinition {
            inner: ToolDefinition {
                name,
                description,
                parameters,
                strict,
                defer_loading,
            },
        })
    }
    /// The tool's name.
    #[getter]
    fn name(&self) -> String {
        self.inner.name.clone()
    }
    /// What the tool does, or `None`.
    #[getter]
    fn description(&self) -> Option<String> {
        self.inner.description.clone()
    }
    /// JSON Schema of the arguments.
    #[getter]
    fn parameters(&self, py: Python<'_>) -> PyResult<PyObject> {
        json_to_py(py, &self.inner.parameters)
    }
    /// The `strict` flag as given, or `None`.
    #[getter]
    fn strict(&self) -> Option<bool> {
        self.inner.strict
    }
    /// Whether the tool is declared for deferred loading.
    #[getter]
    fn defer_loading(&self) -> bool {
        self.inner.defer_loading
    }
    fn __repr__(&self) -> String {
        format!(
            "ToolDefinition(name={:?}, description={:?}, strict={:?})",
            self.inner.name, self.inner.description, self.inner.strict
        )
    }
}

fn tools_to_py(tools: &[ToolDefinition]) -> Vec<PyToolDefinition> {
    tools
        .iter()
        .map(|t| PyToolDefinition { inner: t.clone() })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Messages

/// Base class of every message. Role-specific properties read `None` / `False` / `[]` on other
/// roles.
///
/// Not constructible: build one of `SystemMessage`, `UserMessage`, `AssistantMessage`,
/// `ToolMessage` or `LatestReminderMessage`.
#[pyclass(name = "Message", module = "deepseek_recipe._native", subclass, frozen)]
#[derive(Clone)]
pub struct PyMessage {
    pub inner: Message,
}

#[pymethods]
impl PyMessage {
    #[new]
    fn abstract_new() -> PyResult<Self> {
        Err(PyTypeError::new_err(
            "cannot create 'deepseek_recipe._native.Message' instances",
        ))
    }
    /// `"system"`, `"user"`, `"assistant"`, `"tool"` or `"latest_reminder"`.
    #[getter]
    fn role(&self) -> &'static str {
        self.inner.role()
    }
    /// The message text.
    #[getter]
    fn content(&self) -> String {
        self.inner.content().to_owned()
    }
    /// The reasoning of an assistant message, if it has any.
    #[getter]
    fn reasoning_content(&self) -> Option<String> {
        match &self.inner {
            Message::Assistant(m) => m.reasoning_content.clone(),
            _ => None,
        }
    }
    /// The tool calls of an assistant message, if it has any.
    #[getter]
    fn tool_calls(&self) -> Option<Vec<PyToolCall>> {
        match &self.inner {
            Message::Assistant(m) => m.tool_calls.as_ref().map(|calls| {
                calls
                    .iter()
                    .map(|c| PyToolCall { inner: c.clone() })
                    .collect()
            }),
            _ => None,
        }
    }
    /// The call a tool message answers, if given.
    #[getter]
    fn tool_call_id(&self) -> Option<String> {
        match &self.inner {
            Message::Tool(m) => m.tool_call_id.clone(),
            _ => None,
        }
    }
    /// The images of a system, user or tool message, in placeholder order.
    #[getter]
    fn image_sources(&self, py: Python<'_>) -> PyResult<Vec<PyObject>> {
        image_sources_to_py(py, self.inner.image_sources())
    }
    /// Whether an assistant message is a partial turn that generation continues.
    #[getter]
    fn prefix(&self) -> bool {
        matches!(&self.inner, Message::Assistant(m) if m.prefix)
    }
    fn __repr__(&self) -> String {
        message_repr(&self.inner)
    }
}

fn message_repr(m: &Message) -> String {
    match m {
        Message::System(m) => format!("SystemMessage({:?})", m.content),
        Message::User(m) => format!(
            "UserMessage({:?}, image_sources={})",
            m.content,
            m.image_sources.len()
        ),
        Message::Assistant(m) => format!(
            "AssistantMessage({:?}, reasoning_content={}, tool_calls={}, prefix={})",
            m.content,
            if m.reasoning_content.is_some() {
                "True"
            } else {
                "False"
            },
            m.tool_calls.as_ref().map_or(0, Vec::len),
            if m.prefix { "True" } else { "False" },
        ),
        Message::Tool(m) => format!(
            "ToolMessage({:?}, tool_call_id={:?}, image_sources={})",
            m.content,
            m.tool_call_id,
            m.image_sources.len()
        ),
        Message::LatestReminder(m) => format!("LatestReminderMessage({:?})", m.content),
    }
}

fn image_token_arg(image_token: Option<String>) -> PyResult<String> {
    match image_token {
        None => Ok(SpecialToken::Image.default_str().to_owned()),
        Some(t) if t.is_empty() => Err(PyValueError::new_err("image_token must not be empty")),
        Some(t) => Ok(t),
    }
}

fn image_sources_arg(srcs: Option<Vec<PyRef<'_, PyImageSource>>>) -> Vec<ImageSource> {
    srcs.map(|s| inners(&s, |s| &s.inner)).unwrap_or_default()
}

/// The core values behind a list of Python wrappers.
fn inners<W: pyo3::PyClass, T: Clone>(items: &[PyRef<'_, W>], inner: impl Fn(&W) -> &T) -> Vec<T> {
    items.iter().map(|w| inner(w).clone()).collect()
}

/// What a message constructor returns: its (empty) subclass and the base holding `inner`.
fn message_parts<T>(subclass: T, inner: Message) -> (T, PyMessage) {
    (subclass, PyMessage { inner })
}

/// A system message, optionally announcing updated tool schemas (rendered by V4.1 only).
#[pyclass(name = "SystemMessage", module = "deepseek_recipe._native", extends = PyMessage, frozen)]
pub struct PySystemMessage;

#[pymethods]
impl PySystemMessage {
    #[new]
    #[pyo3(signature = (content, image_sources=None, tools=None, *, image_token=None))]
    fn new(
        #[pyo3(from_py_with = crate::args::string)] content: String,
        #[pyo3(from_py_with = crate::args::opt_instances::<PyImageSource>)] image_sources: Option<
            Vec<PyRef<'_, PyImageSource>>,
        >,
        #[pyo3(from_py_with = crate::args::opt_instances::<PyToolDefinition>)] tools: Option<
            Vec<PyRef<'_, PyToolDefinition>>,
        >,
        #[pyo3(from_py_with = crate::args::opt_string)] image_token: Option<String>,
    ) -> PyResult<(Self, PyMessage)> {
        let mut msg = SystemMessage::new(
            content,
            image_sources_arg(image_sources),
            image_token_arg(image_token)?,
        );
        msg.tools = tools.map(|ts| inners(&ts, |t| &t.inner));
        Ok(message_parts(PySystemMessage, Message::System(msg)))
    }
    /// The tool schemas this message announces, or `None`.
    #[getter]
    fn tools(slf: PyRef<'_, Self>) -> Option<Vec<PyToolDefinition>> {
        match &slf.as_super().inner {
            Message::System(m) => m.tools.as_deref().map(tools_to_py),
            _ => None,
        }
    }
}

/// A user message. Built from Python, the first occurrences of `image_token` (one per image
/// source) are the image placeholders; a message produced by request conversion carries the
/// placeholder positions of its image parts instead, so text that spells the image token is plain.
#[pyclass(name = "UserMessage", module = "deepseek_recipe._native", extends = PyMessage, frozen)]
pub struct PyUserMessage;

#[pymethods]
impl PyUserMessage {
    #[new]
    #[pyo3(signature = (content, image_sources=None, *, image_token=None))]
    fn new(
        #[pyo3(from_py_with = crate::args::string)] content: String,
        #[pyo3(from_py_with = crate::args::opt_instances::<PyImageSource>)] image_sources: Option<
            Vec<PyRef<'_, PyImageSource>>,
        >,
        #[pyo3(from_py_with = crate::args::opt_string)] image_token: Option<String>,
    ) -> PyResult<(Self, PyMessage)> {
        let msg = UserMessage::new(
            content,
            image_sources_arg(image_sources),
            image_token_arg(image_token)?,
        );
        Ok(message_parts(PyUserMessage, Message::User(msg)))
    }
}

/// An assistant turn from the history, or (with `prefix=True`) a partial turn to continue.
#[pyclass(name = "AssistantMessage", module = "deepseek_recipe._native", extends = PyMessage, frozen)]
pub struct PyAssistantMessage;

#[pymethods]
impl PyAssistantMessage {
    #[new]
    #[pyo3(signature = (content, reasoning_content=None, tool_calls=None, prefix=false))]
    fn new(
        #[pyo3(from_py_with = crate::args::string)] content: String,
        #[pyo3(from_py_with = crate::args::opt_string)] reasoning_content: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_instances::<PyToolCall>)] tool_calls: Option<
            Vec<PyRef<'_, PyToolCall>>,
        >,
        #[pyo3(from_py_with = crate::args::boolean)] prefix: bool,
    ) -> (Self, PyMessage) {
        let msg = AssistantMessage {
            content,
            reasoning_content,
            tool_calls: tool_calls.map(|cs| inners(&cs, |c| &c.inner)),
            prefix,
        };
        message_parts(PyAssistantMessage, Message::Assistant(msg))
    }
}

/// The result of a tool call.
#[pyclass(name = "ToolMessage", module = "deepseek_recipe._native", extends = PyMessage, frozen)]
pub struct PyToolMessage;

#[pymethods]
impl PyToolMessage {
    #[new]
    #[pyo3(signature = (content, tool_call_id=None, image_sources=None, *, image_token=None))]
    fn new(
        #[pyo3(from_py_with = crate::args::string)] content: String,
        #[pyo3(from_py_with = crate::args::opt_string)] tool_call_id: Option<String>,
        #[pyo3(from_py_with = crate::args::opt_instances::<PyImageSource>)] image_sources: Option<
            Vec<PyRef<'_, PyImageSource>>,
        >,
        #[pyo3(from_py_with = crate::args::opt_string)] image_token: Option<String>,
    ) -> PyResult<(Self, PyMessage)> {
        let msg = ToolMessage::new(
            content,
            tool_call_id,
            image_sources_arg(image_sources),
            image_token_arg(image_token)?,
        );
        Ok(message_parts(PyToolMessage, Message::Tool(msg)))
    }
}

/// Extra instructions placed just before the next turn.
#[pyclass(name = "LatestReminderMessage", module = "deepseek_recipe._native", extends = PyMessage, frozen)]
pub struct PyLatestReminderMessage;

#[pymethods]
impl PyLatestReminderMessage {
    #[new]
    fn new(#[pyo3(from_py_with = crate::args::string)] content: String) -> (Self, PyMessage) {
        let msg = LatestReminderMessage { content };
        message_parts(PyLatestReminderMessage, Message::LatestReminder(msg))
    }
}

/// A Python object of the right `Message` subclass for `msg`.
pub fn message_to_py(py: Python<'_>, msg: &Message) -> PyResult<PyObject> {
    let init = PyClassInitializer::from(PyMessage { inner: msg.clone() });
    Ok(match msg {
        Message::System(_) => Py::new(py, init.add_subclass(PySystemMessage))?.into_any(),
        Message::User(_) => Py::new(py, init.add_subclass(PyUserMessage))?.into_any(),
        Message::Assistant(_) => Py::new(py, init.add_subclass(PyAssistantMessage))?.into_any(),
        Message::Tool(_) => Py::new(py, init.add_subclass(PyToolMessage))?.into_any(),
        Message::LatestReminder(_) => {
            Py::new(py, init.add_subclass(PyLatestReminderMessage))?.into_any()
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Conversation

fn parse_tool_choice(s: &str) -> PyResult<ToolChoice> {
    match s {
        "auto" => Ok(ToolChoice::Auto),
        "none" => Ok(ToolChoice::None),
        "required" => Ok(ToolChoice::Required),
        _ => Err(PyValueError::new_err(format!(
            "invalid tool_choice {s:?}; expected \"auto\", \"none\", or \"required\""
        ))),
    }
}

fn parse_effort(s: &str) -> PyResult<ReasoningEffort> {
    match s {
        "low" => Ok(ReasoningEffort::Low),
        "high" => Ok(ReasoningEffort::High),
        "xhigh" => Ok(ReasoningEffort::XHigh),
        "max" => Ok(ReasoningEffort::Max),
        _ => Err(PyValueError::new_err(format!(
            "invalid reasoning_effort {s:?}; expected \"low\", \"high\", \"xhigh\", or \"max\""
        ))),
    }
}

/// A conversation plus its prompt settings (thinking, tools, tool choice, effort, format).
///
/// `response_format` is `"text"` or `"json_object"`; `response_schema` (a JSON Schema) or
/// `response_regex` select the `json_schema` or `regex` format instead. Combining them raises
/// `ValueError`.
#[pyclass(name = "Conversation", module = "deepseek_recipe._native", frozen)]
#[derive(Clone)]
pub struct PyConversation {
    pub inner: Conversation,
}

impl PyConversation {
    /// Wrap a core conversation (used by request conversion).
    pub fn from_core(conv: Conversation) -> Self {
        PyConversation { inner: conv }
    }
    /// The wrapped core conversation.
    pub fn core(&self) -> &Conversation {
        &self.inner
    }
    /// Take the wrapped core conversation.
    pub fn into_core(self) -> Conversation {
        self.inner
    }
}

impl From<Conversation> for PyConversation {
    fn from(conv: Conversation) -> Self {
        PyConversation::from_core(conv)
    }
}

#[pymethods]
impl PyConversation {
    #[new]
    #[pyo3(signature = (messages=None, *, thinking_mode=true, tools=None, tool_choice=String::from("auto"),
        reasoning_effort=None, response_format=String::from("text"), response_schema=None, response_regex=None))]
    #[pyo3(
        text_signature = "(messages=None, *, thinking_mode=True, tools=None, tool_choice='auto', reasoning_effort=None, response_format='text', response_schema=None, response_regex=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        #[pyo3(from_py_with = crate::args::opt_instances::<PyMessage>)] messages: Option<
            Vec<PyRef<'_, PyMessage>>,
        >,
        #[pyo3(from_py_with = crate::args::boolean)] thinking_mode: bool,
        #[pyo3(from_py_with = crate::args::opt_instances::<PyToolDefinition>)] tools: Option<
            Vec<PyRef<'_, PyToolDefinition>>,
        >,
        #[pyo3(from_py_with = crate::args::string)] tool_choice: String,
        #[pyo3(from_py_with = crate::args::opt_string)] reasoning_effort: Option<String>,
        #[pyo3(from_py_with = crate::args::string)] response_format: String,
        response_schema: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = crate::args::opt_string)] response_regex: Option<String>,
    ) -> PyResult<Self> {
        let reasoning_effort = reasoning_effort.as_deref().map(parse_effort).transpose()?;
        let tool_choice = parse_tool_choice(&tool_choice)?;
        let json_object = match response_format.as_str() {
            "text" => false,
            "json_object" => true,
            other => {
                return Err(PyValueError::new_err(format!(
                    "invalid response_format {other:?}; expected \"text\" or \"json_object\""
                )))
            }
        };
        let schema = response_schema.filter(|s| !s.is_none());
        if json_object && (schema.is_some() || response_regex.is_some()) {
            return Err(PyValueError::new_err(
                "response_format \"json_object\" cannot be combined with response_schema or response_regex",
            ));
        }
        if schema.is_some() && response_regex.is_some() {
            return Err(PyValueError::new_err(
                "response_schema and response_regex cannot be combined",
            ));
        }
        let response_format = if json_object {
            ResponseFormat::JsonObject
        } else if let Some(s) = schema {
            ResponseFormat::JsonSchema(py_to_json(s)?)
        } else if let Some(r) = response_regex {
            ResponseFormat::Regex(r)
        } else {
            ResponseFormat::Text
        };
        Ok(PyConversation {
            inner: Conversation {
                messages: inners(&messages.unwrap_or_default(), |m| &m.inner),
                thinking_mode,
                tools: inners(&tools.unwrap_or_default(), |t| &t.inner),
                tool_choice,
                reasoning_effort,
                response_format,
            },
        })
    }
    /// The messages, each as its own subclass of `Message`.
    #[getter]
    fn messages(&self, py: Python<'_>) -> PyResult<Vec<PyObject>> {
        self.inner
            .messages
            .iter()
            .map(|m| message_to_py(py, m))
            .collect()
    }
    /// Whether the model reasons before it answers.
    #[getter]
    fn thinking_mode(&self) -> bool {
        self.inner.thinking_mode
    }
    /// The tools the model may call.
    #[getter]
    fn tools(&self) -> Vec<PyToolDefinition> {
        tools_to_py(&self.inner.tools)
    }
    /// `"auto"`, `"none"` or `"required"`.
    #[getter]
    fn tool_choice(&self) -> &'static str {
        self.inner.tool_choice.as_str()
    }
    /// `"low"`, `"high"`, `"xhigh"`, `"max"`, or `None` for the template's default.
    #[getter]
    fn reasoning_effort(&self) -> Option<&'static str> {
        self.inner.reasoning_effort.map(ReasoningEffort::as_str)
    }
    /// `text`, `json_object`, `json_schema` or `regex`; enforcing it is the caller's job.
    #[getter]
    fn response_format(&self) -> &'static str {
        self.inner.response_format.name()
    }
    /// The JSON Schema of the `json_schema` format, else `None`.
    #[getter]
    fn response_schema(&self, py: Python<'_>) -> PyResult<PyObject> {
        match &self.inner.response_format {
            ResponseFormat::JsonSchema(s) => json_to_py(py, s),
            _ => Ok(py.None()),
        }
    }
    /// The regular expression of the `regex` format, else `None`.
    #[getter]
    fn response_regex(&self) -> Option<String> {
        match &self.inner.response_format {
            ResponseFormat::Regex(r) => Some(r.clone()),
            _ => None,
        }
    }
    /// This conversation as its canonical JSON text: every message, image source, image token
    /// and placeholder position, so that `Conversation.from_json` gives back an equal
    /// conversation. The layout is described in `docs/conversation-json.md`.
    fn to_json(&self) -> String {
        self.inner.to_json()
    }
    /// Read a conversation from its canonical JSON text (as written by `to_json`; fields with a
    /// default may be left out). Values are checked as the constructors check them; invalid or
    /// too deeply nested input raises `ValueError`.
    #[staticmethod]
    fn from_json(#[pyo3(from_py_with = crate::args::string)] text: String) -> PyResult<Self> {
        Conversation::from_json(&text)
            .map(PyConversation::from_core)
            .map_err(|e| PyValueError::new_err(format!("invalid conversation JSON: {e}")))
    }
    fn __repr__(&self) -> String {
        let c = &self.inner;
        format!(
            "Conversation(messages={}, thinking_mode={}, tools={}, tool_choice={:?}, reasoning_effort={:?}, response_format={:?})",
            c.messages.len(),
            if c.thinking_mode { "True" } else { "False" },
            c.tools.len(),
            c.tool_choice.as_str(),
            c.reasoning_effort.map(ReasoningEffort::as_str),
            c.response_format.name(),
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyImageSource>()?;
    m.add_class::<PyDataUrlImageSource>()?;
    m.add_class::<PyUrlImageSource>()?;
    m.add_class::<PyBytesImageSource>()?;
    m.add_class::<PyToolCall>()?;
    m.add_class::<PyToolDefinition>()?;
    m.add_class::<PyMessage>()?;
    m.add_class::<PySystemMessage>()?;
    m.add_class::<PyUserMessage>()?;
    m.add_class::<PyAssistantMessage>()?;
    m.add_class::<PyToolMessage>()?;
    m.add_class::<PyLatestReminderMessage>()?;
    m.add_class::<PyConversation>()?;
    Ok(())
}
