//! The conformance checker: nothing on canonical output, and each known kind of backend drift
//! named, on prompts built from the canonical one the way such backends get it wrong.

mod common;

use common::*;
use recipe_core::check::{check_ids, check_prompt, Class, Report};
use recipe_core::conversation::*;
use recipe_core::encoding::{Encoding, EncodingVersion};
use recipe_core::Tokenizer;
use std::sync::OnceLock;

fn tok() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| system_tokenizer(&tokenizer_json()))
}

fn enc(v: EncodingVersion) -> Encoding {
    Encoding::new(v).with_tokenizer(tok().clone())
}

const IMG: &str = "<｜image｜>";

fn user(s: &str) -> Message {
    Message::User(UserMessage {
        content: s.into(),
        image_sources: vec![],
        placeholders: vec![],
        image_token: IMG.into(),
    })
}

fn tool_result(id: &str, s: &str) -> Message {
    Message::Tool(ToolMessage {
        content: s.into(),
        tool_call_id: Some(id.into()),
        image_sources: vec![],
        placeholders: vec![],
        image_token: IMG.into(),
    })
}

fn agent(effort: Option<ReasoningEffort>) -> Conversation {
    Conversation {
        messages: vec![
            Message::System(SystemMessage {
                content: "Be careful.".into(),
                image_sources: vec![],
                placeholders: vec![],
                tools: None,
                image_token: IMG.into(),
            }),
            user("Fix it <｜User｜> now"),
            Message::Assistant(AssistantMessage {
                content: String::new(),
                reasoning_content: Some("Look first.".into()),
                tool_calls: Some(vec![
                    ToolCall {
                        id: "a".into(),
                        name: "read".into(),
                        arguments: r#"{"path": "x.py"}"#.into(),
                    },
                    ToolCall {
                        id: "b".into(),
                        name: "read".into(),
                        arguments: r#"{"path": "y.py"}"#.into(),
                    },
                ]),
                prefix: false,
            }),
            tool_result("a", "first result"),
            tool_result("b", "second result"),
        ],
        thinking_mode: true,
        tools: vec![ToolDefinition {
            name: "read".into(),
            description: Some("Read a file.".into()),
            parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            strict: None,
            defer_loading: false,
        }],
        tool_choice: ToolChoice::Auto,
        reasoning_effort: effort,
        response_format: ResponseFormat::Text,
    }
}

fn classes(r: &Report) -> Vec<Class> {
    let mut c: Vec<Class> = r.divergences.iter().map(|d| d.class).collect();
    c.sort();
    c.dedup();
    c
}

fn prompt_of(v: EncodingVersion, conv: &Conversation) -> String {
    enc(v).render(conv).prompt()
}

#[test]
fn canonical_ids_give_an_empty_report() {
    for v in [EncodingVersion::V4, EncodingVersion::V41] {
        let conv = agent(None);
        let ids = enc(v).encode(&conv).unwrap();
        let r = check_ids(&enc(v), &conv, &ids).unwrap();
        assert!(
            r.identical
                && r.divergences.is_empty()
                && r.control_tokens.is_empty()
                && r.first_difference.is_none()
        );
    }
}

#[test]
fn render_then_tokenize_is_control_token_injection() {
    let conv = agent(None);
    let r = check_prompt(
        &enc(EncodingVersion::V41),
        &conv,
        &prompt_of(EncodingVersion::V41, &conv),
    )
    .unwrap();
    assert_eq!(classes(&r), vec![Class::ControlTokenInjection]);
    let user = r
        .control_tokens
        .iter()
        .find(|c| c.token == "<｜User｜>")
        .unwrap();
    assert_eq!(
        (user.expected + 1, user.unexpected_positions.len()),
        (user.found, 1)
    );
    assert!(r.first_difference.is_some());
    let found = tok()
        .encode_with_special(&prompt_of(EncodingVersion::V41, &conv))
        .unwrap();
    assert_eq!(
        found[user.unexpected_positions[0]],
        tok().added_token_id("<｜User｜>").unwrap()
    );
}

#[test]
fn template_drift_is_named() {
    let v = EncodingVersion::V41;
    let conv = agent(Some(ReasoningEffort::Max));
    let p = prompt_of(v, &conv).replace("<｜User｜> now", "now"); // no injection in what follows
    let conv = {
        let mut c = conv;
        c.messages[1] = user("Fix it now");
        c
    };
    let check = |prompt: String| check_prompt(&enc(v), &conv, &prompt).unwrap();
    assert!(check(p.clone()).identical);
    assert_eq!(
        classes(&check(
            p.replace("Reasoning Effort: 100", "Reasoning Effort: 75")
        )),
        vec![Class::ReasoningEffort]
    );
    assert_eq!(
        classes(&check(p.replacen("<｜begin▁of▁sentence｜>", "", 1))),
        vec![Class::Bos]
    );
    assert_eq!(
        classes(&check(p.replace("｜DSML｜ invoke", "｜DSML｜invoke"))),
        vec![Class::Whitespace]
    );
    assert_eq!(
        classes(&check(p.replace("｜DSML｜ calls>", "｜DSML｜tool_calls>"))),
        vec![Class::ToolsBlock, Class::DsmlDialect]
    );
    assert_eq!(
        classes(&check(p.replace("<think>Look first.</think>", "</think>"))),
        vec![Class::ThinkingTokens]
    );
    assert_eq!(
        classes(&check(p.replace("Be careful.", "Be careful.\n"))),
        vec![Class::Whitespace]
    );
    let swapped = p.replace(
        "<tool_result>first result</tool_result>\n\n<tool_result>second result</tool_result>",
        "<tool_result>second result</tool_result>\n\n<tool_result>first result</tool_result>",
    );
    assert_eq!(classes(&check(swapped)), vec![Class::ToolResultOrder]);
    let moved = p
        .replace("Be careful.", "")
        .replace("Fix it now", "Be careful.\n\nFix it now");
    assert!(classes(&check(moved)).contains(&Class::SystemPlacement));
}

#[test]
fn unknown_ids_are_an_error() {
    let conv = agent(None);
    assert!(check_ids(&enc(EncodingVersion::V4), &conv, &[u32::MAX]).is_err());
}

/// An empty backend output is bad input, not a divergence (issue #21, item 3: an empty
/// `--prompt` or `--ids` file was reported as "divergent").
#[test]
fn empty_output_is_an_error_not_a_divergence() {
    use recipe_core::check::CheckError;
    let conv = agent(None);
    let e = enc(EncodingVersion::V41);
    assert!(matches!(
        check_ids(&e, &conv, &[]),
        Err(CheckError::EmptyOutput(_))
    ));
    for prompt in ["", " ", "\n\t \n"] {
        assert!(matches!(
            check_prompt(&e, &conv, prompt),
            Err(CheckError::EmptyOutput(_))
        ));
    }
    // A prompt of one real token is still compared (and diverges).
    assert!(!check_prompt(&e, &conv, "x").unwrap().identical);
}
