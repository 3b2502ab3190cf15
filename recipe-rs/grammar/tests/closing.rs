//! The closing planner: the end it finds is valid from any state, and a matcher given a token
//! budget ends every output in its grammar within that budget, whatever the sampler picks.

mod common;

use common::{chat, eos, grammar, ids};
use recipe_grammar::OutputGrammar;
use serde_json::{json, Value};

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 100, "maximum": 900},
                "opts": {"type": "object", "properties": {
                    "a": {"type": "string", "maxLength": 5},
                    "b": {"type": "array", "items": {"type": "number"}, "minItems": 1},
                    "c": {"enum": ["north", "south"]}},
                    "required": ["a", "b", "c"]}},
            "required": ["city", "opts", "days"]}}},
        {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}
    ])
}

fn body(model: &str, extra: Value) -> Value {
    let mut body = json!({
        "model": model,
        "messages": [{"role": "user", "content": "weather? json"}],
        "thinking": {"type": "disabled"},
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

/// Grammars of every kind the planner must close, both dialects.
fn grammars() -> Vec<(String, OutputGrammar)> {
    let schema = json!({"type": "object", "properties": {
        "n": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        "inner": {"type": "object", "properties": {"k": {"const": "v"}}, "required": ["k"]}},
        "required": ["n", "tags", "inner"]});
    let mut out = Vec::new();
    for model in ["DeepSeek-V4.1-Flash", "DeepSeek-V4-Pro"] {
        for (name, extra) in [
            ("auto", json!({"tools": tools()})),
            (
                "required",
                json!({"tools": tools(), "tool_choice": "required"}),
            ),
            (
                "named",
                json!({"tools": tools(), "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
            ),
            (
                "one call",
                json!({"tools": tools(), "tool_choice": "required", "parallel_tool_calls": false}),
            ),
            (
                "thinking auto",
                json!({"tools": tools(), "thinking": {"type": "enabled"}}),
            ),
            (
                "json_schema",
                json!({"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}}),
            ),
            (
                "json_object thinking",
                json!({"response_format": {"type": "json_object"}, "thinking": {"type": "enabled"}}),
            ),
        ] {
            out.push((
                format!("{model} {name}"),
                grammar(&chat(body(model, extra))),
            ));
        }
    }
    out
}

/// A small deterministic generator (no dependency): the sampler of these tests.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

/// The end the planner finds after `prefix` (at most `limit` tokens): the matcher is unchanged
/// by the search, accepts the end, then EOS. Its length.
fn end_after(g: &OutputGrammar, prefix: &str, limit: usize) -> usize {
    let mut m = g.matcher();
    let prefix_ids = ids(prefix);
    assert_eq!(
        m.accept_tokens(&prefix_ids).unwrap(),
        prefix_ids.len(),
        "{prefix:?}"
    );
    let end = m
        .closing_tokens(limit)
        .unwrap_or_else(|| panic!("no end from {prefix:?}"));
    assert_eq!(
        m.accepted(),
        prefix_ids.len(),
        "closing_tokens changed the matcher"
    );
    assert_eq!(m.accept_tokens(&end).unwrap(), end.len(), "{prefix:?}");
    assert!(
        m.accept_token(eos()).unwrap(),
        "no EOS after the end from {prefix:?}"
    );
    end.len()
}

fn allowed(row: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    for (w, &bits) in row.iter().enumerate() {
        for b in 0..32 {
            if bits >> b & 1 == 1 {
                out.push((w * 32 + b) as u32);
            }
        }
    }
    out
}

#[test]
fn the_end_found_is_accepted_from_inside_values_and_tags() {
    let g = grammar(&chat(body(
        "DeepSeek-V4.1-Flash",
        json!({"tools": tools(), "tool_choice": "required"}),
    )));
    let open = "<｜DSML｜ invoke name=\"get_weather\">\n";
    for prefix in [
        String::new(),
        open.to_owned(),
        format!("{open}<｜DSML｜ parameter name=\"city\" string=\"true\">Os"),
        format!("{open}<｜DSML｜ parameter name=\"opts\" string=\"false\">{{\"a\": \"hel"),
        format!("{open}<｜DSML｜ parameter name=\"opts\" string=\"false\">{{\"a\": \"x\", \"b\": [1.5, "),
        format!("{open}<｜DSML｜ parameter name=\"days\" string=\"false\">1"),
        format!("{open}<｜DSML｜ param"),
    ] {
        let n = end_after(&g, &prefix, 200);
        assert!(n <= 100, "a long end ({n} tokens) from {prefix:?}");
    }
}

#[test]
fn a_json_answer_ends_from_inside_a_number_or_a_key() {
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"},
        "words": {"type": "array", "items": {"type": "string"}}}, "required": ["n", "words"]});
    let rf = json!({"type": "json_schema", "json_schema": {"name": "a", "schema": schema}});
    let g = grammar(&chat(body(
        "DeepSeek-V4-Pro",
        json!({"response_format": rf}),
    )));
    for prefix in [
        "{\"n\":\n21205083663",
        "{\"n\": 1, \"wo",
        "{\n\n\"n\"",
        "{\"n\": -",
    ] {
        let n = end_after(&g, prefix, 50);
        assert!(n <= 12, "{prefix:?}: {n} tokens");
    }
}

#[test]
fn an_accepting_matcher_needs_no_end() {
    let g = grammar(&chat(body(
        "DeepSeek-V4.1-Flash",
        json!({"tools": tools()}),
    )));
    let mut m = g.matcher();
    assert_eq!(m.closing_tokens(10), Some(vec![]));
    m.accept_tokens(&ids("Sunny.")).unwrap();
    assert_eq!(m.closing_tokens(10), Some(vec![]));
}

/// Random walks under a budget: each token drawn uniformly from the budgeted mask (garbage
/// text, as a random model writes). Every walk ends with EOS within the budget or is complete
/// when the budget runs out, and every token was allowed by the plain mask too.
#[test]
fn random_walks_end_in_the_grammar_within_their_budget() {
    let mut rng = Lcg(7);
    for (name, g) in grammars() {
        for budget in [140, 250, 400] {
            for walk in 0..4 {
                let mut prev = None;
                let mut m = g.matcher();
                let mut row = vec![0u32; m.mask_words()];
                let mut plain = vec![0u32; m.mask_words()];
                let mut ended = false;
                for step in 0..budget {
                    m.fill_bitmask(&mut plain).unwrap();
                    m.fill_bitmask_within(&mut row, budget).unwrap();
                    let choices = allowed(&row);
                    assert!(!choices.is_empty(), "{name}: empty mask at {step}");
                    // Half the time EOS when allowed (a model that stops); in the second half
                    // of the walks, half the time the previous token again when allowed (long
                    // numbers, strings, whitespace runs); else any allowed token.
                    let t = if choices.contains(&eos()) && rng.below(2) == 0 {
                        eos()
                    } else if walk >= 2
                        && prev.is_some_and(|p| choices.contains(&p))
                        && rng.below(2) == 0
                    {
                        prev.unwrap()
                    } else {
                        choices[rng.below(choices.len())]
                    };
                    prev = Some(t);
                    assert!(
                        plain[t as usize / 32] >> (t % 32) & 1 == 1,
                        "{name}: {t} not in the grammar"
                    );
                    assert!(m.accept_token(t).unwrap(), "{name}: {t} refused");
                    if t == eos() {
                        ended = true;
                        break;
                    }
                }
                assert!(
                    ended || m.is_accepting(),
                    "{name}, budget {budget}, walk {walk}: cut after {} tokens, not complete",
                    m.accepted()
                );
            }
        }
    }
}

#[test]
fn a_complete_output_near_its_budget_opens_no_calls_block() {
    let g = grammar(&chat(body(
        "DeepSeek-V4.1-Flash",
        json!({"tools": tools()}),
    )));
    let dsml = ids("<｜DSML｜")[1];
    let mut m = g.matcher();
    m.accept_tokens(&ids("Let me check.\n\n<")).unwrap();
    let mut row = vec![0u32; m.mask_words()];
    m.fill_bitmask_within(&mut row, 1000).unwrap();
    assert!(
        row[dsml as usize / 32] >> (dsml % 32) & 1 == 1,
        "far from the budget the block may open"
    );
    let budget = m.accepted() + 5;
    m.fill_bitmask_within(&mut row, budget).unwrap();
    assert!(
        row[dsml as usize / 32] >> (dsml % 32) & 1 == 0,
        "near it the block may not"
    );
    assert!(row[eos() as usize / 32] >> (eos() % 32) & 1 == 1);
}

#[test]
fn a_thinking_budget_grammar_has_an_end_too() {
    let schema = json!({"type": "object", "properties": {"note": {"type": "string"},
        "size": {"type": "number", "minimum": -10, "maximum": 10}, "alpha": {"type": "string", "enum": ["size", "echo"]}},
        "required": ["note", "size", "alpha"], "additionalProperties": false});
    let rf = json!({"type": "json_schema", "json_schema": {"name": "a", "schema": schema, "strict": true}});
    let request = chat(body(
        "DeepSeek-V4-Pro",
        json!({"response_format": rf, "thinking": {"type": "enabled"}}),
    ));
    let g = OutputGrammar::compile(&request, common::vocabulary(), Some(24), None)
        .unwrap()
        .unwrap();
    for prefix in ["", "Hmm, let me", "Hmm.</think>{\"note\":\n\n\t\"s"] {
        end_after(&g, prefix, 60);
    }
}
