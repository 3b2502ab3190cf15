//! Replays the committed official-package fixtures (`tests/conformance/stream/*.json`) through
//! the Rust stream processor and requires identical chunks, errors and accumulated responses.

use std::path::PathBuf;

use recipe_core::{
    ParsingOptions, ResponsesEcho, SpecialToken, SpecialTokens, ThinkingInitialStage, Tokenizer,
};
use recipe_stream::*;
use serde_json::Value;

mod common;
use common::tokenizer;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn is_call_id(s: &str) -> Option<usize> {
    let rest = s.strip_prefix("call_")?;
    let b = rest.as_bytes();
    if b.len() < 3 || !b[0].is_ascii_digit() || !b[1].is_ascii_digit() || b[2] != b'_' {
        return None;
    }
    let mut prefix = 8;
    let mut tail = &rest[3..];
    if let Some(t) = tail.strip_prefix("ET_") {
        prefix += 3;
        tail = t;
    }
    (tail.len() == 24 && tail.bytes().all(|c| c.is_ascii_alphanumeric())).then_some(prefix)
}

pub fn normalise(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if matches!(k.as_str(), "created" | "created_at" | "completed_at") && x.is_u64() {
                    *x = Value::from(0);
                } else {
                    normalise(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(normalise),
        Value::String(s) => {
            if let Some(p) = is_call_id(s) {
                *s = format!("{}<random>", &s[..p]);
            }
        }
        _ => {}
    }
}

fn stage(v: &Value) -> Option<ThinkingInitialStage> {
    match v.as_str()? {
        "ReasoningStart" => Some(ThinkingInitialStage::ReasoningStart),
        "ReasoningContinuation" => Some(ThinkingInitialStage::ReasoningContinuation),
        "ContentContinuation" => Some(ThinkingInitialStage::ContentContinuation),
        other => panic!("unknown stage {other}"),
    }
}

fn options(v: &Value) -> ParsingOptions {
    let mut o = ParsingOptions::default();
    if let Some(b) = v.get("parse_tool_calls").and_then(Value::as_bool) {
        o.parse_tool_calls = b;
    }
    if let Some(b) = v.get("starts_in_tool_calls").and_then(Value::as_bool) {
        o.starts_in_tool_calls = b;
    }
    if let Some(b) = v.get("parse_json_output").and_then(Value::as_bool) {
        o.parse_json_output = b;
    }
    o.thinking_initial_stage = v.get("thinking_initial_stage").and_then(stage);
    if let Some(Value::Array(a)) = v.get("stop_sequences") {
        o.stop_sequences = a
            .iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect();
    }
    if let Some(Value::Object(m)) = v.get("special_tokens") {
        let mut st = SpecialTokens::default();
        for (k, s) in m {
            let kind = match k.as_str() {
                "thinking_end" => SpecialToken::ThinkingEnd,
                "thinking_start" => SpecialToken::ThinkingStart,
                "dsml" => SpecialToken::Dsml,
                "eos" => SpecialToken::Eos,
                other => panic!("unsupported override {other}"),
            };
            st.set(kind, s.as_str().unwrap_or(""));
        }
        o.special_tokens = st;
    }
    o
}

pub fn echo(v: &Value) -> ResponsesEcho {
    recipe_stream::generator::echo_from_json(v)
}

fn chunk(v: &Value) -> InferenceChunk {
    if let Some(r) = v.get("ready") {
        return InferenceChunk::Ready {
            prompt_usage: Some(PromptUsage {
                prompt_tokens: r["prompt_tokens"].as_u64().unwrap_or(0),
                prompt_cache_hit_tokens: r["prompt_cache_hit_tokens"].as_u64().unwrap_or(0),
            }),
            system_fingerprint: r
                .get("system_fingerprint")
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
    }
    if let Some(t) = v.get("text") {
        return InferenceChunk::Text {
            content: t.as_str().unwrap_or("").to_owned(),
            token_count: v.get("token_count").and_then(Value::as_u64).unwrap_or(0),
        };
    }
    if let Some(Value::Array(ids)) = v.get("tokens") {
        let logprobs = v.get("logprobs").and_then(Value::as_array).map(|a| {
            a.iter()
                .map(|e| {
                    let top = e[1]
                        .as_array()
                        .map(|t| {
                            t.iter()
                                .map(|p| {
                                    (
                                        p[0].as_u64().unwrap_or(0) as u32,
                                        p[1].as_f64().unwrap_or(0.0) as f32,
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    (e[0].as_f64().unwrap_or(0.0) as f32, top)
                })
                .collect()
        });
        return InferenceChunk::Tokens {
            token_ids: ids.iter().map(|i| i.as_u64().unwrap_or(0) as u32).collect(),
            logprobs,
        };
    }
    let reason = match v["finish"].as_str() {
        Some("Stop") => InferenceFinishReason::Stop,
        Some("Length") => InferenceFinishReason::Length,
        _ => InferenceFinishReason::ContentFilter,
    };
    InferenceChunk::Finish(reason)
}

/// Run one fixture stream; returns (pushes, error, finished, response).
pub fn run_case(case: &Value, tok: &Tokenizer) -> (Vec<Vec<Value>>, Option<String>, bool, Value) {
    let g = &case["generator"];
    let id = g["id"].as_str().unwrap_or("").to_owned();
    let model = g["model"].as_str().unwrap_or("").to_owned();
    let thinking = g["thinking_mode"].as_bool().unwrap_or(false);
    let config = GeneratorConfig {
        thinking_mode: thinking,
        starts_in_reasoning: stage(&g["stage"]).is_some_and(|s| s.starts_in_reasoning()),
    };
    let fmt = g["format"].as_str().unwrap_or("");
    let generator = match fmt {
        "chat" => Generator::Chat(ChatGenerator::new(&id, &model, config)),
        "responses" => {
            let mut r = ResponsesGenerator::new(&id, &model, config);
            if let Some(e) = g.get("echo") {
                r = r.with_echo(echo(e));
            }
            if let Some(Value::Object(m)) = g.get("namespace_map") {
                let map = m
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            (
                                v[0].as_str().unwrap_or("").to_owned(),
                                v[1].as_str().unwrap_or("").to_owned(),
                            ),
                        )
                    })
                    .collect();
                r = r.with_namespace_tool_map(map);
            }
            Generator::Responses(r)
        }
        _ => {
            let mut m = MessagesGenerator::new(&id, &model, thinking);
            if let Some(sig) = g.get("signature").and_then(Value::as_str) {
                m = m.with_signature(sig);
            }
            Generator::Messages(m)
        }
    };
    let opts = options(&case["options"]);
    let mut sp = StreamProcessor::new(
        generator,
        &opts,
        case["tokenizer"]
            .as_bool()
            .unwrap_or(false)
            .then(|| tok.clone()),
    );
    let ready = case["input"]
        .as_array()
        .and_then(|a| a.iter().find_map(|c| c.get("ready")));
    let pt = ready.map_or(0, |r| r["prompt_tokens"].as_u64().unwrap_or(0));
    let ph = ready.map_or(0, |r| r["prompt_cache_hit_tokens"].as_u64().unwrap_or(0));
    let mut chat = ChatCompletionResponse::new(id.clone(), model.clone(), 0, pt, ph);
    let mut resp = ResponsesResponse::new(id.clone(), model.clone(), 0, pt, ph);
    let mut msgs = MessagesResponse::new(id.clone(), model.clone(), 0, pt, ph);
    let mut pushes = Vec::new();
    let mut error = None;
    let mut items = Vec::new();
    let inputs = case["input"].as_array().cloned().unwrap_or_default();
    // Every push, then `finish`, until one fails; the failure stops the stream.
    for step in inputs.iter().map(Some).chain(std::iter::once(None)) {
        let result = match step {
            Some(c) => sp.push(chunk(c)),
            None => sp.finish(),
        };
        match result {
            Ok(out) => {
                pushes.push(
                    out.iter()
                        .map(|i| {
                            let mut v = i.to_value();
                            normalise(&mut v);
                            v
                        })
                        .collect(),
                );
                items.extend(out);
            }
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    for i in &items {
        match i {
            StreamItem::Chat(c) => chat.accumulate(c),
            StreamItem::Responses(e) => resp.accumulate(e),
            StreamItem::Messages(e) => msgs.accumulate(e),
        }
    }
    let mut response = match fmt {
        "chat" => chat.to_value(),
        "responses" => resp.to_value(),
        _ => msgs.to_value(),
    };
    normalise(&mut response);
    (pushes, error, sp.finished(), response)
}

fn check_file(name: &str) {
    let path = repo_root().join("tests/conformance/stream").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let cases: Vec<Value> = serde_json::from_str(&text).expect("fixture JSON");
    let tok = tokenizer();
    let mut failures = Vec::new();
    for case in &cases {
        let (pushes, error, finished, response) = run_case(case, &tok);
        let exp = &case["expected"];
        let exp_pushes: Vec<Vec<Value>> =
            serde_json::from_value(exp["pushes"].clone()).unwrap_or_default();
        let exp_error = exp["error"].as_str().map(str::to_owned);
        let mut msg = String::new();
        // Equal values may still list their keys in another order; the fixtures keep the
        // official order, and ours must write the same bytes.
        let items = pushes.iter().flatten().zip(exp_pushes.iter().flatten());
        if let Some((a, b)) = items
            .filter(|(a, b)| a == b)
            .find(|(a, b)| a.to_string() != b.to_string())
        {
            msg += &format!("  key order differs:\n    ours:     {a}\n    official: {b}\n");
        }
        if pushes != exp_pushes {
            for (i, (a, b)) in pushes.iter().zip(&exp_pushes).enumerate() {
                if a != b {
                    msg += &format!(
                        "  push #{i} ({:?}) differs:\n",
                        case["input"]
                            .get(i)
                            .map(|c| c.to_string())
                            .unwrap_or_else(|| "finish()".into())
                    );
                    let n = a.len().max(b.len());
                    for j in 0..n {
                        let (x, y) = (a.get(j), b.get(j));
                        if x != y {
                            msg += &format!(
                                "    ours:     {}\n    official: {}\n",
                                x.map_or("-".into(), |v| v.to_string()),
                                y.map_or("-".into(), |v| v.to_string())
                            );
                            break;
                        }
                    }
                    break;
                }
            }
            if pushes.len() != exp_pushes.len() {
                msg += &format!(
                    "  push count {} vs official {}\n",
                    pushes.len(),
                    exp_pushes.len()
                );
            }
        }
        if error != exp_error {
            msg += &format!("  error {error:?} vs official {exp_error:?}\n");
        }
        if finished != exp["finished"].as_bool().unwrap_or(false) {
            msg += &format!("  finished {finished} vs official {}\n", exp["finished"]);
        }
        if response != exp["response"] {
            msg += &format!(
                "  response:\n    ours:     {response}\n    official: {}\n",
                exp["response"]
            );
        }
        if !msg.is_empty() {
            failures.push(format!("{}:\n{msg}", case["name"].as_str().unwrap_or("?")));
        }
    }
    if !failures.is_empty() {
        let shown: Vec<_> = failures.iter().take(6).cloned().collect();
        panic!(
            "{} of {} streams differ from the official package:\n{}",
            failures.len(),
            cases.len(),
            shown.join("\n")
        );
    }
}

#[test]
fn chat_fixtures() {
    check_file("chat.json");
}

#[test]
fn responses_fixtures() {
    check_file("responses.json");
}

#[test]
fn messages_fixtures() {
    check_file("messages.json");
}
