//! The Lark rules of a DSML calls block, in one version's dialect.
//!
//! The rules write exactly what the renderer writes for a historical call
//! (`encoding/render`'s `tool_calls_block`), with the control token of `｜DSML｜` where the
//! renderer puts it and text everywhere else:
//!
//! ```text
//! <D{calls}>                                  opened by the answer, or by the prompt
//! \n<D{invoke} name="NAME">\n                 per call
//! <D{parameter} name="K" string="true">RAW</D{parameter}>     first argument
//! \n<D{parameter} name="K" string="false">JSON</D{parameter}> each further argument
//! \n</D{invoke}>                              after arguments
//! {invoke_close_without_parameters}D{invoke}> without arguments
//! \n</D{calls}>
//! ```
//!
//! Each tool gets its own rules: its name is a literal, its declared parameters can each be
//! written once, in any order, and the call can close only once every required one was written.
//! That bookkeeping is one of llguidance's parametric rules (`args::_`, a 64-bit set of the
//! parameters written so far, required ones in the low bits).

use std::fmt::Write;

use recipe_core::profile::DsmlDialect;
use serde_json::Value;

use crate::lark::{literal, regex};
use crate::plan::ToolSpec;
use crate::schema::{RawText, TextBounds, ValueForms};

/// Writes the rules of a calls block.
pub struct CallsBlock<'a> {
    pub dialect: &'a DsmlDialect,
    /// `<[id]>` of the DSML control token.
    pub dsml: String,
    pub tools: &'a [ToolSpec],
    /// Several calls in one block (`parallel_tool_calls`).
    pub parallel: bool,
    /// The `x-guidance` options every `string="false"` value's schema carries.
    pub json_options: &'a Value,
    /// One `%json` rule per distinct value schema (schema text → rule name): tools that share
    /// parameter schemas share their nested grammars.
    pub json_rules: std::cell::RefCell<std::collections::HashMap<String, String>>,
    /// One terminal per distinct bounded raw text (its Lark expression → terminal name).
    pub raw_terminals: std::cell::RefCell<std::collections::HashMap<String, String>>,
}

/// One [`TextBounds`] as a Lark terminal expression: the length and the pattern, both.
fn bounds_lark(b: &TextBounds) -> String {
    let mut parts: Vec<String> = Vec::new();
    if b.min_length > 0 || b.max_length.is_some() {
        let max = b.max_length.map(|m| m.to_string()).unwrap_or_default();
        parts.push(format!("/(?s:.{{{},{max}}})/", b.min_length));
    }
    if let Some(rx) = &b.regex {
        parts.push(regex(rx));
    }
    if parts.is_empty() {
        parts.push("/(?s:.*)/".to_owned());
    }
    format!("({})", parts.join(" & "))
}

/// Names of the rules [`CallsBlock::write`] defines.
pub const CALLS_AFTER_OPEN_TOKEN: &str = "dsml_calls";
pub const CALLS_AFTER_OPEN_TAG: &str = "dsml_calls_body";

impl CallsBlock<'_> {
    /// Append the rules to `out`:
    /// * `dsml_calls`: everything after the block's first DSML token (`{calls}>` onwards);
    /// * `dsml_calls_body`: everything after the prompt's `<D{calls}>\n` (the first call's `<`
    ///   onwards), for a prompt that opened the block itself.
    pub fn write(&self, out: &mut String) {
        let d = self.dialect;
        let dsml = &self.dsml;
        let more = if self.parallel {
            format!("({} {dsml} dsml_invoke)* ", literal("\n<"))
        } else {
            String::new()
        };
        let close = format!(
            "{} {dsml} {}",
            literal("\n</"),
            literal(&format!("{}>", d.calls))
        );
        let _ = writeln!(
            out,
            "{CALLS_AFTER_OPEN_TOKEN}: {} {dsml} dsml_invoke {more}{close}",
            literal(&format!("{}>\n<", d.calls))
        );
        let _ = writeln!(
            out,
            "{CALLS_AFTER_OPEN_TAG}: {} {dsml} dsml_invoke {more}{close}",
            literal("<")
        );
        let names: Vec<String> = (0..self.tools.len()).map(|i| format!("t{i}")).collect();
        let _ = writeln!(out, "dsml_invoke: {}", names.join(" | "));
        for (i, tool) in self.tools.iter().enumerate() {
            self.write_tool(out, i, tool);
        }
    }

    fn write_tool(&self, out: &mut String, i: usize, tool: &ToolSpec) {
        let d = self.dialect;
        let dsml = &self.dsml;
        let p = &tool.params;
        let close_invoke = format!("{dsml} {}", literal(&format!("{}>", d.invoke)));
        let head = literal(&format!("{} name=\"{}\">\n", d.invoke, tool.name));
        let mut first: Vec<String> = Vec::new();
        if p.required == 0 {
            first.push(format!(
                "{} {close_invoke}",
                literal(d.invoke_close_without_parameters)
            ));
        }
        let has_args = !p.params.is_empty() || p.extra.is_some();
        for (k, _) in p.params.iter().enumerate() {
            first.push(format!(
                "{} {dsml} t{i}_p{k} t{i}_args::{:#x}",
                literal("<"),
                1u64 << k
            ));
        }
        if p.extra.is_some() {
            first.push(format!("{} {dsml} t{i}_x t{i}_args::0x0", literal("<")));
        }
        let _ = writeln!(out, "t{i}: {head} t{i}_body");
        let _ = writeln!(out, "t{i}_body: {}", first.join("\n    | "));
        if has_args {
            let done = if p.required > 0 {
                format!(" %if is_ones([0:{}])", p.required)
            } else {
                String::new()
            };
            let mut alts = vec![format!("{} {close_invoke}{done}", literal("\n</"))];
            for (k, _) in p.params.iter().enumerate() {
                alts.push(format!(
                    "{} {dsml} t{i}_p{k} t{i}_args::set_bit({k}) %if bit_clear({k})",
                    literal("\n<")
                ));
            }
            if p.extra.is_some() {
                alts.push(format!("{} {dsml} t{i}_x t{i}_args::_", literal("\n<")));
            }
            let _ = writeln!(out, "t{i}_args::_ : {}", alts.join("\n    | "));
        }
        for (k, param) in p.params.iter().enumerate() {
            let open = format!("{} name=\"{}\" string=", d.parameter, param.name);
            self.write_value(out, &format!("t{i}_p{k}"), &literal(&open), &param.forms);
        }
        if let Some(extra) = &p.extra {
            let known: Vec<String> = p.params.iter().map(|x| literal(&x.name)).collect();
            let key = if known.is_empty() {
                "EXTRA_KEY".to_owned()
            } else {
                let _ = writeln!(out, "T{i}_KEY: EXTRA_KEY & ~({})", known.join(" | "));
                format!("T{i}_KEY")
            };
            let open = format!(
                "{} {key} {}",
                literal(&format!("{} name=\"", d.parameter)),
                literal("\" string=")
            );
            self.write_value(out, &format!("t{i}_x"), &open, extra);
        }
    }

    /// `rule`: the rest of a parameter tag after its DSML token, value and closing tag included.
    fn write_value(&self, out: &mut String, rule: &str, open: &str, forms: &ValueForms) {
        let d = self.dialect;
        let dsml = &self.dsml;
        let close = format!("{dsml} {}", literal(&format!("{}>", d.parameter)));
        let mut alts: Vec<String> = Vec::new();
        if let Some(raw) = &forms.raw {
            let value = match raw {
                RawText::Any => "raw_value".to_owned(),
                RawText::OneOf(options) => {
                    let terminal = rule.to_uppercase() + "_RAW";
                    let lits: Vec<String> =
                        options.iter().map(|o| literal(&format!("{o}</"))).collect();
                    let _ = writeln!(out, "{terminal}: {}", lits.join(" | "));
                    terminal
                }
                RawText::Bounded(bounds) => {
                    let alts: Vec<String> = bounds.iter().map(bounds_lark).collect();
                    let text = format!("TEXT & ({})", alts.join(" | "));
                    let mut terminals = self.raw_terminals.borrow_mut();
                    match terminals.get(&text) {
                        Some(t) => t.clone(),
                        None => {
                            let terminal = rule.to_uppercase() + "_RAW";
                            let _ = writeln!(out, "{terminal}_TEXT: {text}");
                            let _ = writeln!(out, "{terminal}: {terminal}_TEXT {}", literal("</"));
                            terminals.insert(text, terminal.clone());
                            terminal
                        }
                    }
                }
            };
            alts.push(format!("{open} {} {value} {close}", literal("\"true\">")));
        }
        if let Some(schema) = &forms.json {
            let mut schema = schema.clone();
            if let Value::Object(m) = &mut schema {
                m.insert("x-guidance".to_owned(), self.json_options.clone());
            }
            let text = schema.to_string();
            let mut rules = self.json_rules.borrow_mut();
            let json_rule = match rules.get(&text) {
                Some(r) => r.clone(),
                None => {
                    let r = format!("{rule}_json");
                    let _ = writeln!(out, "{r}: %json {text}");
                    rules.insert(text, r.clone());
                    r
                }
            };
            alts.push(format!(
                "{open} {} {json_rule} {} {close}",
                literal("\"false\">"),
                literal("</")
            ));
        }
        debug_assert!(
            !alts.is_empty(),
            "schema.rs drops parameters without a value form"
        );
        let _ = writeln!(out, "{rule}: {}", alts.join("\n    | "));
    }
}
