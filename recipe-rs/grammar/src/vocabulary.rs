//! The tokenizer's vocabulary as llguidance sees it, built once per tokenizer.
//!
//! Every ID maps to the bytes it stands for. Byte-level BPE pieces keep their raw bytes; every
//! added-vocabulary entry (control tokens, placeholders) becomes a *special* token, its spelling
//! behind llguidance's `0xFF` marker. A special token can therefore never be produced by a text
//! terminal of a grammar (no regex matches the `0xFF` byte): it is allowed only where a grammar
//! names it by ID (`<[128825]>`). IDs the tokenizer leaves unused get no bytes and are never
//! allowed.
//!
//! Building the token trie and llguidance's slice tables for the 129,280-entry vocabulary takes
//! a noticeable fraction of a second, so a [`GrammarVocabulary`] is meant to be built once per
//! tokenizer and shared (`Arc`) by every grammar compiled for it.

use std::sync::Arc;

use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use llguidance::ParserFactory;
use recipe_core::{SpecialToken, SpecialTokens, Tokenizer};

use crate::error::{GrammarError, GrammarResult};

/// The token environment and parser factory of one tokenizer.
pub struct GrammarVocabulary {
    tokenizer: Tokenizer,
    factory: ParserFactory,
    eos: u32,
}

impl std::fmt::Debug for GrammarVocabulary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrammarVocabulary")
            .field("vocab_size", &self.vocab_size())
            .field("eos", &self.eos)
            .finish()
    }
}

impl GrammarVocabulary {
    /// Build the environment of `tokenizer`; its end-of-sentence token is the released
    /// spelling's (`<｜end▁of▁sentence｜>`), the token llguidance allows once a grammar is done.
    pub fn from_tokenizer(tokenizer: &Tokenizer) -> GrammarResult<Arc<Self>> {
        let eos_spelling = SpecialToken::Eos.default_str();
        let eos = single_token(tokenizer, eos_spelling)?;
        let words = token_words(tokenizer);
        let info = TokRxInfo::new(words.len() as u32, eos);
        let trie = TokTrie::from(&info, &words);
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        let mut factory = ParserFactory::new_simple(&env)
            .map_err(|e| GrammarError::Vocabulary(format!("cannot index the vocabulary: {e}")))?;
        factory.quiet();
        Ok(Arc::new(GrammarVocabulary {
            tokenizer: tokenizer.clone(),
            factory,
            eos,
        }))
    }

    /// Number of token IDs (the width of a token mask, in bits).
    pub fn vocab_size(&self) -> usize {
        self.factory.tok_env().tok_trie().vocab_size()
    }

    /// The end-of-sentence ID: allowed exactly when a grammar accepts what came so far.
    pub fn eos(&self) -> u32 {
        self.eos
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub(crate) fn factory(&self) -> &ParserFactory {
        &self.factory
    }

    /// The ID of control token `kind` as `tokens` spells it; an error when the tokenizer does not
    /// have that spelling as one added token.
    pub fn control_token(&self, tokens: &SpecialTokens, kind: SpecialToken) -> GrammarResult<u32> {
        single_token(&self.tokenizer, tokens.get(kind))
    }
}

fn single_token(tokenizer: &Tokenizer, spelling: &str) -> GrammarResult<u32> {
    tokenizer.added_token_id(spelling).ok_or_else(|| {
        GrammarError::Vocabulary(format!(
            "{spelling:?} is not a single token of this tokenizer"
        ))
    })
}

/// The bytes of every ID, special tokens behind the `0xFF` marker, unused IDs empty.
fn token_words(tokenizer: &Tokenizer) -> Vec<Vec<u8>> {
    // Count-based size, extended past any IDs the count misses (holes below the largest ID).
    let mut size = tokenizer.vocab_size();
    while tokenizer.token_bytes_ref(size as u32).is_some() {
        size += 1;
    }
    let mut words = Vec::with_capacity(size);
    for id in 0..size as u32 {
        let word = match tokenizer.added_token(id) {
            Some(spelling) => {
                let mut w = Vec::with_capacity(spelling.len() + 1);
                w.push(TokTrie::SPECIAL_TOKEN_MARKER);
                w.extend_from_slice(spelling.as_bytes());
                w
            }
            None => tokenizer.token_bytes_ref(id).unwrap_or_default().to_vec(),
        };
        words.push(word);
    }
    words
}
