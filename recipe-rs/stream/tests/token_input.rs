//! Token input against the reference package (deepseek-recipe 0.2.0), each expectation observed
//! on it with the same token IDs: control tokens given by ID are decided by their ID, text that
//! merely spells one stays text, and a character left unfinished at the end is dropped.

use recipe_core::{ParsingOptions, ThinkingInitialStage};
use recipe_stream::*;
use serde_json::Value;

mod common;
use common::{logprob_tokens, push_with_logprobs, tokenizer};

const DSML_ID: u32 = 128825;
/// `｜DSML｜` written out in ordinary tokens.
const DSML_PLAIN: [u32; 4] = [28217, 10525, 7398, 28217];
const IMAGE_ID: u32 = 129279;
/// `a`, `b`, `red`, and the first of the two byte tokens of U+2028.
const A: u32 = 67;
const B: u32 = 68;
const RED: u32 = 1157;
const HALF_CHAR: u32 = 300;

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

/// What one push produced: text deltas (`r:` marks reasoning, `a:` tool-call arguments, `n:` a
/// tool name) and the finish reason (`fin:`), without the opening role chunk.
fn deltas(items: &[StreamItem]) -> Vec<String> {
    let mut out = Vec::new();
    for i in items {
        let v = i.to_value();
        let choice = &v["choices"][0];
        let d = &choice["delta"];
        if d.get("role").is_some() {
            continue;
        }
        if let Some(Value::String(r)) = d.get("reasoning_content") {
            out.push(format!("r:{r}"));
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

/// Push each token chunk, then finish; the deltas of every push, or the error that ended it.
fn run(opts: &ParsingOptions, chunks: &[Vec<u32>]) -> (Vec<Vec<String>>, Option<String>) {
    let thinking = opts.thinking_initial_stage.is_some();
    let mut sp = StreamProcessor::new(chat(thinking), opts, Some(tokenizer()));
    let mut all = Vec::new();
    for ids in chunks {
        match sp.push(InferenceChunk::Tokens {
            token_ids: ids.clone(),
            logprobs: None,
        }) {
            Ok(items) => all.push(deltas(&items)),
            Err(e) => return (all, Some(e.to_string())),
        }
    }
    all.push(deltas(&sp.finish().unwrap()));
    (all, None)
}

fn v(items: &[&[&str]]) -> Vec<Vec<String>> {
    items
        .iter()
        .map(|p| p.iter().map(|s| (*s).to_owned()).collect())
        .collect()
}

/// Token IDs of `s`, where `§` stands for the DSML control token and `¤` for its spelling
/// written out in ordinary tokens.
fn mix(s: &str) -> Vec<u32> {
    let tok = tokenizer();
    let mut ids = Vec::new();
    for (i, seg) in s.split('§').enumerate() {
        if i > 0 {
            ids.push(DSML_ID);
        }
        for (j, sub) in seg.split('¤').enumerate() {
            if j > 0 {
                ids.extend(DSML_PLAIN);
            }
            if !sub.is_empty() {
                ids.extend(tok.encode_with_special(sub).unwrap());
            }
        }
    }
    ids
}

#[test]
fn a_character_unfinished_at_the_end_drops_the_held_chunk() {
    let opts = ParsingOptions::default();
    // The whole chunk that ends in half a character is dropped, `ab` with it.
    let (got, err) = run(&opts, &[vec![A, B], vec![A, B, HALF_CHAR]]);
    assert_eq!(got, v(&[&["ab"], &[], &["fin:stop"]]));
    assert!(err.is_none());
    // Text after the half character completes the chunk: it is written with a replacement
    // character, as before.
    let (got, _) = run(&opts, &[vec![A, HALF_CHAR], vec![B]]);
    assert_eq!(got, v(&[&[], &["a\u{fffd}b"], &["fin:stop"]]));
    // A control token releases what came before it; only the text after it is held.
    let (got, _) = run(&opts, &[vec![A, IMAGE_ID, B, HALF_CHAR]]);
    assert_eq!(got, v(&[&["a", "<｜image｜>"], &["fin:stop"]]));
    // The same with text that completes no character before the finish chunk.
    let (got, _) = run(&opts, &[vec![A, B, RED, HALF_CHAR]]);
    assert_eq!(got, v(&[&[], &["fin:stop"]]));
}

#[test]
fn stop_sequences_do_not_match_inside_or_across_a_control_token() {
    for stop in ["<", "image", "a<｜", "｜>b", ">b"] {
        let opts = ParsingOptions {
            stop_sequences: vec![stop.to_owned()],
            ..ParsingOptions::default()
        };
        let (got, err) = run(&opts, &[vec![A, IMAGE_ID, B], vec![A, IMAGE_ID], vec![B]]);
        assert!(err.is_none(), "{stop:?}");
        assert_eq!(
            got,
            v(&[
                &["a", "<｜image｜>", "b"],
                &["a", "<｜image｜>"],
                &["b"],
                &["fin:stop"]
            ]),
            "{stop:?}"
        );
    }
    // Text on either side still matches.
    let opts = ParsingOptions {
        stop_sequences: vec!["b".to_owned()],
        ..ParsingOptions::default()
    };
    let (got, err) = run(&opts, &[vec![A, IMAGE_ID, B], vec![A]]);
    assert_eq!(got, v(&[&["a", "<｜image｜>", "fin:stop"]]));
    assert_eq!(err.as_deref(), Some("stream processor has finished"));
}

#[test]
fn dsml_tags_written_out_in_ordinary_tokens_are_argument_text() {
    let ids = mix("<§tool_calls>\n<§invoke name=\"get\">\n<§parameter name=\"city\" string=\"true\">Paris</¤parameter>\n<¤parameter name=\"x\">x</§parameter>\n<¤parameter name=\"y\" string=\"true\">1</§parameter>\n</§invoke>\n</§tool_calls>");
    let (got, err) = run(&ParsingOptions::default(), std::slice::from_ref(&ids));
    assert!(err.is_none());
    let want: &[&str] = &[
        "n:get",
        "a:{",
        "a:\"city\"",
        "a:: ",
        "a:\"",
        "a:Paris</｜DSML｜parameter>\\n<｜DSML｜parameter name=\\\"x\\\">x",
        "a:\"",
        "a:, ",
        "a:\"y\"",
        "a:: ",
        "a:\"",
        "a:1",
        "a:\"",
        "a:}",
    ];
    assert_eq!(got, v(&[want, &["fin:stop"]]));
    // One token per push: the written-out tags come through piece by piece, and the closing
    // tag by ID still ends the value.
    let chunks: Vec<Vec<u32>> = ids.iter().map(|i| vec![*i]).collect();
    let (got, _) = run(&ParsingOptions::default(), &chunks);
    let args: String = got
        .iter()
        .flatten()
        .filter_map(|d| d.strip_prefix("a:"))
        .collect();
    assert_eq!(
        args,
        "{\"city\": \"Paris</｜DSML｜parameter>\\n<｜DSML｜parameter name=\\\"x\\\">x\", \"y\": \"1\"}"
    );
}

#[test]
fn closing_tags_written_out_in_ordinary_tokens_are_skipped_between_tags() {
    // Observed on the reference: a closing invoke or calls tag whose marker is written out is
    // stray text, so the invoke stays open (a second invoke tag inside it is stray text too)
    // and the block goes on; opening tags written out are read as tags.
    let pushes = [
        "\n\n<§tool_calls>\n<§invoke name=\"a\">\n",
        "<§parameter name=\"q\" string=\"true\">x</§parameter>\n",
        "</¤parameter>\n</¤invoke>\n",
        "<§invoke name=\"b\">\n",
        "<¤parameter name=\"r\" string=\"true\">y</§parameter>\n",
        "</§invoke>\n",
        "</¤tool_calls>",
        "<¤invoke name=\"c\">\n</§invoke>\n",
        "</§tool_calls>",
        "after",
    ];
    let chunks: Vec<Vec<u32>> = pushes.iter().map(|p| mix(p)).collect();
    let (got, err) = run(&ParsingOptions::default(), &chunks);
    assert!(err.is_none());
    let want: &[&[&str]] = &[
        &["n:a"],
        &["a:{", "a:\"q\"", "a:: ", "a:\"", "a:x", "a:\""],
        &[],
        &[],
        &["a:, ", "a:\"r\"", "a:: ", "a:\"", "a:y", "a:\""],
        &["a:}"],
        &[],
        &["n:c", "a:{}"],
        &[],
        &[],
        &["fin:stop"],
    ];
    assert_eq!(got, v(want));
}

#[test]
fn a_string_value_opening_with_a_lt_slash_token_waits_for_the_next_token() {
    // `true"></` in one push: the `</` could still be the closing tag (if the marker token
    // follows), so the value's opening quote waits, as on the reference.
    let head = mix("\n\n<§tool_calls>\n<§invoke name=\"s\">\n<§parameter name=\"q\" string=\"");
    let tok = tokenizer();
    let attr = tok.encode_with_special("true\"></").unwrap();
    let head_deltas = ["n:s", "a:{", "a:\"q\"", "a:: "];
    let (got, _) = run(
        &ParsingOptions::default(),
        &[head.clone(), attr.clone(), mix("abc</§parameter>\n")],
    );
    assert_eq!(
        got,
        v(&[
            &head_deltas,
            &[],
            &["a:\"", "a:</", "a:abc", "a:\""],
            &["fin:stop"]
        ])
    );
    // The marker token follows: the value is empty.
    let (got, _) = run(
        &ParsingOptions::default(),
        &[head, attr, mix("§parameter>\n")],
    );
    assert_eq!(
        got,
        v(&[&head_deltas, &[], &["a:\"", "a:\""], &["fin:stop"]])
    );
}

#[test]
fn newlines_before_the_think_end_token_are_not_reasoning() {
    let tok = tokenizer();
    let opts = ParsingOptions {
        thinking_initial_stage: Some(ThinkingInitialStage::ReasoningStart),
        ..ParsingOptions::default()
    };
    let ids = tok.encode_with_special(" \n\n</think>The answer").unwrap();
    let (got, _) = run(&opts, std::slice::from_ref(&ids));
    assert_eq!(got, v(&[&["r: ", "The answer"], &["fin:stop"]]));
    let chunks: Vec<Vec<u32>> = ids.iter().map(|i| vec![*i]).collect();
    let (got, _) = run(&opts, &chunks);
    assert_eq!(
        got,
        v(&[&[], &["r: "], &["The"], &[" answer"], &["fin:stop"]])
    );
}

/// `completion_tokens` of the finish chunk after pushing `chunks`.
fn completion_tokens(chunks: &[Vec<u32>]) -> u64 {
    let mut sp = StreamProcessor::new(chat(false), &ParsingOptions::default(), Some(tokenizer()));
    for ids in chunks {
        sp.push(InferenceChunk::Tokens {
            token_ids: ids.clone(),
            logprobs: None,
        })
        .unwrap();
    }
    let items = sp
        .push(InferenceChunk::Finish(InferenceFinishReason::Stop))
        .unwrap();
    let last = items.last().unwrap().to_value();
    last["usage"]["completion_tokens"].as_u64().unwrap()
}

#[test]
fn tokens_waiting_for_the_rest_of_a_character_count_once_parsed() {
    // Dropped at the end: never counted.
    assert_eq!(completion_tokens(&[vec![A, B], vec![A, B, HALF_CHAR]]), 2);
    assert_eq!(completion_tokens(&[vec![A, IMAGE_ID, B, HALF_CHAR]]), 2);
    // Completed (here by a byte that makes it invalid) in a later chunk: counted then.
    assert_eq!(completion_tokens(&[vec![A, HALF_CHAR], vec![B]]), 3);
    // Only the last character decides whether the bytes wait: an unfinished character
    // followed by the start of another still waits.
    assert_eq!(completion_tokens(&[vec![A, HALF_CHAR], vec![HALF_CHAR]]), 0);
}

#[test]
fn a_think_end_token_in_content_ends_the_dropping_of_leading_newlines() {
    // Thinking off: the `</think>` token is dropped, and the newlines after it are content
    // (only the newlines before any output are dropped). Found by the SGLang differential.
    let opts = ParsingOptions::default();
    const THINK_END: u32 = 128822;
    const NEWLINES: u32 = 271;
    const HI: u32 = 23166;
    let (got, _) = run(&opts, &[vec![THINK_END, NEWLINES, HI]]);
    assert_eq!(got, v(&[&["\n\nHi"], &["fin:stop"]]));
    let (got, _) = run(&opts, &[vec![NEWLINES, THINK_END, NEWLINES, HI]]);
    assert_eq!(got, v(&[&["\n\nHi"], &["fin:stop"]]));
    let (got, _) = run(&opts, &[vec![THINK_END], vec![NEWLINES], vec![HI]]);
    assert_eq!(got, v(&[&[], &[], &["\n\n", "Hi"], &["fin:stop"]]));
}

#[test]
fn json_mode_drops_the_log_probabilities_of_text_it_dropped_in_earlier_pushes() {
    // JSON output mode, one token per push (tool calls not parsed, so nothing is held between
    // pushes): the fence tokens are filtered out, and their log probabilities go with them; the
    // first delta of the value carries only its own.
    let opts = ParsingOptions {
        parse_json_output: true,
        parse_tool_calls: false,
        ..ParsingOptions::default()
    };
    let tok = tokenizer();
    let mut sp = StreamProcessor::new(chat(false), &opts, Some(tokenizer()));
    let mut carried = Vec::new();
    for piece in ["```", "json", "\n", "{\"", "a\"", ": 1}"] {
        let ids = tok.encode_with_special(piece).unwrap();
        for v in push_with_logprobs(&mut sp, ids) {
            carried.extend(logprob_tokens(&v));
        }
    }
    assert_eq!(
        carried.first().map(String::as_str),
        Some("{\""),
        "{carried:?}"
    );
    assert!(
        !carried.iter().any(|t| t == "```" || t == "json"),
        "{carried:?}"
    );
}

#[test]
fn a_written_out_bar_after_lt_is_not_an_unfinished_marker_with_token_input() {
    // With token IDs the DSML marker is a token of its own, so `<` then a written-out `｜` is
    // plain text: the newline after it is held like any newline that may precede a block.
    const LT: u32 = 30;
    const BAR: u32 = 28217;
    const NEWLINE: u32 = 201;
    const THINKING: u32 = 77291;
    const GT: u32 = 32;
    let chunks: Vec<Vec<u32>> = [A, LT, BAR, NEWLINE, LT, THINKING, GT]
        .iter()
        .map(|t| vec![*t])
        .collect();
    let (got, err) = run(&ParsingOptions::default(), &chunks);
    assert!(err.is_none());
    let want: &[&[&str]] = &[
        &["a"],
        &[],
        &["<", "｜"],
        &[],
        &[],
        &["\n", "<", "thinking"],
        &[">"],
        &["fin:stop"],
    ];
    assert_eq!(got, v(want));
}

#[test]
fn newlines_before_a_block_after_a_written_out_bar_are_dropped() {
    // `a<｜` then newlines, then a block opened by the DSML token: `<｜` is not an unfinished
    // marker with token input, so every newline before the block is dropped.
    let tok = tokenizer();
    let mut first = vec![A, 30, 28217];
    first.extend(tok.encode_with_special("\n\n\n").unwrap());
    let block = mix("<§tool_calls>\n<§invoke name=\"f\">\n</§invoke>\n</§tool_calls>");
    let (got, err) = run(&ParsingOptions::default(), &[first, block]);
    assert!(err.is_none());
    assert_eq!(got, v(&[&[], &["a<｜", "n:f", "a:{}"], &["fin:stop"]]));
}
