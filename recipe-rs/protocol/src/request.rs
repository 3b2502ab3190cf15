//! The result of a conversion: the conversation plus what the backend and the parser need.

use recipe_core::{Conversation, ModelVersion, ParsingOptions, ReasoningEffort, ResponsesEcho};

use crate::error::{ConvResult, ConversionError};

/// Constrained-decoding hint for the backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputConstraintKind {
    Json,
    Regex,
    ToolCall,
    ToolCallRequired,
}

impl OutputConstraintKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            OutputConstraintKind::Json => "json",
            OutputConstraintKind::Regex => "regex",
            OutputConstraintKind::ToolCall => "tool_call",
            OutputConstraintKind::ToolCallRequired => "tool_call_required",
        }
    }
}

/// A constraint the backend may enforce on the output: a kind and its constraint text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputConstraint {
    pub kind: OutputConstraintKind,
    /// Compact JSON schema, regular expression, compact JSON tool list, or `""` (any JSON).
    pub schema: String,
}

/// Sampling settings for the backend.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct InferenceOptions {
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub logprobs: bool,
    pub top_logprobs: Option<u32>,
    pub seed: Option<u64>,
    pub output_constraint: Option<OutputConstraint>,
    /// The request's `parallel_tool_calls` (`None`: not given, several calls allowed).
    pub parallel_tool_calls: Option<bool>,
}

/// A converted request.
#[derive(Clone, Debug, PartialEq)]
pub struct ConversationRequest {
    pub conversation: Conversation,
    pub inference_options: InferenceOptions,
    pub parsing_options: ParsingOptions,
    pub model_version: ModelVersion,
    pub stream: bool,
    /// A Chat request with `stream_options.include_usage` true: every chunk of its stream
    /// carries a `usage` key (`null` before the last). Streamed without it, only the last does.
    pub include_usage: bool,
    /// For a converted Responses request: the settings its response objects report back
    /// (the Responses generator made from this request echoes them).
    pub responses_echo: Option<ResponsesEcho>,
}

pub const DEFAULT_MAX_TOKENS: u32 = 8192;
pub const DEFAULT_THINKING_MAX_TOKENS: u32 = 65_536;
pub const DEFAULT_MAX_EFFORT_MAX_TOKENS: u32 = 131_072;

impl ConversationRequest {
    /// A request with default inference, parsing and transport settings.
    pub fn new(conversation: Conversation, model_version: ModelVersion) -> Self {
        ConversationRequest {
            conversation,
            inference_options: InferenceOptions::default(),
            parsing_options: ParsingOptions::default(),
            model_version,
            stream: false,
            include_usage: false,
            responses_echo: None,
        }
    }

    /// The `max_tokens` for the backend, given the encoded prompt length and the context size.
    pub fn resolve_max_tokens(&self, prompt_tokens: u32, context_limit: u32) -> ConvResult<u32> {
        let prompt = u64::from(prompt_tokens);
        let context = u64::from(context_limit);
        if let Some(requested) = self.inference_options.max_tokens {
            let total = prompt + u64::from(requested);
            if total > context {
                return Err(context_error(context, total, prompt, u64::from(requested)));
            }
            return Ok(requested.max(1));
        }
        if prompt > context {
            return Err(context_error(context, prompt, prompt, 0));
        }
        let default = if !self.conversation.thinking_mode {
            DEFAULT_MAX_TOKENS
        } else if self.conversation.reasoning_effort == Some(ReasoningEffort::Max) {
            DEFAULT_MAX_EFFORT_MAX_TOKENS
        } else {
            DEFAULT_THINKING_MAX_TOKENS
        };
        let left = context - prompt;
        Ok((u64::from(default).min(left)).max(1) as u32)
    }
}

fn context_error(context: u64, total: u64, prompt: u64, completion: u64) -> ConversionError {
    ConversionError::invalid(format!(
        "This model's maximum context length is {context} tokens. However, you requested {total} \
         tokens ({prompt} in the messages, {completion} in the completion). Please reduce the \
         length of the messages or completion."
    ))
}
