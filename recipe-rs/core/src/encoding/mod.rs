//! Prompt templates. An encoding renders a [`Conversation`](crate::Conversation) into
//! [`RenderedPrompt`]: a sequence of spans that are either plain text or a template-inserted
//! control token. Token IDs are produced from the spans, never from the joined string.
//!
//! Two templates exist: [`EncodingVersion::V4`] (DeepSeek V4 Pro) and [`EncodingVersion::V41`]
//! (DeepSeek V4.1 Flash). [`Encoding`] holds the version and the special-token spellings; what
//! the two templates write differently is the version's profile ([`crate::profile`]), which the
//! one renderer (`render/`) reads.
//!
//! Token encoding ([`Encoding::encode`]): the text between two template-inserted tokens is
//! encoded in one piece with [`Tokenizer::encode_ordinary`] (no added vocabulary), each
//! template-inserted token goes in by the ID of its spelling in the added vocabulary, and a
//! token whose spelling is empty contributes nothing. So user text that spells a control token
//! stays plain text.
//!
//! Assistant content and reasoning are the one place where the template recognises control
//! tokens inside message text: the grounding tokens (`<｜ref｜>`, `<｜/ref｜>`, `<｜box｜>`, …,
//! with the spellings of the active [`SpecialTokens`]) become template tokens there, as in the
//! official package. A grounding spelling overridden to `""` is ignored (the text stays plain);
//! the official renderer panics on that input when the assistant text is not ASCII.
//!
//! V4 tool-result ordering: after a tool-calling assistant turn the V4 template moves tool
//! results ahead of the next messages. Consecutive user messages count as one unit; for each
//! assistant with `n` calls (at its unit index before any reordering) the next `n` units are
//! stably sorted, results without an ID first, then by call ID, then the rest (see
//! `render::v4::order_after_calls`). Probing the official package with a few thousand random
//! message orders finds no difference. V4.1 orders results within a merged user turn instead.

pub mod json;
mod render;
pub mod session;

use crate::conversation::{Conversation, ImageSource};
use crate::special_tokens::{SpecialToken, SpecialTokens};
use crate::tokenizer::{Tokenizer, TokenizerError};

pub use render::render;

/// One piece of a rendered prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Span {
    /// Plain text, encoded without the added vocabulary.
    Text(String),
    /// A control token inserted by the template, with the spelling it was rendered with.
    Special(crate::SpecialToken, String),
}

/// Which prompt template to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EncodingVersion {
    /// DeepSeek V4 (Pro).
    V4,
    /// DeepSeek V4.1 (Flash).
    V41,
}

impl EncodingVersion {
    /// The template a model version is rendered with.
    pub fn for_model(model: crate::ModelVersion) -> Self {
        match model {
            crate::ModelVersion::DeepseekV4Pro => EncodingVersion::V4,
            crate::ModelVersion::DeepseekV41Flash => EncodingVersion::V41,
        }
    }
}

/// A rendered prompt: spans plus the image sources its placeholders stand for (in order).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RenderedPrompt {
    pub spans: Vec<Span>,
    pub image_sources: Vec<ImageSource>,
}

impl RenderedPrompt {
    /// The prompt as one string.
    pub fn prompt(&self) -> String {
        let mut s = String::with_capacity(self.spans.iter().map(|sp| span_text(sp).len()).sum());
        for sp in &self.spans {
            s.push_str(span_text(sp));
        }
        s
    }

    /// Byte ranges `(start, end)` of the template-inserted tokens in [`RenderedPrompt::prompt`].
    /// Tokens with an empty spelling have no range.
    pub fn special_ranges(&self) -> Vec<(usize, usize)> {
        self.ranges(|s| s.len())
    }

    /// Like [`RenderedPrompt::special_ranges`], in Unicode code points (Python `str` indices).
    pub fn special_char_ranges(&self) -> Vec<(usize, usize)> {
        self.ranges(|s| s.chars().count())
    }

    fn ranges(&self, len: impl Fn(&str) -> usize) -> Vec<(usize, usize)> {
        let mut pos = 0;
        let mut out = Vec::new();
        for sp in &self.spans {
            let n = len(span_text(sp));
            if let Span::Special(..) = sp {
                if n > 0 {
                    out.push((pos, pos + n));
                }
            }
            pos += n;
        }
        out
    }
}

fn span_text(sp: &Span) -> &str {
    match sp {
        Span::Text(t) => t,
        Span::Special(_, s) => s,
    }
}

/// Why [`Encoding::encode`] failed. The messages match the official package.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("no tokenizer is attached to the encoding")]
    NoTokenizer,
    #[error("failed to encode conversation: special token {0:?} is not in the added vocabulary")]
    MissingSpecial(String),
    #[error("failed to encode conversation: {0}")]
    Tokenizer(#[from] TokenizerError),
}

/// A prompt template with its special-token spellings and, optionally, a tokenizer.
#[derive(Clone, Debug)]
pub struct Encoding {
    pub version: EncodingVersion,
    pub special_tokens: SpecialTokens,
    pub tokenizer: Option<Tokenizer>,
}

impl Encoding {
    pub fn new(version: EncodingVersion) -> Self {
        Encoding {
            version,
            special_tokens: SpecialTokens::default(),
            tokenizer: None,
        }
    }

    pub fn with_special_tokens(mut self, special_tokens: SpecialTokens) -> Self {
        self.special_tokens = special_tokens;
        self
    }

    pub fn with_tokenizer(mut self, tokenizer: Tokenizer) -> Self {
        self.tokenizer = Some(tokenizer);
        self
    }

    /// Render `conv` into spans.
    pub fn render(&self, conv: &Conversation) -> RenderedPrompt {
        render(self.version, &self.special_tokens, conv)
    }

    /// Render and encode `conv` with the attached tokenizer.
    pub fn encode(&self, conv: &Conversation) -> Result<Vec<u32>, EncodeError> {
        let tok = self.tokenizer.as_ref().ok_or(EncodeError::NoTokenizer)?;
        let rendered = self.render(conv);
        encode_spans(tok, &rendered.spans)
    }
}

/// Encode spans: text runs with the ordinary vocabulary, template tokens by ID.
///
/// Adjacent text spans are joined and encoded as one piece, so the result does not depend on
/// how the template happened to split its text. Long prompts encode their text runs on several
/// threads; every run is encoded on its own either way, so the IDs are the same.
pub fn encode_spans(tok: &Tokenizer, spans: &[Span]) -> Result<Vec<u32>, EncodeError> {
    enum Piece {
        Text(String),
        Id(u32),
    }
    let mut pieces: Vec<Piece> = Vec::new();
    let mut pending = String::new();
    let mut text_bytes = 0;
    for sp in spans {
        match sp {
            Span::Text(t) => pending.push_str(t),
            Span::Special(_, spelling) => {
                if spelling.is_empty() {
                    continue;
                }
                let id = tok
                    .added_token_id(spelling)
                    .ok_or_else(|| EncodeError::MissingSpecial(spelling.clone()))?;
                if !pending.is_empty() {
                    text_bytes += pending.len();
                    pieces.push(Piece::Text(std::mem::take(&mut pending)));
                }
                pieces.push(Piece::Id(id));
            }
        }
    }
    if !pending.is_empty() {
        text_bytes += pending.len();
        pieces.push(Piece::Text(pending));
    }
    // With the tokenizer's fast path, runs are cheap enough that spreading many short runs over
    // threads costs more than it saves (and suffers on a busy machine); a long run is still
    // cut and encoded in parallel inside the tokenizer.
    if text_bytes < PARALLEL_MIN_TEXT_BYTES || tok.uses_fast_path() {
        let mut ids = Vec::new();
        for p in &pieces {
            match p {
                Piece::Text(t) => tok.encode_ordinary_into(t, &mut ids)?,
                Piece::Id(id) => ids.push(*id),
            }
        }
        return Ok(ids);
    }
    use rayon::prelude::*;
    let parts: Vec<Result<Vec<u32>, TokenizerError>> = pieces
        .par_iter()
        .map(|p| match p {
            Piece::Text(t) => tok.encode_ordinary(t),
            Piece::Id(id) => Ok(vec![*id]),
        })
        .collect();
    let mut ids = Vec::with_capacity(text_bytes / 3);
    for part in parts {
        ids.extend(part?);
    }
    Ok(ids)
}

/// Prompts with at least this much plain text encode their text runs in parallel.
const PARALLEL_MIN_TEXT_BYTES: usize = 16 * 1024;

/// The kind of control token a template-inserted span stands for.
pub fn span_kind(sp: &Span) -> Option<SpecialToken> {
    match sp {
        Span::Special(k, _) => Some(*k),
        Span::Text(_) => None,
    }
}
