//! DSML tool-call blocks: a state machine fed the text that follows a `<｜DSML｜` spelling (or
//! the DSML control token), one method per state. Until the block's first tag is complete it
//! only collects what it was fed, so the caller can give it back as text when no block follows.

use super::held::partial_suffix_start;
use super::{ArgKind, ParseEvent, TextMode};

/// What the block parser needs next.
pub(super) enum DsmlStatus {
    /// More input.
    Continue,
    /// The calls block closed: everything after it is dropped.
    Closed,
    /// No block opened here after all: the input was text.
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

/// What one state method decided: go on in the next state, wait for more input in it, or stop.
enum Flow {
    Next(DState),
    Wait(DState),
    Done(DsmlStatus),
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

pub(super) struct Dsml {
    buf: String,
    /// Consumed prefix of `buf`.
    at: usize,
    /// Whether the latest input came from a text chunk (control tokens spelled out) rather
    /// than from token IDs (control tokens arrive as their own pieces).
    pub(super) textual: bool,
    /// Whether the latest input is a control token given by ID. Inside a parameter name its
    /// text is a delta of its own, as in the reference (the name's text before and after it
    /// goes out in separate deltas).
    pub(super) special: bool,
    /// The last delta of the name being read is a control token's: the next piece of the name
    /// starts a new delta.
    key_split: bool,
    /// Where each input unit fed since the buffer was last emptied begins in `buf`: value
    /// text is reported one unit portion at a time, like text outside the block.
    unit_starts: std::collections::VecDeque<usize>,
    /// Where a DSML control token given by ID begins in `buf`. With token input only those
    /// count as the marker of the closing tag that ends a parameter value: the same spelling
    /// written out in ordinary tokens is value text, and between tags it is skipped like other
    /// stray text, as in the reference. (Written-out opening tags are read as tags.)
    marker_ids: std::collections::VecDeque<usize>,
    state: DState,
    pub(super) committed: bool,
    pub(super) prev: TextMode,
    /// Everything fed while not committed (to give back as text).
    pub(super) raw: String,
    /// Newlines that preceded the block start (dropped when the block commits).
    pub(super) lead: String,
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
    /// `(lt, name length, end)`: the closing tag whose `<` is at `lt` in `buf` was found waiting,
    /// with only whitespace after its name up to `end`. The next look at the same tag checks only what
    /// arrived since, so a long run of spaces pushed in pieces is read once, not once per push.
    /// Reset whenever `buf` is cleared or shifted.
    tail_checked: (usize, usize, usize),
    /// Bytes of closing-tag tails examined so far (the tests bound it).
    #[cfg(test)]
    pub(super) tail_scanned: usize,
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

pub(super) enum Match {
    /// A whole tag matched; its length in bytes.
    Full(usize),
    Partial,
    None,
}

pub(super) fn match_tags(s: &str, tags: &[String]) -> Match {
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
pub(super) fn block_open_tags(d: &str) -> Vec<String> {
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
    pub(super) fn new(d: &str, committed: bool, prev: TextMode, lead: String) -> Self {
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
            special: false,
            key_split: false,
            unit_starts: std::collections::VecDeque::new(),
            marker_ids: std::collections::VecDeque::new(),
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
            tail_checked: (usize::MAX, 0, 0),
            #[cfg(test)]
            tail_scanned: 0,
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

    pub(super) fn feed(
        &mut self,
        text: &str,
        marker_at: Option<usize>,
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
            self.marker_ids.retain(|s| *s >= at);
            self.marker_ids.iter_mut().for_each(|s| *s -= at);
            self.push_start = self.push_start.saturating_sub(at);
            self.at = 0;
            self.tail_checked = (usize::MAX, 0, 0);
        }
        self.unit_starts.push_back(self.buf.len());
        if let Some(o) = marker_at {
            self.marker_ids.push_back(self.buf.len() + o);
        }
        self.buf.push_str(text);
        let status = self.run(tool_calls, out);
        if self.at >= self.buf.len() {
            self.buf.clear();
            self.tail_checked = (usize::MAX, 0, 0);
            self.unit_starts.clear();
            self.marker_ids.clear();
            self.at = 0;
            self.push_start = 0;
        }
        status
    }

    /// A new push begins: what is buffered from now on arrived in it.
    pub(super) fn begin_push(&mut self) {
        self.string_seen_before =
            matches!(&self.state, DState::Attrs(a) if a.contains("string=\"t"));
        self.push_start = self.buf.len();
    }

    /// Whether the closing `name` tag whose `<` is at `lt` in `buf` must wait for more input
    /// before it counts. As in the reference, a tag begun in an earlier push whose marker is
    /// completed by the current one counts at once; otherwise it waits while what follows the
    /// marker can still grow into `name>` (see [`tag_tail_pending`]).
    fn close_pending(&mut self, lt: usize, name: &str) -> bool {
        let completed_now = lt < self.push_start && lt + self.close_prefix.len() > self.push_start;
        if completed_now {
            return false;
        }
        let tail = lt + self.close_prefix.len();
        let (last_lt, last_name, end) = self.tail_checked;
        let checked = if (last_lt, last_name) == (lt, name.len()) {
            end - tail
        } else {
            0
        };
        #[cfg(test)]
        {
            self.tail_scanned += (self.buf.len() - tail).saturating_sub(checked.max(name.len()));
        }
        let (pending, checked) = tag_tail_pending(&self.buf[tail..], name, checked);
        self.tail_checked = if pending {
            (lt, name.len(), tail + checked)
        } else {
            (usize::MAX, 0, 0)
        };
        pending
    }

    /// Whether the marker spelling at `p` in `buf` counts in a value's closing tag: always with
    /// text input; with token input only where the DSML control token was given by ID.
    fn marker_at(&self, p: usize) -> bool {
        self.textual || self.marker_ids.binary_search(&p).is_ok()
    }

    /// Whether the closing tag whose `<` is at `lt` in `buf` has a marker that counts. With
    /// token input a closing tag written out in ordinary tokens is not a tag anywhere in the
    /// block (the reference skips it like any other stray text), while written-out opening tags
    /// are read as tags.
    fn close_marker_at(&self, lt: usize) -> bool {
        self.marker_at(lt + 2)
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

    /// Run the state machine over the buffered input until it needs more or the block ends.
    fn run(&mut self, tool_calls: &mut usize, out: &mut Vec<ParseEvent>) -> DsmlStatus {
        loop {
            let state = std::mem::replace(&mut self.state, DState::Between);
            let flow = match state {
                DState::Between => self.between(out),
                DState::InvokeName(name) => self.invoke_name(name, tool_calls, out),
                DState::InvokeTagEnd => self.invoke_tag_end(),
                DState::InvokeBody => self.invoke_body(out),
                DState::KeyStart => self.key_start(out),
                DState::Key => self.key(out),
                DState::AfterKey => self.after_key(out),
                DState::Attrs(attrs) => self.attrs(attrs),
                DState::Value(mode) => self.value(mode, out),
                DState::SkipToGt(next) => self.skip_to_gt(next),
            };
            match flow {
                Flow::Next(next) => self.state = next,
                Flow::Wait(next) => {
                    self.state = next;
                    return DsmlStatus::Continue;
                }
                Flow::Done(status) => return status,
            }
        }
    }

    /// Between tags: a calls tag, an invoke tag, or (inside the block) the closing calls tag.
    /// Before the block committed, anything that cannot grow into an opening tag fails it.
    fn between(&mut self, out: &mut Vec<ParseEvent>) -> Flow {
        if self.committed {
            self.skip_ws();
        }
        if self.rest().is_empty() {
            return Flow::Wait(DState::Between);
        }
        let r = self.rest();
        if let Match::Full(n) = match_tags(r, &self.open_tags) {
            self.at += n;
            self.commit(out);
            return Flow::Next(DState::Between);
        }
        if let Match::Full(n) = match_tags(r, &self.invoke_tags) {
            self.at += n;
            self.commit(out);
            return Flow::Next(DState::InvokeName(String::new()));
        }
        if self.committed && self.close_marker_at(self.at) {
            if let Match::Full(n) = match_tags(r, &self.close_calls_tags) {
                self.at += n;
                return Flow::Done(DsmlStatus::Closed);
            }
        }
        let partial = [&self.open_tags, &self.invoke_tags, &self.close_calls_tags]
            .iter()
            .any(|tags| matches!(match_tags(r, tags), Match::Partial));
        if partial {
            return Flow::Wait(DState::Between);
        }
        if !self.committed {
            return Flow::Done(DsmlStatus::Failed);
        }
        self.skip_garbage();
        Flow::Next(DState::Between)
    }

    /// The tool name up to its closing quote; the call starts there.
    fn invoke_name(
        &mut self,
        mut name: String,
        tool_calls: &mut usize,
        out: &mut Vec<ParseEvent>,
    ) -> Flow {
        let r = self.rest();
        let Some(i) = r.find('"') else {
            name.push_str(r);
            self.at = self.buf.len();
            return Flow::Wait(DState::InvokeName(name));
        };
        name.push_str(&r[..i]);
        self.at += i + 1;
        self.index = *tool_calls;
        *tool_calls += 1;
        self.params = 0;
        out.push(ParseEvent::ToolCallStart {
            index: self.index,
            name,
        });
        Flow::Next(DState::InvokeTagEnd)
    }

    /// The rest of the invoke tag, up to its `>`.
    fn invoke_tag_end(&mut self) -> Flow {
        match self.rest().find('>') {
            None => {
                self.at = self.buf.len();
                Flow::Wait(DState::InvokeTagEnd)
            }
            Some(i) => {
                self.at += i + 1;
                Flow::Next(DState::InvokeBody)
            }
        }
    }

    /// Inside an invoke: a parameter tag opens (or continues) the arguments object, a closing
    /// tag ends it.
    fn invoke_body(&mut self, out: &mut Vec<ParseEvent>) -> Flow {
        self.skip_ws();
        let r = self.rest();
        if r.is_empty() {
            return Flow::Wait(DState::InvokeBody);
        }
        if let Match::Full(n) = match_tags(r, &self.param_tags) {
            self.at += n;
            let (kind, text) = if self.params == 0 {
                (ArgKind::Open, "{")
            } else {
                (ArgKind::Separator, ", ")
            };
            emit_arg(out, self.index, kind, text);
            return Flow::Next(DState::KeyStart);
        }
        if r.starts_with(self.close_prefix.as_str()) && self.close_marker_at(self.at) {
            if self.close_pending(self.at, "invoke") {
                return Flow::Wait(DState::InvokeBody);
            }
            self.at += self.close_prefix.len();
            self.close_arguments(out);
            return Flow::Next(DState::SkipToGt(Box::new(DState::Between)));
        }
        if matches!(match_tags(r, &self.param_tags), Match::Partial)
            || self.close_prefix.starts_with(r)
        {
            return Flow::Wait(DState::InvokeBody);
        }
        self.skip_garbage();
        Flow::Next(DState::InvokeBody)
    }

    /// The first character of a parameter name: its opening quote, or (unquoted) the name.
    fn key_start(&mut self, out: &mut Vec<ParseEvent>) -> Flow {
        match self.rest().chars().next() {
            None => return Flow::Wait(DState::KeyStart),
            Some('"') => self.at += 1,
            // An unquoted name: read like a quoted one, from its first character.
            Some(_) => {}
        }
        emit_arg(out, self.index, ArgKind::Key, "\"");
        Flow::Next(DState::Key)
    }

    /// The parameter name up to its closing quote, JSON-escaped as it arrives.
    fn key(&mut self, out: &mut Vec<ParseEvent>) -> Flow {
        let r = self.rest();
        let Some(i) = r.find('"') else {
            let s = escape_json(r);
            self.emit_key(&s, out);
            self.at = self.buf.len();
            return Flow::Wait(DState::Key);
        };
        let mut s = escape_json(&r[..i]);
        s.push('"');
        self.emit_key(&s, out);
        self.at += i + 1;
        Flow::Next(DState::AfterKey)
    }

    /// A piece of the parameter name: joined to the name's previous delta of this push, except
    /// next to a control token given by ID, which is a delta of its own.
    fn emit_key(&mut self, s: &str, out: &mut Vec<ParseEvent>) {
        if s.is_empty() {
            return;
        }
        if self.special || self.key_split {
            out.push(ParseEvent::ToolCallArgs {
                index: self.index,
                kind: ArgKind::Key,
                text: s.to_owned(),
            });
        } else {
            emit_arg(out, self.index, ArgKind::Key, s);
        }
        self.key_split = self.special;
    }

    /// After the name's closing quote: the colon goes out once more input arrives.
    fn after_key(&mut self, out: &mut Vec<ParseEvent>) -> Flow {
        if self.rest().is_empty() {
            return Flow::Wait(DState::AfterKey);
        }
        emit_arg(out, self.index, ArgKind::Colon, ": ");
        Flow::Next(DState::Attrs(String::new()))
    }

    /// The parameter tag's attributes up to its `>`; they choose how the value is written.
    fn attrs(&mut self, mut attrs: String) -> Flow {
        let r = self.rest();
        let Some(i) = r.find('>') else {
            attrs.push_str(r);
            self.at = self.buf.len();
            return Flow::Wait(DState::Attrs(attrs));
        };
        attrs.push_str(&r[..i]);
        self.at += i + 1;
        Flow::Next(DState::Value(string_attr(&attrs)))
    }

    /// A parameter value up to its closing tag.
    fn value(&mut self, mut mode: ValueMode, out: &mut Vec<ParseEvent>) -> Flow {
        if let ValueMode::StrUnopened = mode {
            let r = self.rest();
            // With token IDs the marker in a closing tag is a control token of its own, so
            // only `<` can still grow into one here.
            let prefix = if self.textual {
                self.close_prefix.as_str()
            } else {
                "</"
            };
            // With text input a whole marker would be the closing tag itself; with token input
            // `</` is still undecided until the next token shows whether the marker follows.
            let undecided = r.len() < prefix.len() || !self.textual;
            if !self.string_seen_before && !r.is_empty() && undecided && prefix.starts_with(r) {
                // Only the start of a closing tag follows: wait before opening.
                return Flow::Wait(DState::Value(mode));
            }
            emit_arg(out, self.index, ArgKind::ValueOpen, "\"");
            mode = ValueMode::Str;
        }
        // What an earlier push showed of this tag decides its quote only: the next parameter
        // of the same push waits like any other.
        self.string_seen_before = false;
        let (end, closed) = match self.next_close() {
            Some(p) => (p, !self.close_pending(p, "parameter")),
            // Like text, the input unit whose tail may start the closing tag is held back
            // whole until later input decides.
            None => match self.close_partial() {
                Some(p) => (self.unit_start_of(p), false),
                None => (self.buf.len(), false),
            },
        };
        self.emit_value(&mut mode, self.at, end, out);
        self.at = end;
        if !closed {
            return Flow::Wait(DState::Value(mode));
        }
        self.at += self.close_prefix.len();
        self.end_value(mode, out);
        Flow::Next(DState::SkipToGt(Box::new(DState::InvokeBody)))
    }

    /// The arguments object of the current call ends (`{}` when it had no parameter).
    fn close_arguments(&self, out: &mut Vec<ParseEvent>) {
        if self.params == 0 {
            emit_arg(out, self.index, ArgKind::Empty, "{}");
        } else {
            emit_arg(out, self.index, ArgKind::Close, "}");
        }
    }

    /// A parameter value ends: its closing quote, or (no usable `string` attribute) the whole
    /// collected value.
    fn end_value(&mut self, mode: ValueMode, out: &mut Vec<ParseEvent>) {
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
    }

    /// The stream ended inside the block. As the reference does, a closing tag still waiting
    /// for its name counts, and value text held back for a possible closing tag is written out
    /// (a `string="true"` value's opening quote with it).
    pub(super) fn finish(&mut self, out: &mut Vec<ParseEvent>) {
        let state = std::mem::replace(&mut self.state, DState::Between);
        match state {
            DState::InvokeBody
                if self.rest().starts_with(self.close_prefix.as_str())
                    && self.close_marker_at(self.at) =>
            {
                self.close_arguments(out);
            }
            DState::Value(mut mode) => {
                if let ValueMode::StrUnopened = mode {
                    emit_arg(out, self.index, ArgKind::ValueOpen, "\"");
                    mode = ValueMode::Str;
                }
                match self.next_close() {
                    Some(p) => {
                        self.emit_value(&mut mode, self.at, p, out);
                        self.end_value(mode, out);
                    }
                    None if matches!(mode, ValueMode::Buffered(_)) => {}
                    None => self.emit_value(&mut mode, self.at, self.buf.len(), out),
                }
            }
            _ => {}
        }
        self.at = self.buf.len();
    }

    /// The first closing-tag start at or after `at`.
    fn next_close(&self) -> Option<usize> {
        let mut from = self.at;
        while let Some(i) = self.buf[from..].find(self.close_prefix.as_str()) {
            if self.close_marker_at(from + i) {
                return Some(from + i);
            }
            from += i + 1;
        }
        None
    }

    /// Where an unfinished closing-tag start at the end of the input begins.
    fn close_partial(&self) -> Option<usize> {
        let r = self.rest();
        let p = if self.textual {
            partial_suffix_start(r, &self.close_prefix)
        } else if r.ends_with("</") {
            Some(r.len() - 2)
        } else if r.ends_with('<') {
            Some(r.len() - 1)
        } else {
            None
        };
        p.map(|p| self.at + p)
    }

    /// The rest of a closing tag, up to its `>`. As in the reference, a tag that never gets its
    /// `>` ends where the next marker begins (`<｜DSML｜` or a closing tag's `</｜DSML｜`), and
    /// that tag is read.
    fn skip_to_gt(&mut self, next: Box<DState>) -> Flow {
        let open = format!("<{}", &self.close_prefix[2..]);
        let r = self.rest();
        let gt = r.find('>');
        let marker = [
            r.find(open.as_str()),
            self.next_close().map(|p| p - self.at),
        ]
        .into_iter()
        .flatten()
        .min();
        match (gt, marker.filter(|&m| gt.is_none_or(|g| m < g))) {
            (_, Some(m)) => {
                self.at += m;
                Flow::Next(*next)
            }
            (Some(g), None) => {
                self.at += g + 1;
                Flow::Next(*next)
            }
            (None, None) => {
                // Keep a marker start at the end: the next push may complete it.
                let held = [
                    partial_suffix_start(r, &open).map(|p| self.at + p),
                    self.close_partial(),
                ]
                .into_iter()
                .flatten()
                .min();
                self.at = held.unwrap_or(self.buf.len());
                Flow::Wait(DState::SkipToGt(next))
            }
        }
    }
}

/// Whether a closing tag whose marker is followed by `after` must wait before it is reported.
/// As in the reference, the tag counts as soon as `</｜DSML｜` is seen when nothing follows it,
/// and as soon as what follows can no longer become the expected V4-style name and its `>`
/// (`parameter`, then optional whitespace, then `>`): `</｜DSML｜ parameter` (a space first) or
/// `</｜DSML｜pa-` count at once, `</｜DSML｜para` and `</｜DSML｜parameter ` wait.
///
/// `checked` bytes of `after` are already known to be `name` and whitespace (from an earlier
/// look at the same tag); returns whether the tag waits and how many bytes are now known so.
fn tag_tail_pending(after: &str, name: &str, checked: usize) -> (bool, usize) {
    if after.is_empty() {
        return (false, 0);
    }
    if after.len() <= name.len() {
        return (name.as_bytes().starts_with(after.as_bytes()), 0);
    }
    if !after.starts_with(name) {
        return (false, 0);
    }
    let from = checked.max(name.len());
    let pending = after[from..].chars().all(char::is_whitespace);
    (pending, if pending { after.len() } else { 0 })
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
