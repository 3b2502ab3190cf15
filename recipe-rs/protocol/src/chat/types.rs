//! The Chat Completions request body as serde reads it (wire types only; conversion is in
//! `convert.rs`).

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use recipe_core::ImageDetail;

use crate::body::de::StringOrList;
use crate::common::RequestEffort;

#[derive(Debug, Deserialize)]
#[serde(rename = "ChatCompletionRequest")]
pub struct ChatCompletionRequest {
    #[serde(deserialize_with = "crate::body::de_prepared_list")]
    pub messages: Vec<ChatCompletionRequestMessage>,
    pub model: String,
    #[serde(default)]
    pub frequency_penalty: Option<f32>,
    #[serde(default)]
    pub presence_penalty: Option<f32>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub n: Option<u8>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_p: Option<f32>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub logprobs: Option<bool>,
    #[serde(default)]
    pub top_logprobs: Option<u8>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<ChatCompletionStreamOptions>,
    #[serde(default, deserialize_with = "de_stop")]
    pub stop: Option<Stop>,
    #[serde(default)]
    pub tools: Option<Vec<ChatCompletionTool>>,
    #[serde(default, deserialize_with = "de_tool_choice")]
    pub tool_choice: Option<ChatToolChoice>,
    #[serde(default)]
    pub response_format: Option<ChatCompletionResponseFormat>,
    #[serde(default)]
    pub thinking: Option<ChatCompletionThinking>,
    #[serde(default)]
    pub reasoning_effort: Option<RequestEffort>,
    /// Read (a boolean) and otherwise ignored.
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename = "ChatCompletionStreamOptions")]
pub struct ChatCompletionStreamOptions {
    pub include_usage: Option<bool>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingType {
    Adaptive,
    Enabled,
    Disabled,
}

#[derive(Debug, Deserialize)]
#[serde(rename = "ChatCompletionThinking")]
pub struct ChatCompletionThinking {
    #[serde(rename = "type")]
    pub kind: ThinkingType,
    /// Read (and type-checked) but not used.
    #[serde(rename = "budget_tokens")]
    _budget_tokens: Option<u64>,
}

#[derive(Debug)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

fn de_stop<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Stop>, D::Error> {
    use serde::de::Error;
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(Stop::One(s))),
        v @ Value::Array(_) => serde_json::from_value(v)
            .map(|l| Some(Stop::Many(l)))
            .map_err(D::Error::custom),
        _ => Err(D::Error::custom("expected a string or a list")),
    }
}

#[derive(Debug, Deserialize)]
#[serde(
    tag = "role",
    rename_all = "snake_case",
    rename = "ChatCompletionRequestMessage"
)]
pub enum ChatCompletionRequestMessage {
    System {
        #[serde(deserialize_with = "de_content")]
        content: ChatContent,
        #[serde(default)]
        name: Option<String>,
    },
    User {
        #[serde(deserialize_with = "de_content")]
        content: ChatContent,
        #[serde(default)]
        name: Option<String>,
    },
    Assistant {
        #[serde(default, deserialize_with = "de_opt_content")]
        content: Option<ChatContent>,
        #[serde(default)]
        reasoning_content: Option<String>,
        #[serde(default)]
        tool_calls: Option<Vec<ChatCompletionRequestToolCall>>,
        #[serde(default)]
        prefix: Option<bool>,
        #[serde(default)]
        name: Option<String>,
    },
    Tool {
        #[serde(deserialize_with = "de_content")]
        content: ChatContent,
        tool_call_id: String,
    },
    LatestReminder {
        content: String,
    },
}

pub type ChatContent = StringOrList<ChatCompletionRequestContentBlock>;

const CONTENT_SHAPE: &str = "content should be a string or a list";

fn de_content<'de, D: Deserializer<'de>>(d: D) -> Result<ChatContent, D::Error> {
    StringOrList::deserialize_with(d, CONTENT_SHAPE)
}

fn de_opt_content<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ChatContent>, D::Error> {
    use serde::de::Error;
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(StringOrList::String(s))),
        v @ Value::Array(_) => serde_json::from_value(v)
            .map(|l| Some(StringOrList::List(l)))
            .map_err(D::Error::custom),
        _ => Err(D::Error::custom(CONTENT_SHAPE)),
    }
}

#[derive(Debug, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename = "ChatCompletionRequestContentBlock"
)]
pub enum ChatCompletionRequestContentBlock {
    Text {
        text: String,
    },
    ImageUrl {
        image_url: ChatCompletionImageUrl,
    },
    File {
        #[serde(default)]
        file: Option<Value>,
    },
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Detail {
    Low,
    High,
    Original,
    Auto,
}

impl From<Detail> for ImageDetail {
    fn from(d: Detail) -> Self {
        match d {
            Detail::Low => ImageDetail::Low,
            Detail::High => ImageDetail::High,
            Detail::Original => ImageDetail::Original,
            Detail::Auto => ImageDetail::Auto,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename = "ChatCompletionImageUrl")]
pub struct ChatCompletionImageUrl {
    pub url: String,
    #[serde(default)]
    pub detail: Option<Detail>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FunctionType {
    Function,
}

#[derive(Debug, Deserialize)]
#[serde(rename = "ChatCompletionRequestToolCall")]
pub struct ChatCompletionRequestToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: FunctionType,
    pub function: ChatCompletionRequestFunctionCall,
}

#[derive(Debug, Deserialize)]
#[serde(rename = "ChatCompletionRequestFunctionCall")]
pub struct ChatCompletionRequestFunctionCall {
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename = "ChatCompletionTool")]
pub struct ChatCompletionTool {
    #[serde(rename = "type")]
    pub kind: FunctionType,
    pub function: ChatCompletionFunctionDefinition,
}

#[derive(Debug, Deserialize)]
#[serde(rename = "ChatCompletionFunctionDefinition")]
pub struct ChatCompletionFunctionDefinition {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Option<Value>,
    pub strict: Option<bool>,
}

#[derive(Debug)]
pub enum ChatToolChoice {
    None,
    Auto,
    Required,
    Function(String),
}

#[derive(Debug, Deserialize)]
#[serde(rename = "ChatCompletionToolChoiceFunction")]
pub struct ChatCompletionToolChoiceFunction {
    pub name: String,
}

fn de_tool_choice<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ChatToolChoice>, D::Error> {
    use serde::de::Error;
    let v = Value::deserialize(d)?;
    match v {
        Value::Null => Ok(None),
        Value::String(s) => match s.as_str() {
            "none" => Ok(Some(ChatToolChoice::None)),
            "auto" => Ok(Some(ChatToolChoice::Auto)),
            "required" => Ok(Some(ChatToolChoice::Required)),
            _ => Err(D::Error::custom(
                "expected one of `none`, `auto`, `required` or a tool",
            )),
        },
        Value::Object(mut o) => {
            if !o.contains_key("type") {
                return Err(D::Error::custom(
                    "expected one of `none`, `auto`, `required` or a tool",
                ));
            }
            let ty = o.remove("type").unwrap_or(Value::Null);
            serde_json::from_value::<FunctionType>(ty)
                .map_err(|e| D::Error::custom(format!("field `type`: {e}")))?;
            let f = o.remove("function").unwrap_or(Value::Null);
            let f: ChatCompletionToolChoiceFunction = serde_json::from_value(f)
                .map_err(|e| D::Error::custom(format!("field `function`: {e}")))?;
            Ok(Some(ChatToolChoice::Function(f.name)))
        }
        _ => Err(D::Error::custom(
            "expected one of `none`, `auto`, `required` or a tool",
        )),
    }
}

#[derive(Debug, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename = "ChatCompletionResponseFormat"
)]
pub enum ChatCompletionResponseFormat {
    JsonObject,
    JsonSchema {
        json_schema: ChatCompletionResponseFormatJsonSchema,
    },
    Regex {
        regex: String,
    },
    Text,
}

#[derive(Debug, Deserialize)]
#[serde(rename = "ChatCompletionResponseFormatJsonSchema")]
pub struct ChatCompletionResponseFormatJsonSchema {
    pub name: Option<String>,
    pub schema: Value,
    pub strict: Option<bool>,
}
