//! Image placeholders are positions, not text: the renderer marks exactly the placeholders a
//! message records, however often its text spells the image token.

use proptest::prelude::*;
use recipe_core::encoding::{Encoding, EncodingVersion, Span};
use recipe_core::{
    Conversation, ImageData, ImageDetail, ImageSource, ImageText, Message, SpecialToken,
    UserMessage,
};

const IMG: &str = "<｜image｜>";

fn source() -> ImageSource {
    ImageSource {
        data: ImageData::Url("https://x/a.png".into()),
        detail: ImageDetail::High,
        path: String::new(),
    }
}

fn image_spans(msg: UserMessage, v: EncodingVersion) -> Vec<Span> {
    let conv = Conversation {
        messages: vec![Message::User(msg)],
        thinking_mode: false,
        ..Default::default()
    };
    Encoding::new(v).render(&conv).spans
}

#[test]
fn built_text_marks_only_pushed_placeholders() {
    let mut text = ImageText::plain(format!("typed {IMG} "));
    text.push_placeholder(IMG);
    text.push_text(IMG);
    let msg = UserMessage::from_text(text, vec![source()], IMG);
    assert_eq!(msg.content, format!("typed {IMG} {IMG}{IMG}"));
    for v in [EncodingVersion::V4, EncodingVersion::V41] {
        let spans = image_spans(msg.clone(), v);
        let k = spans
            .iter()
            .position(|s| matches!(s, Span::Special(SpecialToken::Image, _)))
            .unwrap();
        assert_eq!(spans[k - 1], Span::Text(format!("typed {IMG} ")));
        assert_eq!(spans[k + 1], Span::Text(IMG.to_owned()));
    }
}

#[test]
fn scanned_text_marks_the_first_occurrences_one_per_source() {
    let msg = UserMessage::new(format!("a{IMG}b{IMG}c{IMG}"), vec![source(), source()], IMG);
    assert_eq!(msg.placeholders, vec![1, 2 + IMG.len()]);
    let msg = UserMessage::new("no token", vec![source()], IMG);
    assert!(msg.placeholders.is_empty());
}

#[test]
fn inconsistent_offsets_are_ignored() {
    let msg = UserMessage {
        content: format!("ab{IMG}"),
        image_sources: vec![source()],
        image_token: IMG.to_owned(),
        placeholders: vec![1, 99, 2, 2],
    };
    let spans = image_spans(msg, EncodingVersion::V41);
    let images = spans
        .iter()
        .filter(|s| matches!(s, Span::Special(SpecialToken::Image, _)))
        .count();
    assert_eq!(images, 1);
}

proptest! {
    /// Joining pieces keeps every piece's placeholders and adds none.
    #[test]
    fn join_keeps_placeholders(pieces in prop::collection::vec((prop::sample::select(vec!["x", IMG, "é", ""]), any::<bool>()), 0..12)) {
        let built: Vec<ImageText> = pieces.iter().map(|(t, img)| {
            let mut p = ImageText::plain(*t);
            if *img { p.push_placeholder(IMG); }
            p
        }).collect();
        let joined = ImageText::join(&built, "\n\n");
        let expected: usize = pieces.iter().filter(|(_, img)| *img).count();
        prop_assert_eq!(joined.placeholders.len(), expected);
        for at in &joined.placeholders {
            prop_assert!(joined.content[*at..].starts_with(IMG));
        }
    }
}
