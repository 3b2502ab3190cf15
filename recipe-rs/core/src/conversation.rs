//! The model-neutral conversation: what a request means, before any template is applied.
//!
//! Protocol conversion (`recipe-protocol`) produces it, the encodings in [`crate::encoding`]
//! render it. Validation rules of the public constructors live in [`Conversation::new`].
//!
//! Every type here has one canonical JSON form (serde), described and validated in
//! [`crate::conversation_json`]; [`Conversation::to_json`] and [`Conversation::from_json`] are
//! the entry points.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::conversation_json::{
    ConversationJson, ImageSourceJson, ObjectOnly, SystemMessageJson, ToolMessageJson,
    UserMessageJson,
};

/// How much detail an image should be processed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ObjectOnly<ImageSourceJson>", into = "ImageSourceJson")]
pub struct ImageSource {
    pub data: ImageData,
    pub detail: ImageDetail,
    pub path: String,
}

/// A tool call made by the assistant earlier in the conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the client sent them; expected to be a JSON object, not validated.
    pub arguments: String,
}

/// A tool the model may call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDefinition {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// JSON Schema of the arguments (`Value::Null` when absent).
    #[serde(default)]
    pub parameters: Value,
    #[serde(default)]
    pub strict: Option<bool>,
    /// Deferred tools are declared but left out of the rendered schema list.
    #[serde(default)]
    pub defer_loading: bool,
}

/// Text that may hold image placeholders, built piece by piece so that the placeholders are known
/// by position and never looked for in the text afterwards.
///
/// `placeholders` are the byte offsets in `content` where an image placeholder (the message's
/// `image_token` spelling) starts, ascending and non-overlapping. Only these are rendered as
/// image tokens; the same spelling elsewhere in `content` (typed by a user) is plain text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageText {
    pub content: String,
    pub placeholders: Vec<usize>,
}

impl ImageText {
    /// Plain text without placeholders.
    pub fn plain(content: impl Into<String>) -> Self {
        ImageText {
            content: content.into(),
            placeholders: Vec::new(),
        }
    }

    /// Text given as one string with its image count, the way the public message constructors
    /// take it: the first `images` occurrences of `image_token` are the placeholders, later
    /// occurrences are plain text.
    pub fn scan(content: impl Into<String>, image_token: &str, images: usize) -> Self {
        let content = content.into();
        let mut placeholders = Vec::new();
        if !image_token.is_empty() {
            let mut from = 0;
            while placeholders.len() < images {
                match content[from..].find(image_token) {
                    Some(at) => {
                        placeholders.push(from + at);
                        from += at + image_token.len();
                    }
                    None => break,
                }
            }
        }
        ImageText {
            content,
            placeholders,
        }
    }

    pub fn push_text(&mut self, text: &str) {
        self.content.push_str(text);
    }

    /// Append an image placeholder spelled `image_token`.
    pub fn push_placeholder(&mut self, image_token: &str) {
        self.placeholders.push(self.content.len());
        self.content.push_str(image_token);
    }

    /// Append `other`, keeping its placeholders.
    pub fn push(&mut self, other: &ImageText) {
        let base = self.content.len();
        self.content.push_str(&other.content);
        self.placeholders
            .extend(other.placeholders.iter().map(|p| p + base));
    }

    /// Join pieces with `sep` between them.
    pub fn join(pieces: &[ImageText], sep: &str) -> Self {
        let mut out = ImageText::default();
        for (k, p) in pieces.iter().enumerate() {
            if k > 0 {
                out.push_text(sep);
            }
            out.push(p);
        }
        out
    }

    /// Split `content` into plain pieces and placeholders spelled `image_token`. Offsets that do not point at the spelling (possible only when the
    /// public fields were set by hand inconsistently) are ignored, so the output never holds a
    /// placeholder the message did not place.
    pub fn pieces<'a>(
        content: &'a str,
        placeholders: &[usize],
        image_token: &str,
    ) -> Vec<TextPiece<'a>> {
        let mut out = Vec::with_capacity(2 * placeholders.len() + 1);
        let mut cursor = 0;
        for &at in placeholders {
            let valid = !image_token.is_empty()
                && at >= cursor
                && content
                    .get(at..)
                    .is_some_and(|rest| rest.starts_with(image_token));
            if !valid {
                continue;
            }
            if at > cursor {
                out.push(TextPiece::Text(&content[cursor..at]));
            }
            out.push(TextPiece::Image);
            cursor = at + image_token.len();
        }
        if cursor < content.len() {
            out.push(TextPiece::Text(&content[cursor..]));
        }
        out
    }
}

/// A piece of an [`ImageText`]: plain text or one image placeholder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextPiece<'a> {
    Text(&'a str),
    Image,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "SystemMessageJson", into = "SystemMessageJson")]
pub struct SystemMessage {
    pub content: String,
    pub image_sources: Vec<ImageSource>,
    /// Tool schemas announced mid-conversation ("Updated Tool Schemas", V4.1 only).
    pub tools: Option<Vec<ToolDefinition>>,
    /// Spelling of the image placeholder in `content`.
    pub image_token: String,
    /// Byte offsets of the image placeholders in `content` (see [`ImageText`]).
    pub placeholders: Vec<usize>,
}

impl SystemMessage {
    /// A system message from its parts; placeholders as in [`ImageText::scan`].
    pub fn new(
        content: impl Into<String>,
        image_sources: Vec<ImageSource>,
        image_token: impl Into<String>,
    ) -> Self {
        let image_token = image_token.into();
        let text = ImageText::scan(content, &image_token, image_sources.len());
        SystemMessage::from_text(text, image_sources, image_token)
    }

    /// A system message whose placeholders are already known.
    pub fn from_text(
        text: ImageText,
        image_sources: Vec<ImageSource>,
        image_token: impl Into<String>,
    ) -> Self {
        SystemMessage {
            content: text.content,
            image_sources,
            tools: None,
            image_token: image_token.into(),
            placeholders: text.placeholders,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "UserMessageJson", into = "UserMessageJson")]
pub struct UserMessage {
    pub content: String,
    pub image_sources: Vec<ImageSource>,
    pub image_token: String,
    /// Byte offsets of the image placeholders in `content` (see [`ImageText`]).
    pub placeholders: Vec<usize>,
}

impl UserMessage {
    /// A user message from its parts; placeholders as in [`ImageText::scan`].
    pub fn new(
        content: impl Into<String>,
        image_sources: Vec<ImageSource>,
        image_token: impl Into<String>,
    ) -> Self {
        let image_token = image_token.into();
        let text = ImageText::scan(content, &image_token, image_sources.len());
        UserMessage::from_text(text, image_sources, image_token)
    }

    /// A user message whose placeholders are already known.
    pub fn from_text(
        text: ImageText,
        image_sources: Vec<ImageSource>,
        image_token: impl Into<String>,
    ) -> Self {
        UserMessage {
            content: text.content,
            image_sources,
            image_token: image_token.into(),
            placeholders: text.placeholders,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssistantMessage {
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub reasoning_content: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::conversation_json::optional_objects"
    )]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// A partial turn that the model continues instead of a closed turn.
    #[serde(default)]
    pub prefix: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ToolMessageJson", into = "ToolMessageJson")]
pub struct ToolMessage {
    pub content: String,
    pub tool_call_id: Option<String>,
    pub image_sources: Vec<ImageSource>,
    pub image_token: String,
    /// Byte offsets of the image placeholders in `content` (see [`ImageText`]).
    pub placeholders: Vec<usize>,
}

impl ToolMessage {
    /// A tool result from its parts; placeholders as in [`ImageText::scan`].
    pub fn new(
        content: impl Into<String>,
        tool_call_id: Option<String>,
        image_sources: Vec<ImageSource>,
        image_token: impl Into<String>,
    ) -> Self {
        let image_token = image_token.into();
        let text = ImageText::scan(content, &image_token, image_sources.len());
        ToolMessage::from_text(text, tool_call_id, image_sources, image_token)
    }

    /// A tool result whose placeholders are already known.
    pub fn from_text(
        text: ImageText,
        tool_call_id: Option<String>,
        image_sources: Vec<ImageSource>,
        image_token: impl Into<String>,
    ) -> Self {
        ToolMessage {
            content: text.content,
            tool_call_id,
            image_sources,
            image_token: image_token.into(),
            placeholders: text.placeholders,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatestReminderMessage {
    pub content: String,
}

/// One message of a conversation; in JSON an object whose `role` names the variant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
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

    /// The images of a system, user or tool message (none for the other roles).
    pub fn image_sources(&self) -> &[ImageSource] {
        match self {
            Message::System(m) => &m.image_sources,
            Message::User(m) => &m.image_sources,
            Message::Tool(m) => &m.image_sources,
            Message::Assistant(_) | Message::LatestReminder(_) => &[],
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ObjectOnly<ConversationJson>", into = "ConversationJson")]
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
