//! Text held back by the parser: input units joined into one string with their boundaries (so
//! released text keeps the reference's one-delta-per-unit granularity), and the two suffix
//! tests the marker search is built on.

use crate::input::TokenLogprob;

/// One input unit (a text chunk, or a run of ordinary tokens) with its log probabilities.
pub(super) struct Unit {
    pub(super) text: String,
    pub(super) logprobs: Vec<TokenLogprob>,
}

/// Held units joined into one string, with unit boundaries.
pub(super) struct Joined {
    pub(super) text: String,
    pub(super) ends: Vec<usize>,
    pub(super) logprobs: Vec<Vec<TokenLogprob>>,
    /// Offset from which each unit's logprobs are still unreported (its start).
    pub(super) lp_from: Vec<usize>,
}

impl Joined {
    pub(super) fn new(units: Vec<Unit>) -> Self {
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
    pub(super) fn unit_start_of(&self, p: usize) -> usize {
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
    pub(super) fn units_from(self, cut: usize) -> Vec<Unit> {
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
pub(super) fn trim_newlines_end(s: &str) -> (usize, usize) {
    let trimmed = s.trim_end_matches('\n').len();
    (trimmed, s.len() - trimmed)
}

/// The earliest start of a non-empty suffix of `text` that is a proper prefix of `pat`.
pub(super) fn partial_suffix_start(text: &str, pat: &str) -> Option<usize> {
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
