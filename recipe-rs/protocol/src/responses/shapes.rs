//! Shape checks of `tools` and `tool_choice`, with the messages a typed (internally tagged)
//! reading would give: both are kept as JSON values, so these run where the fields are read.

use serde_json::Value;

/// slightly between model versions).
/// Shape errors of a declared tool, as a typed (internally tagged) tool list reports them.
pub(super) fn check_tool_shape(tool: &Value) -> Result<(), String> {
    use crate::strict::unexpected;
    let obj = match tool {
        Value::Object(obj) => obj,
        // A list is read as the tag followed by the fields in order.
        Value::Array(items) => {
            return match items.first() {
                None => Err("missing field `type`".to_owned()),
                Some(Value::String(t)) => match t.as_str() {
                    "function" => Err(format!(
                        "invalid length {}, expected struct ResponsesFunctionTool with 4 elements",
                        items.len() - 1
                    )),
                    _ => Ok(()),
                },
                Some(v) => Err(format!(
                    "invalid type: {}, expected variant identifier",
                    unexpected(v)
                )),
            };
        }
        _ => {
            return Err(format!(
                "invalid type: {}, expected internally tagged enum ResponsesTool",
                unexpected(tool)
            ))
        }
    };
    let ty = match obj.get("type") {
        None => return Err("missing field `type`".to_owned()),
        Some(Value::String(s)) => s.as_str(),
        Some(v) => {
            return Err(format!(
                "invalid type: {}, expected variant identifier",
                unexpected(v)
            ))
        }
    };
    let string_field = |key: &str, required: bool| -> Result<(), String> {
        match obj.get(key) {
            None if required => Err(format!("missing field `{key}`")),
            None | Some(Value::Null) if !required => Ok(()),
            Some(Value::String(_)) => Ok(()),
            Some(v) => Err(format!(
                "invalid type: {}, expected a string",
                unexpected(v)
            )),
            None => Err(format!("missing field `{key}`")),
        }
    };
    let bool_field = |key: &str| -> Result<(), String> {
        match obj.get(key) {
            None | Some(Value::Null) | Some(Value::Bool(_)) => Ok(()),
            Some(v) => Err(format!(
                "invalid type: {}, expected a boolean",
                unexpected(v)
            )),
        }
    };
    match ty {
        "function" => {
            string_field("name", true)?;
            string_field("description", false)?;
            bool_field("strict")?;
        }
        "namespace" => {
            string_field("name", true)?;
            string_field("description", false)?;
            match obj.get("tools") {
                None => return Err("missing field `tools`".to_owned()),
                Some(Value::Array(items)) => {
                    for t in items {
                        if let Value::Array(seq) = t {
                            return match seq.first() {
                                None => Err("missing field `type`".to_owned()),
                                Some(Value::String(k)) if k == "function" || k == "custom" => Err(format!(
                                    "invalid length {}, expected struct ResponsesFunctionTool with 4 elements",
                                    seq.len() - 1
                                )),
                                Some(Value::String(k)) => Err(format!("unknown variant `{k}`, expected `function` or `custom`")),
                                Some(v) => Err(format!("invalid type: {}, expected variant identifier", unexpected(v))),
                            };
                        }
                        if !t.is_object() {
                            return Err(format!(
                                "invalid type: {}, expected internally tagged enum ResponsesNamespaceTool",
                                unexpected(t)
                            ));
                        }
                        match t.get("type") {
                            Some(Value::String(k)) if k == "function" || k == "custom" => {}
                            // Variant indexes: 0 is `function`, 1 is `custom`.
                            Some(Value::Number(n)) if n.as_u64().is_some() => {
                                let k = n.as_u64().unwrap_or(0);
                                if k > 1 {
                                    return Err(format!("invalid value: integer `{k}`, expected variant index 0 <= i < 2"));
                                }
                                let mut inner = t.clone();
                                if let Some(o) = inner.as_object_mut() {
                                    o.insert(
                                        "type".into(),
                                        Value::String(
                                            if k == 0 { "function" } else { "custom" }.into(),
                                        ),
                                    );
                                }
                                check_tool_shape(&inner)?;
                                continue;
                            }
                            Some(Value::String(k)) => {
                                return Err(format!(
                                    "unknown variant `{k}`, expected `function` or `custom`"
                                ))
                            }
                            None => return Err("missing field `type`".to_owned()),
                            Some(v) => {
                                return Err(format!(
                                    "invalid type: {}, expected variant identifier",
                                    unexpected(v)
                                ))
                            }
                        }
                        check_tool_shape(t)?;
                    }
                }
                Some(v) => {
                    return Err(format!(
                        "invalid type: {}, expected a sequence",
                        unexpected(v)
                    ))
                }
            }
        }
        "custom" => string_field("name", true)?,
        _ => {}
    }
    Ok(())
}

pub(super) fn check_tool_choice_shape(choice: &Value) -> Result<(), String> {
    const GENERIC: &str = "expected one of `none`, `auto`, `required` or a tool choice object";
    match choice {
        Value::Null => Ok(()),
        Value::String(s) if ["none", "auto", "required"].contains(&s.as_str()) => Ok(()),
        Value::Object(o) => match o.get("type") {
            Some(Value::String(t)) if t == "function" || t == "custom" => match o.get("name") {
                None => Err("missing field `name`".to_owned()),
                Some(Value::String(_)) => Ok(()),
                Some(v) => Err(format!("invalid type: {}, expected a string", crate::strict::unexpected(v))),
            },
            Some(Value::String(t)) if ["web_search", "web_search_2025_08_26"].contains(&t.as_str()) => Ok(()),
            Some(Value::String(t)) => Err(format!(
                "unknown variant `{t}`, expected one of `function`, `web_search`, `web_search_2025_08_26`, `custom`"
            )),
            Some(v) => Err(format!("invalid type: {}, expected variant identifier", crate::strict::unexpected(v))),
            _ => Err(GENERIC.to_owned()),
        },
        _ => Err(GENERIC.to_owned()),
    }
}
