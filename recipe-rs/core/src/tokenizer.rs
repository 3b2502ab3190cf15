//! A Hugging Face `tokenizer.json` with the two encoding paths a structural encoder needs.
//!
//! * [`Tokenizer::encode_ordinary`]: plain text through normalizer, pre-tokenizer and BPE only.
//!   The added vocabulary is never consulted, so text that spells a control token stays text.
//!   For tokenizers shaped like DeepSeek's (regular-expression splits, byte-level mapping, BPE)
//!   this goes through a shortcut in `tokenizer/fast.rs` that gives the same IDs without the
//!   general pipeline's offset bookkeeping and remembers the IDs of frequent pieces.
//! * [`Tokenizer::encode_with_special`]: the stock pipeline, added vocabulary included
//!   (what `Tokenizer.encode` does in Python).
//!
//! Decoding goes through [`Tokenizer::token_bytes`], the exact bytes a token stands for, so a
//! streaming decoder can hold back UTF-8 sequences that are split across tokens.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use tokenizers::{
    Model, Normalizer, OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer,
};

mod fast;
use fast::FastPath;

/// Texts at least this long are tokenized on several threads.
const PARALLEL_MIN_BYTES: usize = 32 * 1024;
/// Pre-tokenized pieces per parallel work item.
const PARALLEL_CHUNK_PIECES: usize = 2048;
/// Approximate text bytes per parallel work item when counting tokens.
const PARALLEL_PART_BYTES: usize = 4 * 1024;

/// The split expressions of the DeepSeek V4 tokenizer, for which [`cut_at_line_starts`] is
/// shown to cut only at piece boundaries.
const LINE_CUT_PATTERNS: [&str; 3] = [
    r"\p{N}{1,3}",
    "[一-龥\u{3040}-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
];

/// Cut `text` into parts of about `target` bytes, only right after a `\n` that is followed by
/// an ASCII letter.
///
/// Such a point is a boundary of every pre-tokenizer split of this tokenizer, and each side
/// splits the same on its own: the digit and CJK patterns cannot match `\n` or a Latin letter;
/// in the main pattern no alternative matches across `\n` into a letter (letter runs cannot
/// start with `\n`, punctuation and newline runs stop before a letter), and the one lookahead,
/// `\s+(?!\S)`, is only reached for a whitespace run when `\s*[\r\n]+` has failed, which it
/// cannot for a run that ends in `\n`. The pre-tokenizer and model then see the same pieces.
fn cut_at_line_starts<'a>(text: &'a str, target: usize, out: &mut Vec<&'a str>) {
    let bytes = text.as_bytes();
    let mut start = 0;
    while text.len() - start > target {
        let from = start + target;
        let cut = bytes[from..]
            .windows(2)
            .position(|w| w[0] == b'\n' && w[1].is_ascii_alphabetic())
            .map(|i| from + i + 1);
        match cut {
            Some(c) => {
                out.push(&text[start..c]);
                start = c;
            }
            None => break,
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("failed to load tokenizer: {0}")]
    Load(String),
    #[error("failed to encode text: {0}")]
    Encode(String),
    #[error("failed to decode token IDs: {0}")]
    Decode(String),
}

struct Inner {
    hf: tokenizers::Tokenizer,
    /// Added-vocabulary spelling → ID.
    added_by_content: HashMap<String, u32>,
    /// Added-vocabulary ID → spelling.
    added_by_id: HashMap<u32, String>,
    /// Bytes of every token, indexed by ID (empty slot: an ID the vocabulary skips). Built
    /// once at load so decoding a token is one index, with no allocation.
    bytes_by_id: Vec<Option<Box<[u8]>>>,
    /// Shortcut for plain-text encoding when the pipeline has the supported shape.
    fast: Option<FastPath>,
    /// Whether the fast path may cut long texts with [`cut_at_line_starts`] (only for the split
    /// expressions that argument was made for).
    fast_line_cuts: bool,
}

/// A loaded tokenizer. Cheap to clone (shared, immutable).
#[derive(Clone)]
pub struct Tokenizer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size())
            .finish()
    }
}

fn byte_level_inverse() -> HashMap<char, u8> {
    // GPT-2's reversible byte → printable-char table.
    let mut bytes: Vec<u32> = (b'!' as u32..=b'~' as u32)
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut chars = bytes.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bytes.contains(&b) {
            bytes.push(b);
            chars.push(256 + n);
            n += 1;
        }
    }
    bytes
        .into_iter()
        .zip(chars)
        .map(|(b, c)| (char::from_u32(c).expect("valid table char"), b as u8))
        .collect()
}

/// The byte string of every ID up to the largest one in use: added tokens by spelling,
/// byte-level BPE pieces mapped back through the byte-to-char table.
fn byte_table(
    hf: &tokenizers::Tokenizer,
    added_by_id: &HashMap<u32, String>,
) -> Vec<Option<Box<[u8]>>> {
    let byte_of_char = byte_level_inverse();
    let vocab = hf.get_model().get_vocab();
    let max_id = vocab.values().chain(added_by_id.keys()).copied().max();
    let mut table: Vec<Option<Box<[u8]>>> = vec![None; max_id.map_or(0, |m| m as usize + 1)];
    for (piece, id) in vocab {
        let bytes: Option<Vec<u8>> = piece
            .chars()
            .map(|c| byte_of_char.get(&c).copied())
            .collect();
        table[id as usize] = bytes.map(Vec::into_boxed_slice);
    }
    // Added tokens win over a model piece with the same ID, as in the lookup order before.
    for (id, s) in added_by_id {
        table[*id as usize] = Some(s.as_bytes().into());
    }
    table
}

impl Tokenizer {
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, TokenizerError> {
        let text = std::fs::read_to_string(path.as_ref())
            .map_err(|e| TokenizerError::Load(format!("{}: {e}", path.as_ref().display())))?;
        Self::from_json(&text)
    }

    pub fn from_json(json: &str) -> Result<Self, TokenizerError> {
        let hf: tokenizers::Tokenizer = json
            .parse()
            .map_err(|e: tokenizers::Error| TokenizerError::Load(e.to_string()))?;
        let added_by_id: HashMap<u32, String> = hf
            .get_added_tokens_decoder()
            .into_iter()
            .map(|(id, tok)| (id, tok.content))
            .collect();
        let added_by_content = added_by_id.iter().map(|(id, c)| (c.clone(), *id)).collect();
        let bytes_by_id = byte_table(&hf, &added_by_id);
        let fast = FastPath::detect(&hf);
        let fast_line_cuts = fast.as_ref().is_some_and(|f| {
            f.patterns()
                .iter()
                .map(String::as_str)
                .eq(LINE_CUT_PATTERNS)
        });
        Ok(Tokenizer {
            inner: Arc::new(Inner {
                hf,
                added_by_content,
                added_by_id,
                bytes_by_id,
                fast,
                fast_line_cuts,
            }),
        })
    }

    /// Encode plain text without the added vocabulary: no control token can come out of it.
    pub fn encode_ordinary(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        let mut ids = Vec::new();
        self.encode_ordinary_into(text, &mut ids)?;
        Ok(ids)
    }

    /// [`Tokenizer::encode_ordinary`], appending to `out`.
    pub fn encode_ordinary_into(
        &self,
        text: &str,
        out: &mut Vec<u32>,
    ) -> Result<(), TokenizerError> {
        if text.is_empty() {
            return Ok(());
        }
        let Some(fast) = &self.inner.fast else {
            return self.encode_ordinary_general_into(text, out);
        };
        let model = self.inner.hf.get_model();
        if text.len() < PARALLEL_MIN_BYTES || !self.inner.fast_line_cuts {
            return fast
                .encode_into(model, text, out)
                .map_err(TokenizerError::Encode);
        }
        // Long texts: cut where every split of these expressions has a boundary anyway, and
        // encode the parts on several threads; concatenated in order, the IDs are the same.
        let mut parts: Vec<&str> = Vec::new();
        cut_at_line_starts(text, PARALLEL_PART_BYTES, &mut parts);
        use rayon::prelude::*;
        let encoded: Vec<Result<Vec<u32>, String>> = parts
            .par_iter()
            .map(|part| {
                let mut ids = Vec::with_capacity(part.len() / 3);
                fast.encode_into(model, part, &mut ids)?;
                Ok(ids)
            })
            .collect();
        for ids in encoded {
            out.extend(ids.map_err(TokenizerError::Encode)?);
        }
        Ok(())
    }

    /// Whether plain-text encoding uses the shortcut of [`fast`](self) for this tokenizer.
    pub fn uses_fast_path(&self) -> bool {
        self.inner.fast.is_some()
    }

    /// Whether the shortcut also cuts long texts into parts encoded in parallel (only for the
    /// split expressions of the DeepSeek V4 tokenizer).
    #[doc(hidden)]
    pub fn fast_path_cuts_lines(&self) -> bool {
        self.inner.fast_line_cuts
    }

    /// [`Tokenizer::encode_ordinary`] through the general pipeline (normalizer, pre-tokenizer
    /// and model of the `tokenizers` crate), never the shortcut. The reference the shortcut is
    /// tested against.
    pub fn encode_ordinary_general(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        let mut ids = Vec::new();
        if !text.is_empty() {
            self.encode_ordinary_general_into(text, &mut ids)?;
        }
        Ok(ids)
    }

    fn encode_ordinary_general_into(
        &self,
        text: &str,
        out: &mut Vec<u32>,
    ) -> Result<(), TokenizerError> {
        let hf = &self.inner.hf;
        let err = |e: tokenizers::Error| TokenizerError::Encode(e.to_string());
        let mut pretok = PreTokenizedString::from(text);
        if let Some(normalizer) = hf.get_normalizer() {
            pretok.normalize(|s| normalizer.normalize(s)).map_err(err)?;
        }
        if let Some(pre) = hf.get_pre_tokenizer() {
            pre.pre_tokenize(&mut pretok).map_err(err)?;
        }
        let model = hf.get_model();
        let pieces: Vec<&str> = pretok
            .get_splits(OffsetReferential::Original, OffsetType::Byte)
            .into_iter()
            .map(|(s, _, _)| s)
            .collect();
        if text.len() < PARALLEL_MIN_BYTES {
            for piece in pieces {
                out.extend(model.tokenize(piece).map_err(err)?.iter().map(|t| t.id));
            }
            return Ok(());
        }
        // Long texts: the model runs on each pre-tokenized piece independently, so pieces can be
        // tokenized on several threads and concatenated in order with the same result.
        use rayon::prelude::*;
        let parts: Vec<Result<Vec<u32>, TokenizerError>> = pieces
            .par_chunks(PARALLEL_CHUNK_PIECES)
            .map(|chunk| {
                let mut ids = Vec::with_capacity(chunk.len() * 2);
                for piece in chunk {
                    ids.extend(model.tokenize(piece).map_err(err)?.iter().map(|t| t.id));
                }
                Ok(ids)
            })
            .collect();
        for part in parts {
            out.extend(part?);
        }
        Ok(())
    }

    /// Encode with the full vocabulary: a control-token spelling becomes its ID. No BOS is added.
    pub fn encode_with_special(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        let enc = self
            .inner
            .hf
            .encode_fast(text, false)
            .map_err(|e| TokenizerError::Encode(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    /// `encode_with_special(text).len()`, computed without building an encoding.
    ///
    /// The text goes through the tokenizer's own added-vocabulary split (so every matching rule
    /// of the added tokens applies exactly as in the full pipeline), its normalizer and
    /// pre-tokenizer; each remaining piece is tokenized by the model on its own, long texts on
    /// several threads, and only the number of tokens is kept.
    pub fn count_with_special(&self, text: &str) -> Result<usize, TokenizerError> {
        if text.is_empty() {
            return Ok(0);
        }
        let hf = &self.inner.hf;
        let err = |e: tokenizers::Error| TokenizerError::Encode(e.to_string());
        let mut pretok = hf
            .get_added_vocabulary()
            .extract_and_normalize(hf.get_normalizer(), text);
        if let Some(fast) = &self.inner.fast {
            // The normalizer of this shape changes nothing, so the pieces between added tokens
            // are plain text, and the shortcut gives the pre-tokenizer's and model's tokens.
            return self.count_plain_fast(fast, &pretok, text.len());
        }
        // Cutting at line starts is only shown safe for the V4 split expressions.
        if text.len() < PARALLEL_MIN_BYTES || !self.inner.fast_line_cuts {
            if let Some(pre) = hf.get_pre_tokenizer() {
                pre.pre_tokenize(&mut pretok).map_err(err)?;
            }
            let model = hf.get_model();
            let mut n = 0usize;
            for (piece, _, tokens) in
                pretok.get_splits(OffsetReferential::Original, OffsetType::None)
            {
                n += match tokens {
                    Some(t) => t.len(),
                    None => model.tokenize(piece).map_err(err)?.len(),
                };
            }
            return Ok(n);
        }
        // Long texts: the pieces between added tokens are cut further at safe points and each
        // part is pre-tokenized and tokenized on its own, on several threads.
        let mut matched = 0usize;
        let mut parts: Vec<&str> = Vec::new();
        for (piece, _, tokens) in pretok.get_splits(OffsetReferential::Original, OffsetType::None) {
            match tokens {
                Some(t) => matched += t.len(),
                None => cut_at_line_starts(piece, PARALLEL_PART_BYTES, &mut parts),
            }
        }
        use rayon::prelude::*;
        let plain: usize = parts
            .par_iter()
            .map(|part| self.count_normalized_plain(part))
            .try_reduce(|| 0, |a, b| Ok(a + b))?;
        Ok(matched + plain)
    }

    /// [`Tokenizer::count_with_special`] after the added-vocabulary split, with the shortcut:
    /// added tokens count as they are, every other piece is encoded (long texts cut at line
    /// starts and counted on several threads where that is safe).
    fn count_plain_fast(
        &self,
        fast: &FastPath,
        pretok: &PreTokenizedString,
        len: usize,
    ) -> Result<usize, TokenizerError> {
        let model = self.inner.hf.get_model();
        let count = |piece: &str| -> Result<usize, TokenizerError> {
            let mut ids = Vec::new();
            fast.encode_into(model, piece, &mut ids)
                .map_err(TokenizerError::Encode)?;
            Ok(ids.len())
        };
        let parallel = len >= PARALLEL_MIN_BYTES && self.inner.fast_line_cuts;
        let mut n = 0usize;
        let mut parts: Vec<&str> = Vec::new();
        for (piece, _, tokens) in pretok.get_splits(OffsetReferential::Original, OffsetType::None) {
            match tokens {
                Some(t) => n += t.len(),
                None if parallel => cut_at_line_starts(piece, PARALLEL_PART_BYTES, &mut parts),
                None => n += count(piece)?,
            }
        }
        if parts.is_empty() {
            return Ok(n);
        }
        use rayon::prelude::*;
        let plain: usize = parts
            .par_iter()
            .map(|part| count(part))
            .try_reduce(|| 0, |a, b| Ok(a + b))?;
        Ok(n + plain)
    }

    /// Tokens of already-normalized text with no added token in it: pre-tokenizer and model.
    fn count_normalized_plain(&self, text: &str) -> Result<usize, TokenizerError> {
        let hf = &self.inner.hf;
        let err = |e: tokenizers::Error| TokenizerError::Encode(e.to_string());
        let mut pretok = PreTokenizedString::from(text);
        if let Some(pre) = hf.get_pre_tokenizer() {
            pre.pre_tokenize(&mut pretok).map_err(err)?;
        }
        let model = hf.get_model();
        let mut n = 0usize;
        for (piece, _, _) in pretok.get_splits(OffsetReferential::Original, OffsetType::None) {
            n += model.tokenize(piece).map_err(err)?.len();
        }
        Ok(n)
    }

    /// The ID of an added-vocabulary entry spelled exactly `spelling`.
    pub fn added_token_id(&self, spelling: &str) -> Option<u32> {
        self.inner.added_by_content.get(spelling).copied()
    }

    /// The spelling of an added-vocabulary ID, if `id` is one.
    pub fn added_token(&self, id: u32) -> Option<&str> {
        self.inner.added_by_id.get(&id).map(String::as_str)
    }

    /// The exact bytes token `id` stands for: the spelling of an added token, or the raw bytes
    /// of a byte-level BPE piece. `None` for an ID outside the vocabulary.
    pub fn token_bytes(&self, id: u32) -> Option<Vec<u8>> {
        self.token_bytes_ref(id).map(<[u8]>::to_vec)
    }

    /// [`Tokenizer::token_bytes`] without copying: one table index.
    pub fn token_bytes_ref(&self, id: u32) -> Option<&[u8]> {
        self.inner.bytes_by_id.get(id as usize)?.as_deref()
    }

    /// Decode IDs to text (lossy where bytes are not valid UTF-8). Special tokens are kept.
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        let mut bytes = Vec::new();
        for &id in ids {
            match self.token_bytes_ref(id) {
                Some(b) => bytes.extend_from_slice(b),
                None => return Err(TokenizerError::Decode(format!("unknown token ID {id}"))),
            }
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Size of the whole vocabulary, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.hf.get_vocab_size(true)
    }
}

/// Find `tokenizer.json` of Hub repository `identifier` in the local Hugging Face cache.
///
/// Looks under `$HF_HUB_CACHE`, `$HF_HOME/hub`, then `~/.cache/huggingface/hub`, in the snapshot
/// that `refs/<revision>` (default `main`) points to, or in a snapshot named by the revision
/// itself. The codec never downloads: a missing file is an error that says where it looked.
pub fn find_in_hf_cache(
    identifier: &str,
    revision: Option<&str>,
) -> Result<std::path::PathBuf, TokenizerError> {
    use std::path::PathBuf;
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Ok(p) = std::env::var("HF_HUB_CACHE") {
        roots.push(PathBuf::from(p));
    }
    if let Ok(p) = std::env::var("HF_HOME") {
        roots.push(PathBuf::from(p).join("hub"));
    }
    if let Ok(home) = std::env::var("HOME") {
        roots.push(
            PathBuf::from(home)
                .join(".cache")
                .join("huggingface")
                .join("hub"),
        );
    }
    let revision = revision.unwrap_or("main");
    let repo_dir = format!("models--{}", identifier.replace('/', "--"));
    for root in &roots {
        let repo = root.join(&repo_dir);
        let snapshot = match std::fs::read_to_string(repo.join("refs").join(revision)) {
            Ok(commit) => commit.trim().to_owned(),
            Err(_) => revision.to_owned(),
        };
        let candidate = repo.join("snapshots").join(snapshot).join("tokenizer.json");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    let searched: Vec<String> = roots
        .iter()
        .map(|r| r.join(&repo_dir).display().to_string())
        .collect();
    Err(TokenizerError::Load(format!(
        "tokenizer.json for {identifier:?} (revision {revision:?}) is not in the local Hugging Face cache \
         (searched: {}); this codec does not download files: fetch it first, or use Tokenizer.from_file",
        searched.join(", ")
    )))
}
