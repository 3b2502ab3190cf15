//! JSON output mode (`parse_json_output`): keep the JSON value of the answer, replace the prose
//! around it with a single space.
//!
//! A value starts at the first `{` or `[` (a *bare* value: everything from there on is kept as
//! is) or after a Markdown fence (`` ```json `` or `` ``` `` and a newline: the text up to the
//! closing fence is kept, the rest is dropped). Prose before the value, and text after a closing
//! fence, each become one `" "`. Unlike the reference, which writes one space per pushed chunk,
//! the result does not depend on how the stream was cut.
//!
//! As in the reference, stop sequences are matched here, on the text of the value only (from
//! its `{`/`[`, or from the end of the opening fence up to the closing one), not on the prose,
//! and the parser reads no tool-call block while a value is open ([`JsonFilter::in_value`]).

use crate::parser::ParseEvent;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Seeking,
    Bare,
    Fenced,
    AfterFence,
}

#[derive(Clone)]
pub struct JsonFilter {
    state: State,
    /// Log probabilities of input not yet attached to an emitted delta (they ride on the first
    /// delta emitted after them in the same push, as in the reference).
    logprobs: Vec<crate::input::TokenLogprob>,
    held: String,
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

impl JsonFilter {
    /// A filter matching `stops` (non-empty) inside the value.
    pub fn new(stops: Vec<String>) -> Self {
        JsonFilter {
            state: State::Seeking,
            logprobs: Vec::new(),
            held: String::new(),
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

    /// Give every delta emitted since `mark` the pending log probabilities: the reference
    /// repeats a unit's log probabilities on each piece it is split into.
    fn attach(&mut self, out: &mut [ParseEvent], mark: usize) {
        if out.len() > mark {
            let lps = std::mem::take(&mut self.logprobs);
            for ev in &mut out[mark..] {
                if let ParseEvent::Content { logprobs, .. } = ev {
                    *logprobs = lps.clone();
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

    /// Record the stop sequence that matched in `t` (the earliest to complete).
    fn stop(&mut self, t: &str) {
        if let Some((i, end)) = self.find_stop(t) {
            self.stopped = Some(t[i..end].to_owned());
        }
        self.held.clear();
    }

    /// Advance over `text` as if it were content, discarding the output (the parser uses a copy
    /// to learn whether held text opens the JSON value).
    pub fn look_ahead(&mut self, text: &str) {
        let mut sink = Vec::new();
        self.content(text, Vec::new(), &mut sink);
    }

    /// Filter one content delta. Returns the stop sequence when one ended the value.
    pub fn content(
        &mut self,
        text: &str,
        logprobs: Vec<crate::input::TokenLogprob>,
        out: &mut Vec<ParseEvent>,
    ) -> Option<String> {
        if self.stopped.is_some() {
            return None;
        }
        self.logprobs.extend(logprobs);
        let mark = out.len();
        if self.state == State::Bare && self.held.is_empty() && self.stops.is_empty() {
            self.emit(out, text);
        } else {
            let mut t = std::mem::take(&mut self.held);
            t.push_str(text);
            self.feed(&t, false, out);
        }
        self.attach(out, mark);
        self.stopped.clone()
    }

    /// Flush held text at the end of the stream.
    pub fn finish(&mut self, out: &mut Vec<ParseEvent>) {
        if self.stopped.is_some() {
            return;
        }
        let t = std::mem::take(&mut self.held);
        let mark = out.len();
        if !t.is_empty() {
            self.feed(&t, true, out);
        }
        self.attach(out, mark);
    }

    fn feed(&mut self, mut t: &str, last: bool, out: &mut Vec<ParseEvent>) {
        loop {
            match self.state {
                State::Bare => {
                    if let Some((i, _)) = self.find_stop(t) {
                        self.emit(out, &t[..i]);
                        self.stop(t);
                        return;
                    }
                    let cut = if last {
                        t.len()
                    } else {
                        self.stop_partial(t).unwrap_or(t.len())
                    };
                    self.emit(out, &t[..cut]);
                    self.held = t[cut..].to_owned();
                    return;
                }
                State::Seeking => {
                    let brace = t.find(['{', '[']);
                    let fence = FENCES
                        .iter()
                        .filter_map(|f| t.find(f).map(|i| (i, f.len())))
                        .min();
                    match (brace, fence) {
                        (b, Some((fi, flen))) if b.is_none_or(|b| fi < b) => {
                            if fi > 0 {
                                self.prose(false, out);
                            }
                            self.state = State::Fenced;
                            t = &t[fi + flen..];
                        }
                        (Some(b), _) => {
                            if b > 0 {
                                self.prose(false, out);
                            }
                            let c = t[b..].chars().next().map_or(1, char::len_utf8);
                            self.emit(out, &t[b..b + c]);
                            self.state = State::Bare;
                            t = &t[b + c..];
                        }
                        (None, _) => {
                            let hold = if last {
                                None
                            } else {
                                FENCES.iter().filter_map(|f| partial_tail(t, f)).min()
                            };
                            let cut = hold.unwrap_or(t.len());
                            if cut > 0 {
                                self.prose(false, out);
                            }
                            self.held = t[cut..].to_owned();
                            return;
                        }
                    }
                }
                State::Fenced => {
                    let close = t.find(CLOSE);
                    // A stop sequence that is complete no later than the closing fence wins.
                    if let Some((i, end)) = self.find_stop(t) {
                        if close.is_none_or(|c| end <= c + CLOSE.len()) {
                            self.emit(out, &t[..i]);
                            self.stop(t);
                            return;
                        }
                    }
                    match close {
                        Some(i) => {
                            self.emit(out, &t[..i]);
                            self.state = State::AfterFence;
                            t = &t[i + CLOSE.len()..];
                        }
                        None => {
                            let cut = if last {
                                t.len()
                            } else {
                                [partial_tail(t, CLOSE), self.stop_partial(t)]
                                    .into_iter()
                                    .flatten()
                                    .min()
                                    .unwrap_or(t.len())
                            };
                            self.emit(out, &t[..cut]);
                            self.held = t[cut..].to_owned();
                            return;
                        }
                    }
                }
                State::AfterFence => {
                    if !t.is_empty() {
                        self.prose(true, out);
                    }
                    return;
                }
            }
        }
    }
}
