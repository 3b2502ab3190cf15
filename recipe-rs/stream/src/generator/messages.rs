//! Anthropic Messages: stream events.
//!
//! A stream is `message_start`, then content blocks one at a time — thinking, text or tool use —
//! each `content_block_start`, `content_block_delta`s and `content_block_stop` (a thinking block
//! gets a `signature_delta` before its stop), a single `ping` after the first block opens, and
//! finally `message_delta` (stop reason and usage) and `message_stop`.
//!
//! The types below are the wire form: field order is key order.

use serde::Serialize;
use serde_json::Value;

use super::{
    call_id, write_decimal, write_json_str, write_serde, AlwaysNull, EmptyArray, EmptyObject,
    FinishKind, StreamItem, Usage, WireJson,
};
use crate::input::PromptUsage;
use crate::parser::ParseEvent;

wire_events! {
    /// One Anthropic Messages stream event.
    MessagesEvent {
        /// The stream opened: the message, with no content yet.
        MessageStart = "message_start" { message: MessageObject }
        /// A content block opened at `index` (empty).
        ContentBlockStart = "content_block_start" { index: usize, content_block: ContentBlock }
        /// Sent once, after the first block opens.
        Ping = "ping" {}
        /// More of the block at `index`.
        ContentBlockDelta = "content_block_delta" { index: usize, delta: BlockDelta }
        /// The block at `index` is complete.
        ContentBlockStop = "content_block_stop" { index: usize }
        /// Why the message ended, with the final usage.
        MessageDelta = "message_delta" { delta: StopDelta, usage: MessagesUsage }
        /// The stream ended.
        MessageStop = "message_stop" {}
    }
}

/// The per-token events (`content_block_delta` with text, thinking or input JSON) are written
/// with their keys as literals; the others through serde. The bytes are the same.
impl WireJson for MessagesEvent {
    fn write_json(&self, buf: &mut Vec<u8>) {
        let MessagesEvent::ContentBlockDelta { index, delta } = self else {
            return write_serde(self, buf);
        };
        let (head, text): (&[u8], &str) = match delta {
            BlockDelta::TextDelta { text } => (b"{\"type\":\"text_delta\",\"text\":", text),
            BlockDelta::ThinkingDelta { thinking } => {
                (b"{\"type\":\"thinking_delta\",\"thinking\":", thinking)
            }
            BlockDelta::InputJsonDelta { partial_json } => (
                b"{\"type\":\"input_json_delta\",\"partial_json\":",
                partial_json,
            ),
            BlockDelta::SignatureDelta { .. } => return write_serde(self, buf),
        };
        buf.extend_from_slice(b"{\"type\":\"content_block_delta\",\"index\":");
        write_decimal(buf, *index as u64);
        buf.extend_from_slice(b",\"delta\":");
        buf.extend_from_slice(head);
        write_json_str(buf, text);
        buf.extend_from_slice(b"}}");
    }
}

impl MessagesEvent {
    /// The event as a JSON value.
    pub fn to_value(&self) -> Value {
        super::to_value(self)
    }
}

/// The message of `message_start`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MessageObject {
    pub id: String,
    /// Always `"message"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Always `"assistant"`.
    pub role: &'static str,
    pub model: String,
    pub content: EmptyArray,
    pub stop_reason: AlwaysNull,
    pub stop_sequence: AlwaysNull,
    pub usage: MessagesUsage,
}

/// A content block as it opens (empty).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Thinking {
        thinking: String,
        signature: String,
    },
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: EmptyObject,
    },
}

/// What a `content_block_delta` adds.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockDelta {
    ThinkingDelta {
        thinking: String,
    },
    TextDelta {
        text: String,
    },
    /// More of a tool call's input, as JSON text.
    InputJsonDelta {
        partial_json: String,
    },
    /// The signature that closes a thinking block.
    SignatureDelta {
        signature: String,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StopDelta {
    /// `end_turn`, `tool_use`, `stop_sequence`, `max_tokens` or `refusal`.
    pub stop_reason: &'static str,
    /// The stop sequence that ended the message, for `stop_sequence`.
    pub stop_sequence: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MessagesUsage {
    /// Prompt tokens not served from the cache.
    pub input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub output_tokens: u64,
    /// Always `"standard"`.
    pub service_tier: &'static str,
}

// ------------------------------------------------------------------------------------------
// Generator
// ------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OpenBlock {
    Thinking,
    Text,
    Tool,
}

pub struct MessagesGenerator {
    id: String,
    model: String,
    thinking_mode: bool,
    signature: Option<String>,
    started: bool,
    pinged: bool,
    open: Option<OpenBlock>,
    index: usize,
    blocks: usize,
    reasoning_seen: bool,
    prompt: PromptUsage,
    /// Whether the parser starts in reasoning (set by the processor).
    pub parser_starts_in_reasoning: bool,
}

impl MessagesGenerator {
    pub fn new(id: impl Into<String>, model: impl Into<String>, thinking_mode: bool) -> Self {
        MessagesGenerator {
            id: id.into(),
            model: model.into(),
            thinking_mode,
            signature: None,
            started: false,
            pinged: false,
            open: None,
            index: 0,
            blocks: 0,
            reasoning_seen: false,
            prompt: PromptUsage::default(),
            parser_starts_in_reasoning: false,
        }
    }

    pub fn with_signature(mut self, signature: impl Into<String>) -> Self {
        self.signature = Some(signature.into());
        self
    }

    fn usage(&self, output_tokens: u64) -> MessagesUsage {
        MessagesUsage {
            input_tokens: self
                .prompt
                .prompt_tokens
                .saturating_sub(self.prompt.prompt_cache_hit_tokens),
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: self.prompt.prompt_cache_hit_tokens,
            output_tokens,
            service_tier: "standard",
        }
    }

    pub(super) fn ready(&mut self, usage: Option<PromptUsage>, out: &mut Vec<StreamItem>) {
        if let Some(u) = usage {
            if !self.started {
                self.prompt = u;
            }
        }
        self.start(out);
    }

    pub(super) fn start(&mut self, out: &mut Vec<StreamItem>) {
        if self.started {
            return;
        }
        self.started = true;
        let message = MessageObject {
            id: self.id.clone(),
            kind: "message",
            role: "assistant",
            model: self.model.clone(),
            content: EmptyArray,
            stop_reason: (),
            stop_sequence: (),
            usage: self.usage(0),
        };
        out.push(MessagesEvent::MessageStart { message }.into());
        // In thinking mode the thinking block opens with the message; otherwise (a parser that
        // starts in reasoning without thinking mode) it opens with the first reasoning text.
        if self.thinking_mode {
            self.open_block(OpenBlock::Thinking, None, out);
        }
    }

    fn open_block(
        &mut self,
        kind: OpenBlock,
        tool: Option<(String, String)>,
        out: &mut Vec<StreamItem>,
    ) {
        self.close_block(out);
        self.index = self.blocks;
        self.blocks += 1;
        let content_block = match kind {
            OpenBlock::Thinking => ContentBlock::Thinking {
                thinking: String::new(),
                signature: String::new(),
            },
            OpenBlock::Text => ContentBlock::Text {
                text: String::new(),
            },
            OpenBlock::Tool => {
                let (id, name) = tool.unwrap_or_default();
                ContentBlock::ToolUse {
                    id,
                    name,
                    input: EmptyObject,
                }
            }
        };
        out.push(
            MessagesEvent::ContentBlockStart {
                index: self.index,
                content_block,
            }
            .into(),
        );
        if !self.pinged {
            self.pinged = true;
            out.push(MessagesEvent::Ping {}.into());
        }
        self.open = Some(kind);
    }

    fn close_block(&mut self, out: &mut Vec<StreamItem>) {
        let Some(kind) = self.open.take() else { return };
        if kind == OpenBlock::Thinking {
            let signature = self.signature.clone().unwrap_or_else(|| self.id.clone());
            self.delta(BlockDelta::SignatureDelta { signature }, out);
        }
        out.push(MessagesEvent::ContentBlockStop { index: self.index }.into());
    }

    fn delta(&self, delta: BlockDelta, out: &mut Vec<StreamItem>) {
        out.push(
            MessagesEvent::ContentBlockDelta {
                index: self.index,
                delta,
            }
            .into(),
        );
    }

    pub(super) fn event(&mut self, ev: ParseEvent, out: &mut Vec<StreamItem>) {
        match ev {
            ParseEvent::Reasoning { text, .. } => {
                self.reasoning_seen = true;
                if self.open != Some(OpenBlock::Thinking) {
                    self.open_block(OpenBlock::Thinking, None, out);
                }
                self.delta(BlockDelta::ThinkingDelta { thinking: text }, out);
            }
            ParseEvent::Content { text, .. } => {
                if self.open != Some(OpenBlock::Text) {
                    self.open_block(OpenBlock::Text, None, out);
                }
                self.delta(BlockDelta::TextDelta { text }, out);
            }
            ParseEvent::ToolCallStart { index, name } => {
                let id = call_id(index, self.thinking_mode && !self.reasoning_seen);
                self.open_block(OpenBlock::Tool, Some((id, name)), out);
            }
            ParseEvent::ToolCallArgs { text, .. } => {
                if self.open == Some(OpenBlock::Tool) {
                    self.delta(BlockDelta::InputJsonDelta { partial_json: text }, out);
                }
            }
            ParseEvent::ReasoningEnd | ParseEvent::StopSequence(_) => {}
        }
    }

    pub(super) fn finish(&mut self, kind: &FinishKind, usage: Usage, out: &mut Vec<StreamItem>) {
        self.close_block(out);
        let (stop_reason, stop_sequence) = match kind {
            FinishKind::Stop => ("end_turn", None),
            FinishKind::ToolCalls => ("tool_use", None),
            FinishKind::StopSequence(s) => ("stop_sequence", Some(s.clone())),
            FinishKind::Length => ("max_tokens", None),
            FinishKind::ContentFilter => ("refusal", None),
        };
        let delta = StopDelta {
            stop_reason,
            stop_sequence,
        };
        let usage = self.usage(usage.completion_tokens);
        out.push(MessagesEvent::MessageDelta { delta, usage }.into());
        out.push(MessagesEvent::MessageStop {}.into());
    }
}
