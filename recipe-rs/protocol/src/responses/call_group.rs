//! Function calls and their outputs in Responses input items.

use recipe_core::{Message, ToolMessage};

use crate::error::{reject, ConvResult};

/// The function calls of the assistant turn being built and the outputs that answer them.
///
/// Call IDs are unique across the whole input and every call is answered exactly once, before the
/// next item that is neither a call nor an output (or the end of the input). When the group
/// closes, the calls on its assistant message and the tool messages after it are put in call-ID
/// order (byte order), as the official package orders them.
#[derive(Default)]
pub(super) struct CallGroup {
    /// IDs of the open group's calls, in request order.
    calls: Vec<String>,
    outputs: Vec<ToolMessage>,
    seen: std::collections::HashSet<String>,
    answered: std::collections::HashSet<String>,
}

impl CallGroup {
    pub(super) fn all_answered(&self) -> bool {
        self.outputs.len() == self.calls.len()
    }

    pub(super) fn add_call(&mut self, id: &str) -> ConvResult<()> {
        if !self.seen.insert(id.to_owned()) {
            return reject(format!("Duplicate 'call_id': {id}."));
        }
        self.calls.push(id.to_owned());
        Ok(())
    }

    /// Whether an output for `id` may be added now.
    pub(super) fn check_output(&self, id: &str) -> ConvResult<()> {
        if self.answered.contains(id) {
            return reject(format!("Duplicate tool output for call_id: {id}."));
        }
        if !self.calls.iter().any(|c| c == id) {
            return reject(format!(
                "No tool call found for tool output with call_id {id}."
            ));
        }
        Ok(())
    }

    /// Add an output that [`CallGroup::check_output`] accepted.
    pub(super) fn add_output(&mut self, output: ToolMessage) {
        self.answered.extend(output.tool_call_id.clone());
        self.outputs.push(output);
    }

    /// Close the group: every call must have its output. With several unanswered calls the
    /// official package names an arbitrary one (it varies between runs); this names the first.
    pub(super) fn close(&mut self, messages: &mut Vec<Message>) -> ConvResult<()> {
        if self.calls.is_empty() {
            return Ok(());
        }
        let answered = |id: &String| {
            self.outputs
                .iter()
                .any(|o| o.tool_call_id.as_ref() == Some(id))
        };
        if let Some(missing) = self.calls.iter().find(|id| !answered(id)) {
            return reject(format!("No tool output found for tool call {missing}."));
        }
        // The group's calls are on the last message (nothing else is added while it is open).
        if let Some(Message::Assistant(a)) = messages.last_mut() {
            if let Some(calls) = a.tool_calls.as_mut() {
                calls.sort_by(|x, y| x.id.cmp(&y.id));
            }
        }
        self.outputs
            .sort_by(|x, y| x.tool_call_id.cmp(&y.tool_call_id));
        messages.extend(self.outputs.drain(..).map(Message::Tool));
        self.calls.clear();
        Ok(())
    }
}
