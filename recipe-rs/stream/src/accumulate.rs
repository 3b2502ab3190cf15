//! Accumulators: fold a protocol's chunks or events into the complete (non-streamed) response.

use serde_json::{json, Map, Value};

use recipe_core::ResponsesEcho;

use crate::generator::messages::BlockDelta;
use crate::generator::responses::ResponseObject;
use crate::generator::{
    chat_usage_value, logprob_value, to_value, ChatChunk, ChatDelta, MessagesEvent, ResponsesEvent,
    Usage,
};
use crate::input::TokenLogprob;

#[derive(Clone, Debug, Default, PartialEq)]
enum Field {
    #[default]
    Absent,
    Null,
    Str(String),
}

impl Field {
    fn null(&mut self) {
        if *self == Field::Absent {
            *self = Field::Null;
        }
    }
    fn append(&mut self, s: &str) {
        match self {
            Field::Str(a) => a.push_str(s),
            _ => *self = Field::Str(s.to_owned()),
        }
    }
    fn value(&self) -> Option<Value> {
        match self {
            Field::Absent => None,
            Field::Null => Some(Value::Null),
            Field::Str(s) => Some(json!(s)),
        }
    }
}

/// A `chat.completion` built from `chat.completion.chunk`s.
#[derive(Clone, Debug)]
pub struct ChatCompletionResponse {
    id: String,
    model: String,
    created: u64,
    system_fingerprint: Option<String>,
    content: Field,
    reasoning: Field,
    tool_calls: Vec<(usize, String, String, String)>,
    content_logprobs: Option<Vec<TokenLogprob>>,
    reasoning_logprobs: Option<Vec<TokenLogprob>>,
    finish_reason: Option<&'static str>,
    usage: Option<Usage>,
    /// Whether any chunk was applied (an empty response has no choice).
    seen: bool,
}

impl ChatCompletionResponse {
    pub fn new(
        id: String,
        model: String,
        created: u64,
        prompt_tokens: u64,
        prompt_cache_hit_tokens: u64,
    ) -> Self {
        // The prompt counts are part of the official signature; the usage reported comes from
        // the chunks' own `usage`.
        let _ = (prompt_tokens, prompt_cache_hit_tokens);
        ChatCompletionResponse {
            id,
            model,
            created,
            system_fingerprint: None,
            content: Field::Absent,
            reasoning: Field::Absent,
            tool_calls: Vec::new(),
            content_logprobs: None,
            reasoning_logprobs: None,
            finish_reason: None,
            usage: None,
            seen: false,
        }
    }

    pub fn accumulate(&mut self, chunk: &ChatChunk) {
        self.seen = true;
        if chunk.meta.system_fingerprint.is_some() {
            self.system_fingerprint = chunk.meta.system_fingerprint.clone();
        }
        match &chunk.delta {
            ChatDelta::Open { reasoning } => {
                if *reasoning {
                    self.content.null();
                    self.reasoning.append("");
                } else {
                    self.content.append("");
                }
            }
            ChatDelta::Reasoning(t) => {
                self.content.null();
                self.reasoning.append(t);
            }
            ChatDelta::Content(_) | ChatDelta::Final => {
                let t = match &chunk.delta {
                    ChatDelta::Content(t) => t.as_str(),
                    _ => "",
                };
                self.content.append(t);
            }
            ChatDelta::ToolStart { index, id, name } => {
                self.tool_calls
                    .push((*index, id.clone(), name.clone(), String::new()));
            }
            ChatDelta::ToolArgs { index, arguments } => {
                if let Some(tc) = self.tool_calls.iter_mut().find(|t| t.0 == *index) {
                    tc.3.push_str(arguments);
                }
            }
        }
        if !chunk.logprobs.is_empty() {
            let target = if matches!(chunk.delta, ChatDelta::Reasoning(_)) {
                &mut self.reasoning_logprobs
            } else {
                &mut self.content_logprobs
            };
            target
                .get_or_insert_with(Vec::new)
                .extend(chunk.logprobs.iter().cloned());
        }
        if chunk.finish_reason.is_some() {
            self.finish_reason = chunk.finish_reason;
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
    }

    pub fn to_value(&self) -> Value {
        let mut msg = Map::new();
        msg.insert("role".into(), json!("assistant"));
        if let Some(v) = self.content.value() {
            msg.insert("content".into(), v);
        }
        if let Some(v) = self.reasoning.value() {
            msg.insert("reasoning_content".into(), v);
        }
        if !self.tool_calls.is_empty() {
            msg.insert(
                "tool_calls".into(),
                Value::Array(
                    self.tool_calls
                        .iter()
                        .map(|(i, id, name, args)| {
                            json!({"index": i, "id": id, "type": "function",
                                   "function": {"name": name, "arguments": args}})
                        })
                        .collect(),
                ),
            );
        }
        let logprobs = if self.content_logprobs.is_none() && self.reasoning_logprobs.is_none() {
            Value::Null
        } else {
            let mut m = Map::new();
            if let Some(l) = &self.content_logprobs {
                m.insert(
                    "content".into(),
                    Value::Array(l.iter().map(logprob_value).collect()),
                );
            }
            if let Some(l) = &self.reasoning_logprobs {
                m.insert(
                    "reasoning_content".into(),
                    Value::Array(l.iter().map(logprob_value).collect()),
                );
            }
            Value::Object(m)
        };
        let mut m = Map::new();
        m.insert("id".into(), json!(self.id));
        m.insert("object".into(), json!("chat.completion"));
        m.insert("created".into(), json!(self.created));
        m.insert("model".into(), json!(self.model));
        m.insert(
            "choices".into(),
            if self.seen {
                json!([{"index": 0, "message": Value::Object(msg), "logprobs": logprobs, "finish_reason": self.finish_reason}])
            } else {
                json!([])
            },
        );
        if let Some(u) = &self.usage {
            m.insert("usage".into(), chat_usage_value(u));
        }
        m.insert("system_fingerprint".into(), json!(self.system_fingerprint));
        Value::Object(m)
    }
}

/// A Responses `response` object built from stream events.
///
/// Until a `response.completed` (or `.incomplete`) event brings the whole response, the
/// output is rebuilt from the item events: an item added, its text part, its deltas and its
/// done events, so a stream that ends early (closed, or stopped by an error) keeps the item
/// being written, with the text or arguments it got so far.
#[derive(Clone, Debug)]
pub struct ResponsesResponse {
    snapshot: Value,
}

impl ResponsesResponse {
    pub fn new(
        id: String,
        model: String,
        created: u64,
        prompt_tokens: u64,
        prompt_cache_hit_tokens: u64,
    ) -> Self {
        let _ = (prompt_tokens, prompt_cache_hit_tokens);
        let empty = ResponseObject::new(&id, &model, created, &ResponsesEcho::default());
        ResponsesResponse {
            snapshot: to_value(&empty),
        }
    }

    /// The output item at `index`, if the stream has added it.
    fn item(&mut self, index: usize) -> Option<&mut Map<String, Value>> {
        self.snapshot
            .get_mut("output")?
            .as_array_mut()?
            .get_mut(index)?
            .as_object_mut()
    }

    /// The content part `part` of output item `index`.
    fn part(&mut self, index: usize, part: u32) -> Option<&mut Map<String, Value>> {
        self.item(index)?
            .get_mut("content")?
            .as_array_mut()?
            .get_mut(part as usize)?
            .as_object_mut()
    }

    /// Append `text` to the string field `key` of `target`.
    fn append(target: Option<&mut Map<String, Value>>, key: &str, text: &str) {
        if let Some(Value::String(s)) = target.and_then(|t| t.get_mut(key)) {
            s.push_str(text);
        }
    }

    /// Set the field `key` of `target`.
    fn set(target: Option<&mut Map<String, Value>>, key: &str, value: Value) {
        if let Some(t) = target {
            t.insert(key.into(), value);
        }
    }

    pub fn accumulate(&mut self, event: &ResponsesEvent) {
        match event {
            ResponsesEvent::Created { response, .. }
            | ResponsesEvent::InProgress { response, .. } => {
                // The output gathered so far stays until a response object reports its own.
                let keep =
                    std::mem::take(self.snapshot.get_mut("output").unwrap_or(&mut Value::Null));
                self.snapshot = to_value(&**response);
                if let (Some(Value::Array(out)), Value::Array(k)) =
                    (self.snapshot.get_mut("output"), keep)
                {
                    if out.is_empty() {
                        *out = k;
                    }
                }
            }
            ResponsesEvent::Completed { response, .. }
            | ResponsesEvent::Incomplete { response, .. } => {
                self.snapshot = to_value(&**response);
            }
            ResponsesEvent::OutputItemAdded {
                item, output_index, ..
            }
            | ResponsesEvent::OutputItemDone {
                item, output_index, ..
            } => {
                if let Some(Value::Array(out)) = self.snapshot.get_mut("output") {
                    match out.get_mut(*output_index) {
                        Some(slot) => *slot = to_value(item),
                        None => out.push(to_value(item)),
                    }
                }
            }
            ResponsesEvent::ContentPartAdded {
                output_index, part, ..
            } => {
                if let Some(Value::Array(parts)) = self
                    .item(*output_index)
                    .and_then(|item| item.get_mut("content"))
                {
                    parts.push(to_value(part));
                }
            }
            ResponsesEvent::ContentPartDone {
                output_index,
                content_index,
                part,
                ..
            } => {
                if let Some(p) = self.part(*output_index, *content_index) {
                    if let Value::Object(done) = to_value(part) {
                        *p = done;
                    }
                }
            }
            ResponsesEvent::ReasoningDelta {
                output_index,
                content_index,
                delta,
                ..
            } => Self::append(self.part(*output_index, *content_index), "text", delta),
            ResponsesEvent::TextDelta {
                output_index,
                content_index,
                delta,
                logprobs,
                ..
            } => {
                let part = self.part(*output_index, *content_index);
                if let Some(p) = part {
                    if let Some(Value::String(s)) = p.get_mut("text") {
                        s.push_str(delta);
                    }
                    if let Some(Value::Array(lps)) = p.get_mut("logprobs") {
                        lps.extend(logprobs.iter().map(logprob_value));
                    }
                }
            }
            ResponsesEvent::ReasoningDone {
                output_index,
                content_index,
                text,
                ..
            }
            | ResponsesEvent::TextDone {
                output_index,
                content_index,
                text,
                ..
            } => Self::set(
                self.part(*output_index, *content_index),
                "text",
                json!(text),
            ),
            ResponsesEvent::ArgumentsDelta {
                output_index,
                delta,
                ..
            } => Self::append(self.item(*output_index), "arguments", delta),
            ResponsesEvent::ArgumentsDone {
                output_index,
                arguments,
                ..
            } => Self::set(self.item(*output_index), "arguments", json!(arguments)),
            ResponsesEvent::CustomInputDelta {
                output_index,
                delta,
                ..
            } => Self::append(self.item(*output_index), "input", delta),
            ResponsesEvent::CustomInputDone {
                output_index,
                input,
                ..
            } => Self::set(self.item(*output_index), "input", json!(input)),
        }
    }

    pub fn to_value(&self) -> Value {
        self.snapshot.clone()
    }
}

/// An Anthropic `message` built from stream events.
#[derive(Clone, Debug)]
pub struct MessagesResponse {
    message: Value,
    partial_json: Vec<(usize, String)>,
    texts: Vec<(usize, &'static str, String)>,
}

impl MessagesResponse {
    pub fn new(
        id: String,
        model: String,
        created: u64,
        prompt_tokens: u64,
        prompt_cache_hit_tokens: u64,
    ) -> Self {
        let _ = created;
        MessagesResponse {
            message: json!({"id": id, "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": null, "stop_sequence": null, "usage": {
                    "input_tokens": prompt_tokens.saturating_sub(prompt_cache_hit_tokens),
                    "cache_creation_input_tokens": 0, "cache_read_input_tokens": prompt_cache_hit_tokens,
                    "output_tokens": 0, "service_tier": "standard"}}),
            partial_json: Vec::new(),
            texts: Vec::new(),
        }
    }

    fn block(&mut self, index: usize) -> Option<&mut Map<String, Value>> {
        self.message
            .get_mut("content")?
            .as_array_mut()?
            .get_mut(index)?
            .as_object_mut()
    }

    pub fn accumulate(&mut self, event: &MessagesEvent) {
        match event {
            MessagesEvent::MessageStart { message } => self.message = to_value(message),
            MessagesEvent::ContentBlockStart { content_block, .. } => {
                if let Some(Value::Array(c)) = self.message.get_mut("content") {
                    c.push(to_value(content_block));
                }
            }
            MessagesEvent::ContentBlockDelta { index, delta } => {
                let (ty, text) = match delta {
                    BlockDelta::ThinkingDelta { thinking } => ("thinking_delta", thinking),
                    BlockDelta::TextDelta { text } => ("text_delta", text),
                    BlockDelta::SignatureDelta { signature } => ("signature_delta", signature),
                    BlockDelta::InputJsonDelta { partial_json } => {
                        ("input_json_delta", partial_json)
                    }
                };
                self.apply_delta(*index, ty, text);
            }
            MessagesEvent::ContentBlockStop { index } => {
                let index = *index;
                if let Some(pos) = self.partial_json.iter().position(|(i, _)| *i == index) {
                    let (_, s) = self.partial_json.remove(pos);
                    let input = serde_json::from_str::<Value>(&s).unwrap_or_else(|_| json!({}));
                    if let Some(b) = self.block(index) {
                        b.insert("input".into(), input);
                    }
                }
            }
            MessagesEvent::MessageDelta { delta, usage } => {
                if let Value::Object(m) = &mut self.message {
                    m.insert("stop_reason".into(), json!(delta.stop_reason));
                    m.insert("stop_sequence".into(), json!(delta.stop_sequence));
                    m.insert("usage".into(), to_value(usage));
                }
            }
            MessagesEvent::Ping {} | MessagesEvent::MessageStop {} => {}
        }
    }

    fn apply_delta(&mut self, index: usize, ty: &str, s: &str) {
        if ty == "input_json_delta" {
            match self.partial_json.iter_mut().find(|(i, _)| *i == index) {
                Some((_, acc)) => acc.push_str(s),
                None => self.partial_json.push((index, s.to_owned())),
            }
            return;
        }
        let field = match ty {
            "thinking_delta" => "thinking",
            "text_delta" => "text",
            "signature_delta" => "signature",
            _ => return,
        };
        // Text is gathered outside the JSON so a long answer accumulates in linear time.
        match self
            .texts
            .iter_mut()
            .rev()
            .find(|(i, f, _)| *i == index && *f == field)
        {
            Some((_, _, acc)) if field == "signature" => *acc = s.to_owned(),
            Some((_, _, acc)) => acc.push_str(s),
            None => self.texts.push((index, field, s.to_owned())),
        }
    }

    pub fn to_value(&self) -> Value {
        let mut m = self.message.clone();
        if let Some(Value::Array(blocks)) = m.get_mut("content") {
            for (i, field, text) in &self.texts {
                if let Some(Value::Object(b)) = blocks.get_mut(*i) {
                    let mut cur = b
                        .get(*field)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned();
                    if *field == "signature" {
                        cur.clear();
                    }
                    cur.push_str(text);
                    b.insert((*field).into(), json!(cur));
                }
            }
        }
        m
    }
}
