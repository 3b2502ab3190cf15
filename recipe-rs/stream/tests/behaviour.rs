//! Behaviour beyond the reference: the documented deviations (docs/stream-deviations.md),
//! robustness (no panics, linear cost) and the parser's invariants.

use proptest::prelude::*;
use recipe_core::{ParsingOptions, SpecialToken, ThinkingInitialStage, Tokenizer};
use recipe_stream::*;
use serde_json::Value;

mod common;
use common::tokenizer;

const D: &str = "｜DSML｜";

fn chat(thinking: bool) -> Generator {
    Generator::Chat(ChatGenerator::new(
        "id",
        "m",
        GeneratorConfig {
            thinking_mode: thinking,
            starts_in_reasoning: thinking,
        },
    ))
}

/// Run a stream and return the accumulated Chat Completions message and finish reason.
fn run(
    opts: &ParsingOptions,
    chunks: Vec<InferenceChunk>,
    tok: Option<Tokenizer>,
) -> Result<(Value, Value), StreamError> {
    let thinking = opts.thinking_initial_stage.is_some();
    let mut sp = StreamProcessor::new(chat(thinking), opts, tok);
    let mut acc = ChatCompletionResponse::new("id".into(), "m".into(), 0, 0, 0);
    let mut items = Vec::new();
    for c in chunks {
        items.extend(sp.push(c)?);
    }
    items.extend(sp.finish()?);
    for i in &items {
        if let StreamItem::Chat(c) = i {
            acc.accumulate(c);
        }
    }
    let v = acc.to_value();
    Ok((
        v["choices"][0]["message"].clone(),
        v["choices"][0]["finish_reason"].clone(),
    ))
}

fn text(s: &str) -> InferenceChunk {
    InferenceChunk::Text {
        content: s.to_owned(),
        token_count: 1,
    }
}

fn stop() -> InferenceChunk {
    InferenceChunk::Finish(InferenceFinishReason::Stop)
}

fn cuts(s: &str, n: usize) -> Vec<InferenceChunk> {
    let chars: Vec<char> = s.chars().collect();
    chars
        .chunks(n.max(1))
        .map(|c| text(&c.iter().collect::<String>()))
        .collect()
}

// --- Deviation 1: a `<｜DSML｜` that does not open a tool-call block is text -------------------

#[test]
fn dsml_spelling_in_prose_stays_text() {
    let o = ParsingOptions::default();
    for n in [1, 2, 3, 7, 100] {
        let mut chunks = cuts(&format!("I like <{D}and more <{D} x"), n);
        chunks.push(stop());
        let (msg, fin) = run(&o, chunks, None).unwrap();
        assert_eq!(
            msg["content"],
            format!("I like <{D}and more <{D} x"),
            "cut every {n}"
        );
        assert_eq!(fin, "stop");
        assert!(msg.get("tool_calls").is_none());
    }
}

#[test]
fn unfinished_dsml_at_end_is_text() {
    let o = ParsingOptions::default();
    let (msg, _) = run(&o, vec![text(&format!("see\n\n<{D} cal")), stop()], None).unwrap();
    assert_eq!(msg["content"], format!("see\n\n<{D} cal"));
}

#[test]
fn dsml_token_in_prose_stays_text_with_token_ids() {
    let tok = tokenizer();
    let mut ids = tok.encode_ordinary("I like <").unwrap();
    ids.push(tok.added_token_id(D).unwrap());
    ids.extend(tok.encode_ordinary("and more").unwrap());
    let o = ParsingOptions::default();
    let (msg, _) = run(
        &o,
        vec![
            InferenceChunk::Tokens {
                token_ids: ids,
                logprobs: None,
            },
            stop(),
        ],
        Some(tok),
    )
    .unwrap();
    assert_eq!(msg["content"], format!("I like <{D}and more"));
}

#[test]
fn dsml_prose_in_reasoning_stays_reasoning() {
    let o = ParsingOptions {
        thinking_initial_stage: Some(ThinkingInitialStage::ReasoningStart),
        ..Default::default()
    };
    let (msg, _) = run(
        &o,
        vec![text(&format!("use <{D}x> maybe</think>ok")), stop()],
        None,
    )
    .unwrap();
    assert_eq!(msg["reasoning_content"], format!("use <{D}x> maybe"));
    assert_eq!(msg["content"], "ok");
}

// --- Deviation 2: parameters without a valid `string` attribute ----------------------------

fn one_call(param: &str) -> Value {
    let o = ParsingOptions::default();
    let t = format!("<{D} calls>\n<{D} invoke name=\"f\">\n{param}\n</{D} invoke>\n</{D} calls>");
    let (msg, fin) = run(&o, vec![text(&t), stop()], None).unwrap();
    assert_eq!(fin, "tool_calls");
    let args = msg["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap()
        .to_owned();
    serde_json::from_str(&args).unwrap_or_else(|e| panic!("arguments {args:?} are not JSON: {e}"))
}

#[test]
fn parameter_without_string_attribute_is_json_or_string() {
    assert_eq!(
        one_call(&format!("<{D} parameter name=\"q\">abc</{D} parameter>")),
        serde_json::json!({"q": "abc"})
    );
    assert_eq!(
        one_call(&format!("<{D} parameter name=\"n\">42</{D} parameter>")),
        serde_json::json!({"n": 42})
    );
    assert_eq!(
        one_call(&format!(
            "<{D} parameter name=\"o\">{{\"a\": [1]}}</{D} parameter>"
        )),
        serde_json::json!({"o": {"a": [1]}})
    );
}

#[test]
fn parameter_with_unknown_string_value_keeps_its_value() {
    assert_eq!(
        one_call(&format!(
            "<{D} parameter name=\"q\" string=\"maybe\">x \"y\"</{D} parameter>"
        )),
        serde_json::json!({"q": "x \"y\""})
    );
    assert_eq!(
        one_call(&format!(
            "<{D} parameter name=\"q\" string=\"maybe\">true</{D} parameter>"
        )),
        serde_json::json!({"q": true})
    );
}

// --- Deviation 3: the end-of-sequence token ends the output --------------------------------

#[test]
fn eos_token_ends_the_stream() {
    let tok = tokenizer();
    let mut ids = tok.encode_ordinary("Hello").unwrap();
    ids.push(tok.added_token_id(SpecialToken::Eos.default_str()).unwrap());
    ids.extend(tok.encode_ordinary(" trailing junk").unwrap());
    let n = ids.len() as u64;
    let o = ParsingOptions::default();
    let mut sp = StreamProcessor::new(chat(false), &o, Some(tok));
    let mut items = sp
        .push(InferenceChunk::Tokens {
            token_ids: ids,
            logprobs: None,
        })
        .unwrap();
    items.extend(sp.push(stop()).unwrap());
    let mut acc = ChatCompletionResponse::new("id".into(), "m".into(), 0, 0, 0);
    for i in &items {
        if let StreamItem::Chat(c) = i {
            acc.accumulate(c);
        }
    }
    let v = acc.to_value();
    assert_eq!(v["choices"][0]["message"]["content"], "Hello");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["completion_tokens"], n);
}

// --- Deviation 4: unknown token IDs are an error --------------------------------------------

#[test]
fn unknown_token_id_is_an_error() {
    let o = ParsingOptions::default();
    let mut sp = StreamProcessor::new(chat(false), &o, Some(tokenizer()));
    let err = sp
        .push(InferenceChunk::Tokens {
            token_ids: vec![67, 999_999],
            logprobs: None,
        })
        .unwrap_err();
    assert!(err.to_string().contains("unknown token ID 999999"), "{err}");
    assert_eq!(sp.push(text("x")).unwrap_err(), StreamError::Closed);
}

// --- Deviation 5: JSON output mode does not depend on the cuts -------------------------------

#[test]
fn json_output_is_independent_of_cuts() {
    let o = ParsingOptions {
        parse_json_output: true,
        ..Default::default()
    };
    for s in [
        "Sure, here you go: {\"a\": [1, 2]} hope it helps",
        "Intro text\n```json\n{\"k\": \"v\"}\n```\nand some more words",
        "no json at all in this answer",
    ] {
        let whole = run(&o, vec![text(s), stop()], None).unwrap().0["content"].clone();
        for n in [1, 2, 3, 5, 11] {
            let mut c = cuts(s, n);
            c.push(stop());
            assert_eq!(
                run(&o, c, None).unwrap().0["content"],
                whole,
                "{s:?} cut every {n}"
            );
        }
    }
}

// --- Robustness ------------------------------------------------------------------------------

#[test]
fn empty_thinking_end_spelling_does_not_panic() {
    let mut o = ParsingOptions {
        thinking_initial_stage: Some(ThinkingInitialStage::ReasoningStart),
        ..Default::default()
    };
    o.special_tokens.set(SpecialToken::ThinkingEnd, "");
    let (msg, _) = run(&o, vec![text("é日本</think>x"), text("🦀"), stop()], None).unwrap();
    assert_eq!(msg["reasoning_content"], "é日本</think>x🦀");
}

/// One big chunk in one push (its push time per size is in benchmarks/stream_push_scaling.py).
#[test]
fn one_big_chunk_in_one_push() {
    let o = ParsingOptions {
        thinking_initial_stage: Some(ThinkingInitialStage::ReasoningStart),
        ..Default::default()
    };
    let big = "a</think>".repeat(32 * 1024); // 288 KiB
    let mut sp = StreamProcessor::new(chat(true), &o, None);
    let items = sp.push(text(&big)).unwrap();
    assert!(items.len() > 30_000);
}

#[test]
fn thousands_of_invokes_in_one_push() {
    let o = ParsingOptions::default();
    let mut t = format!("<{D} calls>\n");
    for i in 0..5000 {
        t += &format!("<{D} invoke name=\"f{i}\">\n<{D} parameter name=\"x\" string=\"true\">v{i}</{D} parameter>\n</{D} invoke>\n");
    }
    t += &format!("</{D} calls>");
    let mut sp = StreamProcessor::new(chat(false), &o, None);
    let mut items = sp.push(text(&t)).unwrap();
    items.extend(sp.push(stop()).unwrap());
    let starts = items
        .iter()
        .filter(|i| matches!(i, StreamItem::Chat(c) if matches!(c.delta, generator::ChatDelta::ToolStart { .. })))
        .count();
    assert_eq!(starts, 5000);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// No input, cut anywhere, with any options, makes the processor panic; every call returns.
    #[test]
    fn never_panics(
        pieces in proptest::collection::vec(
            proptest::string::string_regex("(a|é|日|🦀|<|/|>|\\n|\\\"|｜DSML｜|</think>| calls>| invoke name=\\\"|parameter name=\\\"| string=\\\"(true|false|x)\\\">|```|\\{|\\}|STOP|=| )*").unwrap(),
            0..8),
        tools in any::<bool>(), starts_in_calls in any::<bool>(), json in any::<bool>(),
        stage in 0u8..4, empty_end in any::<bool>(),
    ) {
        let mut o = ParsingOptions {
            parse_tool_calls: tools,
            starts_in_tool_calls: starts_in_calls,
            parse_json_output: json,
            thinking_initial_stage: match stage {
                0 => None,
                1 => Some(ThinkingInitialStage::ReasoningStart),
                2 => Some(ThinkingInitialStage::ReasoningContinuation),
                _ => Some(ThinkingInitialStage::ContentContinuation),
            },
            stop_sequences: vec!["STOP".into(), "é日".into()],
            ..Default::default()
        };
        if empty_end {
            o.special_tokens.set(SpecialToken::ThinkingEnd, "");
        }
        let mut chunks: Vec<_> = pieces.iter().map(|p| text(p)).collect();
        chunks.push(stop());
        for g in 0..3 {
            let generator = match g {
                0 => chat(stage > 0),
                1 => Generator::Responses(ResponsesGenerator::new("r", "m", GeneratorConfig::default())),
                _ => Generator::Messages(MessagesGenerator::new("x", "m", stage > 0)),
            };
            let mut sp = StreamProcessor::new(generator, &o, None);
            for c in chunks.clone() {
                let r = sp.push(c);
                if r.is_err() { break; }
            }
            let _ = sp.finish();
        }
    }
}

/// Text fragments that exercise the added-vocabulary split: whole control-token spellings,
/// near misses, CJK, digits, emoji and whitespace runs.
fn reasoning_fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "</think>",
            "<think>",
            "<｜end▁of▁sentence｜>",
            "<｜begin▁of▁sentence｜>",
            "｜DSML｜",
            "<｜DSML｜",
            "</｜DSML｜",
            "<dsml:",
            "</dsml:",
            "<｜User｜>",
            "<｜Assistant｜>",
            "<|EOT|>",
            "<｜tool▁sep｜>",
            "<｜/table>｜",
            "<｜",
            "｜>",
            "<",
            "｜",
            "▁",
            "</",
            "<thin",
            "think>",
        ])
        .prop_map(str::to_owned),
        "[ \t\n\r]{1,6}",
        "[a-zA-Z0-9.,!?'\"():;{}_-]{1,12}",
        "[日本語中文かなカナ한국어]{1,8}",
        "[éü🦀\u{00a0}\u{3000}]{1,3}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The reasoning-token count must equal the length of the full-vocabulary encoding.
    #[test]
    fn reasoning_count_equals_full_vocabulary_length(parts in prop::collection::vec(reasoning_fragment(), 0..80)) {
        let tok = tokenizer();
        let t = parts.concat();
        prop_assert_eq!(tok.count_with_special(&t).unwrap(), tok.encode_with_special(&t).unwrap().len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// Long texts are counted on several threads; the count must not change.
    #[test]
    fn long_reasoning_count_equals_full_vocabulary_length(parts in prop::collection::vec(reasoning_fragment(), 50..200)) {
        let tok = tokenizer();
        let unit = parts.concat();
        let mut t = String::new();
        while t.len() < 80 * 1024 {
            t.push_str(&unit);
            if unit.is_empty() { break; }
        }
        prop_assert_eq!(tok.count_with_special(&t).unwrap(), tok.encode_with_special(&t).unwrap().len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// Long line-structured text: many `\n` + letter cut points with whitespace, punctuation,
    /// digits and control-token spellings just before them.
    #[test]
    fn long_line_text_count_equals_full_vocabulary_length(
        lines in prop::collection::vec((prop::collection::vec(reasoning_fragment(), 0..6), "[ \t\r.,!:)0-9日]{0,3}", "[a-zA-Z]"), 20..80)
    ) {
        let tok = tokenizer();
        let unit: String = lines.iter().map(|(f, tail, head)| format!("{}{}\n{}", f.concat(), tail, head)).collect();
        let mut t = String::new();
        while t.len() < 80 * 1024 {
            t.push_str(&unit);
        }
        prop_assert_eq!(tok.count_with_special(&t).unwrap(), tok.encode_with_special(&t).unwrap().len());
    }
}

// --- Runs of marker spellings: flat, linear, no crash ------------------------------------------

/// One push of `<｜DSML｜` repeated 10,000 times (tools on, thinking off) used to recurse once per
/// spelling and overflow the stack; every spelling is prose, so all of it is content.
#[test]
fn a_run_of_prose_marker_spellings_is_content() {
    for unit in [
        format!("<{D}"),
        format!("<{D}parameter name=\""),
        format!("<{D} cal"),
    ] {
        let big = unit.repeat(10_000);
        let (msg, _) = run(&ParsingOptions::default(), vec![text(&big), stop()], None).unwrap();
        assert_eq!(msg["content"], big.as_str());
    }
}

#[test]
fn a_run_of_prose_marker_spellings_in_reasoning_is_reasoning() {
    let o = ParsingOptions {
        thinking_initial_stage: Some(ThinkingInitialStage::ReasoningStart),
        ..Default::default()
    };
    let big = format!("<{D}").repeat(50_000);
    let (msg, _) = run(&o, vec![text(&format!("r{big}")), stop()], None).unwrap();
    assert_eq!(msg["reasoning_content"], format!("r{big}").as_str());
}

/// Inside a tool-call block the same run is one malformed parameter, parsed in one pass.
#[test]
fn a_run_of_parameter_openings_inside_a_block_is_one_pass() {
    let unit = format!("<{D}parameter name=\"");
    let body = format!(
        "<{D} calls>\n<{D} invoke name=\"f\">\n{}",
        unit.repeat(87_000)
    );
    let mut sp = StreamProcessor::new(chat(false), &ParsingOptions::default(), None);
    let mut items = sp.push(text(&body)).unwrap();
    items.extend(sp.finish().unwrap());
    assert!(items.len() < 16, "{} items", items.len());
}
