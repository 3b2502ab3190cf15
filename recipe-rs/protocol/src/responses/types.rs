//! The Responses request body as serde reads it (wire types only). Input items and tools are
//! kept as JSON values, but their shapes are checked where the body is read (see
//! [`super::items`] and [`super::shapes`]).

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::items::{parse_item, Item};
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
    /// Read only when it is a boolean (the official package ignores the field, whatever its
    /// type): `false` allows one tool call per answer.
    #[serde(default)]
    pub parallel_tool_calls: Option<Value>,
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

pub enum ResponsesInput {
    Text(String),
    Items(Vec<InputItem>),
}

impl std::fmt::Debug for ResponsesInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResponsesInput::Text(t) => f.debug_tuple("Text").field(t).finish(),
            ResponsesInput::Items(items) => write!(f, "Items({} items)", items.len()),
        }
    }
}

/// One `input` item, read (and so checked) when the request is read.
pub struct InputItem(pub(super) Item);

impl<'de> Deserialize<'de> for InputItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let item = parse_item(Value::deserialize(d)?).map_err(serde::de::Error::custom)?;
        Ok(InputItem(item))
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

/// The tool choice, checked where it is read (see `de_tools`).
fn de_tool_choice<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    let choice = Option::<Value>::deserialize(d)?;
    if let Some(c) = &choice {
        check_tool_choice_shape(c).map_err(serde::de::Error::custom)?;
    }
    Ok(choice)
}

/// `input`: a string, or items read one at a time (each as a value, then typed), so the item
/// list never exists as a whole JSON value. The first item that fails names the error. When
/// the body was read from text, the items were typed then (see `ResponsesRequest::from_slice`)
/// and the field holds `null` in their place.
fn de_input<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ResponsesInput>, D::Error> {
    d.deserialize_any(InputVisitor)
}

struct InputVisitor;

const INPUT_SHAPE: &str = "input should be a string or a list of input items";

impl<'de> serde::de::Visitor<'de> for InputVisitor {
    type Value = Option<ResponsesInput>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string or a list of input items")
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        match crate::body::take_prepared::<InputItem>() {
            Some(items) => items
                .map(|i| Some(ResponsesInput::Items(i)))
                .map_err(E::custom),
            None => Ok(None),
        }
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(ResponsesInput::Text(v.to_owned())))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(ResponsesInput::Text(v)))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element::<Value>()? {
            let item = parse_item(item).map_err(serde::de::Error::custom)?;
            items.push(InputItem(item));
        }
        Ok(Some(ResponsesInput::Items(items)))
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Err(E::custom(INPUT_SHAPE))
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Err(E::custom(INPUT_SHAPE))
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Err(E::custom(INPUT_SHAPE))
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Err(E::custom(INPUT_SHAPE))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(serde::de::Error::custom(INPUT_SHAPE))
    }
}
