//! The same output shape as an xgrammar structural tag (`{"type": "structural_tag", …}`), for
//! engines that constrain with xgrammar (vLLM's `structured_outputs.structural_tag`, SGLang).
//!
//! Control tokens are xgrammar `token` formats by ID (xgrammar ≥ 0.2), never strings, so the
//! tag keeps the property of our own grammar that `｜DSML｜`, `</think>` and EOS appear only as
//! themselves; text is `const_string`, `any_text` (excluding the marker's spelling) or
//! `json_schema`. What the tag cannot say and the llguidance grammar does: each declared
//! parameter at most once and every required one before the call closes (here any number of
//! declared parameters, in any order), and free content before a calls block ending in the
//! `\n\n<` lead-in. `docs/grammar.md` lists the differences from xgrammar's built-in
//! `deepseek_v4_1` tag.

use recipe_core::encoding::EncodingVersion;
use recipe_core::profile::DsmlDialect;
use recipe_core::SpecialToken;
use serde_json::{json, Value};

use crate::compile::GrammarTokens;
use crate::plan::{Answer, CallsPlan, GrammarPlan, Start, ToolSpec};
use crate::schema::{RawText, ValueForms};

/// The structural tag of `plan`.
pub fn structural_tag(
    plan: &GrammarPlan,
    ids: GrammarTokens,
    spellings: &recipe_core::SpecialTokens,
) -> Value {
    let w = Writer {
        d: &EncodingVersion::for_model(plan.version).profile().dsml,
        dsml: ids.dsml,
        marker: spellings.get(SpecialToken::Dsml),
    };
    let answer = match &plan.answer {
        Answer::Calls(c) => w.calls(c),
        Answer::Json(schema) => json_schema(schema),
        Answer::Regex(rx) => json!({"type": "regex", "pattern": rx}),
        Answer::Lark(text) => json!({"type": "grammar", "syntax": "lark", "grammar": text}),
    };
    let format = match plan.start {
        Start::Reasoning => {
            let mut text = json!({"type": "any_text"});
            if let Some(n) = plan.thinking_budget {
                text["max_tokens"] = json!(n);
            }
            seq(vec![
                json!({"type": "tag", "begin": "", "content": text,
                       "end": token(ids.thinking_end)}),
                answer,
            ])
        }
        Start::Answer => answer,
    };
    json!({"type": "structural_tag", "format": format})
}

fn token(id: u32) -> Value {
    json!({"type": "token", "token": id})
}

fn text(s: &str) -> Value {
    json!({"type": "const_string", "value": s})
}

fn seq(elements: Vec<Value>) -> Value {
    json!({"type": "sequence", "elements": elements})
}

fn or(elements: Vec<Value>) -> Value {
    if elements.len() == 1 {
        return elements.into_iter().next().unwrap_or(Value::Null);
    }
    json!({"type": "or", "elements": elements})
}

fn json_schema(schema: &Value) -> Value {
    let mut schema = schema.clone();
    if let Value::Object(m) = &mut schema {
        m.remove("x-guidance");
    }
    json!({"type": "json_schema", "json_schema": schema})
}

struct Writer<'a> {
    d: &'a DsmlDialect,
    dsml: u32,
    marker: &'a str,
}

impl Writer<'_> {
    /// Free text without the marker's spelling, ending in `end`.
    fn text_until(&self, end: &str) -> Value {
        json!({"type": "tag", "begin": "",
               "content": {"type": "any_text", "excludes": [self.marker]}, "end": end})
    }

    fn calls(&self, c: &CallsPlan) -> Value {
        let invoke = or(c.tools.iter().map(|t| self.invoke(t)).collect());
        let next = seq(vec![text("\n<"), token(self.dsml), invoke.clone()]);
        let mut list = vec![invoke];
        if c.parallel {
            list.push(json!({"type": "star", "content": next}));
        }
        list.extend([
            text("\n</"),
            token(self.dsml),
            text(&format!("{}>", self.d.calls)),
        ]);
        if c.opened_by_prompt {
            let mut body = vec![text("<"), token(self.dsml)];
            body.extend(list);
            return seq(body);
        }
        let mut block = vec![text(&format!("{}>\n<", self.d.calls)), token(self.dsml)];
        block.extend(list);
        if c.required {
            let mut all = vec![text("\n\n<"), token(self.dsml)];
            all.extend(block);
            return seq(all);
        }
        // xgrammar wants a tag around unbounded text to end in a string: the block's closing
        // `{calls}>` (after its DSML token) is the tag's end.
        block.pop();
        json!({
            "type": "token_triggered_tags",
            "trigger_tokens": [self.dsml],
            "tags": [{"type": "tag", "begin": token(self.dsml), "content": seq(block),
                      "end": format!("{}>", self.d.calls)}],
            "at_least_one": false,
            "stop_after_first": true,
        })
    }

    fn invoke(&self, t: &ToolSpec) -> Value {
        let head = text(&format!("{} name=\"{}\">\n", self.d.invoke, t.name));
        let close = vec![token(self.dsml), text(&format!("{}>", self.d.invoke))];
        let mut params: Vec<Value> = t
            .params
            .params
            .iter()
            .map(|p| {
                self.parameter(
                    &text(&format!("{} name=\"{}\" string=", self.d.parameter, p.name)),
                    &p.forms,
                )
            })
            .collect();
        if let Some(extra) = &t.params.extra {
            let open = seq(vec![
                text(&format!("{} name=\"", self.d.parameter)),
                json!({"type": "regex", "pattern": "[A-Za-z_$][A-Za-z0-9_.$\\-]*"}),
                text("\" string="),
            ]);
            params.push(self.parameter(&open, extra));
        }
        let mut alts = Vec::new();
        if t.params.required == 0 {
            let mut empty = vec![text(self.d.invoke_close_without_parameters)];
            empty.extend(close.clone());
            alts.push(seq(empty));
        }
        if !params.is_empty() {
            let one = or(params);
            let mut with = vec![text("<"), token(self.dsml), one.clone()];
            with.push(json!({"type": "star",
                "content": seq(vec![text("\n<"), token(self.dsml), one])}));
            with.push(text("\n</"));
            with.extend(close);
            alts.push(seq(with));
        }
        seq(vec![head, or(alts)])
    }

    /// A parameter after its DSML token: `open` (up to `string=`), the value, the closing tag.
    fn parameter(&self, open: &Value, forms: &ValueForms) -> Value {
        let close = [token(self.dsml), text(&format!("{}>", self.d.parameter))];
        let mut alts = Vec::new();
        if let Some(raw) = &forms.raw {
            let value = match raw {
                // xgrammar's formats cannot intersect a pattern with "text until `</`":
                // bounded text is exported as any text.
                RawText::Any | RawText::Bounded(_) => self.text_until("</"),
                RawText::OneOf(v) => or(v.iter().map(|s| text(&format!("{s}</"))).collect()),
            };
            let mut e = vec![open.clone(), text("\"true\">"), value];
            e.extend(close.clone());
            alts.push(seq(e));
        }
        if let Some(schema) = &forms.json {
            let mut e = vec![
                open.clone(),
                text("\"false\">"),
                json_schema(schema),
                text("</"),
            ];
            e.extend(close);
            alts.push(seq(e));
        }
        or(alts)
    }
}
