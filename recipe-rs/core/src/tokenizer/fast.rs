//! A shortcut for [`super::Tokenizer::encode_ordinary_into`] on tokenizers of one common shape.
//!
//! # When it applies
//!
//! [`FastPath::detect`] accepts a loaded `tokenizer.json` only if
//!
//! * the normalizer is absent or an empty `Sequence` (it changes nothing),
//! * the pre-tokenizer is a `Sequence` of one or more `Split` steps with a regular-expression
//!   pattern, behavior `Isolated` and `invert: false`, followed by exactly one `ByteLevel` step
//!   with `add_prefix_space: false` and `use_regex: false`,
//! * the model is BPE without dropout.
//!
//! Every other tokenizer keeps the general pipeline.
//!
//! # Why the IDs are the same as the general pipeline's
//!
//! The general pipeline keeps a list of pieces (starting with the whole text) and lets each
//! pre-tokenizer step rewrite it, carrying offset bookkeeping we do not need:
//!
//! * A `Split` step with behavior `Isolated` runs its regular expression over each piece on its
//!   own (the piece is the whole subject string, so look-arounds see nothing outside it), takes
//!   the matches the engine's `find_iter` yields, and replaces the piece by the alternating
//!   non-matched and matched stretches in order, dropping empty ones. Here the regular
//!   expressions are compiled from the tokenizer's own pattern strings with the same engine and
//!   type ([`SysRegex`], Oniguruma, exactly as `Split` builds them), run with the same
//!   `find_iter` over the same piece strings, and the stretches are cut the same way, so the
//!   pieces are the same byte ranges. The recursion below visits them in text order, so the
//!   order is the same too.
//! * `ByteLevel` without prefix space and without its own regular expression does not split:
//!   it only rewrites each byte of a piece as one character of GPT-2's byte table. The table
//!   built here is that table (same construction), and the mapping is one-to-one.
//! * The model then tokenizes each rewritten piece on its own. Here each piece goes to the very
//!   same model (`Model::tokenize`) with the same rewritten string. BPE without dropout is a
//!   function of that string, so remembering a piece's IDs in a cache returns what the model
//!   would return again.
//!
//! An empty normalizer leaves the text as it is, so nothing before the pre-tokenizer differs.
//! The property test `fast_path_matches_general_pipeline` (core/tests) checks the claim on
//! arbitrary text against the general pipeline.

use std::collections::HashMap;
use std::sync::RwLock;

use tokenizers::models::ModelWrapper;
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::utils::SysRegex;
use tokenizers::{Model, SplitDelimiterBehavior};

/// Pieces at most this long (bytes) are remembered.
const CACHE_MAX_PIECE_BYTES: usize = 128;
/// The cache is emptied when it holds this many pieces, so its memory stays bounded.
const CACHE_MAX_ENTRIES: usize = 1 << 16;

/// Piece → IDs. aHash is fast on short keys and randomly seeded, so text crafted to collide
/// cannot make lookups slow.
type PieceCache = HashMap<Box<str>, Box<[u32]>, ahash::RandomState>;

/// The detected shape: the split expressions in order, the byte table, and a piece cache.
pub(super) struct FastPath {
    splits: Vec<SysRegex>,
    patterns: Vec<String>,
    byte_char: [char; 256],
    cache: RwLock<PieceCache>,
}

/// GPT-2's byte → printable character table (the one `ByteLevel` uses).
pub(super) fn gpt2_byte_chars() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut extra = 0u32;
    for b in 0..=255u8 {
        let printable = (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
        let code = if printable {
            u32::from(b)
        } else {
            extra += 1;
            255 + extra
        };
        // Codes stay below 0x200: always a valid scalar value.
        table[b as usize] = char::from_u32(code).unwrap_or('\0');
    }
    table
}

impl FastPath {
    /// The fast path for `hf`, or `None` when its pipeline is not of the supported shape.
    pub(super) fn detect(hf: &tokenizers::Tokenizer) -> Option<FastPath> {
        match hf.get_normalizer() {
            None => {}
            Some(NormalizerWrapper::Sequence(seq)) if seq.as_ref().is_empty() => {}
            Some(_) => return None,
        }
        match hf.get_model() {
            ModelWrapper::BPE(bpe) if bpe.dropout.is_none_or(|p| p == 0.0) => {}
            _ => return None,
        }
        let Some(PreTokenizerWrapper::Sequence(seq)) = hf.get_pre_tokenizer() else {
            return None;
        };
        let steps = seq.as_ref();
        let (last, split_steps) = steps.split_last()?;
        match last {
            PreTokenizerWrapper::ByteLevel(bl) if !bl.add_prefix_space && !bl.use_regex => {}
            _ => return None,
        }
        if split_steps.is_empty() {
            return None;
        }
        let mut splits = Vec::with_capacity(split_steps.len());
        let mut patterns = Vec::with_capacity(split_steps.len());
        for step in split_steps {
            let PreTokenizerWrapper::Split(split) = step else {
                return None;
            };
            if split.invert || split.behavior != SplitDelimiterBehavior::Isolated {
                return None;
            }
            let tokenizers::pre_tokenizers::split::SplitPattern::Regex(pattern) = &split.pattern
            else {
                return None;
            };
            splits.push(SysRegex::new(pattern).ok()?);
            patterns.push(pattern.clone());
        }
        Some(FastPath {
            splits,
            patterns,
            byte_char: gpt2_byte_chars(),
            cache: RwLock::new(PieceCache::default()),
        })
    }

    /// The split patterns, in order.
    pub(super) fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Append the IDs of `text` (pre-tokenizer and model, as the general pipeline) to `out`.
    pub(super) fn encode_into(
        &self,
        model: &ModelWrapper,
        text: &str,
        out: &mut Vec<u32>,
    ) -> Result<(), String> {
        let mut scratch = String::new();
        self.split_level(0, text, &mut |piece| {
            self.emit(model, piece, &mut scratch, out)
        })
    }

    /// Cut `s` with split expression `level` and hand each non-empty stretch to the next level;
    /// past the last expression, a stretch is a finished piece.
    fn split_level(
        &self,
        level: usize,
        s: &str,
        emit: &mut dyn FnMut(&str) -> Result<(), String>,
    ) -> Result<(), String> {
        let Some(re) = self.splits.get(level) else {
            return emit(s);
        };
        let cut = |a: usize, b: usize| {
            s.get(a..b)
                .ok_or_else(|| format!("pre-tokenizer match {a}..{b} is not a text boundary"))
        };
        let mut prev = 0;
        for (start, end) in re.find_iter(s) {
            if prev != start {
                self.split_level(level + 1, cut(prev, start)?, emit)?;
            }
            if start != end {
                self.split_level(level + 1, cut(start, end)?, emit)?;
            }
            prev = end;
        }
        if prev != s.len() {
            self.split_level(level + 1, cut(prev, s.len())?, emit)?;
        }
        Ok(())
    }

    /// IDs of one finished piece: from the cache, or from the model on its byte-level spelling.
    fn emit(
        &self,
        model: &ModelWrapper,
        piece: &str,
        scratch: &mut String,
        out: &mut Vec<u32>,
    ) -> Result<(), String> {
        let cacheable = piece.len() <= CACHE_MAX_PIECE_BYTES;
        if cacheable {
            if let Ok(cache) = self.cache.read() {
                if let Some(ids) = cache.get(piece) {
                    out.extend_from_slice(ids);
                    return Ok(());
                }
            }
        }
        scratch.clear();
        scratch.extend(piece.bytes().map(|b| self.byte_char[b as usize]));
        let start = out.len();
        out.extend(
            model
                .tokenize(scratch)
                .map_err(|e| e.to_string())?
                .iter()
                .map(|t| t.id),
        );
        if cacheable {
            if let Ok(mut cache) = self.cache.write() {
                if cache.len() >= CACHE_MAX_ENTRIES {
                    cache.clear();
                }
                cache.insert(piece.into(), out[start..].into());
            }
        }
        Ok(())
    }
}
