//! JSON output mode against the reference package (deepseek-recipe 0.2.0), each expectation
//! observed on it with the same pushes: a tool-call block is read before the JSON value and
//! after its closing fence but is text inside the value, and stop sequences match the value's
//! text only.

use recipe_core::ParsingOptions;
use recipe_stream::*;
use serde_json::Value;

fn chat() -> Generator {
    Generator::Chat(ChatGenerator::new(
        "id",
        "m",
        GeneratorConfig {
            thinking_mode: false,
            starts_in_reasoning: false,
        },
    ))
}

/// Content deltas (`n:` a tool name, `a:` argument text, `fin:` the finish reason) of one push,
/// without the opening role chunk.
fn deltas(items: &[StreamItem]) -> Vec<String> {
    let mut out = Vec::new();
    for i in items {
        let v = i.to_value();
        let choice = &v["choices"][0];
        let d = &choice["delta"];
        if d.get("role").is_some() {
            continue;
        }
        if let Some(Value::String(c)) = d.get("content") {
            if !c.is_empty() {
                out.push(c.clone());
            }
        }
        for call in d["tool_calls"].as_array().into_iter().flatten() {
            if let Some(n) = call["function"]["name"].as_str() {
                out.push(format!("n:{n}"));
            } else if let Some(a) = call["function"]["arguments"].as_str() {
                out.push(format!("a:{a}"));
            }
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            out.push(format!("fin:{f}"));
        }
    }
    out
}

/// The deltas of every push and of `finish` in JSON mode with `stops`.
fn run(stops: &[&str], pieces: &[&str]) -> Vec<Vec<String>> {
    let opts = ParsingOptions {
        parse_json_output: true,
        stop_sequences: stops.iter().map(|s| (*s).to_owned()).collect(),
        ..ParsingOptions::default()
    };
    let mut sp = StreamProcessor::new(chat(), &opts, None);
    let mut all = Vec::new();
    for p in pieces {
        match sp.push(InferenceChunk::Text {
            content: (*p).to_owned(),
            token_count: 1,
        }) {
            Ok(items) => all.push(deltas(&items)),
            Err(e) => {
                all.push(vec![format!("error:{e}")]);
                return all;
            }
        }
    }
    all.push(deltas(&sp.finish().unwrap()));
    all
}

fn v(items: &[&[&str]]) -> Vec<Vec<String>> {
    items
        .iter()
        .map(|p| p.iter().map(|s| (*s).to_owned()).collect())
        .collect()
}

const BLOCK: &str = "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
const CALL: &[&str] = &[
    "n:f", "a:{", "a:\"a\"", "a:: ", "a:\"", "a:x", "a:\"", "a:}",
];

#[test]
fn a_block_inside_the_json_value_is_text() {
    let text = format!("{{\"a\": 1}}\n\n{BLOCK}");
    let got = run(&[], &[&text]);
    let rest = format!("\"a\": 1}}\n\n{BLOCK}");
    assert_eq!(got, v(&[&["{", &rest], &["fin:stop"]]));
    // Opened in an earlier push.
    let second = format!("\n\n{BLOCK}");
    let got = run(&[], &["{\"a\"", &second]);
    assert_eq!(got, v(&[&["{", "\"a\""], &[&second], &["fin:stop"]]));
    // Inside a fence.
    let text = format!("```json\n{{\n\n{BLOCK}}}\n```");
    let kept = format!("{{\n\n{BLOCK}}}");
    assert_eq!(run(&[], &[&text]), v(&[&[&kept], &["fin:stop"]]));
}

#[test]
fn a_block_before_the_value_or_after_its_fence_is_read() {
    let text = format!("hi\n\n{BLOCK}");
    let mut want = vec![" "];
    want.extend(CALL);
    assert_eq!(run(&[], &[&text]), v(&[&want, &["fin:stop"]]));
    let text = format!("```json\n{{}}\n```\n\n{BLOCK}");
    let mut want = vec!["{}"];
    want.extend(CALL);
    assert_eq!(run(&[], &[&text]), v(&[&want, &["fin:stop"]]));
}

#[test]
fn stop_sequences_match_inside_the_value_only() {
    let fenced = "```json\n{\"a\":\n1}\n```tail";
    let bare = "hi {\"a\":\n1}";
    let stopped = |first: &[&str]| {
        let mut p: Vec<&str> = first.to_vec();
        p.push("fin:stop");
        // `finish` after the stop sequence adds nothing.
        v(&[&p, &[]])
    };
    // The newline of the opening fence is not the value's; the one inside it is.
    assert_eq!(run(&["\n"], &[fenced]), stopped(&["{\"a\":"]));
    assert_eq!(run(&["\n"], &[bare]), stopped(&[" ", "{", "\"a\":"]));
    assert_eq!(run(&["}"], &[fenced]), stopped(&["{\"a\":\n1"]));
    assert_eq!(run(&["}"], &[bare]), stopped(&[" ", "{", "\"a\":\n1"]));
    assert_eq!(run(&["\"a"], &[fenced]), stopped(&["{"]));
    assert_eq!(run(&["\"a"], &[bare]), stopped(&[" ", "{"]));
    // The closing fence is still the value's text when the stop sequence ends with it.
    assert_eq!(run(&["```"], &[fenced]), stopped(&["{\"a\":\n1}\n"]));
    // Prose around the value never matches.
    assert_eq!(
        run(&["hi"], &[bare]),
        v(&[&[" ", "{", "\"a\":\n1}"], &["fin:stop"]])
    );
    assert_eq!(
        run(&[" "], &[fenced]),
        v(&[&["{\"a\":\n1}", " "], &["fin:stop"]])
    );
    assert_eq!(
        run(&["```"], &[bare]),
        v(&[&[" ", "{", "\"a\":\n1}"], &["fin:stop"]])
    );
}
