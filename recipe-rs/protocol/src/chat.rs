//! OpenAI Chat Completions requests.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use recipe_core::{
    AssistantMessage, ImageDetail, LatestReminderMessage, Message, ModelVersion, ResponseFormat,
    SpecialToken, SystemMessage, ToolCall, ToolMessage, UserMessage,
};

use crate::body::de::StringOrList;
use crate::common::{
    self, Assembly, DeclaredTool, ImagePart, Part, RequestEffort, RequestToolChoice,
};
use crate::error::{reject, ConvResult, RequestError};
use crate::options::ConversionOptions;
use crate::request::ConversationRequest;

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

impl ChatCompletionRequest {
    pub fn from_value(v: Value) -> Result<Self, RequestError> {
        crate::body::from_value(v)
    }

    /// Parse and type a body. The message list is typed while it is read, one message at a
    /// time, so it never exists as a whole JSON value (peak memory stays near the body's size).
    pub fn from_slice(bytes: &[u8]) -> Result<Self, RequestError> {
        let (value, messages) = crate::body::parse_json_preparing::<ChatCompletionRequestMessage>(
            bytes,
            Self::body_fields(),
            "messages",
        )?;
        crate::body::with_prepared(messages, || crate::body::from_value(value))
    }

    /// The top-level body fields this request reads; others are ignored.
    pub fn body_fields() -> &'static [&'static str] {
        crate::body::struct_fields::<Self>()
    }

    pub fn convert(self, options: &ConversionOptions) -> ConvResult<ConversationRequest> {
        convert(self, options)
    }
}

fn empty_string_error(field: &str) -> String {
    format!("Invalid '{field}': empty string. Expected a string with minimum length 1, but got an empty string instead.")
}

/// Text and images of a content value; `allow_images` is false for assistant messages.
fn content_parts(
    content: ChatContent,
    path: &str,
    allow_images: bool,
    version: ModelVersion,
) -> ConvResult<Vec<Part>> {
    let blocks = match content {
        StringOrList::String(s) => return Ok(vec![Part::Text(s)]),
        StringOrList::List(b) => b,
    };
    if common::shows_images(version)
        && blocks
            .iter()
            .any(|b| matches!(b, ChatCompletionRequestContentBlock::File { .. }))
    {
        return reject(format!("{path}: file must have a file_id or file_data"));
    }
    let mut parts = Vec::with_capacity(blocks.len());
    for block in blocks {
        match block {
            ChatCompletionRequestContentBlock::Text { text } => parts.push(Part::Text(text)),
            ChatCompletionRequestContentBlock::ImageUrl { image_url } => {
                if !allow_images {
                    if !common::shows_images(version) {
                        parts.push(Part::Text(common::UNSUPPORTED_IMAGE.to_owned()));
                        continue;
                    }
                    return reject("Image in assistant message is not supported");
                }
                let detail = image_url.detail.map(ImageDetail::from).unwrap_or_default();
                let data = match common::image_data_from_url(&image_url.url) {
                    Some(d) => d,
                    None if !common::shows_images(version) => {
                        recipe_core::ImageData::Url(image_url.url)
                    }
                    None => return reject(format!("{path}: Unsupported image_url format")),
                };
                parts.push(Part::Image(ImagePart { data, detail }));
            }
            ChatCompletionRequestContentBlock::File { .. } => {
                if !common::shows_images(version) {
                    parts.push(Part::Text(common::UNSUPPORTED_IMAGE.to_owned()));
                    continue;
                }
                return reject(format!("{path}: file must have a file_id or file_data"));
            }
        }
    }
    Ok(parts)
}

fn convert(
    req: ChatCompletionRequest,
    options: &ConversionOptions,
) -> ConvResult<ConversationRequest> {
    let version = common::resolve_model(options, &req.model)?;
    let switch = req
        .thinking
        .as_ref()
        .map(|t| !matches!(t.kind, ThinkingType::Disabled));
    let (thinking, effort) =
        common::resolve_thinking(switch, req.reasoning_effort, options.default_thinking_mode);

    // Tool names are checked first, the rest of the tool rules after the messages.
    let mut declared: Vec<DeclaredTool> = Vec::new();
    for (i, tool) in req.tools.unwrap_or_default().into_iter().enumerate() {
        let f = tool.function;
        common::check_tool_name(&f.name, &format!("tools[{i}].function.name"))?;
        let tool = DeclaredTool {
            name: f.name,
            description: f.description,
            parameters: f.parameters,
            strict: f.strict,
            defer_loading: false,
        };
        declared.push(tool);
    }
    if req.messages.is_empty() {
        return reject("Empty input messages");
    }

    // Messages, in order; tool results are matched against the preceding tool calls.
    let image_token = options.special_tokens.get(SpecialToken::Image).to_owned();
    let n_messages = req.messages.len();
    let mut messages = Vec::with_capacity(n_messages);
    let mut sequence = ToolSequence::default();
    for (i, m) in req.messages.into_iter().enumerate() {
        let path = format!(".messages[{i}]");
        let tool_call_id = match &m {
            ChatCompletionRequestMessage::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        };
        sequence.before(tool_call_id, i)?;
        let msg = match m {
            ChatCompletionRequestMessage::System { content, .. } => {
                let parts = content_parts(content, &path, true, version)?;
                let (text, image_sources) = common::join_parts(parts, version, &image_token, &path);
                Message::System(SystemMessage::from_text(
                    text,
                    image_sources,
                    image_token.as_str(),
                ))
            }
            ChatCompletionRequestMessage::User { content, .. } => {
                let parts = content_parts(content, &path, true, version)?;
                let (text, image_sources) = common::join_parts(parts, version, &image_token, &path);
                Message::User(UserMessage::from_text(
                    text,
                    image_sources,
                    image_token.as_str(),
                ))
            }
            ChatCompletionRequestMessage::Assistant {
                content,
                reasoning_content,
                tool_calls,
                prefix,
                ..
            } => {
                if content.is_none() && tool_calls.is_none() {
                    return reject("Invalid assistant message: content or tool_calls must be set");
                }
                let text = match content {
                    None => String::new(),
                    Some(c) => {
                        let parts = content_parts(c, &path, false, version)?;
                        common::join_parts(parts, version, &image_token, &path)
                            .0
                            .content
                    }
                };
                let tool_calls = match tool_calls {
                    None => None,
                    Some(calls) => {
                        if calls.is_empty() {
                            return reject(format!(
                                "Invalid 'messages[{i}].tool_calls': empty array. Expected an array with minimum length 1, but got an empty array instead."
                            ));
                        }
                        Some(
                            calls
                                .into_iter()
                                .map(|c| ToolCall {
                                    id: c.id,
                                    name: c.function.name,
                                    arguments: c.function.arguments,
                                })
                                .collect(),
                        )
                    }
                };
                let prefix = prefix.unwrap_or(false);
                Message::Assistant(AssistantMessage {
                    content: text,
                    reasoning_content,
                    tool_calls,
                    prefix,
                })
            }
            ChatCompletionRequestMessage::Tool {
                content,
                tool_call_id,
            } => {
                let parts = content_parts(content, &path, true, version)?;
                let (text, image_sources) = common::join_parts(parts, version, &image_token, &path);
                Message::Tool(ToolMessage::from_text(
                    text,
                    Some(tool_call_id),
                    image_sources,
                    image_token.as_str(),
                ))
            }
            ChatCompletionRequestMessage::LatestReminder { content } => {
                Message::LatestReminder(LatestReminderMessage { content })
            }
        };
        sequence.after(&msg);
        if matches!(&msg, Message::System(sys) if sys.content.is_empty() && sys.image_sources.is_empty())
        {
            continue;
        }
        messages.push(msg);
    }
    sequence.finish()?;
    common::apply_reasoning_policy(
        &mut messages,
        thinking,
        options.reasoning_content_behavior,
        common::ReasoningField {
            name: "reasoning_content",
            tools_declared: !declared.is_empty(),
        },
    )?;

    // Prefix continuation: only as the last message, without tools or json_object.
    let n_kept = messages.len();
    for (i, m) in messages.iter().enumerate() {
        if let Message::Assistant(a) = m {
            if a.prefix && i + 1 != n_kept {
                return reject("Invalid completion message: prefix set true with message which is not final message or message role is not assistant");
            }
        }
    }
    let has_response_format = req.response_format.is_some();
    let is_json_object = matches!(
        req.response_format,
        Some(ChatCompletionResponseFormat::JsonObject)
    );
    let is_prefix = matches!(messages.last(), Some(Message::Assistant(a)) if a.prefix);
    if is_json_object && !common::mentions_json(&messages) {
        return reject(common::JSON_WORD_REQUIRED);
    }

    let choice = req.tool_choice.map(|c| match c {
        ChatToolChoice::None => RequestToolChoice::None,
        ChatToolChoice::Auto => RequestToolChoice::Auto,
        ChatToolChoice::Required => RequestToolChoice::Required,
        ChatToolChoice::Function(n) => RequestToolChoice::Named(n),
    });
    let any_declared = !declared.is_empty();
    common::drop_tools_for_none(&mut declared, &choice)?;
    common::check_tools(&mut declared)?;
    // The official order: tool-choice errors first, then json_object with prefix, then calls
    // with prefix.
    let (declared, tool_choice) = common::apply_tool_choice(declared, choice, thinking, true)?;
    if is_prefix && is_json_object {
        return reject("response_format json_object should not be used with prefix");
    }
    if is_prefix {
        let any_calls = messages
            .iter()
            .any(|m| matches!(m, Message::Assistant(x) if x.tool_calls.is_some()));
        if any_declared || any_calls {
            return reject("Function call should not be used with prefix");
        }
    }

    let stop = match req.stop {
        None => Vec::new(),
        Some(Stop::One(s)) => {
            if s.is_empty() {
                return reject(empty_string_error("stop"));
            }
            vec![s]
        }
        Some(Stop::Many(list)) => {
            common::check_stop_list(&list)?;
            list
        }
    };
    let stream = req.stream.unwrap_or(false);
    if req.stream_options.is_some() && !stream {
        return reject("stream_options should be set along with stream = true");
    }
    // The response schema is checked (strict: normalised) before the tool list is finished.
    let strict_response_schema = match &req.response_format {
        Some(ChatCompletionResponseFormat::JsonSchema { json_schema }) => {
            if json_schema.strict == Some(true) {
                Some(
                    crate::strict::normalize_response_schema(json_schema.schema.clone())?
                        .to_string(),
                )
            } else {
                common::check_response_schema(&json_schema.schema)?;
                None
            }
        }
        _ => None,
    };

    let tools = common::finish_tools(declared)?;
    if tools.strict && has_response_format {
        return reject("response_format should not be used with tools");
    }

    let (response_format, json_constraint) = match req.response_format {
        None | Some(ChatCompletionResponseFormat::Text) => (ResponseFormat::Text, None),
        Some(ChatCompletionResponseFormat::JsonObject) => (ResponseFormat::JsonObject, None),
        Some(ChatCompletionResponseFormat::JsonSchema { json_schema }) => {
            let constraint =
                strict_response_schema.unwrap_or_else(|| json_schema.schema.to_string());
            (
                ResponseFormat::JsonSchema(json_schema.schema),
                Some(constraint),
            )
        }
        Some(ChatCompletionResponseFormat::Regex { regex }) => (ResponseFormat::Regex(regex), None),
    };

    // Sampling parameters.
    if req.n.is_some_and(|n| n != 1) {
        return reject("Invalid n value (currently only n = 1 is supported)");
    }
    // The penalties are not applied, but out-of-range values are refused.
    for (name, value) in [
        ("frequency_penalty", req.frequency_penalty),
        ("presence_penalty", req.presence_penalty),
    ] {
        if value.is_some_and(|v| !(-2.0..=2.0).contains(&v)) {
            return reject(format!(
                "Invalid {name} value, the valid range of {name} is [-2, 2]"
            ));
        }
    }
    common::check_temperature(req.temperature)?;
    common::check_top_p(req.top_p)?;
    let logprobs = req.logprobs.unwrap_or(false);
    if let Some(top) = req.top_logprobs {
        if !logprobs {
            return reject("Invalid top_logprobs and logprobs value, logprobs must be set to true if top_logprobs is used.");
        }
        if top > 20 {
            return reject(
                "Invalid top_logprobs value, the valid range of top_logprobs is [0, 20].",
            );
        }
    }
    common::check_max_tokens(req.max_tokens, options.max_tokens_upper_bound(thinking))?;
    if req.seed.is_some_and(|s| s >= 1 << 63) {
        return reject("Invalid seed value, the valid range of seed is [0, 2^63)");
    }

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
            max_tokens: req.max_tokens,
            temperature: req.temperature,
            top_p: req.top_p,
            logprobs,
            top_logprobs: req.top_logprobs.map(u32::from),
            seed: req.seed,
            stop,
            stream,
        },
        options,
    ))
}

/// Tracks the tool calls of the latest assistant turn while messages are read in order: every
/// call must be answered by one of the tool messages that directly follow it.
#[derive(Default)]
struct ToolSequence {
    /// Calls still owed a result, and those already answered; `None` outside a tool-call run.
    open: Option<(Vec<String>, Vec<String>)>,
}

impl ToolSequence {
    /// Before message `index` is converted: a tool result must answer an open call; any other
    /// message closes the run of tool results.
    fn before(&mut self, tool_call_id: Option<&str>, index: usize) -> ConvResult<()> {
        if let Some(id) = tool_call_id {
            let Some((pending, answered)) = self.open.as_mut() else {
                return reject(TOOL_WITHOUT_CALLS);
            };
            if pending.is_empty() {
                return reject(TOOL_WITHOUT_CALLS);
            }
            let id = id.to_owned();
            if let Some(pos) = pending.iter().position(|p| *p == id) {
                pending.remove(pos);
                answered.push(id);
            } else if answered.contains(&id) {
                return reject(format!(
                    "Duplicate value for 'tool_call_id' of {id} in message[{index}]"
                ));
            } else {
                return reject(format!(
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id', The following tool_call_ids did not have response messages: {id}"
                ));
            }
            return Ok(());
        }
        self.finish()
    }

    /// After a message is converted: an assistant turn with tool calls opens a run.
    fn after(&mut self, msg: &Message) {
        if let Message::Assistant(AssistantMessage {
            tool_calls: Some(calls),
            ..
        }) = msg
        {
            self.open = Some((calls.iter().map(|c| c.id.clone()).collect(), Vec::new()));
        }
    }

    fn finish(&mut self) -> ConvResult<()> {
        if let Some((pending, _)) = self.open.take() {
            if !pending.is_empty() {
                return reject("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. (insufficient tool messages following tool_calls message)");
            }
        }
        Ok(())
    }
}

const TOOL_WITHOUT_CALLS: &str =
    "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'";
