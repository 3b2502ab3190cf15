//! The template rules that DeepSeek V4.1 introduced and that are code rather than profile data:
//! a header opened by the System token ([`SystemHandling::LeadingOpensHeader`]), tool results
//! ordered inside each merged turn ([`ToolResultOrder::CallOrderWithinTurn`]) and the prefix turn
//! that continues its reasoning ([`PrefixTurn::ContinuesReasoning`]). Its join rule
//! ([`UserTurnJoin::BlankLineBetweenAll`]) needs no code.
//!
//! [`SystemHandling::LeadingOpensHeader`]: crate::profile::SystemHandling::LeadingOpensHeader
//! [`ToolResultOrder::CallOrderWithinTurn`]: crate::profile::ToolResultOrder::CallOrderWithinTurn
//! [`PrefixTurn::ContinuesReasoning`]: crate::profile::PrefixTurn::ContinuesReasoning
//! [`UserTurnJoin::BlankLineBetweenAll`]: crate::profile::UserTurnJoin::BlankLineBetweenAll

use super::{
    content_and_calls, message_text, response_format_block, tools_block, updated_tools, Ctx, Out,
    Part,
};
use crate::conversation::{AssistantMessage, ImageSource, Message, ResponseFormat, ToolCall};
use crate::special_tokens::SpecialToken;

/// The header, written only when it has something to hold (a leading system message, tools, a
/// response format, or the effort line of a thinking-mode conversation with messages): the
/// System token, the effort line (thinking mode), the leading system message, the tools block,
/// the response format and the leading system message's updated tool schemas. Returns the body:
/// every message but a leading system message.
pub(super) fn header<'c>(
    ctx: &Ctx<'c>,
    out: &mut Out<'_>,
    images: &mut Vec<ImageSource>,
) -> Vec<&'c Message> {
    let conv = ctx.conv;
    let first_system = match conv.messages.first() {
        Some(Message::System(s)) => Some(s),
        _ => None,
    };
    let body = conv.messages[usize::from(first_system.is_some())..]
        .iter()
        .collect();
    let has_format = matches!(
        conv.response_format,
        ResponseFormat::JsonObject | ResponseFormat::JsonSchema(_)
    );
    let needed = first_system.is_some()
        || ctx.tools_on
        || has_format
        || (conv.thinking_mode && !conv.messages.is_empty());
    if !needed {
        return body;
    }
    out.special(SpecialToken::System);
    if conv.thinking_mode {
        out.text(ctx.p.effort_line(conv.reasoning_effort));
    }
    if let Some(s) = first_system {
        message_text(
            out,
            images,
            &s.content,
            &s.image_token,
            &s.placeholders,
            &s.image_sources,
        );
    }
    tools_block(ctx, out);
    response_format_block(ctx, out);
    if let Some(s) = first_system {
        updated_tools(ctx, out, s.tools.as_deref());
    }
    body
}

/// Put the tool results of one merged user turn in the order of the calls they answer: results
/// with an ID are stably sorted by the position of their call (an unknown ID counts as position
/// 0) within the slots they occupy; results without an ID and user texts keep their slot.
pub(super) fn order_tool_results(parts: &mut [Part<'_>], calls: &[ToolCall]) {
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
    // Place `parts[order[i]]` into `parts[slots[i]]` for every i.
    let picked: Vec<Part<'_>> = order.iter().map(|&k| parts[k]).collect();
    for (slot, p) in slots.iter().zip(picked) {
        parts[*slot] = p;
    }
}

/// A prefix turn: in thinking mode it continues its reasoning (the block is closed once content
/// or calls follow), unless the turn opens the conversation right after a header that holds at
/// most the effort line (`opens_body`); then it is written like a non-thinking turn.
pub(super) fn prefix_turn(
    ctx: &Ctx<'_>,
    out: &mut Out<'_>,
    a: &AssistantMessage,
    opens_body: bool,
) {
    use SpecialToken::{ThinkingEnd, ThinkingStart};
    if ctx.conv.thinking_mode && !opens_body {
        out.special(ThinkingStart);
        out.grounded(a.reasoning_content.as_deref().unwrap_or(""));
        let has_calls = a.tool_calls.as_ref().is_some_and(|c| !c.is_empty());
        if !a.content.is_empty() || has_calls {
            out.special(ThinkingEnd);
        }
    } else {
        out.special(ThinkingEnd);
    }
    content_and_calls(ctx, out, a);
}
