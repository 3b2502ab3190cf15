//! DSML tool-call grammars: accepted outputs in every mode, and the mutations they reject.

mod common;

use common::{chat, grammar, ids, run};
use serde_json::{json, Value};

fn weather_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                           "unit": {"enum": ["c", "f"]}},
            "required": ["city"]}}},
        {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}
    ])
}

fn request(model: &str, extra: Value) -> recipe_protocol::ConversationRequest {
    let mut body = json!({
        "model": model,
        "messages": [{"role": "user", "content": "weather?"}],
        "tools": weather_tools(),
        "thinking": {"type": "disabled"},
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    chat(body)
}

const V41: &str = "DeepSeek-V4.1-Flash";
const V4: &str = "DeepSeek-V4-Pro";

fn v41_call(city: &str) -> String {
    format!(
        "\n<｜DSML｜ invoke name=\"get_weather\">\n<｜DSML｜ parameter name=\"city\" string=\"true\">{city}</｜DSML｜ parameter>\n<｜DSML｜ parameter name=\"days\" string=\"false\">3</｜DSML｜ parameter>\n</｜DSML｜ invoke>"
    )
}

#[test]
fn auto_accepts_content_calls_or_both() {
    let g = grammar(&request(V41, json!({})));
    let block = format!(
        "\n\n<｜DSML｜ calls>{}\n</｜DSML｜ calls>",
        v41_call("Paris")
    );
    assert_eq!(run(&g, &ids("It is sunny.")), Ok(()));
    assert_eq!(run(&g, &ids(&block)), Ok(()));
    assert_eq!(run(&g, &ids(&format!("Let me check.{block}"))), Ok(()));
    let two = format!(
        "\n\n<｜DSML｜ calls>{}\n<｜DSML｜ invoke name=\"now\">\n\n</｜DSML｜ invoke>\n</｜DSML｜ calls>",
        v41_call("Paris")
    );
    assert_eq!(run(&g, &ids(&two)), Ok(()));
}

#[test]
fn v4_dialect() {
    let g = grammar(&request(V4, json!({})));
    let block = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"now\">\n</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"unit\" string=\"true\">c</｜DSML｜parameter>\n<｜DSML｜parameter name=\"city\" string=\"true\">Rome</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
    assert_eq!(run(&g, &ids(block)), Ok(()));
    // The V4.1 spelling is not V4's.
    let v41 = format!(
        "\n\n<｜DSML｜ calls>{}\n</｜DSML｜ calls>",
        v41_call("Paris")
    );
    assert!(run(&g, &ids(&v41)).is_err());
}

fn block(calls: &str) -> String {
    format!("\n\n<｜DSML｜ calls>{calls}\n</｜DSML｜ calls>")
}

#[test]
fn required_starts_inside_the_block_the_prompt_opened() {
    let r = request(V41, json!({"tool_choice": "required"}));
    assert!(r.parsing_options.starts_in_tool_calls);
    let g = grammar(&r);
    // The prompt ends with "<｜DSML｜ calls>\n": the output is the first call onwards.
    let body = format!("{}\n</｜DSML｜ calls>", &v41_call("Oslo")[1..]);
    assert_eq!(run(&g, &ids(&body)), Ok(()));
    // Text where a call must be, and an empty block, are rejected.
    assert_eq!(run(&g, &ids("I think")), Err(0));
    assert!(run(&g, &ids("</｜DSML｜ calls>")).is_err());
    assert_eq!(run(&g, &[]), Err(0));
}

#[test]
fn named_tool_allows_only_that_function() {
    let r = request(
        V41,
        json!({"tool_choice": {"type": "function", "function": {"name": "now"}}}),
    );
    let g = grammar(&r);
    let now = "<｜DSML｜ invoke name=\"now\">\n\n</｜DSML｜ invoke>\n</｜DSML｜ calls>";
    assert_eq!(run(&g, &ids(now)), Ok(()));
    let weather = format!("{}\n</｜DSML｜ calls>", &v41_call("Oslo")[1..]);
    assert!(run(&g, &ids(&weather)).is_err());
}

#[test]
fn parallel_tool_calls_false_allows_one_call() {
    let g = grammar(&request(V41, json!({"parallel_tool_calls": false})));
    assert_eq!(run(&g, &ids(&block(&v41_call("A")))), Ok(()));
    let two = format!("{}{}", v41_call("A"), v41_call("B"));
    assert!(run(&g, &ids(&block(&two))).is_err());
    let g = grammar(&request(V41, json!({})));
    assert_eq!(run(&g, &ids(&block(&two))), Ok(()));
}

#[test]
fn thinking_reasoning_ends_with_the_control_token() {
    let mut r = request(V41, json!({}));
    r.parsing_options.thinking_initial_stage =
        Some(recipe_core::ThinkingInitialStage::ReasoningStart);
    let g = grammar(&r);
    let out = format!("Hmm, weather.</think>{}", block(&v41_call("Oslo")));
    assert_eq!(run(&g, &ids(&out)), Ok(()));
    // Reasoning must end: EOS inside it is rejected, and so is DSML before `</think>`.
    let n = ids("Hmm").len();
    assert_eq!(run(&g, &ids("Hmm")), Err(n));
    assert!(run(&g, &ids(&block(&v41_call("Oslo")))).is_err());
}

#[test]
fn thinking_budget_forces_the_end_of_reasoning() {
    let mut r = request(V41, json!({}));
    r.parsing_options.thinking_initial_stage =
        Some(recipe_core::ThinkingInitialStage::ReasoningStart);
    let g = recipe_grammar::OutputGrammar::compile(&r, common::vocabulary(), Some(3), None)
        .unwrap()
        .unwrap();
    let think_end = g.tokens().thinking_end;
    let mut m = g.matcher();
    let reasoning = ids(" one two three four five");
    assert_eq!(m.accept_tokens(&reasoning), Ok(3));
    let mut row = vec![0u32; m.mask_words()];
    m.fill_bitmask(&mut row).unwrap();
    let allowed: u32 = row.iter().map(|w| w.count_ones()).sum();
    assert_eq!(allowed, 1);
    assert_eq!(row[think_end as usize / 32] >> (think_end % 32) & 1, 1);
}

#[test]
fn mutations_are_rejected() {
    let g = grammar(&request(V41, json!({})));
    let ok = block(&v41_call("Paris"));
    assert_eq!(run(&g, &ids(&ok)), Ok(()));
    let cases: Vec<(&str, String)> = vec![
        ("unknown tool", ok.replace("get_weather", "get_wether")),
        (
            "wrong string attribute",
            ok.replace("\"city\" string=\"true\"", "\"city\" string=\"false\""),
        ),
        (
            "JSON where an integer belongs",
            ok.replace(">3<", ">\"3\"<"),
        ),
        (
            "missing required key",
            block("\n<｜DSML｜ invoke name=\"get_weather\">\n<｜DSML｜ parameter name=\"days\" string=\"false\">3</｜DSML｜ parameter>\n</｜DSML｜ invoke>"),
        ),
        (
            "repeated key",
            ok.replace(
                "</｜DSML｜ parameter>\n</｜DSML｜ invoke>",
                "</｜DSML｜ parameter>\n<｜DSML｜ parameter name=\"days\" string=\"false\">4</｜DSML｜ parameter>\n</｜DSML｜ invoke>",
            ),
        ),
        ("DSML inside a value", ok.replace("Paris", "Pa<｜DSML｜ris")),
        ("enum violated", ok.replace(">3<", ">3</｜DSML｜ parameter>\n<｜DSML｜ parameter name=\"unit\" string=\"true\">k<")),
        ("EOS inside the block", ok.replace("\n</｜DSML｜ calls>", "<｜end▁of▁sentence｜>")),
        ("think end in content", format!("a</think>{ok}")),
    ];
    for (what, text) in cases {
        assert!(run(&g, &ids(&text)).is_err(), "{what} accepted: {text:?}");
    }
    // `｜DSML｜` spelled with ordinary tokens, at a tag or in text, is rejected.
    let tok = common::tokenizer();
    let spelled = tok.encode_ordinary(&ok).unwrap();
    assert!(run(&g, &spelled).is_err(), "BPE-spelled block accepted");
    let mut in_text = ids("see ");
    in_text.extend(tok.encode_ordinary("｜DSML｜").unwrap());
    assert!(
        run(&g, &in_text).is_err(),
        "BPE-spelled marker in content accepted"
    );
}

#[test]
fn strict_tools_reject_extra_keys_and_loose_ones_take_them() {
    let strict = json!([{"type": "function", "function": {"name": "f", "strict": true,
        "parameters": {"type": "object", "properties": {"a": {"type": "string"}},
                       "required": ["a"], "additionalProperties": false}}}]);
    let loose = json!([{"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}}]);
    let call = |extra: &str| {
        block(&format!("\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"a\" string=\"true\">x</｜DSML｜ parameter>{extra}\n</｜DSML｜ invoke>"))
    };
    let extra =
        "\n<｜DSML｜ parameter name=\"b\" string=\"false\">{\"k\": [1, 2]}</｜DSML｜ parameter>";
    let g = grammar(&request(V41, json!({"tools": strict})));
    assert_eq!(run(&g, &ids(&call(""))), Ok(()));
    assert!(run(&g, &ids(&call(extra))).is_err());
    let g = grammar(&request(V41, json!({"tools": loose})));
    assert_eq!(run(&g, &ids(&call(extra))), Ok(()));
    // An undeclared key may not pose as a declared one.
    let dup = "\n<｜DSML｜ parameter name=\"a\" string=\"true\">y</｜DSML｜ parameter>";
    assert!(run(&g, &ids(&call(dup))).is_err());
}

#[test]
fn answer_formats() {
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}},
                        "required": ["n"], "additionalProperties": false});
    let r = chat(
        json!({"model": V41, "messages": [{"role": "user", "content": "x"}],
        "thinking": {"type": "disabled"},
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}}),
    );
    let g = grammar(&r);
    assert_eq!(run(&g, &ids("{\"n\": 5}")), Ok(()));
    assert!(run(&g, &ids("{\"n\": \"5\"}")).is_err());
    assert!(run(&g, &ids("{\"n\": 5, \"m\": 1}")).is_err());
    assert!(run(&g, &ids("Sure: {\"n\": 5}")).is_err());

    let r = chat(
        json!({"model": V41, "messages": [{"role": "user", "content": "json please"}],
        "thinking": {"type": "disabled"}, "response_format": {"type": "json_object"}}),
    );
    let g = grammar(&r);
    assert_eq!(run(&g, &ids("{\"a\": [1, {\"b\": null}]}")), Ok(()));
    assert!(run(&g, &ids("[1]")).is_err());

    let r = chat(
        json!({"model": V41, "messages": [{"role": "user", "content": "x"}],
        "thinking": {"type": "disabled"},
        "response_format": {"type": "regex", "regex": "(yes|no)/[0-9]+"}}),
    );
    let g = grammar(&r);
    assert_eq!(run(&g, &ids("yes/42")), Ok(()));
    assert!(run(&g, &ids("maybe")).is_err());

    let lark = "start: \"A\" NUM\nNUM: /[0-9]+/";
    let g = recipe_grammar::OutputGrammar::compile(&r, common::vocabulary(), None, Some(lark))
        .unwrap()
        .unwrap();
    assert_eq!(run(&g, &ids("A12")), Ok(()));
    assert!(run(&g, &ids("yes/42")).is_err());
}

#[test]
fn no_constraint_no_grammar_and_bad_input_is_an_error() {
    let r = chat(json!({"model": V41, "messages": [{"role": "user", "content": "x"}]}));
    assert!(
        recipe_grammar::OutputGrammar::compile(&r, common::vocabulary(), None, None)
            .unwrap()
            .is_none()
    );
    let bad =
        recipe_grammar::OutputGrammar::compile(&r, common::vocabulary(), None, Some("start: ("));
    assert!(
        matches!(bad, Err(recipe_grammar::GrammarError::Invalid(_))),
        "{bad:?}"
    );
    let r = chat(
        json!({"model": V41, "messages": [{"role": "user", "content": "x"}],
        "thinking": {"type": "disabled"},
        "response_format": {"type": "regex", "regex": "(unclosed"}}),
    );
    let bad = recipe_grammar::OutputGrammar::compile(&r, common::vocabulary(), None, None);
    assert!(
        matches!(bad, Err(recipe_grammar::GrammarError::Invalid(_))),
        "{bad:?}"
    );
}

#[test]
fn rollback_returns_to_an_earlier_state() {
    let g = grammar(&request(V41, json!({})));
    let out = ids(&block(&v41_call("Paris")));
    let mut m = g.matcher();
    assert_eq!(m.accept_tokens(&out), Ok(out.len()));
    assert!(m.accept_token(common::eos()).unwrap());
    assert!(m.is_terminated());
    m.rollback(4).unwrap();
    assert!(!m.is_terminated());
    assert_eq!(m.accept_tokens(&out[out.len() - 3..]), Ok(3));
    assert!(m.is_accepting());
    assert!(m.rollback(out.len() + 1).is_err());
    assert!(m.accept_tokens(&[u32::MAX]).is_err());
}

#[test]
fn string_parameters_honour_length_and_pattern() {
    let tools = json!([{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "additionalProperties": false, "required": ["code"],
        "properties": {
            "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "note": {"type": "string", "minLength": 2, "maxLength": 4},
            "tag": {"type": "string", "pattern": "x[0-9]"},
            "either": {"anyOf": [{"type": "string", "pattern": "^a+$"}, {"const": "none"},
                                 {"type": "integer"}]}}}}}]);
    let g = grammar(&request(
        V41,
        json!({"tools": tools, "tool_choice": "required"}),
    ));
    let call = |args: &[(&str, &str)]| {
        let params: String = args
            .iter()
            .map(|(k, v)| {
                format!(
                    "\n<｜DSML｜ parameter name=\"{k}\" string=\"true\">{v}</｜DSML｜ parameter>"
                )
            })
            .collect();
        format!(
            "<｜DSML｜ invoke name=\"f\">\n{}\n</｜DSML｜ invoke>\n</｜DSML｜ calls>",
            &params[1..]
        )
    };
    let ok: &[&[(&str, &str)]] = &[
        &[("code", "ABC")],
        &[("code", "XYZ"), ("note", "ab")],
        &[("code", "XYZ"), ("note", "日本語!")],
        &[("code", "ABC"), ("tag", "see x1 here")],
        &[("code", "ABC"), ("tag", "x0")],
        &[("code", "ABC"), ("either", "aaa")],
        &[("code", "ABC"), ("either", "none")],
        &[("code", "ABC"), ("note", "a</b")],
    ];
    for args in ok {
        assert_eq!(run(&g, &ids(&call(args))), Ok(()), "{args:?} rejected");
    }
    let bad: &[&[(&str, &str)]] = &[
        &[("code", "AB")],
        &[("code", "ABCD")],
        &[("code", "abc")],
        &[("code", "ABC"), ("note", "a")],
        &[("code", "ABC"), ("note", "abcde")],
        &[("code", "ABC"), ("tag", "x")],
        &[("code", "ABC"), ("tag", "y1")],
        &[("code", "ABC"), ("either", "ab")],
        &[("code", "ABC"), ("either", "nonE")],
    ];
    for args in bad {
        assert!(run(&g, &ids(&call(args))).is_err(), "{args:?} accepted");
    }
    // The spelled-out marker stays out of bounded text too.
    let text = call(&[("code", "ABC"), ("tag", "x1 ")]);
    let (head, tail) = text.split_at(text.find("x1 ").unwrap() + 3);
    let mut spelled = ids(head);
    spelled.extend(common::tokenizer().encode_ordinary("｜DSML｜").unwrap());
    spelled.extend(ids(tail));
    assert!(
        run(&g, &spelled).is_err(),
        "BPE-spelled marker in a bounded value accepted"
    );
}

#[test]
fn unsupported_string_patterns_are_refused_with_the_tool_named() {
    for pattern in ["(?=a)b", "a^b", "\\1(a)"] {
        let tools = json!([{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}}}]);
        let r = request(V41, json!({"tools": tools}));
        let e = recipe_grammar::OutputGrammar::compile(&r, common::vocabulary(), None, None)
            .unwrap_err();
        assert!(
            matches!(e, recipe_grammar::GrammarError::UnsupportedSchema(_))
                && e.to_string().contains("tool \"f\""),
            "{pattern}: {e}"
        );
    }
}
