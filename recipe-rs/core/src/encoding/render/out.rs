//! The span accumulator the renderer writes into.

use crate::conversation::{ImageText, TextPiece};
use crate::encoding::Span;
use crate::special_tokens::{SpecialToken, SpecialTokens};

/// Accumulates spans, merging adjacent text, so a template may write its text in as many pieces
/// as reads best without changing the result.
pub(super) struct Out<'a> {
    pub(super) spans: Vec<Span>,
    pub(super) tokens: &'a SpecialTokens,
}

impl<'a> Out<'a> {
    pub(super) fn new(tokens: &'a SpecialTokens) -> Self {
        Out {
            spans: Vec::new(),
            tokens,
        }
    }

    pub(super) fn text(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        if let Some(Span::Text(t)) = self.spans.last_mut() {
            t.push_str(s);
        } else {
            self.spans.push(Span::Text(s.to_owned()));
        }
    }

    pub(super) fn special(&mut self, t: SpecialToken) {
        self.spans
            .push(Span::Special(t, self.tokens.get(t).to_owned()));
    }

    /// Assistant text: the grounding tokens (`<｜ref｜>`, `<｜box｜>`, …) it spells are control
    /// tokens, every other control-token spelling stays plain text. With any grounding token
    /// spelled empty none is (as in the reference).
    pub(super) fn grounded(&mut self, text: &str) {
        let tokens = self.tokens;
        // As in the reference, a grounding token spelled empty turns grounding off: the whole
        // text is plain.
        if SpecialToken::GROUNDING
            .iter()
            .any(|t| tokens.get(*t).is_empty())
        {
            self.text(text);
            return;
        }
        let mut rest = text;
        loop {
            // Earliest match; the longest spelling wins a tie.
            let mut best: Option<(usize, usize, SpecialToken)> = None;
            for t in SpecialToken::GROUNDING {
                let sp = tokens.get(t);
                if sp.is_empty() {
                    continue;
                }
                if let Some(at) = rest.find(sp) {
                    let better = match best {
                        None => true,
                        Some((b_at, b_len, _)) => at < b_at || (at == b_at && sp.len() > b_len),
                    };
                    if better {
                        best = Some((at, sp.len(), t));
                    }
                }
            }
            match best {
                Some((at, len, t)) => {
                    self.text(&rest[..at]);
                    self.spans
                        .push(Span::Special(t, rest[at..at + len].to_owned()));
                    rest = &rest[at + len..];
                }
                None => {
                    self.text(rest);
                    return;
                }
            }
        }
    }

    /// Message text with image placeholders at the byte offsets conversion (or the message
    /// constructor) recorded. The text is never searched for the placeholder spelling here, so a
    /// spelling typed by a user stays plain text.
    pub(super) fn content_with_images(
        &mut self,
        content: &str,
        image_token: &str,
        placeholders: &[usize],
    ) {
        for piece in ImageText::pieces(content, placeholders, image_token) {
            match piece {
                TextPiece::Text(text) => self.text(text),
                TextPiece::Image => self
                    .spans
                    .push(Span::Special(SpecialToken::Image, image_token.to_owned())),
            }
        }
    }
}
