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

/// What the raw text of a `string="true"` value may be.
#[derive(Clone, Debug, PartialEq)]
pub enum RawText {
    /// Any text (without control tokens or the DSML marker's spelling).
    Any,
    /// Exactly one of these strings (an `enum` or `const` of strings).
    OneOf(Vec<String>),
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
                (Some(RawText::Any), false)
            } else {
                (None, true)
            }),
            Some(Value::Array(types)) => {
                let string = types.iter().any(|t| t == "string");
                let others = types.iter().any(|t| t != "string");
                Ok((string.then_some(RawText::Any), others))
            }
            Some(_) => Err(unsupported(
                self.tool,
                "`type` must be a string or an array",
            )),
            None => Ok((Some(RawText::Any), true)),
        }
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
    }
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
