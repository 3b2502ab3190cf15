//! The control tokens of the DeepSeek V4 vocabulary and their spellings.
//!
//! A [`SpecialToken`] is a *kind* of control token; [`SpecialTokens`] maps every kind to the
//! spelling a rendering uses. Templates only ever insert tokens through this table, so the set of
//! places where a control token can appear is fixed by the template code.

use std::fmt;

/// Calls `$callback! { Kind => "spelling", ... }` with every kind of control token and its
/// spelling in the released DeepSeek V4 vocabulary, in declaration order.
///
/// [`SpecialToken`] is declared from this one list, and so is any mirror of it (the Python
/// binding's enum), so the kinds, their order and their names cannot drift apart.
#[macro_export]
macro_rules! for_each_special_token {
    ($callback:ident) => {
        $callback! {
            Bos => "<｜begin▁of▁sentence｜>",
            Eos => "<｜end▁of▁sentence｜>",
            ThinkingStart => "<think>",
            ThinkingEnd => "</think>",
            System => "<｜System｜>",
            User => "<｜User｜>",
            Assistant => "<｜Assistant｜>",
            LatestReminder => "<｜latest_reminder｜>",
            Dsml => "｜DSML｜",
            Image => "<｜image｜>",
            Ref => "<｜ref｜>",
            RefEnd => "<｜/ref｜>",
            Box => "<｜box｜>",
            BoxEnd => "<｜/box｜>",
            Point => "<｜point｜>",
            PointEnd => "<｜/point｜>",
            Polygon => "<｜polygon｜>",
            PolygonEnd => "<｜/polygon｜>",
        }
    };
}

macro_rules! declare_special_token {
    ($($kind:ident => $spelling:literal,)*) => {
        /// A kind of control token that the prompt template can insert.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum SpecialToken {
            $($kind,)*
        }

        impl SpecialToken {
    /// The grounding tokens (`<｜ref｜>`, `<｜box｜>`, …): in assistant text their spellings are
    /// control tokens, unlike every other control-token spelling.
    pub const GROUNDING: [SpecialToken; 8] = [
        SpecialToken::Ref,
        SpecialToken::RefEnd,
        SpecialToken::Box,
        SpecialToken::BoxEnd,
        SpecialToken::Point,
        SpecialToken::PointEnd,
        SpecialToken::Polygon,
        SpecialToken::PolygonEnd,
    ];

            /// Every kind, in declaration order.
            pub const ALL: [SpecialToken; [$($spelling),*].len()] = [$(SpecialToken::$kind),*];

            /// The spelling used by the released DeepSeek V4 vocabulary.
            pub const fn default_str(self) -> &'static str {
                match self {
                    $(SpecialToken::$kind => $spelling,)*
                }
            }

            /// The Python-facing variant name (`Bos`, `ThinkingStart`, …).
            pub const fn name(self) -> &'static str {
                match self {
                    $(SpecialToken::$kind => stringify!($kind),)*
                }
            }
        }
    };
}

for_each_special_token!(declare_special_token);

impl SpecialToken {
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
    spellings: [String; SpecialToken::ALL.len()],
}

impl Default for SpecialTokens {
    fn default() -> Self {
        SpecialTokens {
            spellings: SpecialToken::ALL.map(|t| t.default_str().to_owned()),
        }
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
