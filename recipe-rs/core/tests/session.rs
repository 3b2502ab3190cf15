//! `EncodingSession`: over random multi-turn agent histories (appends, edits, reordered
//! results, dropped reasoning, changed options), every turn's IDs equal a cold encode, and the
//! turn report agrees with a direct comparison of the two ID lists.

mod common;

use common::*;
use proptest::prelude::*;
use recipe_core::conversation::*;
use recipe_core::encoding::session::{DivergenceCause, EncodingSession};
use recipe_core::encoding::{Encoding, EncodingVersion};
use recipe_core::Tokenizer;
use std::sync::OnceLock;

fn toks() -> &'static (Tokenizer, Tokenizer) {
    static T: OnceLock<(Tokenizer, Tokenizer)> = OnceLock::new();
    T.get_or_init(|| {
        let json = tokenizer_json();
        (stock_tokenizer(&json), system_tokenizer(&json))
    })
}

const IMG: &str = "<｜image｜>";

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            "[a-z ]{0,12}",
            Just("<｜User｜>".to_owned()),
            Just("</think>".to_owned()),
            Just("\n\n".to_owned()),
            Just("｜DSML｜".to_owned()),
            Just("数据".to_owned()),
        ],
        0..4,
    )
    .prop_map(|v| v.concat())
}

/// One change from one turn to the next.
#[derive(Clone, Debug)]
enum Step {
    /// The model answered with calls; their results come back (in `order`), maybe with a user note.
    ToolRound {
        reasoning: String,
        content: String,
        n_calls: usize,
        args: String,
        results: Vec<String>,
        shuffle: bool,
        note: Option<String>,
    },
    /// The model answered in text, the user follows up.
    TextRound {
        reasoning: String,
        content: String,
        user: String,
    },
    /// A latest-reminder message is appended.
    Reminder(String),
    /// A system message is appended.
    System(String),
    /// Every reasoning in the history is dropped (clients that do not send it back).
    DropReasoning,
    /// The first user message is edited.
    EditFirstUser(String),
    /// Thinking is toggled.
    ToggleThinking,
    /// The tool list gains a tool.
    AddTool(String),
    /// The last message is removed.
    Pop,
    /// The reasoning effort changes.
    Effort(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (text(), text(), 1usize..4, text(), prop::collection::vec(text(), 3), any::<bool>(), prop::option::of(text()))
            .prop_map(|(reasoning, content, n_calls, args, results, shuffle, note)| Step::ToolRound { reasoning, content, n_calls, args, results, shuffle, note }),
        3 => (text(), text(), text()).prop_map(|(reasoning, content, user)| Step::TextRound { reasoning, content, user }),
        1 => text().prop_map(Step::Reminder),
        1 => text().prop_map(Step::System),
        1 => Just(Step::DropReasoning),
        1 => text().prop_map(Step::EditFirstUser),
        1 => Just(Step::ToggleThinking),
        1 => "[a-z]{1,6}".prop_map(Step::AddTool),
        1 => Just(Step::Pop),
        1 => (0u8..5).prop_map(Step::Effort),
    ]
}

fn tool(name: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.to_owned(),
        description: Some(format!("Tool {name} <｜User｜>")),
        parameters: serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        strict: None,
        defer_loading: false,
    }
}

fn user(content: String) -> Message {
    Message::User(UserMessage::new(content, vec![], IMG))
}

fn system(content: String) -> Message {
    Message::System(SystemMessage::new(content, vec![], IMG))
}

fn assistant(content: String, reasoning: Option<String>, calls: Option<Vec<ToolCall>>) -> Message {
    Message::Assistant(AssistantMessage {
        content,
        reasoning_content: reasoning,
        tool_calls: calls,
        prefix: false,
    })
}

fn tool_result(content: String, call_id: String) -> Message {
    Message::Tool(ToolMessage::new(content, Some(call_id), vec![], IMG))
}

/// An assistant turn with two tool calls ("r" / "c"), answered in call order.
fn two_calls() -> Step {
    Step::ToolRound {
        reasoning: "r".into(),
        content: "c".into(),
        n_calls: 2,
        args: "a".into(),
        results: vec!["x".into(), "y".into()],
        shuffle: false,
        note: None,
    }
}

fn apply(conv: &mut Conversation, step: &Step, turn: usize) {
    match step {
        Step::ToolRound {
            reasoning,
            content,
            n_calls,
            args,
            results,
            shuffle,
            note,
        } => {
            let calls: Vec<ToolCall> = (0..*n_calls)
                .map(|i| ToolCall {
                    id: format!("call_{turn}_{i}"),
                    name: conv
                        .tools
                        .first()
                        .map_or("search".into(), |t| t.name.clone()),
                    arguments: serde_json::json!({"q": args, "n": i}).to_string(),
                })
                .collect();
            conv.messages.push(assistant(
                content.clone(),
                Some(reasoning.clone()),
                Some(calls.clone()),
            ));
            let mut order: Vec<usize> = (0..*n_calls).collect();
            if *shuffle {
                order.reverse();
            }
            for i in order {
                let result = results[i % results.len()].clone();
                conv.messages.push(tool_result(result, calls[i].id.clone()));
            }
            if let Some(n) = note {
                conv.messages.push(user(n.clone()));
            }
        }
        Step::TextRound {
            reasoning,
            content,
            user: u,
        } => {
            conv.messages
                .push(assistant(content.clone(), Some(reasoning.clone()), None));
            conv.messages.push(user(u.clone()));
        }
        Step::Reminder(r) => conv
            .messages
            .push(Message::LatestReminder(LatestReminderMessage {
                content: r.clone(),
            })),
        Step::System(s) => conv.messages.push(system(s.clone())),
        Step::DropReasoning => {
            for m in &mut conv.messages {
                if let Message::Assistant(a) = m {
                    a.reasoning_content = None;
                }
            }
        }
        Step::EditFirstUser(t) => {
            if let Some(Message::User(u)) = conv
                .messages
                .iter_mut()
                .find(|m| matches!(m, Message::User(_)))
            {
                u.content = t.clone();
            }
        }
        Step::ToggleThinking => conv.thinking_mode = !conv.thinking_mode,
        Step::AddTool(n) => conv.tools.push(tool(n)),
        Step::Pop => {
            if conv.messages.len() > 2 {
                conv.messages.pop();
            }
        }
        Step::Effort(e) => {
            conv.reasoning_effort = [
                None,
                Some(ReasoningEffort::Low),
                Some(ReasoningEffort::High),
                Some(ReasoningEffort::XHigh),
                Some(ReasoningEffort::Max),
            ][*e as usize]
        }
    }
}

fn start(system_text: String, first: String, with_tools: bool, thinking: bool) -> Conversation {
    Conversation {
        messages: vec![system(system_text), user(first)],
        thinking_mode: thinking,
        tools: if with_tools {
            vec![tool("search"), tool("read_file")]
        } else {
            vec![]
        },
        tool_choice: ToolChoice::Auto,
        reasoning_effort: None,
        response_format: ResponseFormat::Text,
    }
}

fn run(
    version: EncodingVersion,
    tok: &Tokenizer,
    mut conv: Conversation,
    steps: &[Step],
) -> Result<(), TestCaseError> {
    let enc = Encoding::new(version).with_tokenizer(tok.clone());
    let mut session = EncodingSession::new(enc.clone());
    let mut previous: Option<Vec<u32>> = None;
    for (turn, s) in std::iter::once(None)
        .chain(steps.iter().map(Some))
        .enumerate()
    {
        if let Some(s) = s {
            apply(&mut conv, s, turn);
        }
        let cold = enc
            .encode(&conv)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let warm = session
            .encode(&conv)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&warm, &cold, "turn {} ({:?})", turn, s);
        let r = session.last_turn();
        prop_assert_eq!(r.tokens, cold.len());
        match &previous {
            None => {
                prop_assert!(!r.extends_previous && r.divergence.is_none() && r.reused_tokens == 0)
            }
            Some(p) => {
                let common = p.iter().zip(&cold).take_while(|(a, b)| a == b).count();
                prop_assert_eq!(r.common_prefix_tokens, common);
                prop_assert_eq!(r.extends_previous, common == p.len());
                prop_assert_eq!(r.divergence.is_some(), common != p.len());
                if let Some(d) = &r.divergence {
                    prop_assert_eq!(d.token_index, common);
                }
                prop_assert!(r.reused_tokens <= cold.len());
            }
        }
        prop_assert!(session.memory_bytes() >= cold.len() * 4);
        previous = Some(cold);
    }
    Ok(())
}

fn history() -> impl Strategy<Value = (String, String, bool, bool, Vec<Step>)> {
    (
        text(),
        text(),
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(step(), 1..7),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn v4_session_equals_cold_encode((sys, first, tools, thinking, steps) in history()) {
        run(EncodingVersion::V4, &toks().0, start(sys, first, tools, thinking), &steps)?;
    }

    #[test]
    fn v41_session_equals_cold_encode((sys, first, tools, thinking, steps) in history()) {
        run(EncodingVersion::V41, &toks().1, start(sys, first, tools, thinking), &steps)?;
    }
}

/// The agent loop with tools and thinking extends the previous prompt token for token, and the
/// new turn reuses every token of the previous prompt.
#[test]
fn agent_turn_extends_and_reuses() {
    let tok = &toks().1;
    let enc = Encoding::new(EncodingVersion::V41).with_tokenizer(tok.clone());
    let mut session = EncodingSession::new(enc);
    let mut conv = start(
        "You are an agent.".into(),
        "Fix the bug <｜User｜>".into(),
        true,
        true,
    );
    session.encode(&conv).unwrap();
    for turn in 0..3 {
        let prev = session.last_turn().tokens;
        apply(
            &mut conv,
            &Step::ToolRound {
                reasoning: "look".into(),
                content: String::new(),
                n_calls: 1,
                args: "x".into(),
                results: vec!["ok".into()],
                shuffle: false,
                note: None,
            },
            turn,
        );
        session.encode(&conv).unwrap();
        let r = session.last_turn();
        assert!(r.extends_previous, "turn {turn}: {r:?}");
        assert!(r.reused_tokens >= prev - 2, "turn {turn}: {r:?}");
    }
}

fn cause_after(
    version: EncodingVersion,
    tools: bool,
    change: impl FnOnce(&mut Conversation),
) -> DivergenceCause {
    let tok = if version == EncodingVersion::V4 {
        &toks().0
    } else {
        &toks().1
    };
    let mut session = EncodingSession::new(Encoding::new(version).with_tokenizer(tok.clone()));
    let mut conv = start("sys".into(), "hi".into(), tools, true);
    apply(&mut conv, &two_calls(), 0);
    session.encode(&conv).unwrap();
    change(&mut conv);
    session.encode(&conv).unwrap();
    session
        .last_turn()
        .divergence
        .as_ref()
        .expect("diverges")
        .cause
}

#[test]
fn divergence_causes_are_named() {
    use DivergenceCause::*;
    let v41 = EncodingVersion::V41;
    assert_eq!(
        cause_after(v41, true, |c| c.thinking_mode = false),
        ThinkingModeChanged
    );
    assert_eq!(
        cause_after(v41, true, |c| c.reasoning_effort =
            Some(ReasoningEffort::Max)),
        ReasoningEffortChanged
    );
    assert_eq!(
        cause_after(v41, true, |c| c.tools.push(tool("extra"))),
        ToolsChanged
    );
    assert_eq!(
        cause_after(v41, true, |c| {
            if let Message::System(s) = &mut c.messages[0] {
                s.content.push('!')
            }
        }),
        SystemChanged
    );
    assert_eq!(
        cause_after(v41, true, |c| {
            if let Message::Assistant(a) = &mut c.messages[2] {
                a.reasoning_content = None
            }
        }),
        ReasoningDroppedFromHistory
    );
    assert_eq!(
        cause_after(
            v41,
            true,
            |c| if let Message::User(u) = &mut c.messages[1] {
                u.content.push('?')
            }
        ),
        MessageEdited
    );
    assert_eq!(
        cause_after(v41, true, |c| {
            c.messages.pop();
        }),
        MessagesRemoved
    );
    assert_eq!(
        cause_after(v41, true, |c| c.messages.push(user("more".into()))),
        TurnMerged
    );
    assert_eq!(
        cause_after(EncodingVersion::V4, true, |c| c
            .messages
            .push(system("late".into()))),
        SystemHoisted
    );
    // Without tools, V4.1 drops the reasoning of the answering turn: `A <think>` becomes `A </think>`.
    assert_eq!(
        cause_after(v41, false, |c| c.messages.push(assistant(
            "done".into(),
            Some("why".into()),
            None
        ))),
        ReasoningDroppedByTemplate
    );
}

/// Results without call IDs keep the order they were sent in, so sending them in another order
/// changes the prompt.
#[test]
fn reordered_results_without_ids_are_named() {
    let mut session =
        EncodingSession::new(Encoding::new(EncodingVersion::V41).with_tokenizer(toks().1.clone()));
    let mut conv = start("sys".into(), "hi".into(), true, true);
    apply(&mut conv, &two_calls(), 0);
    for m in &mut conv.messages {
        if let Message::Tool(t) = m {
            t.tool_call_id = None;
        }
    }
    session.encode(&conv).unwrap();
    conv.messages.swap(3, 4);
    session.encode(&conv).unwrap();
    let d = session.last_turn().divergence.clone().expect("diverges");
    assert_eq!(
        (d.cause, d.message_index),
        (DivergenceCause::ToolResultsReordered, Some(3))
    );
}

/// Results sent in another order are sorted back into call order by both templates: the prompt
/// does not change.
#[test]
fn reordered_results_with_ids_keep_the_prompt() {
    for (version, tok) in [
        (EncodingVersion::V4, &toks().0),
        (EncodingVersion::V41, &toks().1),
    ] {
        let mut session = EncodingSession::new(Encoding::new(version).with_tokenizer(tok.clone()));
        let mut conv = start("sys".into(), "hi".into(), true, true);
        apply(&mut conv, &two_calls(), 0);
        session.encode(&conv).unwrap();
        conv.messages.swap(3, 4);
        session.encode(&conv).unwrap();
        assert!(session.last_turn().extends_previous, "{version:?}");
    }
}

#[test]
fn memory_bound_is_respected() {
    let tok = &toks().1;
    let enc = Encoding::new(EncodingVersion::V41).with_tokenizer(tok.clone());
    let conv = start("s".repeat(400), "u".into(), true, true);
    let mut small = EncodingSession::with_max_cached_tokens(enc.clone(), 10);
    let ids = small.encode(&conv).unwrap();
    assert!(ids.len() > 10);
    assert_eq!(small.memory_bytes(), 0);
    assert_eq!(small.encode(&conv).unwrap(), ids);
    assert_eq!(small.last_turn().previous_tokens, 0, "nothing was kept");
    let mut big = EncodingSession::new(enc);
    big.encode(&conv).unwrap();
    assert!(big.memory_bytes() > 0);
    assert_eq!(big.encode(&conv).unwrap(), ids);
    assert_eq!(big.last_turn().reused_tokens, ids.len());
}

#[test]
fn no_tokenizer_is_an_error() {
    let mut s = EncodingSession::new(Encoding::new(EncodingVersion::V4));
    assert!(s
        .encode(&start("s".into(), "u".into(), false, false))
        .is_err());
}
