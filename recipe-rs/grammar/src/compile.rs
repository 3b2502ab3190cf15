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
    let marker = regex_escaped(spellings.get(SpecialToken::Dsml));
    let _ = writeln!(out, "TEXT: /(?s:.*)/ & ~/(?s:.*){marker}(?s:.*)/");
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
            let _ = writeln!(out, "RAW_VALUE: TEXT {}", literal("</"));
            out.push_str("EXTRA_KEY: /[A-Za-z_$][A-Za-z0-9_.$\\-]*/\n");
            CallsBlock {
                dialect,
                dsml: dsml.clone(),
                tools: &calls.tools,
                parallel: calls.parallel,
                json_options: &options,
                json_rules: Default::default(),
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
