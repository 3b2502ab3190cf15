//! OpenAI Responses: stream events.
//!
//! A stream is `response.created` and `response.in_progress` (each with the response object),
//! then one output item at a time — a reasoning item, a message or a function call — each
//! opened with `output_item.added` (and `content_part.added` for text), filled with delta events
//! and closed with its `.done` events, and finally `response.completed` (or
//! `response.incomplete`) with the whole response. Every event carries the next
//! `sequence_number`.
//!
//! The types below are the wire form: field order is key order.

use std::sync::Arc;

use recipe_core::ResponsesEcho;
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::custom_input::CustomInput;
use super::{
    call_id, now_secs, write_serde, AlwaysNull, EmptyArray, EmptyObject, FinishKind,
    GeneratorConfig, StreamItem, Usage, WireJson,
};
use crate::input::{PromptUsage, TokenLogprob};
use crate::parser::ParseEvent;

wire_events! {
    /// One Responses stream event.
    ResponsesEvent {
        /// The stream opened; the response is `in_progress` with no output.
        Created = "response.created" { response: Arc<ResponseObject>, sequence_number: u64 }
        /// Sent right after `response.created`, with the same response.
        InProgress = "response.in_progress" { response: Arc<ResponseObject>, sequence_number: u64 }
        /// An output item opened (empty, `in_progress`).
        OutputItemAdded = "response.output_item.added" {
            item: OutputItem, output_index: usize, sequence_number: u64
        }
        /// The text part of a reasoning item or message opened (empty).
        ContentPartAdded = "response.content_part.added" {
            content_index: u32, item_id: Arc<str>, output_index: usize, part: ContentPart,
            sequence_number: u64
        }
        /// More reasoning text.
        ReasoningDelta = "response.reasoning_text.delta" {
            content_index: u32, delta: String, item_id: Arc<str>, output_index: usize,
            sequence_number: u64
        }
        /// More answer text, with the log probabilities of its tokens.
        TextDelta = "response.output_text.delta" {
            content_index: u32, delta: String, item_id: Arc<str>, logprobs: Vec<TokenLogprob>,
            output_index: usize, sequence_number: u64
        }
        /// More of a function call's arguments.
        ArgumentsDelta = "response.function_call_arguments.delta" {
            delta: String, item_id: Arc<str>, output_index: usize, sequence_number: u64
        }
        /// More of a custom tool call's input.
        CustomInputDelta = "response.custom_tool_call_input.delta" {
            delta: String, item_id: Arc<str>, output_index: usize, sequence_number: u64
        }
        /// A custom tool call's whole input.
        CustomInputDone = "response.custom_tool_call_input.done" {
            input: String, item_id: Arc<str>, output_index: usize, sequence_number: u64
        }
        /// A reasoning item's whole text.
        ReasoningDone = "response.reasoning_text.done" {
            content_index: u32, item_id: Arc<str>, output_index: usize, sequence_number: u64,
            text: String
        }
        /// A message's whole text.
        TextDone = "response.output_text.done" {
            content_index: u32, item_id: Arc<str>, logprobs: Vec<TokenLogprob>, output_index: usize,
            sequence_number: u64, text: String
        }
        /// A function call's whole arguments.
        ArgumentsDone = "response.function_call_arguments.done" {
            arguments: String, item_id: Arc<str>, output_index: usize, sequence_number: u64
        }
        /// The text part of a reasoning item or message, complete.
        ContentPartDone = "response.content_part.done" {
            content_index: u32, item_id: Arc<str>, output_index: usize, part: ContentPart,
            sequence_number: u64
        }
        /// An output item, complete.
        OutputItemDone = "response.output_item.done" {
            item: OutputItem, output_index: usize, sequence_number: u64
        }
        /// The stream ended normally; the response holds every output item and the usage.
        Completed = "response.completed" { response: Arc<ResponseObject>, sequence_number: u64 }
        /// The stream ended at the token limit or a content filter.
        Incomplete = "response.incomplete" { response: Arc<ResponseObject>, sequence_number: u64 }
    }
}

impl WireJson for ResponsesEvent {
    fn write_json(&self, buf: &mut Vec<u8>) {
        write_serde(self, buf);
    }
}

impl ResponsesEvent {
    /// The event as a JSON value.
    pub fn to_value(&self) -> Value {
        super::to_value(self)
    }
}

/// One output item of a response.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputItem {
    Reasoning {
        id: Arc<str>,
        status: ItemStatus,
        content: Vec<ContentPart>,
        summary: EmptyArray,
        /// `{response id}-{output index}`.
        encrypted_content: String,
    },
    Message {
        id: Arc<str>,
        status: ItemStatus,
        /// Always `"assistant"`.
        role: &'static str,
        phase: Phase,
        content: Vec<ContentPart>,
    },
    FunctionCall {
        id: Arc<str>,
        status: ItemStatus,
        call_id: String,
        /// The function's name (within its namespace, if it has one).
        name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        arguments: String,
    },
    /// A call of a custom (free-text) tool of the request, such as `apply_patch`.
    CustomToolCall {
        id: Arc<str>,
        status: ItemStatus,
        call_id: String,
        name: String,
        input: String,
    },
}

/// The text part of a reasoning item or a message.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    ReasoningText {
        text: String,
    },
    OutputText {
        annotations: EmptyArray,
        logprobs: Vec<TokenLogprob>,
        text: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    InProgress,
    Completed,
    Incomplete,
}

/// A message's phase: `commentary` when a function call follows it, else `final_answer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Commentary,
    FinalAnswer,
}

/// The `response` object of `response.created`, `.in_progress`, `.completed` and
/// `.incomplete`. The request settings it reports come from the generator's echo.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResponseObject {
    pub id: String,
    /// Always `"response"`.
    pub object: &'static str,
    pub created_at: u64,
    pub status: ItemStatus,
    pub background: bool,
    pub completed_at: Option<u64>,
    pub content_filters: AlwaysNull,
    pub error: AlwaysNull,
    pub frequency_penalty: f64,
    pub incomplete_details: Option<IncompleteDetails>,
    pub instructions: Option<String>,
    pub max_output_tokens: Option<u64>,
    pub max_tool_calls: AlwaysNull,
    pub model: String,
    pub moderation: AlwaysNull,
    pub output: Vec<OutputItem>,
    pub parallel_tool_calls: bool,
    pub presence_penalty: f64,
    pub previous_response_id: AlwaysNull,
    pub prompt_cache_key: AlwaysNull,
    pub prompt_cache_retention: AlwaysNull,
    /// The request's `reasoning`, with `effort` and `summary` always present.
    pub reasoning: Value,
    pub safety_identifier: AlwaysNull,
    /// Always `"default"`.
    pub service_tier: &'static str,
    pub store: bool,
    pub temperature: f64,
    /// The request's `text` setting (see [`text_echo`]).
    pub text: Value,
    pub tool_choice: Value,
    /// The request's tools; a function tool always shows `strict`.
    pub tools: Value,
    pub top_logprobs: u64,
    pub top_p: f64,
    /// Always `"disabled"`.
    pub truncation: &'static str,
    pub usage: Option<ResponseUsage>,
    pub user: Option<String>,
    pub metadata: EmptyObject,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IncompleteDetails {
    /// `max_output_tokens` or `content_filter`.
    pub reason: &'static str,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResponseUsage {
    pub input_tokens: u64,
    pub input_tokens_details: InputTokensDetails,
    pub output_tokens: u64,
    pub output_tokens_details: OutputTokensDetails,
    pub total_tokens: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InputTokensDetails {
    pub cached_tokens: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OutputTokensDetails {
    pub reasoning_tokens: u64,
}

impl From<&Usage> for ResponseUsage {
    fn from(u: &Usage) -> Self {
        ResponseUsage {
            input_tokens: u.prompt_tokens,
            input_tokens_details: InputTokensDetails {
                cached_tokens: u.prompt_cache_hit_tokens,
            },
            output_tokens: u.completion_tokens,
            output_tokens_details: OutputTokensDetails {
                reasoning_tokens: u.reasoning_tokens.unwrap_or(0),
            },
            total_tokens: u.prompt_tokens + u.completion_tokens,
        }
    }
}

impl ResponseObject {
    /// An `in_progress` response without output or usage that reports the settings in `echo`
    /// (a default echo: those of an unspecified request).
    pub fn new(id: &str, model: &str, created_at: u64, echo: &ResponsesEcho) -> Self {
        let e = echo;
        ResponseObject {
            id: id.to_owned(),
            object: "response",
            created_at,
            status: ItemStatus::InProgress,
            background: false,
            completed_at: None,
            content_filters: (),
            error: (),
            frequency_penalty: 0.0,
            incomplete_details: None,
            instructions: e.instructions.clone(),
            max_output_tokens: e.max_output_tokens,
            max_tool_calls: (),
            model: model.to_owned(),
            moderation: (),
            output: Vec::new(),
            parallel_tool_calls: true,
            presence_penalty: 0.0,
            previous_response_id: (),
            prompt_cache_key: (),
            prompt_cache_retention: (),
            reasoning: with_nulls(
                &e.reasoning,
                &["effort", "summary"],
                json!({"effort": null, "summary": null}),
            ),
            safety_identifier: (),
            service_tier: "default",
            store: false,
            temperature: shortest_f32(e.temperature),
            text: text_echo(&e.text),
            tool_choice: e.tool_choice.clone().unwrap_or(json!("auto")),
            tools: tools_echo(&e.tools),
            top_logprobs: e.top_logprobs,
            top_p: shortest_f32(e.top_p),
            truncation: "disabled",
            usage: None,
            user: e.user.clone(),
            metadata: EmptyObject,
        }
    }
}

// ------------------------------------------------------------------------------------------
// Request settings echoed in the response object
// ------------------------------------------------------------------------------------------

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

/// The names of a Responses request's custom tools (`{"type": "custom", "name": …}`).
pub fn custom_tools_from_tools(tools: &Value) -> Vec<String> {
    tools
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t.get("type").and_then(Value::as_str) == Some("custom"))
        .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// A sampling setting the request stored as `f32`, written with that `f32`'s shortest decimal
/// spelling (`0.9`, not `0.8999999761581421`), as Responses objects report it.
fn shortest_f32(x: f64) -> f64 {
    let short = (x as f32).to_string();
    short.parse().unwrap_or(x)
}

/// An object setting with `keys` first (null when missing), then its other members.
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

/// The request's tools as a response reports them: a function tool without `strict` gets
/// `"strict": null`.
fn tools_echo(tools: &Option<Value>) -> Value {
    match tools {
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
    }
}

// ------------------------------------------------------------------------------------------
// Generator
// ------------------------------------------------------------------------------------------

/// The output item being written.
#[derive(Clone, Debug)]
enum OpenItem {
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
    CustomCall {
        id: Arc<str>,
        call_id: String,
        name: String,
        input: String,
        reader: CustomInput,
    },
}

pub struct ResponsesGenerator {
    id: String,
    model: String,
    created: u64,
    config: GeneratorConfig,
    echo: ResponsesEcho,
    namespace_map: Vec<(String, (String, String))>,
    /// Names of the request's custom tools: their calls are `custom_tool_call` items.
    custom_tools: Vec<String>,
    seq: u64,
    started: bool,
    open: Option<OpenItem>,
    done_items: Vec<OutputItem>,
    reasoning_seen: bool,
    prompt: PromptUsage,
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
            custom_tools: Vec::new(),
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

    /// Calls of the tools named in `names` are custom tool calls (`input` text, not arguments).
    pub fn with_custom_tools(mut self, names: Vec<String>) -> Self {
        self.custom_tools = names;
        self
    }

    fn response(
        &self,
        status: ItemStatus,
        completed_at: Option<u64>,
        incomplete: Option<&'static str>,
        usage: Option<&Usage>,
    ) -> Arc<ResponseObject> {
        let mut r = ResponseObject::new(&self.id, &self.model, self.created, &self.echo);
        r.status = status;
        r.completed_at = completed_at;
        r.incomplete_details = incomplete.map(|reason| IncompleteDetails { reason });
        r.output = self.done_items.clone();
        r.usage = usage.map(ResponseUsage::from);
        Arc::new(r)
    }

    /// The next sequence number (every event takes one, in order).
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq - 1
    }

    pub(super) fn ready(&mut self, usage: Option<PromptUsage>, out: &mut Vec<StreamItem>) {
        if let Some(u) = usage {
            self.prompt = u;
        }
        self.start(out);
    }

    pub(super) fn start(&mut self, out: &mut Vec<StreamItem>) {
        if self.started {
            return;
        }
        self.started = true;
        let response = self.response(ItemStatus::InProgress, None, None, None);
        let sequence_number = self.next_seq();
        out.push(
            ResponsesEvent::Created {
                response: response.clone(),
                sequence_number,
            }
            .into(),
        );
        let sequence_number = self.next_seq();
        out.push(
            ResponsesEvent::InProgress {
                response,
                sequence_number,
            }
            .into(),
        );
    }

    fn output_index(&self) -> usize {
        self.done_items.len()
    }

    /// Emit `output_item.added` for `item`, and `content_part.added` for `part` if given.
    fn open_item(
        &mut self,
        item: OutputItem,
        part: Option<ContentPart>,
        out: &mut Vec<StreamItem>,
    ) {
        let output_index = self.output_index();
        let item_id = match &item {
            OutputItem::Reasoning { id, .. }
            | OutputItem::Message { id, .. }
            | OutputItem::FunctionCall { id, .. }
            | OutputItem::CustomToolCall { id, .. } => id.clone(),
        };
        let sequence_number = self.next_seq();
        out.push(
            ResponsesEvent::OutputItemAdded {
                item,
                output_index,
                sequence_number,
            }
            .into(),
        );
        if let Some(part) = part {
            let sequence_number = self.next_seq();
            out.push(
                ResponsesEvent::ContentPartAdded {
                    content_index: 0,
                    item_id,
                    output_index,
                    part,
                    sequence_number,
                }
                .into(),
            );
        }
    }

    /// Close the open item with `status`; `commentary` relabels a message followed by a call.
    fn close(&mut self, status: ItemStatus, commentary: bool, out: &mut Vec<StreamItem>) {
        if let Some(OpenItem::CustomCall { reader, .. }) = &mut self.open {
            // Input held while it could still turn out to be an `input` string goes out first.
            let held = reader.finish();
            if !held.is_empty() {
                self.custom_input_delta(held, out);
            }
        }
        let Some(item) = self.open.take() else { return };
        let output_index = self.output_index();
        let (item_id, text_done, part) = match &item {
            OpenItem::Reasoning { id, text, .. } => (
                id.clone(),
                ResponsesEvent::ReasoningDone {
                    content_index: 0,
                    item_id: id.clone(),
                    output_index,
                    sequence_number: self.next_seq(),
                    text: text.clone(),
                },
                Some(ContentPart::ReasoningText { text: text.clone() }),
            ),
            OpenItem::Message {
                id, text, logprobs, ..
            } => (
                id.clone(),
                ResponsesEvent::TextDone {
                    content_index: 0,
                    item_id: id.clone(),
                    logprobs: logprobs.clone(),
                    output_index,
                    sequence_number: self.next_seq(),
                    text: text.clone(),
                },
                Some(ContentPart::OutputText {
                    annotations: EmptyArray,
                    logprobs: logprobs.clone(),
                    text: text.clone(),
                }),
            ),
            OpenItem::Call { id, arguments, .. } => (
                id.clone(),
                ResponsesEvent::ArgumentsDone {
                    arguments: arguments.clone(),
                    item_id: id.clone(),
                    output_index,
                    sequence_number: self.next_seq(),
                },
                None,
            ),
            OpenItem::CustomCall { id, input, .. } => (
                id.clone(),
                ResponsesEvent::CustomInputDone {
                    input: input.clone(),
                    item_id: id.clone(),
                    output_index,
                    sequence_number: self.next_seq(),
                },
                None,
            ),
        };
        out.push(text_done.into());
        if let Some(part) = &part {
            let sequence_number = self.next_seq();
            out.push(
                ResponsesEvent::ContentPartDone {
                    content_index: 0,
                    item_id,
                    output_index,
                    part: part.clone(),
                    sequence_number,
                }
                .into(),
            );
        }
        let done = match item {
            OpenItem::Reasoning { id, n, .. } => OutputItem::Reasoning {
                id,
                status,
                content: part.into_iter().collect(),
                summary: EmptyArray,
                encrypted_content: format!("{}-{n}", self.id),
            },
            OpenItem::Message { id, .. } => OutputItem::Message {
                id,
                status,
                role: "assistant",
                phase: if commentary {
                    Phase::Commentary
                } else {
                    Phase::FinalAnswer
                },
                content: part.into_iter().collect(),
            },
            OpenItem::Call {
                id,
                call_id,
                name,
                namespace,
                arguments,
            } => OutputItem::FunctionCall {
                id,
                status,
                call_id,
                name,
                namespace,
                arguments,
            },
            OpenItem::CustomCall {
                id,
                call_id,
                name,
                input,
                ..
            } => OutputItem::CustomToolCall {
                id,
                status,
                call_id,
                name,
                input,
            },
        };
        let sequence_number = self.next_seq();
        out.push(
            ResponsesEvent::OutputItemDone {
                item: done.clone(),
                output_index,
                sequence_number,
            }
            .into(),
        );
        self.done_items.push(done);
    }

    pub(super) fn event(&mut self, ev: ParseEvent, out: &mut Vec<StreamItem>) {
        match ev {
            ParseEvent::Reasoning { text, .. } => {
                self.reasoning_seen = true;
                if !matches!(self.open, Some(OpenItem::Reasoning { .. })) {
                    self.close(ItemStatus::Completed, false, out);
                    let n = self.output_index();
                    let id: Arc<str> = format!("rs_{}_{n}", self.id).into();
                    let item = OutputItem::Reasoning {
                        id: id.clone(),
                        status: ItemStatus::InProgress,
                        content: Vec::new(),
                        summary: EmptyArray,
                        encrypted_content: format!("{}-{n}", self.id),
                    };
                    let part = ContentPart::ReasoningText {
                        text: String::new(),
                    };
                    self.open_item(item, Some(part), out);
                    self.open = Some(OpenItem::Reasoning {
                        id,
                        n,
                        text: String::new(),
                    });
                }
                let output_index = self.output_index();
                let sequence_number = self.next_seq();
                if let Some(OpenItem::Reasoning { id, text: acc, .. }) = &mut self.open {
                    acc.push_str(&text);
                    out.push(
                        ResponsesEvent::ReasoningDelta {
                            content_index: 0,
                            delta: text,
                            item_id: id.clone(),
                            output_index,
                            sequence_number,
                        }
                        .into(),
                    );
                }
            }
            ParseEvent::Content { text, logprobs } => {
                if !matches!(self.open, Some(OpenItem::Message { .. })) {
                    self.close(ItemStatus::Completed, false, out);
                    let n = self.output_index();
                    let id: Arc<str> = format!("msg_{}_{n}", self.id).into();
                    let item = OutputItem::Message {
                        id: id.clone(),
                        status: ItemStatus::InProgress,
                        role: "assistant",
                        phase: Phase::FinalAnswer,
                        content: Vec::new(),
                    };
                    let part = ContentPart::OutputText {
                        annotations: EmptyArray,
                        logprobs: Vec::new(),
                        text: String::new(),
                    };
                    self.open_item(item, Some(part), out);
                    self.open = Some(OpenItem::Message {
                        id,
                        text: String::new(),
                        logprobs: Vec::new(),
                    });
                }
                let output_index = self.output_index();
                let sequence_number = self.next_seq();
                if let Some(OpenItem::Message {
                    id,
                    text: acc,
                    logprobs: acc_lps,
                }) = &mut self.open
                {
                    acc.push_str(&text);
                    acc_lps.extend(logprobs.iter().cloned());
                    out.push(
                        ResponsesEvent::TextDelta {
                            content_index: 0,
                            delta: text,
                            item_id: id.clone(),
                            logprobs,
                            output_index,
                            sequence_number,
                        }
                        .into(),
                    );
                }
            }
            ParseEvent::ToolCallStart { index, name } if self.custom_tools.contains(&name) => {
                let commentary = matches!(self.open, Some(OpenItem::Message { .. }));
                self.close(ItemStatus::Completed, commentary, out);
                let n = self.output_index();
                let id: Arc<str> = format!("ctc_{}_{n}", self.id).into();
                let call_id = call_id(index, self.config.thinking_mode && !self.reasoning_seen);
                let item = OutputItem::CustomToolCall {
                    id: id.clone(),
                    status: ItemStatus::InProgress,
                    call_id: call_id.clone(),
                    name: name.clone(),
                    input: String::new(),
                };
                self.open_item(item, None, out);
                self.open = Some(OpenItem::CustomCall {
                    id,
                    call_id,
                    name,
                    input: String::new(),
                    reader: CustomInput::default(),
                });
            }
            ParseEvent::ToolCallStart { index, name } => {
                let commentary = matches!(self.open, Some(OpenItem::Message { .. }));
                self.close(ItemStatus::Completed, commentary, out);
                let n = self.output_index();
                let id: Arc<str> = format!("fc_{}_{n}", self.id).into();
                let call_id = call_id(index, self.config.thinking_mode && !self.reasoning_seen);
                let (name, namespace) = match self.namespace_map.iter().find(|(k, _)| *k == name) {
                    Some((_, (ns, local))) => (local.clone(), Some(ns.clone())),
                    None => (name, None),
                };
                let item = OutputItem::FunctionCall {
                    id: id.clone(),
                    status: ItemStatus::InProgress,
                    call_id: call_id.clone(),
                    name: name.clone(),
                    namespace: namespace.clone(),
                    arguments: String::new(),
                };
                self.open_item(item, None, out);
                self.open = Some(OpenItem::Call {
                    id,
                    call_id,
                    name,
                    namespace,
                    arguments: String::new(),
                });
            }
            ParseEvent::ToolCallArgs { text, .. } => {
                if let Some(OpenItem::CustomCall { reader, .. }) = &mut self.open {
                    let input = reader.push(&text);
                    if !input.is_empty() {
                        self.custom_input_delta(input, out);
                    }
                    return;
                }
                if !matches!(self.open, Some(OpenItem::Call { .. })) {
                    return;
                }
                let output_index = self.output_index();
                let sequence_number = self.next_seq();
                if let Some(OpenItem::Call { id, arguments, .. }) = &mut self.open {
                    arguments.push_str(&text);
                    out.push(
                        ResponsesEvent::ArgumentsDelta {
                            delta: text,
                            item_id: id.clone(),
                            output_index,
                            sequence_number,
                        }
                        .into(),
                    );
                }
            }
            ParseEvent::ReasoningEnd | ParseEvent::StopSequence(_) => {}
        }
    }

    /// More input of the open custom tool call.
    fn custom_input_delta(&mut self, delta: String, out: &mut Vec<StreamItem>) {
        let output_index = self.output_index();
        let sequence_number = self.next_seq();
        if let Some(OpenItem::CustomCall { id, input, .. }) = &mut self.open {
            input.push_str(&delta);
            out.push(
                ResponsesEvent::CustomInputDelta {
                    delta,
                    item_id: id.clone(),
                    output_index,
                    sequence_number,
                }
                .into(),
            );
        }
    }

    pub(super) fn finish(&mut self, kind: &FinishKind, usage: Usage, out: &mut Vec<StreamItem>) {
        let incomplete = match kind {
            FinishKind::Length => Some("max_output_tokens"),
            FinishKind::ContentFilter => Some("content_filter"),
            _ => None,
        };
        let status = if incomplete.is_some() {
            ItemStatus::Incomplete
        } else {
            ItemStatus::Completed
        };
        self.close(status, false, out);
        let response = self.response(status, Some(now_secs()), incomplete, Some(&usage));
        let sequence_number = self.next_seq();
        out.push(
            if incomplete.is_some() {
                ResponsesEvent::Incomplete {
                    response,
                    sequence_number,
                }
            } else {
                ResponsesEvent::Completed {
                    response,
                    sequence_number,
                }
            }
            .into(),
        );
    }
}
