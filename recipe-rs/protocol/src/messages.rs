//! Anthropic Messages requests.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use recipe_core::profile::SystemTurn;
use recipe_core::{
    AssistantMessage, ImageData, ImageDetail, ImageSource, ImageText, Message, ModelVersion,
    ResponseFormat, SpecialToken, SystemMessage, ToolCall, ToolDefinition, ToolMessage,
    UserMessage,
};

use crate::common::{
    self, Assembly, DeclaredTool, ImagePart, Part, RequestEffort, RequestToolChoice,
};
use crate::error::{reject, ConvResult, RequestError};
use crate::options::{ConversionOptions, WebSearchBehavior};
use crate::request::ConversationRequest;

#[derive(Debug, Deserialize)]
#[serde(rename = "MessagesRequest")]
pub struct MessagesRequest {
    pub model: String,
    pub messages: Vec<MessagesMessage>,
    #[serde(default, deserialize_with = "de_system")]
    pub system: Option<Vec<String>>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_p: Option<f32>,
    #[serde(default)]
    pub stop_sequences: Option<Vec<String>>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub thinking: Option<MessagesThinking>,
    #[serde(default)]
    pub output_config: Option<MessagesOutputConfig>,
    #[serde(default, deserialize_with = "de_tools")]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_choice: Option<MessagesToolChoice>,
    #[serde(default)]
    pub metadata: Option<MessagesMetadata>,
}

#[derive(Debug, Deserialize)]
#[serde(rename = "MessagesMetadata")]
pub struct MessagesMetadata {
    pub user_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename = "MessagesThinking")]
pub struct MessagesThinking {
    #[serde(rename = "type")]
    pub kind: crate::chat::ThinkingType,
    /// Read (and type-checked) but not used.
    #[serde(rename = "budget_tokens")]
    _budget_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename = "MessagesOutputConfig")]
pub struct MessagesOutputConfig {
    pub effort: Option<RequestEffort>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", rename = "MessagesToolChoice")]
pub enum MessagesToolChoice {
    Auto,
    Any,
    Tool { name: String },
    None,
}

fn de_system<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    use serde::de::Error;
    #[derive(Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    enum MessagesSystemBlock {
        Text { text: String },
    }
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(vec![s])),
        v @ Value::Array(_) => serde_json::from_value::<Vec<MessagesSystemBlock>>(v)
            .map(|b| {
                Some(
                    b.into_iter()
                        .map(|MessagesSystemBlock::Text { text }| text)
                        .collect(),
                )
            })
            .map_err(D::Error::custom),
        _ => Err(D::Error::custom("expected a string or a list")),
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Role {
    User,
    Assistant,
    System,
}

#[derive(Debug, Deserialize)]
#[serde(
    tag = "role",
    content = "content",
    rename_all = "lowercase",
    rename = "MessagesMessage"
)]
pub enum MessagesMessage {
    User(#[serde(deserialize_with = "de_content")] Vec<MessagesContentBlock>),
    Assistant(#[serde(deserialize_with = "de_content")] Vec<MessagesContentBlock>),
    System(#[serde(deserialize_with = "de_content")] Vec<MessagesContentBlock>),
}

impl MessagesMessage {
    fn split(self) -> (Role, Vec<MessagesContentBlock>) {
        match self {
            MessagesMessage::User(c) => (Role::User, c),
            MessagesMessage::Assistant(c) => (Role::Assistant, c),
            MessagesMessage::System(c) => (Role::System, c),
        }
    }
}

fn de_content<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<MessagesContentBlock>, D::Error> {
    use serde::de::Error;
    match Value::deserialize(d)? {
        Value::String(s) => Ok(vec![MessagesContentBlock::Text { text: s }]),
        v @ Value::Array(_) => serde_json::from_value(v).map_err(D::Error::custom),
        _ => Err(D::Error::custom("expected a string or a list")),
    }
}

#[derive(Debug, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename = "MessagesContentBlock"
)]
pub enum MessagesContentBlock {
    Text {
        text: String,
    },
    Image {
        source: MessagesImageSource,
    },
    Document {
        source: MessagesDocumentSource,
    },
    Thinking {
        thinking: String,
        #[serde(default)]
        signature: Option<String>,
    },
    /// A server tool's call (`web_search`): kept out of the conversation, or rejected.
    ServerToolUse {
        #[serde(rename = "id")]
        _id: String,
        #[serde(rename = "name")]
        _name: String,
        #[serde(rename = "input")]
        _input: Value,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default, deserialize_with = "de_tool_result_content")]
        content: Option<Vec<MessagesToolResultBlock>>,
    },
    /// A server tool's result: kept out of the conversation, or rejected.
    WebSearchToolResult {
        #[serde(rename = "tool_use_id")]
        _tool_use_id: String,
        #[serde(rename = "content")]
        _content: Value,
    },
    /// In a mid-conversation system message: announce a declared tool there (V4.1's "Updated
    /// Tool Schemas").
    ToolAddition {
        tool: MessagesToolReference,
    },
}

/// The tool a `tool_addition` block announces, by the name it was declared with.
#[derive(Debug, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename = "MessagesToolReference"
)]
pub enum MessagesToolReference {
    ToolReference { name: String },
}

impl MessagesContentBlock {
    /// The error for a block that a `user` or `system` message may not hold, if this is one.
    fn misplaced_outside_assistant(&self, i: usize, role: Role) -> Option<String> {
        match self {
            MessagesContentBlock::Thinking { .. } => Some(format!(
                "messages.{i}.content: thinking blocks may only be in `assistant` messages"
            )),
            MessagesContentBlock::ToolUse { .. } | MessagesContentBlock::ServerToolUse { .. } => {
                Some(format!(
                    "messages.{i}: `tool_use` blocks can only be in `assistant` messages"
                ))
            }
            MessagesContentBlock::WebSearchToolResult { .. } => Some(format!(
                "messages.{i}: `web_search_tool_result` blocks can only be in `assistant` messages"
            )),
            MessagesContentBlock::ToolAddition { .. } if !matches!(role, Role::System) => {
                Some(tool_addition_misplaced(i))
            }
            _ => None,
        }
    }
}

fn tool_addition_misplaced(i: usize) -> String {
    format!("messages.{i}: `tool_addition` blocks can only be in `system` messages")
}

const SERVER_BLOCK_REJECTED: &str = "Unsupported content block: server tools are not supported";

impl MessagesRequest {
    pub fn from_value(v: Value) -> Result<Self, RequestError> {
        crate::body::from_value(v)
    }

    pub fn from_slice(bytes: &[u8]) -> Result<Self, RequestError> {
        Self::from_value(crate::body::parse_json_keeping(bytes, Self::body_fields())?)
    }

    /// The top-level body fields this request reads; others are ignored.
    pub fn body_fields() -> &'static [&'static str] {
        crate::body::struct_fields::<Self>()
    }

    pub fn convert(self, options: &ConversionOptions) -> ConvResult<ConversationRequest> {
        convert(self, options)
    }
}

/// Tools are kept as values, but their shape is checked where the field is read, so a broken
/// tool is reported in the body's member order (as a typed field would be).
fn de_tools<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<Value>>, D::Error> {
    let tools = Option::<Vec<Value>>::deserialize(d)?;
    for tool in tools.iter().flatten() {
        check_tool_shape(tool).map_err(serde::de::Error::custom)?;
    }
    Ok(tools)
}

/// Field types of a declared tool, as the typed request would reject them. A tool with a
/// `type` is a server tool (or a `custom` one): its `type` and `name` must be strings. A tool
/// without one needs a string `name`.
fn check_tool_shape(tool: &Value) -> Result<(), String> {
    use crate::strict::unexpected;
    let Value::Object(obj) = tool else {
        return Err("missing field `name`".to_owned());
    };
    if let Some(ty) = obj.get("type") {
        if !ty.is_string() {
            return Err(format!(
                "invalid type: {}, expected a string",
                unexpected(ty)
            ));
        }
        return match obj.get("name") {
            None | Some(Value::Null) | Some(Value::String(_)) => Ok(()),
            Some(v) => Err(format!(
                "invalid type: {}, expected a string",
                unexpected(v)
            )),
        };
    }
    if !obj.contains_key("name") {
        return Err("missing field `name`".to_owned());
    }
    field_type(obj, "name", Value::is_string, "a string")?;
    let optional_string = |v: &Value| v.is_null() || v.is_string();
    field_type(obj, "description", optional_string, "a string")?;
    let optional_bool = |v: &Value| v.is_null() || v.is_boolean();
    field_type(obj, "defer_loading", optional_bool, "a boolean")
}

/// `Ok` when `key` is absent or its value passes `accepts`; else the serde-style type error.
fn field_type(
    obj: &serde_json::Map<String, Value>,
    key: &str,
    accepts: impl Fn(&Value) -> bool,
    expected: &str,
) -> Result<(), String> {
    match obj.get(key) {
        Some(v) if !accepts(v) => Err(format!(
            "field `{key}`: invalid type: {}, expected {expected}",
            crate::strict::unexpected(v)
        )),
        _ => Ok(()),
    }
}

/// JSON text with `", "` and `": "` separators and raw non-ASCII characters.
pub fn spaced_json(v: &Value) -> String {
    let mut out = String::new();
    write_spaced(v, &mut out);
    out
}

fn write_spaced(v: &Value, out: &mut String) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_spaced(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_spaced(item, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Whether `s` is canonical standard base64 (padded, no stray bits in the last symbol).
pub fn is_canonical_base64(s: &str) -> bool {
    fn val(c: u8) -> Option<u8> {
        match c {
            b'A'..=b'Z' => Some(c - b'A'),
            b'a'..=b'z' => Some(c - b'a' + 26),
            b'0'..=b'9' => Some(c - b'0' + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let b = s.as_bytes();
    if !b.len().is_multiple_of(4) {
        return false;
    }
    let pad = b.iter().rev().take_while(|&&c| c == b'=').count();
    if pad > 2 {
        return false;
    }
    let body = &b[..b.len() - pad];
    let mut last = 0u8;
    for &c in body {
        match val(c) {
            Some(v) => last = v,
            None => return false,
        }
    }
    match pad {
        1 => last & 0b11 == 0,
        2 => last & 0b1111 == 0,
        _ => true,
    }
}

/// Where a Messages image block takes its bytes from (tagged by `type`).
#[derive(Debug, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename = "MessagesImageSource"
)]
pub enum MessagesImageSource {
    Base64 {
        media_type: MessagesImageMediaType,
        data: String,
    },
    Url {
        url: String,
    },
    File {
        #[serde(rename = "file_id")]
        _file_id: String,
    },
}

/// The image media types a base64 image source may declare.
#[derive(Debug, Clone, Copy, Deserialize)]
pub enum MessagesImageMediaType {
    #[serde(rename = "image/jpeg")]
    Jpeg,
    #[serde(rename = "image/jpg")]
    Jpg,
    #[serde(rename = "image/png")]
    Png,
    #[serde(rename = "image/gif")]
    Gif,
    #[serde(rename = "image/webp")]
    Webp,
}

impl MessagesImageMediaType {
    fn as_str(self) -> &'static str {
        match self {
            // `image/jpg` is written out under its registered name.
            Self::Jpeg | Self::Jpg => "image/jpeg",
            Self::Png => "image/png",
            Self::Gif => "image/gif",
            Self::Webp => "image/webp",
        }
    }
}

/// The image data of an image block; `Err` carries the message suffix of a rejection.
fn image_from_source(
    source: &MessagesImageSource,
    validate: bool,
) -> Result<Option<ImageData>, String> {
    match source {
        MessagesImageSource::Base64 { media_type, data } => {
            if validate && !is_canonical_base64(data) {
                return Err("base64 decode error".to_owned());
            }
            Ok(Some(ImageData::DataUrl(format!(
                "data:{};base64,{data}",
                media_type.as_str()
            ))))
        }
        MessagesImageSource::Url { url } => {
            if validate && !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!("invalid url: {url:?}"));
            }
            Ok(Some(ImageData::Url(url.clone())))
        }
        MessagesImageSource::File { .. } => {
            if validate {
                return Err(
                    "file_id is not supported. Pass the image as a base64 data url instead."
                        .to_owned(),
                );
            }
            // Only read by versions that show a placeholder instead of the image.
            Ok(Some(ImageData::Url(String::new())))
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename = "MessagesDocumentSource")]
pub struct MessagesDocumentSource {
    pub media_type: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MessagesToolResultBlock {
    Text {
        text: String,
    },
    Image {
        source: MessagesImageSource,
    },
    Document {
        source: MessagesDocumentSource,
    },
    /// A reference to a tool; its name is shown as text.
    ToolReference {
        tool_name: String,
    },
}

fn de_tool_result_content<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<MessagesToolResultBlock>>, D::Error> {
    use serde::de::Error;
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(vec![MessagesToolResultBlock::Text { text: s }])),
        v @ Value::Array(_) => serde_json::from_value(v)
            .map(Some)
            .map_err(D::Error::custom),
        _ => Err(D::Error::custom("expected a string or a list")),
    }
}

/// The image as a request part, or `None` for a source that shows nothing. V4.1 validates the
/// source (errors name `path`); V4 shows a placeholder text for any source.
fn image_part(
    source: &MessagesImageSource,
    path: &str,
    version: ModelVersion,
) -> Result<Option<Part>, String> {
    let validate = common::shows_images(version);
    let data = image_from_source(source, validate).map_err(|m| format!("{path}: {m}"))?;
    Ok(data.map(|data| {
        Part::Image(ImagePart {
            data,
            detail: ImageDetail::default(),
        })
    }))
}

fn document_text(source: MessagesDocumentSource) -> String {
    let mt = source.media_type.unwrap_or_else(|| "unknown".to_owned());
    format!("[Unsupported document type: {mt}]")
}

/// Text, image and document blocks of a tool result, in order (`path` names the tool result).
fn tool_result_parts(
    content: Option<Vec<MessagesToolResultBlock>>,
    path: &str,
    version: ModelVersion,
) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    for (k, block) in content.unwrap_or_default().into_iter().enumerate() {
        match block {
            MessagesToolResultBlock::Text { text } => parts.push(Part::Text(text)),
            MessagesToolResultBlock::Image { source } => {
                parts.extend(image_part(
                    &source,
                    &format!("{path}.content[{k}]"),
                    version,
                )?);
            }
            MessagesToolResultBlock::Document { source } => {
                parts.push(Part::Text(document_text(source)))
            }
            MessagesToolResultBlock::ToolReference { tool_name } => {
                parts.push(Part::Text(tool_name))
            }
        }
    }
    Ok(parts)
}

/// Text, image and document blocks of a mid-conversation system turn (message `i`), in order.
/// The parts of a mid-conversation system message, and the names of the declared tools its
/// `tool_addition` blocks announce (each must name a declared tool).
fn system_parts(
    content: Vec<MessagesContentBlock>,
    i: usize,
    version: ModelVersion,
    declared: &[DeclaredTool],
) -> Result<(Vec<Part>, Vec<String>), String> {
    let mut parts = Vec::new();
    let mut added = Vec::new();
    for (j, block) in content.into_iter().enumerate() {
        // Blocks are read in order: a misplaced one fails where it stands.
        if let Some(e) = block.misplaced_outside_assistant(i, Role::System) {
            return Err(e);
        }
        match block {
            MessagesContentBlock::ToolAddition {
                tool: MessagesToolReference::ToolReference { name },
            } => {
                if !declared.iter().any(|t| t.name == name) {
                    return Err(format!(
                        "messages.{i}.content.{j}: `tool_addition` references unknown tool '{name}'"
                    ));
                }
                added.push(name);
            }
            MessagesContentBlock::Text { text } => parts.push(Part::Text(text)),
            MessagesContentBlock::Image { source } => {
                parts.extend(image_part(
                    &source,
                    &format!("messages.{i}.content[{j}]"),
                    version,
                )?);
            }
            MessagesContentBlock::Document { source } => {
                parts.push(Part::Text(document_text(source)))
            }
            _ => {}
        }
    }
    Ok((parts, added))
}

fn convert(req: MessagesRequest, options: &ConversionOptions) -> ConvResult<ConversationRequest> {
    let version = common::resolve_model(options, &req.model)?;
    let switch = req
        .thinking
        .as_ref()
        .map(|t| !matches!(t.kind, crate::chat::ThinkingType::Disabled));
    let effort = req.output_config.as_ref().and_then(|o| o.effort);
    let (thinking, effort) =
        common::resolve_thinking(switch, effort, options.default_thinking_mode);
    let mut declared = Vec::new();
    for (i, tool) in req.tools.unwrap_or_default().iter().enumerate() {
        let Some(obj) = tool.as_object() else {
            continue;
        };
        // A `type` (even `custom`) makes a server tool.
        if let Some(t) = obj.get("type").and_then(Value::as_str) {
            if options.messages_web_search == WebSearchBehavior::Reject
                || !t.starts_with("web_search")
            {
                return reject(format!("tools[{i}]: server tools are not supported"));
            }
            continue;
        }
        let name = obj
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        common::check_tool_name(&name, &format!("tools[{i}].name"))?;
        let tool = DeclaredTool {
            name,
            description: obj
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
            // A missing schema is validated as `null` (and fails); `strict` is not read.
            parameters: Some(obj.get("input_schema").cloned().unwrap_or(Value::Null)),
            strict: None,
            // Versions without deferred tools list every declared tool.
            defer_loading: version.profile().conversion.deferred_tools
                && obj.get("defer_loading").and_then(Value::as_bool) == Some(true),
        };
        declared.push(tool);
    }
    if !declared.is_empty() && declared.iter().all(|t| t.defer_loading) {
        return reject(
            "tools: at least one tool must have defer_loading=false. All tools cannot be deferred.",
        );
    }
    if req.messages.is_empty() {
        return reject("messages: at least one message is required");
    }

    let image_token = options.special_tokens.get(SpecialToken::Image).to_owned();
    let mut messages: Vec<Message> = Vec::new();
    if let Some(system) = req.system {
        let text = ImageText::plain(system.join("\n\n"));
        messages.push(Message::System(SystemMessage::from_text(
            text,
            Vec::new(),
            image_token.as_str(),
        )));
    }
    let mut previous_calls: Vec<String> = Vec::new();
    let n_messages = req.messages.len();
    // Mid-conversation system messages (by index) and the tools they announce.
    let mut announced: Vec<(usize, Vec<String>)> = Vec::new();
    for (i, m) in req.messages.into_iter().enumerate() {
        let (role, content) = m.split();
        let m = Msg { role, content };
        // (An empty system turn is dropped instead.)
        if m.content.is_empty() && !matches!(m.role, Role::System) {
            return reject(format!(
                "messages.{i}: all messages must have non-empty content"
            ));
        }
        let answered_here: Vec<String> = m
            .content
            .iter()
            .filter_map(|b| match b {
                MessagesContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.clone()),
                _ => None,
            })
            .collect();
        let owed = std::mem::take(&mut previous_calls);
        let mut calls_here = Vec::new();
        if matches!(m.role, Role::System) {
            // A mid-conversation system turn is one message: its text, image and document blocks
            // joined. V4 has no such turn: the text becomes a user reminder (images as the
            // unsupported-image text); an empty one leaves nothing to remind of.
            let (parts, added) = match system_parts(m.content, i, version, &declared) {
                Ok(p) => p,
                Err(e) => return reject(e),
            };
            let (text, image_sources) =
                common::join_parts(parts, version, &image_token, &format!("messages.{i}"));
            if version.profile().conversion.system_turn == SystemTurn::System {
                if !added.is_empty() {
                    announced.push((messages.len(), added));
                }
                messages.push(Message::System(SystemMessage::from_text(
                    text,
                    image_sources,
                    image_token.as_str(),
                )));
            } else if !text.content.is_empty() {
                let reminder = ImageText::plain(format!(
                    "<system-reminder>\n{}\n</system-reminder>",
                    text.content
                ));
                messages.push(Message::User(UserMessage::from_text(
                    reminder,
                    Vec::new(),
                    image_token.as_str(),
                )));
            }
            if !owed.is_empty() {
                return reject(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                    owed.join(", ")
                ));
            }
            previous_calls = calls_here;
            continue;
        }
        match m.role {
            Role::User | Role::System => {
                let mut texts: Vec<String> = Vec::new();
                for (j, block) in m.content.into_iter().enumerate() {
                    let path = format!("messages.{i}.content[{j}]");
                    // Blocks are read in order: a misplaced one fails where it stands.
                    if let Some(e) = block.misplaced_outside_assistant(i, m.role) {
                        return reject(e);
                    }
                    match block {
                        MessagesContentBlock::Text { text } => texts.push(text),
                        MessagesContentBlock::Image { source } => {
                            let validate = common::shows_images(version);
                            let data = match image_from_source(&source, validate) {
                                Ok(d) => d,
                                Err(m) => return reject(format!("{path}: {m}")),
                            };
                            if let Some(data) = data {
                                if !common::shows_images(version) {
                                    texts.push(common::UNSUPPORTED_IMAGE.to_owned());
                                } else {
                                    flush_user(&mut texts, &mut messages, &image_token, m.role);
                                    let mut text = ImageText::default();
                                    text.push_placeholder(&image_token);
                                    let source = ImageSource {
                                        data,
                                        detail: ImageDetail::default(),
                                        path,
                                    };
                                    messages.push(Message::User(UserMessage::from_text(
                                        text,
                                        vec![source],
                                        image_token.as_str(),
                                    )));
                                }
                            }
                        }
                        MessagesContentBlock::Document { source } => {
                            let mt = source.media_type.unwrap_or_else(|| "unknown".to_owned());
                            texts.push(format!("[Unsupported document type: {mt}]"));
                        }
                        MessagesContentBlock::ToolResult {
                            tool_use_id,
                            content,
                        } => {
                            if !owed.contains(&tool_use_id) {
                                return reject(format!(
                                    "unexpected `messages.{i}.content.{j}: tool_use_id` found in `tool_result` blocks: {tool_use_id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                                ));
                            }
                            flush_user(&mut texts, &mut messages, &image_token, m.role);
                            let parts = match tool_result_parts(
                                content,
                                &format!("messages.{i}.content.{j}.tool_result"),
                                version,
                            ) {
                                Ok(p) => p,
                                Err(e) => return reject(e),
                            };
                            let path = format!("messages.{i}.content.{j}.tool_result");
                            let (text, image_sources) =
                                common::join_parts(parts, version, &image_token, &path);
                            messages.push(Message::Tool(ToolMessage::from_text(
                                text,
                                Some(tool_use_id),
                                image_sources,
                                image_token.as_str(),
                            )));
                        }
                        // Rejected above (see `misplaced_outside_assistant`).
                        MessagesContentBlock::ServerToolUse { .. }
                        | MessagesContentBlock::WebSearchToolResult { .. }
                        | MessagesContentBlock::Thinking { .. }
                        | MessagesContentBlock::ToolUse { .. }
                        | MessagesContentBlock::ToolAddition { .. } => {}
                    }
                    if !texts.is_empty() {
                        flush_user(&mut texts, &mut messages, &image_token, m.role);
                    }
                }
                flush_user(&mut texts, &mut messages, &image_token, m.role);
            }
            Role::Assistant => {
                let mut texts = Vec::new();
                let mut reasoning: Option<String> = None;
                let mut calls = Vec::new();
                for block in m.content {
                    match block {
                        MessagesContentBlock::Text { text } => texts.push(text),
                        MessagesContentBlock::Thinking { thinking, .. } => {
                            reasoning = Some(thinking)
                        }
                        MessagesContentBlock::ToolUse { id, name, input } => {
                            calls_here.push(id.clone());
                            calls.push(ToolCall {
                                id,
                                name,
                                arguments: spaced_json(&input),
                            });
                        }
                        MessagesContentBlock::ServerToolUse { .. }
                        | MessagesContentBlock::WebSearchToolResult { .. }
                            if options.messages_web_search == WebSearchBehavior::Reject =>
                        {
                            return reject(SERVER_BLOCK_REJECTED);
                        }
                        MessagesContentBlock::ToolAddition { .. } => {
                            return reject(tool_addition_misplaced(i));
                        }
                        _ => {}
                    }
                }
                messages.push(Message::Assistant(AssistantMessage {
                    content: texts.join("\n\n"),
                    reasoning_content: reasoning,
                    tool_calls: if calls.is_empty() { None } else { Some(calls) },
                    prefix: false,
                }));
            }
        }
        let missing: Vec<&str> = owed
            .iter()
            .map(String::as_str)
            .filter(|id| !answered_here.iter().any(|a| a == id))
            .collect();
        if !missing.is_empty() {
            return reject(format!(
                "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                missing.join(", ")
            ));
        }
        previous_calls = calls_here;
    }
    // Calls of a final assistant turn are never answered.
    if !previous_calls.is_empty() {
        return reject(format!(
            "messages.{}:`tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
            n_messages - 1,
            previous_calls.join(", ")
        ));
    }
    common::apply_reasoning_policy(
        &mut messages,
        thinking,
        options.reasoning_content_behavior,
        common::ReasoningField {
            name: "content[].thinking",
            tools_declared: !declared.is_empty(),
        },
    )?;

    let mut declared = declared;
    let choice = req.tool_choice.map(|c| match c {
        MessagesToolChoice::Auto => RequestToolChoice::Auto,
        // `any` is accepted but served as `auto`.
        MessagesToolChoice::Any => RequestToolChoice::Auto,
        MessagesToolChoice::Tool { name } => RequestToolChoice::Named(name),
        MessagesToolChoice::None => RequestToolChoice::None,
    });
    common::drop_tools_for_none(&mut declared, &choice);
    common::check_tools(&mut declared)?;
    let (declared, tool_choice) = common::apply_tool_choice(declared, choice, thinking)?;
    let tools = common::finish_tools(declared)?;
    announce_tools(&mut messages, announced, &tools.tools);
    let stop = req.stop_sequences.unwrap_or_default();
    common::check_stop_list(&stop)?;

    common::check_temperature(req.temperature)?;
    common::check_top_p(req.top_p)?;
    let bound = options.max_tokens_upper_bound(thinking);
    if req.max_tokens == Some(0) {
        common::check_max_tokens(Some(0), bound)?;
    }
    let max_tokens = req.max_tokens.map(|m| m.min(bound));

    Ok(common::assemble(
        Assembly {
            version,
            thinking,
            effort,
            messages,
            tools: tools.tools,
            tool_choice,
            response_format: ResponseFormat::Text,
            json_constraint: None,
            max_tokens,
            temperature: req.temperature,
            top_p: req.top_p,
            logprobs: false,
            top_logprobs: None,
            seed: None,
            stop,
            stream: req.stream.unwrap_or(false),
        },
        options,
    ))
}

/// Give each system message that holds `tool_addition` blocks the definitions of the tools it
/// names, among those the request keeps (`tool_choice` may have removed some). A system message
/// left with no text, image or tool is dropped.
fn announce_tools(
    messages: &mut Vec<Message>,
    announced: Vec<(usize, Vec<String>)>,
    tools: &[ToolDefinition],
) {
    let mut emptied = Vec::new();
    for (index, names) in announced {
        let Some(Message::System(system)) = messages.get_mut(index) else {
            continue;
        };
        let defs: Vec<ToolDefinition> = names
            .iter()
            .filter_map(|n| tools.iter().find(|t| &t.name == n).cloned())
            .collect();
        if defs.is_empty() && system.content.is_empty() && system.image_sources.is_empty() {
            emptied.push(index);
        }
        system.tools = Some(defs);
    }
    for index in emptied.into_iter().rev() {
        messages.remove(index);
    }
}

struct Msg {
    role: Role,
    content: Vec<MessagesContentBlock>,
}

fn flush_user(texts: &mut Vec<String>, messages: &mut Vec<Message>, image_token: &str, role: Role) {
    if texts.is_empty() {
        return;
    }
    let text = ImageText::plain(texts.join("\n\n"));
    texts.clear();
    let msg = match role {
        Role::System => Message::System(SystemMessage::from_text(text, Vec::new(), image_token)),
        _ => Message::User(UserMessage::from_text(text, Vec::new(), image_token)),
    };
    messages.push(msg);
}
