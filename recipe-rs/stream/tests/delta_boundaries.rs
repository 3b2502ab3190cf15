//! Delta boundaries found by the random differential against the reference package
//! (tests/conformance/diff_stream_random.py): which pushed text units are released at once and
//! which are held until later input decides. Each expectation was observed on the reference.

use recipe_core::{ParsingOptions, ThinkingInitialStage};
use recipe_stream::*;
use serde_json::Value;

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

/// The text deltas of every push (`r:` marks reasoning), after a `ready` chunk.
fn deltas(stage: Option<ThinkingInitialStage>, pieces: &[&str]) -> Vec<Vec<String>> {
    let opts = ParsingOptions {
        thinking_initial_stage: stage,
        ..ParsingOptions::default()
    };
    let mut sp = StreamProcessor::new(chat(stage.is_some()), &opts, None);
    sp.push(InferenceChunk::Ready {
        prompt_usage: None,
        system_fingerprint: None,
    })
    .unwrap();
    let text_of = |items: Vec<StreamItem>| -> Vec<String> {
        items
            .iter()
            .filter_map(|i| {
                let v = i.to_value();
                let choice = &v["choices"][0];
                let d = &choice["delta"];
                if d.get("role").is_some() || !choice["finish_reason"].is_null() {
                    return None;
                }
                if let Some(Value::String(r)) = d.get("reasoning_content") {
                    return Some(format!("r:{r}"));
                }
                d["content"].as_str().map(str::to_owned)
            })
            .collect()
    };
    let mut all: Vec<Vec<String>> = pieces
        .iter()
        .map(|p| {
            text_of(
                sp.push(InferenceChunk::Text {
                    content: (*p).to_owned(),
                    token_count: 1,
                })
                .unwrap(),
            )
        })
        .collect();
    all.push(text_of(sp.finish().unwrap()));
    all
}

fn v(items: &[&[&str]]) -> Vec<Vec<String>> {
    items
        .iter()
        .map(|p| p.iter().map(|s| (*s).to_owned()).collect())
        .collect()
}

#[test]
fn newline_that_ends_an_unfinished_dsml_marker_is_released_with_it() {
    let got = deltas(None, &["a", "<", "<", "\n", "\n", "\n", "L"]);
    let want: &[&[&str]] = &[
        &["a"],
        &[],
        &["<"],
        &["<", "\n"],
        &[],
        &[],
        &["\n", "\n", "L"],
        &[],
    ];
    assert_eq!(got, v(want));
    // Only the first newline is plain text; a second one may lead into a block again.
    let got = deltas(None, &["a", "<", "\n\n", "\n", "L"]);
    let want: &[&[&str]] = &[&["a"], &[], &["<"], &[], &["\n\n", "\n", "L"], &[]];
    assert_eq!(got, v(want));
}

#[test]
fn newlines_before_an_unfinished_think_end_are_held_in_reasoning() {
    let got = deltas(
        Some(ThinkingInitialStage::ReasoningContinuation),
        &["\n", "\n", "<", "/", "<", "/", "t"],
    );
    let want: &[&[&str]] = &[
        &[],
        &[],
        &[],
        &[],
        &["r:\n", "r:\n", "r:<", "r:/"],
        &[],
        &[],
        &["r:<", "r:/", "r:t"],
    ];
    assert_eq!(got, v(want));
}

#[test]
fn newline_that_ends_an_unfinished_think_end_is_reasoning_text() {
    let start = Some(ThinkingInitialStage::ReasoningStart);
    let got = deltas(start, &["a</", "\n", "\n", "</think>", "L"]);
    let want: &[&[&str]] = &[&[], &["r:a</"], &[], &["r:\n"], &["L"], &[]];
    assert_eq!(got, v(want));
    let got = deltas(start, &["a</\n", "</think>", "L"]);
    let want: &[&[&str]] = &[&[], &["r:a</\n"], &["L"], &[]];
    assert_eq!(got, v(want));
    let got = deltas(start, &["a<", "\n", "\n", "</think>", "L"]);
    let want: &[&[&str]] = &[&[], &["r:a<", "r:\n"], &[], &[], &["L"], &[]];
    assert_eq!(got, v(want));
}

#[test]
fn an_empty_text_chunk_is_an_empty_delta_in_its_place() {
    let got = deltas(None, &["a", "", "b"]);
    assert_eq!(got, v(&[&["a"], &[""], &["b"], &[]]));
    let got = deltas(None, &["a", "\n", "", "b"]);
    assert_eq!(got, v(&[&["a"], &[], &[], &["\n", "", "b"], &[]]));
    let got = deltas(None, &["a", "<", "", "b"]);
    assert_eq!(got, v(&[&["a"], &[], &[], &["<", "", "b"], &[]]));
}

#[test]
fn empty_chunks_at_the_start_wait_for_the_first_text() {
    assert_eq!(
        deltas(None, &["", "", "b"]),
        v(&[&[], &[], &["", "", "b"], &[]])
    );
    // Once a leading newline was dropped, the empty chunks around it are dropped too.
    assert_eq!(deltas(None, &["", "\n", "b"]), v(&[&[], &[], &["b"], &[]]));
    assert_eq!(deltas(None, &["\n", "", "b"]), v(&[&[], &[], &["b"], &[]]));
    let start = Some(ThinkingInitialStage::ReasoningStart);
    assert_eq!(deltas(start, &["", "a"]), v(&[&[], &["r:", "r:a"], &[]]));
    // After the end of reasoning they are dropped.
    let got = deltas(start, &["a", "", "</think>", "", "b"]);
    assert_eq!(got, v(&[&["r:a"], &["r:"], &[], &[], &["b"], &[]]));
}

#[test]
fn an_empty_first_token_chunk_does_not_open_the_stream() {
    let opts = ParsingOptions::default();
    let tok = recipe_core::Tokenizer::from_file(
        std::env::var("DEEPSEEK_TOKENIZER_JSON").expect("DEEPSEEK_TOKENIZER_JSON"),
    )
    .expect("tokenizer");
    let mut sp = StreamProcessor::new(chat(false), &opts, Some(tok));
    assert!(sp
        .push(InferenceChunk::Tokens {
            token_ids: vec![],
            logprobs: None
        })
        .unwrap()
        .is_empty());
    assert!(!sp
        .push(InferenceChunk::Tokens {
            token_ids: vec![64],
            logprobs: None
        })
        .unwrap()
        .is_empty());
}

#[test]
fn a_first_token_chunk_holding_part_of_a_character_does_not_open_the_stream() {
    let tok = recipe_core::Tokenizer::from_file(
        std::env::var("DEEPSEEK_TOKENIZER_JSON").expect("DEEPSEEK_TOKENIZER_JSON"),
    )
    .expect("tokenizer");
    let ids = tok.encode_with_special("\u{2028}").unwrap();
    assert_eq!(ids.len(), 2, "U+2028 is split over two byte tokens");
    let mut sp = StreamProcessor::new(chat(false), &ParsingOptions::default(), Some(tok));
    let mut push = |ids: &[u32]| -> Vec<Value> {
        sp.push(InferenceChunk::Tokens {
            token_ids: ids.to_vec(),
            logprobs: None,
        })
        .unwrap()
        .iter()
        .map(|i| i.to_value()["choices"][0]["delta"].clone())
        .collect()
    };
    assert!(push(&ids[..1]).is_empty());
    let got = push(&ids[1..]);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0]["role"], "assistant");
    assert_eq!(got[1]["content"], "\u{2028}");
}

fn deltas_with_stops(
    stage: Option<ThinkingInitialStage>,
    stops: &[&str],
    pieces: &[&str],
) -> (Vec<Vec<String>>, Option<String>) {
    let opts = ParsingOptions {
        thinking_initial_stage: stage,
        stop_sequences: stops.iter().map(|s| (*s).to_owned()).collect(),
        ..ParsingOptions::default()
    };
    let mut sp = StreamProcessor::new(chat(stage.is_some()), &opts, None);
    let mut all = Vec::new();
    for p in pieces {
        match sp.push(InferenceChunk::Text {
            content: (*p).to_owned(),
            token_count: 1,
        }) {
            Ok(items) => all.push(
                items
                    .iter()
                    .map(|i| i.to_value()["choices"][0]["finish_reason"].clone())
                    .filter_map(|f| f.as_str().map(str::to_owned))
                    .collect(),
            ),
            Err(e) => return (all, Some(e.to_string())),
        }
    }
    (all, None)
}

#[test]
fn a_newline_stop_sequence_matches_a_leading_newline() {
    let (got, err) = deltas_with_stops(None, &["\n"], &["\n", "b"]);
    assert_eq!(got, v(&[&["stop"]]));
    assert_eq!(err.as_deref(), Some("stream processor has finished"));
    let start = Some(ThinkingInitialStage::ReasoningStart);
    let (got, err) = deltas_with_stops(start, &["\n"], &["a</think>", "\n", "b"]);
    assert_eq!(got, v(&[&[], &["stop"]]));
    assert!(err.is_some());
    // Longer stop sequences do not match inside the dropped newlines.
    let (got, err) = deltas_with_stops(start, &["\n\n", "\nb"], &["a</think>", "\n\n", "b"]);
    assert_eq!(got, v(&[&[], &[], &[]]));
    assert!(err.is_none());
}

#[test]
fn an_empty_first_chunk_waits_for_text_without_newline_stripping() {
    let stage = Some(ThinkingInitialStage::ContentContinuation);
    assert_eq!(deltas(stage, &["", "b"]), v(&[&[], &["", "b"], &[]]));
    // With no text at all it never shows.
    assert_eq!(deltas(stage, &[""]), v(&[&[], &[]]));
}

/// The tool-call argument deltas of every push (chat), after a `ready` chunk.
fn arg_deltas(pieces: &[&str]) -> Vec<Vec<String>> {
    let mut sp = StreamProcessor::new(chat(false), &ParsingOptions::default(), None);
    sp.push(InferenceChunk::Ready {
        prompt_usage: None,
        system_fingerprint: None,
    })
    .unwrap();
    let args_of = |items: Vec<StreamItem>| -> Vec<String> {
        items
            .iter()
            .filter_map(|i| {
                let v = i.to_value();
                let call = &v["choices"][0]["delta"]["tool_calls"][0];
                if call.get("id").is_some() {
                    return None;
                }
                call["function"]["arguments"].as_str().map(str::to_owned)
            })
            .collect()
    };
    let mut all: Vec<Vec<String>> = pieces
        .iter()
        .map(|p| {
            args_of(
                sp.push(InferenceChunk::Text {
                    content: (*p).to_owned(),
                    token_count: 1,
                })
                .unwrap(),
            )
        })
        .collect();
    all.push(args_of(sp.finish().unwrap()));
    all
}

const CALL: &str = "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n";

#[test]
fn a_closing_tag_begun_in_an_earlier_push_counts_before_its_name() {
    // Begun in an earlier push, the tag counts once `</｜DSML｜` is complete, whatever follows.
    for (a, b) in [
        ("</｜DS", "ML｜in"),
        ("<", "/｜DSML｜inv"),
        ("</｜DSML", "｜inv"),
    ] {
        let first = format!("{CALL}{a}");
        let got = arg_deltas(&[&first, b, "voke>"]);
        assert_eq!(got, v(&[&[], &["{}"], &[], &[]]), "{a:?} {b:?}");
    }
    let first = format!(
        "{CALL}<｜DSML｜parameter name=\"a\" string=\"true\">x</｜DSML｜parameter>\n</｜DS"
    );
    let got = arg_deltas(&[&first, "ML｜inv", "oke>"]);
    assert_eq!(
        got,
        v(&[&["{", "\"a\"", ": ", "\"", "x", "\""], &["}"], &[], &[]])
    );
    // The same for the tag that ends a parameter value.
    let head = format!("{CALL}<｜DSML｜parameter name=\"a\" string=\"true\">x");
    for (a, b) in [("</｜DS", "ML｜param"), ("<", "/｜DSML｜param")] {
        let first = format!("{head}{a}");
        let got = arg_deltas(&[&first, b, "eter>"]);
        assert_eq!(got[1], ["x", "\""], "{a:?} {b:?}");
    }
}

#[test]
fn a_closing_tag_begun_in_this_push_waits_for_its_end_when_a_name_follows() {
    for a in ["", "\n"] {
        let first = format!("{CALL}{a}");
        let got = arg_deltas(&[&first, "</｜DSML｜inv", "oke>"]);
        assert_eq!(got, v(&[&[], &[], &["{}"], &[]]), "{a:?}");
    }
    let first = format!("{CALL}<｜DSML｜parameter name=\"a\" string=\"true\">x");
    let got = arg_deltas(&[&first, "</｜DSML｜param", "eter>"]);
    assert_eq!(got[1..], v(&[&[], &["\""], &[]]));
    // Once waiting, the tag goes on waiting for its `>` in later pushes.
    let got = arg_deltas(&[&first, "</｜DSML｜pa", "ram", "eter>"]);
    assert_eq!(got[1..], v(&[&[], &[], &["\""], &[]]));
}

#[test]
fn a_string_value_opens_at_once_when_its_attribute_came_in_an_earlier_push() {
    let close = "</｜DSML｜parameter>\n</｜DSML｜invoke>";
    let head = format!("{CALL}<｜DSML｜parameter name=\"q\" ");
    let open: &[&str] = &["{", "\"q\"", ": "];
    // `string="t` already seen: the quote goes out with the tag's `>`, the `<` waits.
    for (a, b) in [
        ("string=\"true", "\"><"),
        ("string=\"t", "rue\"><"),
        ("string=\"true\"", "><"),
    ] {
        let first = format!("{head}{a}");
        let got = arg_deltas(&[&first, b, "b", close]);
        assert_eq!(
            got,
            v(&[open, &["\""], &["<", "b"], &["\"", "}"], &[]]),
            "{a:?} {b:?}"
        );
    }
    // The attribute value starts in the same push as the `>`: the quote waits too.
    for (a, b) in [
        ("string=\"", "true\"><"),
        ("string", "=\"true\"><"),
        ("", "string=\"true\"><"),
    ] {
        let first = format!("{head}{a}");
        let got = arg_deltas(&[&first, b, "b", close]);
        assert_eq!(
            got,
            v(&[open, &[], &["\"", "<", "b"], &["\"", "}"], &[]]),
            "{a:?} {b:?}"
        );
    }
}

#[test]
fn only_the_tag_begun_in_an_earlier_push_opens_its_value_at_once() {
    // `string="t` of the first parameter came in an earlier push; the second parameter's tag
    // comes whole in the push that ends the first, so its quote waits like any other (found
    // by the random differential, seed 22).
    let close = "</｜DSML｜parameter>\n</｜DSML｜invoke>";
    let first = format!("{CALL}<｜DSML｜parameter name=\"q\" string=\"t");
    let second = "rue\">x</｜DSML｜parameter>\n<｜DSML｜parameter name=\"r\" string=\"true\"><";
    let got = arg_deltas(&[&first, second, "b", close]);
    assert_eq!(got[1].first().map(String::as_str), Some("\""));
    assert_eq!(got[1].last().map(String::as_str), Some(": "), "{got:?}");
    assert_eq!(got[2], ["\"", "<", "b"]);
}

#[test]
fn a_closing_tag_without_its_gt_ends_at_the_next_marker() {
    // Pinned to the official package (found by the random differential, seed 21): the skip to
    // a closing tag's `>` stops at the next `<｜DSML｜` or `</｜DSML｜`, which is read as a tag.
    let head = format!("{CALL}<｜DSML｜parameter name=\"k\" string=\"false\">null");
    let tail = "</｜DSML｜parameter</｜DSML｜a < b and c > d";
    let mut pieces = vec![head.clone()];
    pieces.extend(tail.chars().map(String::from));
    let got = arg_deltas(&pieces.iter().map(String::as_str).collect::<Vec<_>>());
    let closed = got.iter().position(|p| p.iter().any(|a| a == "}"));
    // Piece 25 is the `｜` that completes the second marker.
    assert_eq!(closed, Some(25), "{got:?}");
    assert_eq!(got.concat().concat(), "{\"k\": null}");

    let two = format!(
        "{CALL}<｜DSML｜parameter name=\"a\" string=\"true\">v</｜DSML｜parameter <｜DSML｜parameter \
         name=\"b\" string=\"true\">w</｜DSML｜parameter>\n</｜DSML｜invoke>"
    );
    let pieces: Vec<String> = two.chars().map(String::from).collect();
    let got = arg_deltas(&pieces.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(got.concat().concat(), "{\"a\": \"v\", \"b\": \"w\"}");
}

#[test]
fn a_string_value_opens_at_a_token_holding_the_tags_end_and_a_lt() {
    let tok = recipe_core::Tokenizer::from_file(
        std::env::var("DEEPSEEK_TOKENIZER_JSON").expect("DEEPSEEK_TOKENIZER_JSON"),
    )
    .expect("tokenizer");
    let enc = |s: &str| tok.encode_with_special(s).unwrap();
    let head = enc(&format!(
        "{CALL}<｜DSML｜parameter name=\"q\" string=\"true"
    ));
    let tag_end = enc("\"><");
    assert_eq!(tag_end.len(), 1, "`\"><` is one token");
    let mut sp = StreamProcessor::new(chat(false), &ParsingOptions::default(), Some(tok.clone()));
    let mut push = |ids: Vec<u32>| -> Vec<String> {
        sp.push(InferenceChunk::Tokens {
            token_ids: ids,
            logprobs: None,
        })
        .unwrap()
        .iter()
        .filter_map(|i| {
            let v = i.to_value();
            let call = &v["choices"][0]["delta"]["tool_calls"][0];
            call["function"]["arguments"].as_str().map(str::to_owned)
        })
        .collect()
    };
    push(head.clone());
    // `true` came earlier: the quote goes out with the `"><` token, the `<` waits.
    assert_eq!(push(tag_end.clone()), ["\""]);
    assert_eq!(push(enc("b")), ["<", "b"]);
    // `true` and `"><` in one push: the quote waits with the `<`.
    let mut sp = StreamProcessor::new(chat(false), &ParsingOptions::default(), Some(tok.clone()));
    let mut push = |ids: Vec<u32>| -> usize {
        sp.push(InferenceChunk::Tokens {
            token_ids: ids,
            logprobs: None,
        })
        .unwrap()
        .len()
    };
    let (last, first) = head.split_last().unwrap();
    push(first.to_vec());
    assert_eq!(push(vec![*last, tag_end[0]]), 0);
}

#[test]
fn a_closing_tag_counts_once_its_name_can_no_longer_match() {
    let param = "<｜DSML｜parameter name=\"q\" string=\"true\">x</｜DSML｜parameter>\n";
    // In an invoke: only what can still become `invoke`, whitespace and `>` waits.
    for (tail, waits) in [
        ("invoke", true),
        ("i", true),
        ("invoke ", true),
        ("invoke x", false),
        ("in-", false),
        ("inVoke", false),
        ("param", false),
        ("9", false),
        ("<｜DSML｜x", false),
    ] {
        let first = format!("{CALL}{param}</｜DSML｜{tail}");
        let got = arg_deltas(&[&first, "y"]);
        let closed: &[&str] = &["}"];
        let (now, later) = if waits {
            (&[][..], closed)
        } else {
            (closed, &[][..])
        };
        assert_eq!(got[0][6..], *now, "{tail:?}");
        assert_eq!(got[1], later, "{tail:?}");
    }
    // After a value: the same with `parameter`.
    let head = format!("{CALL}<｜DSML｜parameter name=\"q\" string=\"true\">x");
    for (tail, waits) in [
        ("p", true),
        ("parameter ", true),
        ("pa-", false),
        ("inv", false),
    ] {
        let first = format!("{head}</｜DSML｜{tail}");
        let got = arg_deltas(&[&first, "y"]);
        let quote: &[&str] = &["\""];
        let (now, later) = if waits {
            (&[][..], quote)
        } else {
            (quote, &[][..])
        };
        assert_eq!(got[0][5..], *now, "{tail:?}");
        assert_eq!(got[1], later, "{tail:?}");
    }
}

#[test]
fn the_end_of_the_stream_settles_what_a_block_held_back() {
    // A closing tag still waiting for its name counts.
    let got = arg_deltas(&[&format!("{CALL}</｜DSML｜invoke")]);
    assert_eq!(got, v(&[&[], &["{}"]]));
    let got = arg_deltas(&[
        &format!("{CALL}<｜DSML｜parameter name=\"q\" string=\"true\">ab"),
        "</｜DSML｜parameter",
    ]);
    assert_eq!(got[1..], v(&[&[], &["\""]]));
    // Value text held for a possible closing tag is written out, per pushed unit.
    let got = arg_deltas(&[
        &format!("{CALL}<｜DSML｜parameter name=\"q\" string=\"true\">ab"),
        "</｜DS",
    ]);
    assert_eq!(got[1..], v(&[&[], &["</｜DS"]]));
    let got = arg_deltas(&[&format!(
        "{CALL}<｜DSML｜parameter name=\"q\" string=\"false\">ab<"
    )]);
    assert_eq!(got, v(&[&["{", "\"q\"", ": "], &["ab<"]]));
    // A `string="true"` value not opened yet opens first.
    let got = arg_deltas(&[&format!(
        "{CALL}<｜DSML｜parameter name=\"q\" string=\"true\"><"
    )]);
    assert_eq!(got, v(&[&["{", "\"q\"", ": "], &["\"", "<"]]));
    // An unfinished marker between tags is dropped.
    let got = arg_deltas(&[&format!("{CALL}</｜DSM")]);
    assert_eq!(got, v(&[&[], &[]]));
}

#[test]
fn a_newline_after_an_unfinished_think_end_spread_over_units_is_released_at_the_next_one() {
    // `<` and `/` arrive as separate units: together they are the unfinished spelling, so the
    // newline after them is reasoning text, released once the next `</` shows it cannot end
    // the reasoning.
    let got = deltas(
        Some(ThinkingInitialStage::ReasoningStart),
        &["x", "<", "/", "\n", "<", "/", "t", "q"],
    );
    let want: &[&[&str]] = &[
        &["r:x"],
        &[],
        &[],
        &["r:<", "r:/"],
        &[],
        &["r:\n"],
        &[],
        &["r:<", "r:/", "r:t", "r:q"],
        &[],
    ];
    assert_eq!(got, v(want));
}

#[test]
fn the_newline_after_an_unfinished_think_end_begun_in_a_released_unit_is_reasoning() {
    // `</t` goes out before `hink` completes the unfinished spelling: the newline after it is
    // still reasoning text, the other newlines before the real `</think>` end the reasoning.
    let got = deltas(
        Some(ThinkingInitialStage::ReasoningStart),
        &["\n</t", "hink\n\n\n</thin", "k>\nx"],
    );
    let want: &[&[&str]] = &[&[], &["r:</t"], &["r:hink\n", "x"], &[]];
    assert_eq!(got, v(want));
}
