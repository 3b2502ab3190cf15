//! The incremental output parser.
//!
//! Input arrives as [`Piece`]s: a run of decoded text (one per text chunk, or one per run of
//! ordinary tokens inside a token chunk) or a single control token recognised by its ID. The
//! parser splits the answer into reasoning, content and DSML tool calls and reports what it found
//! as [`ParseEvent`]s; a batch parse is the same parser fed once.
//!
//! Delta granularity follows the reference implementation: text is released one input unit at a
//! time. A unit whose tail could be the start of a marker (`</think>`, `<｜DSML｜`, a stop
//! sequence, or newlines that may precede a tool-call block) is held back whole until later input
//! decides; units that turn out not to start a marker are then released one by one.
//!
//! Cost is linear in the input: markers are searched with a per-marker cursor, held text is only
//! the units from the earliest possible marker start on, and the DSML parser consumes its buffer
//! from the front.

use recipe_core::{ParsingOptions, SpecialToken};

use crate::input::TokenLogprob;

/// What a piece of tool-call argument text is, for merging consecutive deltas of one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    Open,
    Key,
    Colon,
    ValueOpen,
    Value,
    ValueClose,
    Separator,
    Close,
    Empty,
}

/// One thing the parser found.
#[derive(Clone, Debug, PartialEq)]
pub enum ParseEvent {
    Reasoning {
        text: String,
        logprobs: Vec<TokenLogprob>,
    },
    /// Reasoning is over (`</think>`, or a tool-call block opened inside it).
    ReasoningEnd,
    Content {
        text: String,
        logprobs: Vec<TokenLogprob>,
    },
    ToolCallStart {
        index: usize,
        name: String,
    },
    ToolCallArgs {
        index: usize,
        kind: ArgKind,
        text: String,
    },
    /// A stop sequence matched: the stream is over.
    StopSequence(String),
}

/// One unit of parser input.
#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    /// Decoded text; `textual` is true when it came from a text chunk, so control-token
    /// spellings inside it count as markers.
    Text {
        text: String,
        logprobs: Vec<TokenLogprob>,
        textual: bool,
    },
    /// A control token given by ID, with its spelling and log probability.
    Special {
        kind: Option<SpecialToken>,
        spelling: String,
        logprob: Option<TokenLogprob>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TextMode {
    Reasoning,
    Content,
}

struct Unit {
    text: String,
    logprobs: Vec<TokenLogprob>,
}

enum Mode {
    Text(TextMode),
    Dsml(Box<Dsml>),
    /// After the tool-call block closed: everything else is dropped.
    Dropped,
    /// After a stop sequence or the end-of-sequence token.
    Ended,
}

/// The incremental parser. Feed it with [`Parser::push`], end it with [`Parser::finish`].
pub struct Parser {
    mode: Mode,
    strip_leading_newlines: bool,
    /// Empty text chunks seen while leading newlines are being dropped: they become empty
    /// deltas in front of the first text, unless a newline was dropped before it or the
    /// newlines follow the end of reasoning (as in the reference).
    empty_pending: usize,
    strip_keeps_empty: bool,
    /// Whether any text was released yet.
    emitted_any: bool,
    held: Vec<Unit>,
    held_textual: bool,
    think_end: String,
    dsml: String,
    dsml_open: String,
    /// The tags that open a tool-call block (`<｜DSML｜ calls>`, `<｜DSML｜ invoke name="`, …).
    block_tags: Vec<String>,
    stops: Vec<String>,
    parse_tool_calls: bool,
    tool_calls: usize,
    stopped_by: Option<String>,
    eos_seen: bool,
    /// Whether the text released last ended with an unfinished `<｜DSML｜` (the first newline
    /// after it stays text when a tool-call block follows, as in the reference).
    last_lt: bool,
    /// Whether the text released last ended with an unfinished `</think>` spelling (the newline
    /// after it is reasoning text, not one of the newlines that end reasoning).
    last_think_partial: bool,
}

/// Marker kinds the text scanner looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Marker {
    ThinkEnd,
    Dsml,
    Stop(usize),
}

impl Parser {
    pub fn new(options: &ParsingOptions) -> Self {
        let dsml = options.special_tokens.get(SpecialToken::Dsml).to_owned();
        let mut p = Parser {
            mode: Mode::Text(TextMode::Content),
            strip_leading_newlines: true,
            empty_pending: 0,
            strip_keeps_empty: true,
            emitted_any: false,
            held: Vec::new(),
            held_textual: true,
            think_end: options
                .special_tokens
                .get(SpecialToken::ThinkingEnd)
                .to_owned(),
            dsml_open: format!("<{dsml}"),
            block_tags: block_open_tags(&dsml),
            dsml,
            stops: options
                .stop_sequences
                .iter()
                .filter(|s| !s.is_empty())
                .cloned()
                .collect(),
            parse_tool_calls: options.parse_tool_calls,
            tool_calls: 0,
            stopped_by: None,
            eos_seen: false,
            last_lt: false,
            last_think_partial: false,
        };
        if options.starts_in_tool_calls {
            p.mode = Mode::Dsml(Box::new(Dsml::new(
                &p.dsml,
                true,
                TextMode::Content,
                String::new(),
            )));
        } else if let Some(stage) = options.thinking_initial_stage {
            p.mode = Mode::Text(if stage.starts_in_reasoning() {
                TextMode::Reasoning
            } else {
                TextMode::Content
            });
            p.strip_leading_newlines =
                matches!(stage, recipe_core::ThinkingInitialStage::ReasoningStart);
        }
        p
    }

    /// Number of tool calls started so far.
    pub fn tool_call_count(&self) -> usize {
        self.tool_calls
    }

    /// The stop sequence that ended the stream, if one did.
    pub fn stopped_by(&self) -> Option<&str> {
        self.stopped_by.as_deref()
    }

    /// Whether parsing is over (stop sequence): later input is an error for the caller.
    pub fn is_stopped(&self) -> bool {
        self.stopped_by.is_some()
    }

    /// Whether the end-of-sequence token was seen (later output is ignored).
    pub fn eos_seen(&self) -> bool {
        self.eos_seen
    }

    /// Whether the parser currently reads reasoning.
    pub fn in_reasoning(&self) -> bool {
        matches!(self.mode, Mode::Text(TextMode::Reasoning))
    }

    /// Mark the start of a new push: some of the reference's delta boundaries depend on
    /// whether a tag began in an earlier push.
    pub fn begin_push(&mut self) {
        if let Mode::Dsml(d) = &mut self.mode {
            d.begin_push();
        }
    }

    pub fn push(&mut self, piece: Piece, out: &mut Vec<ParseEvent>) {
        match piece {
            Piece::Text {
                text,
                logprobs,
                textual,
            } => self.push_text(text, logprobs, textual, out),
            Piece::Special {
                kind,
                spelling,
                logprob,
            } => self.push_special(kind, spelling, logprob, out),
        }
    }

    fn push_text(
        &mut self,
        text: String,
        logprobs: Vec<TokenLogprob>,
        textual: bool,
        out: &mut Vec<ParseEvent>,
    ) {
        match &mut self.mode {
            Mode::Text(mode) => {
                let mode = *mode;
                if text.is_empty() && logprobs.is_empty() {
                    // An empty chunk is a unit of its own: an empty delta now, or in its place
                    // among the held units when they are released.
                    if self.held.is_empty() {
                        self.emit_text(mode, text, logprobs, out);
                    } else {
                        self.held.push(Unit { text, logprobs });
                    }
                    return;
                }
                if self.held.is_empty() && !self.may_touch_marker(mode, textual, &text) {
                    // Common case: nothing held and nothing in this unit that could begin a
                    // marker, so it is released as is.
                    self.emit_text(mode, text, logprobs, out);
                    return;
                }
                self.held_textual = textual;
                self.held.push(Unit { text, logprobs });
                self.scan(out);
            }
            Mode::Dsml(_) => self.feed_dsml(&text, textual, out),
            Mode::Dropped | Mode::Ended => {}
        }
    }

    fn push_special(
        &mut self,
        kind: Option<SpecialToken>,
        spelling: String,
        logprob: Option<TokenLogprob>,
        out: &mut Vec<ParseEvent>,
    ) {
        if kind == Some(SpecialToken::Eos) {
            // The model ended its turn: release what is held, ignore anything after it.
            self.end_text(out);
            self.finish_dsml(out);
            self.eos_seen = true;
            self.mode = Mode::Ended;
            return;
        }
        match &mut self.mode {
            Mode::Dropped | Mode::Ended => {}
            Mode::Dsml(_) => self.feed_dsml(&spelling, false, out),
            Mode::Text(mode) => {
                let mode = *mode;
                if kind == Some(SpecialToken::Dsml)
                    && self.parse_tool_calls
                    && self.held_ends_with_lt()
                {
                    // `<` followed by the DSML token: a tool-call block may start here.
                    let joined = self.take_joined();
                    let lt = joined.text.len() - 1;
                    let (before_end, _) = trim_newlines_end(&joined.text[..lt]);
                    let after_partial = if before_end > 0 {
                        partial_suffix_start(&joined.text[..before_end], &self.dsml_open).is_some()
                    } else {
                        self.last_lt
                    };
                    // The first newline after an unfinished marker start stays text.
                    let before_end = if after_partial && before_end < lt {
                        before_end + 1
                    } else {
                        before_end
                    };
                    self.emit_units(mode, &joined, 0, before_end, out);
                    let raw = format!("<{spelling}");
                    let trailing = joined.text[before_end..lt].to_owned();
                    self.mode = Mode::Dsml(Box::new(Dsml::new(&self.dsml, false, mode, trailing)));
                    self.feed_dsml(&raw, false, out);
                    return;
                }
                if kind == Some(SpecialToken::ThinkingEnd)
                    && mode == TextMode::Reasoning
                    && !self.held.is_empty()
                {
                    // The newlines that end reasoning are not part of it.
                    let joined = self.take_joined();
                    let (end, _) = trim_newlines_end(&joined.text);
                    self.emit_units(mode, &joined, 0, end, out);
                }
                self.end_text(out);
                let mode = match &self.mode {
                    Mode::Text(m) => *m,
                    _ => return,
                };
                if kind == Some(SpecialToken::ThinkingEnd) {
                    if mode == TextMode::Reasoning {
                        out.push(ParseEvent::ReasoningEnd);
                        self.mode = Mode::Text(TextMode::Content);
                        self.strip_leading_newlines = true;
                        self.strip_keeps_empty = false;
                    }
                    // In content the token is dropped, as the reference does.
                    return;
                }
                // Any other control token is text (its spelling), released as its own unit.
                let logprobs = logprob.into_iter().collect();
                self.held_textual = false;
                self.held.push(Unit {
                    text: spelling,
                    logprobs,
                });
                self.scan(out);
            }
        }
    }

    /// Whether `text` contains a character that can begin (or precede) a marker in `mode`.
    fn may_touch_marker(&self, mode: TextMode, textual: bool, text: &str) -> bool {
        let b = text.as_bytes();
        if self.parse_tool_calls && b.iter().any(|&c| c == b'<' || c == b'\n') {
            return true;
        }
        // Newlines at the end of reasoning are dropped when `</think>` follows them.
        if mode == TextMode::Reasoning && b.contains(&b'\n') {
            return true;
        }
        let first = |m: &str| m.as_bytes().first().copied();
        if textual {
            if let Some(f) = first(&self.think_end) {
                if b.contains(&f) {
                    return true;
                }
            }
        }
        if mode == TextMode::Content {
            for st in &self.stops {
                if let Some(f) = first(st) {
                    if b.contains(&f) {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// Release everything held in text mode as plain text (no marker follows).
    fn end_text(&mut self, out: &mut Vec<ParseEvent>) {
        if let Mode::Text(mode) = self.mode {
            if !self.held.is_empty() {
                let joined = self.take_joined();
                let len = joined.text.len();
                self.emit_units(mode, &joined, 0, len, out);
            }
        }
    }

    fn held_ends_with_lt(&self) -> bool {
        self.held
            .iter()
            .rev()
            .find(|u| !u.text.is_empty())
            .is_some_and(|u| u.text.ends_with('<'))
    }

    /// Close the input: release held text, settle an unfinished DSML block.
    pub fn finish(&mut self, out: &mut Vec<ParseEvent>) {
        self.end_text(out);
        self.finish_dsml(out);
    }

    fn finish_dsml(&mut self, out: &mut Vec<ParseEvent>) {
        if let Mode::Dsml(d) = &mut self.mode {
            if !d.committed {
                // Never became a tool-call block: it was text after all.
                let prev = d.prev;
                let raw = std::mem::take(&mut d.raw);
                let lead = std::mem::take(&mut d.lead);
                self.mode = Mode::Text(prev);
                self.emit_text(prev, format!("{lead}{raw}"), Vec::new(), out);
                return;
            }
            self.mode = Mode::Dropped;
        }
    }

    fn feed_dsml(&mut self, text: &str, textual: bool, out: &mut Vec<ParseEvent>) {
        let Mode::Dsml(d) = &mut self.mode else {
            return;
        };
        d.textual = textual;
        let status = d.feed(text, &mut self.tool_calls, out);
        match status {
            DsmlStatus::Continue => {}
            DsmlStatus::Closed => self.mode = Mode::Dropped,
            DsmlStatus::Failed => {
                // The `<｜DSML｜` was prose: give the text back, scanning again after the `<`.
                let prev = d.prev;
                let raw = std::mem::take(&mut d.raw);
                let lead = std::mem::take(&mut d.lead);
                self.mode = Mode::Text(prev);
                self.emit_text(prev, format!("{lead}<"), Vec::new(), out);
                let rest = raw.get(1..).unwrap_or("").to_owned();
                let textual = self.held_textual;
                self.push_text(rest, Vec::new(), textual, out);
            }
        }
    }

    fn take_joined(&mut self) -> Joined {
        let units = std::mem::take(&mut self.held);
        Joined::new(units)
    }

    /// Scan the held units for markers and release what cannot be part of one.
    fn scan(&mut self, out: &mut Vec<ParseEvent>) {
        let joined = self.take_joined();
        let textual = self.held_textual;
        let text = joined.text.as_str();
        let mut pos = 0usize;
        // Next occurrence of each marker at or after `pos` (usize::MAX: none).
        let mut next: Vec<Option<usize>> = vec![None; 2 + self.stops.len()];
        loop {
            let mode = match &self.mode {
                Mode::Text(m) => *m,
                Mode::Dsml(_) => {
                    let rest = text[pos..].to_owned();
                    self.feed_dsml(&rest, textual, out);
                    return;
                }
                _ => return,
            };
            // Earliest complete marker.
            let mut best: Option<(usize, usize, Marker)> = None;
            for (slot, marker) in self.markers(mode, textual) {
                let pat: &str = match marker {
                    Marker::ThinkEnd => &self.think_end,
                    Marker::Dsml => &self.dsml_open,
                    Marker::Stop(i) => &self.stops[i],
                };
                // Newlines that open the content are dropped before a longer stop sequence
                // can match inside them; a stop sequence that is one newline still matches the
                // first of them (as in the reference).
                let from = if matches!(marker, Marker::Stop(_))
                    && self.strip_leading_newlines
                    && pat != "\n"
                {
                    pos + (text.len() - pos - text[pos..].trim_start_matches('\n').len())
                } else {
                    pos
                };
                let found = match next[slot] {
                    Some(p) if p == usize::MAX || p >= from => p,
                    _ => {
                        let p = text[from..].find(pat).map_or(usize::MAX, |i| i + from);
                        next[slot] = Some(p);
                        p
                    }
                };
                // The marker that is complete first wins (the earliest end, as when reading
                // the text one character at a time); on a tie, the earlier in the list.
                if found != usize::MAX && best.is_none_or(|(_, e, _)| found + pat.len() < e) {
                    best = Some((found, found + pat.len(), marker));
                }
            }
            if let Some((start, end, marker)) = best {
                match marker {
                    Marker::ThinkEnd => {
                        // The newlines that end reasoning are not part of it.
                        let cut = if mode == TextMode::Reasoning {
                            let (at, n) = trim_newlines_end(&text[pos..start]);
                            pos + at + self.literal_newline(textual, &text[..pos + at], n)
                        } else {
                            start
                        };
                        self.emit_units(mode, &joined, pos, cut, out);
                        if mode == TextMode::Reasoning {
                            out.push(ParseEvent::ReasoningEnd);
                            self.mode = Mode::Text(TextMode::Content);
                            self.strip_leading_newlines = true;
                            self.strip_keeps_empty = false;
                        }
                        pos = end;
                    }
                    Marker::Stop(i) => {
                        self.emit_units(mode, &joined, pos, start, out);
                        let stop = self.stops[i].clone();
                        self.stopped_by = Some(stop.clone());
                        out.push(ParseEvent::StopSequence(stop));
                        self.mode = Mode::Ended;
                        return;
                    }
                    Marker::Dsml
                        if matches!(match_tags(&text[start..], &self.block_tags), Match::None) =>
                    {
                        // Prose that only mentions the marker: it stays in the held text, and
                        // the search goes on after its `<`. Deciding here, without entering the
                        // block parser, keeps a run of such mentions linear and flat.
                        let from = start + 1;
                        next[1] = Some(
                            text[from..]
                                .find(self.dsml_open.as_str())
                                .map_or(usize::MAX, |i| i + from),
                        );
                        continue;
                    }
                    Marker::Dsml => {
                        let (before_end, _) = trim_newlines_end(&text[pos..start]);
                        let before_end = pos + before_end;
                        let after_partial = if before_end > pos {
                            partial_suffix_start(&text[..before_end], &self.dsml_open).is_some()
                        } else {
                            self.last_lt
                        };
                        // The first newline after an unfinished marker start stays text.
                        let before_end = if after_partial && before_end < start {
                            before_end + 1
                        } else {
                            before_end
                        };
                        self.emit_units(mode, &joined, pos, before_end, out);
                        let lead = text[before_end..start].to_owned();
                        self.mode = Mode::Dsml(Box::new(Dsml::new(&self.dsml, false, mode, lead)));
                        pos = start;
                    }
                }
                continue;
            }
            // No complete marker: hold from the earliest possible marker start.
            let hold_from = self.candidate_start(mode, textual, text, pos);
            let cut = match hold_from {
                None => text.len(),
                Some(p) => joined.unit_start_of(p).max(pos),
            };
            self.emit_units(mode, &joined, pos, cut, out);
            if cut < text.len() {
                self.held = joined.units_from(cut);
            }
            return;
        }
    }

    fn markers(&self, mode: TextMode, textual: bool) -> Vec<(usize, Marker)> {
        let mut m = Vec::with_capacity(2 + self.stops.len());
        if textual && !self.think_end.is_empty() {
            m.push((0, Marker::ThinkEnd));
        }
        if textual && self.parse_tool_calls {
            m.push((1, Marker::Dsml));
        }
        if mode == TextMode::Content {
            for i in 0..self.stops.len() {
                m.push((2 + i, Marker::Stop(i)));
            }
        }
        m
    }

    /// The earliest position `p >= pos` from which `text[p..]` may still grow into a marker.
    fn candidate_start(
        &self,
        mode: TextMode,
        textual: bool,
        text: &str,
        pos: usize,
    ) -> Option<usize> {
        let tail = &text[pos..];
        let mut best: Option<usize> = None;
        let mut consider = |p: usize| {
            if best.is_none_or(|b| p < b) {
                best = Some(p);
            }
        };
        let mut check = |pat: &str| {
            if let Some(p) = partial_suffix_start(tail, pat) {
                consider(pos + p);
            }
        };
        if textual && !self.think_end.is_empty() {
            check(&self.think_end);
        }
        if mode == TextMode::Content {
            for s in &self.stops {
                check(s);
            }
        }
        if self.parse_tool_calls {
            // Newlines that may precede the block, then a proper prefix of `<｜DSML｜`.
            let dsml_partial = if textual {
                partial_suffix_start(tail, &self.dsml_open)
            } else if tail.ends_with('<') {
                Some(tail.len() - 1)
            } else {
                None
            };
            let end = dsml_partial.unwrap_or(tail.len());
            let (mut nl_start, mut n) = trim_newlines_end(&tail[..end]);
            if n > 0 && self.ends_with_dsml_partial(textual, &text[..pos + nl_start]) {
                // The newline that ends an unfinished `<｜DSML｜` is plain text, not a lead-in.
                nl_start += 1;
                n -= 1;
            }
            if dsml_partial.is_some() || n > 0 {
                consider(pos + nl_start);
            }
        }
        if mode == TextMode::Reasoning {
            // Newlines that may end the reasoning: at the end, or before a partial `</think>`.
            let think_partial = if textual {
                partial_suffix_start(tail, &self.think_end)
            } else {
                None
            };
            let end = think_partial.unwrap_or(tail.len());
            let (nl_start, n) = trim_newlines_end(&tail[..end]);
            let nl_start =
                pos + nl_start + self.literal_newline(textual, &text[..pos + nl_start], n);
            if nl_start < pos + end {
                consider(nl_start);
            }
        }
        best
    }

    /// Whether `before` ends with an unfinished `<｜DSML｜` (with token IDs: with `<`).
    fn ends_with_dsml_partial(&self, textual: bool, before: &str) -> bool {
        if before.is_empty() {
            return self.last_lt;
        }
        if textual {
            partial_suffix_start(before, &self.dsml_open).is_some()
        } else {
            before.ends_with('<')
        }
    }

    /// 1 when the first of `n` newlines that follow `before` ends an unfinished `</think>`
    /// spelling: that newline is reasoning text, not one of the newlines that end reasoning.
    fn literal_newline(&self, textual: bool, before: &str, n: usize) -> usize {
        let partial = textual
            && if before.is_empty() {
                self.last_think_partial
            } else {
                partial_suffix_start(before, &self.think_end).is_some()
            };
        usize::from(n > 0 && partial)
    }

    /// Emit `joined.text[from..to]` in `mode`, one delta per unit portion.
    fn emit_units(
        &mut self,
        mode: TextMode,
        joined: &Joined,
        from: usize,
        to: usize,
        out: &mut Vec<ParseEvent>,
    ) {
        if from >= to {
            return;
        }
        let mut start = 0usize;
        for (i, end) in joined.ends.iter().enumerate() {
            let unit_start = start;
            start = *end;
            let skip = if unit_start == *end {
                // An empty unit goes out where it stands, or last when everything goes.
                unit_start < from || (unit_start >= to && to < joined.text.len())
            } else {
                *end <= from || unit_start >= to
            };
            if skip {
                continue;
            }
            let a = unit_start.max(from);
            let b = (*end).min(to);
            let logprobs = if a == unit_start.max(joined.lp_from[i]) {
                joined.logprobs[i].clone()
            } else {
                Vec::new()
            };
            self.emit_text(mode, joined.text[a..b].to_owned(), logprobs, out);
        }
    }

    fn emit_text(
        &mut self,
        mode: TextMode,
        mut text: String,
        logprobs: Vec<TokenLogprob>,
        out: &mut Vec<ParseEvent>,
    ) {
        if text.is_empty() && !logprobs.is_empty() {
            return;
        }
        if text.is_empty() {
            // Before the first text an empty chunk waits for it (dropped if a newline was
            // dropped first, or after the end of reasoning).
            if self.strip_leading_newlines || !self.emitted_any {
                if self.strip_keeps_empty {
                    self.empty_pending += 1;
                }
                return;
            }
        } else {
            if self.strip_leading_newlines {
                let n = text.len() - text.trim_start_matches('\n').len();
                if n > 0 {
                    text.drain(..n);
                    self.strip_keeps_empty = false;
                    self.empty_pending = 0;
                }
                if text.is_empty() {
                    return;
                }
                self.strip_leading_newlines = false;
            }
            self.emitted_any = true;
            for _ in 0..std::mem::take(&mut self.empty_pending) {
                out.push(match mode {
                    TextMode::Reasoning => ParseEvent::Reasoning {
                        text: String::new(),
                        logprobs: Vec::new(),
                    },
                    TextMode::Content => ParseEvent::Content {
                        text: String::new(),
                        logprobs: Vec::new(),
                    },
                });
            }
        }
        if !text.is_empty() {
            self.last_lt = partial_suffix_start(&text, &self.dsml_open).is_some();
            self.last_think_partial = partial_suffix_start(&text, &self.think_end).is_some();
        }
        out.push(match mode {
            TextMode::Reasoning => ParseEvent::Reasoning { text, logprobs },
            TextMode::Content => ParseEvent::Content { text, logprobs },
        });
    }
}

/// Held units joined into one string, with unit boundaries.
struct Joined {
    text: String,
    ends: Vec<usize>,
    logprobs: Vec<Vec<TokenLogprob>>,
    /// Offset from which each unit's logprobs are still unreported (its start).
    lp_from: Vec<usize>,
}

impl Joined {
    fn new(units: Vec<Unit>) -> Self {
        let mut text = String::new();
        let mut ends = Vec::with_capacity(units.len());
        let mut logprobs = Vec::with_capacity(units.len());
        let mut lp_from = Vec::with_capacity(units.len());
        if units.len() == 1 {
            let u = units.into_iter().next().unwrap_or(Unit {
                text: String::new(),
                logprobs: Vec::new(),
            });
            ends.push(u.text.len());
            lp_from.push(0);
            logprobs.push(u.logprobs);
            return Joined {
                text: u.text,
                ends,
                logprobs,
                lp_from,
            };
        }
        for u in units {
            lp_from.push(text.len());
            text.push_str(&u.text);
            ends.push(text.len());
            logprobs.push(u.logprobs);
        }
        Joined {
            text,
            ends,
            logprobs,
            lp_from,
        }
    }

    /// Start offset of the unit that contains byte `p`.
    fn unit_start_of(&self, p: usize) -> usize {
        let mut start = 0;
        for end in &self.ends {
            if p < *end {
                return start;
            }
            start = *end;
        }
        start
    }

    /// The units from offset `cut` (a unit start, or inside the first remaining unit) on.
    fn units_from(self, cut: usize) -> Vec<Unit> {
        let mut out = Vec::new();
        let mut start = 0usize;
        for (i, (end, lps)) in self.ends.iter().zip(self.logprobs).enumerate() {
            let unit_start = start;
            start = *end;
            if *end < cut || (*end == cut && unit_start < cut) {
                continue;
            }
            let a = unit_start.max(cut);
            let lps = if a <= self.lp_from[i] {
                lps
            } else {
                Vec::new()
            };
            out.push(Unit {
                text: self.text[a..*end].to_owned(),
                logprobs: lps,
            });
        }
        out
    }
}

/// Byte offset where the trailing run of `\n` of `s` begins, and the run's length.
fn trim_newlines_end(s: &str) -> (usize, usize) {
    let trimmed = s.trim_end_matches('\n').len();
    (trimmed, s.len() - trimmed)
}

/// The earliest start of a non-empty suffix of `text` that is a proper prefix of `pat`.
fn partial_suffix_start(text: &str, pat: &str) -> Option<usize> {
    if pat.is_empty() {
        return None;
    }
    let max = (pat.len() - 1).min(text.len());
    // Longest candidate first gives the earliest start.
    for len in (1..=max).rev() {
        let start = text.len() - len;
        if !text.is_char_boundary(start) {
            continue;
        }
        if pat.as_bytes().starts_with(&text.as_bytes()[start..]) {
            return Some(start);
        }
    }
    None
}

// ------------------------------------------------------------------------------------------
// DSML tool-call blocks
// ------------------------------------------------------------------------------------------

enum DsmlStatus {
    Continue,
    Closed,
    Failed,
}

#[derive(Clone, Debug)]
enum ValueMode {
    /// `string="true"` before its opening quote is written: when the whole `string="true`
    /// attribute came in the same input unit as the tag's `>`, the quote waits while all that
    /// follows the tag could still be the closing tag (as in the reference).
    StrUnopened,
    /// `string="true"`: JSON-string-escaped between quotes.
    Str,
    /// `string="false"`: copied verbatim.
    Raw,
    /// No or an unknown `string` attribute: collected, then written as JSON if it parses as
    /// JSON, otherwise as a JSON string.
    Buffered(String),
}

#[derive(Clone, Debug)]
enum DState {
    /// Between tags (top level or inside the calls block).
    Between,
    InvokeName(String),
    InvokeTagEnd,
    InvokeBody,
    KeyStart,
    Key,
    AfterKey,
    Attrs(String),
    Value(ValueMode),
    /// Skip to the `>` that ends a closing tag, then go to the given state.
    SkipToGt(Box<DState>),
}

struct Dsml {
    buf: String,
    /// Consumed prefix of `buf`.
    at: usize,
    /// Whether the latest input came from a text chunk (control tokens spelled out) rather
    /// than from token IDs (control tokens arrive as their own pieces).
    textual: bool,
    /// Where each input unit fed since the buffer was last emptied begins in `buf`: value
    /// text is reported one unit portion at a time, like text outside the block.
    unit_starts: std::collections::VecDeque<usize>,
    state: DState,
    committed: bool,
    prev: TextMode,
    /// Everything fed while not committed (to give back as text).
    raw: String,
    /// Newlines that preceded the block start (dropped when the block commits).
    lead: String,
    index: usize,
    params: usize,
    open_tags: Vec<String>,
    invoke_tags: Vec<String>,
    close_calls_tags: Vec<String>,
    param_tags: Vec<String>,
    close_prefix: String,
    /// Whether the parameter tag being read showed `string="t` before the current push: the
    /// reference then writes the value's opening quote as soon as the tag ends.
    string_seen_before: bool,
    /// Where the current push's text begins in `buf` (0 when the block began in this push).
    push_start: usize,
}

fn escape_json(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    recipe_core::encoding::json::escape_str_into(&mut out, s);
    out
}

fn emit_arg(out: &mut Vec<ParseEvent>, index: usize, kind: ArgKind, text: &str) {
    if text.is_empty() {
        return;
    }
    if let Some(ParseEvent::ToolCallArgs {
        index: i,
        kind: k,
        text: t,
    }) = out.last_mut()
    {
        if *i == index && *k == kind && kind == ArgKind::Key {
            t.push_str(text);
            return;
        }
    }
    out.push(ParseEvent::ToolCallArgs {
        index,
        kind,
        text: text.to_owned(),
    });
}

enum Match {
    /// A whole tag matched; its length in bytes.
    Full(usize),
    Partial,
    None,
}

fn match_tags(s: &str, tags: &[String]) -> Match {
    let mut partial = false;
    for t in tags {
        if s.starts_with(t.as_str()) {
            return Match::Full(t.len());
        }
        if t.starts_with(s) {
            partial = true;
        }
    }
    if partial {
        Match::Partial
    } else {
        Match::None
    }
}

/// The tags that may open a tool-call block: a calls tag or an invoke tag, in both dialects.
fn block_open_tags(d: &str) -> Vec<String> {
    let mut tags = open_calls_tags(d);
    tags.extend(invoke_open_tags(d));
    tags
}

fn open_calls_tags(d: &str) -> Vec<String> {
    ["calls>", "tool_calls>"]
        .iter()
        .flat_map(|a| [format!("<{d} {a}"), format!("<{d}{a}")])
        .collect()
}

fn invoke_open_tags(d: &str) -> Vec<String> {
    vec![
        format!("<{d} invoke name=\""),
        format!("<{d}invoke name=\""),
    ]
}

impl Dsml {
    fn new(d: &str, committed: bool, prev: TextMode, lead: String) -> Self {
        let both = |a: &str| vec![format!("<{d} {a}"), format!("<{d}{a}")];
        let open_tags = open_calls_tags(d);
        let invoke_tags = invoke_open_tags(d);
        let mut close_calls_tags = vec![format!("</{d} calls>"), format!("</{d}calls>")];
        close_calls_tags.extend([format!("</{d} tool_calls>"), format!("</{d}tool_calls>")]);
        let param_tags = both("parameter name=");
        Dsml {
            buf: String::new(),
            at: 0,
            textual: true,
            unit_starts: std::collections::VecDeque::new(),
            state: DState::Between,
            committed,
            prev,
            raw: String::new(),
            lead,
            index: 0,
            params: 0,
            open_tags,
            invoke_tags,
            close_calls_tags,
            param_tags,
            close_prefix: format!("</{d}"),
            string_seen_before: false,
            push_start: 0,
        }
    }

    fn commit(&mut self, out: &mut Vec<ParseEvent>) {
        if !self.committed {
            self.committed = true;
            self.raw = String::new();
            self.lead = String::new();
            if self.prev == TextMode::Reasoning {
                out.push(ParseEvent::ReasoningEnd);
            }
        }
    }

    fn feed(
        &mut self,
        text: &str,
        tool_calls: &mut usize,
        out: &mut Vec<ParseEvent>,
    ) -> DsmlStatus {
        if !self.committed {
            self.raw.push_str(text);
        }
        // Drop the consumed prefix now and then so the buffer stays small.
        if self.at > 0 && self.at * 2 >= self.buf.len() {
            self.buf.drain(..self.at);
            let at = self.at;
            self.unit_starts.retain(|s| *s > at);
            self.unit_starts.iter_mut().for_each(|s| *s -= at);
            self.push_start = self.push_start.saturating_sub(at);
            self.at = 0;
        }
        self.unit_starts.push_back(self.buf.len());
        self.buf.push_str(text);
        let status = self.run(tool_calls, out);
        if self.at >= self.buf.len() {
            self.buf.clear();
            self.unit_starts.clear();
            self.at = 0;
            self.push_start = 0;
        }
        status
    }

    /// A new push begins: what is buffered from now on arrived in it.
    fn begin_push(&mut self) {
        self.string_seen_before =
            matches!(&self.state, DState::Attrs(a) if a.contains("string=\"t"));
        self.push_start = self.buf.len();
    }

    /// Whether a closing tag whose `<` is at `lt` in `buf`, followed by `after`, must wait for
    /// its `>` when a name follows the marker. As in the reference, a tag begun in an earlier
    /// push whose marker is completed by the current one counts at once; a tag whose marker
    /// came whole in one push waits.
    fn close_pending(&self, lt: usize, after: &str) -> bool {
        let completed_now = lt < self.push_start && lt + self.close_prefix.len() > self.push_start;
        !completed_now && tag_tail_pending(after)
    }

    fn rest(&self) -> &str {
        &self.buf[self.at..]
    }

    /// Start (in `buf`) of the input unit that holds byte `p`, but not before `at`.
    fn unit_start_of(&self, p: usize) -> usize {
        let i = self.unit_starts.partition_point(|s| *s <= p);
        let s = if i == 0 { 0 } else { self.unit_starts[i - 1] };
        s.max(self.at)
    }

    /// Report `buf[from..to]` as parameter value text, one delta per input-unit portion.
    fn emit_value(&self, mode: &mut ValueMode, from: usize, to: usize, out: &mut Vec<ParseEvent>) {
        if from >= to {
            return;
        }
        if let ValueMode::Buffered(b) = mode {
            b.push_str(&self.buf[from..to]);
            return;
        }
        let first = self.unit_starts.partition_point(|s| *s <= from);
        let mut a = from;
        for &s in self
            .unit_starts
            .iter()
            .skip(first)
            .take_while(|s| **s < to)
            .chain(std::iter::once(&to))
        {
            let piece = &self.buf[a..s];
            if !piece.is_empty() {
                let text = if matches!(mode, ValueMode::Raw) {
                    piece.to_owned()
                } else {
                    escape_json(piece)
                };
                out.push(ParseEvent::ToolCallArgs {
                    index: self.index,
                    kind: ArgKind::Value,
                    text,
                });
            }
            a = s;
        }
    }

    fn skip_ws(&mut self) {
        let r = self.rest();
        let n = r.len() - r.trim_start().len();
        self.at += n;
    }

    /// Skip garbage up to the next `<` (at least one character).
    fn skip_garbage(&mut self) {
        let r = self.rest();
        let first = r.chars().next().map_or(0, char::len_utf8);
        let n = r[first..].find('<').map_or(r.len(), |i| i + first);
        self.at += n;
    }

    fn run(&mut self, tool_calls: &mut usize, out: &mut Vec<ParseEvent>) -> DsmlStatus {
        loop {
            let state = std::mem::replace(&mut self.state, DState::Between);
            match state {
                DState::Between => {
                    if self.committed {
                        self.skip_ws();
                    }
                    if self.rest().is_empty() {
                        self.state = DState::Between;
                        return DsmlStatus::Continue;
                    }
                    let r = self.rest();
                    if let Match::Full(n) = match_tags(r, &self.open_tags) {
                        self.at += n;
                        self.commit(out);
                        continue;
                    }
                    if let Match::Full(n) = match_tags(r, &self.invoke_tags) {
                        self.at += n;
                        self.commit(out);
                        self.state = DState::InvokeName(String::new());
                        continue;
                    }
                    if self.committed {
                        if let Match::Full(n) = match_tags(r, &self.close_calls_tags) {
                            self.at += n;
                            return DsmlStatus::Closed;
                        }
                    }
                    let partial = [&self.open_tags, &self.invoke_tags, &self.close_calls_tags]
                        .iter()
                        .any(|tags| matches!(match_tags(r, tags), Match::Partial));
                    if partial {
                        self.state = DState::Between;
                        return DsmlStatus::Continue;
                    }
                    if !self.committed {
                        return DsmlStatus::Failed;
                    }
                    self.skip_garbage();
                    self.state = DState::Between;
                }
                DState::InvokeName(mut name) => {
                    let r = self.rest();
                    match r.find('"') {
                        None => {
                            name.push_str(r);
                            self.at = self.buf.len();
                            self.state = DState::InvokeName(name);
                            return DsmlStatus::Continue;
                        }
                        Some(i) => {
                            name.push_str(&r[..i]);
                            self.at += i + 1;
                            self.index = *tool_calls;
                            *tool_calls += 1;
                            self.params = 0;
                            out.push(ParseEvent::ToolCallStart {
                                index: self.index,
                                name,
                            });
                            self.state = DState::InvokeTagEnd;
                        }
                    }
                }
                DState::InvokeTagEnd => match self.rest().find('>') {
                    None => {
                        self.at = self.buf.len();
                        self.state = DState::InvokeTagEnd;
                        return DsmlStatus::Continue;
                    }
                    Some(i) => {
                        self.at += i + 1;
                        self.state = DState::InvokeBody;
                    }
                },
                DState::InvokeBody => {
                    self.skip_ws();
                    let r = self.rest();
                    if r.is_empty() {
                        self.state = DState::InvokeBody;
                        return DsmlStatus::Continue;
                    }
                    if let Match::Full(n) = match_tags(r, &self.param_tags) {
                        self.at += n;
                        let (kind, text) = if self.params == 0 {
                            (ArgKind::Open, "{")
                        } else {
                            (ArgKind::Separator, ", ")
                        };
                        emit_arg(out, self.index, kind, text);
                        self.state = DState::KeyStart;
                        continue;
                    }
                    if r.starts_with(self.close_prefix.as_str()) {
                        if self.close_pending(self.at, &r[self.close_prefix.len()..]) {
                            self.state = DState::InvokeBody;
                            return DsmlStatus::Continue;
                        }
                        self.at += self.close_prefix.len();
                        if self.params == 0 {
                            emit_arg(out, self.index, ArgKind::Empty, "{}");
                        } else {
                            emit_arg(out, self.index, ArgKind::Close, "}");
                        }
                        self.state = DState::SkipToGt(Box::new(DState::Between));
                        continue;
                    }
                    if matches!(match_tags(r, &self.param_tags), Match::Partial)
                        || self.close_prefix.starts_with(r)
                    {
                        self.state = DState::InvokeBody;
                        return DsmlStatus::Continue;
                    }
                    self.skip_garbage();
                    self.state = DState::InvokeBody;
                }
                DState::KeyStart => {
                    let r = self.rest();
                    match r.chars().next() {
                        None => {
                            self.state = DState::KeyStart;
                            return DsmlStatus::Continue;
                        }
                        Some('"') => {
                            self.at += 1;
                            emit_arg(out, self.index, ArgKind::Key, "\"");
                            self.state = DState::Key;
                        }
                        Some(_) => {
                            // An unquoted name: read it up to whitespace or `>`.
                            emit_arg(out, self.index, ArgKind::Key, "\"");
                            self.state = DState::Key;
                        }
                    }
                }
                DState::Key => {
                    let r = self.rest();
                    match r.find('"') {
                        None => {
                            let s = escape_json(r);
                            emit_arg(out, self.index, ArgKind::Key, &s);
                            self.at = self.buf.len();
                            self.state = DState::Key;
                            return DsmlStatus::Continue;
                        }
                        Some(i) => {
                            let mut s = escape_json(&r[..i]);
                            s.push('"');
                            emit_arg(out, self.index, ArgKind::Key, &s);
                            self.at += i + 1;
                            self.state = DState::AfterKey;
                        }
                    }
                }
                DState::AfterKey => {
                    if self.rest().is_empty() {
                        self.state = DState::AfterKey;
                        return DsmlStatus::Continue;
                    }
                    emit_arg(out, self.index, ArgKind::Colon, ": ");
                    self.state = DState::Attrs(String::new());
                }
                DState::Attrs(mut attrs) => {
                    let r = self.rest();
                    match r.find('>') {
                        None => {
                            attrs.push_str(r);
                            self.at = self.buf.len();
                            self.state = DState::Attrs(attrs);
                            return DsmlStatus::Continue;
                        }
                        Some(i) => {
                            attrs.push_str(&r[..i]);
                            self.at += i + 1;
                            self.state = DState::Value(string_attr(&attrs));
                        }
                    }
                }
                DState::Value(mut mode) => {
                    if let ValueMode::StrUnopened = mode {
                        let r = self.rest();
                        // With token IDs the marker in a closing tag is a control token of its
                        // own, so only `<` can still grow into one here.
                        let prefix = if self.textual {
                            self.close_prefix.as_str()
                        } else {
                            "</"
                        };
                        if !self.string_seen_before
                            && !r.is_empty()
                            && r.len() < prefix.len()
                            && prefix.starts_with(r)
                        {
                            // Only the start of a closing tag follows: wait before opening.
                            self.state = DState::Value(mode);
                            return DsmlStatus::Continue;
                        }
                        emit_arg(out, self.index, ArgKind::ValueOpen, "\"");
                        mode = ValueMode::Str;
                    }
                    let r = self.rest();
                    let (end, closed) = match r.find(self.close_prefix.as_str()) {
                        Some(i) => (
                            self.at + i,
                            !self.close_pending(self.at + i, &r[i + self.close_prefix.len()..]),
                        ),
                        // Like text, the input unit whose tail may start the closing tag is held
                        // back whole until later input decides.
                        None => match partial_suffix_start(r, &self.close_prefix) {
                            Some(p) => (self.unit_start_of(self.at + p), false),
                            None => (self.buf.len(), false),
                        },
                    };
                    self.emit_value(&mut mode, self.at, end, out);
                    self.at = end;
                    if !closed {
                        self.state = DState::Value(mode);
                        return DsmlStatus::Continue;
                    }
                    self.at += self.close_prefix.len();
                    match mode {
                        ValueMode::Str => emit_arg(out, self.index, ArgKind::ValueClose, "\""),
                        ValueMode::StrUnopened | ValueMode::Raw => {}
                        ValueMode::Buffered(b) => {
                            if serde_json::from_str::<serde_json::Value>(&b).is_ok() {
                                emit_arg(out, self.index, ArgKind::Value, &b);
                            } else {
                                emit_arg(out, self.index, ArgKind::ValueOpen, "\"");
                                emit_arg(out, self.index, ArgKind::Value, &escape_json(&b));
                                emit_arg(out, self.index, ArgKind::ValueClose, "\"");
                            }
                        }
                    }
                    self.params += 1;
                    self.state = DState::SkipToGt(Box::new(DState::InvokeBody));
                }
                DState::SkipToGt(next) => match self.rest().find('>') {
                    None => {
                        self.at = self.buf.len();
                        self.state = DState::SkipToGt(next);
                        return DsmlStatus::Continue;
                    }
                    Some(i) => {
                        self.at += i + 1;
                        self.state = *next;
                    }
                },
            }
        }
    }
}

/// Whether a closing tag must wait before it is reported: as the reference does, a closing tag
/// counts as soon as `</｜DSML｜` is seen when nothing or a space follows, but a V4-style name
/// written right after it (`</｜DSML｜parameter`) is only settled by its `>`.
fn tag_tail_pending(after: &str) -> bool {
    !after.is_empty() && !after.starts_with(' ') && !after.contains('>')
}

/// The value mode named by a parameter tag's attributes (` string="true"` and so on).
fn string_attr(attrs: &str) -> ValueMode {
    let Some(i) = attrs.find("string=\"") else {
        return ValueMode::Buffered(String::new());
    };
    let rest = &attrs[i + "string=\"".len()..];
    let value = rest.split('"').next().unwrap_or("");
    match value {
        "true" => ValueMode::StrUnopened,
        "false" => ValueMode::Raw,
        _ => ValueMode::Buffered(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(opts: &ParsingOptions, pieces: &[&str]) -> Vec<Vec<ParseEvent>> {
        let mut p = Parser::new(opts);
        let mut all = Vec::new();
        for s in pieces {
            let mut out = Vec::new();
            p.push(
                Piece::Text {
                    text: (*s).to_owned(),
                    logprobs: vec![],
                    textual: true,
                },
                &mut out,
            );
            all.push(out);
        }
        let mut out = Vec::new();
        p.finish(&mut out);
        all.push(out);
        all
    }

    fn content(s: &str) -> ParseEvent {
        ParseEvent::Content {
            text: s.to_owned(),
            logprobs: vec![],
        }
    }

    #[test]
    fn holds_whole_units_that_may_start_a_marker() {
        let o = ParsingOptions::default();
        let r = run(&o, &["ab\n", "cd\n\n", "ef <", "g"]);
        assert_eq!(r[0], vec![]);
        assert_eq!(r[1], vec![content("ab\n")]);
        assert_eq!(r[2], vec![content("cd\n\n")]);
        assert_eq!(r[3], vec![content("ef <"), content("g")]);
    }

    #[test]
    fn prose_dsml_prefix_is_text() {
        let o = ParsingOptions::default();
        let r = run(&o, &["I like <｜DSML｜and more"]);
        let text: String = r
            .iter()
            .flatten()
            .map(|e| match e {
                ParseEvent::Content { text, .. } => text.clone(),
                _ => String::new(),
            })
            .collect();
        assert_eq!(text, "I like <｜DSML｜and more");
    }
}
