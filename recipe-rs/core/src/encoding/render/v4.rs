//! The template rules that DeepSeek V4 introduced and that are code rather than profile data:
//! systems joined into a plain header ([`SystemHandling::JoinedIntoHeader`]), tool results sorted
//! up front ([`ToolResultOrder::SortedAfterCallingTurn`]), empty user texts left out of a merged
//! turn ([`UserTurnJoin::SkipEmptyUserTexts`]) and the prefix turn
//! ([`PrefixTurn::ReasoningWhenGiven`]).
//!
//! [`SystemHandling::JoinedIntoHeader`]: crate::profile::SystemHandling::JoinedIntoHeader
//! [`ToolResultOrder::SortedAfterCallingTurn`]: crate::profile::ToolResultOrder::SortedAfterCallingTurn
//! [`UserTurnJoin::SkipEmptyUserTexts`]: crate::profile::UserTurnJoin::SkipEmptyUserTexts
//! [`PrefixTurn::ReasoningWhenGiven`]: crate::profile::PrefixTurn::ReasoningWhenGiven

use super::{content_and_calls, message_text, response_format_block, tools_block, Ctx, Out, Part};
use crate::conversation::{AssistantMessage, ImageSource, Message};
use crate::special_tokens::SpecialToken;

/// The header: the effort text (thinking mode), every non-empty system message joined with blank
/// lines, the tools block and the response format, all plain text. Returns the body: every
/// message but the system messages.
pub(super) fn header<'c>(
    ctx: &Ctx<'c>,
    out: &mut Out<'_>,
    images: &mut Vec<ImageSource>,
) -> Vec<&'c Message> {
    let conv = ctx.conv;
    if conv.thinking_mode {
        out.text(ctx.p.effort_line(conv.reasoning_effort));
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
            message_text(
                out,
                images,
                &s.content,
                &s.image_token,
                &s.placeholders,
                &s.image_sources,
            );
        }
    }
    tools_block(ctx, out);
    response_format_block(ctx, out);
    conv.messages
        .iter()
        .filter(|m| !matches!(m, Message::System(_)))
        .collect()
}

/// Whether part `p` is separated from the parts `before` it in a merged user turn: tool results
/// are joined with blank lines, the first user text after tool results is always separated, and
/// among user texts empty ones are left out. A user message that starts a run of its own (one
/// that the sort placed after another run) is always separated, even when empty.
pub(super) fn separates(
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

/// Tool results sorted up front. The body is first cut into units: a run of consecutive user
/// messages is one unit, every other message is a unit of its own. Then, for each assistant
/// message with `n` calls, taken at the unit index it had before any reordering, the `n` units
/// that currently follow that index (when there are that many) are stably sorted: tool results
/// without an ID first, then tool results by call ID, then every other unit. Since the index is
/// fixed in advance, a window can hold an earlier assistant that an earlier sort moved there.
/// Returns, for the reordered body, whether each message is the first of its unit.
pub(super) fn order_after_calls(body: &mut Vec<&Message>) -> Vec<bool> {
    fn key(m: &Message) -> (u8, Option<&str>) {
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

/// A prefix turn: the reasoning block is opened only for given reasoning and closed when content
/// follows or thinking is off; a prefix turn that is not the last message is closed with EOS.
pub(super) fn prefix_turn(ctx: &Ctx<'_>, out: &mut Out<'_>, a: &AssistantMessage, last: bool) {
    use SpecialToken::{Eos, ThinkingEnd, ThinkingStart};
    if let Some(r) = &a.reasoning_content {
        out.special(ThinkingStart);
        out.grounded(r);
    }
    if !a.content.is_empty() || !ctx.conv.thinking_mode {
        out.special(ThinkingEnd);
    }
    content_and_calls(ctx, out, a);
    if !last {
        out.special(Eos);
    }
}
