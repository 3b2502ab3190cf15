//! JSON output mode (`parse_json_output`): keep the JSON value of the answer, replace the prose
//! around it with a single space.
//!
//! A value starts at the first `{` or `[` (a *bare* value: everything from there on is kept as
//! is) or after a Markdown fence (`` ```json `` or `` ``` `` and a newline: the text up to the
//! closing fence is kept, the rest is dropped). Prose before the value, and text after a closing
//! fence, each become one `" "`. Unlike the reference, which writes one space per pushed chunk,
//! the result does not depend on how the stream was cut.

use crate::parser::ParseEvent;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Seeking,
    Bare,
    Fenced,
    AfterFence,
}

pub struct JsonFilter {
    state: State,
    /// Log probabilities of input not yet attached to an emitted delta (they ride on the first
    /// delta emitted after them, as in the reference).
    logprobs: Vec<crate::input::TokenLogprob>,
    held: String,
    space_before: bool,
    space_after: bool,
}

const FENCES: [&str; 2] = ["```json\n", "```\n"];
const CLOSE: &str = "\n```";

fn partial_tail(text: &str, pat: &str) -> Option<usize> {
    let max = (pat.len() - 1).min(text.len());
    (1..=max).rev().find_map(|len| {
        let start = text.len() - len;
        (text.is_char_boundary(start) && pat.as_bytes().starts_with(&text.as_bytes()[start..]))
            .then_some(start)
    })
}

impl JsonFilter {
    pub fn new() -> Self {
        JsonFilter {
            state: State::Seeking,
            logprobs: Vec::new(),
            held: String::new(),
            space_before: false,
            space_after: false,
        }
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

    /// Transform one push's events.
    pub fn apply(&mut self, events: Vec<ParseEvent>, out: &mut Vec<ParseEvent>) {
        for ev in events {
            match ev {
                ParseEvent::Content { text, logprobs } => {
                    self.logprobs.extend(logprobs);
                    let mark = out.len();
                    if self.state == State::Bare && self.held.is_empty() {
                        self.emit(out, &text);
                    } else {
                        let mut t = std::mem::take(&mut self.held);
                        t.push_str(&text);
                        self.feed(&t, false, out);
                    }
                    self.attach(out, mark);
                }
                other => out.push(other),
            }
        }
    }

    /// Flush held text at the end of the stream.
    pub fn finish(&mut self, out: &mut Vec<ParseEvent>) {
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
                    self.emit(out, t);
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
                State::Fenced => match t.find(CLOSE) {
                    Some(i) => {
                        self.emit(out, &t[..i]);
                        self.state = State::AfterFence;
                        t = &t[i + CLOSE.len()..];
                    }
                    None => {
                        let cut = if last {
                            t.len()
                        } else {
                            partial_tail(t, CLOSE).unwrap_or(t.len())
                        };
                        self.emit(out, &t[..cut]);
                        self.held = t[cut..].to_owned();
                        return;
                    }
                },
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

impl Default for JsonFilter {
    fn default() -> Self {
        Self::new()
    }
}
