//! Per-protocol generators: parser events in, Chat Completions chunks / Responses events /
//! Messages events out.
//!
//! Every generator opens its stream lazily (at `ready`, or at the first push without one),
//! keeps at most one output block open, closes it when a different block starts or the stream
//! ends, and writes usage and the finish reason at the end.
//!
//! The wire format of each protocol is spelled out by `#[derive(Serialize)]` types in its module
//! ([`chat`], [`responses`], [`messages`]); field order in those types is the order the official
//! package writes the keys, so serialising them gives the official bytes. A chunk is written
//! straight from its typed form to JSON text ([`WireJson`]): no `serde_json::Value`
//! tree is built on the per-token path, which is where a gateway spends its time.

/// Declares a stream event enum from one list: each variant's wire `type` is both its serde tag
/// and what the enum's `event_type()` returns (the SSE event name), so the two cannot drift.
macro_rules! wire_events {
    ($(#[$enum_doc:meta])* $enum:ident {
        $($(#[$doc:meta])* $variant:ident = $name:literal { $($field:ident: $ty:ty),* $(,)? })*
    }) => {
        $(#[$enum_doc])*
        #[derive(Clone, Debug, PartialEq, Serialize)]
        #[serde(tag = "type")]
        pub enum $enum {
            $($(#[$doc])* #[serde(rename = $name)] $variant { $($field: $ty),* },)*
        }

        impl $enum {
            /// The event's `type`, which is also its SSE event name.
            pub fn event_type(&self) -> &'static str {
                match self {
                    $($enum::$variant { .. } => $name,)*
                }
            }
        }
    };
}

pub mod chat;
mod custom_input;
pub mod messages;
pub mod responses;

use std::time::{SystemTime, UNIX_EPOCH};

use rand::Rng;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::input::{PromptUsage, TokenLogprob};
use crate::parser::ParseEvent;

pub use chat::{chat_usage_value, ChatChunk, ChatDelta, ChatGenerator, ChatMeta};
pub use messages::{MessagesEvent, MessagesGenerator};
pub use responses::{
    custom_tools_from_tools, echo_from_json, namespace_map_from_tools, ResponsesEvent,
    ResponsesGenerator,
};

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

/// One token's log-probability record as JSON (the accumulators build complete responses from
/// these).
pub fn logprob_value(lp: &TokenLogprob) -> Value {
    to_value(lp)
}

/// A wire type as a JSON value. The stream's wire types hold only string-keyed maps and
/// numbers serde_json can write, so this cannot fail; a failure would be a bug in those types.
pub(crate) fn to_value<T: Serialize + ?Sized>(x: &T) -> Value {
    serde_json::to_value(x).expect("stream wire types always convert to JSON")
}

/// Compact JSON text of a chunk or event, written straight from its wire type. The bytes are
/// those of `serde_json::to_writer` on the type's `Serialize` form (tests compare the two);
/// Chat chunks and Messages deltas, the per-token items, are written by hand with their
/// constant parts as literals.
pub trait WireJson {
    /// Append the JSON text to `buf` (a buffer reused across chunks saves an allocation each).
    fn write_json(&self, buf: &mut Vec<u8>);

    /// The JSON text.
    fn to_json(&self) -> String {
        let mut buf = Vec::with_capacity(256);
        self.write_json(&mut buf);
        String::from_utf8(buf).expect("the stream's JSON writers write UTF-8")
    }
}

/// `x` through serde_json (the wire types' own form).
pub(crate) fn write_serde<T: Serialize + ?Sized>(x: &T, buf: &mut Vec<u8>) {
    serde_json::to_writer(buf, x).expect("stream wire types always serialise");
}

/// `s` as a JSON string, escaped exactly as serde_json escapes it (`"`, `\\`, and control
/// characters: `\b \f \n \r \t` or `\u00XX`; everything else as is).
pub(crate) fn write_json_str(buf: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    buf.reserve(bytes.len() + 2);
    buf.push(b'"');
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b >= 0x20 && b != b'"' && b != b'\\' {
            continue;
        }
        buf.extend_from_slice(&bytes[start..i]);
        start = i + 1;
        match b {
            b'"' => buf.extend_from_slice(b"\\\""),
            b'\\' => buf.extend_from_slice(b"\\\\"),
            b'\n' => buf.extend_from_slice(b"\\n"),
            b'\r' => buf.extend_from_slice(b"\\r"),
            b'\t' => buf.extend_from_slice(b"\\t"),
            0x08 => buf.extend_from_slice(b"\\b"),
            0x0c => buf.extend_from_slice(b"\\f"),
            _ => buf.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]),
        }
    }
    buf.extend_from_slice(&bytes[start..]);
    buf.push(b'"');
}

/// `n` in decimal, as serde_json writes an integer.
pub(crate) fn write_decimal(buf: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

impl WireJson for StreamItem {
    fn write_json(&self, buf: &mut Vec<u8>) {
        match self {
            StreamItem::Chat(c) => c.write_json(buf),
            StreamItem::Responses(e) => e.write_json(buf),
            StreamItem::Messages(e) => e.write_json(buf),
        }
    }
}

/// An always-empty JSON array (`"summary": []`, `"annotations": []`, `"content": []`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmptyArray;

impl Serialize for EmptyArray {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_seq(Some(0))?.end()
    }
}

/// An always-empty JSON object (`"metadata": {}`, a new tool-use block's `"input": {}`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmptyObject;

impl Serialize for EmptyObject {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_map(Some(0))?.end()
    }
}

/// A field the official package always writes as `null`.
pub type AlwaysNull = ();

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

/// Output of a generator: one chunk or event of its protocol. It serialises as that chunk or
/// event.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum StreamItem {
    Chat(ChatChunk),
    Responses(ResponsesEvent),
    Messages(MessagesEvent),
}

impl From<ChatChunk> for StreamItem {
    fn from(c: ChatChunk) -> Self {
        StreamItem::Chat(c)
    }
}

impl From<ResponsesEvent> for StreamItem {
    fn from(e: ResponsesEvent) -> Self {
        StreamItem::Responses(e)
    }
}

impl From<MessagesEvent> for StreamItem {
    fn from(e: MessagesEvent) -> Self {
        StreamItem::Messages(e)
    }
}

impl StreamItem {
    /// The chunk or event as a JSON value (for tests and accumulators; serving uses
    /// [`StreamItem::to_json`]).
    pub fn to_value(&self) -> Value {
        to_value(self)
    }

    /// The chunk or event as compact JSON text (see [`WireJson`]).
    pub fn to_json(&self) -> String {
        WireJson::to_json(self)
    }

    /// The SSE `event:` name: none for Chat Completions, the event type otherwise.
    pub fn sse_event_name(&self) -> Option<&'static str> {
        match self {
            StreamItem::Chat(_) => None,
            StreamItem::Responses(e) => Some(e.event_type()),
            StreamItem::Messages(e) => Some(e.event_type()),
        }
    }
}

impl Generator {
    pub fn set_parser_start(&mut self, starts_in_reasoning: bool) {
        if let Generator::Messages(m) = self {
            m.parser_starts_in_reasoning = starts_in_reasoning;
        }
    }

    /// The backend processed the prompt: record its usage (and fingerprint) and open the stream.
    pub fn ready(
        &mut self,
        usage: Option<PromptUsage>,
        fingerprint: Option<String>,
        out: &mut Vec<StreamItem>,
    ) {
        match self {
            Generator::Chat(g) => g.ready(fingerprint, out),
            Generator::Responses(g) => g.ready(usage, out),
            Generator::Messages(g) => g.ready(usage, out),
        }
    }

    /// Open the stream if it is not open yet.
    pub fn start(&mut self, out: &mut Vec<StreamItem>) {
        match self {
            Generator::Chat(g) => g.start(out),
            Generator::Responses(g) => g.start(out),
            Generator::Messages(g) => g.start(out),
        }
    }

    pub fn events(
        &mut self,
        events: impl IntoIterator<Item = ParseEvent>,
        out: &mut Vec<StreamItem>,
    ) {
        for e in events {
            match self {
                Generator::Chat(g) => g.event(e, out),
                Generator::Responses(g) => g.event(e, out),
                Generator::Messages(g) => g.event(e, out),
            }
        }
    }

    pub fn finish(&mut self, kind: &FinishKind, usage: Usage, out: &mut Vec<StreamItem>) {
        match self {
            Generator::Chat(g) => g.finish(kind, usage, out),
            Generator::Responses(g) => g.finish(kind, usage, out),
            Generator::Messages(g) => g.finish(kind, usage, out),
        }
    }
}
