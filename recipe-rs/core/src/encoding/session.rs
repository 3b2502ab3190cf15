//! Incremental encoding of one conversation, turn after turn ([`EncodingSession`]).
//!
//! An agent backend sends the whole history again on every turn. The session keeps what the
//! previous turn produced (its spans, cut into segments, and their token IDs) and, for the next
//! request, re-tokenizes only the segments it has not seen before. Rendering is always done in
//! full: it is cheap next to tokenization, and it keeps the template the single source of truth.
//!
//! Why the result equals a cold [`Encoding::encode`]: [`encode_spans`] tokenizes each run of
//! text between two non-empty template tokens on its own, so the IDs of a prompt are the
//! concatenation of the IDs of its *segments* (a text run plus the template token closing it).
//! A segment's IDs depend only on its spans, so IDs cached for equal spans are the IDs a cold
//! encode would produce. Segments are looked up first in place (the common, append-only case) and
//! then by content, so a history that changed in the middle still reuses everything else.
//!
//! Each turn also says whether the new prompt extends the previous one token for token (what a
//! prefix cache or token-in/token-out training needs) and, if not, at which token it diverges
//! and why, from a comparison of the two conversations (see [`DivergenceCause`]).
//!
//! Memory: the session holds one prompt's spans and IDs (about 8 bytes per token plus a few words
//! per message), reported by [`EncodingSession::memory_bytes`]. A prompt longer than the
//! session's token bound is not kept (the next turn is encoded cold).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::ops::Range;

use super::{encode_spans, EncodeError, Encoding, Span};
use crate::conversation::{Conversation, Message};
use crate::profile::SystemHandling;

/// Default bound on the prompt length a session keeps: 2^20 tokens (about 8 MiB).
pub const DEFAULT_MAX_CACHED_TOKENS: usize = 1 << 20;

/// Why a new prompt does not extend the previous one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DivergenceCause {
    /// Thinking mode was switched on or off.
    ThinkingModeChanged,
    /// The reasoning effort changed (the header's effort text changes).
    ReasoningEffortChanged,
    /// The tool list changed (the header's tools block changes).
    ToolsChanged,
    /// The tool choice changed (tools appear or vanish, or the generation prompt changes).
    ToolChoiceChanged,
    /// The response format changed.
    ResponseFormatChanged,
    /// The text of a system message changed.
    SystemChanged,
    /// A system message was added after the start; V4 moves every system text into the header.
    SystemHoisted,
    /// The history no longer carries the reasoning of an earlier assistant turn.
    ReasoningDroppedFromHistory,
    /// The template leaves out the reasoning of the assistant turn that answered the previous
    /// prompt (no tools offered, or thinking off), so its opening differs from the generation
    /// prompt the previous prompt ended with.
    ReasoningDroppedByTemplate,
    /// Tool results were sent in another order, or a new result sorts before earlier ones of
    /// the same merged turn.
    ToolResultsReordered,
    /// A message of the history was edited.
    MessageEdited,
    /// Messages were removed from the end of the history.
    MessagesRemoved,
    /// The previous prompt ended with a generation prompt that the next message does not
    /// continue (for example a prefix continuation, or a trailing assistant turn).
    GenerationPromptReplaced,
    /// The first new message joins the previous prompt's last turn (consecutive user or tool
    /// messages form one turn), so it takes the place of the generation prompt.
    TurnMerged,
    /// Anything else (the template renders an earlier part differently once more follows).
    Other,
}

impl DivergenceCause {
    /// A short snake_case name, stable for JSON reports.
    pub fn as_str(self) -> &'static str {
        use DivergenceCause::*;
        match self {
            ThinkingModeChanged => "thinking_mode_changed",
            ReasoningEffortChanged => "reasoning_effort_changed",
            ToolsChanged => "tools_changed",
            ToolChoiceChanged => "tool_choice_changed",
            ResponseFormatChanged => "response_format_changed",
            SystemChanged => "system_changed",
            SystemHoisted => "system_hoisted",
            ReasoningDroppedFromHistory => "reasoning_dropped_from_history",
            ReasoningDroppedByTemplate => "reasoning_dropped_by_template",
            ToolResultsReordered => "tool_results_reordered",
            MessageEdited => "message_edited",
            MessagesRemoved => "messages_removed",
            GenerationPromptReplaced => "generation_prompt_replaced",
            TurnMerged => "turn_merged",
            Other => "other",
        }
    }
}

/// Where and why a prompt stops matching the previous one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// Index of the first token that differs from the previous prompt.
    pub token_index: usize,
    pub cause: DivergenceCause,
    /// The message the cause points at, when there is one.
    pub message_index: Option<usize>,
    /// One sentence for people.
    pub detail: String,
}

/// What one [`EncodingSession::encode`] call did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TurnReport {
    /// Token count of the previous prompt (0 on the first turn or after a reset).
    pub previous_tokens: usize,
    /// Token count of this prompt.
    pub tokens: usize,
    /// Length of the common prefix of the two prompts, in tokens.
    pub common_prefix_tokens: usize,
    /// Tokens copied from the previous turn instead of being tokenized again.
    pub reused_tokens: usize,
    /// Whether a previous prompt existed and this one starts with all of its tokens.
    pub extends_previous: bool,
    /// `None` when the prompt extends the previous one or there was no previous prompt.
    pub divergence: Option<Divergence>,
}

/// One segment of a prompt: a run of spans ending after a non-empty template token (or at the
/// end), and where its IDs sit in the prompt's IDs.
#[derive(Clone, Debug)]
struct Segment {
    spans: Range<usize>,
    ids: Range<usize>,
}

#[derive(Debug)]
struct Previous {
    spans: Vec<Span>,
    segments: Vec<Segment>,
    ids: Vec<u32>,
    digest: ConversationDigest,
}

/// Incremental encoder for the successive requests of one conversation.
#[derive(Debug)]
pub struct EncodingSession {
    encoding: Encoding,
    max_cached_tokens: usize,
    previous: Option<Previous>,
    last: TurnReport,
}

impl EncodingSession {
    /// A session over `encoding`, which must have a tokenizer (checked on the first encode).
    pub fn new(encoding: Encoding) -> Self {
        Self::with_max_cached_tokens(encoding, DEFAULT_MAX_CACHED_TOKENS)
    }

    pub fn with_max_cached_tokens(encoding: Encoding, max_cached_tokens: usize) -> Self {
        EncodingSession {
            encoding,
            max_cached_tokens,
            previous: None,
            last: TurnReport::default(),
        }
    }

    pub fn encoding(&self) -> &Encoding {
        &self.encoding
    }

    pub fn max_cached_tokens(&self) -> usize {
        self.max_cached_tokens
    }

    /// The report of the latest [`EncodingSession::encode`].
    pub fn last_turn(&self) -> &TurnReport {
        &self.last
    }

    /// Forget the previous turn (the next encode is cold).
    pub fn reset(&mut self) {
        self.previous = None;
        self.last = TurnReport::default();
    }

    /// Bytes the session holds for the previous turn (spans, IDs, segment table, digests).
    pub fn memory_bytes(&self) -> usize {
        self.previous.as_ref().map_or(0, |p| {
            let spans: usize = p
                .spans
                .iter()
                .map(|s| std::mem::size_of::<Span>() + span_text(s).len())
                .sum();
            spans
                + p.ids.len() * std::mem::size_of::<u32>()
                + p.segments.len() * std::mem::size_of::<Segment>()
                + p.digest.messages.len() * std::mem::size_of::<MessageDigest>()
                + std::mem::size_of::<Previous>()
        })
    }

    /// Token IDs of `conv`, equal to `Encoding::encode(conv)`, reusing the previous turn's IDs.
    pub fn encode(&mut self, conv: &Conversation) -> Result<Vec<u32>, EncodeError> {
        let tok = self
            .encoding
            .tokenizer
            .as_ref()
            .ok_or(EncodeError::NoTokenizer)?;
        let spans = self.encoding.render(conv).spans;
        let segments_spans = cut_segments(&spans);
        let mut ids: Vec<u32> =
            Vec::with_capacity(self.previous.as_ref().map_or(0, |p| p.ids.len() + 256));
        let mut segments = Vec::with_capacity(segments_spans.len());
        let mut reused = 0;
        {
            let prev = self.previous.as_ref();
            let mut in_place = prev.is_some();
            let mut by_content: Option<HashMap<u64, Vec<usize>>> = None;
            for (k, range) in segments_spans.into_iter().enumerate() {
                let here = &spans[range.clone()];
                let mut cached: Option<&[u32]> = None;
                if let Some(p) = prev {
                    if in_place {
                        match p.segments.get(k) {
                            Some(s) if p.spans[s.spans.clone()] == *here => {
                                cached = Some(&p.ids[s.ids.clone()])
                            }
                            _ => in_place = false,
                        }
                    }
                    if cached.is_none() {
                        let index = by_content.get_or_insert_with(|| index_segments(p));
                        cached = index.get(&segment_hash(here)).and_then(|cands| {
                            cands
                                .iter()
                                .map(|&j| &p.segments[j])
                                .find(|s| p.spans[s.spans.clone()] == *here)
                                .map(|s| &p.ids[s.ids.clone()])
                        });
                    }
                }
                let start = ids.len();
                match cached {
                    Some(c) => {
                        ids.extend_from_slice(c);
                        reused += c.len();
                    }
                    None => ids.extend(encode_spans(tok, here)?),
                }
                segments.push(Segment {
                    spans: range,
                    ids: start..ids.len(),
                });
            }
        }
        let digest = ConversationDigest::of(conv);
        let report = self.report(conv, &digest, &ids, reused);
        self.last = report;
        self.previous = (ids.len() <= self.max_cached_tokens).then(|| Previous {
            spans,
            segments,
            ids: ids.clone(),
            digest,
        });
        Ok(ids)
    }

    fn report(
        &self,
        conv: &Conversation,
        digest: &ConversationDigest,
        ids: &[u32],
        reused: usize,
    ) -> TurnReport {
        let Some(prev) = &self.previous else {
            return TurnReport {
                tokens: ids.len(),
                ..TurnReport::default()
            };
        };
        let common = common_prefix(&prev.ids, ids);
        let extends = common == prev.ids.len();
        let divergence = (!extends).then(|| {
            let (cause, message_index, detail) =
                explain(&prev.digest, digest, conv, self.encoding.version);
            Divergence {
                token_index: common,
                cause,
                message_index,
                detail,
            }
        });
        TurnReport {
            previous_tokens: prev.ids.len(),
            tokens: ids.len(),
            common_prefix_tokens: common,
            reused_tokens: reused,
            extends_previous: extends,
            divergence,
        }
    }
}

fn span_text(s: &Span) -> &str {
    match s {
        Span::Text(t) | Span::Special(_, t) => t,
    }
}

/// Cut spans after every template token with a non-empty spelling (see the module doc).
fn cut_segments(spans: &[Span]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (k, s) in spans.iter().enumerate() {
        if matches!(s, Span::Special(_, sp) if !sp.is_empty()) {
            out.push(start..k + 1);
            start = k + 1;
        }
    }
    if start < spans.len() {
        out.push(start..spans.len());
    }
    out
}

fn segment_hash(spans: &[Span]) -> u64 {
    let mut h = ahash::AHasher::default();
    for s in spans {
        match s {
            Span::Text(t) => (0u8, t).hash(&mut h),
            Span::Special(k, t) => (1u8, *k as u8, t).hash(&mut h),
        }
    }
    h.finish()
}

fn index_segments(p: &Previous) -> HashMap<u64, Vec<usize>> {
    let mut m: HashMap<u64, Vec<usize>> = HashMap::with_capacity(p.segments.len());
    for (j, s) in p.segments.iter().enumerate() {
        m.entry(segment_hash(&p.spans[s.spans.clone()]))
            .or_default()
            .push(j);
    }
    m
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    // Compare in blocks first: whole-slice equality is a memcmp.
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Hashes of what a conversation says, enough to tell which part changed between two turns.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ConversationDigest {
    thinking_mode: bool,
    reasoning_effort: Option<crate::conversation::ReasoningEffort>,
    tools: u64,
    tool_choice: crate::conversation::ToolChoice,
    response_format: u64,
    messages: Vec<MessageDigest>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MessageDigest {
    role: &'static str,
    /// Everything about the message except the assistant reasoning.
    body: u64,
    /// Assistant reasoning (`None` when absent or empty).
    reasoning: Option<u64>,
    /// Assistant prefix continuation.
    prefix: bool,
}

fn hash_of(f: impl FnOnce(&mut ahash::AHasher)) -> u64 {
    // Fixed keys: digests of two turns must be comparable.
    let mut h = ahash::RandomState::with_seeds(1, 2, 3, 4).build_hasher();
    f(&mut h);
    h.finish()
}

impl ConversationDigest {
    fn of(conv: &Conversation) -> Self {
        let tools = hash_of(|h| {
            for t in &conv.tools {
                (
                    &t.name,
                    &t.description,
                    t.parameters.to_string(),
                    t.strict,
                    t.defer_loading,
                )
                    .hash(h);
            }
        });
        let response_format = hash_of(|h| match &conv.response_format {
            crate::conversation::ResponseFormat::JsonSchema(v) => ("schema", v.to_string()).hash(h),
            crate::conversation::ResponseFormat::Regex(r) => ("regex", r).hash(h),
            other => other.name().hash(h),
        });
        ConversationDigest {
            thinking_mode: conv.thinking_mode,
            reasoning_effort: conv.reasoning_effort,
            tools,
            tool_choice: conv.tool_choice,
            response_format,
            messages: conv.messages.iter().map(MessageDigest::of).collect(),
        }
    }
}

impl MessageDigest {
    fn of(m: &Message) -> Self {
        let images =
            |h: &mut ahash::AHasher, imgs: &[crate::conversation::ImageSource], token: &str| {
                token.hash(h);
                for i in imgs {
                    format!("{:?}", i.data).hash(h);
                    (i.detail.as_str(), &i.path).hash(h);
                }
            };
        let (body, reasoning, prefix) = match m {
            Message::System(s) => (
                hash_of(|h| {
                    s.content.hash(h);
                    images(h, &s.image_sources, &s.image_token);
                    if let Some(t) = &s.tools {
                        for t in t {
                            (&t.name, &t.description, t.parameters.to_string()).hash(h);
                        }
                    }
                }),
                None,
                false,
            ),
            Message::User(u) => (
                hash_of(|h| {
                    u.content.hash(h);
                    images(h, &u.image_sources, &u.image_token);
                }),
                None,
                false,
            ),
            Message::Tool(t) => (
                hash_of(|h| {
                    (&t.content, &t.tool_call_id).hash(h);
                    images(h, &t.image_sources, &t.image_token);
                }),
                None,
                false,
            ),
            Message::LatestReminder(r) => (hash_of(|h| r.content.hash(h)), None, false),
            Message::Assistant(a) => (
                hash_of(|h| {
                    a.content.hash(h);
                    if let Some(calls) = &a.tool_calls {
                        for c in calls {
                            (&c.id, &c.name, &c.arguments).hash(h);
                        }
                    }
                }),
                a.reasoning_content
                    .as_deref()
                    .filter(|r| !r.is_empty())
                    .map(|r| hash_of(|h| r.hash(h))),
                a.prefix,
            ),
        };
        MessageDigest {
            role: m.role(),
            body,
            reasoning,
            prefix,
        }
    }
}

/// Name the first difference between two conversations that explains a prompt divergence.
fn explain(
    old: &ConversationDigest,
    new: &ConversationDigest,
    conv: &Conversation,
    version: super::EncodingVersion,
) -> (DivergenceCause, Option<usize>, String) {
    use DivergenceCause::*;
    if old.thinking_mode != new.thinking_mode {
        return (
            ThinkingModeChanged,
            None,
            format!(
                "thinking mode changed from {} to {}",
                old.thinking_mode, new.thinking_mode
            ),
        );
    }
    if old.reasoning_effort != new.reasoning_effort {
        let name =
            |e: Option<crate::conversation::ReasoningEffort>| e.map_or("default", |e| e.as_str());
        return (
            ReasoningEffortChanged,
            None,
            format!(
                "reasoning effort changed from {} to {}",
                name(old.reasoning_effort),
                name(new.reasoning_effort)
            ),
        );
    }
    if old.tools != new.tools {
        return (
            ToolsChanged,
            None,
            "the tool definitions changed, so the tools block of the header changed".into(),
        );
    }
    if old.tool_choice != new.tool_choice {
        return (
            ToolChoiceChanged,
            None,
            format!(
                "tool choice changed from {} to {}",
                old.tool_choice.as_str(),
                new.tool_choice.as_str()
            ),
        );
    }
    if old.response_format != new.response_format {
        return (
            ResponseFormatChanged,
            None,
            "the response format changed".into(),
        );
    }
    let (a, b) = (&old.messages, &new.messages);
    for k in 0..a.len().min(b.len()) {
        if a[k] == b[k] {
            continue;
        }
        let (x, y) = (a[k], b[k]);
        if x.role == "system" && y.role == "system" {
            return (
                SystemChanged,
                Some(k),
                format!("the text of system message {k} changed"),
            );
        }
        if x.role == "tool" && y.role == "tool" && is_permuted_run(a, b, k) {
            return (
                ToolResultsReordered,
                Some(k),
                format!("the tool results starting at message {k} were sent in another order"),
            );
        }
        if x.role == "assistant" && y.role == "assistant" && x.body == y.body {
            if x.reasoning.is_some() && y.reasoning.is_none() {
                return (
                    ReasoningDroppedFromHistory,
                    Some(k),
                    format!("the reasoning of assistant message {k} is no longer in the history"),
                );
            }
            if x.prefix != y.prefix {
                return (
                    GenerationPromptReplaced,
                    Some(k),
                    format!("assistant message {k} is no longer a prefix continuation"),
                );
            }
        }
        return (
            MessageEdited,
            Some(k),
            format!("message {k} ({} -> {}) changed", x.role, y.role),
        );
    }
    if b.len() < a.len() {
        return (
            MessagesRemoved,
            Some(b.len()),
            format!(
                "{} message(s) were removed from the end of the history",
                a.len() - b.len()
            ),
        );
    }
    // The history was only extended: the template itself renders the old part differently.
    let appended = &conv.messages[a.len()..];
    let added_system = appended
        .iter()
        .position(|m| matches!(m, Message::System(_)));
    let profile = version.profile();
    if profile.system_handling == SystemHandling::JoinedIntoHeader {
        if let Some(i) = added_system {
            return (
                SystemHoisted,
                Some(a.len() + i),
                format!(
                    "{} moves a later system message into the header",
                    profile.name
                ),
            );
        }
    }
    if matches!(a.last(), Some(d) if d.role == "assistant" && d.prefix) {
        return (
            GenerationPromptReplaced,
            Some(a.len() - 1),
            "the previous prompt ended inside a prefix continuation that the new history closes"
                .into(),
        );
    }
    let merges = |d: &MessageDigest, m: &Message| match (d.role, m) {
        ("tool" | "user", Message::Tool(_)) => {
            !profile.turns.tool_result_after_user_opens_turn || d.role == "tool"
        }
        ("tool" | "user", Message::User(_)) => true,
        _ => false,
    };
    if let (Some(d), Some(m)) = (a.last(), appended.first()) {
        if merges(d, m) {
            return (
                TurnMerged,
                Some(a.len()),
                format!("new message {} ({}) joins the last turn of the previous prompt in place of its generation prompt", a.len(), m.role()),
            );
        }
    }
    if let Some(Message::Assistant(m)) = appended.first() {
        let had_reasoning = m
            .reasoning_content
            .as_deref()
            .is_some_and(|r| !r.is_empty());
        if conv.thinking_mode {
            let detail = if had_reasoning {
                "the template drops the reasoning of the new assistant turn (no tools offered), so it opens with </think> \
                 where the previous generation prompt ended with <think>"
            } else {
                "the new assistant turn opens with </think> where the previous generation prompt ended with <think>"
            };
            return (ReasoningDroppedByTemplate, Some(a.len()), detail.into());
        }
    }
    if matches!(a.last(), Some(d) if d.role == "assistant") {
        return (
            GenerationPromptReplaced,
            Some(a.len() - 1),
            "the previous prompt ended with a closed assistant turn and a fresh generation prompt"
                .into(),
        );
    }
    (Other, None, "the template renders the earlier part of the history differently once more messages follow".into())
}

/// Whether the run of tool messages starting at `k` holds the same results in another order.
fn is_permuted_run(a: &[MessageDigest], b: &[MessageDigest], k: usize) -> bool {
    let run = |v: &[MessageDigest]| {
        v[k..]
            .iter()
            .take_while(|d| d.role == "tool")
            .map(|d| d.body)
            .collect::<Vec<_>>()
    };
    let (mut x, mut y) = (run(a), run(b));
    x.sort_unstable();
    y.sort_unstable();
    x == y && !x.is_empty()
}
