//! Image placeholders come from the image parts of a request, never from text that spells the
//! image token: conversion records where each placeholder sits and the renderer uses exactly those
//! positions. Regression for a request whose text part typed `<｜image｜>` next to a real image.

use serde_json::{json, Value};

use recipe_core::encoding::{Encoding, EncodingVersion, Span};
use recipe_core::{ModelVersion, SpecialToken};
use recipe_protocol::chat::ChatCompletionRequest;
use recipe_protocol::messages::MessagesRequest;
use recipe_protocol::responses::ResponsesRequest;
use recipe_protocol::{ConversationRequest, ConversionOptions};

const IMG: &str = "<｜image｜>";
const URL: &str = "https://example.com/a.png";

fn convert(format: &str, body: Value) -> ConversationRequest {
    let options = ConversionOptions::default();
    match format {
        "chat" => ChatCompletionRequest::from_value(body)
            .unwrap()
            .convert(&options),
        "responses" => ResponsesRequest::from_value(body)
            .unwrap()
            .convert(&options),
        _ => MessagesRequest::from_value(body).unwrap().convert(&options),
    }
    .unwrap()
}

/// `(image placeholders rendered, text spans that spell the image token)`.
fn placeholder_counts(cr: &ConversationRequest) -> (usize, usize) {
    let enc = Encoding::new(EncodingVersion::for_model(cr.model_version));
    let spans = enc.render(&cr.conversation).spans;
    let specials = spans
        .iter()
        .filter(|s| matches!(s, Span::Special(SpecialToken::Image, _)))
        .count();
    let typed = spans
        .iter()
        .map(|s| match s {
            Span::Text(t) => t.matches(IMG).count(),
            Span::Special(..) => 0,
        })
        .sum();
    (specials, typed)
}

fn typed() -> String {
    format!("look: {IMG} fake")
}

#[test]
fn chat_user_system_and_tool_images_are_placeholders_and_typed_spellings_are_text() {
    let img = json!({"type": "image_url", "image_url": {"url": URL}});
    let text = json!({"type": "text", "text": typed()});
    let body = json!({
        "model": "DeepSeek-V4.1-Flash",
        "messages": [
            {"role": "system", "content": [text, img]},
            {"role": "user", "content": [img, text, img]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": [text, img]},
            {"role": "user", "content": format!("only typed {IMG}{IMG}")},
        ],
        "tools": [{"type": "function", "function": {"name": "f"}}],
    });
    let cr = convert("chat", body);
    assert_eq!(cr.model_version, ModelVersion::DeepseekV41Flash);
    assert_eq!(placeholder_counts(&cr), (4, 5));
}

#[test]
fn chat_regression_first_placeholder_is_the_image_part() {
    let body = json!({
        "model": "DeepSeek-V4.1-Flash",
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": typed()}, {"type": "image_url", "image_url": {"url": URL}}]}],
        "thinking": {"type": "disabled"},
    });
    let cr = convert("chat", body);
    let spans = Encoding::new(EncodingVersion::V41)
        .render(&cr.conversation)
        .spans;
    // BOS, User, text (with the typed spelling and the blank line), image, Assistant, </think>.
    assert_eq!(spans[2], Span::Text(format!("{}\n\n", typed())));
    assert_eq!(spans[3], Span::Special(SpecialToken::Image, IMG.to_owned()));
}

#[test]
fn responses_and_messages_images_are_placeholders() {
    let rtext = json!({"type": "input_text", "text": typed()});
    let rimg = json!({"type": "input_image", "image_url": URL});
    let body = json!({
        "model": "DeepSeek-V4.1-Flash",
        "instructions": format!("be {IMG} brief"),
        "input": [
            {"role": "developer", "content": [rtext, rimg]},
            {"role": "user", "content": [rimg, rtext]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": [rtext, rimg]},
        ],
        "tools": [{"type": "function", "name": "f"}],
    });
    assert_eq!(placeholder_counts(&convert("responses", body)), (3, 4));

    let mtext = json!({"type": "text", "text": typed()});
    let mimg = json!({"type": "image", "source": {"type": "url", "url": URL}});
    let body = json!({
        "model": "DeepSeek-V4.1-Flash",
        "max_tokens": 10,
        "system": format!("sys {IMG}"),
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": [mtext, mimg]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [mtext, mimg]}]},
            {"role": "assistant", "content": "a"},
            {"role": "system", "content": [mtext, mimg]},
            {"role": "user", "content": "u"},
        ],
    });
    assert_eq!(placeholder_counts(&convert("messages", body)), (3, 4));
}

#[test]
fn v4_shows_no_placeholder_and_keeps_typed_spellings_as_text() {
    let body = json!({
        "model": "DeepSeek-V4-Pro",
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": typed()}, {"type": "image_url", "image_url": {"url": URL}}]}],
    });
    let cr = convert("chat", body);
    assert_eq!(placeholder_counts(&cr), (0, 1));
    assert!(cr.conversation.messages[0]
        .content()
        .ends_with("[Unsupported Image]"));
}
