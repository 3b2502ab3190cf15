//! A canonical JSON form of a conversation, used to compare conversions with recorded fixtures.
//!
//! Field names follow the Python properties of the conversation classes; the Python tests build
//! the same form from the Python objects.

use serde_json::{json, Value};

use recipe_core::{Conversation, ImageData, ImageSource, Message, ResponseFormat, ToolDefinition};

fn tool_json(t: &ToolDefinition) -> Value {
    json!({
        "name": t.name,
        "description": t.description,
        "parameters": t.parameters,
        "strict": t.strict,
        "defer_loading": t.defer_loading,
    })
}

fn image_json(s: &ImageSource) -> Value {
    let (kind, data_url, url) = match &s.data {
        ImageData::DataUrl(d) => ("data_url", Some(d.as_str()), None),
        ImageData::Url(u) => ("url", None, Some(u.as_str())),
        ImageData::Bytes(_) => ("bytes", None, None),
    };
    json!([kind, s.detail.as_str(), data_url, url, s.path])
}

fn images_json(images: &[ImageSource]) -> Value {
    Value::Array(images.iter().map(image_json).collect())
}

pub fn message_json(m: &Message) -> Value {
    match m {
        Message::System(s) => json!({
            "role": "system",
            "content": s.content,
            "images": images_json(&s.image_sources),
            "tools": s.tools.as_ref().map(|t| t.iter().map(tool_json).collect::<Vec<_>>()),
        }),
        Message::User(u) => json!({
            "role": "user",
            "content": u.content,
            "images": images_json(&u.image_sources),
        }),
        Message::Assistant(a) => json!({
            "role": "assistant",
            "content": a.content,
            "reasoning_content": a.reasoning_content,
            "prefix": a.prefix,
            "tool_calls": a.tool_calls.as_ref().map(|calls| calls
                .iter()
                .map(|c| json!([c.id, c.name, c.arguments]))
                .collect::<Vec<_>>()),
        }),
        Message::Tool(t) => json!({
            "role": "tool",
            "content": t.content,
            "tool_call_id": t.tool_call_id,
            "images": images_json(&t.image_sources),
        }),
        Message::LatestReminder(r) => json!({
            "role": "latest_reminder",
            "content": r.content,
        }),
    }
}

pub fn conversation_json(c: &Conversation) -> Value {
    let (schema, regex) = match &c.response_format {
        ResponseFormat::JsonSchema(s) => (s.clone(), None),
        ResponseFormat::Regex(r) => (Value::Null, Some(r.clone())),
        _ => (Value::Null, None),
    };
    json!({
        "thinking_mode": c.thinking_mode,
        "tool_choice": c.tool_choice.as_str(),
        "reasoning_effort": c.reasoning_effort.map(|e| e.as_str()),
        "response_format": c.response_format.name(),
        "response_schema": schema,
        "response_regex": regex,
        "tools": c.tools.iter().map(tool_json).collect::<Vec<_>>(),
        "messages": c.messages.iter().map(message_json).collect::<Vec<_>>(),
    })
}
