//! The prompt renderer shared by every template version.
//!
//! Layout (every version): BOS, a header (reasoning-effort text, system text, tools block,
//! response-format block), then the messages in order, then the generation prompt (assistant
//! token plus the thinking token; omitted after a prefix assistant message).
//!
//! Nothing here asks which version it renders: what differs is read from the version's
//! [`ModelProfile`] (`crate::profile`). Plain differences (spellings, effort lines, small
//! switches) are profile data used in place; the rules that are code (where system messages go,
//! how tool results are ordered, how a prefix turn is written) are chosen by the profile and
//! implemented in the module of the version that introduced them, [`v4`] and [`v41`].
//! `docs/encoding-deviations.md` lists where the output knowingly differs from the official
//! package.

mod out;
mod v4;
mod v41;

use serde_json::Value;

use super::json;
use super::{EncodingVersion, RenderedPrompt};
use crate::conversation::{
    AssistantMessage, Conversation, ImageSource, Message, ResponseFormat, ToolCall, ToolChoice,
    ToolDefinition, ToolMessage, UserMessage,
};
use crate::profile::{ModelProfile, PrefixTurn, SystemHandling, ToolResultOrder, UserTurnJoin};
use crate::special_tokens::{SpecialToken, SpecialTokens};
use out::Out;

const SCHEMA_INTRO: &str =
    "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";
const TOOLS_OUTRO: &str =
    "You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

/// What every part of the renderer needs to know about the prompt being written.
struct Ctx<'a> {
    p: &'static ModelProfile,
    conv: &'a Conversation,
    /// Tools are offered (non-empty list and tool choice other than none).
    tools_on: bool,
    /// The header holds more than the reasoning-effort line (a leading system message, the
    /// tools block or a response format).
    header_has_content: bool,
}

/// Render `conv` with template `v` and spellings `tokens`.
pub fn render(v: EncodingVersion, tokens: &SpecialTokens, conv: &Conversation) -> RenderedPrompt {
    let p = v.profile();
    let tools_on = !conv.tools.is_empty() && conv.tool_choice != ToolChoice::None;
    let ctx = Ctx {
        p,
        conv,
        tools_on,
        header_has_content: matches!(conv.messages.first(), Some(Message::System(_)))
            || tools_on
            || matches!(
                conv.response_format,
                ResponseFormat::JsonObject | ResponseFormat::JsonSchema(_)
            ),
    };
    let mut out = Out::new(tokens);
    let mut images: Vec<ImageSource> = Vec::new();
    out.special(SpecialToken::Bos);

    // The header takes what it needs; the rest is the body of turns.
    let mut body = match p.system_handling {
        SystemHandling::JoinedIntoHeader => v4::header(&ctx, &mut out, &mut images),
        SystemHandling::LeadingOpensHeader => v41::header(&ctx, &mut out, &mut images),
    };
    // Which body messages start a unit of the sort (empty when nothing is sorted up front).
    let unit_starts = match p.tool_result_order {
        ToolResultOrder::SortedAfterCallingTurn => v4::order_after_calls(&mut body),
        ToolResultOrder::CallOrderWithinTurn => Vec::new(),
    };

    turns(&ctx, &mut out, &mut images, &body, &unit_starts);

    // The body has no hoisted system messages: a prefix turn followed only by system messages
    // that the header took still ends the prompt.
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
        out.text(p.dsml.calls);
        out.text(">\n");
    }
    RenderedPrompt {
        spans: out.spans,
        image_sources: images,
    }
}

/// Text and images of a system message, user message or tool result, as the template places it.
fn message_text(
    out: &mut Out<'_>,
    images: &mut Vec<ImageSource>,
    content: &str,
    image_token: &str,
    placeholders: &[usize],
    sources: &[ImageSource],
) {
    out.content_with_images(content, image_token, placeholders);
    images.extend(sources.iter().cloned());
}

fn tool_line(ctx: &Ctx<'_>, t: &ToolDefinition, s: &mut String) {
    s.push_str("{\"name\": ");
    json::write_str(s, &t.name);
    s.push_str(", \"description\": ");
    json::write_str(s, t.description.as_deref().unwrap_or(""));
    s.push_str(", \"parameters\": ");
    json::write_value(s, &t.parameters, ctx.p.float_style);
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

/// The tools block of the header: how to call tools, then the schema of every tool not deferred.
fn tools_block(ctx: &Ctx<'_>, out: &mut Out<'_>) {
    if !ctx.tools_on {
        return;
    }
    use SpecialToken::{Dsml, ThinkingEnd, ThinkingStart};
    let d = &ctx.p.dsml;
    let (calls, invoke, parameter) = (d.calls, d.invoke, d.parameter);
    out.text("\n\n## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke tools by writing a \"<");
    out.special(Dsml);
    out.text(&format!("{calls}>\" block like the following:\n\n<"));
    out.special(Dsml);
    out.text(&format!("{calls}>\n<"));
    out.special(Dsml);
    out.text(&format!("{invoke} name=\"$TOOL_NAME\">\n<"));
    out.special(Dsml);
    out.text(&format!(
        "{parameter} name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</"
    ));
    out.special(Dsml);
    out.text(&format!("{parameter}>\n...\n</"));
    out.special(Dsml);
    out.text(&format!("{invoke}>\n<"));
    out.special(Dsml);
    out.text(&format!("{invoke} name=\"$TOOL_NAME2\">\n...\n</"));
    out.special(Dsml);
    out.text(&format!("{invoke}>\n</"));
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
    out.text(&lines);
    out.text(if lines.is_empty() {
        ctx.p.header.gap_after_empty_schema_list
    } else {
        "\n\n"
    });
    out.text(TOOLS_OUTRO);
}

fn response_format_block(ctx: &Ctx<'_>, out: &mut Out<'_>) {
    match &ctx.conv.response_format {
        ResponseFormat::JsonObject => out.text(ctx.p.header.json_object_block),
        ResponseFormat::JsonSchema(schema) => {
            out.text(SCHEMA_INTRO);
            out.text(&json::to_string(schema, ctx.p.float_style));
        }
        ResponseFormat::Text | ResponseFormat::Regex(_) => {}
    }
}

/// "Updated Tool Schemas" of a system message that carries tools (a system message is only
/// rendered with its tools where the profile keeps it out of a joined header).
fn updated_tools(ctx: &Ctx<'_>, out: &mut Out<'_>, tools: Option<&[ToolDefinition]>) {
    if let Some(tools) = tools.filter(|t| !t.is_empty()) {
        out.text("\n\n### Updated Tool Schemas\n\n");
        out.text(&tool_lines(ctx, tools, false));
    }
}

/// One item of a merged user turn.
#[derive(Clone, Copy)]
enum Part<'a> {
    User(&'a UserMessage),
    Tool(&'a ToolMessage),
}

/// The body's messages as turns. `unit_starts` (from an up-front sort, else empty) flags the
/// body messages that start a unit: a user message that begins a run of user messages as the
/// caller gave them. A sort can put two runs next to each other; each run still counts as one
/// piece of the merged turn.
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
                let starts = unit_starts.get(i..).unwrap_or(&[]);
                i += user_turn(ctx, out, images, &body[i..], starts, last_calls);
            }
            Message::LatestReminder(r) => {
                let repeated = i > 0 && matches!(body[i - 1], Message::LatestReminder(_));
                if !(ctx.p.turns.repeated_reminders_collapse && repeated) {
                    out.special(SpecialToken::LatestReminder);
                    out.text(&r.content);
                }
                i += 1;
            }
            Message::System(s) => {
                // A system message the header did not take is a turn of its own.
                out.special(SpecialToken::System);
                message_text(
                    out,
                    images,
                    &s.content,
                    &s.image_token,
                    &s.placeholders,
                    &s.image_sources,
                );
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

/// One user turn: the run of user and tool messages at the start of `body`, merged. Returns how
/// many messages it took. `unit_starts` is aligned with `body` (possibly shorter).
fn user_turn(
    ctx: &Ctx<'_>,
    out: &mut Out<'_>,
    images: &mut Vec<ImageSource>,
    body: &[&Message],
    unit_starts: &[bool],
    last_calls: &[ToolCall],
) -> usize {
    let mut parts: Vec<Part<'_>> = Vec::new();
    for m in body {
        match m {
            Message::User(u) => parts.push(Part::User(u)),
            Message::Tool(t) => {
                if ctx.p.turns.tool_result_after_user_opens_turn
                    && matches!(parts.last(), Some(Part::User(_)))
                {
                    break;
                }
                parts.push(Part::Tool(t));
            }
            _ => break,
        }
    }
    let taken = parts.len();
    match ctx.p.tool_result_order {
        ToolResultOrder::CallOrderWithinTurn => v41::order_tool_results(&mut parts, last_calls),
        ToolResultOrder::SortedAfterCallingTurn => {} // sorted before the turns were cut
    }
    out.special(SpecialToken::User);
    // Whether the current run of user messages has written text yet.
    let mut user_text_written = false;
    for (k, p) in parts.iter().enumerate() {
        // Parts are reordered only where `unit_starts` is empty, so part k is body message k.
        let starts_unit = unit_starts.get(k).copied().unwrap_or(false);
        if matches!(p, Part::User(_)) && starts_unit {
            user_text_written = false;
        }
        let separated = k > 0
            && match ctx.p.user_turn_join {
                UserTurnJoin::BlankLineBetweenAll => true,
                UserTurnJoin::SkipEmptyUserTexts => {
                    v4::separates(&parts[..k], p, starts_unit, user_text_written)
                }
            };
        if separated {
            out.text("\n\n");
        }
        match p {
            Part::User(u) => {
                if !u.content.is_empty() {
                    user_text_written = true;
                }
                message_text(
                    out,
                    images,
                    &u.content,
                    &u.image_token,
                    &u.placeholders,
                    &u.image_sources,
                );
            }
            Part::Tool(t) => {
                out.text("<tool_result>");
                out.content_with_images(&t.content, &t.image_token, &t.placeholders);
                out.text("</tool_result>");
                images.extend(t.image_sources.iter().cloned());
            }
        }
    }
    taken
}

/// An assistant turn. `opens_body`: the message comes first and the header holds nothing but
/// the effort line.
fn assistant(ctx: &Ctx<'_>, out: &mut Out<'_>, a: &AssistantMessage, last: bool, opens_body: bool) {
    use SpecialToken::{Assistant, Eos, ThinkingEnd, ThinkingStart};
    out.special(Assistant);
    if a.prefix {
        match ctx.p.prefix_turn {
            PrefixTurn::ReasoningWhenGiven => v4::prefix_turn(ctx, out, a, last),
            PrefixTurn::ContinuesReasoning => v41::prefix_turn(ctx, out, a, opens_body),
        }
        return;
    }
    let h = &ctx.p.history;
    let keep_reasoning =
        ctx.tools_on && (ctx.conv.thinking_mode || h.reasoning_kept_without_thinking);
    if keep_reasoning {
        let reasoning = a.reasoning_content.as_deref();
        let dropped = h.empty_block_dropped_when_end_spelled_empty
            && reasoning.unwrap_or("").is_empty()
            && out.tokens.get(ThinkingEnd).is_empty();
        match reasoning {
            _ if dropped => {}
            Some(r) => {
                out.special(ThinkingStart);
                out.grounded(r);
                out.special(ThinkingEnd);
            }
            None if h.missing_reasoning_written_as_empty_block => {
                out.special(ThinkingStart);
                out.special(ThinkingEnd);
            }
            None => out.special(ThinkingEnd),
        }
    } else {
        out.special(ThinkingEnd);
    }
    content_and_calls(ctx, out, a);
    out.special(Eos);
}

/// The visible part of an assistant turn: its content, then its calls.
fn content_and_calls(ctx: &Ctx<'_>, out: &mut Out<'_>, a: &AssistantMessage) {
    out.grounded(&a.content);
    tool_calls_block(ctx, out, a.tool_calls.as_deref());
}

fn tool_calls_block(ctx: &Ctx<'_>, out: &mut Out<'_>, calls: Option<&[ToolCall]>) {
    let h = &ctx.p.history;
    let calls = match calls {
        None => return,
        Some([]) if !h.empty_call_list_written => return,
        Some(c) => c,
    };
    use SpecialToken::Dsml;
    let d = &ctx.p.dsml;
    let mut calls: Vec<&ToolCall> = calls.iter().collect();
    if h.calls_sorted_by_id {
        calls.sort_by(|x, y| x.id.cmp(&y.id));
    }
    out.text("\n\n<");
    out.special(Dsml);
    out.text(d.calls);
    out.text(">");
    for call in calls {
        out.text("\n<");
        out.special(Dsml);
        out.text(d.invoke);
        out.text(" name=\"");
        out.text(&call.name);
        out.text("\">\n");
        let params = call_parameters(ctx, call);
        for (k, (name, is_str, value)) in params.iter().enumerate() {
            if k > 0 {
                out.text("\n");
            }
            out.text("<");
            out.special(Dsml);
            out.text(d.parameter);
            out.text(" name=\"");
            out.text(name);
            out.text(if *is_str {
                "\" string=\"true\">"
            } else {
                "\" string=\"false\">"
            });
            out.text(value);
            out.text("</");
            out.special(Dsml);
            out.text(d.parameter);
            out.text(">");
        }
        out.text(if params.is_empty() {
            d.invoke_close_without_parameters
        } else {
            "\n</"
        });
        out.special(Dsml);
        out.text(d.invoke);
        out.text(">");
    }
    out.text("\n</");
    out.special(Dsml);
    out.text(d.calls);
    out.text(">");
}

/// `(name, is_string, value)` for each parameter of a historical call.
fn call_parameters(ctx: &Ctx<'_>, call: &ToolCall) -> Vec<(String, bool, String)> {
    match serde_json::from_str::<Value>(&call.arguments) {
        Ok(Value::Object(map)) => map
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(s) => (k, true, s),
                other => (k, false, json::to_string(&other, ctx.p.float_style)),
            })
            .collect(),
        _ => vec![("arguments".to_owned(), true, call.arguments.clone())],
    }
}
