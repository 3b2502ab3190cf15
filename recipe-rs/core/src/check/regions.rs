//! Which part of the template each byte of a canonical prompt belongs to.
//!
//! The map is read off the rendered spans: turn tokens (`<｜User｜>`, `<｜Assistant｜>`, …)
//! delimit turns, the thinking tokens delimit an assistant turn's reasoning, the first `｜DSML｜`
//! token of a closed assistant turn opens its calls block, and the header (the text before the
//! first turn) is cut at the headings the template writes (`## Tools`, `## Response Format`, the
//! effort text). A system text that itself contains such a heading can shift a header boundary;
//! the map is only used to name divergences, never to decide whether two prompts differ.

use serde::Serialize;

use crate::encoding::Span;
use crate::special_tokens::SpecialToken;

/// A part of the prompt layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Region {
    Bos,
    EffortLine,
    System,
    ToolsBlock,
    ResponseFormat,
    User,
    ToolResult,
    Reminder,
    /// An assistant turn's opening: the turn token and its reasoning up to `</think>`.
    Thinking,
    AssistantContent,
    ToolCalls,
    /// The final assistant token and thinking token (and an opened calls block).
    GenerationPrompt,
}

impl Region {
    pub fn as_str(self) -> &'static str {
        match self {
            Region::Bos => "bos",
            Region::EffortLine => "effort_line",
            Region::System => "system",
            Region::ToolsBlock => "tools_block",
            Region::ResponseFormat => "response_format",
            Region::User => "user",
            Region::ToolResult => "tool_result",
            Region::Reminder => "reminder",
            Region::Thinking => "thinking",
            Region::AssistantContent => "assistant_content",
            Region::ToolCalls => "tool_calls",
            Region::GenerationPrompt => "generation_prompt",
        }
    }
}

/// Region starts `(byte offset, region, turn number)`, sorted by offset. The turn number tells
/// apart two regions of the same kind (results of two different turns).
#[derive(Clone, Debug, Default)]
pub struct RegionMap {
    starts: Vec<(usize, Region, usize)>,
}

impl RegionMap {
    /// Region and turn number of the byte at `offset`.
    pub fn at(&self, offset: usize) -> (Region, usize) {
        let i = self.starts.partition_point(|&(o, _, _)| o <= offset);
        self.starts
            .get(i.saturating_sub(1))
            .map_or((Region::Bos, 0), |&(_, r, t)| (r, t))
    }

    /// The region covering most bytes of `[start, end)` (the region at `start` when empty).
    pub fn dominant(&self, start: usize, end: usize) -> Region {
        if end <= start {
            return self.at(start).0;
        }
        let first = self
            .starts
            .partition_point(|&(o, _, _)| o <= start)
            .saturating_sub(1);
        let mut best: Option<(usize, Region)> = None;
        for (i, &(o, r, _)) in self.starts.iter().enumerate().skip(first) {
            if o >= end {
                break;
            }
            let next = self.starts.get(i + 1).map_or(usize::MAX, |n| n.0);
            let covered = next.min(end) - o.max(start);
            if best.is_none_or(|(b, _)| covered > b) {
                best = Some((covered, r));
            }
        }
        best.map_or(self.at(start).0, |(_, r)| r)
    }

    fn push(&mut self, offset: usize, r: Region, turn: usize) {
        if let Some(last) = self.starts.last_mut() {
            if last.0 == offset {
                *last = (offset, r, turn);
                return;
            }
            if last.1 == r && last.2 == turn {
                return;
            }
        }
        self.starts.push((offset, r, turn));
    }

    /// Build the map of `spans` (byte offsets into the joined prompt).
    pub fn of(spans: &[Span]) -> Self {
        use SpecialToken::*;
        let mut map = RegionMap::default();
        let mut offsets = Vec::with_capacity(spans.len() + 1);
        let mut pos = 0;
        for s in spans {
            offsets.push(pos);
            pos += text(s).len();
        }
        offsets.push(pos);
        let kind = |i: usize| match &spans[i] {
            Span::Special(k, _) => Some(*k),
            Span::Text(_) => None,
        };
        let is_turn =
            |k: Option<SpecialToken>| matches!(k, Some(User | Assistant | System | LatestReminder));
        // The header runs from after BOS to the first turn token (a leading V4.1 `<｜System｜>`
        // belongs to the header).
        let mut i = 0;
        if kind(0) == Some(Bos) {
            map.push(0, Region::Bos, 0);
            i = 1;
        }
        let header_start = i;
        let mut j = i;
        if kind(j) == Some(System) {
            j += 1;
        }
        while j < spans.len() && !is_turn(kind(j)) {
            j += 1;
        }
        let header: String = spans[header_start..j].iter().map(text).collect();
        map.header(offsets[header_start], &header);
        // Turns.
        let last_assistant = (0..spans.len()).rev().find(|&k| kind(k) == Some(Assistant));
        let eos_after = |k: usize| {
            spans[k..]
                .iter()
                .any(|s| matches!(s, Span::Special(Eos, _)))
        };
        let mut turn = 0;
        let mut k = j;
        while k < spans.len() {
            let start = offsets[k];
            let mut end = k + 1;
            while end < spans.len() && !is_turn(kind(end)) {
                end += 1;
            }
            turn += 1;
            match kind(k) {
                Some(User) => map.user_turn(&spans[k..end], start, turn),
                Some(LatestReminder) => map.push(start, Region::Reminder, turn),
                Some(System) => map.push(start, Region::System, turn),
                Some(Assistant) if Some(k) == last_assistant && !eos_after(k) => {
                    map.push(start, Region::GenerationPrompt, turn)
                }
                _ => map.assistant_turn(&spans[k..end], &offsets[k..end], turn),
            }
            k = end;
        }
        map
    }

    fn header(&mut self, start: usize, header: &str) {
        if header.is_empty() {
            return;
        }
        let mut marks: Vec<(usize, Region)> = vec![(0, Region::System)];
        // The header may open with the leading `<｜System｜>` spelling; the effort text follows it.
        let body_at = if header.starts_with("Reasoning Effort") {
            0
        } else {
            header
                .find("Reasoning Effort")
                .filter(|&p| !header[..p].contains('\n'))
                .unwrap_or(usize::MAX)
        };
        if body_at != usize::MAX {
            marks.push((body_at, Region::EffortLine));
            if let Some(end) = header[body_at..].find("\n\n") {
                marks.push((body_at + end + 2, Region::System));
            }
        }
        for (needle, r) in [
            ("\n\n## Tools\n\n", Region::ToolsBlock),
            ("\n\n## Response Format", Region::ResponseFormat),
            (
                "\n\nYou are a helpful assistant designed to output JSON.",
                Region::ResponseFormat,
            ),
            ("\n\n### Updated Tool Schemas", Region::ToolsBlock),
        ] {
            if let Some(p) = header.find(needle) {
                marks.push((p, r));
            }
        }
        marks.sort_by_key(|&(p, _)| p);
        for (p, r) in marks {
            self.push(start + p, r, 0);
        }
    }

    fn user_turn(&mut self, spans: &[Span], start: usize, turn: usize) {
        self.push(start, Region::User, turn);
        let body: String = spans.iter().map(text).collect();
        let mut from = 0;
        while let Some(p) = body[from..].find("<tool_result>") {
            let open = from + p;
            let close = body[open..]
                .find("</tool_result>")
                .map_or(body.len(), |q| open + q + "</tool_result>".len());
            self.push(start + open, Region::ToolResult, turn);
            if close < body.len() {
                self.push(start + close, Region::User, turn);
            }
            from = close;
        }
    }

    fn assistant_turn(&mut self, spans: &[Span], offsets: &[usize], turn: usize) {
        use SpecialToken::*;
        self.push(offsets[0], Region::Thinking, turn);
        let mut in_calls = false;
        for (i, s) in spans.iter().enumerate() {
            match s {
                Span::Special(ThinkingEnd, _) if !in_calls => {
                    self.push(offsets[i] + text(s).len(), Region::AssistantContent, turn);
                }
                Span::Special(Dsml, _) if !in_calls => {
                    // The block opens with "\n\n<" right before the first DSML token.
                    let back = match i.checked_sub(1).map(|p| &spans[p]) {
                        Some(Span::Text(t)) if t.ends_with("\n\n<") => 3,
                        Some(Span::Text(t)) if t.ends_with('<') => 1,
                        _ => 0,
                    };
                    self.push(offsets[i] - back, Region::ToolCalls, turn);
                    in_calls = true;
                }
                Span::Special(Eos, _) => self.push(offsets[i], Region::AssistantContent, turn),
                _ => {}
            }
        }
    }
}

fn text(s: &Span) -> &str {
    match s {
        Span::Text(t) | Span::Special(_, t) => t,
    }
}
