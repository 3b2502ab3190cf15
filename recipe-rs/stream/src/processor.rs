//! The stream processor: backend chunks in, protocol items out.
//!
//! Token chunks are decoded here: control tokens become [`Piece::Special`] by ID, ordinary
//! tokens become text, and a UTF-8 character split across tokens is held back until it is whole.

use recipe_core::{ParsingOptions, SpecialToken, Tokenizer};

use crate::generator::{FinishKind, Generator, StreamItem, Usage};
use crate::input::{
    token_display, IdLogprob, InferenceChunk, InferenceFinishReason, PromptUsage, TokenLogprob,
    TopLogprob,
};
use crate::parser::{ParseEvent, Parser, Piece};

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum StreamError {
    #[error("stream processor is closed")]
    Closed,
    #[error("stream processor has finished")]
    Finished,
    #[error("token chunk received without a tokenizer")]
    NoTokenizer,
    #[error("invalid log probabilities: {0} log probabilities for {1} token IDs")]
    LogprobCount(usize, usize),
    #[error("unknown token ID {0}: it is not in the tokenizer's vocabulary")]
    UnknownToken(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    Finished,
    Closed,
}

/// What one token ID stands for.
#[derive(Clone)]
enum TokenEntry {
    /// An added-vocabulary token, by spelling.
    Special(std::sync::Arc<str>),
    /// An ordinary token: its bytes.
    Bytes(std::sync::Arc<[u8]>),
}

/// Decodes token chunks into parser pieces.
#[derive(Default)]
struct Decoder {
    pending: Vec<u8>,
    pending_lps: Vec<TokenLogprob>,
    /// How many token IDs the pending bytes came from: they are counted once their text is
    /// parsed, and never when the stream ends before the character completes (as in the
    /// reference).
    pending_ids: u64,
    /// Looked-up tokens: a model's output reuses a small part of the vocabulary, and the
    /// tokenizer's own lookup is comparatively slow.
    cache: std::collections::HashMap<u32, TokenEntry, IdHash>,
    /// The entries of the chunk being decoded, kept between pushes so a push allocates none.
    resolved: Vec<TokenEntry>,
}

/// Hashing for token IDs: one multiply (Fibonacci hashing). The keys are vocabulary indices the
/// backend produced, and the cache is bounded, so the DoS resistance of the default SipHash buys
/// nothing here and costs more than the rest of a one-token lookup.
#[derive(Clone, Copy, Default)]
struct IdHash;

impl std::hash::BuildHasher for IdHash {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, id: u32) {
        self.0 = (u64::from(id) ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

impl Decoder {
    fn entry(&mut self, tok: &Tokenizer, id: u32) -> Option<TokenEntry> {
        if let Some(e) = self.cache.get(&id) {
            return Some(e.clone());
        }
        let e = match tok.added_token(id) {
            Some(s) => TokenEntry::Special(s.into()),
            None => TokenEntry::Bytes(tok.token_bytes_ref(id)?.into()),
        };
        if self.cache.len() < 1 << 18 {
            self.cache.insert(id, e.clone());
        }
        Some(e)
    }
}

/// The held text as one piece, with how many IDs it came from (nothing when nothing is held).
fn flush_counted(
    bytes: &mut Vec<u8>,
    lps: &mut Vec<TokenLogprob>,
    pieces: &mut Vec<(Piece, u64)>,
    run: &mut u64,
) {
    if bytes.is_empty() && lps.is_empty() {
        return;
    }
    let text = match String::from_utf8(std::mem::take(bytes)) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    let piece = Piece::Text {
        text,
        logprobs: std::mem::take(lps),
        textual: false,
    };
    pieces.push((piece, std::mem::take(run)));
}

/// Whether `bytes` end in the first bytes of a character (only the last character is looked at:
/// bytes that are invalid before it do not stop the wait, as in the reference).
fn incomplete_tail(bytes: &[u8]) -> bool {
    let n = bytes.len();
    for back in 1..=n.min(3) {
        let b = bytes[n - back];
        if b & 0xC0 == 0x80 {
            continue;
        }
        let need = match b {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return need > back
            && std::str::from_utf8(&bytes[n - back..]).is_err_and(|e| e.error_len().is_none());
    }
    false
}

pub struct StreamProcessor {
    generator: Generator,
    parser: Parser,
    tokenizer: Option<Tokenizer>,
    special_kinds: Vec<(String, SpecialToken)>,
    count_reasoning: bool,
    state: State,
    decoder: Decoder,
    /// The parser events of the push under way, kept between pushes so a push allocates none.
    events: Vec<ParseEvent>,
    prompt: PromptUsage,
    completion_tokens: u64,
    reasoning: String,
}

impl StreamProcessor {
    pub fn new(
        mut generator: Generator,
        options: &ParsingOptions,
        tokenizer: Option<Tokenizer>,
    ) -> Self {
        let parser = Parser::new(options);
        generator.set_parser_start(parser.in_reasoning());
        let special_kinds = [
            SpecialToken::ThinkingEnd,
            SpecialToken::Dsml,
            SpecialToken::Eos,
        ]
        .into_iter()
        .map(|k| (options.special_tokens.get(k).to_owned(), k))
        .filter(|(s, _)| !s.is_empty())
        .collect();
        StreamProcessor {
            generator,
            parser,
            count_reasoning: tokenizer.is_some() && options.thinking_initial_stage.is_some(),
            tokenizer,
            special_kinds,
            state: State::Open,
            decoder: Decoder::default(),
            prompt: PromptUsage::default(),
            completion_tokens: 0,
            reasoning: String::new(),
            events: Vec::new(),
        }
    }

    /// Whether the stream completed normally and was not closed.
    pub fn finished(&self) -> bool {
        self.state == State::Finished
    }

    /// Abandon the stream; later calls fail.
    pub fn close(&mut self) {
        self.state = State::Closed;
    }

    fn check_open(&self) -> Result<(), StreamError> {
        match self.state {
            State::Open => Ok(()),
            State::Finished => Err(StreamError::Finished),
            State::Closed => Err(StreamError::Closed),
        }
    }

    /// Process one backend chunk.
    pub fn push(&mut self, chunk: InferenceChunk) -> Result<Vec<StreamItem>, StreamError> {
        self.check_open()?;
        let mut out = Vec::new();
        match chunk {
            InferenceChunk::Ready {
                prompt_usage,
                system_fingerprint,
            } => {
                if let Some(u) = prompt_usage {
                    self.prompt = u;
                }
                self.generator
                    .ready(prompt_usage, system_fingerprint, &mut out);
            }
            InferenceChunk::Text {
                content,
                token_count,
            } => {
                self.generator.start(&mut out);
                self.completion_tokens += token_count;
                self.parser.begin_push();
                let mut events = Vec::new();
                self.parser.push(
                    Piece::Text {
                        text: content,
                        logprobs: Vec::new(),
                        textual: true,
                    },
                    &mut events,
                );
                self.deliver(&mut events, &mut out);
            }
            InferenceChunk::Tokens {
                token_ids,
                logprobs,
            } => {
                return self.push_tokens(&token_ids, logprobs.as_deref());
            }
            InferenceChunk::Finish(reason) => {
                self.generator.start(&mut out);
                self.end(Some(reason), &mut out);
            }
        }
        Ok(out)
    }

    /// Process a token chunk given by reference (same as pushing `InferenceChunk::Tokens`).
    pub fn push_tokens(
        &mut self,
        token_ids: &[u32],
        logprobs: Option<&[IdLogprob]>,
    ) -> Result<Vec<StreamItem>, StreamError> {
        self.check_open()?;
        // Most one-token pushes produce one item.
        let mut out = Vec::with_capacity(2);
        let pieces = match self.decode(token_ids, logprobs) {
            Ok(p) => p,
            Err(e) => {
                self.state = State::Closed;
                return Err(e);
            }
        };
        if !pieces.is_empty() {
            // A token chunk that decodes to nothing yet (empty, or only the first bytes of a
            // character) does not open the stream (as in the reference).
            self.generator.start(&mut out);
        }
        // Tokens are counted piece by piece as they are parsed: a stop sequence leaves the
        // pieces after it uncounted, and bytes still waiting for the rest of a character are
        // counted when they are parsed, as the reference does.
        let mut counted = 0u64;
        let mut events = std::mem::take(&mut self.events);
        self.parser.begin_push();
        for (p, n) in pieces {
            counted += n;
            self.parser.push(p, &mut events);
            if self.parser.is_stopped() {
                break;
            }
        }
        self.completion_tokens += counted;
        self.deliver(&mut events, &mut out);
        self.events = events;
        Ok(out)
    }

    /// Close the input and flush what is buffered. Repeated calls after completion return nothing.
    pub fn finish(&mut self) -> Result<Vec<StreamItem>, StreamError> {
        match self.state {
            State::Closed => return Err(StreamError::Closed),
            State::Finished => return Ok(Vec::new()),
            State::Open => {}
        }
        let mut out = Vec::new();
        self.generator.start(&mut out);
        self.end(None, &mut out);
        Ok(out)
    }

    /// Hand `events` (drained) to the generator.
    fn deliver(&mut self, events: &mut Vec<ParseEvent>, out: &mut Vec<StreamItem>) {
        for e in events.iter() {
            if let ParseEvent::Reasoning { text, .. } = e {
                self.reasoning.push_str(text);
            }
        }
        self.generator.events(events.drain(..), out);
        if let Some(stop) = self.parser.stopped_by() {
            let kind = FinishKind::StopSequence(stop.to_owned());
            let usage = self.usage();
            self.generator.finish(&kind, usage, out);
            self.state = State::Finished;
        }
    }

    fn end(&mut self, reason: Option<InferenceFinishReason>, out: &mut Vec<StreamItem>) {
        // Token text still waiting for the rest of a character never completes: the reference
        // drops it whole (with the complete characters decoded along with it), and so do we.
        self.decoder.pending.clear();
        self.decoder.pending_lps.clear();
        self.decoder.pending_ids = 0;
        let mut events = Vec::new();
        self.parser.finish(&mut events);
        self.deliver(&mut events, out);
        if self.state != State::Open {
            return;
        }
        let kind = match reason {
            None => FinishKind::Stop,
            Some(InferenceFinishReason::Stop) if self.parser.tool_call_count() > 0 => {
                FinishKind::ToolCalls
            }
            Some(InferenceFinishReason::Stop) => FinishKind::Stop,
            Some(InferenceFinishReason::Length) => FinishKind::Length,
            Some(InferenceFinishReason::ContentFilter) => FinishKind::ContentFilter,
        };
        let usage = self.usage();
        self.generator.finish(&kind, usage, out);
        self.state = State::Finished;
    }

    fn usage(&self) -> Usage {
        let reasoning_tokens = if self.count_reasoning {
            let n = self
                .tokenizer
                .as_ref()
                // The length of the full-vocabulary encoding, counted without building it.
                .and_then(|t| t.count_with_special(&self.reasoning).ok())
                .map_or(0, |n| n as u64);
            Some(n)
        } else {
            None
        };
        Usage {
            prompt_tokens: self.prompt.prompt_tokens,
            prompt_cache_hit_tokens: self.prompt.prompt_cache_hit_tokens,
            completion_tokens: self.completion_tokens,
            reasoning_tokens,
        }
    }

    fn logprob(
        &self,
        tok: &Tokenizer,
        id: u32,
        bytes: &[u8],
        entry: &(f32, Vec<(u32, f32)>),
    ) -> TokenLogprob {
        TokenLogprob {
            token: token_display(bytes),
            bytes: bytes.to_vec(),
            logprob: entry.0,
            top_logprobs: entry
                .1
                .iter()
                .map(|(tid, lp)| {
                    let b = if *tid == id {
                        bytes
                    } else {
                        tok.token_bytes_ref(*tid).unwrap_or_default()
                    };
                    let b = b.to_vec();
                    TopLogprob {
                        token: token_display(&b),
                        bytes: b,
                        logprob: *lp,
                    }
                })
                .collect(),
        }
    }

    /// The parser pieces of a token chunk, each with the number of IDs it holds (IDs whose
    /// bytes waited in earlier chunks for the rest of a character count with the piece that
    /// completes it).
    fn decode(
        &mut self,
        ids: &[u32],
        logprobs: Option<&[IdLogprob]>,
    ) -> Result<Vec<(Piece, u64)>, StreamError> {
        let Some(tok) = self.tokenizer.clone() else {
            return Err(StreamError::NoTokenizer);
        };
        if let Some(lps) = logprobs {
            if lps.len() != ids.len() {
                return Err(StreamError::LogprobCount(lps.len(), ids.len()));
            }
        }
        // Resolve (and validate) every ID first so an error leaves no partial state behind.
        let mut resolved = std::mem::take(&mut self.decoder.resolved);
        resolved.clear();
        for &id in ids {
            match self.decoder.entry(&tok, id) {
                Some(e) => resolved.push(e),
                None => {
                    resolved.clear();
                    self.decoder.resolved = resolved;
                    return Err(StreamError::UnknownToken(id));
                }
            }
        }
        let mut pieces = Vec::with_capacity(1);
        let mut run = std::mem::take(&mut self.decoder.pending_ids);
        let mut bytes = std::mem::take(&mut self.decoder.pending);
        let mut lps = std::mem::take(&mut self.decoder.pending_lps);
        for ((i, &id), entry) in ids.iter().enumerate().zip(resolved.drain(..)) {
            match entry {
                TokenEntry::Special(spelling) => {
                    flush_counted(&mut bytes, &mut lps, &mut pieces, &mut run);
                    let kind = self
                        .special_kinds
                        .iter()
                        .find(|(s, _)| **s == *spelling)
                        .map(|(_, k)| *k);
                    let logprob =
                        logprobs.map(|l| self.logprob(&tok, id, spelling.as_bytes(), &l[i]));
                    let piece = Piece::Special {
                        kind,
                        spelling: spelling.to_string(),
                        logprob,
                    };
                    pieces.push((piece, 1));
                }
                TokenEntry::Bytes(b) => {
                    if let Some(l) = logprobs {
                        lps.push(self.logprob(&tok, id, &b, &l[i]));
                    }
                    bytes.extend_from_slice(&b);
                    run += 1;
                }
            }
        }
        if !(bytes.is_empty() && lps.is_empty()) {
            if incomplete_tail(&bytes) {
                self.decoder.pending = bytes;
                self.decoder.pending_lps = lps;
                self.decoder.pending_ids = run;
            } else {
                flush_counted(&mut bytes, &mut lps, &mut pieces, &mut run);
            }
        }
        self.decoder.resolved = resolved;
        Ok(pieces)
    }
}
