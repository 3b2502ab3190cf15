//! Prompt templates. An encoding renders a [`Conversation`](crate::Conversation) into
//! [`RenderedPrompt`]: a sequence of spans that are either plain text or a template-inserted
//! control token. Token IDs are produced from the spans, never from the joined string.

/// One piece of a rendered prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Span {
    /// Plain text, encoded without the added vocabulary.
    Text(String),
    /// A control token inserted by the template, with the spelling it was rendered with.
    Special(crate::SpecialToken, String),
}
