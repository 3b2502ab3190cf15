//! Conversion of a Chat Completions request, as the steps of the shared driver.

use recipe_core::{
    AssistantMessage, ImageDetail, LatestReminderMessage, Message, ModelVersion, SystemMessage,
    ToolCall, ToolMessage, UserMessage,
};

use super::tool_sequence::ToolSequence;
use super::types::*;
use crate::body::de::StringOrList;
use crate::common::image_url::{checked_image_url, too_long_advice, url_too_long, ImageUrlProblem};
use crate::common::response_format::RequestedFormat;
use crate::common::{self, DeclaredTool, ImagePart, Part, RequestEffort, RequestToolChoice};
use crate::driver::{Context, FormatRequest, RequestFormat, Sampling};
use crate::error::{reject, ConvResult};

/// A Chat Completions request being converted (what the steps still need of it).
pub(super) struct ChatConversion {
    req: ChatCompletionRequest,
    stop: Vec<String>,
    stream: bool,
}

impl ChatConversion {
    pub(super) fn new(req: ChatCompletionRequest) -> Self {
        ChatConversion {
            req,
            stop: Vec::new(),
            stream: false,
        }
    }

    fn is_json_object(&self) -> bool {
        matches!(
            self.req.response_format,
            Some(ChatCompletionResponseFormat::JsonObject)
        )
    }
}

impl RequestFormat for ChatConversion {
    const REASONING_FIELD: &'static str = "reasoning_content";

    fn model(&self) -> &str {
        &self.req.model
    }

    fn thinking_request(&self) -> (Option<bool>, Option<RequestEffort>) {
        let switch = self
            .req
            .thinking
            .as_ref()
            .map(|t| !matches!(t.kind, ThinkingType::Disabled));
        (switch, self.req.reasoning_effort)
    }

    fn declare_tools(&mut self, _cx: &Context) -> ConvResult<Vec<DeclaredTool>> {
        // Tool names are checked first, the rest of the tool rules after the messages.
        let mut declared = Vec::new();
        for (i, tool) in self
            .req
            .tools
            .take()
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            let f = tool.function;
            common::check_tool_name(&f.name, &format!("tools[{i}].function.name"))?;
            declared.push(DeclaredTool {
                name: f.name,
                description: f.description,
                parameters: f.parameters,
                strict: f.strict,
                defer_loading: false,
            });
        }
        Ok(declared)
    }

    fn convert_messages(
        &mut self,
        cx: &Context,
        _declared: &[DeclaredTool],
    ) -> ConvResult<Vec<Message>> {
        if self.req.messages.is_empty() {
            return reject("Empty input messages");
        }
        // Messages, in order; tool results are matched against the preceding tool calls.
        let request_messages = std::mem::take(&mut self.req.messages);
        let mut messages = Vec::with_capacity(request_messages.len());
        let mut sequence = ToolSequence::default();
        for (i, m) in request_messages.into_iter().enumerate() {
            let tool_call_id = match &m {
                ChatCompletionRequestMessage::Tool { tool_call_id, .. } => {
                    Some(tool_call_id.as_str())
                }
                _ => None,
            };
            sequence.before(tool_call_id, i)?;
            let msg = convert_message(m, i, cx.version, &cx.image_token)?;
            sequence.after(&msg);
            if matches!(&msg, Message::System(sys) if sys.content.is_empty() && sys.image_sources.is_empty())
            {
                continue;
            }
            messages.push(msg);
        }
        sequence.finish()?;
        Ok(messages)
    }

    fn check_messages(&mut self, messages: &[Message]) -> ConvResult<()> {
        // Prefix continuation: only as the last message, without tools or json_object.
        let n_kept = messages.len();
        for (i, m) in messages.iter().enumerate() {
            if let Message::Assistant(a) = m {
                if a.prefix && i + 1 != n_kept {
                    return reject("Invalid completion message: prefix set true with message which is not final message or message role is not assistant");
                }
            }
        }
        if self.is_json_object() && !common::mentions_json(messages) {
            return reject(common::JSON_WORD_REQUIRED);
        }
        Ok(())
    }

    fn tool_choice(&mut self, _cx: &Context) -> ConvResult<Option<RequestToolChoice>> {
        Ok(self.req.tool_choice.take().map(|c| match c {
            ChatToolChoice::None => RequestToolChoice::None,
            ChatToolChoice::Auto => RequestToolChoice::Auto,
            ChatToolChoice::Required => RequestToolChoice::Required,
            ChatToolChoice::Function(n) => RequestToolChoice::Named(n),
        }))
    }

    fn check_after_tool_choice(
        &mut self,
        messages: &[Message],
        any_declared: bool,
    ) -> ConvResult<()> {
        // The official order: tool-choice errors first, then json_object with prefix, then calls
        // with prefix.
        let is_prefix = matches!(messages.last(), Some(Message::Assistant(a)) if a.prefix);
        if is_prefix && self.is_json_object() {
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
        self.stop = match self.req.stop.take() {
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
        self.stream = self.req.stream.unwrap_or(false);
        if self.req.stream_options.is_some() && !self.stream {
            return reject("stream_options should be set along with stream = true");
        }
        Ok(())
    }

    fn response_format(&mut self) -> FormatRequest {
        let requested = self.req.response_format.take();
        let excludes_strict_tools = requested.is_some();
        let format = match requested {
            None | Some(ChatCompletionResponseFormat::Text) => RequestedFormat::Text,
            Some(ChatCompletionResponseFormat::JsonObject) => RequestedFormat::JsonObject,
            Some(ChatCompletionResponseFormat::JsonSchema { json_schema }) => {
                RequestedFormat::JsonSchema {
                    schema: json_schema.schema,
                    strict: json_schema.strict == Some(true),
                }
            }
            Some(ChatCompletionResponseFormat::Regex { regex }) => RequestedFormat::Regex(regex),
        };
        FormatRequest {
            format,
            excludes_strict_tools,
        }
    }

    fn check_leading_sampling(&self) -> ConvResult<()> {
        if self.req.n.is_some_and(|n| n != 1) {
            return reject("Invalid n value (currently only n = 1 is supported)");
        }
        // The penalties are not applied, but out-of-range values are refused: presence first, as
        // officially (both out of range report presence_penalty).
        for (name, value) in [
            ("presence_penalty", self.req.presence_penalty),
            ("frequency_penalty", self.req.frequency_penalty),
        ] {
            if value.is_some_and(|v| !(-2.0..=2.0).contains(&v)) {
                return reject(format!(
                    "Invalid {name} value, the valid range of {name} is [-2, 2]"
                ));
            }
        }
        Ok(())
    }

    fn temperature_top_p(&self) -> (Option<f32>, Option<f32>) {
        (self.req.temperature, self.req.top_p)
    }

    fn finish_sampling(&mut self, max_tokens_bound: u32) -> ConvResult<Sampling> {
        let logprobs = self.req.logprobs.unwrap_or(false);
        if let Some(top) = self.req.top_logprobs {
            if !logprobs {
                return reject("Invalid top_logprobs and logprobs value, logprobs must be set to true if top_logprobs is used.");
            }
            if top > 20 {
                return reject(
                    "Invalid top_logprobs value, the valid range of top_logprobs is [0, 20].",
                );
            }
        }
        common::check_max_tokens(self.req.max_tokens, max_tokens_bound)?;
        if self.req.seed.is_some_and(|s| s >= 1 << 63) {
            return reject("Invalid seed value, the valid range of seed is [0, 2^63)");
        }
        Ok(Sampling {
            max_tokens: self.req.max_tokens,
            logprobs,
            top_logprobs: self.req.top_logprobs.map(u32::from),
            seed: self.req.seed,
            stop: std::mem::take(&mut self.stop),
            stream: self.stream,
            include_usage: self
                .req
                .stream_options
                .as_ref()
                .and_then(|o| o.include_usage)
                == Some(true),
        })
    }

    fn parallel_tool_calls(&self) -> Option<bool> {
        self.req.parallel_tool_calls
    }
}

/// One request message as a conversation message (`i` is its index in the request).
fn convert_message(
    m: ChatCompletionRequestMessage,
    i: usize,
    version: ModelVersion,
    image_token: &str,
) -> ConvResult<Message> {
    let path = format!(".messages[{i}]");
    Ok(match m {
        ChatCompletionRequestMessage::System { content, .. } => {
            let parts = content_parts(content, &path, true, version)?;
            let (text, image_sources) = common::join_parts(parts, version, image_token, &path);
            Message::System(SystemMessage::from_text(text, image_sources, image_token))
        }
        ChatCompletionRequestMessage::User { content, .. } => {
            let parts = content_parts(content, &path, true, version)?;
            let (text, image_sources) = common::join_parts(parts, version, image_token, &path);
            Message::User(UserMessage::from_text(text, image_sources, image_token))
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
                    common::join_parts(parts, version, image_token, &path)
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
            let (text, image_sources) = common::join_parts(parts, version, image_token, &path);
            Message::Tool(ToolMessage::from_text(
                text,
                Some(tool_call_id),
                image_sources,
                image_token,
            ))
        }
        ChatCompletionRequestMessage::LatestReminder { content } => {
            Message::LatestReminder(LatestReminderMessage { content })
        }
    })
}

/// The official message for a string field that must not be empty.
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
    if common::shows_images(version) {
        // Officially one pass over the parts comes first: a file part, or an external URL over
        // the length limit, is refused there (whichever comes first), before the role or any
        // other check of an image part.
        for (j, block) in blocks.iter().enumerate() {
            match block {
                ChatCompletionRequestContentBlock::File { .. } => {
                    return reject(format!("{path}: file must have a file_id or file_data"));
                }
                ChatCompletionRequestContentBlock::ImageUrl { image_url } => {
                    if let Some(n) = url_too_long(&image_url.url) {
                        return reject(format!(
                            "{path}.image_url.url[{j}]: image_url.url {}",
                            too_long_advice(n)
                        ));
                    }
                }
                ChatCompletionRequestContentBlock::Text { .. } => {}
            }
        }
    }
    let mut parts = Vec::with_capacity(blocks.len());
    for (j, block) in blocks.into_iter().enumerate() {
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
                let data = if common::shows_images(version) {
                    match checked_image_url(&image_url.url) {
                        Ok(d) => d,
                        Err(ImageUrlProblem::TooLong(n)) => {
                            return reject(format!(
                                "{path}.image_url.url[{j}]: image_url.url {}",
                                too_long_advice(n)
                            ))
                        }
                        Err(p) => return reject(format!("{path}: {}", p.message())),
                    }
                } else {
                    common::image_data_from_url(&image_url.url)
                        .unwrap_or(recipe_core::ImageData::Url(image_url.url))
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
