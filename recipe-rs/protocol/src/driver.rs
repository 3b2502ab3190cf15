//! The conversion sequence every request format follows.
//!
//! A format (Chat Completions, Responses, Messages) implements [`RequestFormat`]; [`convert`]
//! calls its steps in one fixed order and applies the shared rules between them. That order is
//! the official package's check order: when a body breaks several rules, the error reported is
//! the first one in this sequence, and the conversion fixtures record which one that is.
//!
//! 1. model name, then thinking mode and effort;
//! 2. the declared tools' names ([`RequestFormat::declare_tools`]);
//! 3. the messages ([`RequestFormat::convert_messages`]), then the reasoning policy
//!    (missing reasoning filled in or refused) and [`RequestFormat::check_messages`];
//! 4. the tool choice: `none` drops the tools, the remaining tools' schemas are checked, the
//!    choice is applied; then [`RequestFormat::check_after_tool_choice`];
//! 5. the response format's schema, [`RequestFormat::check_before_tools`], the final tool list
//!    (strict/non-strict mixing) and its conflict with a response format, then
//!    [`RequestFormat::after_tools`];
//! 6. sampling: [`RequestFormat::check_leading_sampling`], temperature, top_p, then
//!    [`RequestFormat::finish_sampling`];
//! 7. assembly of the conversation and the backend and parser settings.
//!
//! A hook a format does not need keeps its default (no check). A fourth format implements the
//! trait; a rule shared by all formats goes here or in [`crate::common`].

use recipe_core::{Message, ModelVersion, SpecialToken, ToolDefinition};

use crate::common::response_format::RequestedFormat;
use crate::common::{self, Assembly, DeclaredTool, RequestEffort, RequestToolChoice};
use crate::error::{reject, ConvResult};
use crate::options::ConversionOptions;
use crate::request::ConversationRequest;

/// What the steps of a conversion know once the model and thinking mode are resolved.
pub struct Context<'a> {
    pub options: &'a ConversionOptions,
    pub version: ModelVersion,
    pub thinking: bool,
    /// The image placeholder's spelling (from the options' special tokens).
    pub image_token: String,
}

/// A response format as a format reports it to the driver.
pub struct FormatRequest {
    pub format: RequestedFormat,
    /// Whether strict tools refuse this format ("response_format should not be used with
    /// tools"): Chat Completions refuses any `response_format`, Responses a JSON one.
    pub excludes_strict_tools: bool,
}

impl FormatRequest {
    /// No response format.
    pub fn none() -> Self {
        FormatRequest {
            format: RequestedFormat::Text,
            excludes_strict_tools: false,
        }
    }
}

/// The sampling settings a format hands to the assembly after its own checks.
pub struct Sampling {
    pub max_tokens: Option<u32>,
    pub logprobs: bool,
    pub top_logprobs: Option<u32>,
    pub seed: Option<u64>,
    pub stop: Vec<String>,
    pub stream: bool,
    /// Chat's `stream_options.include_usage` (false for the other formats).
    pub include_usage: bool,
}

/// The steps of a conversion that differ between formats, in the order [`convert`] calls them.
pub trait RequestFormat {
    /// How the format names the reasoning an assistant turn passes back (used in the error
    /// message of the reasoning policy).
    const REASONING_FIELD: &'static str;

    /// The requested model name.
    fn model(&self) -> &str;

    /// The explicit thinking switch (if the format has one) and the requested effort.
    fn thinking_request(&self) -> (Option<bool>, Option<RequestEffort>);

    /// The declared tools, their names checked in order (other tool rules run later).
    fn declare_tools(&mut self, cx: &Context) -> ConvResult<Vec<DeclaredTool>>;

    /// The conversation's messages, with the format's own sequence rules (tool results
    /// answering calls, roles, content blocks).
    fn convert_messages(
        &mut self,
        cx: &Context,
        declared: &[DeclaredTool],
    ) -> ConvResult<Vec<Message>>;

    /// Whether the request counts as declaring tools for the reasoning policy (then every
    /// assistant turn after the last user message needs its reasoning).
    fn declares_tools(&self, declared: &[DeclaredTool]) -> bool {
        !declared.is_empty()
    }

    /// Checks on the converted messages that come before the tool choice.
    fn check_messages(&mut self, _messages: &[Message]) -> ConvResult<()> {
        Ok(())
    }

    /// The tool choice (reading it may itself be refused).
    fn tool_choice(&mut self, cx: &Context) -> ConvResult<Option<RequestToolChoice>>;

    /// Checks after the tool choice is applied; `any_declared` tells whether the request
    /// declared tools (before `tool_choice: none` removed them).
    fn check_after_tool_choice(
        &mut self,
        _messages: &[Message],
        _any_declared: bool,
    ) -> ConvResult<()> {
        Ok(())
    }

    /// The requested response format.
    fn response_format(&mut self) -> FormatRequest {
        FormatRequest::none()
    }

    /// Checks after the response schema, before the tool list is finished.
    fn check_before_tools(
        &mut self,
        _messages: &[Message],
        _format: &RequestedFormat,
    ) -> ConvResult<()> {
        Ok(())
    }

    /// Work once the final tool list is known.
    fn after_tools(
        &mut self,
        _messages: &mut Vec<Message>,
        _tools: &[ToolDefinition],
    ) -> ConvResult<()> {
        Ok(())
    }

    /// Sampling checks that come before temperature and top_p.
    fn check_leading_sampling(&self) -> ConvResult<()> {
        Ok(())
    }

    /// The requested temperature and top_p (checked by the driver).
    fn temperature_top_p(&self) -> (Option<f32>, Option<f32>);

    /// The remaining sampling checks and settings (`max_tokens_bound` for this thinking mode).
    fn finish_sampling(&mut self, max_tokens_bound: u32) -> ConvResult<Sampling>;

    /// Whether the request allows several tool calls in one answer (`None`: not said).
    fn parallel_tool_calls(&self) -> Option<bool> {
        None
    }
}

/// Convert a request through the shared sequence (see the module documentation).
pub fn convert<F: RequestFormat>(
    mut format: F,
    options: &ConversionOptions,
) -> ConvResult<ConversationRequest> {
    let version = common::resolve_model(options, format.model())?;
    let (switch, effort) = format.thinking_request();
    let (thinking, effort) =
        common::resolve_thinking(switch, effort, options.default_thinking_mode);
    let cx = Context {
        options,
        version,
        thinking,
        image_token: options.special_tokens.get(SpecialToken::Image).to_owned(),
    };

    let mut declared = format.declare_tools(&cx)?;
    let mut messages = format.convert_messages(&cx, &declared)?;
    common::apply_reasoning_policy(
        &mut messages,
        thinking,
        options.reasoning_content_behavior,
        common::ReasoningField {
            name: F::REASONING_FIELD,
            tools_declared: format.declares_tools(&declared),
        },
    )?;
    format.check_messages(&messages)?;

    let choice = format.tool_choice(&cx)?;
    let any_declared = !declared.is_empty();
    common::drop_tools_for_none(&mut declared, &choice);
    common::check_tools(&mut declared)?;
    let (declared, tool_choice) = common::apply_tool_choice(declared, choice, thinking)?;
    format.check_after_tool_choice(&messages, any_declared)?;

    let requested = format.response_format();
    let strict_constraint = requested.format.check_schema()?;
    format.check_before_tools(&messages, &requested.format)?;
    let tools = common::finish_tools(declared)?;
    if tools.strict && requested.excludes_strict_tools {
        return reject("response_format should not be used with tools");
    }
    format.after_tools(&mut messages, &tools.tools)?;
    let (response_format, json_constraint) = requested.format.into_conversation(strict_constraint);

    format.check_leading_sampling()?;
    let (temperature, top_p) = format.temperature_top_p();
    common::check_temperature(temperature)?;
    common::check_top_p(top_p)?;
    let sampling = format.finish_sampling(options.max_tokens_upper_bound(thinking))?;

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
            max_tokens: sampling.max_tokens,
            temperature,
            top_p,
            logprobs: sampling.logprobs,
            top_logprobs: sampling.top_logprobs,
            seed: sampling.seed,
            stop: sampling.stop,
            stream: sampling.stream,
            include_usage: sampling.include_usage,
            parallel_tool_calls: format.parallel_tool_calls(),
        },
        options,
    ))
}
