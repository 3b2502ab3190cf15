//! Server-sent-event framing for the three protocols.
//!
//! Chat Completions sends unnamed `data:` messages and ends with `data: [DONE]`; Responses and
//! Messages name every message after its event type and send no final message.

use crate::generator::StreamItem;

/// Which protocol a stream speaks (for the end-of-stream message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    ChatCompletions,
    Responses,
    Messages,
}

impl Protocol {
    /// The data of the message that ends a stream, if the protocol has one.
    pub fn done_data(self) -> Option<&'static str> {
        match self {
            Protocol::ChatCompletions => Some("[DONE]"),
            Protocol::Responses | Protocol::Messages => None,
        }
    }
}

/// Frame one SSE message: an optional `event:` line, one `data:` line per line of `data`, and the
/// blank line that ends the message.
pub fn frame(event: Option<&str>, data: &str) -> String {
    let mut s = String::with_capacity(data.len() + 32);
    if let Some(e) = event {
        s.push_str("event: ");
        s.push_str(e);
        s.push('\n');
    }
    for line in data.split('\n') {
        s.push_str("data: ");
        s.push_str(line);
        s.push('\n');
    }
    s.push('\n');
    s
}

/// The SSE message for one chunk or event.
pub fn to_sse(item: &StreamItem) -> String {
    frame(item.sse_event_name(), &item.to_json())
}

/// The SSE message that ends a stream of `protocol`, if any (`data: [DONE]` for Chat).
pub fn done_message(protocol: Protocol) -> Option<String> {
    protocol.done_data().map(|d| frame(None, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_named_and_unnamed_messages() {
        assert_eq!(frame(None, "{}"), "data: {}\n\n");
        assert_eq!(
            frame(Some("ping"), "{\"type\":\"ping\"}"),
            "event: ping\ndata: {\"type\":\"ping\"}\n\n"
        );
        assert_eq!(
            done_message(Protocol::ChatCompletions).as_deref(),
            Some("data: [DONE]\n\n")
        );
        assert_eq!(done_message(Protocol::Messages), None);
    }
}
