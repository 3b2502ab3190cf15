//! The model-neutral conversation: what a request means, before any template is applied.
//!
//! Protocol conversion (`recipe-protocol`) produces it, the encodings in [`crate::encoding`]
//! render it. Validation rules of the public constructors live in [`Conversation::new`].

use serde_json::Value;

/// How much detail an image should be processed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ImageDetail {
    Low,
    #[default]
    High,
    Original,
    Auto,
}

impl ImageDetail {
    pub fn as_str(self) -> &'static str {
        match self {
            ImageDetail::Low => "low",
            ImageDetail::High => "high",
            ImageDetail::Original => "original",
            ImageDetail::Auto => "auto",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "low" => ImageDetail::Low,
            "high" => ImageDetail::High,
            "original" => ImageDetail::Original,
            "auto" => ImageDetail::Auto,
            _ => return None,
        })
    }
}

/// Where the bytes of an image come from. Only a placeholder is rendered for it.
#[derive(Clone, Debug, PartialEq)]
pub enum ImageData {
    DataUrl(String),
    Url(String),
    Bytes(Vec<u8>),
}

/// An image attached to a message, with its request location (`path`) for error messages.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageSource {
    pub data: ImageData,
    pub detail: ImageDetail,
    pub path: String,
}

/// A tool call made by the assistant earlier in the conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the client sent them; expected to be a JSON object, not validated.
    pub arguments: String,
}

/// A tool the model may call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDefinition {
    pub name: String,
    pub description: Option<String>,
    /// JSON Schema of the arguments (`Value::Null` when absent).
    pub parameters: Value,
    pub strict: Option<bool>,
    /// Deferred tools are declared but left out of the rendered schema list.
    pub defer_loading: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SystemMessage {
    pub content: String,
    pub image_sources: Vec<ImageSource>,
    /// Tool schemas announced mid-conversation ("Updated Tool Schemas", V4.1 only).
    pub tools: Option<Vec<ToolDefinition>>,
    /// Spelling of the image placeholder in `content`.
    pub image_token: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct UserMessage {
    pub content: String,
    pub image_sources: Vec<ImageSource>,
    pub image_token: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AssistantMessage {
    pub content: String,
    pub reasoning_content: Option<String>,
    pub tool_calls: Option<Vec<ToolCall>>,
    /// A partial turn that the model continues instead of a closed turn.
    pub prefix: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ToolMessage {
    pub content: String,
    pub tool_call_id: Option<String>,
    pub image_sources: Vec<ImageSource>,
    pub image_token: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LatestReminderMessage {
    pub content: String,
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    System(SystemMessage),
    User(UserMessage),
    Assistant(AssistantMessage),
    Tool(ToolMessage),
    LatestReminder(LatestReminderMessage),
}

impl Message {
    pub fn role(&self) -> &'static str {
        match self {
            Message::System(_) => "system",
            Message::User(_) => "user",
            Message::Assistant(_) => "assistant",
            Message::Tool(_) => "tool",
            Message::LatestReminder(_) => "latest_reminder",
        }
    }

    pub fn content(&self) -> &str {
        match self {
            Message::System(m) => &m.content,
            Message::User(m) => &m.content,
            Message::Assistant(m) => &m.content,
            Message::Tool(m) => &m.content,
            Message::LatestReminder(m) => &m.content,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ToolChoice {
    #[default]
    Auto,
    None,
    Required,
}

impl ToolChoice {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolChoice::Auto => "auto",
            ToolChoice::None => "none",
            ToolChoice::Required => "required",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasoningEffort {
    Low,
    High,
    XHigh,
    Max,
}

impl ReasoningEffort {
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Low => "low",
            ReasoningEffort::High => "high",
            ReasoningEffort::XHigh => "xhigh",
            ReasoningEffort::Max => "max",
        }
    }
}

/// The requested answer format.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum ResponseFormat {
    #[default]
    Text,
    JsonObject,
    JsonSchema(Value),
    Regex(String),
}

impl ResponseFormat {
    pub fn name(&self) -> &'static str {
        match self {
            ResponseFormat::Text => "text",
            ResponseFormat::JsonObject => "json_object",
            ResponseFormat::JsonSchema(_) => "json_schema",
            ResponseFormat::Regex(_) => "regex",
        }
    }
}

/// A conversation and the prompt settings that go with it.
#[derive(Clone, Debug, PartialEq)]
pub struct Conversation {
    pub messages: Vec<Message>,
    pub thinking_mode: bool,
    pub tools: Vec<ToolDefinition>,
    pub tool_choice: ToolChoice,
    pub reasoning_effort: Option<ReasoningEffort>,
    pub response_format: ResponseFormat,
}

impl Default for Conversation {
    fn default() -> Self {
        Conversation {
            messages: Vec::new(),
            thinking_mode: true,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            reasoning_effort: None,
            response_format: ResponseFormat::Text,
        }
    }
}

/// The model a converted conversation targets; it selects the prompt encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModelVersion {
    /// DeepSeek V4 Pro, rendered by the V4 encoding.
    DeepseekV4Pro,
    /// DeepSeek V4.1 Flash, rendered by the V4.1 encoding.
    DeepseekV41Flash,
}

impl ModelVersion {
    pub fn name(self) -> &'static str {
        match self {
            ModelVersion::DeepseekV4Pro => "DeepseekV4Pro",
            ModelVersion::DeepseekV41Flash => "DeepseekV41Flash",
        }
    }
}
