//! Output shaped by the converted request, and responses accumulated from streams that end
//! early. Each expectation was observed on the reference package (cases found by
//! tests/conformance/diff_stream_random.py --strict; see docs/stream-deviations.md).

mod common;

use recipe_core::ParsingOptions;
use recipe_stream::*;
use serde_json::{json, Value};

use common::tokenizer;

const D: &str = "｜DSML｜";

fn config() -> GeneratorConfig {
    GeneratorConfig {
        thinking_mode: false,
        starts_in_reasoning: false,
    }
}

fn text(s: &str) -> InferenceChunk {
    InferenceChunk::Text {
        content: s.to_owned(),
        token_count: 1,
    }
}

/// Push every chunk, then finish; the items as JSON.
fn run(generator: Generator, chunks: Vec<InferenceChunk>, tok: bool) -> Vec<Value> {
    let mut sp = StreamProcessor::new(generator, &ParsingOptions::default(), tok.then(tokenizer));
    let mut items = Vec::new();
    for c in chunks {
        items.extend(sp.push(c).unwrap());
    }
    items.extend(sp.finish().unwrap());
    items.iter().map(StreamItem::to_value).collect()
}

#[test]
fn a_streamed_chat_request_without_include_usage_has_usage_on_the_last_chunk_only() {
    let chunks = || {
        vec![
            text("Hi"),
            InferenceChunk::Finish(InferenceFinishReason::Stop),
        ]
    };
    let plain = run(
        Generator::Chat(ChatGenerator::new("c", "m", config()).without_null_usage()),
        chunks(),
        false,
    );
    let (last, rest) = plain.split_last().unwrap();
    assert!(rest.iter().all(|c| c.get("usage").is_none()), "{rest:?}");
    assert_eq!(last["usage"]["completion_tokens"], 1);
    // Not streamed, or with include_usage: `"usage": null` before the last chunk.
    let with_null = run(
        Generator::Chat(ChatGenerator::new("c", "m", config())),
        chunks(),
        false,
    );
    let (_, rest) = with_null.split_last().unwrap();
    assert!(rest
        .iter()
        .all(|c| c["usage"].is_null() && c.get("usage").is_some()));
}

fn custom_generator() -> Generator {
    Generator::Responses(
        ResponsesGenerator::new("r", "m", config()).with_custom_tools(vec!["apply_patch".into()]),
    )
}

fn call(params: &str) -> String {
    format!(
        "\n\n<{D} calls>\n<{D} invoke name=\"apply_patch\">\n{params}</{D} invoke>\n</{D} calls>"
    )
}

fn param(name: &str, value: &str, string: &str) -> String {
    format!("<{D} parameter name=\"{name}\" string=\"{string}\">{value}</{D} parameter>\n")
}

/// The events of a custom tool call (type, and delta or input) for `text` cut every `cut` chars.
fn custom_events(text: &str, cut: usize) -> Vec<(String, String)> {
    let chars: Vec<char> = text.chars().collect();
    let chunks = chars
        .chunks(cut)
        .map(|c| self::text(&c.iter().collect::<String>()))
        .collect();
    run(custom_generator(), chunks, false)
        .into_iter()
        .filter_map(|e| {
            let ty = e["type"].as_str()?.to_owned();
            let v = match ty.as_str() {
                "response.custom_tool_call_input.delta" => e["delta"].clone(),
                "response.custom_tool_call_input.done" => e["input"].clone(),
                "response.output_item.added" | "response.output_item.done" => {
                    json!([e["item"]["type"], e["item"]["id"], e["item"]["input"]])
                }
                _ => return None,
            };
            Some((ty.trim_start_matches("response.").to_owned(), v.to_string()))
        })
        .collect()
}

#[test]
fn a_custom_tool_call_writes_its_input_string_unescaped() {
    let ev = custom_events(&call(&param("input", "*** Begin\n\"x\"", "true")), 1);
    let deltas: Vec<&str> = ev
        .iter()
        .filter(|(t, _)| t.ends_with("input.delta"))
        .map(|(_, d)| d.as_str())
        .collect();
    // One delta per character of the value, unescaped; nothing of the JSON around it.
    assert_eq!(deltas.len(), "*** Begin\n\"x\"".chars().count());
    assert_eq!(deltas[9], r#""\n""#);
    assert_eq!(
        ev.first().unwrap(),
        &(
            "output_item.added".into(),
            json!(["custom_tool_call", "ctc_r_0", ""]).to_string()
        )
    );
    assert_eq!(
        ev.last().unwrap(),
        &(
            "output_item.done".into(),
            json!(["custom_tool_call", "ctc_r_0", "*** Begin\n\"x\""]).to_string()
        )
    );
    // Parameters after the input string are dropped.
    let ev = custom_events(
        &call(&(param("input", "a", "true") + &param("b", "c", "true"))),
        1000,
    );
    assert_eq!(
        ev[1],
        ("custom_tool_call_input.delta".into(), "\"a\"".into())
    );
    assert_eq!(
        ev[2],
        ("custom_tool_call_input.done".into(), "\"a\"".into())
    );
}

#[test]
fn other_custom_tool_arguments_are_the_input_as_json() {
    // Held until they differ from `{"input": "`, then as the parser writes them.
    let ev = custom_events(&call(&param("patch", "zz", "true")), 1000);
    let deltas: Vec<String> = ev
        .iter()
        .filter(|(t, _)| t.ends_with("input.delta"))
        .map(|(_, d)| serde_json::from_str::<String>(d).unwrap())
        .collect();
    assert_eq!(deltas, ["{\"patch\"", ": ", "\"", "zz", "\"", "}"]);
    let ev = custom_events(&call(&param("input", "{\"a\": 1}", "false")), 1);
    assert_eq!(ev[1].1, json!("{\"input\": {").to_string());
    // A call that ends while its arguments are held releases them as they are.
    let cut =
        format!("\n\n<{D} calls>\n<{D} invoke name=\"apply_patch\">\n<{D} parameter name=\"inp");
    let ev = custom_events(&cut, 1);
    assert_eq!(
        ev[1],
        (
            "custom_tool_call_input.delta".into(),
            json!("{\"inp").to_string()
        )
    );
    assert_eq!(
        ev[2],
        (
            "custom_tool_call_input.done".into(),
            json!("{\"inp").to_string()
        )
    );
}

#[test]
fn function_calls_stay_function_calls_next_to_custom_tools() {
    let text = format!(
        "\n\n<{D} calls>\n<{D} invoke name=\"f\">\n{}</{D} invoke>\n</{D} calls>",
        param("input", "a", "true")
    );
    let items = run(custom_generator(), vec![self::text(&text)], false);
    let done = items
        .iter()
        .find(|e| e["type"] == "response.output_item.done")
        .unwrap();
    assert_eq!(done["item"]["type"], "function_call");
    assert_eq!(done["item"]["arguments"], "{\"input\": \"a\"}");
}

/// Accumulate a Responses stream that is never finished.
fn accumulate_unfinished(chunks: Vec<InferenceChunk>, tok: bool) -> Value {
    let mut sp = StreamProcessor::new(
        custom_generator(),
        &ParsingOptions::default(),
        tok.then(tokenizer),
    );
    let mut resp = ResponsesResponse::new("r".into(), "m".into(), 7, 0, 0);
    for c in chunks {
        match sp.push(c) {
            Ok(items) => {
                for i in &items {
                    if let StreamItem::Responses(e) = i {
                        resp.accumulate(e);
                    }
                }
            }
            Err(_) => break,
        }
    }
    resp.to_value()
}

#[test]
fn a_response_closed_early_keeps_the_items_in_progress() {
    let r = accumulate_unfinished(vec![text("Hello"), text(" there")], false);
    assert_eq!(r["status"], "in_progress");
    assert_eq!(
        r["output"],
        json!([{"type": "message", "id": "msg_r_0", "status": "in_progress", "role": "assistant",
                "phase": "final_answer",
                "content": [{"type": "output_text", "annotations": [], "logprobs": [],
                             "text": "Hello there"}]}])
    );
    // A call being written keeps its arguments (or input) so far.
    let body = format!(
        "Hi\n\n<{D} calls>\n<{D} invoke name=\"f\">\n{}</{D} invoke>\n<{D} invoke name=\"apply_patch\">\n<{D} parameter name=\"input\" string=\"true\">pat",
        param("q", "v", "true")
    );
    let r = accumulate_unfinished(vec![text(&body)], false);
    let out = r["output"].as_array().unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(out[0]["phase"], "commentary");
    assert_eq!(out[1]["arguments"], "{\"q\": \"v\"}");
    assert_eq!(out[2]["type"], "custom_tool_call");
    assert_eq!(out[2]["status"], "in_progress");
    assert_eq!(out[2]["input"], "pat");
}

#[test]
fn a_response_stopped_by_an_error_keeps_what_came_before() {
    let tok = tokenizer();
    let ids = tok.encode_ordinary("Hello there").unwrap();
    let n = ids.len();
    let logprobs = (0..n).map(|_| (-0.5, Vec::new())).collect();
    let r = accumulate_unfinished(
        vec![
            InferenceChunk::Tokens {
                token_ids: ids,
                logprobs: Some(logprobs),
            },
            // One log probability for two IDs: the stream stops here.
            InferenceChunk::Tokens {
                token_ids: vec![67, 68],
                logprobs: Some(vec![(-1.0, Vec::new())]),
            },
        ],
        true,
    );
    let part = &r["output"][0]["content"][0];
    assert_eq!(part["text"], "Hello there");
    assert_eq!(part["logprobs"].as_array().unwrap().len(), n);
}

#[test]
fn a_response_without_events_is_the_full_in_progress_object() {
    let r = ResponsesResponse::new("r".into(), "m".into(), 5, 10, 3).to_value();
    let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "id",
            "object",
            "created_at",
            "status",
            "background",
            "completed_at",
            "content_filters",
            "error",
            "frequency_penalty",
            "incomplete_details",
            "instructions",
            "max_output_tokens",
            "max_tool_calls",
            "model",
            "moderation",
            "output",
            "parallel_tool_calls",
            "presence_penalty",
            "previous_response_id",
            "prompt_cache_key",
            "prompt_cache_retention",
            "reasoning",
            "safety_identifier",
            "service_tier",
            "store",
            "temperature",
            "text",
            "tool_choice",
            "tools",
            "top_logprobs",
            "top_p",
            "truncation",
            "usage",
            "user",
            "metadata"
        ]
    );
    assert_eq!(r["created_at"], 5);
    assert_eq!(r["usage"], Value::Null);
    assert_eq!(r["reasoning"], json!({"effort": null, "summary": null}));
}

#[test]
fn a_control_token_inside_a_parameter_name_is_a_delta_of_its_own() {
    let tok = tokenizer();
    let text = format!(
        "\n\n<{D} calls>\n<{D} invoke name=\"f\">\n<{D} parameter name=\"q<think>r\" string=\"true\">v</{D} parameter>\n</{D} invoke>\n</{D} calls>"
    );
    let ids = tok.encode_with_special(&text).unwrap();
    let think = 128821;
    let at = ids.iter().position(|&t| t == think).unwrap();
    // The name's tokens and the control token in one push.
    let chunks = vec![
        InferenceChunk::Tokens {
            token_ids: ids[..at - 3].to_vec(),
            logprobs: None,
        },
        InferenceChunk::Tokens {
            token_ids: ids[at - 3..].to_vec(),
            logprobs: None,
        },
    ];
    let items = run(
        Generator::Chat(ChatGenerator::new("c", "m", config())),
        chunks,
        true,
    );
    let args: Vec<&str> = items
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .filter(|a| !a.is_empty())
        .collect();
    let joined: String = args.concat();
    assert_eq!(joined, "{\"q<think>r\": \"v\"}");
    let i = args
        .iter()
        .position(|a| *a == "<think>")
        .expect("the token alone");
    assert!(
        args[i - 1].ends_with('q') && args[i + 1].starts_with('r'),
        "{args:?}"
    );
}
