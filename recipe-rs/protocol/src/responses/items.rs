//! Responses `input` items: read from JSON values one by one (unknown item types are skipped,
//! so one typed enum cannot describe them), each into an [`Item`].

use serde::{Deserialize, Deserializer};
use serde_json::Value;

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Role {
    User,
    Assistant,
    System,
    Developer,
}

#[derive(Debug, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename = "ResponsesContentBlock"
)]
pub(super) enum ResponsesContentBlock {
    InputText {
        text: String,
    },
    OutputText {
        text: String,
    },
    InputImage {
        #[serde(default)]
        image_url: Option<String>,
        #[serde(default)]
        file_id: Option<String>,
        #[serde(default)]
        detail: Option<crate::chat::Detail>,
    },
    InputFile {},
}

#[derive(Debug)]
pub(super) enum Content {
    Text(String),
    Blocks(Vec<ResponsesContentBlock>),
}

fn content_of(v: Value) -> Result<Content, String> {
    match v {
        Value::String(s) => Ok(Content::Text(s)),
        v @ Value::Array(_) => serde_json::from_value(v)
            .map(Content::Blocks)
            .map_err(|e| e.to_string()),
        _ => Err("content should be a string or a list of content blocks".to_owned()),
    }
}

/// Parts of a function call output (no `output_text`).
// The variant names are the wire tags (`input_text`, `input_image`, ...).
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum ResponsesToolCallOutputItem {
    InputText {
        text: String,
    },
    InputImage {
        #[serde(default)]
        image_url: Option<String>,
        #[serde(default)]
        file_id: Option<String>,
        #[serde(default)]
        detail: Option<crate::chat::Detail>,
    },
    InputFile {},
}

fn output_of(v: Value) -> Result<Content, String> {
    match v {
        Value::String(s) => Ok(Content::Text(s)),
        v @ Value::Array(_) => serde_json::from_value::<Vec<ResponsesToolCallOutputItem>>(v)
            .map(|parts| {
                Content::Blocks(
                    parts
                        .into_iter()
                        .map(|p| match p {
                            ResponsesToolCallOutputItem::InputText { text } => {
                                ResponsesContentBlock::InputText { text }
                            }
                            ResponsesToolCallOutputItem::InputImage {
                                image_url,
                                file_id,
                                detail,
                            } => ResponsesContentBlock::InputImage {
                                image_url,
                                file_id,
                                detail,
                            },
                            ResponsesToolCallOutputItem::InputFile {} => {
                                ResponsesContentBlock::InputFile {}
                            }
                        })
                        .collect(),
                )
            })
            .map_err(|e| e.to_string()),
        _ => Err("output should be a string or a list of output content parts".to_owned()),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct MessageItem {
    role: Role,
    content: Value,
}

#[derive(Debug, Deserialize)]
pub(super) struct FunctionCallItem {
    pub(super) call_id: String,
    pub(super) name: String,
    pub(super) arguments: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct FunctionCallOutputItem {
    call_id: Option<String>,
    output: Value,
}

/// A call of a custom (free-text) tool such as `apply_patch`: its text becomes the arguments
/// `{"input": …}` of an ordinary tool call.
#[derive(Debug, Deserialize)]
pub(super) struct CustomToolCallItem {
    call_id: String,
    name: String,
    input: String,
}

/// The output of a custom tool call. Unlike a function call output it must name its call, and
/// its `output` may be left out or null (no text).
#[derive(Debug, Deserialize)]
pub(super) struct CustomToolCallOutputItem {
    call_id: String,
    #[serde(default, deserialize_with = "de_optional_output")]
    output: Option<Content>,
}

fn de_optional_output<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Content>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        v => output_of(v).map(Some).map_err(serde::de::Error::custom),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct ResponsesReasoningContent {
    text: String,
}

#[derive(Debug, Deserialize)]
pub(super) struct ReasoningItem {
    #[serde(default)]
    content: Option<Vec<ResponsesReasoningContent>>,
}

pub(super) enum Item {
    Message(Role, Content),
    FunctionCall(FunctionCallItem),
    /// An output may name no call (`call_id` missing or null).
    FunctionCallOutput(Option<String>, Content),
    /// A custom tool call's output: its call is looked up before its parts are read (a function
    /// call output reads its parts first).
    CustomToolCallOutput(String, Content),
    Reasoning(String),
    /// An item that adds nothing but ends a run of function calls (a reasoning item with a
    /// summary only, a web search call): calls before it must be answered by then.
    Break,
    Skip,
}

pub(super) fn parse_item(item: Value) -> Result<Item, String> {
    let Value::Object(obj) = &item else {
        return Err("invalid input item".to_owned());
    };
    if let Some(t) = obj.get("type").filter(|t| !t.is_string()) {
        return Err(format!(
            "invalid type: {}, expected variant identifier",
            crate::strict::unexpected(t)
        ));
    }
    let ty = obj.get("type").and_then(Value::as_str).map(str::to_owned);
    match ty.as_deref() {
        None | Some("message") => {
            if ty.is_none() && !obj.contains_key("role") {
                return Err("invalid input item".to_owned());
            }
            let m: MessageItem = serde_json::from_value(item).map_err(|e| e.to_string())?;
            Ok(Item::Message(m.role, content_of(m.content)?))
        }
        Some("function_call") => {
            let f: FunctionCallItem = serde_json::from_value(item).map_err(|e| e.to_string())?;
            Ok(Item::FunctionCall(f))
        }
        Some("function_call_output") => {
            let f: FunctionCallOutputItem =
                serde_json::from_value(item).map_err(|e| e.to_string())?;
            let output = output_of(f.output)?;
            Ok(Item::FunctionCallOutput(f.call_id, output))
        }
        Some("custom_tool_call") => {
            let c: CustomToolCallItem = serde_json::from_value(item).map_err(|e| e.to_string())?;
            let arguments = serde_json::json!({ "input": c.input }).to_string();
            Ok(Item::FunctionCall(FunctionCallItem {
                call_id: c.call_id,
                name: c.name,
                arguments,
            }))
        }
        Some("custom_tool_call_output") => {
            let c: CustomToolCallOutputItem =
                serde_json::from_value(item).map_err(|e| e.to_string())?;
            let output = c.output.unwrap_or_else(|| Content::Text(String::new()));
            Ok(Item::CustomToolCallOutput(c.call_id, output))
        }
        Some("reasoning") => {
            let r: ReasoningItem = serde_json::from_value(item).map_err(|e| e.to_string())?;
            // A reasoning item without content (a summary only) carries nothing over.
            if r.content.is_none() {
                return Ok(Item::Break);
            }
            let text = r
                .content
                .unwrap_or_default()
                .into_iter()
                .map(|t| t.text)
                .collect::<Vec<_>>()
                .join("\n\n");
            Ok(Item::Reasoning(text))
        }
        Some("web_search_call") => Ok(Item::Break),
        Some(_) => Ok(Item::Skip),
    }
}
