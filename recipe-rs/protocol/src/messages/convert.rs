//! Conversion of a Messages request, as the steps of the shared driver.

use serde_json::Value;

use recipe_core::profile::SystemTurn;
use recipe_core::{
    AssistantMessage, ImageDetail, ImageSource, ImageText, Message, SystemMessage, ToolCall,
    ToolDefinition, ToolMessage, UserMessage,
};

use super::blocks::{
    image_from_source, spaced_json, system_parts, tool_addition_misplaced, tool_result_parts,
    SERVER_BLOCK_REJECTED,
};
use super::types::*;
use crate::common::{self, DeclaredTool, RequestEffort, RequestToolChoice};
use crate::driver::{Context, RequestFormat, Sampling};
use crate::error::{reject, ConvResult};
use crate::options::WebSearchBehavior;

/// A Messages request being converted.
pub(super) struct MessagesConversion {
    req: MessagesRequest,
    /// Mid-conversation system messages (by index) and the tools they announce.
    announced: Vec<(usize, Vec<String>)>,
    /// Whether a server tool (web search) was declared, even if it is left out.
    server_tools: bool,
    /// `tool_choice.disable_parallel_tool_use`, negated (read when the choice is taken).
    parallel_tool_calls: Option<bool>,
}

impl MessagesConversion {
    pub(super) fn new(req: MessagesRequest) -> Self {
        MessagesConversion {
            req,
            announced: Vec::new(),
            server_tools: false,
            parallel_tool_calls: None,
        }
    }
}

impl RequestFormat for MessagesConversion {
    const REASONING_FIELD: &'static str = "content[].thinking";

    fn model(&self) -> &str {
        &self.req.model
    }

    fn thinking_request(&self) -> (Option<bool>, Option<RequestEffort>) {
        let switch = self
            .req
            .thinking
            .as_ref()
            .map(|t| !matches!(t.kind, crate::chat::ThinkingType::Disabled));
        (
            switch,
            self.req.output_config.as_ref().and_then(|o| o.effort),
        )
    }

    fn declare_tools(&mut self, cx: &Context) -> ConvResult<Vec<DeclaredTool>> {
        let (options, version) = (cx.options, cx.version);
        let mut declared = Vec::new();
        for (i, tool) in self.req.tools.take().unwrap_or_default().iter().enumerate() {
            let Some(obj) = tool.as_object() else {
                continue;
            };
            // A `type` (even `custom`) makes a server tool.
            if let Some(t) = obj.get("type").and_then(Value::as_str) {
                if options.messages_web_search == WebSearchBehavior::Reject
                    || !t.starts_with("web_search")
                {
                    return reject(format!("tools[{i}]: server tools are not supported"));
                }
                self.server_tools = true;
                continue;
            }
            let name = obj
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            common::check_tool_name(&name, &format!("tools[{i}].name"))?;
            let tool = DeclaredTool {
                name,
                description: obj
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                // A missing schema is validated as `null` (and fails); `strict` is not read.
                parameters: Some(obj.get("input_schema").cloned().unwrap_or(Value::Null)),
                strict: None,
                // Versions without deferred tools list every declared tool.
                defer_loading: version.profile().conversion.deferred_tools
                    && obj.get("defer_loading").and_then(Value::as_bool) == Some(true),
            };
            declared.push(tool);
        }
        if !declared.is_empty() && declared.iter().all(|t| t.defer_loading) {
            return reject(
                "tools: at least one tool must have defer_loading=false. All tools cannot be deferred.",
            );
        }
        Ok(declared)
    }

    /// A declared server tool counts too, though it is left out of the tool list (as the
    /// official package counts it).
    fn declares_tools(&self, declared: &[DeclaredTool]) -> bool {
        !declared.is_empty() || self.server_tools
    }

    fn convert_messages(
        &mut self,
        cx: &Context,
        declared: &[DeclaredTool],
    ) -> ConvResult<Vec<Message>> {
        if self.req.messages.is_empty() {
            return reject("messages: at least one message is required");
        }
        let mut turns = Turns {
            cx,
            messages: Vec::new(),
            announced: Vec::new(),
        };
        if let Some(system) = self.req.system.take() {
            let text = ImageText::plain(system.join("\n\n"));
            turns.push_system(text, Vec::new());
        }
        let request_messages = std::mem::take(&mut self.req.messages);
        let n_messages = request_messages.len();
        // Calls of the previous turn: the next turn must answer every one of them.
        let mut previous_calls: Vec<String> = Vec::new();
        for (i, m) in request_messages.into_iter().enumerate() {
            let (role, content) = m.split();
            // (An empty system turn is dropped instead.)
            if content.is_empty() && !matches!(role, Role::System) {
                return reject(format!(
                    "messages.{i}: all messages must have non-empty content"
                ));
            }
            let owed = std::mem::take(&mut previous_calls);
            if matches!(role, Role::System) {
                turns.system_turn(content, i, declared)?;
                if !owed.is_empty() {
                    return reject(unanswered_calls(&format!("messages.{i}: "), &owed));
                }
                continue;
            }
            let answered_here: Vec<String> = content
                .iter()
                .filter_map(|b| match b {
                    MessagesContentBlock::ToolResult { tool_use_id, .. } => {
                        Some(tool_use_id.clone())
                    }
                    _ => None,
                })
                .collect();
            let calls_here = match role {
                Role::Assistant => turns.assistant_turn(content, i)?,
                _ => {
                    turns.user_turn(content, i, role, &owed)?;
                    Vec::new()
                }
            };
            let missing: Vec<String> = owed
                .into_iter()
                .filter(|id| !answered_here.contains(id))
                .collect();
            if !missing.is_empty() {
                return reject(unanswered_calls(&format!("messages.{i}: "), &missing));
            }
            previous_calls = calls_here;
        }
        // Calls of a final assistant turn are never answered.
        if !previous_calls.is_empty() {
            return reject(unanswered_calls(
                &format!("messages.{}:", n_messages - 1),
                &previous_calls,
            ));
        }
        self.announced = turns.announced;
        Ok(turns.messages)
    }

    fn tool_choice(&mut self, _cx: &Context) -> ConvResult<Option<RequestToolChoice>> {
        let choice = self.req.tool_choice.take();
        self.parallel_tool_calls = choice
            .as_ref()
            .and_then(MessagesToolChoice::parallel_tool_calls);
        Ok(choice.map(|c| match c {
            MessagesToolChoice::Auto { .. } => RequestToolChoice::Auto,
            // `any` is accepted but served as `auto`.
            MessagesToolChoice::Any { .. } => RequestToolChoice::Auto,
            MessagesToolChoice::Tool { name, .. } => RequestToolChoice::Named(name),
            MessagesToolChoice::None => RequestToolChoice::None,
        }))
    }

    /// `tool_choice.disable_parallel_tool_use: true` allows one call (the prompt is the same
    /// either way: only the output grammar reads it).
    fn parallel_tool_calls(&self) -> Option<bool> {
        self.parallel_tool_calls
    }

    fn after_tools(
        &mut self,
        messages: &mut Vec<Message>,
        tools: &[ToolDefinition],
    ) -> ConvResult<()> {
        announce_tools(messages, std::mem::take(&mut self.announced), tools);
        common::check_stop_list(self.req.stop_sequences.as_deref().unwrap_or_default())
    }

    fn temperature_top_p(&self) -> (Option<f32>, Option<f32>) {
        (self.req.temperature, self.req.top_p)
    }

    fn finish_sampling(&mut self, max_tokens_bound: u32) -> ConvResult<Sampling> {
        if self.req.max_tokens == Some(0) {
            common::check_max_tokens(Some(0), max_tokens_bound)?;
        }
        Ok(Sampling {
            max_tokens: self.req.max_tokens.map(|m| m.min(max_tokens_bound)),
            logprobs: false,
            top_logprobs: None,
            seed: None,
            stop: self.req.stop_sequences.take().unwrap_or_default(),
            stream: self.req.stream.unwrap_or(false),
            include_usage: false,
        })
    }
}

/// left with no text, image or tool is dropped.
fn announce_tools(
    messages: &mut Vec<Message>,
    announced: Vec<(usize, Vec<String>)>,
    tools: &[ToolDefinition],
) {
    let mut emptied = Vec::new();
    for (index, names) in announced {
        let Some(Message::System(system)) = messages.get_mut(index) else {
            continue;
        };
        let defs: Vec<ToolDefinition> = names
            .iter()
            .filter_map(|n| tools.iter().find(|t| &t.name == n).cloned())
            .collect();
        if defs.is_empty() && system.content.is_empty() && system.image_sources.is_empty() {
            emptied.push(index);
        }
        system.tools = Some(defs);
    }
    for index in emptied.into_iter().rev() {
        messages.remove(index);
    }
}

/// Push the collected texts (joined by blank lines) as one user message, or one system
/// message in a system turn.
fn flush_user(texts: &mut Vec<String>, messages: &mut Vec<Message>, image_token: &str, role: Role) {
    if texts.is_empty() {
        return;
    }
    let text = ImageText::plain(texts.join("\n\n"));
    texts.clear();
    let msg = match role {
        Role::System => Message::System(SystemMessage::from_text(text, Vec::new(), image_token)),
        _ => Message::User(UserMessage::from_text(text, Vec::new(), image_token)),
    };
    messages.push(msg);
}

/// The error for calls of the previous turn that `ids` names as unanswered (`at` names the
/// turn, with the official package's spacing).
fn unanswered_calls(at: &str, ids: &[String]) -> String {
    format!(
        "{at}`tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        ids.join(", ")
    )
}

/// The conversation messages written from the request's turns, in order.
struct Turns<'a> {
    cx: &'a Context<'a>,
    messages: Vec<Message>,
    /// Mid-conversation system messages (by index) and the tools they announce.
    announced: Vec<(usize, Vec<String>)>,
}

impl Turns<'_> {
    fn push_system(&mut self, text: ImageText, image_sources: Vec<ImageSource>) {
        let msg = SystemMessage::from_text(text, image_sources, self.cx.image_token.as_str());
        self.messages.push(Message::System(msg));
    }

    /// A mid-conversation system turn (message `i`) is one message: its text, image and
    /// document blocks joined. V4 has no such turn: the text becomes a user reminder (images as
    /// the unsupported-image text); an empty one leaves nothing to remind of.
    fn system_turn(
        &mut self,
        content: Vec<MessagesContentBlock>,
        i: usize,
        declared: &[DeclaredTool],
    ) -> ConvResult<()> {
        let version = self.cx.version;
        let image_token = self.cx.image_token.as_str();
        let (parts, added) = system_parts(content, i, version, declared).map_err(invalid)?;
        let (text, image_sources) =
            common::join_parts(parts, version, image_token, &format!("messages.{i}"));
        if version.profile().conversion.system_turn == SystemTurn::System {
            if !added.is_empty() {
                self.announced.push((self.messages.len(), added));
            }
            self.push_system(text, image_sources);
        } else if !text.content.is_empty() {
            let reminder = ImageText::plain(format!(
                "<system-reminder>\n{}\n</system-reminder>",
                text.content
            ));
            self.messages.push(Message::User(UserMessage::from_text(
                reminder,
                Vec::new(),
                image_token,
            )));
        }
        Ok(())
    }

    /// A user turn (message `i`): runs of text and document blocks become user messages; each
    /// image (V4.1) and each tool result (answering one of `owed`) its own message, in order.
    fn user_turn(
        &mut self,
        content: Vec<MessagesContentBlock>,
        i: usize,
        role: Role,
        owed: &[String],
    ) -> ConvResult<()> {
        let version = self.cx.version;
        let image_token = self.cx.image_token.clone();
        let messages = &mut self.messages;
        let mut texts: Vec<String> = Vec::new();
        for (j, block) in content.into_iter().enumerate() {
            let path = format!("messages.{i}.content[{j}]");
            // Blocks are read in order: a misplaced one fails where it stands.
            if let Some(e) = block.misplaced_outside_assistant(i, role) {
                return reject(e);
            }
            match block {
                MessagesContentBlock::Text { text } => texts.push(text),
                MessagesContentBlock::Image { source } => {
                    let validate = common::shows_images(version);
                    let data = match image_from_source(&source, validate) {
                        Ok(d) => d,
                        Err(m) => return reject(format!("{path}: {m}")),
                    };
                    if let Some(data) = data {
                        if !common::shows_images(version) {
                            texts.push(common::UNSUPPORTED_IMAGE.to_owned());
                        } else {
                            flush_user(&mut texts, messages, &image_token, role);
                            let mut text = ImageText::default();
                            text.push_placeholder(&image_token);
                            let source = ImageSource {
                                data,
                                detail: ImageDetail::default(),
                                path,
                            };
                            messages.push(Message::User(UserMessage::from_text(
                                text,
                                vec![source],
                                image_token.as_str(),
                            )));
                        }
                    }
                }
                MessagesContentBlock::Document { source } => {
                    let mt = source.media_type.unwrap_or_else(|| "unknown".to_owned());
                    texts.push(format!("[Unsupported document type: {mt}]"));
                }
                MessagesContentBlock::ToolResult {
                    tool_use_id,
                    content,
                } => {
                    if !owed.contains(&tool_use_id) {
                        return reject(format!(
                            "unexpected `messages.{i}.content.{j}: tool_use_id` found in `tool_result` blocks: {tool_use_id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        ));
                    }
                    flush_user(&mut texts, messages, &image_token, role);
                    let path = format!("messages.{i}.content.{j}.tool_result");
                    let parts = tool_result_parts(content, &path, version).map_err(invalid)?;
                    let (text, image_sources) =
                        common::join_parts(parts, version, &image_token, &path);
                    messages.push(Message::Tool(ToolMessage::from_text(
                        text,
                        Some(tool_use_id),
                        image_sources,
                        image_token.as_str(),
                    )));
                }
                // Rejected above (see `misplaced_outside_assistant`).
                MessagesContentBlock::ServerToolUse { .. }
                | MessagesContentBlock::WebSearchToolResult { .. }
                | MessagesContentBlock::Thinking { .. }
                | MessagesContentBlock::ToolUse { .. }
                | MessagesContentBlock::ToolAddition { .. } => {}
            }
            if !texts.is_empty() {
                flush_user(&mut texts, messages, &image_token, role);
            }
        }
        flush_user(&mut texts, messages, &image_token, role);
        Ok(())
    }

    /// An assistant turn (message `i`) is one assistant message; returns the IDs of its calls.
    fn assistant_turn(
        &mut self,
        content: Vec<MessagesContentBlock>,
        i: usize,
    ) -> ConvResult<Vec<String>> {
        let mut texts = Vec::new();
        let mut reasoning: Option<String> = None;
        let mut calls = Vec::new();
        let mut ids = Vec::new();
        for block in content {
            match block {
                MessagesContentBlock::Text { text } => texts.push(text),
                MessagesContentBlock::Thinking { thinking, .. } => reasoning = Some(thinking),
                MessagesContentBlock::ToolUse { id, name, input } => {
                    ids.push(id.clone());
                    calls.push(ToolCall {
                        id,
                        name,
                        arguments: spaced_json(&input),
                    });
                }
                MessagesContentBlock::ServerToolUse { .. }
                | MessagesContentBlock::WebSearchToolResult { .. }
                    if self.cx.options.messages_web_search == WebSearchBehavior::Reject =>
                {
                    return reject(SERVER_BLOCK_REJECTED);
                }
                MessagesContentBlock::ToolAddition { .. } => {
                    return reject(tool_addition_misplaced(i));
                }
                _ => {}
            }
        }
        self.messages.push(Message::Assistant(AssistantMessage {
            content: texts.join("\n\n"),
            reasoning_content: reasoning,
            tool_calls: if calls.is_empty() { None } else { Some(calls) },
            prefix: false,
        }));
        Ok(ids)
    }
}

/// A block-level error message as a conversion error.
fn invalid(message: String) -> crate::error::ConversionError {
    crate::error::ConversionError::invalid(message)
}
