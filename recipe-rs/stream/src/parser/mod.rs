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
//!
//! Submodules: [`held`] holds the text units kept back and the suffix tests, [`dsml`] the
//! tool-call block state machine.

mod dsml;
mod held;

use recipe_core::{ParsingOptions, SpecialToken};

use crate::input::TokenLogprob;
use crate::json_output::{JsonFilter, OpeningSearch, ValueStep};
use dsml::{block_open_tags, match_tags, Dsml, DsmlStatus, Match};
use held::{partial_suffix_start, trim_newlines_end, Joined, Unit};

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
    /// JSON output mode: content goes through this filter, which also matches the stop
    /// sequences (on the JSON value only) and turns tool-call parsing off inside the value.
    json: Option<JsonFilter>,
    tool_calls: usize,
    stopped_by: Option<String>,
    eos_seen: bool,
    /// Whether the text released last ended with an unfinished `<｜DSML｜` (the first newline
    /// after it stays text when a tool-call block follows, as in the reference).
    last_lt: bool,
    /// Whether the text released last ended with an unfinished `</think>` spelling (the newline
    /// after it is reasoning text, not one of the newlines that end reasoning).
    last_think_partial: bool,
    /// The end of the text released so far (as long as the longest marker), so the two flags
    /// above see a marker start spread over several released units.
    released_tail: String,
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
            stops: Vec::new(),
            json: None,
            parse_tool_calls: options.parse_tool_calls,
            tool_calls: 0,
            stopped_by: None,
            eos_seen: false,
            last_lt: false,
            last_think_partial: false,
            released_tail: String::new(),
        };
        let stops: Vec<String> = options
            .stop_sequences
            .iter()
            .filter(|s| !s.is_empty())
            .cloned()
            .collect();
        if options.parse_json_output {
            p.json = Some(JsonFilter::new(stops));
        } else {
            p.stops = stops;
        }
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

    /// Whether DSML tool-call blocks are read here: tool-call parsing is on, and no JSON value
    /// is open in JSON output mode (as in the reference, a block inside it is text).
    fn tools_on(&self) -> bool {
        self.parse_tool_calls && !self.json.as_ref().is_some_and(JsonFilter::in_value)
    }

    /// Whether a tool-call block may begin right after `before`, held text not released yet:
    /// in JSON output mode, not when that text opens the JSON value (or one is open).
    fn tools_at(&self, mode: TextMode, before: &str) -> bool {
        let Some(j) = &self.json else {
            return self.parse_tool_calls;
        };
        if !self.parse_tool_calls || mode != TextMode::Content {
            return self.tools_on();
        }
        j.opens_at(before).is_none()
    }

    /// JSON output mode: whether content goes straight to the filter as the value's text.
    fn in_json_value(&self, mode: TextMode) -> bool {
        mode == TextMode::Content
            && self.held.is_empty()
            && self.json.as_ref().is_some_and(JsonFilter::in_value)
    }

    /// Hand one input unit of the open JSON value to the filter: no marker is read inside the
    /// value (as in the reference, `<｜DSML｜`, `</think>` and their starts are plain text there).
    /// Where the value closes inside the unit, the rest is read as ordinary content.
    fn feed_value(
        &mut self,
        text: String,
        logprobs: Vec<TokenLogprob>,
        textual: bool,
        out: &mut Vec<ParseEvent>,
    ) {
        let Some(j) = &mut self.json else {
            return;
        };
        match j.value_unit(&text, logprobs, out) {
            ValueStep::Open => {}
            ValueStep::Stopped(stop) => self.stop_with(stop, out),
            ValueStep::Closed(at, logprobs) => {
                self.last_lt = false;
                self.last_think_partial = false;
                self.released_tail.clear();
                let rest = text[at..].to_owned();
                if !rest.is_empty() {
                    self.push_text(rest, logprobs, textual, out);
                }
            }
        }
    }

    /// A stop sequence matched: the stream is over.
    fn stop_with(&mut self, stop: String, out: &mut Vec<ParseEvent>) {
        self.stopped_by = Some(stop.clone());
        out.push(ParseEvent::StopSequence(stop));
        self.mode = Mode::Ended;
    }

    fn ended(&self) -> bool {
        matches!(self.mode, Mode::Ended)
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
        if let Some(j) = &mut self.json {
            j.begin_push();
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
                if self.in_json_value(mode) {
                    self.feed_value(text, logprobs, textual, out);
                    return;
                }
                if self.held.is_empty() && !self.may_touch_marker(mode, textual, &text) {
                    // Common case: nothing held and nothing in this unit that could begin a
                    // marker, so it is released as is.
                    self.held_textual = textual;
                    self.emit_text(mode, text, logprobs, out);
                    return;
                }
                self.held_textual = textual;
                self.held.push(Unit { text, logprobs });
                self.scan(out);
            }
            Mode::Dsml(_) => self.feed_dsml(&text, textual, None, out),
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
            self.finish(out);
            self.eos_seen = true;
            self.mode = Mode::Ended;
            return;
        }
        match &mut self.mode {
            Mode::Dropped | Mode::Ended => {}
            Mode::Dsml(d) => {
                let marker = (kind == Some(SpecialToken::Dsml)).then_some(0);
                d.special = true;
                self.feed_dsml(&spelling, false, marker, out);
                if let Mode::Dsml(d) = &mut self.mode {
                    d.special = false;
                }
            }
            Mode::Text(mode) => {
                let mode = *mode;
                if self.in_json_value(mode) {
                    // Inside the JSON value any control token is text, a unit of its own.
                    self.feed_value(spelling, logprob.into_iter().collect(), false, out);
                    return;
                }
                if kind == Some(SpecialToken::Dsml)
                    && self.parse_tool_calls
                    && self.held_ends_with_lt()
                {
                    // `<` followed by the DSML token: a tool-call block may start here.
                    let joined = self.take_joined();
                    let lt = joined.text.len() - 1;
                    let (before_end, _) = trim_newlines_end(&joined.text[..lt]);
                    // Token input: only a `<` could have begun a marker there.
                    let after_partial =
                        self.ends_with_dsml_partial(false, &joined.text[..before_end]);
                    // The first newline after an unfinished marker start stays text.
                    let before_end = if after_partial && before_end < lt {
                        before_end + 1
                    } else {
                        before_end
                    };
                    if !self.tools_at(mode, &joined.text[..before_end]) {
                        // The text before it opens a JSON value: the token is text there.
                        let len = joined.text.len();
                        self.emit_units(mode, &joined, 0, len, out);
                        self.emit_text(mode, spelling, logprob.into_iter().collect(), out);
                        return;
                    }
                    self.emit_units(mode, &joined, 0, before_end, out);
                    if self.ended() {
                        return;
                    }
                    let raw = format!("<{spelling}");
                    let trailing = joined.text[before_end..lt].to_owned();
                    self.mode = Mode::Dsml(Box::new(Dsml::new(&self.dsml, false, mode, trailing)));
                    self.feed_dsml(&raw, false, Some(1), out);
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
                    self.think_end_seen(mode, out);
                    return;
                }
                // Any other control token is text (its spelling), released at once as its own
                // unit: as in the reference, no stop sequence matches inside it or across it.
                let logprobs = logprob.into_iter().collect();
                self.emit_text(mode, spelling, logprobs, out);
            }
        }
    }

    /// A `</think>` (token or text) was read in `mode`, and what came before it was released.
    /// In reasoning it ends the reasoning, and the newlines that open the content are dropped.
    /// In content it is dropped, as the reference does, and it ends the dropping of leading
    /// newlines: the newlines after it are content.
    fn think_end_seen(&mut self, mode: TextMode, out: &mut Vec<ParseEvent>) {
        // A marker start before the `</think>` cannot join text after it.
        self.released_tail.clear();
        if mode == TextMode::Reasoning {
            out.push(ParseEvent::ReasoningEnd);
            self.mode = Mode::Text(TextMode::Content);
            self.strip_leading_newlines = true;
            self.strip_keeps_empty = false;
        } else {
            self.strip_leading_newlines = false;
        }
    }

    /// Whether `text` contains a character that can begin (or precede) a marker in `mode`.
    fn may_touch_marker(&self, mode: TextMode, textual: bool, text: &str) -> bool {
        let b = text.as_bytes();
        // (In JSON output mode too while the value is open: the text may close it.)
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
        if !self.ended() {
            if let Some(j) = &mut self.json {
                j.finish(out);
            }
        }
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
            d.finish(out);
            self.mode = Mode::Dropped;
        }
    }

    /// Feed the block parser; `marker` is where a DSML control token given by ID begins in
    /// `text`.
    fn feed_dsml(
        &mut self,
        text: &str,
        textual: bool,
        marker: Option<usize>,
        out: &mut Vec<ParseEvent>,
    ) {
        let Mode::Dsml(d) = &mut self.mode else {
            return;
        };
        d.textual = textual;
        let status = d.feed(text, marker, &mut self.tool_calls, out);
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
        // JSON output mode: where the value opens (searched once over the held text).
        let mut opening = OpeningSearch::default();
        loop {
            let mode = match &self.mode {
                Mode::Text(m) => *m,
                Mode::Dsml(_) => {
                    let rest = text[pos..].to_owned();
                    self.feed_dsml(&rest, textual, None, out);
                    return;
                }
                _ => return,
            };
            // JSON output mode: where the value opens in the held text. No marker is read from
            // there on; the value's units go to the filter as they are.
            let value_at = match &self.json {
                Some(j) if mode == TextMode::Content => {
                    if j.in_value() {
                        // The value closed at `at` inside the unit that ends at `end`: the rest
                        // of that unit (with its log probabilities, as the reference repeats
                        // them on each piece of a unit) and the units after it are read again.
                        // The value does not open again, so this happens once.
                        if let Some((at, end, logprobs)) = self.value_units(&joined, pos, out) {
                            let mut units = vec![Unit {
                                text: text[at..end].to_owned(),
                                logprobs,
                            }];
                            units.extend(joined.units_from(end));
                            self.held = units;
                            self.scan(out);
                        }
                        return;
                    }
                    opening.find(j, text, pos)
                }
                _ => None,
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
                if found != usize::MAX
                    && value_at.is_none_or(|v| found < v)
                    && best.is_none_or(|(_, e, _)| found + pat.len() < e)
                {
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
                        self.think_end_seen(mode, out);
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
                        if self.ended() {
                            return;
                        }
                        let lead = text[before_end..start].to_owned();
                        self.mode = Mode::Dsml(Box::new(Dsml::new(&self.dsml, false, mode, lead)));
                        pos = start;
                    }
                }
                continue;
            }
            if let Some(v) = value_at {
                // Release the text up to the value's opening: the filter opens the value.
                self.emit_units(mode, &joined, pos, v, out);
                if self.ended() {
                    return;
                }
                pos = v;
                continue;
            }
            // No complete marker: hold from the earliest possible marker start.
            let hold_from = self.candidate_start(mode, textual, text, pos);
            let cut = match hold_from {
                None => text.len(),
                Some(p) => joined.unit_start_of(p).max(pos),
            };
            self.emit_units(mode, &joined, pos, cut, out);
            if self.ended() {
                return;
            }
            if cut < text.len() {
                self.held = joined.units_from(cut);
            }
            return;
        }
    }

    /// Hand the held units from `pos` on to the JSON filter as the open value's text, one unit
    /// (or the rest of one, with the unit's log probabilities) at a time. Returns where the
    /// value closed, when it did, with the end of that unit and its log probabilities: the text
    /// from there on is read again as ordinary content.
    fn value_units(
        &mut self,
        joined: &Joined,
        pos: usize,
        out: &mut Vec<ParseEvent>,
    ) -> Option<(usize, usize, Vec<TokenLogprob>)> {
        let mut start = 0usize;
        for (i, end) in joined.ends.iter().enumerate() {
            let unit_start = start;
            start = *end;
            let a = unit_start.max(pos);
            if a >= *end {
                continue;
            }
            let logprobs = joined.logprobs[i].clone();
            let j = self.json.as_mut()?;
            match j.value_unit(&joined.text[a..*end], logprobs.clone(), out) {
                ValueStep::Open => {}
                ValueStep::Stopped(stop) => {
                    self.stop_with(stop, out);
                    return None;
                }
                ValueStep::Closed(at, _) => {
                    self.last_lt = false;
                    self.last_think_partial = false;
                    self.released_tail.clear();
                    return Some((a + at, *end, logprobs));
                }
            }
        }
        None
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
            self.ends_with_partial(before, &self.dsml_open)
        } else {
            before.ends_with('<')
        }
    }

    /// Whether `before`, after the text released so far, ends with a proper prefix of
    /// `marker` (a prefix may begin in units already released).
    fn ends_with_partial(&self, before: &str, marker: &str) -> bool {
        if before.len() >= marker.len() {
            return partial_suffix_start(before, marker).is_some();
        }
        let joined = format!("{}{before}", self.released_tail);
        partial_suffix_start(&joined, marker).is_some()
    }

    /// 1 when the first of `n` newlines that follow `before` ends an unfinished `</think>`
    /// spelling: that newline is reasoning text, not one of the newlines that end reasoning.
    fn literal_newline(&self, textual: bool, before: &str, n: usize) -> usize {
        let partial = textual
            && if before.is_empty() {
                self.last_think_partial
            } else {
                self.ends_with_partial(before, &self.think_end)
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
        if (text.is_empty() && !logprobs.is_empty()) || self.ended() {
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
                self.push_delta(mode, String::new(), Vec::new(), out);
            }
        }
        if !text.is_empty() {
            self.remember_released(&text);
        }
        self.push_delta(mode, text, logprobs, out);
    }

    /// Note the end of the released text and whether it ends with an unfinished marker.
    fn remember_released(&mut self, text: &str) {
        let keep = self.dsml_open.len().max(self.think_end.len());
        // Only the end of a long text can matter.
        let mut from = text.len().saturating_sub(keep);
        while !text.is_char_boundary(from) {
            from -= 1;
        }
        self.released_tail.push_str(&text[from..]);
        if self.released_tail.len() > keep {
            let mut cut = self.released_tail.len() - keep;
            while !self.released_tail.is_char_boundary(cut) {
                cut += 1;
            }
            self.released_tail.drain(..cut);
        }
        let tail = self.released_tail.as_str();
        // With token IDs the marker is a token of its own: only a `<` can still precede it.
        self.last_lt = if self.held_textual {
            partial_suffix_start(tail, &self.dsml_open).is_some()
        } else {
            tail.ends_with('<')
        };
        self.last_think_partial = partial_suffix_start(tail, &self.think_end).is_some();
    }

    /// One text delta out; in JSON output mode content goes through the filter, which may end
    /// the stream with a stop sequence.
    fn push_delta(
        &mut self,
        mode: TextMode,
        text: String,
        logprobs: Vec<TokenLogprob>,
        out: &mut Vec<ParseEvent>,
    ) {
        match (mode, &mut self.json) {
            (TextMode::Reasoning, _) => out.push(ParseEvent::Reasoning { text, logprobs }),
            (TextMode::Content, None) => out.push(ParseEvent::Content { text, logprobs }),
            (TextMode::Content, Some(j)) => {
                if let Some(stop) = j.content(&text, logprobs, out) {
                    self.stop_with(stop, out);
                }
            }
        }
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

    /// A closing marker followed by a long run of spaces, pushed one space at a time, waits
    /// (the spaces may still end in `>`); each look at it reads only the newly arrived spaces,
    /// so the work stays linear in the input (it was quadratic: the whole run was rescanned on
    /// every push).
    #[test]
    fn spaces_after_a_pending_closing_marker_are_read_once() {
        let o = ParsingOptions {
            parse_tool_calls: true,
            ..ParsingOptions::default()
        };
        let d = "｜DSML｜";
        let head = format!(
            "<{d}tool_calls>\n<{d}invoke name=\"f\">\n<{d}parameter name=\"x\" string=\"true\">v</{d}parameter"
        );
        let n = 20_000;
        let mut pieces = vec![head.as_str()];
        pieces.extend(std::iter::repeat_n(" ", n));
        pieces.push(">\n</{d}invoke>\n</{d}tool_calls>".replace("{d}", d).leak());
        let mut p = Parser::new(&o);
        let mut events = Vec::new();
        for (i, s) in pieces.iter().enumerate() {
            p.begin_push();
            p.push(
                Piece::Text {
                    text: (*s).to_owned(),
                    logprobs: vec![],
                    textual: true,
                },
                &mut events,
            );
            if i == n {
                let Mode::Dsml(dsml) = &p.mode else {
                    panic!("not in the DSML block");
                };
                assert!(
                    dsml.tail_scanned <= n + 64,
                    "{} bytes of closing-tag tails read for {n} spaces",
                    dsml.tail_scanned
                );
            }
        }
        p.finish(&mut events);
        // The same as one push of the whole text.
        let mut whole = Vec::new();
        let mut q = Parser::new(&o);
        q.begin_push();
        q.push(
            Piece::Text {
                text: pieces.concat(),
                logprobs: vec![],
                textual: true,
            },
            &mut whole,
        );
        q.finish(&mut whole);
        let args = |ev: &[ParseEvent]| -> String {
            ev.iter()
                .filter_map(|e| match e {
                    ParseEvent::ToolCallArgs { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(args(&events), "{\"x\": \"v\"}");
        assert_eq!(args(&events), args(&whole));
    }
}
