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

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use llguidance::api::TopLevelGrammar;
use llguidance::Matcher;

use llguidance::earley::SlicedBiasComputer;
use llguidance::toktrie::{ApproximateTokEnv, InferenceCapabilities, TokEnv, TokRxInfo, TokTrie};
use llguidance::ParserFactory;
use recipe_core::{SpecialToken, SpecialTokens, Tokenizer};

use crate::closing::{ClosingVocabulary, NameTokens};
use crate::error::{GrammarError, GrammarResult};

/// The token environment and parser factory of one tokenizer, and the grammars lately
/// compiled for it.
pub struct GrammarVocabulary {
    tokenizer: Tokenizer,
    factory: ParserFactory,
    eos: u32,
    closing: ClosingVocabulary,
    compiled: Mutex<CompiledCache>,
}

/// Most compiled grammars kept per vocabulary, and most Lark text they may hold in all.
pub const CACHED_GRAMMARS: usize = 64;
pub const CACHED_LARK_BYTES: usize = 16 << 20;

/// Compiled start states by Lark text, oldest first out. Requests of one client usually carry
/// the same tools request after request, so their grammar is compiled once; a hit costs a
/// clone of the start state.
#[derive(Default)]
struct CompiledCache {
    order: VecDeque<Arc<str>>,
    by_text: HashMap<Arc<str>, (Matcher, Arc<NameTokens>)>,
    bytes: usize,
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
        let mut factory = ParserFactory::new(&env, InferenceCapabilities::default(), &slices())
            .map_err(|e| GrammarError::Vocabulary(format!("cannot index the vocabulary: {e}")))?;
        factory.quiet();
        let closing = ClosingVocabulary::new(factory.tok_env().tok_trie());
        Ok(Arc::new(GrammarVocabulary {
            tokenizer: tokenizer.clone(),
            factory,
            eos,
            closing,
            compiled: Mutex::default(),
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

    /// The tokens the closing planner prefers.
    pub(crate) fn closing(&self) -> &ClosingVocabulary {
        &self.closing
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The start state of the grammar `lark` and the closing planner's name tokens (`names`
    /// makes them), compiled now or taken from the cache of grammars lately compiled for this
    /// vocabulary.
    pub(crate) fn start_state(
        &self,
        lark: &str,
        names: impl FnOnce() -> NameTokens,
    ) -> GrammarResult<(Matcher, Arc<NameTokens>)> {
        if let Some((m, n)) = self.cache().by_text.get(lark) {
            return Ok((m.deep_clone(), n.clone()));
        }
        let parser = self
            .factory
            .create_parser(TopLevelGrammar::from_lark(lark.to_owned()))
            .map_err(|e| GrammarError::Invalid(e.to_string()))?;
        let start = Matcher::new(Ok(parser));
        let names = Arc::new(names());
        if lark.len() <= CACHED_LARK_BYTES {
            let mut cache = self.cache();
            let key: Arc<str> = Arc::from(lark);
            if !cache.by_text.contains_key(&key) {
                while cache.order.len() >= CACHED_GRAMMARS
                    || cache.bytes + lark.len() > CACHED_LARK_BYTES
                {
                    let Some(old) = cache.order.pop_front() else {
                        break;
                    };
                    cache.bytes -= old.len();
                    cache.by_text.remove(&old);
                }
                cache.bytes += lark.len();
                cache.order.push_back(key.clone());
                cache
                    .by_text
                    .insert(key, (start.deep_clone(), names.clone()));
            }
        }
        Ok((start, names))
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, CompiledCache> {
        // The cache holds no invariant a panicking holder could break half-way.
        self.compiled.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ID of control token `kind` as `tokens` spells it; an error when the tokenizer does not
    /// have that spelling as one added token.
    pub fn control_token(&self, tokens: &SpecialTokens, kind: SpecialToken) -> GrammarResult<u32> {
        single_token(&self.tokenizer, tokens.get(kind))
    }
}

/// The vocabulary slices behind llguidance's mask fast path: the tokens that match a slice's
/// regex are precomputed once, and at a position where every such token is allowed (the
/// lexer state's language contains the slice) the mask takes the whole slice at once and walks
/// only the tokens outside it. llguidance's JSON slices (string bodies, whitespace) serve
/// `string="false"` values; free text gets two of its own:
/// * `(?s:.+)`: whole characters, for reasoning, which allows every text;
/// * `[^｜]+`: text without the DSML marker's first character, for content, which excludes
///   the spelled-out marker (`compile.rs`'s `TEXT`). Containing that character, a token may
///   spell part of the marker, so those few are walked one by one;
/// * `[^｜<]+`: the same without `<`, for the pieces of a raw string value, which end at `</`
///   (`compile.rs`'s `RAW_CHUNK`).
///
/// The slices only speed the mask up; the grammar alone decides what is allowed.
fn slices() -> Vec<String> {
    let marker = SpecialToken::Dsml.default_str();
    let first = marker.chars().next().unwrap_or('|');
    let mut out = SlicedBiasComputer::json_slices();
    out.push("(?s:.+)".to_owned());
    let first = crate::lark::regex_escaped(&first.to_string());
    out.push(format!("[^{first}]+"));
    out.push(format!("[^{first}<]+"));
    out
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
