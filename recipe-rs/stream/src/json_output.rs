//! JSON output mode (`parse_json_output`): keep the JSON value of the answer, replace the prose
//! around it with a single space.
//!
//! A value starts at the first `{` or `[` (a *bare* value) or after a Markdown fence
//! (`` ```json `` or `` ``` `` and a newline). Either kind of value runs to the next `\n```` (a
//! bare value too, as in the reference) or to the end of the answer; what follows that closing
//! fence is dropped. Prose before the value, and text after the closing fence, each become one
//! `" "`. Unlike the reference, which writes one space per pushed chunk, the result does not
//! depend on how the stream was cut.
//!
//! As in the reference, stop sequences are matched here, on the text of the value only (from
//! its `{`/`[`, or from the end of the opening fence up to the closing one), not on the prose.
//! Text of the open value bypasses the parser's markers: the parser hands each input unit to
//! [`JsonFilter::value_unit`], which releases it whole, or holds it (with the units after it)
//! while its end may begin the closing fence or a stop sequence. Where the value closes inside a
//! unit, the rest of the unit goes back to the parser, which reads a tool-call block there.

use crate::input::TokenLogprob;
use crate::parser::ParseEvent;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Seeking,
    Bare,
    Fenced,
    AfterFence,
}

/// One input unit of the open value, held back with its log probabilities.
#[derive(Clone)]
struct ValueUnit {
    text: String,
    logprobs: Vec<TokenLogprob>,
}

/// What became of a unit handed to [`JsonFilter::value_unit`].
#[derive(Debug, PartialEq)]
pub enum ValueStep {
    /// The value is still open.
    Open,
    /// A stop sequence ended the value (and the stream).
    Stopped(String),
    /// The value closed: the unit's text from this offset on is not the value's; it keeps the
    /// unit's log probabilities (the reference repeats them on each piece of a unit).
    Closed(usize, Vec<TokenLogprob>),
}

#[derive(Clone)]
pub struct JsonFilter {
    state: State,
    /// Log probabilities of input not yet attached to an emitted delta (they ride on the first
    /// delta emitted after them in the same push, as in the reference).
    logprobs: Vec<TokenLogprob>,
    /// Before the value: the units from the one whose end may begin an opening fence, and
    /// their log probabilities.
    held: String,
    held_logprobs: Vec<TokenLogprob>,
    /// Inside the value: the units from the one where a closing fence or a stop sequence may
    /// begin.
    units: Vec<ValueUnit>,
    space_before: bool,
    space_after: bool,
    stops: Vec<String>,
    /// The stop sequence that ended the value, once one did.
    stopped: Option<String>,
}

const FENCES: [&str; 2] = ["```json\n", "```\n"];
const CLOSE: &str = "\n```";

fn partial_tail(text: &str, pat: &str) -> Option<usize> {
    if pat.is_empty() {
        return None;
    }
    let max = (pat.len() - 1).min(text.len());
    (1..=max).rev().find_map(|len| {
        let start = text.len() - len;
        (text.is_char_boundary(start) && pat.as_bytes().starts_with(&text.as_bytes()[start..]))
            .then_some(start)
    })
}

/// Where the value opens in `t`, read from the start of prose: the start of the prose that
/// comes before it, the end of the opening (after the `{`/`[`, or after the fence's newline).
fn find_open(t: &str) -> Option<(usize, usize)> {
    let brace = t.find(['{', '[']);
    let fence = FENCES
        .iter()
        .filter_map(|f| t.find(f).map(|i| (i, f.len())))
        .min();
    match (brace, fence) {
        (b, Some((fi, flen))) if b.is_none_or(|b| fi < b) => Some((fi, fi + flen)),
        (Some(b), _) => Some((b, b + t[b..].chars().next().map_or(1, char::len_utf8))),
        (None, _) => None,
    }
}

/// Where the value opens in a long held text, read once whatever the number of lookups: the
/// next `{`/`[` and the next of each opening fence at or after a position are kept and looked
/// for again only once passed.
#[derive(Default)]
pub struct OpeningSearch {
    next: [Option<usize>; 3],
}

impl OpeningSearch {
    /// Where the value would open if `text[pos..]` came next as content, as an offset in
    /// `text` just after its opening (see [`JsonFilter::opens_at`]).
    pub fn find(&mut self, filter: &JsonFilter, text: &str, pos: usize) -> Option<usize> {
        if filter.state != State::Seeking {
            return filter.opens_at(&text[pos..]).map(|k| pos + k);
        }
        // A fence may begin in the filter's held text and end in the first bytes here.
        let mut head = (pos + 2 * FENCES[0].len()).min(text.len());
        while !text.is_char_boundary(head) {
            head += 1;
        }
        if let Some(k) = filter.opens_at(&text[pos..head]) {
            return Some(pos + k);
        }
        for (i, slot) in self.next.iter_mut().enumerate() {
            if slot.is_none_or(|p| p != usize::MAX && p < pos) {
                let rest = &text[pos..];
                let found = match i {
                    0 => rest.find(['{', '[']),
                    _ => rest.find(FENCES[i - 1]),
                };
                *slot = Some(found.map_or(usize::MAX, |k| pos + k));
            }
        }
        let brace = self.next[0].filter(|&p| p != usize::MAX);
        let fence = (0..2)
            .filter_map(|i| {
                self.next[i + 1]
                    .filter(|&p| p != usize::MAX)
                    .map(|p| (p, FENCES[i].len()))
            })
            .min();
        match (brace, fence) {
            (b, Some((f, len))) if b.is_none_or(|b| f < b) => Some(f + len),
            (Some(b), _) => Some(b + 1),
            (None, _) => None,
        }
    }
}

impl JsonFilter {
    /// A filter matching `stops` (non-empty) inside the value.
    pub fn new(stops: Vec<String>) -> Self {
        JsonFilter {
            state: State::Seeking,
            logprobs: Vec::new(),
            held: String::new(),
            held_logprobs: Vec::new(),
            units: Vec::new(),
            space_before: false,
            space_after: false,
            stops,
            stopped: None,
        }
    }

    /// A new push begins: log probabilities of earlier pushes whose text the filter dropped
    /// are dropped with it (the reference attaches them only within their own push).
    pub fn begin_push(&mut self) {
        self.logprobs.clear();
    }

    /// Whether the JSON value has begun and is not closed (bare, or inside its fence).
    pub fn in_value(&self) -> bool {
        matches!(self.state, State::Bare | State::Fenced)
    }

    /// The stop sequence that ended the stream, once one matched.
    pub fn stopped(&self) -> Option<&str> {
        self.stopped.as_deref()
    }

    /// Where the value would open if `text` came next as content: the offset in `text` just
    /// after its opening (`{`, `[`, or the newline of the opening fence); 0 while a value is
    /// open, `None` when `text` opens none.
    pub fn opens_at(&self, text: &str) -> Option<usize> {
        match self.state {
            State::Bare | State::Fenced => Some(0),
            State::AfterFence => None,
            State::Seeking => {
                let t = format!("{}{text}", self.held);
                find_open(&t).map(|(_, end)| end.saturating_sub(self.held.len()))
            }
        }
    }

    /// The earliest complete stop sequence in `t` (the one that ends first): start and end.
    fn find_stop(&self, t: &str) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        for st in &self.stops {
            if let Some(i) = t.find(st.as_str()) {
                let end = i + st.len();
                if best.is_none_or(|(_, e)| end < e) {
                    best = Some((i, end));
                }
            }
        }
        best
    }

    /// Where a stop sequence may begin at the end of `t`.
    fn stop_partial(&self, t: &str) -> Option<usize> {
        self.stops.iter().filter_map(|s| partial_tail(t, s)).min()
    }

    fn emit(&mut self, out: &mut Vec<ParseEvent>, text: &str) {
        if !text.is_empty() {
            out.push(ParseEvent::Content {
                text: text.to_owned(),
                logprobs: Vec::new(),
            });
        }
    }

    /// Give every delta emitted since `mark` the pending log probabilities (unless it carries
    /// its own): the reference repeats a unit's log probabilities on each piece it is split
    /// into.
    fn attach(&mut self, out: &mut [ParseEvent], mark: usize) {
        if out.len() > mark {
            let lps = std::mem::take(&mut self.logprobs);
            for ev in &mut out[mark..] {
                if let ParseEvent::Content { logprobs, .. } = ev {
                    if logprobs.is_empty() {
                        *logprobs = lps.clone();
                    }
                }
            }
        }
    }

    fn prose(&mut self, after: bool, out: &mut Vec<ParseEvent>) {
        let flag = if after {
            &mut self.space_after
        } else {
            &mut self.space_before
        };
        if !*flag {
            *flag = true;
            self.emit(out, " ");
        }
    }

    /// Held units before the value are released: when they were prose, their space goes out
    /// with their own log probabilities (otherwise those are dropped, as in the reference).
    fn held_prose(&mut self, prose: bool, logprobs: Vec<TokenLogprob>, out: &mut Vec<ParseEvent>) {
        if prose && !self.space_before {
            self.space_before = true;
            out.push(ParseEvent::Content {
                text: " ".to_owned(),
                logprobs,
            });
        }
    }

    /// Filter one content delta (the value's text in it counts as one unit). Returns the stop
    /// sequence when one ended the value. Text after a closing fence is prose here: the parser
    /// hands the value's units to [`JsonFilter::value_unit`] instead when it must read what
    /// follows the fence.
    pub fn content(
        &mut self,
        text: &str,
        logprobs: Vec<TokenLogprob>,
        out: &mut Vec<ParseEvent>,
    ) -> Option<String> {
        if self.stopped.is_some() {
            return None;
        }
        let mut text = text;
        let mut logprobs = logprobs;
        if self.in_value() {
            match self.value_unit(text, logprobs, out) {
                ValueStep::Open => return None,
                ValueStep::Stopped(stop) => return Some(stop),
                ValueStep::Closed(at, lps) => {
                    text = &text[at..];
                    logprobs = lps;
                }
            }
        }
        let mark = out.len();
        let opened = self.prose_text(text, logprobs, out);
        if let Some(at) = opened {
            // The rest is the value's first unit, with the log probabilities of this one.
            let lps = if out.len() > mark {
                let lps = self.logprobs.clone();
                self.attach(out, mark);
                lps
            } else {
                std::mem::take(&mut self.logprobs)
            };
            return self.content(&text[at..], lps, out);
        }
        self.attach(out, mark);
        None
    }

    /// Read the unit `text` before the value or after its closing fence. Returns the offset in
    /// `text` where the value opened (the rest is the value's).
    fn prose_text(
        &mut self,
        text: &str,
        logprobs: Vec<TokenLogprob>,
        out: &mut Vec<ParseEvent>,
    ) -> Option<usize> {
        match self.state {
            State::Bare | State::Fenced => {
                self.logprobs.extend(logprobs);
                Some(0)
            }
            State::AfterFence => {
                self.logprobs.extend(logprobs);
                if !text.is_empty() {
                    self.prose(true, out);
                }
                None
            }
            State::Seeking => {
                let held = std::mem::take(&mut self.held);
                let held_logprobs = std::mem::take(&mut self.held_logprobs);
                let t = format!("{held}{text}");
                let fence_start = FENCES.iter().filter_map(|f| partial_tail(&t, f)).min();
                if find_open(&t).is_none() {
                    if let Some(p) = fence_start {
                        // As in the reference, the whole unit whose end may begin a fence
                        // waits, its prose too (and the held units with it when the fence
                        // may begin in them). A unit that only goes on with a fence begun in
                        // the held ones keeps its log probabilities for a delta of this push
                        // alone: the held prose's space carries those of the held units only.
                        if p < held.len() {
                            self.held = t;
                            self.held_logprobs = held_logprobs;
                            self.logprobs.extend(logprobs);
                            return None;
                        }
                        self.held_prose(!held.is_empty(), held_logprobs, out);
                        self.held = text.to_owned();
                        self.held_logprobs = logprobs;
                        return None;
                    }
                }
                let prose = match find_open(&t) {
                    Some((start, _)) => start > 0,
                    None => true,
                };
                self.held_prose(prose && !held.is_empty(), held_logprobs, out);
                self.logprobs.extend(logprobs);
                match find_open(&t) {
                    Some((start, end)) => {
                        if start > 0 {
                            self.prose(false, out);
                        }
                        if t[start..].starts_with('`') {
                            self.state = State::Fenced;
                        } else {
                            self.emit(out, &t[start..end]);
                            self.state = State::Bare;
                        }
                        Some(end.saturating_sub(held.len()))
                    }
                    None => {
                        if !t.is_empty() {
                            self.prose(false, out);
                        }
                        None
                    }
                }
            }
        }
    }

    /// Take one input unit of the open value. Units are released whole, one delta each, unless
    /// their end may begin the closing fence or a stop sequence: then that unit and the ones
    /// after it wait until later input decides (as the reference holds them).
    pub fn value_unit(
        &mut self,
        text: &str,
        logprobs: Vec<TokenLogprob>,
        out: &mut Vec<ParseEvent>,
    ) -> ValueStep {
        if self.stopped.is_some() {
            return ValueStep::Open;
        }
        if text.is_empty() && logprobs.is_empty() {
            return ValueStep::Open;
        }
        self.units.push(ValueUnit {
            text: text.to_owned(),
            logprobs,
        });
        let joined: String = self.units.iter().map(|u| u.text.as_str()).collect();
        let close = joined.find(CLOSE);
        // A stop sequence that is complete no later than the closing fence wins.
        if let Some((i, end)) = self.find_stop(&joined) {
            if close.is_none_or(|c| end <= c + CLOSE.len()) {
                self.release(i, out);
                self.stopped = Some(joined[i..end].to_owned());
                self.units.clear();
                return ValueStep::Stopped(joined[i..end].to_owned());
            }
        }
        if let Some(c) = close {
            let last_start = joined.len() - text.len();
            let lps = self
                .units
                .last()
                .map(|u| u.logprobs.clone())
                .unwrap_or_default();
            self.release(c, out);
            self.units.clear();
            self.state = State::AfterFence;
            return ValueStep::Closed((c + CLOSE.len()).saturating_sub(last_start), lps);
        }
        let hold = [partial_tail(&joined, CLOSE), self.stop_partial(&joined)]
            .into_iter()
            .flatten()
            .min();
        let Some(hold) = hold else {
            self.release(joined.len(), out);
            return ValueStep::Open;
        };
        // Release the units that end before the held tail begins.
        let mut start = 0;
        for u in &self.units {
            if start + u.text.len() > hold {
                break;
            }
            start += u.text.len();
        }
        self.release(start, out);
        ValueStep::Open
    }

    /// Emit the held units' text up to `upto` (one delta per unit, a unit cut at `upto` keeps
    /// its log probabilities on the part before) and drop what was emitted.
    fn release(&mut self, upto: usize, out: &mut Vec<ParseEvent>) {
        let units = std::mem::take(&mut self.units);
        let mut start = 0;
        let mut rest = Vec::new();
        for u in units {
            let end = start + u.text.len();
            if end <= upto && !(u.text.is_empty() && start == upto) {
                if !u.text.is_empty() {
                    out.push(ParseEvent::Content {
                        text: u.text,
                        logprobs: u.logprobs,
                    });
                }
            } else if start < upto {
                let cut = upto - start;
                out.push(ParseEvent::Content {
                    text: u.text[..cut].to_owned(),
                    logprobs: u.logprobs,
                });
                rest.push(ValueUnit {
                    text: u.text[cut..].to_owned(),
                    logprobs: Vec::new(),
                });
            } else {
                rest.push(u);
            }
            start = end;
        }
        self.units = rest;
    }

    /// Flush held text at the end of the stream.
    pub fn finish(&mut self, out: &mut Vec<ParseEvent>) {
        if self.stopped.is_some() {
            return;
        }
        let units = std::mem::take(&mut self.units);
        for u in units {
            if !u.text.is_empty() {
                out.push(ParseEvent::Content {
                    text: u.text,
                    logprobs: u.logprobs,
                });
            }
        }
        // Before the value, a held start of a fence that never completed is prose.
        let mark = out.len();
        // The held units' log probabilities come first, then those of this push.
        let mut logprobs = std::mem::take(&mut self.held_logprobs);
        logprobs.append(&mut self.logprobs);
        self.logprobs = logprobs;
        if !std::mem::take(&mut self.held).is_empty() {
            self.prose(false, out);
        }
        self.attach(out, mark);
    }
}
