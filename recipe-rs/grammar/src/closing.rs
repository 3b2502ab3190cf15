//! The closing planner: near the end of an output's token budget (`max_tokens`), steer the
//! output to a short valid end, so that a constrained output is complete when the budget runs
//! out instead of cut inside a call or a JSON value.
//!
//! [`shortest_end`] finds a short run of tokens from a matcher's state to a state where the
//! grammar accepts (EOS allowed), greedily, on a clone of the matcher: at each position it takes
//! the first allowed token of a fixed preference order, read from the vocabulary once
//! ([`ClosingVocabulary`]):
//!
//! 0. the rest of a closer of several tokens it began (`</` is `<` then `/` in a byte-level
//!    vocabulary, and `<` alone may open the next call);
//! 1. a control token of the grammar (`｜DSML｜`, `</think>`): they are allowed only at
//!    structural positions, where they close reasoning or a DSML tag;
//! 2. in free text (a JSON string, a raw `string="true"` value, reasoning: the *probe* token
//!    `x` is allowed there), a closer after which free text ends (`"`, `</`): the probe is no
//!    longer allowed after it, or a control token is (`</` then `｜DSML｜` ends a raw value);
//!    `"` inside a raw value or `</` inside a JSON string is text, and is passed over;
//! 3. elsewhere, closers and the shortest values (`</`, `}`, `]`, `0`, `"`, `""`, `{`, `[`,
//!    `null`, ...), a value only where one may start (after `:`, `[`, `,`, whitespace: `0`
//!    after `1` is more digits of a number, not progress) and never twice in a row;
//! 4. otherwise a token of the names an end may need ([`NameTokens`]: a required parameter's
//!    name, not an undeclared key's), else the allowed token with the most non-whitespace bytes.
//!
//! The result is not always the shortest end, but it is a valid one (every token was allowed
//! by the matcher when it was taken), short in practice, and the same for the same state.
//!
//! [`ClosingState`] is the policy one matcher applies with it: while the end found fits in the
//! budget with [`CLOSING_MARGIN`] tokens to spare the output is free; from then on the mask
//! holds only the plan's next token. The margin is at least the length of the first end
//! planned (about what a whole call costs), so that the model cannot open another call it has
//! no room to finish. An output that is already complete (accepting) is left free, but it may
//! open new structure (a control token: a calls block after content) only while the end after
//! that still fits.

use llguidance::toktrie::{SimpleVob, TokTrie};
use llguidance::Matcher;
use serde_json::Value;

use crate::plan::{Answer, GrammarPlan};

/// Tokens to spare between the end found and the budget (at least; half the end's length when
/// that is more): the plan is committed while a single free token cannot lengthen the end past
/// the budget (opening a nested object with required keys, say; more tokens with a byte-level
/// vocabulary, whose ends are longer).
pub const CLOSING_MARGIN: usize = 24;

/// The tokens the planner prefers, as runs of IDs of one vocabulary (`</` is one token of the
/// released vocabulary and two of a byte-level one).
#[derive(Debug, Clone, Default)]
pub struct ClosingVocabulary {
    /// A token allowed in free text only (`x`).
    probe: Option<u32>,
    /// Closers of free text, tried with the probe after them.
    free_closers: Vec<Vec<u32>>,
    /// Closers and short values, in order of preference; `true`: a value (never written twice
    /// in a row: `000` is a string, not progress).
    closers: Vec<(Vec<u32>, bool)>,
    /// How much of a token is not whitespace, per token: two per other byte, minus one per
    /// whitespace byte (the fallback takes the allowed token that scores highest, so it
    /// writes names and tags, not the whitespace JSON allows between them).
    scores: Vec<i16>,
    /// Per token: whether it ends where a JSON value may start (`:`, `[`, `,`, whitespace, the
    /// `>` of a DSML parameter tag), so that a value written after it is a new value, not more
    /// digits of a number.
    opens_value: Vec<bool>,
}

const FREE_CLOSERS: &[&[u8]] = &[b"\"", b"</"];
const CLOSERS: &[&[u8]] = &[b"</", b"}", b"]"];
const VALUES: &[&[u8]] = &[
    b"0", b"\"", b"\"\"", b"{", b"[", b"null", b"true", b"false", b"[]", b"{}",
];

impl ClosingVocabulary {
    pub fn new(trie: &TokTrie) -> Self {
        let run = |spelling: &[u8]| trie.greedy_tokenize(spelling);
        let mut closers: Vec<(Vec<u32>, bool)> = CLOSERS.iter().map(|s| (run(s), false)).collect();
        // `"` may repeat: `""` opens and closes a string.
        closers.extend(VALUES.iter().map(|s| (run(s), *s != b"\"")));
        closers.retain(|(r, _)| !r.is_empty());
        let scores = (0..trie.vocab_size() as u32)
            .map(|t| {
                let bytes = trie.token(t);
                let ws = bytes.iter().filter(|b| b.is_ascii_whitespace()).count() as i64;
                (2 * (bytes.len() as i64 - ws) - ws).clamp(i16::MIN as i64 + 1, i16::MAX as i64)
                    as i16
            })
            .collect();
        let opens_value = (0..trie.vocab_size() as u32)
            .map(|t| {
                trie.token(t)
                    .last()
                    .is_some_and(|b| b":[,{>".contains(b) || b.is_ascii_whitespace())
            })
            .collect();
        ClosingVocabulary {
            opens_value,
            probe: trie.token_id(b"x"),
            free_closers: FREE_CLOSERS
                .iter()
                .map(|s| run(s))
                .filter(|r| !r.is_empty())
                .collect(),
            closers,
            scores,
        }
    }
}

/// The parts of `run` the planner may write next after `recent` (what it wrote so far): the
/// whole run, or its rest when `recent` ends inside it.
fn run_rests<'r>(run: &'r [u32], recent: &'r [u32]) -> impl Iterator<Item = &'r [u32]> {
    (0..run.len())
        .filter(move |&i| i == 0 || recent.ends_with(&run[..i]))
        .map(move |i| &run[i..])
}

/// What the planner reads for one grammar: the vocabulary's preferences, the grammar's control
/// tokens other than EOS (`｜DSML｜`, `</think>`), EOS, and the grammar's own names.
#[derive(Clone, Copy)]
pub struct EndTokens<'a> {
    pub vocabulary: &'a ClosingVocabulary,
    pub controls: &'a [u32],
    pub eos: u32,
    pub names: &'a NameTokens,
}

/// The names an end may need (required parameters and JSON keys, enum strings, tool names),
/// each as the tokens of the text around it in its tag: the planner's fallback continues one of
/// them where the whole rest of it is allowed, so that it writes a required parameter that is
/// still missing rather than an undeclared key or a name already written.
#[derive(Debug, Clone, Default)]
pub struct NameTokens {
    /// Token runs in the order the fallback tries them (by rank, then as they came).
    runs: Vec<Vec<u32>>,
}

impl NameTokens {
    /// The runs of `texts` (a rank and a text each, rank 0 first), encoded by `encode`.
    pub fn new<'t>(
        texts: impl IntoIterator<Item = (u8, &'t str)>,
        mut encode: impl FnMut(&str) -> Vec<u32>,
    ) -> Self {
        let mut ranked: Vec<(u8, Vec<u32>)> = texts
            .into_iter()
            .map(|(rank, text)| (rank, encode(text)))
            .filter(|(_, run)| !run.is_empty())
            .collect();
        ranked.sort_by_key(|(rank, _)| *rank);
        NameTokens {
            runs: ranked.into_iter().map(|(_, run)| run).collect(),
        }
    }

    /// The next token of the first run that can go on from here (whole, or its rest after what
    /// the planner wrote, `recent`): a token `mask` allows, after which the rest of the run is
    /// allowed too. A run starts where its name starts: the tail of a name is an undeclared name
    /// of its own.
    fn next(&self, m: &mut Matcher, mask: &SimpleVob, recent: &[u32]) -> Option<u32> {
        self.runs.iter().find_map(|run| {
            run_rests(run, recent)
                .find(|rest| mask.is_allowed(rest[0]) && valid(m, rest) == rest.len())
                .map(|rest| rest[0])
        })
    }
}

/// The texts behind a plan's [`NameTokens`], with their ranks: required parameters' names as
/// their DSML tags write them, from the attribute and from the name on (0), required JSON keys
/// and enum strings as JSON writes them, after a comma, from the quote and inside it (1), tool
/// names (2). Optional names are left out: an end never needs them.
pub fn name_texts(plan: &GrammarPlan) -> Vec<(u8, String)> {
    let mut out = Vec::new();
    match &plan.answer {
        Answer::Calls(calls) => {
            for tool in &calls.tools {
                for lead in [" name=\"", ""] {
                    out.push((2, format!("{lead}{}\">", tool.name)));
                }
                let params = &tool.params;
                for p in &params.params[..params.required.min(params.params.len())] {
                    for lead in [" name=\"", ""] {
                        out.push((0, format!("{lead}{}\" string=\"", p.name)));
                    }
                }
                for p in &params.params {
                    if let Some(schema) = &p.forms.json {
                        json_names(schema, &mut out);
                    }
                }
            }
        }
        Answer::Json(schema) => json_names(schema, &mut out),
        Answer::Regex(_) | Answer::Lark(_) => {}
    }
    out
}

fn json_names(schema: &Value, out: &mut Vec<(u8, String)>) {
    // With the comma before it (after a value), the quote (at a key) and without it (inside one).
    let mut quoted = |text: String, suffix: &str| {
        out.push((1, format!(",{text}{suffix}")));
        out.push((1, format!("{text}{suffix}")));
        out.push((1, format!("{}{suffix}", &text[1..])));
    };
    let Value::Object(map) = schema else {
        if let Value::Array(items) = schema {
            items.iter().for_each(|v| json_names(v, out));
        }
        return;
    };
    if let Some(Value::Array(required)) = map.get("required") {
        for key in required.iter().filter(|k| k.is_string()) {
            quoted(key.to_string(), ":");
        }
    }
    for key in ["enum", "const"] {
        let values = match map.get(key) {
            Some(Value::Array(v)) => v.as_slice(),
            Some(v) => std::slice::from_ref(v),
            None => &[],
        };
        for v in values.iter().filter(|v| v.is_string()) {
            quoted(v.to_string(), "");
        }
    }
    map.values().for_each(|v| json_names(v, out));
}

fn valid(m: &mut Matcher, tokens: &[u32]) -> usize {
    m.validate_tokens(tokens).unwrap_or(0)
}

/// The token the planner takes next from `m`'s state (`recent`: what it wrote before).
fn next_token(m: &mut Matcher, ends: EndTokens<'_>, recent: &[u32]) -> Option<u32> {
    let EndTokens {
        vocabulary: voc,
        controls,
        eos,
        names,
    } = ends;
    // A closer of several tokens that the planner began goes on first (`<` of `</` is also
    // where `<｜DSML｜` opens the next call).
    for run in voc
        .free_closers
        .iter()
        .chain(voc.closers.iter().map(|(r, _)| r))
    {
        if let Some(rest) = run_rests(run, recent)
            .skip_while(|rest| rest.len() == run.len())
            .find(|rest| valid(m, rest) == rest.len())
        {
            return Some(rest[0]);
        }
    }
    if let Some(&c) = controls.iter().find(|&&c| valid(m, &[c]) == 1) {
        return Some(c);
    }
    let with = |rest: &[u32], t: u32| [rest, &[t]].concat();
    match voc.probe {
        Some(probe) if valid(m, &[probe]) == 1 => {
            // A closer ends free text: the probe is text no more after it, or a control token
            // may follow (`</` then `｜DSML｜`; `</` alone may start the next piece of a raw value).
            let closes = |m: &mut Matcher, rest: &[u32]| {
                valid(m, &with(rest, probe)) == rest.len()
                    || controls
                        .iter()
                        .any(|&d| valid(m, &with(rest, d)) == rest.len() + 1)
            };
            for run in &voc.free_closers {
                if let Some(rest) = run_rests(run, recent).find(|rest| closes(m, rest)) {
                    return Some(rest[0]);
                }
            }
        }
        _ => {
            // A value starts only after what may precede one (and never twice in a row).
            let value_may_start = recent
                .last()
                .is_none_or(|&t| voc.opens_value.get(t as usize).copied().unwrap_or(false));
            for (run, value) in &voc.closers {
                let fresh = |rest: &[u32]| {
                    !(*value
                        && rest.len() == run.len()
                        && (recent.ends_with(run) || !value_may_start))
                };
                if let Some(rest) =
                    run_rests(run, recent).find(|rest| fresh(rest) && valid(m, rest) == rest.len())
                {
                    return Some(rest[0]);
                }
            }
        }
    }
    let mask = m.compute_mask().ok()?;
    if let Some(t) = names.next(m, &mask, recent) {
        return Some(t);
    }
    let mut best: Option<(i16, u32)> = None;
    mask.iter_set_entries(|t| {
        let t = t as u32;
        let score = voc.scores.get(t as usize).copied().unwrap_or(i16::MIN);
        if t != eos && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, t));
        }
    });
    best.map(|(_, t)| t)
}

/// A run of at most `limit` tokens that takes `start`'s state to one where the grammar accepts
/// (empty when it already does); `None` when the planner finds none. `start` is not changed.
pub fn shortest_end(start: &Matcher, ends: EndTokens<'_>, limit: usize) -> Option<Vec<u32>> {
    let mut m = start.deep_clone();
    let mut out = Vec::new();
    loop {
        if m.is_error() {
            return None;
        }
        if m.is_stopped() || m.is_accepting().unwrap_or(false) {
            return Some(out);
        }
        if out.len() >= limit {
            return None;
        }
        let t = next_token(&mut m, ends, &out)?;
        m.consume_tokens(&[t]).ok()?;
        out.push(t);
    }
}

/// What one matcher's closing policy keeps between tokens.
#[derive(Debug, Clone, Default)]
pub struct ClosingState {
    /// The committed end: `plan[k]` is due once `from + k` tokens were accepted.
    plan: Vec<u32>,
    from: usize,
    /// Plan again once the tokens still allowed are at most this (`None`: at the next mask).
    check_at: Option<usize>,
    /// The length of the first end planned (about what a whole call, or a whole answer, costs):
    /// what one free token may add at most, in practice (it opens another call).
    first: Option<usize>,
}

/// What the mask of a position should be, by [`ClosingState::decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closing {
    /// The grammar's mask as it is.
    Free,
    /// The grammar's mask without these control tokens: the output is complete, and what they
    /// would open could not be closed within the budget.
    Without(Vec<u32>),
    /// Only this token.
    Force(u32),
}

impl ClosingState {
    /// Forget the plan (after a rollback: the state it was made for may be gone).
    pub fn reset(&mut self) {
        self.plan.clear();
        self.check_at = None;
    }

    /// Note that `token` was accepted as token number `index` (from 0): a token other than
    /// the plan's drops the plan.
    pub fn accepted(&mut self, index: usize, token: u32) {
        if self.plan.is_empty() {
            return;
        }
        if index < self.from || self.plan.get(index - self.from) != Some(&token) {
            self.reset();
        }
    }

    /// The mask policy at the position after `accepted` tokens, with `max_tokens` allowed in
    /// all (EOS included). `m`: the matcher there, `accepting`: whether it accepts now,
    /// `allowed`: whether its mask allows a token.
    pub fn decide(
        &mut self,
        m: &Matcher,
        accepting: bool,
        accepted: usize,
        max_tokens: usize,
        ends: EndTokens<'_>,
        allowed: &dyn Fn(u32) -> bool,
    ) -> Closing {
        let remaining = max_tokens.saturating_sub(accepted);
        if remaining == 0 {
            return Closing::Free;
        }
        if accepting {
            self.plan.clear();
            // A control token here opens structure (a calls block after content): only if the
            // end after it still fits.
            let late: Vec<u32> = ends
                .controls
                .iter()
                .copied()
                .filter(|&c| allowed(c) && !opening_fits(m, c, ends, remaining))
                .collect();
            return if late.is_empty() {
                Closing::Free
            } else {
                Closing::Without(late)
            };
        }
        if let Some(&t) = accepted
            .checked_sub(self.from)
            .and_then(|k| self.plan.get(k))
        {
            return Closing::Force(t);
        }
        self.plan.clear();
        if self.check_at.is_some_and(|c| remaining > c) {
            return Closing::Free;
        }
        let limit = remaining.max(4 * CLOSING_MARGIN) + 4 * CLOSING_MARGIN;
        let Some(plan) = shortest_end(m, ends, limit) else {
            self.check_at = None; // nothing found: look again at the next token
            return Closing::Free;
        };
        let need = plan.len() + 1; // and EOS
        let first = *self.first.get_or_insert(need);
        let margin = CLOSING_MARGIN.max(need / 2).max(first);
        if need + margin < remaining {
            let slack = remaining - need - margin;
            self.check_at = Some(need + margin + slack / 2);
            return Closing::Free;
        }
        let Some(&first) = plan.first() else {
            return Closing::Free;
        };
        self.plan = plan;
        self.from = accepted;
        self.check_at = None;
        Closing::Force(first)
    }
}

/// Whether the output, after control token `c`, can still end within `remaining` tokens with
/// the margin to spare.
fn opening_fits(m: &Matcher, c: u32, ends: EndTokens<'_>, remaining: usize) -> bool {
    let mut after = m.deep_clone();
    if after.consume_tokens(&[c]).is_err() {
        return true;
    }
    let limit = remaining.saturating_sub(CLOSING_MARGIN + 2);
    shortest_end(&after, ends, limit).is_some()
}
