//! Any JSON body gives a request error, a conversion error or a conversion: never a panic.

use proptest::prelude::*;
use serde_json::{Map, Value};

use recipe_protocol::chat::ChatCompletionRequest;
use recipe_protocol::messages::MessagesRequest;
use recipe_protocol::responses::ResponsesRequest;

use recipe_protocol::{ConversionOptions, WebSearchBehavior};

const KEYS: &[&str] = &[
    "model",
    "messages",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "role",
    "content",
    "type",
    "text",
    "function",
    "name",
    "parameters",
    "input_schema",
    "thinking",
    "reasoning",
    "temperature",
    "top_p",
    "max_tokens",
    "stop",
    "response_format",
    "tool_calls",
    "system",
    "properties",
    "strict",
    "items",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        prop_oneof![
            Just("DeepSeek-V4-Pro".to_owned()),
            Just("user".to_owned()),
            Just("function".to_owned()),
            "[a-z]{0,6}"
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

fn run_all(body: &Value) {
    let options = ConversionOptions::default();
    if let Ok(r) = ChatCompletionRequest::from_value(body.clone()) {
        let _ = r.convert(&options);
    }
    if let Ok(r) = ResponsesRequest::from_value(body.clone()) {
        let _ = r.namespace_tool_map(&options);
        let _ = r.echo();
        let _ = r.convert(&options);
    }
    if let Ok(r) = MessagesRequest::from_value(body.clone()) {
        let _ = r.convert(&options);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_bodies_never_panic(body in json_value()) {
        run_all(&body);
        let mut with_model = body.clone();
        if let Value::Object(m) = &mut with_model {
            m.insert("model".into(), Value::String("DeepSeek-V4.1-Flash".into()));
        }
        run_all(&with_model);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = ChatCompletionRequest::from_slice(&bytes);
        let _ = ResponsesRequest::from_slice(&bytes);
        let _ = MessagesRequest::from_slice(&bytes);
    }
}

#[test]
fn deep_nesting_is_a_request_error() {
    let deep = format!(
        "{{\"model\":\"x\",\"messages\":{}{}}}",
        "[".repeat(50_000),
        "]".repeat(50_000)
    );
    let err = ChatCompletionRequest::from_slice(deep.as_bytes()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid JSON request: recursion limit exceeded"),
        "{err}"
    );
}

#[test]
fn resolve_max_tokens_handles_extremes() {
    let body = br#"{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"x"}],"max_tokens":393216}"#;
    let req = ChatCompletionRequest::from_slice(body)
        .unwrap()
        .convert(&ConversionOptions::default())
        .unwrap();
    assert!(req.resolve_max_tokens(u32::MAX, u32::MAX).is_err());
    assert_eq!(req.resolve_max_tokens(0, u32::MAX).unwrap(), 393216);
}

/// With server tools refused, the web search tool is an error but the preview tool is left out of
/// the conversation (the official package's behaviour, found by the conversion differential).
#[test]
fn refused_web_search_spares_the_preview_tool() {
    let options = ConversionOptions {
        responses_web_search: WebSearchBehavior::Reject,
        ..ConversionOptions::default()
    };
    let body = |tool: &str| serde_json::json!({"model": "DeepSeek-V4-Pro", "input": "hi", "tools": [{"type": tool}]});
    for refused in ["web_search", "web_search_2025_08_26"] {
        let converted = ResponsesRequest::from_value(body(refused))
            .unwrap()
            .convert(&options);
        assert!(converted.is_err(), "{refused}");
    }
    for dropped in ["web_search_preview", "web_search_preview_2025_03_11"] {
        let kept = ResponsesRequest::from_value(body(dropped))
            .unwrap()
            .convert(&options)
            .expect("the preview tool is dropped, not refused");
        assert!(kept.conversation.tools.is_empty(), "{dropped}");
    }
}
