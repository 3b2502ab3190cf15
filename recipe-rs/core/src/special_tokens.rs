//! The control tokens of the DeepSeek V4 vocabulary and their spellings.
//!
//! A [`SpecialToken`] is a *kind* of control token; [`SpecialTokens`] maps every kind to the
//! spelling a rendering uses. Templates only ever insert tokens through this table, so the set of
//! places where a control token can appear is fixed by the template code.

use std::fmt;

/// A kind of control token that the prompt template can insert.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SpecialToken {
    Bos,
    Eos,
    ThinkingStart,
    ThinkingEnd,
    System,
    User,
    Assistant,
    LatestReminder,
    Dsml,
    Image,
    Ref,
    RefEnd,
    Box,
    BoxEnd,
    Point,
    PointEnd,
    Polygon,
    PolygonEnd,
}

impl SpecialToken {
    /// Every kind, in declaration order.
    pub const ALL: [SpecialToken; 18] = [
        SpecialToken::Bos,
        SpecialToken::Eos,
        SpecialToken::ThinkingStart,
        SpecialToken::ThinkingEnd,
        SpecialToken::System,
        SpecialToken::User,
        SpecialToken::Assistant,
        SpecialToken::LatestReminder,
        SpecialToken::Dsml,
        SpecialToken::Image,
        SpecialToken::Ref,
        SpecialToken::RefEnd,
        SpecialToken::Box,
        SpecialToken::BoxEnd,
        SpecialToken::Point,
        SpecialToken::PointEnd,
        SpecialToken::Polygon,
        SpecialToken::PolygonEnd,
    ];

    /// The spelling used by the released DeepSeek V4 vocabulary.
    pub const fn default_str(self) -> &'static str {
        match self {
            SpecialToken::Bos => "<｜begin▁of▁sentence｜>",
            SpecialToken::Eos => "<｜end▁of▁sentence｜>",
            SpecialToken::ThinkingStart => "<think>",
            SpecialToken::ThinkingEnd => "</think>",
            SpecialToken::System => "<｜System｜>",
            SpecialToken::User => "<｜User｜>",
            SpecialToken::Assistant => "<｜Assistant｜>",
            SpecialToken::LatestReminder => "<｜latest_reminder｜>",
            SpecialToken::Dsml => "｜DSML｜",
            SpecialToken::Image => "<｜image｜>",
            SpecialToken::Ref => "<｜ref｜>",
            SpecialToken::RefEnd => "<｜/ref｜>",
            SpecialToken::Box => "<｜box｜>",
            SpecialToken::BoxEnd => "<｜/box｜>",
            SpecialToken::Point => "<｜point｜>",
            SpecialToken::PointEnd => "<｜/point｜>",
            SpecialToken::Polygon => "<｜polygon｜>",
            SpecialToken::PolygonEnd => "<｜/polygon｜>",
        }
    }

    /// The Python-facing variant name (`Bos`, `ThinkingStart`, …).
    pub const fn name(self) -> &'static str {
        match self {
            SpecialToken::Bos => "Bos",
            SpecialToken::Eos => "Eos",
            SpecialToken::ThinkingStart => "ThinkingStart",
            SpecialToken::ThinkingEnd => "ThinkingEnd",
            SpecialToken::System => "System",
            SpecialToken::User => "User",
            SpecialToken::Assistant => "Assistant",
            SpecialToken::LatestReminder => "LatestReminder",
            SpecialToken::Dsml => "Dsml",
            SpecialToken::Image => "Image",
            SpecialToken::Ref => "Ref",
            SpecialToken::RefEnd => "RefEnd",
            SpecialToken::Box => "Box",
            SpecialToken::BoxEnd => "BoxEnd",
            SpecialToken::Point => "Point",
            SpecialToken::PointEnd => "PointEnd",
            SpecialToken::Polygon => "Polygon",
            SpecialToken::PolygonEnd => "PolygonEnd",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for SpecialToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The spelling of every [`SpecialToken`] used by one rendering or parsing setup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecialTokens {
    spellings: [String; 18],
}

impl Default for SpecialTokens {
    fn default() -> Self {
        SpecialTokens { spellings: SpecialToken::ALL.map(|t| t.default_str().to_owned()) }
    }
}

impl SpecialTokens {
    /// The spelling of `token` in this table.
    pub fn get(&self, token: SpecialToken) -> &str {
        &self.spellings[token.index()]
    }

    /// Replace the spelling of `token`.
    pub fn set(&mut self, token: SpecialToken, spelling: impl Into<String>) {
        self.spellings[token.index()] = spelling.into();
    }

    /// Builder form of [`SpecialTokens::set`].
    pub fn with(mut self, token: SpecialToken, spelling: impl Into<String>) -> Self {
        self.set(token, spelling);
        self
    }

    /// `(kind, spelling)` for every kind.
    pub fn iter(&self) -> impl Iterator<Item = (SpecialToken, &str)> {
        SpecialToken::ALL.iter().map(move |&t| (t, self.get(t)))
    }
}
