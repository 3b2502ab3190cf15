//! A [`GrammarPlan`] written out as one llguidance Lark grammar.
//!
//! Layout of the text (rules only where the plan needs them):
//!
//! ```text
//! start: reasoning <[</think>]> answer | answer    (reasoning: when the prompt opened it)
//! reasoning[max_tokens=N]: /(?s:.*)/                (the budget, when one is given)
//! answer: CONTENT | CONTENT_LEAD <[DSML]> dsml_calls     auto tool choice
//!       | "\n\n<" <[DSML]> dsml_calls                     required / named tool
//!       | dsml_calls_body                                the prompt opened the block
//!       | %json {…} | /regex/ | %lark {…}                 answer formats
//! ```
//!
//! Free text (`CONTENT`, a `string="true"` value) is any text without the DSML marker's
//! spelling: control tokens are special tokens of the vocabulary (see `vocabulary.rs`) and no
//! text terminal can produce one, and excluding the spelled-out `｜DSML｜` keeps the stream
//! parser, which reads a written-out opening tag as a tag, from seeing a call the grammar did not
//! check. EOS needs no rule: llguidance allows it exactly when `start` is complete.

use std::fmt::Write;

use recipe_core::encoding::EncodingVersion;
use recipe_core::{SpecialToken, SpecialTokens};
use serde_json::{json, Value};

use crate::dsml::{CallsBlock, CALLS_AFTER_OPEN_TAG, CALLS_AFTER_OPEN_TOKEN};
use crate::lark::{literal, regex, regex_escaped, token};
use crate::plan::{Answer, GrammarPlan, Start};

/// Whitespace a `string="false"` JSON value may hold between two of its tokens: up to this
/// many spaces, tabs or newlines (enough for indented JSON, not for unbounded padding).
pub const MAX_JSON_WHITESPACE: usize = 16;

/// Token IDs of the control tokens a grammar places.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrammarTokens {
    pub dsml: u32,
    pub thinking_end: u32,
}

/// The llguidance options every JSON value and answer carries (`x-guidance`).
pub fn json_options() -> Value {
    json!({
        "whitespace_flexible": true,
        "whitespace_pattern": format!("[\\x20\\x0A\\x0D\\x09]{{1,{MAX_JSON_WHITESPACE}}}"),
    })
}

/// The Lark terminal of any text without `marker` in it.
///
/// For a marker whose first character does not recur before its last (`｜DSML｜`), this is one
/// plain regex, the marker's match automaton written out: text is a run of pieces, each a
/// character other than the first one, or the first one followed by a partial match (which a
/// further first character restarts) and the character that breaks it; a partial match may end
/// the text. A plain regex is what lets llguidance take the precomputed `[^｜]+` vocabulary slice
/// at a position in free text instead of walking the whole token trie (`vocabulary.rs`); a
/// negated lexeme (`.* & ~(.*｜DSML｜.*)`, the fallback for other markers) defeats that check.
pub fn text_without(marker: &str) -> String {
    let c: Vec<char> = marker.chars().collect();
    let n = c.len();
    if n < 2 || c[1..n - 1].contains(&c[0]) {
        let m = regex_escaped(marker);
        return format!("/(?s:.*)/ & ~/(?s:.*){m}(?s:.*)/");
    }
    let e = |ch: char| regex_escaped(&ch.to_string());
    let word = |k: usize| -> String { c[1..=k].iter().map(|&x| e(x)).collect() };
    let first = e(c[0]);
    // Partial matches c[1..=k] (k = 0: none) that a first character restarts: all but the
    // one a first character would complete.
    let restart: Vec<String> = (0..n - 1)
        .filter(|&k| !(k + 1 == n - 1 && c[n - 1] == c[0]))
        .map(|k| format!("{}{first}", word(k)))
        .collect();
    // Partial matches broken by a character that neither goes on nor restarts.
    let broken: Vec<String> = (0..n - 1)
        .map(|k| format!("{}[^{first}{}]", word(k), e(c[k + 1])))
        .collect();
    let partial: Vec<String> = (1..n - 1).map(word).collect();
    let run = format!("(?:{})*", restart.join("|"));
    let tail = if partial.is_empty() {
        String::new()
    } else {
        format!("(?:{})?", partial.join("|"))
    };
    format!(
        "/(?:[^{first}]|{first}{run}(?:{}))*(?:{first}{run}{tail})?/",
        broken.join("|")
    )
}

/// The Lark terminal of one piece of a raw string value: text without `marker` and without
/// `</`, then `</`. A raw value is one or more pieces before the DSML token of its closing
/// tag (`raw_value: RAW_CHUNK+`), which is exactly "text without the marker, then `</`": the
/// marker, having neither `<` nor `/`, cannot straddle two pieces.
///
/// Why pieces: as one lexeme (`TEXT "</"`) the value could end at every `</` and go on, and
/// at such a position llguidance cannot take a vocabulary slice (a lexeme that may end there
/// is not a plain repetition), so the mask walked the whole token trie. A piece cannot go on
/// past its `</`; the next piece starts fresh, where the `[^｜<]+` slice applies. `None` for
/// a marker this construction does not cover (then `TEXT "</"` is the value).
pub fn raw_chunk(marker: &str) -> Option<String> {
    let c: Vec<char> = marker.chars().collect();
    let n = c.len();
    if n < 2 || c[1..n - 1].contains(&c[0]) || c.contains(&'<') || c.contains(&'/') {
        return None;
    }
    let e = |ch: char| regex_escaped(&ch.to_string());
    let first = e(c[0]);
    // After `<` (state B) or after the marker's first j + 1 characters (state P_j), written
    // as segments: "<", and c0 c1..cj.
    let seg = |j: usize| -> String { c[..=j].iter().map(|&x| e(x)).collect() };
    let restarts = |j: usize| c[j + 1] != c[0];
    let mut walk: Vec<String> = vec!["<".to_owned()];
    for j in 0..n - 1 {
        walk.push(if restarts(j) {
            seg(j)
        } else {
            format!("{}<", seg(j))
        });
    }
    // The character that leaves a pending state for plain text.
    let mut end: Vec<String> = vec![format!("<[^\\/<{first}]")];
    let mut last: Vec<String> = vec!["<".to_owned()];
    for j in 0..n - 1 {
        end.push(format!("{}[^{first}<{}]", seg(j), e(c[j + 1])));
        last.push(seg(j));
        if !restarts(j) {
            end.push(format!("{}<[^\\/<{first}]", seg(j)));
            last.push(format!("{}<", seg(j)));
        }
    }
    let walk = format!("(?:{})*", walk.join("|"));
    Some(format!(
        "/(?:[^{first}<]|{walk}(?:{}))*(?:{walk}(?:{}))?<\\//",
        end.join("|"),
        last.join("|")
    ))
}

/// The Lark text of `plan`.
pub fn lark_text(plan: &GrammarPlan, ids: GrammarTokens, spellings: &SpecialTokens) -> String {
    let dialect = &EncodingVersion::for_model(plan.version).profile().dsml;
    let dsml = token(ids.dsml);
    let mut out = String::from("%llguidance {}\n");
    match plan.start {
        Start::Reasoning => {
            let _ = writeln!(out, "start: reasoning {} answer", token(ids.thinking_end));
            match plan.thinking_budget {
                Some(n) => {
                    let _ = writeln!(out, "reasoning[max_tokens={n}]: /(?s:.*)/");
                }
                None => out.push_str("reasoning: /(?s:.*)/\n"),
            }
        }
        Start::Answer => out.push_str("start: answer\n"),
    }
    let _ = writeln!(
        out,
        "TEXT: {}",
        text_without(spellings.get(SpecialToken::Dsml))
    );
    let options = json_options();
    match &plan.answer {
        Answer::Calls(calls) => {
            if calls.opened_by_prompt {
                let _ = writeln!(out, "answer: {CALLS_AFTER_OPEN_TAG}");
            } else if calls.required {
                let _ = writeln!(
                    out,
                    "answer: {} {dsml} {CALLS_AFTER_OPEN_TOKEN}",
                    literal("\n\n<")
                );
            } else {
                out.push_str("answer: CONTENT | CONTENT_LEAD ");
                let _ = writeln!(out, "{dsml} {CALLS_AFTER_OPEN_TOKEN}");
                out.push_str("CONTENT: TEXT\n");
                let _ = writeln!(out, "CONTENT_LEAD: TEXT {}", literal("\n\n<"));
            }
            match raw_chunk(spellings.get(SpecialToken::Dsml)) {
                Some(chunk) => {
                    let _ = writeln!(out, "raw_value: RAW_CHUNK+\nRAW_CHUNK: {chunk}");
                }
                None => {
                    let _ = writeln!(
                        out,
                        "raw_value: RAW_VALUE\nRAW_VALUE: TEXT {}",
                        literal("</")
                    );
                }
            }
            out.push_str("EXTRA_KEY: /[A-Za-z_$][A-Za-z0-9_.$\\-]*/\n");
            CallsBlock {
                dialect,
                dsml: dsml.clone(),
                tools: &calls.tools,
                parallel: calls.parallel,
                json_options: &options,
                json_rules: Default::default(),
                raw_terminals: Default::default(),
            }
            .write(&mut out);
        }
        Answer::Json(schema) => {
            let mut schema = schema.clone();
            if let Value::Object(m) = &mut schema {
                m.insert("x-guidance".to_owned(), options);
            }
            let _ = writeln!(out, "answer: %json {schema}");
        }
        Answer::Regex(rx) => {
            let _ = writeln!(out, "answer: {}", regex(rx));
        }
        Answer::Lark(text) => {
            let _ = writeln!(out, "answer: %lark {{\n{text}\n}}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use llguidance::derivre::RegexBuilder;

    /// The body of a `/…/` Lark regex, unescaped back to the regex syntax.
    fn body(lark: &str) -> String {
        let inner = lark.strip_prefix('/').unwrap().strip_suffix('/').unwrap();
        inner.replace("\\/", "/")
    }

    /// `rx` is exactly the complement of `excluded`: no string in both, and every string in one of them.
    fn assert_complement(rx: &str, excluded: &str, marker: &str) {
        let mut b = RegexBuilder::new();
        let inter = b.mk_regex_and(&[rx, excluded]).unwrap();
        assert!(
            b.clone()
                .to_regex_limited(inter, 100_000)
                .unwrap()
                .always_empty(),
            "{marker}: {rx} matches a string of {excluded}"
        );
        assert!(
            b.is_contained_in("(?s:.*)", &format!("(?:{rx})|(?:{excluded})"), 100_000)
                .unwrap(),
            "{marker}: {rx} misses a string outside {excluded}"
        );
    }

    #[test]
    fn raw_chunks_are_exactly_text_without_the_marker_or_a_close() {
        for marker in ["｜DSML｜", "abc", "aXa"] {
            let chunk = body(&raw_chunk(marker).unwrap());
            let m = regex_escaped(marker);
            let bad = format!("(?s:.*)(?:{m}|</)(?s:.*)");
            let rx = chunk.strip_suffix("</").unwrap();
            assert_complement(rx, &bad, marker);
        }
        assert_eq!(raw_chunk("a<b"), None);
        assert_eq!(raw_chunk("|x|y|"), None);
    }

    #[test]
    fn text_without_a_marker_is_exactly_the_negation() {
        for marker in ["｜DSML｜", "<tool>", "ab", "aXa", "|x|y|", "abcab"] {
            let plain = text_without(marker);
            let m = regex_escaped(marker);
            if !plain.starts_with('/') || plain.contains(" & ~") {
                // Markers whose first character recurs keep the negated form.
                assert!(plain.contains(" & ~"), "{marker}: {plain}");
                continue;
            }
            assert_complement(&body(&plain), &format!("(?s:.*){m}(?s:.*)"), marker);
        }
    }
}
