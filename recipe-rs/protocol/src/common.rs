//! Rules shared by the three request formats: model lookup, thinking switches, sampling bounds,
//! tools and tool choice, response formats, and the assembly of the final request.

use serde::Deserialize;
use serde_json::{Map, Value};

use recipe_core::profile::ImageHandling;
use recipe_core::{
    AssistantMessage, Conversation, ImageData, ImageDetail, ImageSource, ImageText, Message,
    ModelVersion, ParsingOptions, ReasoningEffort, ResponseFormat, ThinkingInitialStage,
    ToolChoice, ToolDefinition,
};

use crate::error::{reject, ConvResult};
use crate::options::{ConversionOptions, ReasoningContentBehavior};
use crate::request::{
    ConversationRequest, InferenceOptions, OutputConstraint, OutputConstraintKind,
};

/// Reasoning-effort names a request may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestEffort {
    None,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
    Ultra,
    Max,
}

impl RequestEffort {
    fn level(self) -> Option<ReasoningEffort> {
        match self {
            RequestEffort::None => None,
            RequestEffort::Minimal | RequestEffort::Low => Some(ReasoningEffort::Low),
            RequestEffort::Medium | RequestEffort::High => Some(ReasoningEffort::High),
            RequestEffort::Xhigh => Some(ReasoningEffort::XHigh),
            RequestEffort::Ultra | RequestEffort::Max => Some(ReasoningEffort::Max),
        }
    }
}

/// Thinking mode and effort from an explicit switch, an effort name and the server default.
pub fn resolve_thinking(
    switch: Option<bool>,
    effort: Option<RequestEffort>,
    default: bool,
) -> (bool, Option<ReasoningEffort>) {
    let thinking = match switch {
        Some(on) => on,
        None => match effort {
            Some(RequestEffort::None) => false,
            Some(_) => true,
            None => default,
        },
    };
    if !thinking {
        return (false, None);
    }
    (
        true,
        Some(
            effort
                .and_then(RequestEffort::level)
                .unwrap_or(ReasoningEffort::High),
        ),
    )
}

pub fn resolve_model(options: &ConversionOptions, model: &str) -> ConvResult<ModelVersion> {
    match options.model_version(model) {
        Some(v) => Ok(v),
        None => {
            let names: Vec<&str> = options
                .model_versions_by_name
                .keys()
                .map(String::as_str)
                .collect();
            reject(format!(
                "The supported API model names are {}, but you passed {model}.",
                names.join(", ")
            ))
        }
    }
}

pub fn check_temperature(t: Option<f32>) -> ConvResult<()> {
    match t {
        Some(t) if !(0.0..=2.0).contains(&t) => {
            reject("Invalid temperature value, the valid range of temperature is [0, 2]")
        }
        _ => Ok(()),
    }
}

pub fn check_top_p(p: Option<f32>) -> ConvResult<()> {
    match p {
        Some(p) if !(p > 0.0 && p <= 1.0) => {
            reject("Invalid top_p value, the valid range of top_p is (0, 1.0]")
        }
        _ => Ok(()),
    }
}

pub fn check_max_tokens(m: Option<u32>, bound: u32) -> ConvResult<()> {
    match m {
        Some(m) if m < 1 || m > bound => reject(format!(
            "Invalid max_tokens value, the valid range of max_tokens is [1, {bound}]"
        )),
        _ => Ok(()),
    }
}

pub fn resolve_temperature(thinking: bool, requested: Option<f32>) -> f32 {
    if thinking {
        1.0
    } else {
        requested.unwrap_or(1.0)
    }
}

pub fn resolve_top_p(
    version: ModelVersion,
    thinking: bool,
    tools_active: bool,
    requested: Option<f32>,
) -> f32 {
    version
        .profile()
        .conversion
        .top_p
        .resolve(thinking, tools_active, requested)
}

/// An image part of a request, before the model version decides how it is shown.
pub struct ImagePart {
    pub data: ImageData,
    pub detail: ImageDetail,
}

/// Text and images of one message, in order.
pub enum Part {
    Text(String),
    Image(ImagePart),
}

pub const UNSUPPORTED_IMAGE: &str = "[Unsupported Image]";

/// Whether the model sees images (as placeholders with checked sources) or only the
/// `[Unsupported Image]` text (see the profile's [`ImageHandling`]).
pub fn shows_images(version: ModelVersion) -> bool {
    version.profile().conversion.images == ImageHandling::Placeholder
}

/// Join parts with blank lines; images become the image placeholder (V4.1, its position
/// recorded in the returned [`ImageText`]) or the `[Unsupported Image]` text (V4, which drops the
/// source).
pub fn join_parts(
    parts: Vec<Part>,
    version: ModelVersion,
    image_token: &str,
    path: &str,
) -> (ImageText, Vec<ImageSource>) {
    let mut text = ImageText::default();
    let mut images = Vec::new();
    for (k, part) in parts.into_iter().enumerate() {
        if k > 0 {
            text.push_text("\n\n");
        }
        match part {
            Part::Text(t) => text.push_text(&t),
            Part::Image(img) => match version.profile().conversion.images {
                ImageHandling::UnsupportedText => text.push_text(UNSUPPORTED_IMAGE),
                ImageHandling::Placeholder => {
                    text.push_placeholder(image_token);
                    images.push(ImageSource {
                        data: img.data,
                        detail: img.detail,
                        path: path.to_owned(),
                    });
                }
            },
        }
    }
    (text, images)
}

/// Classify an image URL: `data:` URLs and http(s) URLs are accepted.
pub fn image_data_from_url(url: &str) -> Option<ImageData> {
    if url.starts_with("data:") {
        Some(ImageData::DataUrl(url.to_owned()))
    } else if url.starts_with("http://") || url.starts_with("https://") {
        Some(ImageData::Url(url.to_owned()))
    } else {
        None
    }
}

/// A tool as declared by a request, before validation.
pub struct DeclaredTool {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Option<Value>,
    pub strict: Option<bool>,
    pub defer_loading: bool,
}

pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Validate the name of `tools[i]` (`field` is the JSON path used in the message).
pub fn check_tool_name(name: &str, field: &str) -> ConvResult<()> {
    if name.is_empty() {
        return reject(format!(
            "Invalid '{field}': empty string. Expected a string with minimum length 1, but got an empty string instead."
        ));
    }
    if !is_valid_tool_name(name) {
        return reject(format!(
            "Invalid '{field}': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
        ));
    }
    Ok(())
}

/// A non-strict tool's parameters must compile as a JSON Schema.
pub fn meta_check(name: &str, parameters: &Option<Value>) -> ConvResult<()> {
    let Some(p) = parameters else { return Ok(()) };
    match schema_error(p) {
        Some(m) => reject(format!("Invalid schema for function '{name}': {m}")),
        None => Ok(()),
    }
}

/// Why `schema` is not a usable JSON Schema: the first error the `jsonschema` crate reports
/// when it compiles the schema (meta-schema violations, unresolvable references), or `None`.
///
/// References are resolved offline only: a remote `$ref` is an error.
pub fn schema_error(schema: &Value) -> Option<String> {
    match jsonschema::options().offline().build(schema) {
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    }
}

/// A list of stop strings: at most 16, none empty.
pub fn check_stop_list(list: &[String]) -> ConvResult<()> {
    if list.len() > 16 {
        return reject(format!("Stop string array too long: {}", list.len()));
    }
    if let Some(i) = list.iter().position(String::is_empty) {
        return reject(format!(
            "Invalid 'stop[{i}]': empty string. Expected a string with minimum length 1, but got an empty string instead."
        ));
    }
    Ok(())
}

/// A non-strict response-format schema must compile as a JSON Schema.
pub fn check_response_schema(schema: &Value) -> ConvResult<()> {
    match schema_error(schema) {
        Some(m) => reject(format!("Invalid json schema: {m}")),
        None => Ok(()),
    }
}

pub fn check_parameters(name: &str, parameters: &Option<Value>) -> ConvResult<()> {
    let Some(p) = parameters else { return Ok(()) };
    meta_check(name, parameters)?;
    let ty = p.get("type").cloned().unwrap_or(Value::Null);
    if ty != Value::String("object".into()) {
        return reject(format!(
            "Invalid schema for function '{name}': schema must be a JSON Schema of 'type: \"object\"', got 'type: {ty}'."
        ));
    }
    Ok(())
}

/// Validated tools: duplicates and strict/non-strict mixing rejected, strict schemas normalised.
pub struct Tools {
    pub tools: Vec<ToolDefinition>,
    /// Whether every tool is strict (and there is at least one).
    pub strict: bool,
}

/// A strict tool's schema is validated and normalised as soon as the tool is read.
pub fn declare_strict(tool: &mut DeclaredTool) -> ConvResult<()> {
    if tool.strict == Some(true) {
        if crate::strict::non_object_top_level(tool.parameters.as_ref()) {
            // Reported later, when the tool list is finished (and only if the tool is kept).
            return Ok(());
        }
        let schema = tool
            .parameters
            .take()
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
        tool.parameters = Some(crate::strict::normalize_strict_schema(schema)?);
    }
    Ok(())
}

/// Per tool, in order: names must be unique, and a non-strict tool needs an object schema
/// (strict tools are checked when they are normalised).
pub fn check_tools(declared: &mut [DeclaredTool]) -> ConvResult<()> {
    let mut seen = std::collections::HashSet::new();
    for t in declared.iter_mut() {
        if !seen.insert(t.name.clone()) {
            return reject("Tool names must be unique.");
        }
        if t.strict != Some(true) {
            check_parameters(&t.name, &t.parameters)?;
        } else if crate::strict::non_object_top_level(t.parameters.as_ref()) {
            return reject("The top level of the function parameters schema must be an object.");
        } else {
            declare_strict(t)?;
        }
    }
    Ok(())
}

/// Reject strict/non-strict mixing and normalise strict schemas.
pub fn finish_tools(declared: Vec<DeclaredTool>) -> ConvResult<Tools> {
    let n_strict = declared.iter().filter(|t| t.strict == Some(true)).count();
    if n_strict > 0 && n_strict != declared.len() {
        return reject("Cannot use strict tool with non-strict tool in the same request");
    }
    let strict = n_strict > 0;
    let mut tools = Vec::with_capacity(declared.len());
    for t in declared {
        // Strict schemas were normalised when the tool was declared (`declare_strict`).
        if strict && crate::strict::non_object_top_level(t.parameters.as_ref()) {
            return reject("The top level of the function parameters schema must be an object.");
        }
        let parameters = t.parameters.unwrap_or_else(|| Value::Object(Map::new()));
        tools.push(ToolDefinition {
            name: t.name,
            description: t.description,
            parameters,
            strict: t.strict,
            defer_loading: t.defer_loading,
        });
    }
    Ok(Tools { tools, strict })
}

/// The tool choice of a request, before it is applied to the declared tools.
pub enum RequestToolChoice {
    Auto,
    None,
    Required,
    Named(String),
}

/// Apply a tool choice: `none` drops all tools, a named tool keeps only that one.
pub fn apply_tool_choice(
    tools: Vec<DeclaredTool>,
    choice: Option<RequestToolChoice>,
    thinking: bool,
    thinking_rejects: bool,
) -> ConvResult<(Vec<DeclaredTool>, ToolChoice)> {
    let choice = choice.unwrap_or(RequestToolChoice::Auto);
    if tools.is_empty() {
        let tc = match choice {
            RequestToolChoice::None => ToolChoice::None,
            _ => ToolChoice::Auto,
        };
        return Ok((tools, tc));
    }
    match choice {
        RequestToolChoice::Auto => Ok((tools, ToolChoice::Auto)),
        RequestToolChoice::None => Ok((Vec::new(), ToolChoice::None)),
        RequestToolChoice::Required => {
            if thinking {
                if thinking_rejects {
                    return reject("Thinking mode does not support this tool_choice");
                }
                return Ok((tools, ToolChoice::Auto));
            }
            Ok((tools, ToolChoice::Required))
        }
        RequestToolChoice::Named(name) => {
            let Some(tool) = tools.into_iter().find(|t| t.name == name) else {
                return reject(format!(
                    "Invalid value for 'tool_call': no function named '{name}' was specified in the 'tools' parameter."
                ));
            };
            if thinking && thinking_rejects {
                return reject("Thinking mode does not support this tool_choice");
            }
            if thinking {
                return Ok((vec![tool], ToolChoice::Auto));
            }
            Ok((vec![tool], ToolChoice::Required))
        }
    }
}

/// `tool_choice: none` removes the tools before their schemas are checked for `type: object`
/// (their schemas still have to be valid JSON Schemas).
pub fn drop_tools_for_none(
    declared: &mut Vec<DeclaredTool>,
    choice: &Option<RequestToolChoice>,
) -> ConvResult<()> {
    if matches!(choice, Some(RequestToolChoice::None)) {
        declared.clear();
    }
    Ok(())
}

/// Whether the text of the messages mentions "json" (any case), as json_object requires.
pub fn mentions_json(messages: &[Message]) -> bool {
    messages
        .iter()
        .any(|m| m.content().to_ascii_lowercase().contains("json"))
}

pub const JSON_WORD_REQUIRED: &str =
    "Prompt must contain the word 'json' in some form to use 'response_format' of type 'json_object'.";

/// Compact JSON of the tools as Chat Completions function tools (the tool-call constraint).
pub fn tools_constraint_json(tools: &[ToolDefinition]) -> String {
    let list: Vec<Value> = tools
        .iter()
        .map(|t| {
            let mut f = Map::new();
            f.insert("name".into(), Value::String(t.name.clone()));
            f.insert(
                "description".into(),
                t.description
                    .clone()
                    .map(Value::String)
                    .unwrap_or(Value::Null),
            );
            let params = if t.parameters.is_null() {
                Value::Object(Map::new())
            } else {
                t.parameters.clone()
            };
            f.insert("parameters".into(), params);
            f.insert(
                "strict".into(),
                t.strict.map(Value::Bool).unwrap_or(Value::Null),
            );
            let mut o = Map::new();
            o.insert("type".into(), Value::String("function".into()));
            o.insert("function".into(), Value::Object(f));
            // A deferred tool says so beside its function, not inside it.
            if t.defer_loading {
                o.insert("defer_loading".into(), Value::Bool(true));
            }
            Value::Object(o)
        })
        .collect();
    Value::Array(list).to_string()
}

/// Everything a format has worked out; [`assemble`] derives the rest.
pub struct Assembly {
    pub version: ModelVersion,
    pub thinking: bool,
    pub effort: Option<ReasoningEffort>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDefinition>,
    pub tool_choice: ToolChoice,
    pub response_format: ResponseFormat,
    /// The constraint schema of a json_schema format (strict-normalised when strict).
    pub json_constraint: Option<String>,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub logprobs: bool,
    pub top_logprobs: Option<u32>,
    pub seed: Option<u64>,
    pub stop: Vec<String>,
    pub stream: bool,
}

/// How a format names the reasoning it expects back, and when it is needed.
pub struct ReasoningField {
    pub name: &'static str,
    /// Whether the request declares tools: then every assistant turn after the last user
    /// message needs its reasoning, not only those that made calls.
    pub tools_declared: bool,
}

/// Fill in missing reasoning in thinking mode (or reject it), drop it outside thinking mode.
/// Runs right after the messages are converted, before any tool or option check.
pub fn apply_reasoning_policy(
    messages: &mut [Message],
    thinking: bool,
    behavior: ReasoningContentBehavior,
    field: ReasoningField,
) -> ConvResult<()> {
    if !thinking {
        for m in messages.iter_mut() {
            if let Message::Assistant(a) = m {
                a.reasoning_content = None;
            }
        }
        return Ok(());
    }
    let last_user = messages.iter().rposition(|m| matches!(m, Message::User(_)));
    for (i, m) in messages.iter_mut().enumerate() {
        if let Message::Assistant(a) = m {
            if a.reasoning_content.is_none() {
                let after_last_user = last_user.is_none_or(|u| i > u);
                let has_calls = a.tool_calls.as_ref().is_some_and(|c| !c.is_empty());
                let needed = after_last_user && (has_calls || field.tools_declared);
                if behavior == ReasoningContentBehavior::Reject && needed {
                    return reject(format!(
                        "The `{}` in the thinking mode must be passed back to the API.",
                        field.name
                    ));
                }
                a.reasoning_content = Some(String::new());
            }
        }
    }
    Ok(())
}

pub fn thinking_stage(messages: &[Message], thinking: bool) -> Option<ThinkingInitialStage> {
    if !thinking {
        return None;
    }
    if let Some(Message::Assistant(AssistantMessage {
        prefix: true,
        content,
        reasoning_content,
        ..
    })) = messages.last()
    {
        if !content.is_empty() {
            return Some(ThinkingInitialStage::ContentContinuation);
        }
        if reasoning_content.as_deref().is_some_and(|r| !r.is_empty()) {
            return Some(ThinkingInitialStage::ReasoningContinuation);
        }
    }
    Some(ThinkingInitialStage::ReasoningStart)
}

pub fn assemble(a: Assembly, options: &ConversionOptions) -> ConversationRequest {
    let tools_active = !a.tools.is_empty() && a.tool_choice != ToolChoice::None;
    let required = tools_active && a.tool_choice == ToolChoice::Required;
    let output_constraint = if tools_active {
        Some(OutputConstraint {
            kind: if required {
                OutputConstraintKind::ToolCallRequired
            } else {
                OutputConstraintKind::ToolCall
            },
            schema: tools_constraint_json(&a.tools),
        })
    } else {
        match &a.response_format {
            ResponseFormat::Text => None,
            ResponseFormat::JsonObject => Some(OutputConstraint {
                kind: OutputConstraintKind::Json,
                schema: String::new(),
            }),
            ResponseFormat::JsonSchema(schema) => Some(OutputConstraint {
                kind: OutputConstraintKind::Json,
                schema: a
                    .json_constraint
                    .clone()
                    .unwrap_or_else(|| schema.to_string()),
            }),
            ResponseFormat::Regex(r) => Some(OutputConstraint {
                kind: OutputConstraintKind::Regex,
                schema: r.clone(),
            }),
        }
    };
    let parsing_options = ParsingOptions {
        parse_tool_calls: tools_active,
        starts_in_tool_calls: required,
        parse_json_output: a.response_format == ResponseFormat::JsonObject,
        thinking_initial_stage: thinking_stage(&a.messages, a.thinking),
        stop_sequences: a.stop,
        special_tokens: options.special_tokens.clone(),
    };
    let inference_options = InferenceOptions {
        max_tokens: a.max_tokens,
        temperature: Some(resolve_temperature(a.thinking, a.temperature)),
        top_p: Some(resolve_top_p(a.version, a.thinking, tools_active, a.top_p)),
        logprobs: a.logprobs,
        top_logprobs: a.top_logprobs,
        seed: a.seed,
        output_constraint,
    };
    let conversation = Conversation {
        messages: a.messages,
        thinking_mode: a.thinking,
        tools: a.tools,
        tool_choice: a.tool_choice,
        reasoning_effort: if a.thinking { a.effort } else { None },
        response_format: a.response_format,
    };
    ConversationRequest {
        conversation,
        inference_options,
        parsing_options,
        model_version: a.version,
        stream: a.stream,
        responses_echo: None,
    }
}
