//! Conformance checking of other encoders: what a backend produced for a conversation (token
//! IDs, or a prompt string tokenized the way such backends do) against the canonical encoding.
//!
//! The two ID sequences are diffed ([`diff`]); every differing stretch (a *hunk*) is classified
//! from what it contains and from where it falls in the canonical layout ([`regions`]):
//!
//! * the same text on both sides but a control token where the template has plain text is
//!   **control-token injection** (the backend rendered a string and tokenized it with the full
//!   vocabulary, so `<｜User｜>` typed by a user became the turn token);
//! * the same text with plain pieces where the template has a control token is
//!   **control token as text**; the same text split differently is **tokenization**;
//! * otherwise the hunk is named after its place: BOS, reasoning-effort line, system placement,
//!   tools block, response format, thinking tokens, DSML dialect, tool results (and their
//!   order), message text; whitespace-only changes are **whitespace**. A block deleted in one
//!   place and inserted in another is a move, named after the place it left (a tool result that
//!   moved is a result-order divergence, a system text that moved is system placement). A
//!   hunk that also turns typed text into control tokens gets an extra injection entry.
//!
//! A per-spelling census of control tokens (expected vs found count, positions of the unmatched
//! ones) and the first differing token with decoded context on both sides complete the report.
//! Equal ID sequences give an empty report.

pub mod diff;
pub mod regions;

use serde::Serialize;

use crate::conversation::Conversation;
use crate::encoding::{encode_spans, EncodeError, Encoding};
use crate::tokenizer::{Tokenizer, TokenizerError};
use regions::{Region, RegionMap};

/// The kind of a divergence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    ControlTokenInjection,
    ControlTokenAsText,
    Bos,
    ReasoningEffort,
    SystemPlacement,
    ToolsBlock,
    ResponseFormat,
    ThinkingTokens,
    DsmlDialect,
    ImagePlaceholder,
    ToolResultOrder,
    ToolResults,
    Whitespace,
    MessageText,
    Tokenization,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::ControlTokenInjection => "control_token_injection",
            Class::ControlTokenAsText => "control_token_as_text",
            Class::Bos => "bos",
            Class::ReasoningEffort => "reasoning_effort",
            Class::SystemPlacement => "system_placement",
            Class::ToolsBlock => "tools_block",
            Class::ResponseFormat => "response_format",
            Class::ThinkingTokens => "thinking_tokens",
            Class::DsmlDialect => "dsml_dialect",
            Class::ImagePlaceholder => "image_placeholder",
            Class::ToolResultOrder => "tool_result_order",
            Class::ToolResults => "tool_results",
            Class::Whitespace => "whitespace",
            Class::MessageText => "message_text",
            Class::Tokenization => "tokenization",
        }
    }
}

/// One differing stretch of the two token sequences.
#[derive(Clone, Debug, Serialize)]
pub struct Divergence {
    pub class: Class,
    /// Where it falls in the canonical layout.
    pub region: Region,
    /// Token index ranges `[start, end)` on each side.
    pub expected_tokens: (usize, usize),
    pub found_tokens: (usize, usize),
    /// Decoded text of each side of the stretch (control tokens with their spelling).
    pub expected_text: String,
    pub found_text: String,
    /// Control-token spellings the found side has here and the expected side does not (and
    /// the reverse).
    pub extra_control_tokens: Vec<String>,
    pub missing_control_tokens: Vec<String>,
}

/// Expected vs found count of one control-token spelling.
#[derive(Clone, Debug, Serialize)]
pub struct TokenCount {
    pub token: String,
    pub id: u32,
    pub expected: usize,
    pub found: usize,
    /// Found-side token indices of occurrences with no counterpart in the canonical encoding.
    pub unexpected_positions: Vec<usize>,
    /// Expected-side token indices of canonical occurrences the found side lacks.
    pub missing_positions: Vec<usize>,
}

/// The first differing token, with context.
#[derive(Clone, Debug, Serialize)]
pub struct FirstDifference {
    pub expected_index: usize,
    pub found_index: usize,
    pub expected_token: Option<(u32, String)>,
    pub found_token: Option<(u32, String)>,
    /// Decoded text before and after the difference on each side.
    pub expected_context: (String, String),
    pub found_context: (String, String),
}

/// Everything [`check_ids`] found.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub identical: bool,
    pub expected_tokens: usize,
    pub found_tokens: usize,
    /// Divergence counts per class, most frequent first.
    pub summary: Vec<(Class, usize)>,
    pub divergences: Vec<Divergence>,
    /// Control tokens whose counts or positions differ.
    pub control_tokens: Vec<TokenCount>,
    pub first_difference: Option<FirstDifference>,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Encode(#[from] EncodeError),
    #[error("token ID {0} is not in the tokenizer's vocabulary")]
    UnknownId(u32),
    /// The backend's output holds nothing to compare (no token IDs, or a prompt that is empty
    /// or only whitespace): bad input, not a divergence.
    #[error("the backend's output is empty ({0})")]
    EmptyOutput(&'static str),
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
}

/// Compare `found` IDs with the canonical encoding of `conv` (the encoding needs a tokenizer).
/// No IDs at all is [`CheckError::EmptyOutput`]: a canonical prompt is never empty, so there is
/// nothing to classify.
pub fn check_ids(
    encoding: &Encoding,
    conv: &Conversation,
    found: &[u32],
) -> Result<Report, CheckError> {
    if found.is_empty() {
        return Err(CheckError::EmptyOutput("no token IDs"));
    }
    let tok = encoding
        .tokenizer
        .as_ref()
        .ok_or(EncodeError::NoTokenizer)?;
    let rendered = encoding.render(conv);
    let expected = encode_spans(tok, &rendered.spans)?;
    let regions = RegionMap::of(&rendered.spans);
    Checker::new(tok, &expected, found, regions)?.report()
}

/// Compare a prompt string with the canonical encoding, tokenizing it as a render-then-tokenize
/// backend does (full vocabulary: control-token spellings become control tokens; no BOS added).
/// An empty or whitespace-only prompt is [`CheckError::EmptyOutput`].
pub fn check_prompt(
    encoding: &Encoding,
    conv: &Conversation,
    prompt: &str,
) -> Result<Report, CheckError> {
    if prompt.trim().is_empty() {
        return Err(CheckError::EmptyOutput(
            "an empty or whitespace-only prompt",
        ));
    }
    let tok = encoding
        .tokenizer
        .as_ref()
        .ok_or(EncodeError::NoTokenizer)?;
    let found = tok.encode_with_special(prompt)?;
    check_ids(encoding, conv, &found)
}

/// Tokens of one side with their byte offsets in the decoded text.
struct Side<'a> {
    ids: &'a [u32],
    bytes: Vec<u8>,
    /// `offsets[i]` is where token i starts; `offsets[len]` is the end.
    offsets: Vec<usize>,
}

impl<'a> Side<'a> {
    fn new(tok: &Tokenizer, ids: &'a [u32]) -> Result<Self, CheckError> {
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(ids.len() + 1);
        for &id in ids {
            offsets.push(bytes.len());
            bytes.extend_from_slice(tok.token_bytes_ref(id).ok_or(CheckError::UnknownId(id))?);
        }
        offsets.push(bytes.len());
        Ok(Side {
            ids,
            bytes,
            offsets,
        })
    }

    fn text(&self, r: std::ops::Range<usize>) -> String {
        String::from_utf8_lossy(&self.bytes[self.offsets[r.start]..self.offsets[r.end]])
            .into_owned()
    }

    fn raw(&self, r: std::ops::Range<usize>) -> &[u8] {
        &self.bytes[self.offsets[r.start]..self.offsets[r.end]]
    }
}

struct Checker<'a> {
    tok: &'a Tokenizer,
    e: Side<'a>,
    f: Side<'a>,
    regions: RegionMap,
}

/// Context shown around the first difference, in tokens.
const CONTEXT_TOKENS: usize = 12;
/// Hunks closer than this many equal tokens are reported as one.
const JOIN: usize = 3;

impl<'a> Checker<'a> {
    fn new(
        tok: &'a Tokenizer,
        expected: &'a [u32],
        found: &'a [u32],
        regions: RegionMap,
    ) -> Result<Self, CheckError> {
        Ok(Checker {
            tok,
            e: Side::new(tok, expected)?,
            f: Side::new(tok, found)?,
            regions,
        })
    }

    fn ctrl(&self, ids: &[u32]) -> Vec<String> {
        ids.iter()
            .filter_map(|&i| self.tok.added_token(i).map(str::to_owned))
            .collect()
    }

    fn report(&self) -> Result<Report, CheckError> {
        let hunks = diff::hunks(self.e.ids, self.f.ids, JOIN);
        let mut divs: Vec<Vec<Divergence>> = hunks.iter().map(|h| self.classify(h)).collect();
        self.name_moves(&hunks, &mut divs);
        let divs: Vec<Divergence> = divs.into_iter().flatten().collect();
        let mut summary: Vec<(Class, usize)> = Vec::new();
        for d in &divs {
            match summary.iter_mut().find(|(c, _)| *c == d.class) {
                Some((_, n)) => *n += 1,
                None => summary.push((d.class, 1)),
            }
        }
        summary.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(Report {
            identical: hunks.is_empty(),
            expected_tokens: self.e.ids.len(),
            found_tokens: self.f.ids.len(),
            summary,
            control_tokens: self.census(&hunks),
            first_difference: hunks.first().map(|h| self.first_difference(h)),
            divergences: divs,
        })
    }

    /// One divergence per hunk, plus a control-token-injection entry when the hunk also turns
    /// plain text into control tokens among other changes.
    fn classify(&self, h: &diff::Hunk) -> Vec<Divergence> {
        let (ea, fb) = (&self.e.ids[h.a.clone()], &self.f.ids[h.b.clone()]);
        let (e_ctrl, f_ctrl) = (self.ctrl(ea), self.ctrl(fb));
        let extra = multiset_minus(&f_ctrl, &e_ctrl);
        let missing = multiset_minus(&e_ctrl, &f_ctrl);
        let (e_raw, f_raw) = (self.e.raw(h.a.clone()), self.f.raw(h.b.clone()));
        let e_text = String::from_utf8_lossy(e_raw);
        // The region holding most of the expected side (or the byte before an insertion).
        let (from, to) = (self.e.offsets[h.a.start], self.e.offsets[h.a.end]);
        let region = if h.a.is_empty() {
            self.regions.at(from.saturating_sub(1)).0
        } else {
            self.regions.dominant(from, to)
        };
        // Extra control tokens whose spelling the canonical side has as plain text here.
        let injected: Vec<String> = extra
            .iter()
            .filter(|s| e_text.contains(s.as_str()))
            .cloned()
            .collect();
        // What is left once the injected tokens are accounted for names the rest of the hunk.
        let rest = multiset_minus(&extra, &injected);
        let has = |v: &[String], t: crate::SpecialToken| v.iter().any(|s| s == t.default_str());
        let class = if e_raw == f_raw {
            if !extra.is_empty() {
                Class::ControlTokenInjection
            } else if !missing.is_empty() {
                Class::ControlTokenAsText
            } else {
                Class::Tokenization
            }
        } else if has(&rest, crate::SpecialToken::Bos) || has(&missing, crate::SpecialToken::Bos) {
            Class::Bos
        } else if strip_ws(e_raw) == strip_ws(f_raw) {
            Class::Whitespace
        } else if has(&missing, crate::SpecialToken::Image)
            || has(&rest, crate::SpecialToken::Image)
        {
            Class::ImagePlaceholder
        } else {
            let think = |v: &[String]| {
                has(v, crate::SpecialToken::ThinkingStart)
                    || has(v, crate::SpecialToken::ThinkingEnd)
            };
            let dsml = |v: &[String]| has(v, crate::SpecialToken::Dsml);
            match region {
                Region::Bos => Class::Bos,
                Region::EffortLine => Class::ReasoningEffort,
                Region::System => Class::SystemPlacement,
                Region::ToolsBlock => Class::ToolsBlock,
                Region::ResponseFormat => Class::ResponseFormat,
                Region::GenerationPrompt if dsml(&rest) || dsml(&missing) => Class::DsmlDialect,
                Region::Thinking | Region::GenerationPrompt => Class::ThinkingTokens,
                Region::ToolCalls => Class::DsmlDialect,
                Region::ToolResult => Class::ToolResults,
                _ if think(&rest) || think(&missing) => Class::ThinkingTokens,
                _ => Class::MessageText,
            }
        };
        let entry = |class, extra_tokens: Vec<String>, missing_tokens: Vec<String>| Divergence {
            class,
            region,
            expected_tokens: (h.a.start, h.a.end),
            found_tokens: (h.b.start, h.b.end),
            expected_text: e_text.clone().into_owned(),
            found_text: String::from_utf8_lossy(f_raw).into_owned(),
            extra_control_tokens: extra_tokens,
            missing_control_tokens: missing_tokens,
        };
        let mut out = Vec::with_capacity(2);
        if class != Class::ControlTokenInjection && !injected.is_empty() {
            out.push(entry(Class::ControlTokenInjection, injected, Vec::new()));
        }
        out.push(entry(class, extra, missing));
        out
    }

    /// A pure deletion and a pure insertion of the same text (up to surrounding whitespace) are
    /// one move; both take the class of the place the text left.
    /// A pure deletion and a pure insertion of the same text (up to surrounding whitespace) are
    /// one move; both take the class of the place the text left. Each hunk's main divergence
    /// is the last of its entries.
    fn name_moves(&self, hunks: &[diff::Hunk], divs: &mut [Vec<Divergence>]) {
        let key = |s: &str| s.trim_matches(|c: char| c.is_whitespace()).to_owned();
        let main = |divs: &[Vec<Divergence>], i: usize| divs[i].len() - 1;
        for i in 0..hunks.len() {
            if !hunks[i].b.is_empty() || hunks[i].a.is_empty() {
                continue;
            }
            let mi = main(divs, i);
            let gone = key(&divs[i][mi].expected_text);
            if gone.is_empty() {
                continue;
            }
            let Some(j) = (0..hunks.len()).find(|&j| {
                hunks[j].a.is_empty()
                    && !hunks[j].b.is_empty()
                    && key(&divs[j][main(divs, j)].found_text) == gone
            }) else {
                continue;
            };
            let class = match divs[i][mi].region {
                Region::ToolResult => Class::ToolResultOrder,
                Region::System | Region::EffortLine => Class::SystemPlacement,
                _ => continue,
            };
            divs[i][mi].class = class;
            let mj = main(divs, j);
            divs[j][mj].class = class;
        }
        // Results of one turn in another order: the hunks of that turn hold the same bytes on
        // both sides, only placed differently.
        let mut by_turn: std::collections::BTreeMap<usize, Vec<usize>> =
            std::collections::BTreeMap::new();
        for (i, (h, ds)) in hunks.iter().zip(divs.iter()).enumerate() {
            let d = ds.last().expect("one entry per hunk");
            if d.region == Region::ToolResult && d.class == Class::ToolResults {
                by_turn
                    .entry(self.regions.at(self.e.offsets[h.a.start]).1)
                    .or_default()
                    .push(i);
            }
        }
        for group in by_turn.values() {
            let (mut a, mut b): (Vec<u8>, Vec<u8>) = (Vec::new(), Vec::new());
            for &i in group {
                a.extend_from_slice(self.e.raw(hunks[i].a.clone()));
                b.extend_from_slice(self.f.raw(hunks[i].b.clone()));
            }
            a.sort_unstable();
            b.sort_unstable();
            if a == b {
                for &i in group {
                    divs[i].last_mut().expect("one entry per hunk").class = Class::ToolResultOrder;
                }
            }
        }
    }

    fn census(&self, hunks: &[diff::Hunk]) -> Vec<TokenCount> {
        use std::collections::BTreeMap;
        let mut m: BTreeMap<u32, TokenCount> = BTreeMap::new();
        let is_ctrl = |id: u32| self.tok.added_token(id).is_some();
        for &id in self.e.ids.iter().filter(|&&i| is_ctrl(i)) {
            count_entry(&mut m, self.tok, id).expected += 1;
        }
        for &id in self.f.ids.iter().filter(|&&i| is_ctrl(i)) {
            count_entry(&mut m, self.tok, id).found += 1;
        }
        // Inside a hunk, occurrences of one ID on both sides pair up; the surplus of the found
        // side is unexpected, that of the expected side missing.
        for h in hunks {
            let mut f_pos: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
            for i in h.b.clone().filter(|&i| is_ctrl(self.f.ids[i])) {
                f_pos.entry(self.f.ids[i]).or_default().push(i);
            }
            let mut e_pos: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
            for i in h.a.clone().filter(|&i| is_ctrl(self.e.ids[i])) {
                e_pos.entry(self.e.ids[i]).or_default().push(i);
            }
            for (id, fp) in &f_pos {
                let paired = e_pos.get(id).map_or(0, Vec::len);
                if fp.len() > paired {
                    count_entry(&mut m, self.tok, *id)
                        .unexpected_positions
                        .extend(&fp[paired..]);
                }
            }
            for (id, ep) in &e_pos {
                let paired = f_pos.get(id).map_or(0, Vec::len);
                if ep.len() > paired {
                    count_entry(&mut m, self.tok, *id)
                        .missing_positions
                        .extend(&ep[paired..]);
                }
            }
        }
        m.into_values()
            .filter(|c| {
                c.expected != c.found
                    || !c.unexpected_positions.is_empty()
                    || !c.missing_positions.is_empty()
            })
            .collect()
    }

    fn first_difference(&self, h: &diff::Hunk) -> FirstDifference {
        let tok = |s: &Side<'_>, i: usize| s.ids.get(i).map(|&id| (id, s.text(i..i + 1)));
        let ctx = |s: &Side<'_>, i: usize| {
            let lo = i.saturating_sub(CONTEXT_TOKENS);
            let hi = (i + 1 + CONTEXT_TOKENS).min(s.ids.len());
            (
                s.text(lo..i),
                s.text((i + 1).min(s.ids.len())..hi.max((i + 1).min(s.ids.len()))),
            )
        };
        FirstDifference {
            expected_index: h.a.start,
            found_index: h.b.start,
            expected_token: tok(&self.e, h.a.start),
            found_token: tok(&self.f, h.b.start),
            expected_context: ctx(&self.e, h.a.start),
            found_context: ctx(&self.f, h.b.start),
        }
    }
}

fn count_entry<'m>(
    m: &'m mut std::collections::BTreeMap<u32, TokenCount>,
    tok: &Tokenizer,
    id: u32,
) -> &'m mut TokenCount {
    m.entry(id).or_insert_with(|| TokenCount {
        token: tok.added_token(id).unwrap_or_default().to_owned(),
        id,
        expected: 0,
        found: 0,
        unexpected_positions: Vec::new(),
        missing_positions: Vec::new(),
    })
}

/// Items of `a` left after removing one occurrence of each item of `b`.
fn multiset_minus(a: &[String], b: &[String]) -> Vec<String> {
    let mut rest: Vec<&String> = b.iter().collect();
    a.iter()
        .filter(|x| match rest.iter().position(|y| y == x) {
            Some(p) => {
                rest.swap_remove(p);
                false
            }
            None => true,
        })
        .cloned()
        .collect()
}

fn strip_ws(b: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(b)
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .into_bytes()
}
