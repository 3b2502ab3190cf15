//! The final request: conversation, backend settings and parser settings derived from what a
//! format worked out.

use serde_json::{Map, Value};

use recipe_core::{
    Conversation, Message, ModelVersion, ParsingOptions, ReasoningEffort, ResponseFormat,
    ToolChoice, ToolDefinition,
};

use crate::common::reasoning::thinking_stage;
use crate::common::sampling::{resolve_temperature, resolve_top_p};
use crate::options::ConversionOptions;
use crate::request::{
    ConversationRequest, InferenceOptions, OutputConstraint, OutputConstraintKind,
};

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
    pub include_usage: bool,
    pub parallel_tool_calls: Option<bool>,
}

/// The converted request: the output constraint (tool calls first, else the response format),
/// the parser settings and the backend's sampling values.
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
        parallel_tool_calls: a.parallel_tool_calls,
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
        include_usage: a.include_usage,
        responses_echo: None,
    }
}
