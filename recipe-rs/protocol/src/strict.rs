//! Strict function schemas: the subset of JSON Schema that strict tools and strict response
//! formats may use, normalised so that every object is closed (`additionalProperties: false`)
//! and lists all of its properties as required.
//!
//! A schema is rebuilt from the recognised keywords of its kind, in a fixed key order; keywords
//! outside the subset are dropped. Depth is bounded by the JSON parser (128 levels).

use serde_json::{Map, Value};

use crate::error::{reject, ConvResult};

const PREFIX: &str = "Invalid tool parameters schema : ";
const RESPONSE_PREFIX: &str = "Invalid json schema: ";

thread_local! {
    /// The message prefix of shape errors: tool parameters and response schemas differ.
    static ERROR_PREFIX: std::cell::Cell<&'static str> = const { std::cell::Cell::new(PREFIX) };
}

fn schema_err<T>(msg: impl std::fmt::Display) -> ConvResult<T> {
    let prefix = ERROR_PREFIX.with(|p| p.get());
    reject(format!("{prefix}{msg}"))
}

/// Normalise a strict response-format schema (any kind of schema at the top level).
pub fn normalize_response_schema(schema: Value) -> ConvResult<Value> {
    if non_object_top_level(Some(&schema)) {
        return reject("The top level of the json schema must be an object.");
    }
    ERROR_PREFIX.with(|p| p.set(RESPONSE_PREFIX));
    let out = normalize(&schema, false);
    ERROR_PREFIX.with(|p| p.set(PREFIX));
    out
}

/// How serde describes an unexpected JSON value ("string \"x\"", "integer `5`", "map").
pub(crate) fn unexpected(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                format!("integer `{u}`")
            } else if let Some(i) = n.as_i64() {
                format!("integer `{i}`")
            } else {
                let f = n.as_f64().unwrap_or(0.0);
                format!("floating point `{}`", serde_json_float(f))
            }
        }
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "sequence".to_owned(),
        Value::Object(_) => "map".to_owned(),
    }
}

/// serde's `Unexpected::Float` display: integral floats keep a trailing `.0`.
fn serde_json_float(f: f64) -> String {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e16 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

fn invalid_type<T>(v: &Value, expected: &str) -> ConvResult<T> {
    schema_err(format!(
        "invalid type: {}, expected {expected}",
        unexpected(v)
    ))
}

fn get_string(obj: &Map<String, Value>, key: &str) -> ConvResult<Option<Value>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::String(_)) => Ok(Some(v.clone())),
        Some(v) => invalid_type(v, "a string"),
    }
}

fn get_number(obj: &Map<String, Value>, key: &str) -> ConvResult<Option<Value>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Number(_)) => Ok(Some(v.clone())),
        Some(v) => invalid_type(v, "a JSON number"),
    }
}

const TYPES: [&str; 7] = [
    "object", "string", "number", "integer", "boolean", "array", "null",
];
const FORMATS: [&str; 5] = ["email", "hostname", "ipv4", "ipv6", "uuid"];

fn variant_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn check_type_name(v: &Value) -> ConvResult<&str> {
    match v {
        Value::String(s) => match TYPES.iter().find(|t| **t == s.as_str()) {
            Some(t) => Ok(t),
            None => schema_err(format!(
                "unknown variant `{s}`, expected one of {}",
                variant_list(&TYPES)
            )),
        },
        other => schema_err(format!(
            "invalid type: {}, expected variant identifier",
            unexpected(other)
        )),
    }
}

/// Whether a schema's top level names a known type other than `object`.
pub fn non_object_top_level(schema: Option<&Value>) -> bool {
    match schema.and_then(|s| s.get("type")) {
        Some(Value::String(t)) => t != "object" && TYPES.contains(&t.as_str()),
        // A well-formed list of types names scalar types only.
        Some(Value::Array(list)) => list
            .iter()
            .all(|t| matches!(t, Value::String(s) if ["string", "number", "integer", "boolean", "null"].contains(&s.as_str()))),
        _ => false,
    }
}

/// Normalise the parameters of a strict tool (or a strict response schema).
pub fn normalize_strict_schema(schema: Value) -> ConvResult<Value> {
    // A recognised type other than `object` at the top is rejected as such; anything else gets
    // the shape errors of the schema parser.
    if non_object_top_level(Some(&schema)) {
        return reject("The top level of the function parameters schema must be an object.");
    }
    normalize(&schema, true)
}

fn normalize(schema: &Value, root: bool) -> ConvResult<Value> {
    let Value::Object(obj) = schema else {
        return schema_err("one of `type`, `anyOf`, `$ref` field is required");
    };
    let mut out = Map::new();
    if let Some(ty) = obj.get("type") {
        if let Value::Array(list) = ty {
            // A list of types names scalar types only; its errors name the field.
            const SCALARS: [&str; 5] = ["string", "number", "integer", "boolean", "null"];
            for t in list {
                match t {
                    Value::String(s) if SCALARS.contains(&s.as_str()) => {}
                    Value::String(s) => {
                        return schema_err(format!(
                            "field `type`: unknown variant `{s}`, expected one of {}",
                            variant_list(&SCALARS)
                        ))
                    }
                    other => {
                        return schema_err(format!(
                            "field `type`: invalid type: {}, expected string or map",
                            unexpected(other)
                        ))
                    }
                }
            }
            out.insert("type".into(), ty.clone());
            match obj.get("description") {
                None | Some(Value::Null) => {}
                Some(d @ Value::String(_)) => {
                    out.insert("description".into(), d.clone());
                }
                Some(v) => {
                    return schema_err(format!(
                        "field `description`: invalid type: {}, expected a string",
                        unexpected(v)
                    ))
                }
            }
            return Ok(Value::Object(out));
        }
        let ty_name = check_type_name(ty)?;
        out.insert("type".into(), ty.clone());
        match ty_name {
            "object" => normalize_object(obj, &mut out, root)?,
            "string" => {
                if let Some(d) = get_string(obj, "description")? {
                    out.insert("description".into(), d);
                }
                if let Some(p) = get_string(obj, "pattern")? {
                    out.insert("pattern".into(), p);
                }
                match obj.get("format") {
                    None | Some(Value::Null) => {}
                    Some(Value::String(f)) => {
                        if !FORMATS.contains(&f.as_str()) {
                            return schema_err(format!(
                                "unknown variant `{f}`, expected one of {}",
                                variant_list(&FORMATS)
                            ));
                        }
                        out.insert("format".into(), Value::String(f.clone()));
                    }
                    Some(v) => return invalid_type(v, "a string"),
                }
                match obj.get("enum") {
                    None | Some(Value::Null) => {}
                    Some(v @ Value::Array(items)) => {
                        if let Some(bad) = items.iter().find(|i| !i.is_string()) {
                            return invalid_type(bad, "a string");
                        }
                        out.insert("enum".into(), v.clone());
                    }
                    Some(v) => return invalid_type(v, "a sequence"),
                }
            }
            "number" | "integer" => {
                if let Some(d) = get_string(obj, "description")? {
                    out.insert("description".into(), d);
                }
                for key in [
                    "minimum",
                    "maximum",
                    "exclusiveMinimum",
                    "exclusiveMaximum",
                    "multipleOf",
                ] {
                    if let Some(n) = get_number(obj, key)? {
                        out.insert(key.into(), n);
                    }
                }
            }
            "array" => {
                let items = match obj.get("items") {
                    None => return schema_err("missing field `items`"),
                    Some(i) => normalize(i, false)?,
                };
                out.insert("items".into(), items);
                if let Some(d) = get_string(obj, "description")? {
                    out.insert("description".into(), d);
                }
            }
            _ => {
                if let Some(d) = get_string(obj, "description")? {
                    out.insert("description".into(), d);
                }
            }
        }
        return Ok(Value::Object(out));
    }
    if let Some(any_of) = obj.get("anyOf").filter(|v| !v.is_null()) {
        let Value::Array(list) = any_of else {
            return invalid_type(any_of, "a sequence");
        };
        let mut items = Vec::with_capacity(list.len());
        for s in list {
            items.push(normalize(s, false)?);
        }
        out.insert("anyOf".into(), Value::Array(items));
        if let Some(d) = get_string(obj, "description")? {
            out.insert("description".into(), d);
        }
        return Ok(Value::Object(out));
    }
    if let Some(r) = obj.get("$ref").filter(|v| !v.is_null()) {
        let Value::String(_) = r else {
            return invalid_type(r, "a string");
        };
        out.insert("$ref".into(), r.clone());
        return Ok(Value::Object(out));
    }
    schema_err("one of `type`, `anyOf`, `$ref` field is required")
}

fn normalize_object(
    obj: &Map<String, Value>,
    out: &mut Map<String, Value>,
    root: bool,
) -> ConvResult<()> {
    let props = match obj.get("properties") {
        None | Some(Value::Null) => {
            if !root {
                return reject("An object with no properties is not allowed.");
            }
            Map::new()
        }
        Some(Value::Object(p)) => {
            if p.is_empty() && !root {
                return reject("An object with no properties is not allowed.");
            }
            p.clone()
        }
        Some(v) => return invalid_type(v, "a map"),
    };
    match obj.get("additionalProperties") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => return reject("additionalProperties should not be true"),
        Some(v) => return invalid_type(v, "a boolean"),
    }
    let mut normalized = Map::new();
    for (k, v) in &props {
        normalized.insert(k.clone(), normalize(v, false)?);
    }
    match obj.get("required") {
        None | Some(Value::Null) => {}
        Some(Value::Array(req)) => {
            let mut seen = std::collections::HashSet::new();
            for r in req {
                let Value::String(name) = r else {
                    return invalid_type(r, "a string");
                };
                if !props.contains_key(name) {
                    return reject(format!("Required property '{name}' not found in object"));
                }
                if !seen.insert(name.as_str()) {
                    return reject(format!("Duplicate required property '{name}'"));
                }
            }
            if seen.len() != props.len() {
                return reject("Required properties must match all properties in the object");
            }
        }
        Some(v) => return invalid_type(v, "a sequence"),
    }
    let required: Vec<Value> = props.keys().map(|k| Value::String(k.clone())).collect();
    out.insert("properties".into(), Value::Object(normalized));
    out.insert("additionalProperties".into(), Value::Bool(false));
    out.insert("required".into(), Value::Array(required));
    if let Some(d) = get_string(obj, "description")? {
        out.insert("description".into(), d);
    }
    Ok(())
}
