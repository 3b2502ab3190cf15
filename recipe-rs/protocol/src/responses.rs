//! OpenAI Responses requests.
//!
//! `input` items are read from JSON values by hand: unknown item types are skipped, so a typed
//! enum cannot describe them. Tools are also read by hand (namespaces, custom and server tools).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use recipe_core::profile::DeveloperMessage;
use recipe_core::{
    AssistantMessage, ImageDetail, ImageText, Message, ModelVersion, ResponseFormat, ResponsesEcho,
    SpecialToken, SystemMessage, ToolCall, ToolMessage, UserMessage,
};

use crate::common::{
    self, Assembly, DeclaredTool, ImagePart, Part, RequestEffort, RequestToolChoice,
};
use crate::error::{reject, ConvResult, RequestError};
use crate::options::{ConversionOptions, WebSearchBehavior};
use crate::request::ConversationRequest;

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

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Role {
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
enum ResponsesContentBlock {
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
enum Content {
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
enum ResponsesToolCallOutputItem {
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
struct MessageItem {
    role: Role,
    content: Value,
}

#[derive(Debug, Deserialize)]
struct FunctionCallItem {
    call_id: String,
    name: String,
    arguments: String,
}

#[derive(Debug, Deserialize)]
struct FunctionCallOutputItem {
    call_id: Option<String>,
    output: Value,
}

/// A call of a custom (free-text) tool such as `apply_patch`: its text becomes the arguments
/// `{"input": …}` of an ordinary tool call.
#[derive(Debug, Deserialize)]
struct CustomToolCallItem {
    call_id: String,
    name: String,
    input: String,
}

/// The output of a custom tool call. Unlike a function call output it must name its call, and
/// its `output` may be left out or null (no text).
#[derive(Debug, Deserialize)]
struct CustomToolCallOutputItem {
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
struct ResponsesReasoningContent {
    text: String,
}

#[derive(Debug, Deserialize)]
struct ReasoningItem {
    #[serde(default)]
    content: Option<Vec<ResponsesReasoningContent>>,
}

enum Item {
    Message(Role, Content),
    FunctionCall(FunctionCallItem),
    /// An output may name no call (`call_id` missing or null).
    FunctionCallOutput(Option<String>, Content),
    Reasoning(String),
    /// An item that adds nothing but ends a run of function calls (a reasoning item with a
    /// summary only, a web search call): calls before it must be answered by then.
    Break,
    Skip,
}

fn parse_item(item: Value) -> Result<Item, String> {
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
            Ok(Item::FunctionCallOutput(Some(c.call_id), output))
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

fn check_item(item: &Value) -> Result<(), String> {
    parse_item(item.clone()).map(|_| ())
}

impl ResponsesRequest {
    pub fn from_value(v: Value) -> Result<Self, RequestError> {
        let raw_reasoning = v.get("reasoning").filter(|r| !r.is_null()).cloned();
        let raw_text = v.get("text").filter(|r| !r.is_null()).cloned();
        let mut req: ResponsesRequest = crate::body::from_value(v)?;
        req.raw_reasoning = raw_reasoning;
        req.raw_text = raw_text;
        Ok(req)
    }

    pub fn from_slice(bytes: &[u8]) -> Result<Self, RequestError> {
        Self::from_value(crate::body::parse_json_keeping(bytes, Self::body_fields())?)
    }

    /// The top-level body fields this request reads (`reasoning` and `text` are echoed back as
    /// given); others are ignored.
    pub fn body_fields() -> &'static [&'static str] {
        crate::body::struct_fields::<Self>()
    }

    /// The request settings a Responses response reports back.
    pub fn echo(&self) -> ResponsesEcho {
        ResponsesEcho {
            instructions: self.instructions.clone(),
            max_output_tokens: self.max_output_tokens.map(u64::from),
            temperature: self.temperature.map(f64::from).unwrap_or(1.0),
            top_p: self.top_p.map(f64::from).unwrap_or(1.0),
            top_logprobs: self.top_logprobs.map(u64::from).unwrap_or(0),
            user: self.user.clone(),
            reasoning: self.raw_reasoning.clone(),
            text: self.raw_text.clone(),
            tool_choice: self.tool_choice.clone().filter(|v| !v.is_null()),
            tools: self
                .tools
                .as_ref()
                .map(|tools| Value::Array(echo_tools(tools))),
        }
    }

    /// `"ns::name" → (ns, name)` for every function declared inside a namespace tool.
    pub fn namespace_tool_map(
        &self,
        options: &ConversionOptions,
    ) -> ConvResult<BTreeMap<String, (String, String)>> {
        let version = common::resolve_model(options, &self.model)?;
        let (_, map) =
            declared_tools(self.tools.as_deref().unwrap_or(&[]), options, version, true)?;
        Ok(map)
    }

    pub fn convert(self, options: &ConversionOptions) -> ConvResult<ConversationRequest> {
        let echo = self.echo();
        let mut converted = convert(self, options)?;
        converted.responses_echo = Some(echo);
        Ok(converted)
    }
}

/// The declared tools as a Responses response object reports them: each kind in its own
/// fixed shape (absent fields as `null`), and the kinds the response never lists
/// (`web_search_preview`, `file_search`, a bare `apply_patch`) left out.
fn echo_tools(tools: &[Value]) -> Vec<Value> {
    fn field(obj: &serde_json::Map<String, Value>, key: &str) -> Value {
        obj.get(key).cloned().unwrap_or(Value::Null)
    }
    fn function(obj: &serde_json::Map<String, Value>) -> Value {
        serde_json::json!({
            "type": "function",
            "name": field(obj, "name"),
            "description": field(obj, "description"),
            "parameters": field(obj, "parameters"),
            "strict": field(obj, "strict"),
        })
    }
    let mut out = Vec::new();
    for tool in tools {
        let Some(obj) = tool.as_object() else {
            continue;
        };
        match obj.get("type").and_then(Value::as_str) {
            Some("function") => out.push(function(obj)),
            Some("namespace") => {
                let inner: Vec<Value> = obj
                    .get("tools")
                    .and_then(Value::as_array)
                    .map(|ts| {
                        ts.iter()
                            .filter_map(Value::as_object)
                            .map(function)
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(serde_json::json!({
                    "type": "namespace",
                    "name": field(obj, "name"),
                    "description": field(obj, "description"),
                    "tools": inner,
                }));
            }
            Some("custom") => {
                out.push(serde_json::json!({"type": "custom", "name": field(obj, "name")}))
            }
            Some("web_search") => {
                let location = match obj.get("user_location") {
                    Some(Value::Object(loc)) => serde_json::json!({
                        "city": field(loc, "city"),
                        "country": field(loc, "country"),
                        "region": field(loc, "region"),
                        "timezone": field(loc, "timezone"),
                    }),
                    _ => Value::Null,
                };
                out.push(serde_json::json!({
                    "type": "web_search",
                    "search_context_size": field(obj, "search_context_size"),
                    "user_location": location,
                }));
            }
            _ => {}
        }
    }
    out
}

/// The fixed function tool that stands in for the `apply_patch` custom tool (its text differs
/// slightly between model versions).
/// Shape errors of a declared tool, as a typed (internally tagged) tool list reports them.
fn check_tool_shape(tool: &Value) -> Result<(), String> {
    use crate::strict::unexpected;
    let obj = match tool {
        Value::Object(obj) => obj,
        // A list is read as the tag followed by the fields in order.
        Value::Array(items) => {
            return match items.first() {
                None => Err("missing field `type`".to_owned()),
                Some(Value::String(t)) => match t.as_str() {
                    "function" => Err(format!(
                        "invalid length {}, expected struct ResponsesFunctionTool with 4 elements",
                        items.len() - 1
                    )),
                    _ => Ok(()),
                },
                Some(v) => Err(format!(
                    "invalid type: {}, expected variant identifier",
                    unexpected(v)
                )),
            };
        }
        _ => {
            return Err(format!(
                "invalid type: {}, expected internally tagged enum ResponsesTool",
                unexpected(tool)
            ))
        }
    };
    let ty = match obj.get("type") {
        None => return Err("missing field `type`".to_owned()),
        Some(Value::String(s)) => s.as_str(),
        Some(v) => {
            return Err(format!(
                "invalid type: {}, expected variant identifier",
                unexpected(v)
            ))
        }
    };
    let string_field = |key: &str, required: bool| -> Result<(), String> {
        match obj.get(key) {
            None if required => Err(format!("missing field `{key}`")),
            None | Some(Value::Null) if !required => Ok(()),
            Some(Value::String(_)) => Ok(()),
            Some(v) => Err(format!(
                "invalid type: {}, expected a string",
                unexpected(v)
            )),
            None => Err(format!("missing field `{key}`")),
        }
    };
    let bool_field = |key: &str| -> Result<(), String> {
        match obj.get(key) {
            None | Some(Value::Null) | Some(Value::Bool(_)) => Ok(()),
            Some(v) => Err(format!(
                "invalid type: {}, expected a boolean",
                unexpected(v)
            )),
        }
    };
    match ty {
        "function" => {
            string_field("name", true)?;
            string_field("description", false)?;
            bool_field("strict")?;
        }
        "namespace" => {
            string_field("name", true)?;
            string_field("description", false)?;
            match obj.get("tools") {
                None => return Err("missing field `tools`".to_owned()),
                Some(Value::Array(items)) => {
                    for t in items {
                        if let Value::Array(seq) = t {
                            return match seq.first() {
                                None => Err("missing field `type`".to_owned()),
                                Some(Value::String(k)) if k == "function" || k == "custom" => Err(format!(
                                    "invalid length {}, expected struct ResponsesFunctionTool with 4 elements",
                                    seq.len() - 1
                                )),
                                Some(Value::String(k)) => Err(format!("unknown variant `{k}`, expected `function` or `custom`")),
                                Some(v) => Err(format!("invalid type: {}, expected variant identifier", unexpected(v))),
                            };
                        }
                        if !t.is_object() {
                            return Err(format!(
                                "invalid type: {}, expected internally tagged enum ResponsesNamespaceTool",
                                unexpected(t)
                            ));
                        }
                        match t.get("type") {
                            Some(Value::String(k)) if k == "function" || k == "custom" => {}
                            // Variant indexes: 0 is `function`, 1 is `custom`.
                            Some(Value::Number(n)) if n.as_u64().is_some() => {
                                let k = n.as_u64().unwrap_or(0);
                                if k > 1 {
                                    return Err(format!("invalid value: integer `{k}`, expected variant index 0 <= i < 2"));
                                }
                                let mut inner = t.clone();
                                if let Some(o) = inner.as_object_mut() {
                                    o.insert(
                                        "type".into(),
                                        Value::String(
                                            if k == 0 { "function" } else { "custom" }.into(),
                                        ),
                                    );
                                }
                                check_tool_shape(&inner)?;
                                continue;
                            }
                            Some(Value::String(k)) => {
                                return Err(format!(
                                    "unknown variant `{k}`, expected `function` or `custom`"
                                ))
                            }
                            None => return Err("missing field `type`".to_owned()),
                            Some(v) => {
                                return Err(format!(
                                    "invalid type: {}, expected variant identifier",
                                    unexpected(v)
                                ))
                            }
                        }
                        check_tool_shape(t)?;
                    }
                }
                Some(v) => {
                    return Err(format!(
                        "invalid type: {}, expected a sequence",
                        unexpected(v)
                    ))
                }
            }
        }
        "custom" => string_field("name", true)?,
        _ => {}
    }
    Ok(())
}

fn check_tool_choice_shape(choice: &Value) -> Result<(), String> {
    const GENERIC: &str = "expected one of `none`, `auto`, `required` or a tool choice object";
    match choice {
        Value::Null => Ok(()),
        Value::String(s) if ["none", "auto", "required"].contains(&s.as_str()) => Ok(()),
        Value::Object(o) => match o.get("type") {
            Some(Value::String(t)) if t == "function" || t == "custom" => match o.get("name") {
                None => Err("missing field `name`".to_owned()),
                Some(Value::String(_)) => Ok(()),
                Some(v) => Err(format!("invalid type: {}, expected a string", crate::strict::unexpected(v))),
            },
            Some(Value::String(t)) if ["web_search", "web_search_2025_08_26"].contains(&t.as_str()) => Ok(()),
            Some(Value::String(t)) => Err(format!(
                "unknown variant `{t}`, expected one of `function`, `web_search`, `web_search_2025_08_26`, `custom`"
            )),
            Some(v) => Err(format!("invalid type: {}, expected variant identifier", crate::strict::unexpected(v))),
            _ => Err(GENERIC.to_owned()),
        },
        _ => Err(GENERIC.to_owned()),
    }
}

/// Whether a `developer` message becomes a user message (otherwise a system message).
fn developer_as_user(version: ModelVersion) -> bool {
    version.profile().conversion.developer_message == DeveloperMessage::User
}

fn apply_patch_tool(version: ModelVersion) -> DeclaredTool {
    let text = match version {
        ModelVersion::DeepseekV4Pro => include_str!("../data/apply_patch_tool_v4.json"),
        ModelVersion::DeepseekV41Flash => include_str!("../data/apply_patch_tool.json"),
    };
    let data: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    DeclaredTool {
        name: "apply_patch".to_owned(),
        description: data
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned),
        parameters: data.get("parameters").cloned(),
        strict: None,
        defer_loading: false,
    }
}

fn str_field(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key).and_then(Value::as_str).map(str::to_owned)
}

type NamespaceMap = BTreeMap<String, (String, String)>;

fn function_tool(
    obj: &Map<String, Value>,
    name: String,
    description: Option<String>,
) -> DeclaredTool {
    DeclaredTool {
        name,
        description,
        parameters: obj.get("parameters").filter(|p| !p.is_null()).cloned(),
        strict: obj.get("strict").and_then(Value::as_bool),
        defer_loading: false,
    }
}

/// The function tools a request declares, and the namespace map. With `names_only`, only the
/// name checks run (what `namespace_tool_map` reports).
fn declared_tools(
    tools: &[Value],
    options: &ConversionOptions,
    version: ModelVersion,
    names_only: bool,
) -> ConvResult<(Vec<DeclaredTool>, NamespaceMap)> {
    let mut out = Vec::new();
    let mut map = NamespaceMap::new();
    for (i, tool) in tools.iter().enumerate() {
        let Some(obj) = tool.as_object() else {
            continue;
        };
        match obj.get("type").and_then(Value::as_str).unwrap_or("") {
            "function" => {
                let name = str_field(obj, "name").unwrap_or_default();
                common::check_tool_name(&name, &format!("tools[{i}].name"))?;
                out.push(function_tool(obj, name, str_field(obj, "description")));
            }
            "namespace" => {
                let ns = str_field(obj, "name").unwrap_or_default();
                common::check_tool_name(&ns, &format!("tools[{i}].name"))?;
                let ns_desc = str_field(obj, "description");
                let inner = obj
                    .get("tools")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut locals = std::collections::HashSet::new();
                for (j, t) in inner.iter().enumerate() {
                    let Some(t) = t.as_object() else { continue };
                    let kind = match t.get("type") {
                        Some(Value::String(k)) => k.as_str(),
                        Some(Value::Number(n)) if n.as_u64() == Some(0) => "function",
                        Some(Value::Number(n)) if n.as_u64() == Some(1) => "custom",
                        _ => "",
                    };
                    if kind == "custom" {
                        let name = str_field(t, "name").unwrap_or_default();
                        return reject(format!(
                            "Currently custom tools are not allowed inside a namespace. Found custom tool '{name}' in tools[{i}].tools[{j}]."
                        ));
                    }
                    if kind != "function" {
                        continue;
                    }
                    let local = str_field(t, "name").unwrap_or_default();
                    common::check_tool_name(&local, &format!("tools[{i}].tools[{j}].name"))?;
                    if !locals.insert(local.clone()) {
                        return reject("Tool names within a namespace must be unique.");
                    }
                    let rules = &version.profile().conversion;
                    let description = match (&ns_desc, str_field(t, "description")) {
                        (Some(n), d) if rules.namespace_description_prefixed && !n.is_empty() => {
                            Some(format!("{n}\n{}", d.unwrap_or_default()))
                        }
                        (_, d) => d,
                    };
                    let full = format!("{ns}{}{local}", rules.namespace_separator);
                    map.insert(full.clone(), (ns.clone(), local));
                    let tool = function_tool(t, full, description);
                    out.push(tool);
                }
            }
            "custom" => {
                let name = str_field(obj, "name").unwrap_or_default();
                if names_only {
                    continue;
                }
                if name != "apply_patch" {
                    return reject(format!(
                        "Unsupported custom tool: '{name}'. Only 'apply_patch' is supported."
                    ));
                }
                out.push(apply_patch_tool(version));
            }
            // Only the web search tool (`web_search`, `web_search_2025_08_26`) is refused; the
            // preview tool is left out even then, as the official package does.
            "web_search" | "web_search_2025_08_26"
                if !names_only && options.responses_web_search == WebSearchBehavior::Reject =>
            {
                return reject("Server tools are not supported");
            }
            _ => {}
        }
    }
    Ok((out, map))
}

fn content_parts(
    content: Content,
    path: &str,
    version: ModelVersion,
    assistant: bool,
    field: &str,
) -> ConvResult<Vec<Part>> {
    let blocks = match content {
        Content::Text(s) => return Ok(vec![Part::Text(s)]),
        Content::Blocks(b) => b,
    };
    if common::shows_images(version) {
        // Every image part needs a source before anything else about the parts is checked.
        for (j, block) in blocks.iter().enumerate() {
            let ResponsesContentBlock::InputImage {
                image_url, file_id, ..
            } = block
            else {
                continue;
            };
            if image_url.as_deref().is_some_and(|u| !u.is_empty()) {
                continue;
            }
            return reject(if file_id.is_some() {
                format!(
                    "{path}.{field}[{j}]: file_id is not supported. Pass the image as a base64 data url instead."
                )
            } else {
                format!("{path}.{field}[{j}]: input_image must have image_url or file_id")
            });
        }
    }
    let mut parts = Vec::with_capacity(blocks.len());
    for (j, block) in blocks.into_iter().enumerate() {
        match block {
            ResponsesContentBlock::InputText { text }
            | ResponsesContentBlock::OutputText { text } => parts.push(Part::Text(text)),
            ResponsesContentBlock::InputImage {
                image_url,
                file_id,
                detail,
            } => {
                if assistant && common::shows_images(version) {
                    if image_url.as_deref().is_none_or(str::is_empty) && file_id.is_none() {
                        return reject(format!(
                            "{path}.content[{j}]: input_image must have image_url or file_id"
                        ));
                    }
                    return reject(format!("{path}: Image in assistant message is unsupported"));
                }
                let detail = detail.map(ImageDetail::from).unwrap_or_default();
                // An empty URL counts as no URL.
                match (image_url.filter(|u| !u.is_empty()), file_id) {
                    (Some(url), _) => {
                        let data = match common::image_data_from_url(&url) {
                            Some(d) => d,
                            None if !common::shows_images(version) => {
                                recipe_core::ImageData::Url(url)
                            }
                            None => return reject(format!("{path}: Unsupported image_url format")),
                        };
                        parts.push(Part::Image(ImagePart { data, detail }));
                    }
                    (None, Some(_)) => {
                        if !common::shows_images(version) {
                            parts.push(Part::Text(common::UNSUPPORTED_IMAGE.to_owned()));
                        } else {
                            return reject(format!(
                                "{path}.{field}[{j}]: file_id is not supported. Pass the image as a base64 data url instead."
                            ));
                        }
                    }
                    (None, None) => {
                        if !common::shows_images(version) {
                            parts.push(Part::Text(common::UNSUPPORTED_IMAGE.to_owned()));
                        } else {
                            return reject(format!(
                                "{path}.{field}[{j}]: input_image must have image_url or file_id"
                            ));
                        }
                    }
                }
            }
            ResponsesContentBlock::InputFile {} => {
                parts.push(Part::Text("[Unsupported Document]".to_owned()))
            }
        }
    }
    Ok(parts)
}

fn convert(req: ResponsesRequest, options: &ConversionOptions) -> ConvResult<ConversationRequest> {
    let version = common::resolve_model(options, &req.model)?;
    let effort = req.reasoning.as_ref().and_then(|r| r.effort);
    let (thinking, effort) = common::resolve_thinking(None, effort, options.default_thinking_mode);

    let (declared, _) =
        declared_tools(req.tools.as_deref().unwrap_or(&[]), options, version, false)?;

    let image_token = options.special_tokens.get(SpecialToken::Image).to_owned();
    let mut messages: Vec<Message> = Vec::new();
    if let Some(instr) = req.instructions.as_ref().filter(|i| !i.is_empty()) {
        messages.push(Message::System(SystemMessage::from_text(
            ImageText::plain(instr.as_str()),
            Vec::new(),
            image_token.as_str(),
        )));
    }
    match req.input {
        None => {
            if req.instructions.as_deref().is_none_or(str::is_empty) {
                return reject("Either input or instructions must be provided");
            }
        }
        Some(ResponsesInput::Text(t)) => messages.push(Message::User(UserMessage::from_text(
            ImageText::plain(t),
            Vec::new(),
            image_token.as_str(),
        ))),
        Some(ResponsesInput::Items(items)) => {
            if items.is_empty() {
                return reject("Input items array must not be empty");
            }
            convert_items(items, version, &image_token, &mut messages)?;
        }
    }
    common::apply_reasoning_policy(
        &mut messages,
        thinking,
        options.reasoning_content_behavior,
        common::ReasoningField {
            name: "reasoning_text",
            tools_declared: !declared.is_empty(),
        },
    )?;

    let mut declared = declared;
    let choice = match req.tool_choice {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => match s.as_str() {
            "none" => Some(RequestToolChoice::None),
            "required" => Some(RequestToolChoice::Required),
            _ => Some(RequestToolChoice::Auto),
        },
        Some(Value::Object(o)) => match o.get("type").and_then(Value::as_str) {
            // A custom tool is named the same way as a function tool.
            Some("function") | Some("custom") => Some(RequestToolChoice::Named(
                str_field(&o, "name").unwrap_or_default(),
            )),
            Some("web_search") | Some("web_search_2025_08_26") => {
                if options.responses_web_search == WebSearchBehavior::Reject {
                    return reject("Server tools are not supported");
                }
                None
            }
            _ => None,
        },
        Some(_) => None,
    };
    common::drop_tools_for_none(&mut declared, &choice);
    common::check_tools(&mut declared)?;
    let (declared, tool_choice) = common::apply_tool_choice(declared, choice, thinking)?;
    // The response schema is checked (strict: normalised) before the tool list is finished.
    let strict_response_schema = match req.text.as_ref().and_then(|t| t.format.as_ref()) {
        Some(ResponsesTextFormat::JsonSchema { schema, strict, .. }) => {
            if *strict == Some(true) {
                Some(crate::strict::normalize_response_schema(schema.clone())?.to_string())
            } else {
                common::check_response_schema(schema)?;
                None
            }
        }
        _ => None,
    };

    let has_format = matches!(
        req.text.as_ref().and_then(|t| t.format.as_ref()),
        Some(ResponsesTextFormat::JsonObject) | Some(ResponsesTextFormat::JsonSchema { .. })
    );
    let is_json_object = matches!(
        req.text.as_ref().and_then(|t| t.format.as_ref()),
        Some(ResponsesTextFormat::JsonObject)
    );
    if is_json_object && !common::mentions_json(&messages) {
        return reject("Response input messages must contain the word 'json' in some form to use 'text.format' of type 'json_object'.");
    }
    let tools = common::finish_tools(declared)?;
    if tools.strict && has_format {
        return reject("response_format should not be used with tools");
    }
    let (response_format, json_constraint) = match req.text.and_then(|t| t.format) {
        None | Some(ResponsesTextFormat::Text) => (ResponseFormat::Text, None),
        Some(ResponsesTextFormat::JsonObject) => (ResponseFormat::JsonObject, None),
        Some(ResponsesTextFormat::JsonSchema { schema, .. }) => {
            let constraint = strict_response_schema.unwrap_or_else(|| schema.to_string());
            (ResponseFormat::JsonSchema(schema), Some(constraint))
        }
    };

    common::check_temperature(req.temperature)?;
    common::check_top_p(req.top_p)?;
    if req.top_logprobs.is_some_and(|t| t > 20) {
        return reject("Invalid top_logprobs value, the valid range of top_logprobs is [0, 20].");
    }
    common::check_max_tokens(
        req.max_output_tokens,
        options.max_tokens_upper_bound(thinking),
    )?;

    Ok(common::assemble(
        Assembly {
            version,
            thinking,
            effort,
            messages,
            tools: tools.tools,
            tool_choice,
            response_format,
            json_constraint,
            max_tokens: req.max_output_tokens,
            temperature: req.temperature,
            top_p: req.top_p,
            logprobs: req.top_logprobs.is_some(),
            top_logprobs: req.top_logprobs.map(u32::from),
            seed: None,
            stop: Vec::new(),
            stream: req.stream.unwrap_or(false),
        },
        options,
    ))
}

/// The function calls of the assistant turn being built and the outputs that answer them.
///
/// Call IDs are unique across the whole input and every call is answered exactly once, before the
/// next item that is neither a call nor an output (or the end of the input). When the group
/// closes, the calls on its assistant message and the tool messages after it are put in call-ID
/// order (byte order), as the official package orders them.
#[derive(Default)]
struct CallGroup {
    /// IDs of the open group's calls, in request order.
    calls: Vec<String>,
    outputs: Vec<ToolMessage>,
    seen: std::collections::HashSet<String>,
    answered: std::collections::HashSet<String>,
}

impl CallGroup {
    fn all_answered(&self) -> bool {
        self.outputs.len() == self.calls.len()
    }

    fn add_call(&mut self, id: &str) -> ConvResult<()> {
        if !self.seen.insert(id.to_owned()) {
            return reject(format!("Duplicate 'call_id': {id}."));
        }
        self.calls.push(id.to_owned());
        Ok(())
    }

    /// Whether an output for `id` may be added now.
    fn check_output(&self, id: &str) -> ConvResult<()> {
        if self.answered.contains(id) {
            return reject(format!("Duplicate tool output for call_id: {id}."));
        }
        if !self.calls.iter().any(|c| c == id) {
            return reject(format!(
                "No tool call found for tool output with call_id {id}."
            ));
        }
        Ok(())
    }

    /// Add an output that [`CallGroup::check_output`] accepted.
    fn add_output(&mut self, output: ToolMessage) {
        self.answered.extend(output.tool_call_id.clone());
        self.outputs.push(output);
    }

    /// Close the group: every call must have its output. With several unanswered calls the
    /// official package names an arbitrary one (it varies between runs); this names the first.
    fn close(&mut self, messages: &mut Vec<Message>) -> ConvResult<()> {
        if self.calls.is_empty() {
            return Ok(());
        }
        let answered = |id: &String| {
            self.outputs
                .iter()
                .any(|o| o.tool_call_id.as_ref() == Some(id))
        };
        if let Some(missing) = self.calls.iter().find(|id| !answered(id)) {
            return reject(format!("No tool output found for tool call {missing}."));
        }
        // The group's calls are on the last message (nothing else is added while it is open).
        if let Some(Message::Assistant(a)) = messages.last_mut() {
            if let Some(calls) = a.tool_calls.as_mut() {
                calls.sort_by(|x, y| x.id.cmp(&y.id));
            }
        }
        self.outputs
            .sort_by(|x, y| x.tool_call_id.cmp(&y.tool_call_id));
        messages.extend(self.outputs.drain(..).map(Message::Tool));
        self.calls.clear();
        Ok(())
    }
}

fn convert_items(
    items: Vec<Value>,
    version: ModelVersion,
    image_token: &str,
    messages: &mut Vec<Message>,
) -> ConvResult<()> {
    let mut pending_reasoning: Option<String> = None;
    let mut group = CallGroup::default();

    for (i, item) in items.into_iter().enumerate() {
        let path = format!("input[{i}]");
        let item = parse_item(item).map_err(crate::error::ConversionError::invalid)?;
        let call_id = match &item {
            Item::FunctionCall(c) => Some(c.call_id.as_str()),
            Item::FunctionCallOutput(id, _) => id.as_deref(),
            _ => None,
        };
        if call_id == Some("") {
            return reject(format!(
                "Invalid 'input[{i}].call_id': empty string. Expected a string with minimum length 1, but got an empty string instead."
            ));
        }
        match item {
            Item::Skip => {}
            Item::Break => group.close(messages)?,
            Item::Reasoning(text) => {
                group.close(messages)?;
                // Empty reasoning carries nothing; consecutive reasoning items are joined.
                if !text.is_empty() {
                    pending_reasoning = Some(match pending_reasoning.take() {
                        Some(prev) => format!("{prev}\n{text}"),
                        None => text,
                    });
                }
            }
            Item::FunctionCall(call) => {
                // A call after a fully answered group starts a new assistant turn; while some
                // call is still unanswered, it joins the current one.
                if group.all_answered() {
                    group.close(messages)?;
                }
                group.add_call(&call.call_id)?;
                let tc = ToolCall {
                    id: call.call_id,
                    name: call.name,
                    arguments: call.arguments,
                };
                match messages.last_mut() {
                    Some(Message::Assistant(a)) if pending_reasoning.is_none() => {
                        a.tool_calls.get_or_insert_with(Vec::new).push(tc);
                    }
                    _ => messages.push(Message::Assistant(AssistantMessage {
                        content: String::new(),
                        reasoning_content: pending_reasoning.take(),
                        tool_calls: Some(vec![tc]),
                        prefix: false,
                    })),
                }
            }
            Item::FunctionCallOutput(None, content) => {
                // It ends the run of calls before it (which must be answered by then) and
                // stands alone as a tool message.
                group.close(messages)?;
                let parts = content_parts(content, &path, version, false, "output")?;
                let (text, image_sources) = common::join_parts(parts, version, image_token, &path);
                messages.push(Message::Tool(ToolMessage::from_text(
                    text,
                    None,
                    image_sources,
                    image_token,
                )));
            }
            Item::FunctionCallOutput(Some(call_id), content) => {
                // The output's parts are read before its call is looked up.
                let parts = content_parts(content, &path, version, false, "output")?;
                group.check_output(&call_id)?;
                let (text, image_sources) = common::join_parts(parts, version, image_token, &path);
                group.add_output(ToolMessage::from_text(
                    text,
                    Some(call_id),
                    image_sources,
                    image_token,
                ));
            }
            Item::Message(role, content) => {
                group.close(messages)?;
                let parts = content_parts(
                    content,
                    &path,
                    version,
                    matches!(role, Role::Assistant),
                    "content",
                )?;
                if !matches!(role, Role::Assistant) {
                    if let Some(r) = pending_reasoning.take() {
                        messages.push(Message::Assistant(AssistantMessage {
                            content: String::new(),
                            reasoning_content: Some(r),
                            tool_calls: None,
                            prefix: false,
                        }));
                    }
                }
                let (text, image_sources) = common::join_parts(parts, version, image_token, &path);
                match role {
                    Role::User => {
                        if let Some(r) = pending_reasoning.take() {
                            messages.push(Message::Assistant(AssistantMessage {
                                content: String::new(),
                                reasoning_content: Some(r),
                                tool_calls: None,
                                prefix: false,
                            }));
                        }
                        messages.push(Message::User(UserMessage::from_text(
                            text,
                            image_sources,
                            image_token,
                        )))
                    }
                    Role::Developer if developer_as_user(version) => messages.push(Message::User(
                        UserMessage::from_text(text, image_sources, image_token),
                    )),
                    Role::System | Role::Developer => messages.push(Message::System(
                        SystemMessage::from_text(text, image_sources, image_token),
                    )),
                    Role::Assistant => match messages.last_mut() {
                        // Consecutive assistant messages (no reasoning item between them) are
                        // one turn: their non-empty texts are joined.
                        Some(Message::Assistant(prev))
                            if pending_reasoning.is_none() && prev.tool_calls.is_none() =>
                        {
                            if !text.content.is_empty() {
                                if !prev.content.is_empty() {
                                    prev.content.push_str("\n\n");
                                }
                                prev.content.push_str(&text.content);
                            }
                        }
                        _ => messages.push(Message::Assistant(AssistantMessage {
                            content: text.content,
                            reasoning_content: pending_reasoning.take(),
                            tool_calls: None,
                            prefix: false,
                        })),
                    },
                }
            }
        }
    }
    group.close(messages)?;
    if let Some(r) = pending_reasoning.take() {
        messages.push(Message::Assistant(AssistantMessage {
            content: String::new(),
            reasoning_content: Some(r),
            tool_calls: None,
            prefix: false,
        }));
    }
    Ok(())
}
