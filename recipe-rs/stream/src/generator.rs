//! Per-protocol generators: parser events in, Chat Completions chunks / Responses events /
//! Messages events out.
//!
//! Every generator opens its stream lazily (at `ready`, or at the first push without one),
//! keeps at most one output block open, closes it when a different block starts or the stream
//! ends, and writes usage and the finish reason at the end.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rand::Rng;
use recipe_core::ResponsesEcho;
use serde_json::{json, Map, Value};

use crate::input::{f32_json, PromptUsage, TokenLogprob};
use crate::parser::ParseEvent;

/// What a generator needs to know about the converted request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GeneratorConfig {
    /// The conversation is in thinking mode.
    pub thinking_mode: bool,
    /// The request's parsing starts inside reasoning (its `thinking_initial_stage`).
    pub starts_in_reasoning: bool,
}

/// Why the stream ended, after output parsing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinishKind {
    Stop,
    ToolCalls,
    StopSequence(String),
    Length,
    ContentFilter,
}

/// Token counts reported at the end of a stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub prompt_cache_hit_tokens: u64,
    pub completion_tokens: u64,
    /// `None` when reasoning tokens are not counted (no tokenizer or no thinking stage).
    pub reasoning_tokens: Option<u64>,
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// `call_{index:02}_` (plus `ET_` when thinking produced no reasoning) and 24 random characters.
pub fn call_id(index: usize, empty_thinking: bool) -> String {
    let mut rng = rand::rng();
    let mut s = format!(
        "call_{index:02}_{}",
        if empty_thinking { "ET_" } else { "" }
    );
    for _ in 0..24 {
        s.push(ALNUM[rng.random_range(0..ALNUM.len())] as char);
    }
    s
}

pub fn logprob_value(lp: &TokenLogprob) -> Value {
    json!({
        "token": lp.token,
        "logprob": f32_json(lp.logprob),
        "bytes": lp.bytes,
        "top_logprobs": lp.top_logprobs.iter().map(|t| json!({
            "token": t.token, "logprob": f32_json(t.logprob), "bytes": t.bytes,
        })).collect::<Vec<_>>(),
    })
}

fn logprobs_value(lps: &[TokenLogprob]) -> Value {
    Value::Array(lps.iter().map(logprob_value).collect())
}

// ------------------------------------------------------------------------------------------
// Chat Completions
// ------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
pub struct ChatMeta {
    pub id: String,
    pub model: String,
    pub created: u64,
    pub system_fingerprint: Option<String>,
}

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
    pub thinking: bool,
    pub delta: ChatDelta,
    pub logprobs: Vec<TokenLogprob>,
    pub finish_reason: Option<&'static str>,
    pub usage: Option<Usage>,
}

pub fn chat_usage_value(u: &Usage) -> Value {
    let mut m = Map::new();
    m.insert("prompt_tokens".into(), json!(u.prompt_tokens));
    m.insert("completion_tokens".into(), json!(u.completion_tokens));
    m.insert(
        "total_tokens".into(),
        json!(u.prompt_tokens + u.completion_tokens),
    );
    m.insert(
        "prompt_tokens_details".into(),
        json!({"cached_tokens": u.prompt_cache_hit_tokens}),
    );
    if let Some(r) = u.reasoning_tokens {
        m.insert(
            "completion_tokens_details".into(),
            json!({"reasoning_tokens": r}),
        );
    }
    m.insert(
        "prompt_cache_hit_tokens".into(),
        json!(u.prompt_cache_hit_tokens),
    );
    m.insert(
        "prompt_cache_miss_tokens".into(),
        json!(u.prompt_tokens.saturating_sub(u.prompt_cache_hit_tokens)),
    );
    Value::Object(m)
}

impl ChatChunk {
    pub fn delta_value(&self) -> Value {
        let mut d = Map::new();
        match &self.delta {
            ChatDelta::Open { reasoning } => {
                d.insert("role".into(), json!("assistant"));
                if *reasoning {
                    d.insert("content".into(), Value::Null);
                    d.insert("reasoning_content".into(), json!(""));
                } else {
                    d.insert("content".into(), json!(""));
                    if self.thinking {
                        d.insert("reasoning_content".into(), Value::Null);
                    }
                }
            }
            ChatDelta::Reasoning(t) => {
                d.insert("content".into(), Value::Null);
                d.insert("reasoning_content".into(), json!(t));
            }
            ChatDelta::Content(t) => {
                d.insert("content".into(), json!(t));
                if self.thinking {
                    d.insert("reasoning_content".into(), Value::Null);
                }
            }
            ChatDelta::ToolStart { index, id, name } => {
                d.insert(
                    "tool_calls".into(),
                    json!([{"index": index, "id": id, "type": "function",
                            "function": {"name": name, "arguments": ""}}]),
                );
            }
            ChatDelta::ToolArgs { index, arguments } => {
                d.insert(
                    "tool_calls".into(),
                    json!([{"index": index, "function": {"arguments": arguments}}]),
                );
            }
            ChatDelta::Final => {
                d.insert("content".into(), json!(""));
                if self.thinking {
                    d.insert("reasoning_content".into(), Value::Null);
                }
            }
        }
        Value::Object(d)
    }

    pub fn logprobs_value(&self) -> Value {
        if self.logprobs.is_empty() {
            return Value::Null;
        }
        let key = if matches!(self.delta, ChatDelta::Reasoning(_)) {
            "reasoning_content"
        } else {
            "content"
        };
        let mut m = Map::new();
        m.insert(key.into(), logprobs_value(&self.logprobs));
        Value::Object(m)
    }

    pub fn to_value(&self) -> Value {
        let mut choice = Map::new();
        choice.insert("index".into(), json!(0));
        choice.insert("delta".into(), self.delta_value());
        choice.insert("logprobs".into(), self.logprobs_value());
        choice.insert("finish_reason".into(), json!(self.finish_reason));
        let mut m = Map::new();
        m.insert("id".into(), json!(self.meta.id));
        m.insert("object".into(), json!("chat.completion.chunk"));
        m.insert("created".into(), json!(self.meta.created));
        m.insert("model".into(), json!(self.meta.model));
        m.insert(
            "system_fingerprint".into(),
            json!(self.meta.system_fingerprint),
        );
        m.insert("choices".into(), Value::Array(vec![Value::Object(choice)]));
        m.insert(
            "usage".into(),
            self.usage.as_ref().map_or(Value::Null, chat_usage_value),
        );
        Value::Object(m)
    }
}

pub struct ChatGenerator {
    meta: Arc<ChatMeta>,
    config: GeneratorConfig,
    started: bool,
    reasoning_seen: bool,
}

impl ChatGenerator {
    pub fn new(id: impl Into<String>, model: impl Into<String>, config: GeneratorConfig) -> Self {
        ChatGenerator {
            meta: Arc::new(ChatMeta {
                id: id.into(),
                model: model.into(),
                created: now_secs(),
                system_fingerprint: None,
            }),
            config,
            started: false,
            reasoning_seen: false,
        }
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

    fn ready(&mut self, fingerprint: Option<String>, out: &mut Vec<ChatChunk>) {
        if fingerprint.is_some() {
            let mut m = (*self.meta).clone();
            m.system_fingerprint = fingerprint;
            self.meta = Arc::new(m);
        }
        self.start(out);
    }

    fn start(&mut self, out: &mut Vec<ChatChunk>) {
        if !self.started {
            self.started = true;
            out.push(self.chunk(
                ChatDelta::Open {
                    reasoning: self.config.starts_in_reasoning,
                },
                Vec::new(),
            ));
        }
    }

    fn event(&mut self, ev: ParseEvent, out: &mut Vec<ChatChunk>) {
        match ev {
            ParseEvent::Reasoning { text, logprobs } => {
                self.reasoning_seen = true;
                out.push(self.chunk(ChatDelta::Reasoning(text), logprobs));
            }
            ParseEvent::Content { text, logprobs } => {
                out.push(self.chunk(ChatDelta::Content(text), logprobs))
            }
            ParseEvent::ToolCallStart { index, name } => {
                let id = call_id(index, self.config.thinking_mode && !self.reasoning_seen);
                out.push(self.chunk(ChatDelta::ToolStart { index, id, name }, Vec::new()));
            }
            ParseEvent::ToolCallArgs { index, text, .. } => out.push(self.chunk(
                ChatDelta::ToolArgs {
                    index,
                    arguments: text,
                },
                Vec::new(),
            )),
            ParseEvent::ReasoningEnd | ParseEvent::StopSequence(_) => {}
        }
    }

    fn finish(&mut self, kind: &FinishKind, usage: Usage, out: &mut Vec<ChatChunk>) {
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
        out.push(c);
    }
}

// ------------------------------------------------------------------------------------------
// Responses
// ------------------------------------------------------------------------------------------

/// One Responses stream event. The frequent delta events are kept typed and rendered to JSON
/// on demand; the others are stored as JSON.
#[derive(Clone, Debug, PartialEq)]
pub enum ResponsesEvent {
    Json(Value),
    TextDelta {
        item_id: Arc<str>,
        output_index: usize,
        delta: String,
        logprobs: Vec<TokenLogprob>,
        seq: u64,
    },
    ReasoningDelta {
        item_id: Arc<str>,
        output_index: usize,
        delta: String,
        seq: u64,
    },
    ArgumentsDelta {
        item_id: Arc<str>,
        output_index: usize,
        delta: String,
        seq: u64,
    },
}

impl ResponsesEvent {
    pub fn event_type(&self) -> &str {
        match self {
            ResponsesEvent::Json(v) => v.get("type").and_then(Value::as_str).unwrap_or(""),
            ResponsesEvent::TextDelta { .. } => "response.output_text.delta",
            ResponsesEvent::ReasoningDelta { .. } => "response.reasoning_text.delta",
            ResponsesEvent::ArgumentsDelta { .. } => "response.function_call_arguments.delta",
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            ResponsesEvent::Json(v) => v.clone(),
            ResponsesEvent::TextDelta {
                item_id,
                output_index,
                delta,
                logprobs,
                seq,
            } => json!({
                "type": "response.output_text.delta", "content_index": 0, "delta": delta, "item_id": &**item_id,
                "logprobs": logprobs_value(logprobs), "output_index": output_index, "sequence_number": seq}),
            ResponsesEvent::ReasoningDelta {
                item_id,
                output_index,
                delta,
                seq,
            } => json!({
                "type": "response.reasoning_text.delta", "content_index": 0, "delta": delta, "item_id": &**item_id,
                "output_index": output_index, "sequence_number": seq}),
            ResponsesEvent::ArgumentsDelta {
                item_id,
                output_index,
                delta,
                seq,
            } => json!({
                "type": "response.function_call_arguments.delta", "delta": delta, "item_id": &**item_id,
                "output_index": output_index, "sequence_number": seq}),
        }
    }

    /// The JSON object, when the event is stored as JSON.
    pub fn json(&self) -> Option<&Value> {
        match self {
            ResponsesEvent::Json(v) => Some(v),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
enum RItem {
    Reasoning {
        id: Arc<str>,
        n: usize,
        text: String,
    },
    Message {
        id: Arc<str>,
        text: String,
        logprobs: Vec<TokenLogprob>,
    },
    Call {
        id: Arc<str>,
        call_id: String,
        name: String,
        namespace: Option<String>,
        arguments: String,
    },
}

pub struct ResponsesGenerator {
    id: String,
    model: String,
    created: u64,
    config: GeneratorConfig,
    echo: ResponsesEcho,
    namespace_map: Vec<(String, (String, String))>,
    seq: u64,
    started: bool,
    open: Option<RItem>,
    done_items: Vec<Value>,
    reasoning_seen: bool,
    prompt: PromptUsage,
}

fn with_nulls(v: &Option<Value>, keys: &[&str], default: Value) -> Value {
    match v {
        Some(Value::Object(m)) => {
            let mut out = Map::new();
            for k in keys {
                out.insert((*k).into(), m.get(*k).cloned().unwrap_or(Value::Null));
            }
            for (k, val) in m {
                if !out.contains_key(k) {
                    out.insert(k.clone(), val.clone());
                }
            }
            Value::Object(out)
        }
        Some(other) => other.clone(),
        None => default,
    }
}

/// The request's `text` setting as a response reports it: `format` and `verbosity` only, the
/// format reduced to the fields of its type (a `json_schema` format always shows `name`,
/// `schema`, `description` and `strict`, null when the request left them out).
fn text_echo(text: &Option<Value>) -> Value {
    let Some(Value::Object(t)) = text else {
        return text
            .clone()
            .unwrap_or_else(|| json!({"format": {"type": "text"}, "verbosity": null}));
    };
    let format = match t.get("format") {
        None | Some(Value::Null) => json!({"type": "text"}),
        Some(Value::Object(f)) => match f.get("type").and_then(Value::as_str) {
            Some("json_schema") => {
                let field = |k: &str| f.get(k).cloned().unwrap_or(Value::Null);
                json!({"type": "json_schema", "name": field("name"), "schema": field("schema"),
                       "description": field("description"), "strict": field("strict")})
            }
            Some(kind) => json!({"type": kind}),
            None => Value::Object(f.clone()),
        },
        Some(other) => other.clone(),
    };
    json!({"format": format, "verbosity": t.get("verbosity").cloned().unwrap_or(Value::Null)})
}

/// The namespace map a Responses request's tools imply: each function inside a `namespace`
/// tool is called as `ns::name` and reported as `name` in namespace `ns`.
pub fn namespace_map_from_tools(tools: &Value) -> Vec<(String, (String, String))> {
    let mut map = Vec::new();
    for tool in tools.as_array().into_iter().flatten() {
        if tool.get("type").and_then(Value::as_str) != Some("namespace") {
            continue;
        }
        let Some(ns) = tool.get("name").and_then(Value::as_str) else {
            continue;
        };
        for inner in tool
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = inner.get("name").and_then(Value::as_str) {
                map.push((format!("{ns}::{name}"), (ns.to_owned(), name.to_owned())));
            }
        }
    }
    map
}

impl ResponsesGenerator {
    pub fn new(id: impl Into<String>, model: impl Into<String>, config: GeneratorConfig) -> Self {
        ResponsesGenerator {
            id: id.into(),
            model: model.into(),
            created: now_secs(),
            config,
            echo: ResponsesEcho::default(),
            namespace_map: Vec::new(),
            seq: 0,
            started: false,
            open: None,
            done_items: Vec::new(),
            reasoning_seen: false,
            prompt: PromptUsage::default(),
        }
    }

    pub fn with_echo(mut self, echo: ResponsesEcho) -> Self {
        self.echo = echo;
        self
    }

    pub fn with_namespace_tool_map(mut self, map: Vec<(String, (String, String))>) -> Self {
        self.namespace_map = map;
        self
    }

    fn response(
        &self,
        status: &str,
        completed_at: Option<u64>,
        incomplete: Option<&str>,
        usage: Option<&Usage>,
    ) -> Value {
        let e = &self.echo;
        let tools = match &e.tools {
            Some(Value::Array(ts)) => Value::Array(
                ts.iter()
                    .map(|t| {
                        let mut t = t.clone();
                        if let Value::Object(m) = &mut t {
                            if m.get("type").and_then(Value::as_str) == Some("function")
                                && !m.contains_key("strict")
                            {
                                m.insert("strict".into(), Value::Null);
                            }
                        }
                        t
                    })
                    .collect(),
            ),
            Some(other) => other.clone(),
            None => json!([]),
        };
        let mut m = Map::new();
        m.insert("id".into(), json!(self.id));
        m.insert("object".into(), json!("response"));
        m.insert("created_at".into(), json!(self.created));
        m.insert("status".into(), json!(status));
        m.insert("background".into(), json!(false));
        m.insert("completed_at".into(), json!(completed_at));
        m.insert("content_filters".into(), Value::Null);
        m.insert("error".into(), Value::Null);
        m.insert("frequency_penalty".into(), json!(0.0));
        m.insert(
            "incomplete_details".into(),
            incomplete.map_or(Value::Null, |r| json!({"reason": r})),
        );
        m.insert("instructions".into(), json!(e.instructions));
        m.insert("max_output_tokens".into(), json!(e.max_output_tokens));
        m.insert("max_tool_calls".into(), Value::Null);
        m.insert("model".into(), json!(self.model));
        m.insert("moderation".into(), Value::Null);
        m.insert("output".into(), Value::Array(self.done_items.clone()));
        m.insert("parallel_tool_calls".into(), json!(true));
        m.insert("presence_penalty".into(), json!(0.0));
        m.insert("previous_response_id".into(), Value::Null);
        m.insert("prompt_cache_key".into(), Value::Null);
        m.insert("prompt_cache_retention".into(), Value::Null);
        m.insert(
            "reasoning".into(),
            with_nulls(
                &e.reasoning,
                &["effort", "summary"],
                json!({"effort": null, "summary": null}),
            ),
        );
        m.insert("safety_identifier".into(), Value::Null);
        m.insert("service_tier".into(), json!("default"));
        m.insert("store".into(), json!(false));
        m.insert("temperature".into(), json!(shortest_f32(e.temperature)));
        m.insert("text".into(), text_echo(&e.text));
        m.insert(
            "tool_choice".into(),
            e.tool_choice.clone().unwrap_or(json!("auto")),
        );
        m.insert("tools".into(), tools);
        m.insert("top_logprobs".into(), json!(e.top_logprobs));
        m.insert("top_p".into(), json!(shortest_f32(e.top_p)));
        m.insert("truncation".into(), json!("disabled"));
        m.insert(
            "usage".into(),
            usage.map_or(Value::Null, |u| {
                json!({
                    "input_tokens": u.prompt_tokens,
                    "input_tokens_details": {"cached_tokens": u.prompt_cache_hit_tokens},
                    "output_tokens": u.completion_tokens,
                    "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens.unwrap_or(0)},
                    "total_tokens": u.prompt_tokens + u.completion_tokens,
                })
            }),
        );
        m.insert("user".into(), json!(e.user));
        m.insert("metadata".into(), json!({}));
        Value::Object(m)
    }

    fn emit(&mut self, mut v: Value, out: &mut Vec<ResponsesEvent>) {
        if let Value::Object(m) = &mut v {
            m.insert("sequence_number".into(), json!(self.seq));
        }
        self.seq += 1;
        out.push(ResponsesEvent::Json(v));
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq - 1
    }

    fn start(&mut self, out: &mut Vec<ResponsesEvent>) {
        if self.started {
            return;
        }
        self.started = true;
        let r = self.response("in_progress", None, None, None);
        self.emit(
            json!({"type": "response.created", "response": r.clone()}),
            out,
        );
        self.emit(json!({"type": "response.in_progress", "response": r}), out);
    }

    fn output_index(&self) -> usize {
        self.done_items.len()
    }

    /// Close the open item with `status`; `commentary` relabels a message followed by a call.
    fn close(&mut self, status: &str, commentary: bool, out: &mut Vec<ResponsesEvent>) {
        let Some(item) = self.open.take() else { return };
        let oi = self.output_index();
        let done = match item {
            RItem::Reasoning { id, n, text } => {
                let id: &str = &id;
                self.emit(json!({"type": "response.reasoning_text.done", "content_index": 0, "item_id": id,
                    "output_index": oi, "sequence_number": 0, "text": text}), out);
                let part = json!({"type": "reasoning_text", "text": text});
                self.emit(
                    json!({"type": "response.content_part.done", "content_index": 0, "item_id": id,
                    "output_index": oi, "part": part, "sequence_number": 0}),
                    out,
                );
                json!({"type": "reasoning", "id": id, "status": status, "content": [part], "summary": [],
                    "encrypted_content": format!("{}-{n}", self.id)})
            }
            RItem::Message { id, text, logprobs } => {
                let id: &str = &id;
                let lps = logprobs_value(&logprobs);
                self.emit(
                    json!({"type": "response.output_text.done", "content_index": 0, "item_id": id,
                    "logprobs": lps, "output_index": oi, "sequence_number": 0, "text": text}),
                    out,
                );
                let part = json!({"type": "output_text", "annotations": [], "logprobs": lps, "text": text});
                self.emit(
                    json!({"type": "response.content_part.done", "content_index": 0, "item_id": id,
                    "output_index": oi, "part": part, "sequence_number": 0}),
                    out,
                );
                json!({"type": "message", "id": id, "status": status, "role": "assistant",
                    "phase": if commentary { "commentary" } else { "final_answer" }, "content": [part]})
            }
            RItem::Call {
                id,
                call_id,
                name,
                namespace,
                arguments,
            } => {
                let id: &str = &id;
                self.emit(
                    json!({"type": "response.function_call_arguments.done", "arguments": arguments,
                    "item_id": id, "output_index": oi, "sequence_number": 0}),
                    out,
                );
                call_item(
                    id,
                    status,
                    &call_id,
                    &name,
                    namespace.as_deref(),
                    &arguments,
                )
            }
        };
        self.emit(
            json!({"type": "response.output_item.done", "item": done.clone(), "output_index": oi,
            "sequence_number": 0}),
            out,
        );
        self.done_items.push(done);
    }

    fn event(&mut self, ev: ParseEvent, out: &mut Vec<ResponsesEvent>) {
        match ev {
            ParseEvent::Reasoning { text, .. } => {
                self.reasoning_seen = true;
                if !matches!(self.open, Some(RItem::Reasoning { .. })) {
                    self.close("completed", false, out);
                    let n = self.output_index();
                    let id: Arc<str> = format!("rs_{}_{n}", self.id).into();
                    self.emit(json!({"type": "response.output_item.added", "item": {"type": "reasoning", "id": &*id,
                        "status": "in_progress", "content": [], "summary": [],
                        "encrypted_content": format!("{}-{n}", self.id)}, "output_index": n, "sequence_number": 0}), out);
                    self.emit(json!({"type": "response.content_part.added", "content_index": 0, "item_id": &*id,
                        "output_index": n, "part": {"type": "reasoning_text", "text": ""}, "sequence_number": 0}), out);
                    self.open = Some(RItem::Reasoning {
                        id,
                        n,
                        text: String::new(),
                    });
                }
                let oi = self.output_index();
                if let Some(RItem::Reasoning { id, text: acc, .. }) = &mut self.open {
                    acc.push_str(&text);
                    let item_id = id.clone();
                    let seq = self.next_seq();
                    out.push(ResponsesEvent::ReasoningDelta {
                        item_id,
                        output_index: oi,
                        delta: text,
                        seq,
                    });
                }
            }
            ParseEvent::Content { text, logprobs } => {
                if !matches!(self.open, Some(RItem::Message { .. })) {
                    self.close("completed", false, out);
                    let n = self.output_index();
                    let id: Arc<str> = format!("msg_{}_{n}", self.id).into();
                    self.emit(json!({"type": "response.output_item.added", "item": {"type": "message", "id": &*id,
                        "status": "in_progress", "role": "assistant", "phase": "final_answer", "content": []},
                        "output_index": n, "sequence_number": 0}), out);
                    self.emit(json!({"type": "response.content_part.added", "content_index": 0, "item_id": &*id,
                        "output_index": n, "part": {"type": "output_text", "annotations": [], "logprobs": [], "text": ""},
                        "sequence_number": 0}), out);
                    self.open = Some(RItem::Message {
                        id,
                        text: String::new(),
                        logprobs: Vec::new(),
                    });
                }
                let oi = self.output_index();
                if let Some(RItem::Message {
                    id,
                    text: acc,
                    logprobs: acc_lps,
                }) = &mut self.open
                {
                    acc.push_str(&text);
                    acc_lps.extend(logprobs.iter().cloned());
                    let item_id = id.clone();
                    let seq = self.next_seq();
                    out.push(ResponsesEvent::TextDelta {
                        item_id,
                        output_index: oi,
                        delta: text,
                        logprobs,
                        seq,
                    });
                }
            }
            ParseEvent::ToolCallStart { index, name } => {
                let commentary = matches!(self.open, Some(RItem::Message { .. }));
                self.close("completed", commentary, out);
                let n = self.output_index();
                let id: Arc<str> = format!("fc_{}_{n}", self.id).into();
                let cid = call_id(index, self.config.thinking_mode && !self.reasoning_seen);
                let (name, namespace) = match self.namespace_map.iter().find(|(k, _)| *k == name) {
                    Some((_, (ns, local))) => (local.clone(), Some(ns.clone())),
                    None => (name, None),
                };
                let item = call_item(&id, "in_progress", &cid, &name, namespace.as_deref(), "");
                self.emit(
                    json!({"type": "response.output_item.added", "item": item, "output_index": n,
                    "sequence_number": 0}),
                    out,
                );
                self.open = Some(RItem::Call {
                    id,
                    call_id: cid,
                    name,
                    namespace,
                    arguments: String::new(),
                });
            }
            ParseEvent::ToolCallArgs { text, .. } => {
                let oi = self.output_index();
                if let Some(RItem::Call { id, arguments, .. }) = &mut self.open {
                    arguments.push_str(&text);
                    let item_id = id.clone();
                    let seq = self.next_seq();
                    out.push(ResponsesEvent::ArgumentsDelta {
                        item_id,
                        output_index: oi,
                        delta: text,
                        seq,
                    });
                }
            }
            ParseEvent::ReasoningEnd | ParseEvent::StopSequence(_) => {}
        }
    }

    fn finish(&mut self, kind: &FinishKind, usage: Usage, out: &mut Vec<ResponsesEvent>) {
        let incomplete = match kind {
            FinishKind::Length => Some("max_output_tokens"),
            FinishKind::ContentFilter => Some("content_filter"),
            _ => None,
        };
        self.close(
            if incomplete.is_some() {
                "incomplete"
            } else {
                "completed"
            },
            false,
            out,
        );
        let now = now_secs();
        let (ty, status) = if incomplete.is_some() {
            ("response.incomplete", "incomplete")
        } else {
            ("response.completed", "completed")
        };
        let r = self.response(status, Some(now), incomplete, Some(&usage));
        self.emit(json!({"type": ty, "response": r}), out);
    }
}

/// Request settings for a Responses response object, read from a JSON object with the fields a
/// response reports (`instructions`, `max_output_tokens`, `temperature`, `top_p`,
/// `top_logprobs`, `user`, `reasoning`, `text`, `tool_choice`, `tools`); absent fields keep
/// the defaults of an unspecified request.
pub fn echo_from_json(v: &Value) -> ResponsesEcho {
    let mut e = ResponsesEcho::default();
    let get = |k: &str| v.get(k).filter(|x| !x.is_null());
    e.instructions = get("instructions")
        .and_then(Value::as_str)
        .map(str::to_owned);
    e.max_output_tokens = get("max_output_tokens").and_then(Value::as_u64);
    e.user = get("user").and_then(Value::as_str).map(str::to_owned);
    if let Some(x) = get("temperature").and_then(Value::as_f64) {
        e.temperature = x;
    }
    if let Some(x) = get("top_p").and_then(Value::as_f64) {
        e.top_p = x;
    }
    if let Some(x) = get("top_logprobs").and_then(Value::as_u64) {
        e.top_logprobs = x;
    }
    e.reasoning = get("reasoning").cloned();
    e.text = get("text").cloned();
    e.tool_choice = get("tool_choice").cloned();
    e.tools = get("tools").cloned();
    e
}

fn call_item(
    id: &str,
    status: &str,
    call_id: &str,
    name: &str,
    namespace: Option<&str>,
    arguments: &str,
) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), json!("function_call"));
    m.insert("id".into(), json!(id));
    m.insert("status".into(), json!(status));
    m.insert("call_id".into(), json!(call_id));
    m.insert("name".into(), json!(name));
    if let Some(ns) = namespace {
        m.insert("namespace".into(), json!(ns));
    }
    m.insert("arguments".into(), json!(arguments));
    Value::Object(m)
}

// ------------------------------------------------------------------------------------------
// Messages
// ------------------------------------------------------------------------------------------

/// One Anthropic Messages stream event; content deltas are kept typed and rendered on demand.
#[derive(Clone, Debug, PartialEq)]
pub enum MessagesEvent {
    Json(Value),
    /// A `content_block_delta`: `kind` is the delta type, `field` the key its text goes under.
    Delta {
        index: usize,
        kind: &'static str,
        field: &'static str,
        text: String,
    },
}

impl MessagesEvent {
    pub fn event_type(&self) -> &str {
        match self {
            MessagesEvent::Json(v) => v.get("type").and_then(Value::as_str).unwrap_or(""),
            MessagesEvent::Delta { .. } => "content_block_delta",
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            MessagesEvent::Json(v) => v.clone(),
            MessagesEvent::Delta {
                index,
                kind,
                field,
                text,
            } => {
                let mut d = Map::new();
                d.insert("type".into(), json!(kind));
                d.insert((*field).into(), json!(text));
                json!({"type": "content_block_delta", "index": index, "delta": Value::Object(d)})
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MBlock {
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
    open: Option<MBlock>,
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

    fn usage_value(&self, output_tokens: u64) -> Value {
        json!({
            "input_tokens": self.prompt.prompt_tokens.saturating_sub(self.prompt.prompt_cache_hit_tokens),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": self.prompt.prompt_cache_hit_tokens,
            "output_tokens": output_tokens,
            "service_tier": "standard",
        })
    }

    fn emit(out: &mut Vec<MessagesEvent>, value: Value) {
        out.push(MessagesEvent::Json(value));
    }

    fn start(&mut self, out: &mut Vec<MessagesEvent>) {
        if self.started {
            return;
        }
        self.started = true;
        let usage = self.usage_value(0);
        Self::emit(
            out,
            json!({"type": "message_start", "message": {"id": self.id, "type": "message",
            "role": "assistant", "model": self.model, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": usage}}),
        );
        // In thinking mode the thinking block opens with the message; otherwise (a parser that
        // starts in reasoning without thinking mode) it opens with the first reasoning text.
        if self.thinking_mode {
            self.open_block(MBlock::Thinking, None, out);
        }
    }

    fn open_block(
        &mut self,
        kind: MBlock,
        tool: Option<(String, String)>,
        out: &mut Vec<MessagesEvent>,
    ) {
        self.close_block(out);
        self.index = self.blocks;
        self.blocks += 1;
        let block = match kind {
            MBlock::Thinking => json!({"type": "thinking", "thinking": "", "signature": ""}),
            MBlock::Text => json!({"type": "text", "text": ""}),
            MBlock::Tool => {
                let (id, name) = tool.unwrap_or_default();
                json!({"type": "tool_use", "id": id, "name": name, "input": {}})
            }
        };
        Self::emit(
            out,
            json!({"type": "content_block_start", "index": self.index, "content_block": block}),
        );
        if !self.pinged {
            self.pinged = true;
            Self::emit(out, json!({"type": "ping"}));
        }
        self.open = Some(kind);
    }

    fn close_block(&mut self, out: &mut Vec<MessagesEvent>) {
        let Some(kind) = self.open.take() else { return };
        if kind == MBlock::Thinking {
            let sig = self.signature.clone().unwrap_or_else(|| self.id.clone());
            Self::emit(
                out,
                json!({"type": "content_block_delta", "index": self.index,
                "delta": {"type": "signature_delta", "signature": sig}}),
            );
        }
        Self::emit(
            out,
            json!({"type": "content_block_stop", "index": self.index}),
        );
    }

    fn event(&mut self, ev: ParseEvent, out: &mut Vec<MessagesEvent>) {
        match ev {
            ParseEvent::Reasoning { text, .. } => {
                self.reasoning_seen = true;
                if self.open != Some(MBlock::Thinking) {
                    self.open_block(MBlock::Thinking, None, out);
                }
                out.push(MessagesEvent::Delta {
                    index: self.index,
                    kind: "thinking_delta",
                    field: "thinking",
                    text,
                });
            }
            ParseEvent::Content { text, .. } => {
                if self.open != Some(MBlock::Text) {
                    self.open_block(MBlock::Text, None, out);
                }
                out.push(MessagesEvent::Delta {
                    index: self.index,
                    kind: "text_delta",
                    field: "text",
                    text,
                });
            }
            ParseEvent::ToolCallStart { index, name } => {
                let id = call_id(index, self.thinking_mode && !self.reasoning_seen);
                self.open_block(MBlock::Tool, Some((id, name)), out);
            }
            ParseEvent::ToolCallArgs { text, .. } => {
                if self.open == Some(MBlock::Tool) {
                    out.push(MessagesEvent::Delta {
                        index: self.index,
                        kind: "input_json_delta",
                        field: "partial_json",
                        text,
                    });
                }
            }
            ParseEvent::ReasoningEnd | ParseEvent::StopSequence(_) => {}
        }
    }

    fn finish(&mut self, kind: &FinishKind, usage: Usage, out: &mut Vec<MessagesEvent>) {
        self.close_block(out);
        let (reason, seq) = match kind {
            FinishKind::Stop => ("end_turn", None),
            FinishKind::ToolCalls => ("tool_use", None),
            FinishKind::StopSequence(s) => ("stop_sequence", Some(s.clone())),
            FinishKind::Length => ("max_tokens", None),
            FinishKind::ContentFilter => ("refusal", None),
        };
        let u = self.usage_value(usage.completion_tokens);
        Self::emit(
            out,
            json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": seq},
            "usage": u}),
        );
        Self::emit(out, json!({"type": "message_stop"}));
    }
}

// ------------------------------------------------------------------------------------------
// The common face the processor drives
// ------------------------------------------------------------------------------------------

/// Any of the three generators.
// One generator lives for the whole stream, so the size gap between the variants costs nothing
// worth a box.
#[allow(clippy::large_enum_variant)]
pub enum Generator {
    Chat(ChatGenerator),
    Responses(ResponsesGenerator),
    Messages(MessagesGenerator),
}

/// Output of a generator: one chunk or event of its protocol.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamItem {
    Chat(ChatChunk),
    Responses(ResponsesEvent),
    Messages(MessagesEvent),
}

impl StreamItem {
    pub fn to_value(&self) -> Value {
        match self {
            StreamItem::Chat(c) => c.to_value(),
            StreamItem::Responses(e) => e.to_value(),
            StreamItem::Messages(e) => e.to_value(),
        }
    }

    pub fn to_json(&self) -> String {
        match self {
            StreamItem::Chat(c) => c.to_value().to_string(),
            StreamItem::Responses(e) => e.to_value().to_string(),
            StreamItem::Messages(e) => e.to_value().to_string(),
        }
    }

    /// The SSE `event:` name: none for Chat Completions, the event type otherwise.
    pub fn sse_event_name(&self) -> Option<&str> {
        match self {
            StreamItem::Chat(_) => None,
            StreamItem::Responses(e) => Some(e.event_type()),
            StreamItem::Messages(e) => Some(e.event_type()),
        }
    }
}

macro_rules! wrap {
    ($variant:ident, $out:expr, $body:expr) => {{
        let mut tmp = Vec::new();
        $body(&mut tmp);
        $out.extend(tmp.into_iter().map(StreamItem::$variant));
    }};
}

impl Generator {
    pub fn set_parser_start(&mut self, starts_in_reasoning: bool) {
        if let Generator::Messages(m) = self {
            m.parser_starts_in_reasoning = starts_in_reasoning;
        }
    }

    pub fn ready(
        &mut self,
        usage: Option<PromptUsage>,
        fingerprint: Option<String>,
        out: &mut Vec<StreamItem>,
    ) {
        match self {
            Generator::Chat(g) => {
                wrap!(Chat, out, |o: &mut Vec<ChatChunk>| g.ready(fingerprint, o))
            }
            Generator::Responses(g) => {
                if let Some(u) = usage {
                    g.prompt = u;
                }
                wrap!(Responses, out, |o: &mut Vec<ResponsesEvent>| g.start(o))
            }
            Generator::Messages(g) => {
                if let Some(u) = usage {
                    if !g.started {
                        g.prompt = u;
                    }
                }
                wrap!(Messages, out, |o: &mut Vec<MessagesEvent>| g.start(o))
            }
        }
    }

    pub fn start(&mut self, out: &mut Vec<StreamItem>) {
        match self {
            Generator::Chat(g) => wrap!(Chat, out, |o: &mut Vec<ChatChunk>| g.start(o)),
            Generator::Responses(g) => {
                wrap!(Responses, out, |o: &mut Vec<ResponsesEvent>| g.start(o))
            }
            Generator::Messages(g) => wrap!(Messages, out, |o: &mut Vec<MessagesEvent>| g.start(o)),
        }
    }

    pub fn events(&mut self, events: Vec<ParseEvent>, out: &mut Vec<StreamItem>) {
        match self {
            Generator::Chat(g) => wrap!(Chat, out, |o: &mut Vec<ChatChunk>| for e in events {
                g.event(e, o)
            }),
            Generator::Responses(g) => {
                wrap!(
                    Responses,
                    out,
                    |o: &mut Vec<ResponsesEvent>| for e in events {
                        g.event(e, o)
                    }
                )
            }
            Generator::Messages(g) => {
                wrap!(
                    Messages,
                    out,
                    |o: &mut Vec<MessagesEvent>| for e in events {
                        g.event(e, o)
                    }
                )
            }
        }
    }

    pub fn finish(&mut self, kind: &FinishKind, usage: Usage, out: &mut Vec<StreamItem>) {
        match self {
            Generator::Chat(g) => {
                wrap!(Chat, out, |o: &mut Vec<ChatChunk>| g.finish(kind, usage, o))
            }
            Generator::Responses(g) => wrap!(Responses, out, |o: &mut Vec<ResponsesEvent>| g
                .finish(kind, usage, o)),
            Generator::Messages(g) => wrap!(Messages, out, |o: &mut Vec<MessagesEvent>| g
                .finish(kind, usage, o)),
        }
    }
}

/// A sampling setting the request stored as `f32`, written with that `f32`'s shortest decimal
/// spelling (`0.9`, not `0.8999999761581421`), as Responses objects report it.
fn shortest_f32(x: f64) -> f64 {
    let short = (x as f32).to_string();
    short.parse().unwrap_or(x)
}
