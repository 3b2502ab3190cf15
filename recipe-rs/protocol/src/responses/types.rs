//! The Responses request body as serde reads it (wire types only). Input items and tools are
//! kept as JSON values, but their shapes are checked where the body is read (see
//! [`super::items`] and [`super::shapes`]).

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::items::check_item;
use super::shapes::{check_tool_choice_shape, check_tool_shape};
use crate::common::RequestEffort;

#[derive(Debug, Deserialize)]
#[serde(rename = "ResponsesRequest")]
pub struct ResponsesRequest {
    pub model: String,
    #[serde(default, deserialize_with = "de_input")]
    pub input: Option<ResponsesInput>,
    #[serde(default)]
    pub instructions: Option<String>,
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_p: Option<f32>,
    #[serde(default)]
    pub top_logprobs: Option<u8>,
    #[serde(default)]
    pub reasoning: Option<ResponsesReasoningConfig>,
    #[serde(default, deserialize_with = "de_tools")]
    pub tools: Option<Vec<Value>>,
    #[serde(default, deserialize_with = "de_tool_choice")]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub text: Option<ResponsesTextConfig>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub user: Option<String>,
    /// Raw JSON of the echoed settings.
    #[serde(skip)]
    pub raw_reasoning: Option<Value>,
    #[serde(skip)]
    pub raw_text: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename = "ResponsesReasoningConfig")]
pub struct ResponsesReasoningConfig {
    pub effort: Option<RequestEffort>,
    /// Read (and type-checked) but not used.
    #[serde(rename = "summary")]
    _summary: Option<ReasoningSummary>,
    #[serde(rename = "generate_summary")]
    _generate_summary: Option<ReasoningSummary>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ReasoningSummary {
    Auto,
    Concise,
    Detailed,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum TextVerbosity {
    Low,
    Medium,
    High,
}

/// A present `format` must be a format object (`null` is a shape error).
fn de_text_format<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<ResponsesTextFormat>, D::Error> {
    ResponsesTextFormat::deserialize(d).map(Some)
}

#[derive(Debug, Deserialize)]
#[serde(rename = "ResponsesTextConfig")]
pub struct ResponsesTextConfig {
    #[serde(default, deserialize_with = "de_text_format")]
    pub format: Option<ResponsesTextFormat>,
    /// Read (and type-checked) but not used.
    #[serde(rename = "verbosity")]
    _verbosity: Option<TextVerbosity>,
}

#[derive(Debug, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename = "ResponsesTextFormat"
)]
pub enum ResponsesTextFormat {
    Text,
    JsonSchema {
        name: String,
        schema: Value,
        #[serde(default)]
        description: Option<String>,
        #[serde(default)]
        strict: Option<bool>,
    },
    JsonObject,
}

#[derive(Debug)]
pub enum ResponsesInput {
    Text(String),
    Items(Vec<Value>),
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

/// The tool choice, checked where it is read (see `de_tools`).
fn de_tool_choice<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    let choice = Option::<Value>::deserialize(d)?;
    if let Some(c) = &choice {
        check_tool_choice_shape(c).map_err(serde::de::Error::custom)?;
    }
    Ok(choice)
}

fn de_input<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ResponsesInput>, D::Error> {
    use serde::de::Error;
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(ResponsesInput::Text(s))),
        Value::Array(items) => {
            for item in &items {
                check_item(item).map_err(D::Error::custom)?;
            }
            Ok(Some(ResponsesInput::Items(items)))
        }
        _ => Err(D::Error::custom(
            "input should be a string or a list of input items",
        )),
    }
}
