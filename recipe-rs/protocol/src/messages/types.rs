//! The Messages request body as serde reads it (wire types only; conversion is in
//! `convert.rs`). Tools are kept as JSON values, their shapes checked where they are read (see
//! [`super::shapes`]).

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::shapes::check_tool_shape;
use crate::common::RequestEffort;

#[derive(Debug, Deserialize)]
#[serde(rename = "MessagesRequest")]
pub struct MessagesRequest {
    pub model: String,
    #[serde(deserialize_with = "crate::body::de_prepared_list")]
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
    Auto {
        #[serde(default)]
        disable_parallel_tool_use: Option<bool>,
    },
    Any {
        #[serde(default)]
        disable_parallel_tool_use: Option<bool>,
    },
    Tool {
        name: String,
        #[serde(default)]
        disable_parallel_tool_use: Option<bool>,
    },
    None,
}

impl MessagesToolChoice {
    /// Whether several tool calls may come in one answer (`disable_parallel_tool_use`
    /// negated; `None`: not said).
    pub fn parallel_tool_calls(&self) -> Option<bool> {
        match self {
            MessagesToolChoice::Auto {
                disable_parallel_tool_use: d,
            }
            | MessagesToolChoice::Any {
                disable_parallel_tool_use: d,
            }
            | MessagesToolChoice::Tool {
                disable_parallel_tool_use: d,
                ..
            } => d.map(|d| !d),
            MessagesToolChoice::None => None,
        }
    }
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
    pub(super) fn split(self) -> (Role, Vec<MessagesContentBlock>) {
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

/// Tools are kept as values, but their shape is checked where the field is read, so a broken
/// tool is reported in the body's member order (as a typed field would be).
fn de_tools<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<Value>>, D::Error> {
    let tools = Option::<Vec<Value>>::deserialize(d)?;
    for tool in tools.iter().flatten() {
        check_tool_shape(tool).map_err(serde::de::Error::custom)?;
    }
    Ok(tools)
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
    pub(super) fn as_str(self) -> &'static str {
        match self {
            // `image/jpg` is written out under its registered name.
            Self::Jpeg | Self::Jpg => "image/jpeg",
            Self::Png => "image/png",
            Self::Gif => "image/gif",
            Self::Webp => "image/webp",
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
