//! The hand-written JSON of the per-token items (Chat chunks, Messages deltas) is byte for byte
//! what serde_json writes for their `Serialize` form, whatever the strings hold.

use std::sync::Arc;

use proptest::prelude::*;
use recipe_stream::generator::chat::{ChatChunk, ChatDelta, ChatMeta};
use recipe_stream::generator::messages::{BlockDelta, MessagesEvent};
use recipe_stream::input::{TokenLogprob, TopLogprob};
use recipe_stream::{StreamItem, Usage, WireJson};

/// Strings with what JSON must escape: quotes, backslashes, every control character, DEL,
/// non-ASCII and control-token spellings.
fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            (0u32..0x80).prop_map(|c| char::from_u32(c).unwrap().to_string()),
            Just("\"".to_string()),
            Just("\\".to_string()),
            Just("é世🦀\u{2028}".to_string()),
            Just("<｜DSML｜".to_string()),
        ],
        0..12,
    )
    .prop_map(|v| v.concat())
}

fn delta() -> impl Strategy<Value = ChatDelta> {
    prop_oneof![
        any::<bool>().prop_map(|reasoning| ChatDelta::Open { reasoning }),
        text().prop_map(ChatDelta::Reasoning),
        text().prop_map(ChatDelta::Content),
        (0usize..12, text(), text()).prop_map(|(index, id, name)| ChatDelta::ToolStart {
            index,
            id,
            name
        }),
        (0usize..12, text())
            .prop_map(|(index, arguments)| ChatDelta::ToolArgs { index, arguments }),
        Just(ChatDelta::Final),
    ]
}

fn logprobs() -> impl Strategy<Value = Vec<TokenLogprob>> {
    prop::collection::vec(
        (text(), -30.0f32..0.0).prop_map(|(token, logprob)| TokenLogprob {
            bytes: token.clone().into_bytes(),
            top_logprobs: vec![TopLogprob {
                token: token.clone(),
                logprob,
                bytes: token.clone().into_bytes(),
            }],
            token,
            logprob,
        }),
        0..3,
    )
}

fn usage() -> impl Strategy<Value = Option<Usage>> {
    prop::option::of(
        (
            0u64..5000,
            0u64..5000,
            0u64..5000,
            prop::option::of(0u64..5000),
        )
            .prop_map(
                |(prompt_tokens, prompt_cache_hit_tokens, completion_tokens, reasoning_tokens)| {
                    Usage {
                        prompt_tokens,
                        prompt_cache_hit_tokens,
                        completion_tokens,
                        reasoning_tokens,
                    }
                },
            ),
    )
}

fn chat_chunk() -> impl Strategy<Value = ChatChunk> {
    (
        (
            text(),
            text(),
            any::<u64>(),
            prop::option::of(text()),
            any::<bool>(),
        ),
        any::<bool>(),
        delta(),
        logprobs(),
        prop::option::of(prop_oneof![
            Just("stop"),
            Just("tool_calls"),
            Just("length")
        ]),
        usage(),
    )
        .prop_map(
            |(
                (id, model, created, fp, null_usage),
                thinking,
                delta,
                logprobs,
                finish_reason,
                usage,
            )| ChatChunk {
                meta: Arc::new(ChatMeta::new(id, model, created, fp, null_usage)),
                thinking,
                delta,
                logprobs,
                finish_reason,
                usage,
            },
        )
}

fn messages_event() -> impl Strategy<Value = MessagesEvent> {
    (
        0usize..100_000,
        text(),
        prop_oneof![Just(0u8), Just(1), Just(2), Just(3)],
    )
        .prop_map(|(index, t, kind)| MessagesEvent::ContentBlockDelta {
            index,
            delta: match kind {
                0 => BlockDelta::TextDelta { text: t },
                1 => BlockDelta::ThinkingDelta { thinking: t },
                2 => BlockDelta::InputJsonDelta { partial_json: t },
                _ => BlockDelta::SignatureDelta { signature: t },
            },
        })
}

proptest! {
    #[test]
    fn chat_chunks_write_what_serde_writes(chunk in chat_chunk()) {
        let want = serde_json::to_string(&chunk).unwrap();
        prop_assert_eq!(chunk.to_json(), want.clone());
        prop_assert_eq!(StreamItem::Chat(chunk).to_json(), want);
    }

    #[test]
    fn messages_deltas_write_what_serde_writes(event in messages_event()) {
        let want = serde_json::to_string(&event).unwrap();
        prop_assert_eq!(event.to_json(), want.clone());
        prop_assert_eq!(StreamItem::Messages(event).to_json(), want);
    }
}
