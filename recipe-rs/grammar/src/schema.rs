//! Tool parameter schemas read as the DSML call writes them.
//!
//! The encoder writes an argument whose JSON value is a string as `string="true"` followed by
//! the raw text, and every other value as `string="false"` followed by its JSON
//! (`encoding/render`'s `call_parameters`). So for each parameter the grammar needs two answers
//! from its schema: may the value be a string (and which strings), and may it be something else
//! (and what JSON). [`ValueForms`] holds both; [`ToolParameters`] lists a tool's parameters with
//! their forms, which of them are required, and whether undeclared keys may appear.
//!
//! Strict tools arrive strict-normalised by request conversion (every object closed, every
//! property required), so closing and requiring need no special case here.

use serde_json::{Map, Value};

use crate::error::{GrammarError, GrammarResult};

/// Most declared parameters one tool may have: the grammar tracks which were written in one
/// 64-bit set (llguidance's parametric rules).
pub const MAX_PARAMETERS: usize = 64;

/// What the raw text of a `string="true"` value may be. Every form is free text too: no
/// control token, no spelled-out DSML marker.
#[derive(Clone, Debug, PartialEq)]
pub enum RawText {
    /// Any text.
    Any,
    /// Exactly one of these strings (an `enum` or `const` of strings).
    OneOf(Vec<String>),
    /// Text within one of these bounds (a string schema's `minLength` / `maxLength` /
    /// `pattern`; several for a union of bounded string schemas).
    Bounded(Vec<TextBounds>),
}

/// The bounds a string schema puts on its value: the length in Unicode scalar values (as JSON
/// Schema counts it) and a `pattern`, which the raw text carries unescaped, so each bound is a
/// bound on the raw text itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextBounds {
    pub min_length: u64,
    pub max_length: Option<u64>,
    /// The `pattern` as an llguidance (derivre) regex the *whole* text must match: JSON
    /// Schema's search semantics written out by [`search_regex`].
    pub regex: Option<String>,
}

/// The two ways a value can be written.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueForms {
    /// `string="true"`: allowed when the schema admits strings.
    pub raw: Option<RawText>,
    /// `string="false"`: the JSON schema the value must match, when the schema admits anything
    /// but strings. Self-contained: the root's `$defs` / `definitions` are copied in.
    pub json: Option<Value>,
}

/// One declared parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct Parameter {
    pub name: String,
    pub forms: ValueForms,
}

/// A tool's parameters, required ones first.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolParameters {
    /// Declared parameters; the first `required` of them are required.
    pub params: Vec<Parameter>,
    pub required: usize,
    /// The forms of an undeclared key's value, when undeclared keys are allowed.
    pub extra: Option<ValueForms>,
}

impl ToolParameters {
    /// Read a tool's `parameters` schema (`Value::Null` or `{}`: no declared parameters).
    pub fn from_schema(tool: &str, schema: &Value) -> GrammarResult<Self> {
        let empty = Map::new();
        let root = match schema {
            Value::Null => &empty,
            Value::Object(m) => m,
            other => {
                return Err(unsupported(
                    tool,
                    format!("the parameters schema must be an object, not {other}"),
                ))
            }
        };
        let ctx = Ctx { tool, root };
        let top = ctx.resolve(root)?;
        let props = match top.get("properties") {
            None => empty.clone(),
            Some(Value::Object(p)) => p.clone(),
            Some(_) => return Err(unsupported(tool, "`properties` must be an object")),
        };
        let mut required: Vec<String> = match top.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| unsupported(tool, "`required` must list strings"))
                })
                .collect::<GrammarResult<_>>()?,
            Some(_) => return Err(unsupported(tool, "`required` must be an array")),
        };
        required.dedup();
        let extra = match top.get("additionalProperties") {
            Some(Value::Bool(false)) => None,
            None | Some(Value::Bool(true)) => Some(ValueForms::any()),
            Some(s @ Value::Object(_)) => Some(ctx.forms(s)?).filter(ValueForms::is_possible),
            Some(_) => return Err(unsupported(tool, "`additionalProperties` must be a schema")),
        };
        let mut params: Vec<Parameter> = Vec::new();
        for name in &required {
            let forms = match props.get(name) {
                Some(s) => ctx.forms(s)?,
                None => extra.clone().ok_or_else(|| {
                    unsupported(tool, format!("required parameter {name:?} is not declared"))
                })?,
            };
            if !forms.is_possible() {
                return Err(unsupported(
                    tool,
                    format!("required parameter {name:?} admits no value"),
                ));
            }
            params.push(Parameter {
                name: name.clone(),
                forms,
            });
        }
        for (name, s) in &props {
            let forms = ctx.forms(s)?;
            // An optional parameter that admits no value is simply never written.
            if !required.contains(name) && forms.is_possible() {
                params.push(Parameter {
                    name: name.clone(),
                    forms,
                });
            }
        }
        if params.len() > MAX_PARAMETERS {
            return Err(unsupported(
                tool,
                format!(
                    "{} parameters declared; at most {MAX_PARAMETERS} are supported",
                    params.len()
                ),
            ));
        }
        Ok(ToolParameters {
            required: required.len(),
            params,
            extra,
        })
    }
}

impl ValueForms {
    /// Whether any value can be written at all.
    pub fn is_possible(&self) -> bool {
        self.raw.is_some() || self.json.is_some()
    }

    /// Anything: raw text, or any JSON.
    fn any() -> Self {
        ValueForms {
            raw: Some(RawText::Any),
            json: Some(Value::Object(Map::new())),
        }
    }
}

fn unsupported(tool: &str, msg: impl std::fmt::Display) -> GrammarError {
    GrammarError::UnsupportedSchema(format!("tool {tool:?}: {msg}"))
}

struct Ctx<'a> {
    tool: &'a str,
    root: &'a Map<String, Value>,
}

/// How deep `$ref`s may chain before the schema is refused as cyclic.
const MAX_REF_CHAIN: usize = 32;

impl<'a> Ctx<'a> {
    /// The root's definitions, to make a sub-schema self-contained.
    fn defs(&self) -> Map<String, Value> {
        let mut out = Map::new();
        for key in ["$defs", "definitions"] {
            if let Some(d) = self.root.get(key) {
                out.insert(key.to_owned(), d.clone());
            }
        }
        out
    }

    /// Follow `$ref`s (local ones only) to the schema they name.
    fn resolve(&self, mut s: &'a Map<String, Value>) -> GrammarResult<&'a Map<String, Value>> {
        for _ in 0..MAX_REF_CHAIN {
            let Some(r) = s.get("$ref") else {
                return Ok(s);
            };
            let Some(r) = r.as_str() else {
                return Err(unsupported(self.tool, "`$ref` must be a string"));
            };
            let Some(pointer) = r.strip_prefix('#') else {
                return Err(unsupported(
                    self.tool,
                    format!("only local `$ref`s (\"#/...\") are supported, not {r:?}"),
                ));
            };
            s = lookup(self.root, pointer).ok_or_else(|| {
                unsupported(self.tool, format!("`$ref` {r:?} does not name a schema"))
            })?;
        }
        Err(unsupported(self.tool, "`$ref`s chain too deep (cyclic?)"))
    }

    /// The forms a value of schema `s` may take.
    fn forms(&self, s: &Value) -> GrammarResult<ValueForms> {
        let map = match s {
            Value::Bool(true) => return Ok(ValueForms::any()),
            Value::Bool(false) => {
                return Ok(ValueForms {
                    raw: None,
                    json: None,
                })
            }
            Value::Object(m) => m,
            other => return Err(unsupported(self.tool, format!("not a schema: {other}"))),
        };
        let resolved = self.resolve(map)?;
        let (raw, json_needed) = self.string_side(resolved, 0)?;
        let json = if json_needed {
            Some(self.json_schema(resolved))
        } else {
            None
        };
        Ok(ValueForms { raw, json })
    }

    /// Whether (and which) strings the schema admits, and whether it admits non-strings.
    fn string_side(
        &self,
        s: &Map<String, Value>,
        depth: usize,
    ) -> GrammarResult<(Option<RawText>, bool)> {
        if depth > MAX_REF_CHAIN {
            return Err(unsupported(self.tool, "schema nested too deep"));
        }
        if let Some(c) = s.get("const") {
            return Ok(match c {
                Value::String(v) => (Some(RawText::OneOf(vec![v.clone()])), false),
                _ => (None, true),
            });
        }
        if let Some(e) = s.get("enum") {
            let Value::Array(items) = e else {
                return Err(unsupported(self.tool, "`enum` must be an array"));
            };
            let strings: Vec<String> = items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect();
            let others = items.iter().any(|v| !v.is_string());
            let raw = (!strings.is_empty()).then_some(RawText::OneOf(strings));
            return Ok((raw, others));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = s.get(key) {
                let Value::Array(branches) = branches else {
                    return Err(unsupported(self.tool, format!("`{key}` must be an array")));
                };
                let mut raw: Option<RawText> = None;
                let mut others = false;
                for b in branches {
                    let (r, o) = match b {
                        Value::Object(m) => self.string_side(self.resolve(m)?, depth + 1)?,
                        Value::Bool(true) => (Some(RawText::Any), true),
                        _ => (None, false),
                    };
                    raw = union(raw, r);
                    others |= o;
                }
                return Ok((raw, others));
            }
        }
        match s.get("type") {
            Some(Value::String(t)) => Ok(if t == "string" {
                (self.raw_text(s)?, false)
            } else {
                (None, true)
            }),
            Some(Value::Array(types)) => {
                let string = types.iter().any(|t| t == "string");
                let others = types.iter().any(|t| t != "string");
                let raw = if string { self.raw_text(s)? } else { None };
                Ok((raw, others))
            }
            Some(_) => Err(unsupported(
                self.tool,
                "`type` must be a string or an array",
            )),
            None => Ok((self.raw_text(s)?, true)),
        }
    }

    /// The raw text a schema admitting strings allows: its `minLength`, `maxLength` and
    /// `pattern` (`format` is not enforced); `None` when the bounds contradict each other.
    fn raw_text(&self, s: &Map<String, Value>) -> GrammarResult<Option<RawText>> {
        let count = |key: &str| -> GrammarResult<Option<u64>> {
            let Some(v) = s.get(key) else {
                return Ok(None);
            };
            let n = v.as_u64().or_else(|| {
                v.as_f64()
                    .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < u64::MAX as f64)
                    .map(|f| f as u64)
            });
            n.map(Some).ok_or_else(|| {
                unsupported(
                    self.tool,
                    format!("`{key}` must be a non-negative integer, not {v}"),
                )
            })
        };
        let min_length = count("minLength")?.unwrap_or(0);
        let max_length = count("maxLength")?;
        let regex = match s.get("pattern") {
            None => None,
            Some(Value::String(p)) => Some(
                search_regex(p)
                    .map_err(|e| unsupported(self.tool, format!("`pattern` {p:?}: {e}")))?,
            ),
            Some(_) => return Err(unsupported(self.tool, "`pattern` must be a string")),
        };
        if max_length.is_some_and(|m| m < min_length) {
            return Ok(None);
        }
        if min_length == 0 && max_length.is_none() && regex.is_none() {
            return Ok(Some(RawText::Any));
        }
        Ok(Some(RawText::Bounded(vec![TextBounds {
            min_length,
            max_length,
            regex,
        }])))
    }

    /// `s` as a self-contained schema for a `string="false"` value: the root's definitions
    /// copied in, and a string-or-other `type` list narrowed to the other types.
    fn json_schema(&self, s: &Map<String, Value>) -> Value {
        let mut out = s.clone();
        if let Some(Value::Array(types)) = out.get("type") {
            let rest: Vec<Value> = types.iter().filter(|t| *t != "string").cloned().collect();
            out.insert("type".to_owned(), Value::Array(rest));
        }
        for (k, v) in self.defs() {
            out.entry(k).or_insert(v);
        }
        Value::Object(out)
    }
}

fn lookup<'a>(root: &'a Map<String, Value>, pointer: &str) -> Option<&'a Map<String, Value>> {
    let mut parts = pointer.split('/').skip(1);
    let first = parts.next()?;
    let mut cur = root.get(&unescape(first))?;
    for p in parts {
        cur = match cur {
            Value::Object(m) => m.get(&unescape(p))?,
            Value::Array(a) => a.get(unescape(p).parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    cur.as_object()
}

fn unescape(part: &str) -> String {
    part.replace("~1", "/").replace("~0", "~")
}

fn union(a: Option<RawText>, b: Option<RawText>) -> Option<RawText> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some(RawText::Any), _) | (_, Some(RawText::Any)) => Some(RawText::Any),
        (Some(RawText::OneOf(mut x)), Some(RawText::OneOf(y))) => {
            for v in y {
                if !x.contains(&v) {
                    x.push(v);
                }
            }
            Some(RawText::OneOf(x))
        }
        (Some(RawText::Bounded(mut x)), Some(RawText::Bounded(y))) => {
            for v in y {
                if !x.contains(&v) {
                    x.push(v);
                }
            }
            Some(RawText::Bounded(x))
        }
        (Some(RawText::OneOf(strings)), Some(RawText::Bounded(mut bounds)))
        | (Some(RawText::Bounded(mut bounds)), Some(RawText::OneOf(strings))) => {
            bounds.extend(strings.iter().map(|v| TextBounds {
                min_length: 0,
                max_length: None,
                regex: Some(crate::lark::regex_escaped(v)),
            }));
            Some(RawText::Bounded(bounds))
        }
    }
}

/// A JSON Schema `pattern` (ECMA-262 syntax, matched *anywhere* in the string) as an
/// llguidance regex the whole string must match: each top-level alternative gets `(?s:.*)`
/// before it unless it starts with `^`, and after it unless it ends with `$`; `\d` and `\w`
/// keep their ASCII meaning (llguidance's `regex_to_lark`, as its JSON compiler reads
/// patterns). Refused: `^` / `$` anywhere else, `[]` / `[^]` (which differ between the two
/// syntaxes), unbalanced groups, and whatever llguidance's regex syntax lacks (look-arounds,
/// back-references).
pub fn search_regex(pattern: &str) -> Result<String, String> {
    let mut branches: Vec<std::ops::Range<usize>> = Vec::new();
    let mut anchors: Vec<usize> = Vec::new();
    let (mut depth, mut class, mut escaped, mut start) = (0usize, false, false, 0usize);
    let mut prev: Option<char> = None;
    for (i, c) in pattern.char_indices() {
        let before = prev;
        prev = Some(c);
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '[' if !class => class = true,
            ']' if class => {
                if before == Some('[') || (before == Some('^') && pattern[..i].ends_with("[^")) {
                    return Err("`[]` and `[^]` are not supported".to_owned());
                }
                class = false;
            }
            '(' if !class => depth += 1,
            ')' if !class => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| "unbalanced `)`".to_owned())?;
            }
            '|' if !class && depth == 0 => {
                branches.push(start..i);
                start = i + 1;
            }
            '^' | '$' if !class => anchors.push(i),
            _ => {}
        }
    }
    if escaped || class || depth != 0 {
        return Err("unterminated escape, class or group".to_owned());
    }
    branches.push(start..pattern.len());
    let mut out: Vec<String> = Vec::with_capacity(branches.len());
    for b in branches {
        let mut body = &pattern[b.clone()];
        let anchored_start = anchors.contains(&b.start) && body.starts_with('^');
        if anchored_start {
            body = &body[1..];
        }
        let end = b.end.wrapping_sub(1);
        let anchored_end = b.end > b.start
            && anchors.contains(&end)
            && body.ends_with('$')
            && (!anchored_start || end > b.start);
        if anchored_end {
            body = &body[..body.len() - 1];
        }
        let used = |p: usize| (anchored_start && p == b.start) || (anchored_end && p == end);
        if anchors.iter().any(|&p| b.contains(&p) && !used(p)) {
            return Err(
                "`^` and `$` are supported only at the start and end of an alternative".to_owned(),
            );
        }
        let body = llguidance::regex_to_lark(body, "dw");
        out.push(format!(
            "(?:{}(?:{body}){})",
            if anchored_start { "" } else { "(?s:.*)" },
            if anchored_end { "" } else { "(?s:.*)" }
        ));
    }
    let regex = out.join("|");
    llguidance::derivre::RegexBuilder::new()
        .mk_regex(&regex)
        .map_err(|e| format!("not supported by the grammar's regex syntax ({e})"))?;
    Ok(regex)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(schema: Value) -> ToolParameters {
        ToolParameters::from_schema("t", &schema).unwrap()
    }

    #[test]
    fn strings_are_raw_and_the_rest_json() {
        let p = read(json!({"type": "object", "properties": {
            "s": {"type": "string"}, "n": {"type": "integer"},
            "e": {"enum": ["a", "b", 3]}, "u": {"type": ["string", "null"]}},
            "required": ["n"]}));
        assert_eq!(p.required, 1);
        let names: Vec<&str> = p.params.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["n", "s", "e", "u"]);
        assert_eq!(p.params[1].forms.raw, Some(RawText::Any));
        assert_eq!(p.params[1].forms.json, None);
        assert_eq!(p.params[0].forms.raw, None);
        assert_eq!(
            p.params[2].forms.raw,
            Some(RawText::OneOf(vec!["a".into(), "b".into()]))
        );
        assert!(p.params[2].forms.json.is_some());
        assert_eq!(
            p.params[3].forms.json.as_ref().unwrap()["type"],
            json!(["null"])
        );
        assert!(p.extra.is_some());
    }

    #[test]
    fn refs_resolve_and_definitions_travel_with_the_value_schema() {
        let p = read(json!({"type": "object", "additionalProperties": false,
            "$defs": {"Loc": {"type": "object", "properties": {"x": {"$ref": "#/$defs/N"}}},
                      "N": {"type": "number"}, "S": {"type": "string"}},
            "properties": {"loc": {"$ref": "#/$defs/Loc"}, "s": {"$ref": "#/$defs/S"}}}));
        assert!(p.extra.is_none());
        let loc = p.params[0].forms.json.as_ref().unwrap();
        assert!(loc.get("$defs").is_some());
        assert_eq!(p.params[1].forms.raw, Some(RawText::Any));
    }

    #[test]
    fn unsupported_schemas_are_refused_with_the_tool_named() {
        for bad in [
            json!("x"),
            json!({"properties": {"a": {"$ref": "https://x/y"}}}),
            json!({"properties": {"a": {"$ref": "#/$defs/missing"}}}),
            json!({"additionalProperties": false, "required": ["a"]}),
            json!({"properties": {"a": {"$ref": "#/properties/a"}}}),
        ] {
            let e = ToolParameters::from_schema("t", &bad).unwrap_err();
            assert!(e.to_string().contains("tool \"t\""), "{e}");
        }
        let many: Map<String, Value> = (0..65)
            .map(|i| (format!("p{i}"), json!({"type": "string"})))
            .collect();
        let e = ToolParameters::from_schema("t", &json!({"properties": many})).unwrap_err();
        assert!(e.to_string().contains("at most 64"), "{e}");
    }
}
