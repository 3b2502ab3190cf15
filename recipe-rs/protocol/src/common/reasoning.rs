//! Reasoning passed back in assistant turns, and where the model's output starts.

use recipe_core::{AssistantMessage, Message, ThinkingInitialStage};

use crate::error::{reject, ConvResult};
use crate::options::ReasoningContentBehavior;

/// How a format names the reasoning it expects back, and when it is needed.
pub struct ReasoningField {
    pub name: &'static str,
    /// Whether the request declares tools: then every assistant turn after the last user
    /// message needs its reasoning, not only those that made calls.
    pub tools_declared: bool,
}

/// Fill in missing reasoning in thinking mode (or reject it), drop it outside thinking mode.
/// Runs right after the messages are converted, before any tool or option check.
pub fn apply_reasoning_policy(
    messages: &mut [Message],
    thinking: bool,
    behavior: ReasoningContentBehavior,
    field: ReasoningField,
) -> ConvResult<()> {
    if !thinking {
        for m in messages.iter_mut() {
            if let Message::Assistant(a) = m {
                a.reasoning_content = None;
            }
        }
        return Ok(());
    }
    let last_user = messages.iter().rposition(|m| matches!(m, Message::User(_)));
    for (i, m) in messages.iter_mut().enumerate() {
        if let Message::Assistant(a) = m {
            if a.reasoning_content.is_none() {
                let after_last_user = last_user.is_none_or(|u| i > u);
                let has_calls = a.tool_calls.as_ref().is_some_and(|c| !c.is_empty());
                let needed = after_last_user && (has_calls || field.tools_declared);
                if behavior == ReasoningContentBehavior::Reject && needed {
                    return reject(format!(
                        "The `{}` in the thinking mode must be passed back to the API.",
                        field.name
                    ));
                }
                a.reasoning_content = Some(String::new());
            }
        }
    }
    Ok(())
}

/// Where the output starts in thinking mode: continuing a prefilled answer or reasoning, or at
/// the start of the reasoning.
pub fn thinking_stage(messages: &[Message], thinking: bool) -> Option<ThinkingInitialStage> {
    if !thinking {
        return None;
    }
    if let Some(Message::Assistant(AssistantMessage {
        prefix: true,
        content,
        reasoning_content,
        ..
    })) = messages.last()
    {
        if !content.is_empty() {
            return Some(ThinkingInitialStage::ContentContinuation);
        }
        if reasoning_content.as_deref().is_some_and(|r| !r.is_empty()) {
            return Some(ThinkingInitialStage::ReasoningContinuation);
        }
    }
    Some(ThinkingInitialStage::ReasoningStart)
}
