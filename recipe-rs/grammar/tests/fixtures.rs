//! Every DSML calls block of the recorded encoding fixtures (the official template's own
//! rendering of historical calls, V4 and V4.1) is accepted, token for token, by the grammar
//! built from that case's tools, in every tool-choice mode the block fits.
//!
//! A case counts as a valid output when each of its historical calls names a declared tool with
//! arguments valid for that tool's schema, and no control-token spelling appears in its
//! assistant text (the injection cases, whose official rendering turns typed spellings into
//! control tokens). The rest test the encoder, not what a model may write.

mod common;

use recipe_core::conversation::{Conversation, Message, ToolChoice};
use recipe_core::ModelVersion;
use recipe_core::SpecialToken;
use recipe_grammar::OutputGrammar;
use recipe_protocol::{ConversationRequest, OutputConstraint, OutputConstraintKind};
use serde_json::Value;

const DSML: u32 = 128825;
const ASSISTANT: u32 = 128804;
const THINK_END: u32 = 128822;

fn fixture_cases() -> Vec<Value> {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/conformance/encoding");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixture dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.starts_with("cases_") && n.ends_with(".json")
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        out.extend(v["cases"].as_array().unwrap().iter().cloned());
    }
    out
}

/// The content-and-calls part of every assistant turn that holds a calls block: what a model
/// writes after `</think>`, up to (not including) EOS.
fn call_turns(tokens: &[u32]) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(a) = tokens[i..]
        .iter()
        .position(|&t| t == ASSISTANT)
        .map(|p| p + i)
    {
        let Some(e) = tokens[a..]
            .iter()
            .position(|&t| t == common::eos())
            .map(|p| p + a)
        else {
            break;
        };
        if let Some(th) = tokens[a..e]
            .iter()
            .position(|&t| t == THINK_END)
            .map(|p| p + a)
        {
            let turn = &tokens[th + 1..e];
            if turn.contains(&DSML) {
                out.push(turn.to_vec());
            }
        }
        i = a + 1;
    }
    out
}

fn request(
    conv: &Conversation,
    version: ModelVersion,
    kind: OutputConstraintKind,
) -> ConversationRequest {
    let mut r = ConversationRequest::new(conv.clone(), version);
    r.inference_options.output_constraint = Some(OutputConstraint {
        kind: kind.clone(),
        schema: String::new(),
    });
    r.parsing_options.starts_in_tool_calls = kind == OutputConstraintKind::ToolCallRequired;
    r
}

/// Whether every historical call of `conv` is one a grammar of its tools must accept.
fn calls_are_valid_outputs(conv: &Conversation) -> bool {
    let spelled = |s: &str| {
        SpecialToken::ALL
            .iter()
            .any(|t| s.contains(t.default_str()))
    };
    conv.messages.iter().all(|m| {
        let Message::Assistant(a) = m else {
            return true;
        };
        if spelled(&a.content) {
            return false;
        }
        a.tool_calls.iter().flatten().all(|c| {
            let Some(tool) = conv.tools.iter().find(|t| t.name == c.name) else {
                return false;
            };
            let Ok(args) = serde_json::from_str::<Value>(&c.arguments) else {
                return false;
            };
            let schema = if tool.parameters.is_null() {
                serde_json::json!({})
            } else {
                tool.parameters.clone()
            };
            args.is_object()
                && !spelled(&c.arguments)
                && jsonschema::validator_for(&schema).is_ok_and(|v| v.is_valid(&args))
        })
    })
}

fn compile(r: &ConversationRequest) -> OutputGrammar {
    OutputGrammar::compile(r, common::vocabulary(), None, None)
        .unwrap_or_else(|e| panic!("grammar for {:?}: {e}", r.conversation.tools))
        .expect("constraint")
}

#[test]
fn recorded_calls_blocks_are_accepted_in_every_mode() {
    let tok = common::tokenizer();
    let mut checked = [0usize; 4]; // auto, required, named, single-call
    let mut failures = Vec::new();
    for case in fixture_cases() {
        let Some(conv) = case.get("conversation") else {
            continue;
        };
        if !case["special_tokens"].is_null() {
            continue;
        }
        // Cases recording a refused conversation have no output to check.
        let Ok(conv) = serde_json::from_value::<Conversation>(conv.clone()) else {
            continue;
        };
        if conv.tools.is_empty()
            || conv.tool_choice == ToolChoice::None
            || !calls_are_valid_outputs(&conv)
        {
            continue;
        }
        for (key, version) in [
            ("v4", ModelVersion::DeepseekV4Pro),
            ("v41", ModelVersion::DeepseekV41Flash),
        ] {
            let Some(Value::Array(tokens)) = case["official"].get(key).map(|o| &o["tokens"]) else {
                continue;
            };
            let tokens: Vec<u32> = tokens.iter().map(|t| t.as_u64().unwrap() as u32).collect();
            let d = &version.profile().dsml;
            for turn in call_turns(&tokens) {
                let name = case["name"].as_str().unwrap_or("?").to_owned();
                let auto = compile(&request(&conv, version, OutputConstraintKind::ToolCall));
                checked[0] += 1;
                if let Err(at) = common::run(&auto, &turn) {
                    failures.push(format!(
                        "{name} {key} auto: rejected at {at}: {:?}",
                        tok.decode(&turn).unwrap()
                    ));
                    continue;
                }
                // A turn that is only the block: the same calls, after the prompt opened it.
                let text = tok.decode(&turn).unwrap();
                let opener = format!("\n\n<｜DSML｜{}>\n", d.calls);
                let Some(body) = text.strip_prefix(&opener) else {
                    continue;
                };
                let body_ids = common::ids(body);
                let required = compile(&request(
                    &conv,
                    version,
                    OutputConstraintKind::ToolCallRequired,
                ));
                checked[1] += 1;
                if let Err(at) = common::run(&required, &body_ids) {
                    failures.push(format!("{name} {key} required: rejected at {at}: {body:?}"));
                }
                let invoke = format!("<｜DSML｜{} name=\"", d.invoke);
                let names: Vec<&str> = body
                    .split(&invoke)
                    .skip(1)
                    .filter_map(|s| s.split('"').next())
                    .collect();
                if names.windows(2).all(|w| w[0] == w[1]) {
                    if let Some(tool) = conv.tools.iter().find(|t| t.name == names[0]) {
                        let mut named = conv.clone();
                        named.tools = vec![tool.clone()];
                        named.tool_choice = ToolChoice::Required;
                        let g = compile(&request(
                            &named,
                            version,
                            OutputConstraintKind::ToolCallRequired,
                        ));
                        checked[2] += 1;
                        if let Err(at) = common::run(&g, &body_ids) {
                            failures
                                .push(format!("{name} {key} named: rejected at {at}: {body:?}"));
                        }
                    }
                }
                if names.len() == 1 {
                    let mut r = request(&conv, version, OutputConstraintKind::ToolCall);
                    r.inference_options.parallel_tool_calls = Some(false);
                    checked[3] += 1;
                    if let Err(at) = common::run(&compile(&r), &turn) {
                        failures.push(format!("{name} {key} single: rejected at {at}: {text:?}"));
                    }
                }
            }
        }
    }
    eprintln!("checked auto/required/named/single: {checked:?}");
    assert!(
        failures.is_empty(),
        "{} rejected:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        checked[0] >= 2 && checked[1] >= 1,
        "cases checked: {checked:?}"
    );
}

/// A schema that admits exactly the JSON type of `v` (objects and arrays by their members).
fn schema_of(v: &Value) -> Value {
    match v {
        Value::Null => serde_json::json!({"type": "null"}),
        Value::Bool(_) => serde_json::json!({"type": "boolean"}),
        Value::Number(n) if n.is_i64() || n.is_u64() => serde_json::json!({"type": "integer"}),
        Value::Number(_) => serde_json::json!({"type": "number"}),
        Value::String(_) => serde_json::json!({"type": "string"}),
        Value::Array(items) => match items.first() {
            Some(x) if items.iter().all(|y| schema_of(y) == schema_of(x)) => {
                serde_json::json!({"type": "array", "items": schema_of(x)})
            }
            _ => serde_json::json!({"type": "array"}),
        },
        Value::Object(m) => {
            let props: serde_json::Map<String, Value> =
                m.iter().map(|(k, x)| (k.clone(), schema_of(x))).collect();
            serde_json::json!({"type": "object", "properties": props})
        }
    }
}

/// The recorded model outputs of the stream fixtures (token input, V4.1, Chat generator) whose
/// calls are written exactly as the encoder writes them: the grammar built from a request that
/// declares those calls' tools (parameter types taken from the recorded arguments, every
/// recorded key required) accepts each, token for token, in the fixture's mode (thinking
/// stage, calls block opened by the prompt or not).
#[test]
fn recorded_stream_outputs_are_accepted() {
    let tok = common::tokenizer();
    let dir =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance/stream");
    let encoding =
        recipe_core::encoding::Encoding::new(recipe_core::encoding::EncodingVersion::V41)
            .with_tokenizer(common::system_tokenizer());
    let (mut checked, mut skipped) = (0usize, 0usize);
    let mut failures = Vec::new();
    for file in ["chat.json", "random.json"] {
        let cases: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(file)).unwrap()).unwrap();
        for case in cases.as_array().unwrap() {
            let inputs = case["input"].as_array().unwrap();
            let ids: Vec<u32> = inputs
                .iter()
                .filter_map(|i| i["tokens"].as_array())
                .flatten()
                .map(|t| t.as_u64().unwrap() as u32)
                .collect();
            if case["generator"]["format"] != "chat"
                || !ids.contains(&DSML)
                || !case["options"]["special_tokens"].is_null()
            {
                continue;
            }
            let Some(message) = case["expected"]["response"]["choices"][0].get("message") else {
                continue;
            };
            let Some(calls) = message["tool_calls"].as_array() else {
                continue;
            };
            // The tools the calls name, typed by their arguments.
            let mut tools: Vec<Value> = Vec::new();
            let mut history_calls = Vec::new();
            for (k, c) in calls.iter().enumerate() {
                let name = c["function"]["name"].as_str().unwrap();
                let args = c["function"]["arguments"].as_str().unwrap();
                let parsed: Value = serde_json::from_str(args).unwrap_or(Value::Null);
                let mut schema = schema_of(&parsed);
                if let Value::Object(m) = &parsed {
                    schema["required"] =
                        Value::Array(m.keys().map(|k| Value::String(k.clone())).collect());
                }
                match tools.iter_mut().find(|t| t["name"] == name) {
                    Some(t) => {
                        // A second call to the same tool: its keys are all optional then.
                        if t["parameters"] != schema {
                            t["parameters"] = serde_json::json!({"type": "object"});
                        }
                    }
                    None => tools.push(serde_json::json!({"name": name, "parameters": schema})),
                }
                history_calls.push(
                    serde_json::json!({"id": format!("c{k}"), "name": name, "arguments": args}),
                );
            }
            let content = message["content"].as_str().unwrap_or("");
            let conv: Conversation = serde_json::from_value(serde_json::json!({
                "messages": [{"role": "user", "content": "x"},
                             {"role": "assistant", "content": content, "tool_calls": history_calls}],
                "thinking_mode": false, "tools": tools, "tool_choice": "auto",
                "reasoning_effort": null, "response_format": "text"}))
            .unwrap();
            // What the encoder writes for these calls, against what the model wrote.
            let rendered = encoding.encode(&conv).unwrap();
            let canonical = tok.decode(&call_turns(&rendered)[0]).unwrap();
            let opened = case["options"]["starts_in_tool_calls"] == true;
            let stage = case["options"]["thinking_initial_stage"].as_str();
            let reasoning = matches!(stage, Some("ReasoningStart" | "ReasoningContinuation"));
            let end = ids
                .iter()
                .position(|&t| t == common::eos())
                .unwrap_or(ids.len());
            let output = &ids[..end];
            let text = tok.decode(output).unwrap();
            let answer = if reasoning && !opened {
                match text.split_once("</think>") {
                    Some((_, a)) => a.to_owned(),
                    None => String::new(),
                }
            } else {
                text.clone()
            };
            let expected = if opened {
                canonical
                    .strip_prefix("\n\n<｜DSML｜ calls>\n")
                    .unwrap_or("")
                    .to_owned()
            } else {
                canonical.clone()
            };
            if answer != expected {
                skipped += 1; // not in the encoder's form (the parser's robustness cases)
                continue;
            }
            let mut r = request(
                &conv,
                ModelVersion::DeepseekV41Flash,
                if opened {
                    OutputConstraintKind::ToolCallRequired
                } else {
                    OutputConstraintKind::ToolCall
                },
            );
            r.parsing_options.thinking_initial_stage = match stage {
                Some("ReasoningStart") => Some(recipe_core::ThinkingInitialStage::ReasoningStart),
                Some("ReasoningContinuation") => {
                    Some(recipe_core::ThinkingInitialStage::ReasoningContinuation)
                }
                Some(_) => Some(recipe_core::ThinkingInitialStage::ContentContinuation),
                None => None,
            };
            checked += 1;
            if let Err(at) = common::run(&compile(&r), output) {
                failures.push(format!("{}: rejected at {at}: {text:?}", case["name"]));
            }
        }
    }
    eprintln!("stream outputs checked {checked}, not in the encoder's form {skipped}");
    assert!(
        failures.is_empty(),
        "{} rejected:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked >= 20, "only {checked} outputs checked");
}
