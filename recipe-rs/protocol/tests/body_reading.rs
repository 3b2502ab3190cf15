//! Reading a Chat Completions body from JSON text types its message list while reading it
//! (`body::parse_json_preparing`); the result, or the error, must be exactly what a value parse
//! followed by typing gives, whatever the body holds.

use proptest::prelude::*;
use serde_json::Value;

use recipe_protocol::body::parse_json;
use recipe_protocol::chat::ChatCompletionRequest;

/// Both readings, as comparable text.
fn both(text: &str) -> (String, String) {
    let direct = format!("{:?}", ChatCompletionRequest::from_slice(text.as_bytes()));
    let via_value = format!(
        "{:?}",
        parse_json(text.as_bytes()).and_then(ChatCompletionRequest::from_value)
    );
    (direct, via_value)
}

fn assert_same(text: &str) {
    let (direct, via_value) = both(text);
    assert_eq!(direct, via_value, "body: {text}");
}

#[test]
fn message_lists_read_while_parsing_match_a_value_parse() {
    for body in [
        r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#,
        r#"{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": null}], "model": "m"}"#,
        // An element that does not type, before and after other errors in member order.
        r#"{"model": "m", "messages": [{"role": "user", "content": "a"}, {"role": "bogus"}]}"#,
        r#"{"model": 5, "messages": [{"role": "bogus"}]}"#,
        r#"{"messages": [{"role": "bogus"}], "model": 5}"#,
        r#"{"messages": [{"role": "user"}, {"role": "bogus"}], "model": "m"}"#,
        // A JSON error after an element that does not type is still the JSON error.
        r#"{"model": "m", "messages": [{"role": "bogus"}, {"role": "user", "content": 1e999}]}"#,
        r#"{"model": "m", "messages": [{"role": "bogus"}, ]}"#,
        // Not an array; repeated keys (the last value wins, in the first one's place).
        r#"{"model": "m", "messages": "x"}"#,
        r#"{"model": "m", "messages": null}"#,
        r#"{"model": "m", "messages": {"role": "user"}}"#,
        r#"{"model": "m", "messages": [{"role": "bogus"}], "messages": [{"role": "user", "content": "ok"}]}"#,
        r#"{"model": "m", "messages": [{"role": "user", "content": "ok"}], "messages": 5}"#,
        r#"{"model": "m", "messages": 5, "messages": [{"role": "user", "content": "ok"}]}"#,
        r#"{"model": "m", "messages": [], "stop": 5}"#,
        r#"{"model": "m"}"#,
        r#"[{"role": "user", "content": "hi"}]"#,
        r#"{"model": "m", "messages": [{"role": "user", "content": "a", "content": "b"}]}"#,
    ] {
        assert_same(body);
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        prop::sample::select(vec![
            "user",
            "assistant",
            "system",
            "tool",
            "x",
            "text",
            "hi"
        ])
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(4, 40, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop::sample::select(vec![
                        "role",
                        "content",
                        "model",
                        "messages",
                        "tool_calls",
                        "type",
                        "text",
                        "name",
                        "id",
                        "function",
                        "arguments",
                        "tool_call_id",
                        "prefix",
                    ]),
                    inner
                ),
                0..4
            )
            .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random message lists (mostly broken) read the same both ways.
    #[test]
    fn random_message_lists_read_the_same_both_ways(
        messages in prop::collection::vec(json_value(), 0..5),
        model_first in any::<bool>(),
    ) {
        let list = Value::Array(messages).to_string();
        let text = if model_first {
            format!(r#"{{"model": "m", "messages": {list}}}"#)
        } else {
            format!(r#"{{"messages": {list}, "model": "m"}}"#)
        };
        let (direct, via_value) = both(&text);
        prop_assert_eq!(direct, via_value);
    }
}
