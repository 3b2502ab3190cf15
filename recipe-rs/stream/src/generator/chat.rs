//! Chat Completions: `chat.completion.chunk` objects.
//!
//! A stream is an opening chunk (`role: assistant`), one chunk per reasoning, content or
//! tool-call piece, and a closing chunk with the finish reason and usage. In thinking mode a
//! content delta also carries `"reasoning_content": null`.
//!
//! [`ChatChunk`] holds what the chunk says; its `Serialize` writes the wire form below
//! ([`ChunkWire`] and the types it holds), borrowing from the chunk.

use std::sync::Arc;

use serde::{Serialize, Serializer};
use serde_json::Value;

use super::{
    call_id, now_secs, to_value, write_decimal, write_json_str, write_serde, FinishKind,
    GeneratorConfig, StreamItem, Usage, WireJson,
};
use crate::input::TokenLogprob;
use crate::parser::ParseEvent;

/// What every chunk of one stream repeats.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatMeta {
    pub id: String,
    pub model: String,
    pub created: u64,
    pub system_fingerprint: Option<String>,
    /// Whether a chunk without usage says `"usage": null`; otherwise it has no `usage` key (a
    /// request with `stream: true` that did not ask for `stream_options.include_usage`).
    pub null_usage: bool,
    /// The JSON every chunk of the stream begins with, up to its delta (`{"id":…,"choices":
    /// [{"index":0,"delta":`), written once (see [`ChatMeta::new`]).
    wire_prefix: String,
}

impl ChatMeta {
    pub fn new(
        id: String,
        model: String,
        created: u64,
        system_fingerprint: Option<String>,
        null_usage: bool,
    ) -> Self {
        let mut buf = Vec::with_capacity(id.len() + model.len() + 128);
        buf.extend_from_slice(b"{\"id\":");
        write_json_str(&mut buf, &id);
        buf.extend_from_slice(b",\"object\":\"chat.completion.chunk\",\"created\":");
        write_decimal(&mut buf, created);
        buf.extend_from_slice(b",\"model\":");
        write_json_str(&mut buf, &model);
        buf.extend_from_slice(b",\"system_fingerprint\":");
        match &system_fingerprint {
            Some(f) => write_json_str(&mut buf, f),
            None => buf.extend_from_slice(b"null"),
        }
        buf.extend_from_slice(b",\"choices\":[{\"index\":0,\"delta\":");
        ChatMeta {
            id,
            model,
            created,
            system_fingerprint,
            null_usage,
            wire_prefix: String::from_utf8(buf).expect("JSON of strings is UTF-8"),
        }
    }
}

/// What one chunk adds to the message.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatDelta {
    /// The opening chunk; `reasoning` is true when it opens reasoning.
    Open {
        reasoning: bool,
    },
    Reasoning(String),
    Content(String),
    ToolStart {
        index: usize,
        id: String,
        name: String,
    },
    ToolArgs {
        index: usize,
        arguments: String,
    },
    /// The closing chunk (empty content).
    Final,
}

/// One `chat.completion.chunk`.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatChunk {
    pub meta: Arc<ChatMeta>,
    /// The conversation is in thinking mode (content deltas then say `reasoning_content: null`).
    pub thinking: bool,
    pub delta: ChatDelta,
    pub logprobs: Vec<TokenLogprob>,
    pub finish_reason: Option<&'static str>,
    pub usage: Option<Usage>,
}

// ------------------------------------------------------------------------------------------
// Wire form
// ------------------------------------------------------------------------------------------

/// A `chat.completion.chunk` as written.
#[derive(Serialize)]
pub struct ChunkWire<'a> {
    pub id: &'a str,
    /// Always `"chat.completion.chunk"`.
    pub object: &'static str,
    pub created: u64,
    pub model: &'a str,
    pub system_fingerprint: Option<&'a str>,
    /// Always exactly one choice.
    pub choices: [ChoiceWire<'a>; 1],
    /// Only on the closing chunk; on the others `null` or absent (see [`ChatMeta::null_usage`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Option<UsageWire>>,
}

#[derive(Serialize)]
pub struct ChoiceWire<'a> {
    /// Always 0.
    pub index: u32,
    pub delta: DeltaWire<'a>,
    pub logprobs: Option<LogprobsWire<'a>>,
    pub finish_reason: Option<&'static str>,
}

/// The delta of one chunk. Each field is either absent (outer `None`), `null`
/// (`Some(None)`) or a value.
#[derive(Serialize, Default)]
pub struct DeltaWire<'a> {
    /// `"assistant"`, on the opening chunk only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<[ToolCallWire<'a>; 1]>,
}

/// One tool-call piece: the first names the call (`id`, `type`, `function.name`, empty
/// arguments), the later ones carry only `index` and more of `function.arguments`.
#[derive(Serialize)]
pub struct ToolCallWire<'a> {
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<&'a str>,
    /// `"function"` on the first piece.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    pub function: FunctionWire<'a>,
}

#[derive(Serialize)]
pub struct FunctionWire<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    pub arguments: &'a str,
}

/// A chunk's log probabilities, under the key of the text they belong to.
#[derive(Serialize)]
pub enum LogprobsWire<'a> {
    #[serde(rename = "content")]
    Content(&'a [TokenLogprob]),
    #[serde(rename = "reasoning_content")]
    Reasoning(&'a [TokenLogprob]),
}

/// Token counts on the closing chunk (and on a complete `chat.completion`).
#[derive(Serialize)]
pub struct UsageWire {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub prompt_tokens_details: CachedTokens,
    /// Only in thinking mode, when reasoning tokens were counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<ReasoningTokens>,
    pub prompt_cache_hit_tokens: u64,
    pub prompt_cache_miss_tokens: u64,
}

#[derive(Serialize)]
pub struct CachedTokens {
    pub cached_tokens: u64,
}

#[derive(Serialize)]
pub struct ReasoningTokens {
    pub reasoning_tokens: u64,
}

impl From<&Usage> for UsageWire {
    fn from(u: &Usage) -> Self {
        UsageWire {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.prompt_tokens + u.completion_tokens,
            prompt_tokens_details: CachedTokens {
                cached_tokens: u.prompt_cache_hit_tokens,
            },
            completion_tokens_details: u.reasoning_tokens.map(|r| ReasoningTokens {
                reasoning_tokens: r,
            }),
            prompt_cache_hit_tokens: u.prompt_cache_hit_tokens,
            prompt_cache_miss_tokens: u.prompt_tokens.saturating_sub(u.prompt_cache_hit_tokens),
        }
    }
}

/// Chat usage as JSON (the complete-response accumulator reports it too).
pub fn chat_usage_value(u: &Usage) -> Value {
    to_value(&UsageWire::from(u))
}

impl ChatChunk {
    /// The delta in its wire form.
    fn delta_wire(&self) -> DeltaWire<'_> {
        // In thinking mode a chunk that is not reasoning still says `reasoning_content: null`.
        let no_reasoning = self.thinking.then_some(None);
        match &self.delta {
            ChatDelta::Open { reasoning: true } => DeltaWire {
                role: Some("assistant"),
                content: Some(None),
                reasoning_content: Some(Some("")),
                ..DeltaWire::default()
            },
            ChatDelta::Open { reasoning: false } => DeltaWire {
                role: Some("assistant"),
                content: Some(Some("")),
                reasoning_content: no_reasoning,
                ..DeltaWire::default()
            },
            ChatDelta::Reasoning(t) => DeltaWire {
                content: Some(None),
                reasoning_content: Some(Some(t)),
                ..DeltaWire::default()
            },
            ChatDelta::Content(t) => DeltaWire {
                content: Some(Some(t)),
                reasoning_content: no_reasoning,
                ..DeltaWire::default()
            },
            ChatDelta::Final => DeltaWire {
                content: Some(Some("")),
                reasoning_content: no_reasoning,
                ..DeltaWire::default()
            },
            ChatDelta::ToolStart { index, id, name } => DeltaWire {
                tool_calls: Some([ToolCallWire {
                    index: *index,
                    id: Some(id),
                    kind: Some("function"),
                    function: FunctionWire {
                        name: Some(name),
                        arguments: "",
                    },
                }]),
                ..DeltaWire::default()
            },
            ChatDelta::ToolArgs { index, arguments } => DeltaWire {
                tool_calls: Some([ToolCallWire {
                    index: *index,
                    id: None,
                    kind: None,
                    function: FunctionWire {
                        name: None,
                        arguments,
                    },
                }]),
                ..DeltaWire::default()
            },
        }
    }

    /// The chunk in its wire form.
    pub fn wire(&self) -> ChunkWire<'_> {
        let logprobs = match (&self.delta, self.logprobs.is_empty()) {
            (_, true) => None,
            (ChatDelta::Reasoning(_), false) => Some(LogprobsWire::Reasoning(&self.logprobs)),
            (_, false) => Some(LogprobsWire::Content(&self.logprobs)),
        };
        ChunkWire {
            id: &self.meta.id,
            object: "chat.completion.chunk",
            created: self.meta.created,
            model: &self.meta.model,
            system_fingerprint: self.meta.system_fingerprint.as_deref(),
            choices: [ChoiceWire {
                index: 0,
                delta: self.delta_wire(),
                logprobs,
                finish_reason: self.finish_reason,
            }],
            usage: match &self.usage {
                Some(u) => Some(Some(UsageWire::from(u))),
                None => self.meta.null_usage.then_some(None),
            },
        }
    }

    /// The chunk as a JSON value.
    pub fn to_value(&self) -> Value {
        to_value(self)
    }
}

/// Writes the same bytes as serialising [`ChunkWire`], with the stream's fixed prefix copied
/// and the keys as literals.
impl WireJson for ChatChunk {
    fn write_json(&self, buf: &mut Vec<u8>) {
        let w = self.wire();
        buf.extend_from_slice(self.meta.wire_prefix.as_bytes());
        let [choice] = &w.choices;
        let d = &choice.delta;
        let mut sep = b'{';
        let mut key = |buf: &mut Vec<u8>, k: &[u8]| {
            buf.push(sep);
            sep = b',';
            buf.extend_from_slice(k);
        };
        if let Some(role) = d.role {
            key(buf, b"\"role\":");
            write_json_str(buf, role);
        }
        if let Some(content) = d.content {
            key(buf, b"\"content\":");
            write_opt_str(buf, content);
        }
        if let Some(reasoning) = d.reasoning_content {
            key(buf, b"\"reasoning_content\":");
            write_opt_str(buf, reasoning);
        }
        if let Some([call]) = &d.tool_calls {
            key(buf, b"\"tool_calls\":[");
            write_serde(call, buf);
            buf.push(b']');
        }
        if sep == b'{' {
            buf.push(b'{');
        }
        buf.extend_from_slice(b"},\"logprobs\":");
        match &choice.logprobs {
            None => buf.extend_from_slice(b"null"),
            Some(lp) => write_serde(lp, buf),
        }
        buf.extend_from_slice(b",\"finish_reason\":");
        write_opt_str(buf, choice.finish_reason);
        buf.extend_from_slice(b"}]");
        match &w.usage {
            None => {}
            Some(None) => buf.extend_from_slice(b",\"usage\":null"),
            Some(Some(u)) => {
                buf.extend_from_slice(b",\"usage\":");
                write_serde(u, buf);
            }
        }
        buf.push(b'}');
    }
}

fn write_opt_str(buf: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => write_json_str(buf, s),
        None => buf.extend_from_slice(b"null"),
    }
}

impl Serialize for ChatChunk {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.wire().serialize(s)
    }
}

// ------------------------------------------------------------------------------------------
// Generator
// ------------------------------------------------------------------------------------------

pub struct ChatGenerator {
    meta: Arc<ChatMeta>,
    config: GeneratorConfig,
    started: bool,
    reasoning_seen: bool,
}

impl ChatGenerator {
    pub fn new(id: impl Into<String>, model: impl Into<String>, config: GeneratorConfig) -> Self {
        ChatGenerator {
            meta: Arc::new(ChatMeta::new(
                id.into(),
                model.into(),
                now_secs(),
                None,
                true,
            )),
            config,
            started: false,
            reasoning_seen: false,
        }
    }

    /// A generator whose chunks before the closing one carry no `usage` key at all (what a
    /// request with `stream: true` and without `stream_options.include_usage` gets).
    pub fn without_null_usage(mut self) -> Self {
        Arc::make_mut(&mut self.meta).null_usage = false;
        self
    }

    fn chunk(&self, delta: ChatDelta, logprobs: Vec<TokenLogprob>) -> ChatChunk {
        ChatChunk {
            meta: self.meta.clone(),
            thinking: self.config.thinking_mode,
            delta,
            logprobs,
            finish_reason: None,
            usage: None,
        }
    }

    pub(super) fn ready(&mut self, fingerprint: Option<String>, out: &mut Vec<StreamItem>) {
        if fingerprint.is_some() {
            let m = &self.meta;
            self.meta = Arc::new(ChatMeta::new(
                m.id.clone(),
                m.model.clone(),
                m.created,
                fingerprint,
                m.null_usage,
            ));
        }
        self.start(out);
    }

    pub(super) fn start(&mut self, out: &mut Vec<StreamItem>) {
        if !self.started {
            self.started = true;
            let open = ChatDelta::Open {
                reasoning: self.config.starts_in_reasoning,
            };
            out.push(self.chunk(open, Vec::new()).into());
        }
    }

    pub(super) fn event(&mut self, ev: ParseEvent, out: &mut Vec<StreamItem>) {
        let chunk = match ev {
            ParseEvent::Reasoning { text, logprobs } => {
                self.reasoning_seen = true;
                self.chunk(ChatDelta::Reasoning(text), logprobs)
            }
            ParseEvent::Content { text, logprobs } => {
                self.chunk(ChatDelta::Content(text), logprobs)
            }
            ParseEvent::ToolCallStart { index, name } => {
                let id = call_id(index, self.config.thinking_mode && !self.reasoning_seen);
                self.chunk(ChatDelta::ToolStart { index, id, name }, Vec::new())
            }
            ParseEvent::ToolCallArgs { index, text, .. } => self.chunk(
                ChatDelta::ToolArgs {
                    index,
                    arguments: text,
                },
                Vec::new(),
            ),
            ParseEvent::ReasoningEnd | ParseEvent::StopSequence(_) => return,
        };
        out.push(chunk.into());
    }

    pub(super) fn finish(&mut self, kind: &FinishKind, usage: Usage, out: &mut Vec<StreamItem>) {
        let reason = match kind {
            FinishKind::Stop | FinishKind::StopSequence(_) => "stop",
            FinishKind::ToolCalls => "tool_calls",
            FinishKind::Length => "length",
            FinishKind::ContentFilter => "content_filter",
        };
        let mut c = self.chunk(ChatDelta::Final, Vec::new());
        c.finish_reason = Some(reason);
        // Reasoning tokens are reported for a conversation in thinking mode only.
        let mut usage = usage;
        if !self.config.thinking_mode {
            usage.reasoning_tokens = None;
        }
        c.usage = Some(usage);
        out.push(c.into());
    }
}
