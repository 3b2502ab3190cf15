//! A compiled output grammar and the per-sequence matchers made from it.
//!
//! [`OutputGrammar::compile`] runs once per request: it reads the request into a plan, writes
//! the Lark text and lets llguidance compile it against the tokenizer's shared
//! [`GrammarVocabulary`], which keeps the grammars it lately compiled: a request whose tools,
//! tool choice and format were seen before gets a clone of the compiled start state. [`OutputGrammar::matcher`] then hands out independent matchers (one per
//! sequence, e.g. per sample of `n`), each a clone of the compiled start state.
//!
//! A matcher never enters an error state on a rejected token: [`GrammarMatcher::accept_token`]
//! checks the token first and answers `false`, leaving the matcher where it was, so a sampler
//! that proposes a draft token can simply try it.

use std::sync::Arc;

use llguidance::Matcher;
use recipe_core::SpecialToken;
use recipe_protocol::ConversationRequest;

use crate::closing::{name_texts, shortest_end, Closing, ClosingState, EndTokens, NameTokens};
use crate::compile::{lark_text, GrammarTokens};
use crate::error::{GrammarError, GrammarResult};
use crate::plan::GrammarPlan;
use crate::vocabulary::GrammarVocabulary;

/// The grammar of one request's valid outputs, compiled for one tokenizer.
pub struct OutputGrammar {
    vocabulary: Arc<GrammarVocabulary>,
    plan: GrammarPlan,
    tokens: GrammarTokens,
    spellings: recipe_core::SpecialTokens,
    lark: String,
    start: Matcher,
    /// The tokens of the grammar's names, for the closing planner.
    names: Arc<NameTokens>,
}

impl std::fmt::Debug for OutputGrammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputGrammar")
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

impl OutputGrammar {
    /// The grammar of `request`'s output constraint (or of `lark`, the caller's grammar for the
    /// answer), `None` when there is nothing to constrain. `thinking_budget`: most reasoning
    /// tokens before `</think>` is forced.
    pub fn compile(
        request: &ConversationRequest,
        vocabulary: &Arc<GrammarVocabulary>,
        thinking_budget: Option<u32>,
        lark: Option<&str>,
    ) -> GrammarResult<Option<Self>> {
        let Some(plan) = GrammarPlan::from_request(request, thinking_budget, lark)? else {
            return Ok(None);
        };
        Self::from_plan(plan, request, vocabulary).map(Some)
    }

    fn from_plan(
        plan: GrammarPlan,
        request: &ConversationRequest,
        vocabulary: &Arc<GrammarVocabulary>,
    ) -> GrammarResult<Self> {
        let spellings = &request.parsing_options.special_tokens;
        let eos = vocabulary.control_token(spellings, SpecialToken::Eos)?;
        if eos != vocabulary.eos() {
            return Err(GrammarError::Vocabulary(format!(
                "the request ends outputs with token {eos}, the tokenizer's grammars with {}",
                vocabulary.eos()
            )));
        }
        let tokens = GrammarTokens {
            dsml: vocabulary.control_token(spellings, SpecialToken::Dsml)?,
            thinking_end: vocabulary.control_token(spellings, SpecialToken::ThinkingEnd)?,
        };
        let lark = lark_text(&plan, tokens, spellings);
        // The names follow from the Lark text (it spells every one), so they are cached with it.
        let (start, names) = vocabulary.start_state(&lark, || {
            let tokenizer = vocabulary.tokenizer();
            NameTokens::new(
                name_texts(&plan).iter().map(|(r, t)| (*r, t.as_str())),
                |text| tokenizer.encode_ordinary(text).unwrap_or_default(),
            )
        })?;
        Ok(OutputGrammar {
            names,
            vocabulary: vocabulary.clone(),
            plan,
            tokens,
            spellings: spellings.clone(),
            lark,
            start,
        })
    }

    /// A matcher at the start of the output.
    pub fn matcher(&self) -> GrammarMatcher {
        GrammarMatcher {
            inner: self.start.deep_clone(),
            vocabulary: self.vocabulary.clone(),
            vocab_size: self.vocab_size(),
            eos: self.vocabulary.eos(),
            controls: [self.tokens.dsml, self.tokens.thinking_end],
            names: self.names.clone(),
            accepted: 0,
            ended: false,
            closing: ClosingState::default(),
        }
    }

    /// Width of a token mask in bits.
    pub fn vocab_size(&self) -> usize {
        self.vocabulary.vocab_size()
    }

    /// The grammar as llguidance Lark text.
    pub fn lark(&self) -> &str {
        &self.lark
    }

    /// What the grammar was built from.
    pub fn plan(&self) -> &GrammarPlan {
        &self.plan
    }

    /// The same shape as an xgrammar structural tag (JSON text).
    pub fn structural_tag_json(&self) -> String {
        crate::structural_tag::structural_tag(&self.plan, self.tokens, &self.spellings).to_string()
    }

    /// Control-token IDs the grammar places.
    pub fn tokens(&self) -> GrammarTokens {
        self.tokens
    }
}

/// Where one sequence stands in an [`OutputGrammar`].
pub struct GrammarMatcher {
    inner: Matcher,
    vocabulary: Arc<GrammarVocabulary>,
    vocab_size: usize,
    eos: u32,
    /// The grammar's control tokens other than EOS (`｜DSML｜`, `</think>`).
    controls: [u32; 2],
    names: Arc<NameTokens>,
    /// Tokens accepted so far, EOS included (what `rollback` may take back).
    accepted: usize,
    /// EOS was accepted. It is kept here, not fed to llguidance, so that rolling it back is
    /// the same whether or not llguidance had already stopped before it.
    ended: bool,
    /// The closing planner's state ([`GrammarMatcher::fill_bitmask_within`]).
    closing: ClosingState,
}

impl GrammarMatcher {
    /// Number of 32-bit words of one bitmask row.
    pub fn mask_words(&self) -> usize {
        self.vocab_size.div_ceil(32)
    }

    /// Write the allowed tokens into `row`: bit `i % 32` of word `i / 32` set when token `i` may
    /// come next. A row shorter than [`GrammarMatcher::mask_words`] gets the tokens it has room
    /// for; words past the vocabulary are cleared. Once the output is complete only EOS is set.
    pub fn fill_bitmask(&mut self, row: &mut [u32]) -> GrammarResult<()> {
        if self.ended {
            row.fill(0);
            return Ok(());
        }
        let mask = self
            .inner
            .compute_mask_or_eos()
            .map_err(|e| GrammarError::Matcher(format!("cannot compute the token mask: {e}")))?;
        let words = mask.as_slice();
        let n = words.len().min(row.len());
        row[..n].copy_from_slice(&words[..n]);
        row[n..].fill(0);
        Ok(())
    }

    /// [`GrammarMatcher::fill_bitmask`] for an output that may have at most `max_tokens` tokens
    /// in all (counted from the matcher's start, EOS included): near that budget the mask holds
    /// only the next token of a short valid end (the closing planner, `closing.rs`), so the
    /// output is complete when the budget runs out. A complete output stays free, but it may
    /// open new structure (a control token) only while the end after it still fits.
    pub fn fill_bitmask_within(&mut self, row: &mut [u32], max_tokens: usize) -> GrammarResult<()> {
        self.fill_bitmask(row)?;
        if self.ended || self.inner.is_error() {
            return Ok(());
        }
        let accepting = self.is_accepting();
        let ends = EndTokens {
            vocabulary: self.vocabulary.closing(),
            controls: &self.controls,
            eos: self.eos,
            names: &self.names,
        };
        let bit = |row: &[u32], t: u32| {
            row.get(t as usize / 32)
                .is_some_and(|w| w >> (t % 32) & 1 == 1)
        };
        let decision = self.closing.decide(
            &self.inner,
            accepting,
            self.accepted,
            max_tokens,
            ends,
            &|t| bit(row, t),
        );
        match decision {
            Closing::Free => {}
            Closing::Without(tokens) => {
                for t in tokens {
                    if let Some(w) = row.get_mut(t as usize / 32) {
                        *w &= !(1 << (t % 32));
                    }
                }
            }
            Closing::Force(t) if bit(row, t) => {
                row.fill(0);
                row[t as usize / 32] |= 1 << (t % 32);
            }
            Closing::Force(_) => self.closing.reset(), // not allowed after all: stay free
        }
        Ok(())
    }

    /// The end the closing planner finds from here: at most `limit` tokens after which the
    /// output may end (EOS not included; empty when it may end now), `None` when it finds
    /// none. The matcher is not changed.
    pub fn closing_tokens(&mut self, limit: usize) -> Option<Vec<u32>> {
        if self.ended {
            return Some(Vec::new());
        }
        let ends = EndTokens {
            vocabulary: self.vocabulary.closing(),
            controls: &self.controls,
            eos: self.eos,
            names: &self.names,
        };
        shortest_end(&self.inner, ends, limit)
    }

    /// Accept `token` if the grammar allows it here (`true`), else leave the state as it is
    /// (`false`).
    pub fn accept_token(&mut self, token: u32) -> GrammarResult<bool> {
        Ok(self.accept_tokens(&[token])? == 1)
    }

    /// Accept the longest allowed prefix of `tokens`; how many were accepted.
    pub fn accept_tokens(&mut self, tokens: &[u32]) -> GrammarResult<usize> {
        if let Some(t) = tokens.iter().find(|&&t| t as usize >= self.vocab_size) {
            return Err(GrammarError::Matcher(format!(
                "token {t} is outside the vocabulary ({} tokens)",
                self.vocab_size
            )));
        }
        let mut n = 0;
        for &t in tokens {
            if self.ended {
                break;
            }
            if t == self.eos {
                if !self.is_accepting() {
                    break;
                }
                self.ended = true;
                n += 1;
                continue;
            }
            if self.inner.is_stopped() {
                break;
            }
            let k = self
                .inner
                .try_consume_tokens(&[t])
                .map_err(|e| GrammarError::Matcher(e.to_string()))?;
            if k == 0 {
                break;
            }
            self.closing.accepted(self.accepted + n, t);
            n += 1;
        }
        self.accepted += n;
        Ok(n)
    }

    /// Take back the last `n` accepted tokens.
    pub fn rollback(&mut self, n: usize) -> GrammarResult<()> {
        if n > self.accepted {
            return Err(GrammarError::Matcher(format!(
                "cannot roll back {n} tokens: {} were accepted",
                self.accepted
            )));
        }
        let mut rest = n;
        if rest > 0 && self.ended {
            self.ended = false;
            rest -= 1;
        }
        if rest > 0 {
            self.inner
                .rollback(rest)
                .map_err(|e| GrammarError::Matcher(e.to_string()))?;
        }
        self.accepted -= n;
        self.closing.reset();
        Ok(())
    }

    /// Whether the output may end here (EOS allowed now, or already accepted).
    pub fn is_accepting(&mut self) -> bool {
        self.ended
            || (!self.inner.is_error()
                && (self.inner.is_stopped() || self.inner.is_accepting().unwrap_or(false)))
    }

    /// Whether the output is over: EOS was accepted. After that every mask is empty and no
    /// token is accepted.
    pub fn is_terminated(&self) -> bool {
        self.ended
    }

    /// Tokens accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted
    }
}
