//! Property tests: arbitrary Unicode, mixed with every added-token spelling of the real
//! tokenizer, in every text field (tool names included) never yields a control token outside the
//! template's positions, and decoding the token IDs gives back the rendered prompt.

mod common;

use common::*;
use proptest::prelude::*;
use recipe_core::conversation::*;
use recipe_core::encoding::{Encoding, EncodingVersion, Span};
use recipe_core::Tokenizer;
use std::sync::OnceLock;

/// Every token of the real tokenizer's added vocabulary (not a hand list).
fn added_spellings() -> &'static Vec<String> {
    static S: OnceLock<Vec<String>> = OnceLock::new();
    S.get_or_init(|| {
        let v: serde_json::Value =
            serde_json::from_str(&tokenizer_json()).expect("tokenizer.json is JSON");
        v["added_tokens"]
            .as_array()
            .expect("added_tokens")
            .iter()
            .map(|t| t["content"].as_str().expect("content").to_owned())
            .collect()
    })
}

fn toks() -> &'static (Tokenizer, Tokenizer) {
    static T: OnceLock<(Tokenizer, Tokenizer)> = OnceLock::new();
    T.get_or_init(|| {
        let json = tokenizer_json();
        (stock_tokenizer(&json), system_tokenizer(&json))
    })
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            any::<String>().prop_map(|s| s.chars().take(10).collect()),
            prop::sample::select(added_spellings().clone())
        ],
        0..4,
    )
    .prop_map(|v| v.concat())
}

fn conversation() -> impl Strategy<Value = Conversation> {
    (
        prop::collection::vec(text(), 12),
        any::<bool>(),
        prop::sample::select(vec![
            ToolChoice::Auto,
            ToolChoice::None,
            ToolChoice::Required,
        ]),
        any::<bool>(),
    )
        .prop_map(|(t, thinking, tool_choice, prefix)| {
            let calls = vec![ToolCall {
                id: t[0].clone(),
                name: t[1].clone(),
                arguments: serde_json::json!({ t[2].clone(): t[3].clone() }).to_string(),
            }];
            Conversation {
                messages: vec![
                    Message::System(SystemMessage::new(t[4].clone(), vec![], "<｜image｜>")),
                    Message::User(UserMessage::new(t[5].clone(), vec![], "<｜image｜>")),
                    Message::Assistant(AssistantMessage {
                        content: t[6].clone(),
                        reasoning_content: Some(t[7].clone()),
                        tool_calls: Some(calls),
                        prefix: false,
                    }),
                    Message::Tool(ToolMessage::new(
                        t[8].clone(),
                        Some(t[0].clone()),
                        vec![],
                        "<｜image｜>",
                    )),
                    Message::LatestReminder(LatestReminderMessage {
                        content: t[9].clone(),
                    }),
                    Message::Assistant(AssistantMessage {
                        content: t[10].clone(),
                        reasoning_content: Some(t[11].clone()),
                        tool_calls: None,
                        prefix,
                    }),
                ],
                thinking_mode: thinking,
                tools: vec![ToolDefinition {
                    name: t[1].clone(),
                    description: Some(t[2].clone()),
                    parameters: serde_json::json!({"p": t[3].clone()}),
                    strict: None,
                    defer_loading: false,
                }],
                tool_choice,
                reasoning_effort: None,
                response_format: ResponseFormat::JsonSchema(serde_json::json!({"k": t[4].clone()})),
            }
        })
}

fn check(
    version: EncodingVersion,
    tok: &Tokenizer,
    conv: &Conversation,
) -> Result<(), TestCaseError> {
    let enc = Encoding::new(version).with_tokenizer(tok.clone());
    let rendered = enc.render(conv);
    let ids = enc
        .encode(conv)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(tok.decode(&ids).unwrap(), rendered.prompt());
    // Added-vocabulary IDs in the output are exactly the template's tokens, in order.
    let want: Vec<u32> = rendered
        .spans
        .iter()
        .filter_map(|s| match s {
            Span::Special(_, sp) if !sp.is_empty() => tok.added_token_id(sp),
            _ => None,
        })
        .collect();
    let got: Vec<u32> = ids
        .iter()
        .copied()
        .filter(|&i| tok.added_token(i).is_some())
        .collect();
    prop_assert_eq!(got, want);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn v4_control_tokens_only_at_template_positions(conv in conversation()) {
        check(EncodingVersion::V4, &toks().0, &conv)?;
    }

    #[test]
    fn v41_control_tokens_only_at_template_positions(conv in conversation()) {
        check(EncodingVersion::V41, &toks().1, &conv)?;
    }
}
