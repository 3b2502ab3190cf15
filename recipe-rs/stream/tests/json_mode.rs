//! JSON output mode against the reference package (deepseek-recipe 0.2.0), each expectation
//! observed on it with the same pushes: a tool-call block is read before the JSON value and
//! after its closing fence but is text inside the value, and stop sequences match the value's
//! text only. Inside the value no marker start is held; a unit waits whole only while its end
//! may begin the closing fence or a stop sequence.

use recipe_core::ParsingOptions;
use recipe_stream::*;
use serde_json::Value;

mod common;
use common::{logprob_tokens, push_with_logprobs, tokenizer};

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

fn json_options(stops: &[&str]) -> ParsingOptions {
    ParsingOptions {
        parse_json_output: true,
        stop_sequences: stops.iter().map(|s| (*s).to_owned()).collect(),
        ..ParsingOptions::default()
    }
}

/// The deltas of every push and of `finish` in JSON mode with `stops`.
fn run(stops: &[&str], pieces: &[&str]) -> Vec<Vec<String>> {
    let mut sp = StreamProcessor::new(chat(), &json_options(stops), None);
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

/// The deltas of every token chunk and of `finish` in JSON mode.
fn run_tokens(chunks: &[&[u32]]) -> Vec<Vec<String>> {
    let mut sp = StreamProcessor::new(chat(), &json_options(&[]), Some(tokenizer()));
    let mut all = Vec::new();
    for ids in chunks {
        let items = sp
            .push(InferenceChunk::Tokens {
                token_ids: ids.to_vec(),
                logprobs: None,
            })
            .unwrap();
        all.push(deltas(&items));
    }
    all.push(deltas(&sp.finish().unwrap()));
    all
}

const VALUE: &str = "{\"k\": 1}";
/// The deltas of `VALUE` pushed alone.
const VALUE_DELTAS: &[&str] = &["{", "\"k\": 1}"];

/// `VALUE_DELTAS`, then the given pushes' deltas.
fn after_value(rest: &[&[&str]]) -> Vec<Vec<String>> {
    let mut all = vec![VALUE_DELTAS];
    all.extend_from_slice(rest);
    v(&all)
}

#[test]
fn the_open_value_holds_no_marker_start() {
    // A start of `<｜DSML｜` or `</think>` goes out at once: no block or reasoning end is read
    // inside the value.
    let got = run(&[], &[VALUE, " ok", "<", "｜DSML｜ calls>", "\n", "x"]);
    let want = after_value(&[
        &[" ok"],
        &["<"],
        &["｜DSML｜ calls>"],
        &[],
        &["\n", "x"],
        &["fin:stop"],
    ]);
    assert_eq!(got, want);
    let got = run(&[], &[VALUE, " ok", "<｜DS", "ML｜ calls>"]);
    let want = after_value(&[&[" ok"], &["<｜DS"], &["ML｜ calls>"], &["fin:stop"]]);
    assert_eq!(got, want);
    let got = run(&[], &[VALUE, "</", "thi", "nk>x", "y"]);
    let want = after_value(&[&["</"], &["thi"], &["nk>x"], &["y"], &["fin:stop"]]);
    assert_eq!(got, want);
    let got = run(&[], &["[1", "\n", "<", "｜DSML｜ calls>", "x"]);
    let want = v(&[
        &["[", "1"],
        &[],
        &["\n", "<"],
        &["｜DSML｜ calls>"],
        &["x"],
        &["fin:stop"],
    ]);
    assert_eq!(got, want);
}

#[test]
fn a_unit_of_the_value_waits_whole_while_its_end_may_begin_the_closing_fence() {
    // Only the units from the one whose end may begin `\n```` wait, not a whole run of
    // newlines.
    let got = run(
        &[],
        &[VALUE, " ok", "\n", "\n", "<", "｜DSML｜ calls>", "\n", "x"],
    );
    let want = after_value(&[
        &[" ok"],
        &[],
        &["\n"],
        &["\n", "<"],
        &["｜DSML｜ calls>"],
        &[],
        &["\n", "x"],
        &["fin:stop"],
    ]);
    assert_eq!(got, want);
    let got = run(&[], &[VALUE, "\n", "a\n", "\nb", "\n\n", "c"]);
    let want = after_value(&[
        &[],
        &["\n"],
        &["a\n", "\nb"],
        &[],
        &["\n\n", "c"],
        &["fin:stop"],
    ]);
    assert_eq!(got, want);
    // Inside a fence too; the text before the closing fence goes out when it completes.
    let got = run(&[], &["```json\n{", "a\n", "b", "c\n`", "`", "`", "x"]);
    let want = v(&[
        &["{"],
        &[],
        &["a\n", "b"],
        &[],
        &[],
        &["c"],
        &[" "],
        &["fin:stop"],
    ]);
    assert_eq!(got, want);
    // The value opens inside a unit: the rest of that unit is a unit of its own.
    let got = run(&[], &[&format!("{VALUE}\n"), "x"]);
    assert_eq!(got, v(&[&["{"], &["\"k\": 1}\n", "x"], &["fin:stop"]]));
    let mention = "ok<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n";
    let got = run(&[], &[&format!("Sure: {VALUE} {mention}"), "x"]);
    let rest = format!("\"k\": 1}} {mention}");
    assert_eq!(got, v(&[&[" ", "{"], &[&rest, "x"], &["fin:stop"]]));
}

#[test]
fn a_bare_value_ends_at_a_closing_fence() {
    let got = run(&[], &[VALUE, "\n", "`", "``", "x"]);
    assert_eq!(got, after_value(&[&[], &[], &[], &[" "], &["fin:stop"]]));
    let got = run(&[], &[VALUE, "a\n```b"]);
    assert_eq!(got, after_value(&[&["a", " "], &["fin:stop"]]));
    // After it a tool-call block is read, from the rest of the unit that closed the value too
    // (this bare generator reports `stop` after calls, as in the tests above).
    let block =
        "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n</｜DSML｜ invoke>\n</｜DSML｜ calls>";
    let got = run(&[], &[VALUE, "\n```", block, "x"]);
    let want = after_value(&[&[], &["n:f", "a:{}"], &[], &["fin:stop"]]);
    assert_eq!(got, want);
    let got = run(&[], &[VALUE, &format!("\n```{block}"), "x"]);
    let want = after_value(&[&["n:f", "a:{}"], &[], &["fin:stop"]]);
    assert_eq!(got, want);
}

#[test]
fn a_unit_that_may_begin_a_stop_sequence_waits_whole() {
    let got = run(&["END"], &[VALUE, "aE", "N", "x", "END"]);
    let want = after_value(&[&[], &[], &["aE", "N", "x"], &["fin:stop"], &[]]);
    assert_eq!(got, want);
    let got = run(&["b\n"], &[VALUE, "a\n", "b", "\n`"]);
    let want = after_value(&[&[], &["a\n"], &["fin:stop"], &[]]);
    assert_eq!(got, want);
}

#[test]
fn prose_whose_end_may_begin_a_fence_waits_whole() {
    let got = run(&[], &["Here:\n```", "json\n{\"k\": 1}", "x"]);
    let want = v(&[&[], &[" ", "{\"k\": 1}"], &["x"], &["fin:stop"]]);
    assert_eq!(got, want);
    let got = run(&[], &["Sure `", "`", "`json\n[1]"]);
    assert_eq!(got, v(&[&[], &[], &[" ", "[1]"], &["fin:stop"]]));
}

#[test]
fn control_tokens_inside_the_value_are_text() {
    // `{"k": 1}` in tokens, `<`, the DSML token, ` calls>`, `x`, `\n` and `</think>`.
    const VALUE_IDS: &[u32] = &[24313, 77, 3362, 223, 19, 95];
    const LT: u32 = 30;
    const DSML: u32 = 128825;
    const CALLS: &[u32] = &[10699, 32];
    const X: u32 = 90;
    const NL: u32 = 201;
    const THINK_END: u32 = 128822;
    let dsml_calls = [&[DSML][..], CALLS].concat();
    let got = run_tokens(&[VALUE_IDS, &[LT], &dsml_calls, &[X]]);
    let want = after_value(&[&["<"], &["｜DSML｜", " calls>"], &["x"], &["fin:stop"]]);
    assert_eq!(got, want);
    let got = run_tokens(&[VALUE_IDS, &[THINK_END], &[X]]);
    assert_eq!(got, after_value(&[&["</think>"], &["x"], &["fin:stop"]]));
    let got = run_tokens(&[VALUE_IDS, &[NL], &[NL], &[LT], &[X]]);
    let want = after_value(&[&[], &["\n"], &["\n", "<"], &["x"], &["fin:stop"]]);
    assert_eq!(got, want);
}

/// Each push's content deltas with the tokens of the log probabilities they carry; every push
/// is a list of pieces, each encoded on its own.
fn run_logprobs(pushes: &[&[&str]]) -> Vec<Vec<(String, Vec<String>)>> {
    run_logprobs_then(pushes, false)
}

/// [`run_logprobs`], with the deltas of `finish` last when `finish` is set.
fn run_logprobs_then(pushes: &[&[&str]], finish: bool) -> Vec<Vec<(String, Vec<String>)>> {
    let content = |v: &Value| {
        v["choices"][0]["delta"]["content"]
            .as_str()
            .filter(|t| !t.is_empty())
            .map(|text| (text.to_owned(), logprob_tokens(v)))
    };
    let opts = ParsingOptions {
        parse_tool_calls: false,
        ..json_options(&[])
    };
    let tok = tokenizer();
    let mut sp = StreamProcessor::new(chat(), &opts, Some(tokenizer()));
    let mut all = Vec::new();
    for pieces in pushes {
        let mut ids = Vec::new();
        for p in *pieces {
            ids.extend(tok.encode_with_special(p).unwrap());
        }
        let got = push_with_logprobs(&mut sp, ids);
        all.push(got.iter().filter_map(content).collect());
    }
    if finish {
        let items = sp.finish().unwrap();
        all.push(
            items
                .iter()
                .map(|i| i.to_value())
                .filter_map(|v| content(&v))
                .collect(),
        );
    }
    all
}

fn lp(text: &str, tokens: &[&str]) -> (String, Vec<String>) {
    (
        text.to_owned(),
        tokens.iter().map(|t| (*t).to_owned()).collect(),
    )
}

#[test]
fn held_prose_keeps_its_own_log_probabilities() {
    // Prose held while a fence may begin: its space carries the prose's log probabilities when
    // it goes out with the next push; the newline that completes the fence carries nothing.
    let got = run_logprobs(&[&["Here", ":\n", "```", "json"], &["\n"], &["{\"", "a"]]);
    let want = vec![
        vec![],
        vec![lp(" ", &["Here", ":\n", "```", "json"])],
        vec![lp("{\"a", &["{\"", "a"])],
    ];
    assert_eq!(got, want);
    // A held fence start without prose goes out as nothing: its log probabilities are dropped.
    let got = run_logprobs(&[&["```"], &["json", "\n", "{\"", "k"]]);
    let want = vec![vec![], vec![lp("{\"k", &["json", "\n", "{\"", "k"])]];
    assert_eq!(got, want);
    // The unit that closes the fence repeats its log probabilities on the value's part and on
    // the space for the text after the fence.
    let got = run_logprobs(&[&["```", "json", "\n", "[", "1"], &["]\n", "```\n", "Done"]]);
    let rest = ["]\n", "```\n", "Done"];
    let want = vec![
        vec![lp("[1", &["```", "json", "\n", "[", "1"])],
        vec![lp("]", &rest), lp(" ", &rest)],
    ];
    assert_eq!(got, want);
}

#[test]
fn a_unit_that_goes_on_with_a_held_fence_keeps_its_log_probabilities_to_its_push() {
    // Found by the strict differential (seed 44 `random/900`, seed 55 `random/932`), pinned to
    // the official package: prose and a fence start held in one push, the fence's `json` in the
    // next. The space goes out with the held prose's log probabilities only; those of `json`
    // rode on nothing in their own push and are dropped.
    let got = run_logprobs(&[
        &["Here", ":\n", "```"],
        &["json"],
        &["\n", "{\"", "a", "\":"],
    ]);
    let want = vec![
        vec![],
        vec![],
        vec![
            lp(" ", &["Here", ":\n", "```"]),
            lp("{\"a\":", &["\n", "{\"", "a", "\":"]),
        ],
    ];
    assert_eq!(got, want);
    // The same with the fence spread over three pushes.
    let got = run_logprobs(&[&["Here", ":\n", "`"], &["``"], &["json"], &["\n{\"a\":"]]);
    assert_eq!(
        got[3],
        vec![
            lp(" ", &["Here", ":\n", "`"]),
            lp("{\"a\":", &["\n", "{\"", "a", "\":"])
        ]
    );
    // With the rest of the fence in the push that opens the value, they ride on the value's
    // first delta.
    let got = run_logprobs(&[&["Here", ":\n", "```"], &["json", "\n", "{\"", "a", "\":"]]);
    let want = vec![
        vec![],
        vec![
            lp(" ", &["Here", ":\n", "```"]),
            lp("{\"a\":", &["json", "\n", "{\"", "a", "\":"]),
        ],
    ];
    assert_eq!(got, want);
}

#[test]
fn held_prose_at_the_end_keeps_the_log_probabilities_in_order() {
    // The stream ends while prose and a fence start are held and the fence's next unit came in
    // a later push: the one space carries the held units' log probabilities, then the later
    // unit's (the official package writes a space for each push, with the same log
    // probabilities in the same order: deviation 5).
    let got = run_logprobs_then(&[&["Here", ":\n", "```"], &["json"]], true);
    let want = vec![
        vec![],
        vec![],
        vec![lp(" ", &["Here", ":\n", "```", "json"])],
    ];
    assert_eq!(got, want);
}
