//! Conversions must match the outcomes recorded from the official package
//! (`tests/conformance/conversion/cases.json`, made by `generate_conversion.py`).

use std::path::PathBuf;

use serde_json::{json, Value};

use recipe_core::encoding::{Encoding, EncodingVersion};
use recipe_core::ModelVersion;
use recipe_protocol::chat::ChatCompletionRequest;
use recipe_protocol::messages::MessagesRequest;
use recipe_protocol::responses::ResponsesRequest;
use recipe_protocol::{
    ConversationRequest, ConversionError, ConversionOptions, ReasoningContentBehavior,
    RequestError, WebSearchBehavior,
};

const RESOLVE_PAIRS: [(u32, u32); 6] = [
    (10, 1_000_000),
    (100, 100),
    (101, 100),
    (50, 60),
    (0, 0),
    (1000, 200_000),
];

/// The recorded cases; `CONVERSION_CASES` may point at another file of the same shape.
fn fixtures() -> Vec<Value> {
    let path = match std::env::var_os("CONVERSION_CASES") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/conformance/conversion/cases.json"),
    };
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str::<Value>(&text)
        .expect("fixture JSON")
        .as_array()
        .expect("a list")
        .clone()
}

fn version(name: &str) -> ModelVersion {
    match name {
        "DeepseekV4Pro" => ModelVersion::DeepseekV4Pro,
        _ => ModelVersion::DeepseekV41Flash,
    }
}

fn behavior(name: &str) -> WebSearchBehavior {
    if name == "Reject" {
        WebSearchBehavior::Reject
    } else {
        WebSearchBehavior::Drop
    }
}

fn options(spec: &Value) -> ConversionOptions {
    let mut o = ConversionOptions::default();
    if let Some(b) = spec.get("default_thinking_mode").and_then(Value::as_bool) {
        o.default_thinking_mode = b;
    }
    if spec
        .get("reject_missing_reasoning")
        .and_then(Value::as_bool)
        == Some(true)
    {
        o.reasoning_content_behavior = ReasoningContentBehavior::Reject;
    }
    if let Some(b) = spec.get("responses_web_search").and_then(Value::as_str) {
        o.responses_web_search = behavior(b);
    }
    if let Some(b) = spec.get("messages_web_search").and_then(Value::as_str) {
        o.messages_web_search = behavior(b);
    }
    if let Some(n) = spec.get("thinking_bound").and_then(Value::as_u64) {
        o.thinking_max_tokens_upper_bound = n as u32;
    }
    if let Some(n) = spec.get("non_thinking_bound").and_then(Value::as_u64) {
        o.non_thinking_max_tokens_upper_bound = n as u32;
    }
    for alias in spec
        .get("aliases")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
    {
        let name = alias[0].as_str().unwrap_or_default().to_owned();
        o = o.with_model_alias(name, version(alias[1].as_str().unwrap_or_default()));
    }
    o
}

fn error_json(e: &ConversionError) -> Value {
    serde_json::from_str(&e.body()).expect("error body is JSON")
}

fn f32_json(v: Option<f32>) -> Value {
    v.map(|x| json!(f64::from(x))).unwrap_or(Value::Null)
}

/// The canonical JSON of a conversation, less what the official package does not expose (each
/// message's `image_token` and placeholder offsets), so that it compares with the recorded form.
fn official_view(conv: &recipe_core::Conversation) -> Value {
    let mut v = serde_json::to_value(conv).expect("a conversation serializes");
    for m in v["messages"].as_array_mut().into_iter().flatten() {
        if let Some(m) = m.as_object_mut() {
            m.remove("image_token");
            m.remove("placeholders");
        }
    }
    v
}

fn success_json(cr: &ConversationRequest) -> Value {
    let io = &cr.inference_options;
    let po = &cr.parsing_options;
    let resolved: Vec<Value> = RESOLVE_PAIRS
        .iter()
        .map(|&(p, c)| match cr.resolve_max_tokens(p, c) {
            Ok(n) => json!([p, c, n]),
            Err(e) => json!([p, c, error_json(&e)]),
        })
        .collect();
    json!({
        "outcome": "ok",
        "conversation": official_view(&cr.conversation),
        "inference_options": {
            "max_tokens": io.max_tokens,
            "temperature": f32_json(io.temperature),
            "top_p": f32_json(io.top_p),
            "logprobs": io.logprobs,
            "top_logprobs": io.top_logprobs,
            "seed": io.seed,
            "output_constraint": io.output_constraint.as_ref().map(|c| json!({"kind": c.kind.as_str(), "schema": c.schema})),
        },
        "parsing_options": {
            "parse_tool_calls": po.parse_tool_calls,
            "starts_in_tool_calls": po.starts_in_tool_calls,
            "parse_json_output": po.parse_json_output,
            "thinking_initial_stage": po.thinking_initial_stage.map(|s| s.name()),
            "stop_sequences": po.stop_sequences,
        },
        "model_version": cr.model_version.name(),
        "stream": cr.stream,
        "resolve_max_tokens": resolved,
    })
}

/// Run one case the way the Python recorder does and describe the outcome in the same shape.
fn run_case(case: &Value) -> Value {
    let body = serde_json::to_vec(&case["body"]).expect("body serialises");
    let opts = options(&case["options"]);
    let ctor_err = |e: RequestError| json!({"outcome": "constructor_error", "error_class": "ValueError", "message": e.to_string()});
    let mut out = serde_json::Map::new();
    let result: Result<ConversationRequest, ConversionError> = match case["format"].as_str() {
        Some("chat") => match ChatCompletionRequest::from_slice(&body) {
            Err(e) => return ctor_err(e),
            Ok(r) => {
                out.insert("model".into(), json!(r.model));
                r.convert(&opts)
            }
        },
        Some("responses") => match ResponsesRequest::from_slice(&body) {
            Err(e) => return ctor_err(e),
            Ok(r) => {
                out.insert("model".into(), json!(r.model));
                let e = r.echo();
                out.insert(
                    "echo".into(),
                    json!({"instructions": e.instructions, "max_output_tokens": e.max_output_tokens,
                           "temperature": e.temperature, "top_p": e.top_p, "top_logprobs": e.top_logprobs,
                           "user": e.user}),
                );
                let map = match r.namespace_tool_map(&opts) {
                    Ok(m) => json!(m
                        .into_iter()
                        .map(|(k, (a, b))| (k, json!([a, b])))
                        .collect::<serde_json::Map<_, _>>()),
                    Err(e) => json!({"error": e.body()}),
                };
                out.insert("namespace_tool_map".into(), map);
                r.convert(&opts)
            }
        },
        Some("messages") => match MessagesRequest::from_slice(&body) {
            Err(e) => return ctor_err(e),
            Ok(r) => {
                out.insert("model".into(), json!(r.model));
                r.convert(&opts)
            }
        },
        other => panic!("unknown format {other:?}"),
    };
    match result {
        Ok(cr) => {
            out.insert(
                "consumed".into(),
                json!("protocol request has been consumed"),
            );
            if let Value::Object(m) = success_json(&cr) {
                out.extend(m);
            }
            if case["render"].as_bool() == Some(true) {
                out.insert("rendered".into(), rendered_json(&cr));
            }
        }
        Err(e) => {
            out.insert("outcome".into(), json!("conversion_error"));
            out.insert("error_class".into(), json!("ConversionError"));
            out.insert("status_code".into(), json!(e.status_code));
            out.insert("body".into(), error_json(&e));
        }
    }
    Value::Object(out)
}

/// The rendered prompt of a converted request (token IDs are compared by the Python tests, which
/// have the tokenizer).
fn rendered_json(cr: &ConversationRequest) -> Value {
    let r = Encoding::new(EncodingVersion::for_model(cr.model_version)).render(&cr.conversation);
    let prompt = r.prompt();
    let chars: Vec<char> = prompt.chars().collect();
    let ranges = r.special_char_ranges();
    let special: Vec<String> = ranges
        .iter()
        .map(|&(a, b)| chars[a..b].iter().collect())
        .collect();
    json!({"prompt": prompt, "special": special, "special_ranges": ranges})
}

/// The recorded outcome as this test compares it: without token IDs, without the review-only
/// `prompt_marked` (derived from the prompt when the fixture is written), and without the call
/// ID in the one message where the official package names a random call
/// (docs/conversion-deviations.md).
fn comparable(expected: &Value) -> Value {
    let mut v = expected.clone();
    if let Some(r) = v.get_mut("rendered").and_then(Value::as_object_mut) {
        r.remove("tokens");
        r.remove("prompt_marked");
    }
    normalise_unanswered(&v)
}

fn normalise_unanswered(v: &Value) -> Value {
    let text = v.to_string();
    let marker = "No tool output found for tool call ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find(marker) {
        out.push_str(&rest[..at + marker.len()]);
        rest = &rest[at + marker.len()..];
        let end = rest.find('.').unwrap_or(rest.len());
        out.push_str("<id>");
        rest = &rest[end..];
    }
    out.push_str(rest);
    serde_json::from_str(&out).expect("still JSON")
}

/// Lines of `a` and `b` (pretty JSON) that differ, for a readable failure.
fn diff(a: &Value, b: &Value) -> String {
    let a = serde_json::to_string_pretty(a).unwrap_or_default();
    let b = serde_json::to_string_pretty(b).unwrap_or_default();
    let (al, bl): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut out = String::new();
    for i in 0..al.len().max(bl.len()) {
        let (x, y) = (
            al.get(i).copied().unwrap_or(""),
            bl.get(i).copied().unwrap_or(""),
        );
        if x != y {
            out.push_str(&format!(
                "  line {i}:\n    expected: {x}\n    actual:   {y}\n"
            ));
            if out.len() > 2000 {
                break;
            }
        }
    }
    out
}

#[test]
fn conversions_match_the_official_package() {
    let cases = fixtures();
    assert!(cases.len() >= 200, "expected at least 200 fixture cases");
    let mut failures = Vec::new();
    let mut actuals = Vec::new();
    for case in &cases {
        let expected = &comparable(&case["expected"]);
        let actual = normalise_unanswered(&run_case(case));
        if std::env::var_os("CONVERSION_ACTUAL").is_some() {
            actuals.push(json!({"id": case["id"], "actual": actual}));
        }
        if &actual != expected {
            failures.push(format!(
                "{} ({}):\n{}",
                case["id"],
                case["format"],
                diff(expected, &actual)
            ));
        }
    }
    if let Some(path) = std::env::var_os("CONVERSION_ACTUAL") {
        let _ = std::fs::write(path, Value::Array(actuals).to_string());
    }
    if !failures.is_empty() {
        let n = failures.len();
        if let Some(report) = std::env::var_os("CONVERSION_REPORT") {
            let _ = std::fs::write(report, failures.join("\n"));
        }
        failures.truncate(25);
        panic!(
            "{n} of {} cases differ:\n{}",
            cases.len(),
            failures.join("\n")
        );
    }
}
