//! The V4 and V4.1 prompt templates.
//!
//! Layout (both versions): BOS, a header (reasoning-effort text, system text, tools block,
//! response-format block), then the messages in order, then the generation prompt (assistant
//! token plus the thinking token; omitted after a prefix assistant message). Where the two
//! versions differ, the code branches on [`EncodingVersion`]; `docs/encoding-deviations.md` lists
//! where the output knowingly differs from the official package.

use serde_json::Value;

use super::json::{self, FloatStyle};
use super::{EncodingVersion, RenderedPrompt, Span};
use crate::conversation::{
    AssistantMessage, Conversation, ImageSource, ImageText, Message, ReasoningEffort,
    ResponseFormat, TextPiece, ToolCall, ToolChoice, ToolDefinition,
};
use crate::special_tokens::{SpecialToken, SpecialTokens};

const V4_EFFORT_HIGH: &str = "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n\
You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve \
the root cause, rigorously stress-testing your logic against all potential paths, edge cases, and \
adversarial scenarios.\n\
Explicitly write out your entire deliberation process, documenting every intermediate step, \
considered alternative, and rejected hypothesis to ensure absolutely no assumption is left \
unchecked.\n\n";

const V4_EFFORT_MAX: &str =
    "Reasoning Effort: Beyond maximum \u{2014} exhaustive, relentless, and \
uncompromising.\n\
You MUST reason with the utmost depth and rigor, leaving absolutely nothing to chance: \
exhaustively decompose the problem into its most fundamental components, trace every causal chain \
to its root, and resolve the underlying cause rather than any surface symptom.\n\
Do not stop reasoning until you have independently verified the solution from multiple angles and \
are certain that no assumption remains unchecked and no error remains undiscovered.\n\n";

const V4_JSON_OBJECT: &str =
    "\n\nYou are a helpful assistant designed to output JSON.\n## Response Format:\n\nReply with JSON object ONLY.";
const SCHEMA_INTRO: &str =
    "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";
const TOOLS_OUTRO: &str =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

/// Accumulates spans, merging adjacent text.
struct Out<'a> {
    spans: Vec<Span>,
    tokens: &'a SpecialTokens,
}

impl<'a> Out<'a> {
    fn text(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        if let Some(Span::Text(t)) = self.spans.last_mut() {
            t.push_str(s);
        } else {
            self.spans.push(Span::Text(s.to_owned()));
        }
    }

    fn special(&mut self, t: SpecialToken) {
        self.spans
            .push(Span::Special(t, self.tokens.get(t).to_owned()));
    }

    /// Assistant text: the grounding tokens (`<｜ref｜>`, `<｜box｜>`, …) it spells are control
    /// tokens, every other control-token spelling stays plain text.
    fn grounded(&mut self, text: &str) {
        const GROUNDING: [SpecialToken; 8] = [
            SpecialToken::Ref,
            SpecialToken::RefEnd,
            SpecialToken::Box,
            SpecialToken::BoxEnd,
            SpecialToken::Point,
            SpecialToken::PointEnd,
            SpecialToken::Polygon,
            SpecialToken::PolygonEnd,
        ];
        let tokens = self.tokens;
        let mut rest = text;
        loop {
            // Earliest match; the longest spelling wins a tie.
            let mut best: Option<(usize, usize, SpecialToken)> = None;
            for t in GROUNDING {
                let sp = tokens.get(t);
                if sp.is_empty() {
                    continue;
                }
                if let Some(at) = rest.find(sp) {
                    let better = match best {
                        None => true,
                        Some((b_at, b_len, _)) => at < b_at || (at == b_at && sp.len() > b_len),
                    };
                    if better {
                        best = Some((at, sp.len(), t));
                    }
                }
            }
            match best {
                Some((at, len, t)) => {
                    self.text(&rest[..at]);
                    self.spans
                        .push(Span::Special(t, rest[at..at + len].to_owned()));
                    rest = &rest[at + len..];
                }
                None => {
                    self.text(rest);
                    return;
                }
            }
        }
    }

    /// Message text with image placeholders at the byte offsets conversion (or the message
    /// constructor) recorded. The text is never searched for the placeholder spelling here, so a
    /// spelling typed by a user stays plain text.
    fn content_with_images(&mut self, content: &str, image_token: &str, placeholders: &[usize]) {
        for piece in ImageText::pieces(content, placeholders, image_token) {
            match piece {
                TextPiece::Text(text) => self.text(text),
                TextPiece::Image => self
                    .spans
                    .push(Span::Special(SpecialToken::Image, image_token.to_owned())),
            }
        }
    }
}

struct Ctx<'a> {
    v: EncodingVersion,
    conv: &'a Conversation,
    style: FloatStyle,
    /// Tools are offered (non-empty list and tool choice other than none).
    tools_on: bool,
    /// V4.1: the header holds more than the reasoning-effort line (a leading system message, the
    /// tools block or a response format).
    header_has_content: bool,
}

impl Ctx<'_> {
    fn v41(&self) -> bool {
        self.v == EncodingVersion::V41
    }
}

/// Render `conv` with template `v` and spellings `tokens`.
pub fn render(v: EncodingVersion, tokens: &SpecialTokens, conv: &Conversation) -> RenderedPrompt {
    let ctx = Ctx {
        v,
        conv,
        style: match v {
            EncodingVersion::V4 => FloatStyle::Compact,
            EncodingVersion::V41 => FloatStyle::Python,
        },
        tools_on: !conv.tools.is_empty() && conv.tool_choice != ToolChoice::None,
        header_has_content: matches!(conv.messages.first(), Some(Message::System(_)))
            || (!conv.tools.is_empty() && conv.tool_choice != ToolChoice::None)
            || matches!(
                conv.response_format,
                ResponseFormat::JsonObject | ResponseFormat::JsonSchema(_)
            ),
    };
    let mut out = Out {
        spans: Vec::new(),
        tokens,
    };
    let mut images: Vec<ImageSource> = Vec::new();
    out.special(SpecialToken::Bos);

    let msgs = &conv.messages;
    // Messages left for the turn loop after the header took what it needs.
    // V4 also reports which body messages start a unit (see `v4_order_after_calls`).
    let (body, unit_starts): (Vec<&Message>, Vec<bool>) = match v {
        EncodingVersion::V4 => {
            header_v4(&ctx, &mut out, &mut images);
            let mut body: Vec<&Message> = msgs
                .iter()
                .filter(|m| !matches!(m, Message::System(_)))
                .collect();
            let starts = v4_order_after_calls(&mut body);
            (body, starts)
        }
        EncodingVersion::V41 => {
            let first_system = header_v41(&ctx, &mut out, &mut images);
            (
                msgs.iter().skip(usize::from(first_system)).collect(),
                Vec::new(),
            )
        }
    };

    turns(&ctx, &mut out, &mut images, &body, &unit_starts);

    // V4 looks at its reordered body without systems: a prefix turn followed only by system
    // messages (hoisted into the header) still ends the prompt.
    let ends_with_prefix = matches!(body.last(), Some(Message::Assistant(a)) if a.prefix);
    if !ends_with_prefix {
        out.special(SpecialToken::Assistant);
        out.special(if conv.thinking_mode {
            SpecialToken::ThinkingStart
        } else {
            SpecialToken::ThinkingEnd
        });
    }
    // A required tool choice opens the calls block, also after a prefix continuation.
    if ctx.tools_on && conv.tool_choice == ToolChoice::Required {
        out.text("\n\n<");
        out.special(SpecialToken::Dsml);
        out.text(if ctx.v41() {
            " calls>\n"
        } else {
            "tool_calls>\n"
        });
    }
    RenderedPrompt {
        spans: out.spans,
        image_sources: images,
    }
}

fn header_v4(ctx: &Ctx<'_>, out: &mut Out<'_>, images: &mut Vec<ImageSource>) {
    let conv = ctx.conv;
    if conv.thinking_mode {
        match conv.reasoning_effort {
            Some(ReasoningEffort::Low) => {}
            Some(ReasoningEffort::Max) => out.text(V4_EFFORT_MAX),
            _ => out.text(V4_EFFORT_HIGH),
        }
    }
    let mut first = true;
    for m in &conv.messages {
        if let Message::System(s) = m {
            // Empty system texts are left out of the joined header (with their images).
            if s.content.is_empty() {
                continue;
            }
            if !first {
                out.text("\n\n");
            }
            first = false;
            out.content_with_images(&s.content, &s.image_token, &s.placeholders);
            images.extend(s.image_sources.iter().cloned());
        }
    }
    tools_block(ctx, out);
    response_format_block(ctx, out);
}

/// Returns whether the first message (a system message) was consumed by the header.
fn header_v41(ctx: &Ctx<'_>, out: &mut Out<'_>, images: &mut Vec<ImageSource>) -> bool {
    let conv = ctx.conv;
    let first_system = match conv.messages.first() {
        Some(Message::System(s)) => Some(s),
        _ => None,
    };
    let has_format = matches!(
        conv.response_format,
        ResponseFormat::JsonObject | ResponseFormat::JsonSchema(_)
    );
    let needed = first_system.is_some()
        || ctx.tools_on
        || has_format
        || (conv.thinking_mode && !conv.messages.is_empty());
    if !needed {
        return false;
    }
    out.special(SpecialToken::System);
    if conv.thinking_mode {
        out.text(&format!(
            "Reasoning Effort: {} (range 1-100, the higher the value, the more thorough the reasoning)\n\n",
            effort_number(conv.reasoning_effort)
        ));
    }
    if let Some(s) = first_system {
        out.content_with_images(&s.content, &s.image_token, &s.placeholders);
        images.extend(s.image_sources.iter().cloned());
    }
    tools_block(ctx, out);
    response_format_block(ctx, out);
    if let Some(s) = first_system {
        updated_tools(ctx, out, s.tools.as_deref());
    }
    first_system.is_some()
}

fn effort_number(e: Option<ReasoningEffort>) -> u32 {
    match e {
        Some(ReasoningEffort::Low) => 50,
        Some(ReasoningEffort::Max) => 100,
        _ => 75,
    }
}

fn tool_line(ctx: &Ctx<'_>, t: &ToolDefinition, s: &mut String) {
    s.push_str("{\"name\": ");
    json::write_str(s, &t.name);
    s.push_str(", \"description\": ");
    json::write_str(s, t.description.as_deref().unwrap_or(""));
    s.push_str(", \"parameters\": ");
    json::write_value(s, &t.parameters, ctx.style);
    s.push('}');
}

fn tool_lines(ctx: &Ctx<'_>, tools: &[ToolDefinition], skip_deferred: bool) -> String {
    let mut s = String::new();
    for (i, t) in tools
        .iter()
        .filter(|t| !(skip_deferred && t.defer_loading))
        .enumerate()
    {
        if i > 0 {
            s.push('\n');
        }
        tool_line(ctx, t, &mut s);
    }
    s
}

fn tools_block(ctx: &Ctx<'_>, out: &mut Out<'_>) {
    if !ctx.tools_on {
        return;
    }
    use SpecialToken::{Dsml, ThinkingEnd, ThinkingStart};
    let sp = if ctx.v41() { " " } else { "" };
    let calls = if ctx.v41() { " calls" } else { "tool_calls" };
    out.text("\n\n## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke tools by writing a \"<");
    out.special(Dsml);
    out.text(&format!("{calls}>\" block like the following:\n\n<"));
    out.special(Dsml);
    out.text(&format!("{calls}>\n<"));
    out.special(Dsml);
    out.text(&format!("{sp}invoke name=\"$TOOL_NAME\">\n<"));
    out.special(Dsml);
    out.text(&format!(
        "{sp}parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</"
    ));
    out.special(Dsml);
    out.text(&format!("{sp}parameter>\n...\n</"));
    out.special(Dsml);
    out.text(&format!("{sp}invoke>\n<"));
    out.special(Dsml);
    out.text(&format!("{sp}invoke name=\"$TOOL_NAME2\">\n...\n</"));
    out.special(Dsml);
    out.text(&format!("{sp}invoke>\n</"));
    out.special(Dsml);
    out.text(&format!("{calls}>\n\nString parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\nIf thinking_mode is enabled (triggered by "));
    out.special(ThinkingStart);
    out.text("), you MUST output your complete reasoning inside ");
    out.special(ThinkingStart);
    out.text("...");
    out.special(ThinkingEnd);
    out.text(" BEFORE any tool calls or final response.\n\nOtherwise, output directly after ");
    out.special(ThinkingEnd);
    out.text(" with tool calls or final response.\n\n### Available Tool Schemas\n\n");
    let lines = tool_lines(ctx, &ctx.conv.tools, true);
    if ctx.v41() || lines.is_empty() {
        out.text(&lines);
        out.text(if ctx.v41() {
            TOOLS_OUTRO
        } else {
            &TOOLS_OUTRO[1..]
        });
    } else {
        out.text(&lines);
        out.text(TOOLS_OUTRO);
    }
}

fn response_format_block(ctx: &Ctx<'_>, out: &mut Out<'_>) {
    match &ctx.conv.response_format {
        ResponseFormat::JsonObject => {
            if ctx.v41() {
                out.text(SCHEMA_INTRO);
                out.text("{\"type\": \"json_object\"}");
            } else {
                out.text(V4_JSON_OBJECT);
            }
        }
        ResponseFormat::JsonSchema(schema) => {
            out.text(SCHEMA_INTRO);
            out.text(&json::to_string(schema, ctx.style));
        }
        ResponseFormat::Text | ResponseFormat::Regex(_) => {}
    }
}

/// "Updated Tool Schemas" of a V4.1 system message.
fn updated_tools(ctx: &Ctx<'_>, out: &mut Out<'_>, tools: Option<&[ToolDefinition]>) {
    if !ctx.v41() {
        return;
    }
    if let Some(tools) = tools.filter(|t| !t.is_empty()) {
        out.text("\n\n### Updated Tool Schemas\n\n");
        out.text(&tool_lines(ctx, tools, false));
    }
}

/// One item of a merged user turn.
#[derive(Clone, Copy)]
enum Part<'a> {
    User(&'a crate::conversation::UserMessage),
    Tool(&'a crate::conversation::ToolMessage),
}

/// `unit_starts` (V4 only) flags the body messages that start a unit: a user message that
/// begins a run of user messages as the caller gave them. A window sort can put two runs next to
/// each other; each run still counts as one piece of the merged turn.
fn turns(
    ctx: &Ctx<'_>,
    out: &mut Out<'_>,
    images: &mut Vec<ImageSource>,
    body: &[&Message],
    unit_starts: &[bool],
) {
    let n = body.len();
    let mut i = 0;
    // Tool calls of the most recent assistant message that made any (results are ordered
    // against them).
    let mut last_calls: &[ToolCall] = &[];
    while i < n {
        match body[i] {
            Message::User(_) | Message::Tool(_) => {
                // A run of user/tool messages becomes one user turn (V4: a tool message after a
                // user message starts a new turn).
                let mut parts: Vec<Part<'_>> = Vec::new();
                let mut j = i;
                while j < n {
                    match body[j] {
                        Message::User(u) => parts.push(Part::User(u)),
                        Message::Tool(t) => {
                            if !ctx.v41() && matches!(parts.last(), Some(Part::User(_))) {
                                break;
                            }
                            parts.push(Part::Tool(t));
                        }
                        _ => break,
                    }
                    j += 1;
                }
                order_tool_results(ctx.v, &mut parts, last_calls);
                out.special(SpecialToken::User);
                // Whether the current run of user messages has written text yet (V4).
                let mut user_text_written = false;
                for (k, p) in parts.iter().enumerate() {
                    // V4 never reorders inside a turn, so part k is body message i + k.
                    let starts_unit = unit_starts.get(i + k).copied().unwrap_or(false);
                    if matches!(p, Part::User(_)) && starts_unit {
                        user_text_written = false;
                    }
                    if k > 0
                        && (ctx.v41()
                            || v4_separator(&parts[..k], p, starts_unit, user_text_written))
                    {
                        out.text("\n\n");
                    }
                    if matches!(p, Part::User(u) if !u.content.is_empty()) {
                        user_text_written = true;
                    }
                    match p {
                        Part::User(u) => {
                            out.content_with_images(&u.content, &u.image_token, &u.placeholders);
                            images.extend(u.image_sources.iter().cloned());
                        }
                        Part::Tool(t) => {
                            out.text("<tool_result>");
                            out.content_with_images(&t.content, &t.image_token, &t.placeholders);
                            out.text("</tool_result>");
                            images.extend(t.image_sources.iter().cloned());
                        }
                    }
                }
                i = j;
            }
            Message::LatestReminder(r) => {
                // V4.1 keeps only the first of consecutive reminders.
                let repeated = i > 0 && matches!(body[i - 1], Message::LatestReminder(_));
                if !(ctx.v41() && repeated) {
                    out.special(SpecialToken::LatestReminder);
                    out.text(&r.content);
                }
                i += 1;
            }
            Message::System(s) => {
                // Only V4.1 keeps system messages in the turn sequence.
                out.special(SpecialToken::System);
                out.content_with_images(&s.content, &s.image_token, &s.placeholders);
                images.extend(s.image_sources.iter().cloned());
                updated_tools(ctx, out, s.tools.as_deref());
                i += 1;
            }
            Message::Assistant(a) => {
                let last = i + 1 == n;
                assistant(ctx, out, a, last, i == 0 && !ctx.header_has_content);
                // Results are ordered against the latest assistant that made calls: a turn
                // without calls (or with an empty list) leaves the previous calls in force.
                if let Some(calls) = a.tool_calls.as_deref().filter(|c| !c.is_empty()) {
                    last_calls = calls;
                }
                i += 1;
            }
        }
    }
}

/// Whether V4 separates part `p` from the parts `before` it in a merged user turn: tool results
/// are joined with blank lines, the first user text after tool results is always separated, and
/// among user texts empty ones are left out. A user message that starts a run of its own (one
/// that a window sort placed after another run) is always separated, even when empty.
fn v4_separator(
    before: &[Part<'_>],
    p: &Part<'_>,
    starts_unit: bool,
    user_text_written: bool,
) -> bool {
    match p {
        Part::Tool(_) => true,
        Part::User(u) => {
            let first_user = !before.iter().any(|b| matches!(b, Part::User(_)));
            if first_user || starts_unit {
                true // `before` is non-empty and holds only tool results
            } else {
                !u.content.is_empty() && user_text_written
            }
        }
    }
}

/// V4 ordering of tool results. The body is first cut into units: a run of consecutive user
/// messages is one unit, every other message is a unit of its own. Then, for each assistant
/// message with `n` calls, taken at the unit index it had before any reordering, the `n` units
/// that currently follow that index (when there are that many) are stably sorted: tool results
/// without an ID first, then tool results by call ID, then every other unit. Since the index is
/// fixed in advance, a window can hold an earlier assistant that an earlier sort moved there.
/// Returns, for the reordered body, whether each message is the first of its unit.
fn v4_order_after_calls(body: &mut Vec<&Message>) -> Vec<bool> {
    fn key<'m>(m: &'m Message) -> (u8, Option<&'m str>) {
        match m {
            Message::Tool(t) => match t.tool_call_id.as_deref() {
                None => (0, None),
                Some(id) => (1, Some(id)),
            },
            _ => (2, None),
        }
    }
    // Units as (start, len) ranges of `body`.
    let mut units: Vec<(usize, usize)> = Vec::with_capacity(body.len());
    for (k, m) in body.iter().enumerate() {
        match (units.last_mut(), m) {
            (Some((s, len)), Message::User(_)) if matches!(body[*s], Message::User(_)) => *len += 1,
            _ => units.push((k, 1)),
        }
    }
    let windows: Vec<(usize, usize)> = units
        .iter()
        .enumerate()
        .filter_map(|(i, &(s, _))| match body[s] {
            Message::Assistant(a) => Some((i, a.tool_calls.as_ref().map_or(0, Vec::len))),
            _ => None,
        })
        .filter(|&(_, n)| n >= 2)
        .collect();
    let msgs: &[&Message] = body;
    for (i, n) in windows {
        if units.len() - (i + 1) >= n {
            units[i + 1..i + 1 + n].sort_by(|x, y| key(msgs[x.0]).cmp(&key(msgs[y.0])));
        }
    }
    let ordered: Vec<&Message> = units
        .iter()
        .flat_map(|&(s, len)| msgs[s..s + len].iter().copied())
        .collect();
    let starts: Vec<bool> = units
        .iter()
        .flat_map(|&(_, len)| (0..len).map(|k| k == 0))
        .collect();
    *body = ordered;
    starts
}

/// Put tool results in the order of the calls they answer (V4.1; V4 orders beforehand).
fn order_tool_results(v: EncodingVersion, parts: &mut [Part<'_>], calls: &[ToolCall]) {
    match v {
        EncodingVersion::V41 => {
            // Results with an ID are stably sorted by the position of their call (unknown IDs
            // count as position 0) within the slots they occupy; results without an ID keep
            // their slot.
            let slots: Vec<usize> = parts
                .iter()
                .enumerate()
                .filter(|(_, p)| matches!(p, Part::Tool(t) if t.tool_call_id.is_some()))
                .map(|(k, _)| k)
                .collect();
            if slots.len() < 2 {
                return;
            }
            let key = |p: &Part<'_>| match p {
                Part::Tool(t) => t
                    .tool_call_id
                    .as_deref()
                    .and_then(|id| calls.iter().position(|c| c.id == id))
                    .unwrap_or(0),
                Part::User(_) => 0,
            };
            let mut order: Vec<usize> = slots.clone();
            order.sort_by_key(|&k| key(&parts[k]));
            permute(parts, &slots, &order);
        }
        EncodingVersion::V4 => {}
    }
}

/// Place `parts[order[i]]` into `parts[slots[i]]` for every i.
fn permute(parts: &mut [Part<'_>], slots: &[usize], order: &[usize]) {
    let picked: Vec<Part<'_>> = order.iter().map(|&k| parts[k]).collect();
    for (slot, p) in slots.iter().zip(picked) {
        parts[*slot] = p;
    }
}

/// `opens_body`: the message comes first and the header holds nothing but the effort line.
fn assistant(ctx: &Ctx<'_>, out: &mut Out<'_>, a: &AssistantMessage, last: bool, opens_body: bool) {
    use SpecialToken::{Assistant, Eos, ThinkingEnd, ThinkingStart};
    let thinking = ctx.conv.thinking_mode;
    out.special(Assistant);
    if a.prefix {
        if ctx.v41() {
            // V4.1 continues the reasoning of a prefix turn, unless the turn opens the
            // conversation right after a bare header (then it is written like a non-thinking turn).
            if thinking && !opens_body {
                out.special(ThinkingStart);
                out.grounded(a.reasoning_content.as_deref().unwrap_or(""));
                let has_calls = a.tool_calls.as_ref().is_some_and(|c| !c.is_empty());
                if !a.content.is_empty() || has_calls {
                    out.special(ThinkingEnd);
                }
            } else {
                out.special(ThinkingEnd);
            }
        } else {
            if let Some(r) = &a.reasoning_content {
                out.special(ThinkingStart);
                out.grounded(r);
            }
            if !a.content.is_empty() || !thinking {
                out.special(ThinkingEnd);
            }
        }
        out.grounded(&a.content);
        tool_calls_block(ctx, out, a.tool_calls.as_deref());
        if !ctx.v41() && !last {
            out.special(Eos);
        }
        return;
    }
    // V4 keeps historical reasoning whenever tools are offered; V4.1 only in thinking mode.
    let keep_reasoning = ctx.tools_on && (thinking || !ctx.v41());
    // V4.1 leaves out the block of an empty (or missing) reasoning altogether when the closing
    // spelling is empty, as the official package does.
    let empty_v41_block = ctx.v41()
        && a.reasoning_content.as_deref().unwrap_or("").is_empty()
        && out.tokens.get(ThinkingEnd).is_empty();
    match (&a.reasoning_content, ctx.v) {
        _ if keep_reasoning && empty_v41_block => {}
        (Some(r), _) if keep_reasoning => {
            out.special(ThinkingStart);
            out.grounded(r);
            out.special(ThinkingEnd);
        }
        (None, EncodingVersion::V41) if keep_reasoning => {
            out.special(ThinkingStart);
            out.special(ThinkingEnd);
        }
        _ => out.special(ThinkingEnd),
    }
    out.grounded(&a.content);
    tool_calls_block(ctx, out, a.tool_calls.as_deref());
    out.special(Eos);
}

fn tool_calls_block(ctx: &Ctx<'_>, out: &mut Out<'_>, calls: Option<&[ToolCall]>) {
    // V4 writes an empty block for an empty (but present) call list.
    let calls = match calls {
        None => return,
        Some([]) if ctx.v41() => return,
        Some(c) => c,
    };
    use SpecialToken::Dsml;
    let v41 = ctx.v41();
    // V4 lists the calls stably sorted by call ID (byte order); V4.1 keeps the given order.
    let mut calls: Vec<&ToolCall> = calls.iter().collect();
    if !v41 {
        calls.sort_by(|x, y| x.id.cmp(&y.id));
    }
    let sp = if v41 { " " } else { "" };
    let block = if v41 { " calls>" } else { "tool_calls>" };
    out.text("\n\n<");
    out.special(Dsml);
    out.text(block);
    for call in calls {
        out.text("\n<");
        out.special(Dsml);
        let mut head = format!("{sp}invoke name=\"");
        head.push_str(&call.name);
        head.push_str("\">\n");
        out.text(&head);
        let params = call_parameters(ctx, call);
        for (k, (name, is_str, value)) in params.iter().enumerate() {
            if k > 0 {
                out.text("\n");
            }
            out.text("<");
            out.special(Dsml);
            let mut p = format!("{sp}parameter name=\"");
            p.push_str(name);
            p.push_str(if *is_str {
                "\" string=\"true\">"
            } else {
                "\" string=\"false\">"
            });
            p.push_str(value);
            p.push_str("</");
            out.text(&p);
            out.special(Dsml);
            out.text(&format!("{sp}parameter>"));
        }
        if params.is_empty() {
            out.text(if v41 { "\n</" } else { "</" });
        } else {
            out.text("\n</");
        }
        out.special(Dsml);
        out.text(&format!("{sp}invoke>"));
    }
    out.text("\n</");
    out.special(Dsml);
    out.text(block);
}

/// `(name, is_string, value)` for each parameter of a historical call.
fn call_parameters(ctx: &Ctx<'_>, call: &ToolCall) -> Vec<(String, bool, String)> {
    match serde_json::from_str::<Value>(&call.arguments) {
        Ok(Value::Object(map)) => map
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(s) => (k, true, s),
                other => (k, false, json::to_string(&other, ctx.style)),
            })
            .collect(),
        _ => vec![("arguments".to_owned(), true, call.arguments.clone())],
    }
}
