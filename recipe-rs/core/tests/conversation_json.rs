//! The canonical conversation JSON: lossless round trips over random conversations, and clear
//! errors (never a panic) for input the public constructors would reject.

use proptest::prelude::*;
use recipe_core::conversation::*;
use serde_json::{json, Value};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z ]{0,12}",
        "[a-z<>｜/é🙂\\n]{0,10}",
        Just("<｜image｜>".to_owned()),
    ]
}

fn image() -> impl Strategy<Value = ImageSource> {
    let data = prop_oneof![
        text().prop_map(ImageData::DataUrl),
        text().prop_map(ImageData::Url),
        proptest::collection::vec(any::<u8>(), 0..8).prop_map(ImageData::Bytes),
    ];
    let detail = prop_oneof![
        Just(ImageDetail::Low),
        Just(ImageDetail::High),
        Just(ImageDetail::Original),
        Just(ImageDetail::Auto),
    ];
    (data, detail, text()).prop_map(|(data, detail, path)| ImageSource { data, detail, path })
}

fn tool() -> impl Strategy<Value = ToolDefinition> {
    let params = prop_oneof![
        Just(Value::Null),
        Just(json!({"type": "object", "properties": {"b": {"type": "string"}, "a": {}}})),
        Just(json!([1, 2.5, "x", null, true])),
    ];
    (
        text(),
        proptest::option::of(text()),
        params,
        proptest::option::of(any::<bool>()),
        any::<bool>(),
    )
        .prop_map(
            |(name, description, parameters, strict, defer_loading)| ToolDefinition {
                name,
                description,
                parameters,
                strict,
                defer_loading,
            },
        )
}

/// Text with placeholders, built piece by piece (some placeholders may be missing, as when a
/// message has more images than placeholders), plus its images.
fn image_text() -> impl Strategy<Value = (ImageText, Vec<ImageSource>, String)> {
    let token = prop_oneof![Just("<｜image｜>".to_owned()), Just("[img]".to_owned())];
    (
        token,
        proptest::collection::vec((text(), any::<bool>()), 0..4),
        proptest::collection::vec(image(), 0..2),
    )
        .prop_map(|(token, pieces, extra)| {
            let mut t = ImageText::default();
            let mut images = Vec::new();
            for (piece, placeholder) in pieces {
                t.push_text(&piece);
                if placeholder {
                    t.push_placeholder(&token);
                    images.push(ImageSource {
                        data: ImageData::Url(piece),
                        detail: ImageDetail::Auto,
                        path: "p".into(),
                    });
                }
            }
            images.extend(extra);
            (t, images, token)
        })
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (
            image_text(),
            proptest::option::of(proptest::collection::vec(tool(), 0..2))
        )
            .prop_map(|((t, imgs, tok), tools)| {
                let mut m = SystemMessage::from_text(t, imgs, tok);
                m.tools = tools;
                Message::System(m)
            }),
        image_text().prop_map(|(t, imgs, tok)| Message::User(UserMessage::from_text(t, imgs, tok))),
        (
            text(),
            proptest::option::of(text()),
            proptest::option::of(proptest::collection::vec(
                (text(), text(), text()).prop_map(|(id, name, arguments)| ToolCall {
                    id,
                    name,
                    arguments
                }),
                0..2
            )),
            any::<bool>()
        )
            .prop_map(|(content, reasoning_content, tool_calls, prefix)| {
                Message::Assistant(AssistantMessage {
                    content,
                    reasoning_content,
                    tool_calls,
                    prefix,
                })
            }),
        (image_text(), proptest::option::of(text())).prop_map(|((t, imgs, tok), id)| {
            Message::Tool(ToolMessage::from_text(t, id, imgs, tok))
        }),
        text().prop_map(|content| Message::LatestReminder(LatestReminderMessage { content })),
    ]
}

fn conversation() -> impl Strategy<Value = Conversation> {
    let format = prop_oneof![
        Just(ResponseFormat::Text),
        Just(ResponseFormat::JsonObject),
        Just(ResponseFormat::JsonSchema(json!({"type": "object"}))),
        Just(ResponseFormat::JsonSchema(Value::Null)),
        text().prop_map(ResponseFormat::Regex),
    ];
    let effort = proptest::option::of(prop_oneof![
        Just(ReasoningEffort::Low),
        Just(ReasoningEffort::High),
        Just(ReasoningEffort::XHigh),
        Just(ReasoningEffort::Max),
    ]);
    let choice = prop_oneof![
        Just(ToolChoice::Auto),
        Just(ToolChoice::None),
        Just(ToolChoice::Required)
    ];
    (
        proptest::collection::vec(message(), 0..5),
        any::<bool>(),
        proptest::collection::vec(tool(), 0..2),
        choice,
        effort,
        format,
    )
        .prop_map(
            |(messages, thinking_mode, tools, tool_choice, reasoning_effort, response_format)| {
                Conversation {
                    messages,
                    thinking_mode,
                    tools,
                    tool_choice,
                    reasoning_effort,
                    response_format,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn round_trip_is_lossless(c in conversation()) {
        let text = c.to_json();
        let back = Conversation::from_json(&text).expect("own output reads back");
        prop_assert_eq!(&back, &c);
        prop_assert_eq!(back.to_json(), text);
    }
}

fn err(text: &str) -> String {
    Conversation::from_json(text)
        .expect_err("input must be rejected")
        .to_string()
}

#[test]
fn defaults_follow_the_constructors() {
    let c = Conversation::from_json(
        r#"{"messages": [{"role": "user", "content": "a <｜image｜> b <｜image｜>",
            "image_sources": [{"kind": "bytes", "value": "00ff"}]}]}"#,
    )
    .unwrap();
    assert_eq!(c.thinking_mode, Conversation::default().thinking_mode);
    let Message::User(u) = &c.messages[0] else {
        panic!("a user message")
    };
    // As `UserMessage::new`: the first occurrence per image is a placeholder, the rest is text.
    assert_eq!(
        u,
        &UserMessage::new(
            "a <｜image｜> b <｜image｜>",
            u.image_sources.clone(),
            "<｜image｜>"
        )
    );
    assert_eq!(u.placeholders, vec![2]);
    assert_eq!(u.image_sources[0].data, ImageData::Bytes(vec![0, 255]));
    assert_eq!(u.image_sources[0].detail, ImageDetail::High);
    let c = Conversation::from_json(r#"{"response_regex": "a+"}"#).unwrap();
    assert_eq!(c.response_format, ResponseFormat::Regex("a+".into()));
}

#[test]
fn invalid_input_is_a_clear_error() {
    let cases = [
        (
            r#"{"tool_choice": "sometimes"}"#,
            "unknown variant `sometimes`",
        ),
        (
            r#"{"reasoning_effort": "medium"}"#,
            "unknown variant `medium`",
        ),
        (
            r#"{"response_format": "yaml"}"#,
            "invalid response_format \"yaml\"",
        ),
        (
            r#"{"response_format": "json_object", "response_regex": "a"}"#,
            "cannot be combined",
        ),
        (
            r#"{"response_schema": {}, "response_regex": "a"}"#,
            "response_schema and response_regex cannot be combined",
        ),
        (r#"{"response_format": "regex"}"#, "needs response_regex"),
        (
            r#"{"messages": [{"role": "robot", "content": ""}]}"#,
            "unknown variant `robot`",
        ),
        (r#"{"messages": [{"content": ""}]}"#, "missing field `role`"),
        (
            r#"{"messages": [{"role": "user"}]}"#,
            "missing field `content`",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "", "colour": 1}]}"#,
            "unknown field `colour`",
        ),
        (r#"{"messagez": []}"#, "unknown field `messagez`"),
        (
            r#"{"messages": [{"role": "user", "content": "x", "image_token": ""}]}"#,
            "image_token must not be empty",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "[i]", "image_token": "[i]",
                "placeholders": [0]}]}"#,
            "1 placeholders but only 0 image sources",
        ),
        (
            r#"{"messages": [{"role": "tool", "content": "a[i]", "image_token": "[i]",
                "placeholders": [0], "image_sources": [{"kind": "url", "value": "u"}]}]}"#,
            "placeholder offset 0",
        ),
        (
            r#"{"messages": [{"role": "system", "content": "é[i]", "image_token": "[i]",
                "placeholders": [1], "image_sources": [{"kind": "url", "value": "u"}]}]}"#,
            "placeholder offset 1",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "[i][i]", "image_token": "[i]",
                "placeholders": [3, 0], "image_sources": [{"kind": "url", "value": "u"},
                {"kind": "url", "value": "v"}]}]}"#,
            "placeholder offset 0",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "", "image_sources":
                [{"kind": "file", "value": "u"}]}]}"#,
            "invalid image kind \"file\"",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "", "image_sources":
                [{"kind": "bytes", "value": "0g"}]}]}"#,
            "is not hex",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "", "image_sources":
                [{"kind": "url", "value": "u", "detail": "medium"}]}]}"#,
            "unknown variant `medium`",
        ),
        (r#"{"thinking_mode": "yes"}"#, "invalid type"),
        (r#""conversation""#, "invalid type"),
        ("{", "EOF"),
    ];
    for (input, want) in cases {
        let got = err(input);
        assert!(got.contains(want), "{input}: {got:?} lacks {want:?}");
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let depth = 100_000;
    let schema = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let got = err(&format!(r#"{{"response_schema": {schema}}}"#));
    assert!(got.contains("recursion limit"), "{got}");
    let params = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
    let got = err(&format!(
        r#"{{"tools": [{{"name": "t", "parameters": {params}}}]}}"#
    ));
    assert!(got.contains("recursion limit"), "{got}");
    // Nesting within the limit reads.
    let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
    assert!(Conversation::from_json(&format!(r#"{{"response_schema": {ok}}}"#)).is_ok());
}

#[test]
fn arrays_never_stand_for_objects() {
    // serde would read a struct from an array of its fields in order: `[]` was an empty
    // conversation. Every object of the layout must be an object.
    let cases = [
        "[]",
        r#"[[], true]"#,
        r#"{"messages": [["user", "hi"]]}"#,
        r#"{"messages": [{"role": "user", "content": "", "image_sources": [["url", "u"]]}]}"#,
        r#"{"messages": [{"role": "assistant", "tool_calls": [["i", "n", "{}"]]}]}"#,
        r#"{"tools": [["t"]]}"#,
        r#"{"messages": [["assistant", ""]]}"#,
        r#"{"messages": [{"role": "system", "content": "", "tools": [["t"]]}]}"#,
    ];
    for input in cases {
        let got = err(input);
        assert!(got.contains("invalid type"), "{input}: {got:?}");
    }
    assert!(err("[]").starts_with("invalid type: sequence, expected a JSON object"));
}
