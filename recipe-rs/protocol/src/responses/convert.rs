//! Conversion of a Responses request, as the steps of the shared driver.

use serde_json::Value;

use recipe_core::profile::DeveloperMessage;
use recipe_core::{
    AssistantMessage, ImageDetail, ImageText, Message, ModelVersion, SystemMessage, ToolCall,
    ToolMessage, UserMessage,
};

use super::call_group::CallGroup;
use super::items::{Content, Item, ResponsesContentBlock, Role};
use super::tools::{declared_tools, str_field};
use super::types::*;
use crate::common::image_url::{checked_image_url, too_long_advice, url_too_long, ImageUrlProblem};
use crate::common::response_format::RequestedFormat;
use crate::common::{self, DeclaredTool, ImagePart, Part, RequestEffort, RequestToolChoice};
use crate::driver::{Context, FormatRequest, RequestFormat, Sampling};
use crate::error::{reject, ConvResult};
use crate::options::WebSearchBehavior;

/// A Responses request being converted.
pub(super) struct ResponsesConversion {
    pub(super) req: ResponsesRequest,
}

impl RequestFormat for ResponsesConversion {
    const REASONING_FIELD: &'static str = "reasoning_text";

    fn model(&self) -> &str {
        &self.req.model
    }

    fn thinking_request(&self) -> (Option<bool>, Option<RequestEffort>) {
        (None, self.req.reasoning.as_ref().and_then(|r| r.effort))
    }

    fn declare_tools(&mut self, cx: &Context) -> ConvResult<Vec<DeclaredTool>> {
        let tools = self.req.tools.as_deref().unwrap_or(&[]);
        Ok(declared_tools(tools, cx.options, cx.version, false)?.0)
    }

    fn convert_messages(
        &mut self,
        cx: &Context,
        _declared: &[DeclaredTool],
    ) -> ConvResult<Vec<Message>> {
        let image_token = cx.image_token.as_str();
        let mut messages: Vec<Message> = Vec::new();
        let instructions = self.req.instructions.as_deref().filter(|i| !i.is_empty());
        if let Some(instr) = instructions {
            messages.push(Message::System(SystemMessage::from_text(
                ImageText::plain(instr),
                Vec::new(),
                image_token,
            )));
        }
        match self.req.input.take() {
            None => {
                if instructions.is_none() {
                    return reject("Either input or instructions must be provided");
                }
            }
            Some(ResponsesInput::Text(t)) => messages.push(Message::User(UserMessage::from_text(
                ImageText::plain(t),
                Vec::new(),
                image_token,
            ))),
            Some(ResponsesInput::Items(items)) => {
                if items.is_empty() {
                    return reject("Input items array must not be empty");
                }
                convert_items(items, cx.version, image_token, &mut messages)?;
            }
        }
        Ok(messages)
    }

    fn tool_choice(&mut self, cx: &Context) -> ConvResult<Option<RequestToolChoice>> {
        Ok(match &self.req.tool_choice {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => match s.as_str() {
                "none" => Some(RequestToolChoice::None),
                "required" => Some(RequestToolChoice::Required),
                _ => Some(RequestToolChoice::Auto),
            },
            Some(Value::Object(o)) => match o.get("type").and_then(Value::as_str) {
                // A custom tool is named the same way as a function tool.
                Some("function") | Some("custom") => Some(RequestToolChoice::Named(
                    str_field(o, "name").unwrap_or_default(),
                )),
                Some("web_search") | Some("web_search_2025_08_26") => {
                    if cx.options.responses_web_search == WebSearchBehavior::Reject {
                        return reject("Server tools are not supported");
                    }
                    None
                }
                _ => None,
            },
            Some(_) => None,
        })
    }

    /// `parallel_tool_calls: false` allows one call (the prompt is the same either way: only
    /// the output grammar reads it).
    fn parallel_tool_calls(&self) -> Option<bool> {
        self.req
            .parallel_tool_calls
            .as_ref()
            .and_then(Value::as_bool)
    }

    fn response_format(&mut self) -> FormatRequest {
        let format = match self.req.text.take().and_then(|t| t.format) {
            None | Some(ResponsesTextFormat::Text) => RequestedFormat::Text,
            Some(ResponsesTextFormat::JsonObject) => RequestedFormat::JsonObject,
            Some(ResponsesTextFormat::JsonSchema { schema, strict, .. }) => {
                RequestedFormat::JsonSchema {
                    schema,
                    strict: strict == Some(true),
                }
            }
        };
        let excludes_strict_tools = !matches!(format, RequestedFormat::Text);
        FormatRequest {
            format,
            excludes_strict_tools,
        }
    }

    fn check_before_tools(
        &mut self,
        messages: &[Message],
        format: &RequestedFormat,
    ) -> ConvResult<()> {
        if format.is_json_object() && !common::mentions_json(messages) {
            return reject("Response input messages must contain the word 'json' in some form to use 'text.format' of type 'json_object'.");
        }
        Ok(())
    }

    fn temperature_top_p(&self) -> (Option<f32>, Option<f32>) {
        (self.req.temperature, self.req.top_p)
    }

    fn finish_sampling(&mut self, max_tokens_bound: u32) -> ConvResult<Sampling> {
        if self.req.top_logprobs.is_some_and(|t| t > 20) {
            return reject(
                "Invalid top_logprobs value, the valid range of top_logprobs is [0, 20].",
            );
        }
        common::check_max_tokens(self.req.max_output_tokens, max_tokens_bound)?;
        Ok(Sampling {
            max_tokens: self.req.max_output_tokens,
            logprobs: self.req.top_logprobs.is_some(),
            top_logprobs: self.req.top_logprobs.map(u32::from),
            seed: None,
            stop: Vec::new(),
            stream: self.req.stream.unwrap_or(false),
            include_usage: false,
        })
    }
}

/// Whether a `developer` message becomes a user message (otherwise a system message).
fn developer_as_user(version: ModelVersion) -> bool {
    version.profile().conversion.developer_message == DeveloperMessage::User
}

/// Text and image parts of a message's content or an output (`field` names it in messages:
/// `content` or `output`); V4.1 refuses images without a usable source, V4 shows them as text.
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
        // Every image part needs a source, and an external URL within the length limit, before
        // anything else about the parts is checked (the role included).
        for (j, block) in blocks.iter().enumerate() {
            let ResponsesContentBlock::InputImage {
                image_url, file_id, ..
            } = block
            else {
                continue;
            };
            if let Some(url) = image_url.as_deref().filter(|u| !u.is_empty()) {
                if let Some(n) = url_too_long(url) {
                    return reject(format!(
                        "{path}.{field}[{j}]: image_url {}",
                        too_long_advice(n)
                    ));
                }
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
                        let data = if common::shows_images(version) {
                            match checked_image_url(&url) {
                                Ok(d) => d,
                                Err(ImageUrlProblem::TooLong(n)) => {
                                    return reject(format!(
                                        "{path}.{field}[{j}]: image_url {}",
                                        too_long_advice(n)
                                    ))
                                }
                                Err(p) => return reject(format!("{path}: {}", p.message())),
                            }
                        } else {
                            common::image_data_from_url(&url)
                                .unwrap_or(recipe_core::ImageData::Url(url))
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

/// The tool message of an output's parts, answering call `call_id` (`None`: an output that names
/// no call).
fn call_output(
    parts: Vec<Part>,
    call_id: Option<String>,
    version: ModelVersion,
    image_token: &str,
    path: &str,
) -> ToolMessage {
    let (text, image_sources) = common::join_parts(parts, version, image_token, path);
    ToolMessage::from_text(text, call_id, image_sources, image_token)
}

/// The input items as messages, appended to `messages`: calls grouped into assistant turns
/// with their outputs, reasoning items carried onto the next assistant turn.
fn convert_items(
    items: Vec<InputItem>,
    version: ModelVersion,
    image_token: &str,
    messages: &mut Vec<Message>,
) -> ConvResult<()> {
    let mut pending_reasoning: Option<String> = None;
    let mut group = CallGroup::default();

    for (i, item) in items.into_iter().enumerate() {
        let path = format!("input[{i}]");
        let InputItem(item) = item;
        let call_id = match &item {
            Item::FunctionCall(c) => Some(c.call_id.as_str()),
            Item::FunctionCallOutput(id, _) => id.as_deref(),
            Item::CustomToolCallOutput(id, _) => Some(id.as_str()),
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
                // Its parts are read first (their errors come before an unanswered call's);
                // then it ends the run of calls before it (which must be answered by then) and
                // stands alone as a tool message.
                let parts = content_parts(content, &path, version, false, "output")?;
                group.close(messages)?;
                messages.push(Message::Tool(call_output(
                    parts,
                    None,
                    version,
                    image_token,
                    &path,
                )));
            }
            Item::FunctionCallOutput(Some(call_id), content) => {
                // The output's parts are read before its call is looked up.
                let parts = content_parts(content, &path, version, false, "output")?;
                group.check_output(&call_id)?;
                group.add_output(call_output(
                    parts,
                    Some(call_id),
                    version,
                    image_token,
                    &path,
                ));
            }
            Item::CustomToolCallOutput(call_id, content) => {
                // Its call is looked up first: an unanswered-call error comes before a bad part's.
                group.check_output(&call_id)?;
                let parts = content_parts(content, &path, version, false, "output")?;
                group.add_output(call_output(
                    parts,
                    Some(call_id),
                    version,
                    image_token,
                    &path,
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
                    // Reasoning not followed by an assistant message stands as its own turn.
                    if let Some(r) = pending_reasoning.take() {
                        messages.push(reasoning_turn(r));
                    }
                }
                let (text, image_sources) = common::join_parts(parts, version, image_token, &path);
                match role {
                    Role::User => messages.push(Message::User(UserMessage::from_text(
                        text,
                        image_sources,
                        image_token,
                    ))),
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
        messages.push(reasoning_turn(r));
    }
    Ok(())
}

/// An assistant turn that holds only carried-over reasoning.
fn reasoning_turn(reasoning: String) -> Message {
    Message::Assistant(AssistantMessage {
        content: String::new(),
        reasoning_content: Some(reasoning),
        tool_calls: None,
        prefix: false,
    })
}
