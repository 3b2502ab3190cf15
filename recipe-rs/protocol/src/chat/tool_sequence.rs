//! Tool results in Chat Completions answer the calls of the assistant turn right before them.

use recipe_core::{AssistantMessage, Message};

use crate::error::{reject, ConvResult};

/// Tracks the tool calls of the latest assistant turn while messages are read in order: every
/// call must be answered by one of the tool messages that directly follow it.
#[derive(Default)]
pub(super) struct ToolSequence {
    /// Calls still owed a result, and those already answered; `None` outside a tool-call run.
    open: Option<(Vec<String>, Vec<String>)>,
}

impl ToolSequence {
    /// Before message `index` is converted: a tool result must answer an open call; any other
    /// message closes the run of tool results.
    pub(super) fn before(&mut self, tool_call_id: Option<&str>, index: usize) -> ConvResult<()> {
        if let Some(id) = tool_call_id {
            let Some((pending, answered)) = self.open.as_mut() else {
                return reject(TOOL_WITHOUT_CALLS);
            };
            if pending.is_empty() {
                return reject(TOOL_WITHOUT_CALLS);
            }
            let id = id.to_owned();
            if let Some(pos) = pending.iter().position(|p| *p == id) {
                pending.remove(pos);
                answered.push(id);
            } else if answered.contains(&id) {
                return reject(format!(
                    "Duplicate value for 'tool_call_id' of {id} in message[{index}]"
                ));
            } else {
                return reject(format!(
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id', The following tool_call_ids did not have response messages: {id}"
                ));
            }
            return Ok(());
        }
        self.finish()
    }

    /// After a message is converted: an assistant turn with tool calls opens a run.
    pub(super) fn after(&mut self, msg: &Message) {
        if let Message::Assistant(AssistantMessage {
            tool_calls: Some(calls),
            ..
        }) = msg
        {
            self.open = Some((calls.iter().map(|c| c.id.clone()).collect(), Vec::new()));
        }
    }

    pub(super) fn finish(&mut self) -> ConvResult<()> {
        if let Some((pending, _)) = self.open.take() {
            if !pending.is_empty() {
                return reject("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. (insufficient tool messages following tool_calls message)");
            }
        }
        Ok(())
    }
}

const TOOL_WITHOUT_CALLS: &str =
    "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'";
