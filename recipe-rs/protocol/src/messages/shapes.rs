//! Shape checks of declared Messages tools, with the messages a typed reading would give: the
//! tools are kept as JSON values, so these run where the field is read.

use serde_json::Value;

/// Field types of a declared tool, as the typed request would reject them. A tool with a
/// `type` is a server tool (or a `custom` one): its `type` and `name` must be strings. A tool
/// without one needs a string `name`.
pub(super) fn check_tool_shape(tool: &Value) -> Result<(), String> {
    use crate::strict::unexpected;
    let Value::Object(obj) = tool else {
        return Err("missing field `name`".to_owned());
    };
    if let Some(ty) = obj.get("type") {
        if !ty.is_string() {
            return Err(format!(
                "invalid type: {}, expected a string",
                unexpected(ty)
            ));
        }
        return match obj.get("name") {
            None | Some(Value::Null) | Some(Value::String(_)) => Ok(()),
            Some(v) => Err(format!(
                "invalid type: {}, expected a string",
                unexpected(v)
            )),
        };
    }
    if !obj.contains_key("name") {
        return Err("missing field `name`".to_owned());
    }
    field_type(obj, "name", Value::is_string, "a string")?;
    let optional_string = |v: &Value| v.is_null() || v.is_string();
    field_type(obj, "description", optional_string, "a string")?;
    let optional_bool = |v: &Value| v.is_null() || v.is_boolean();
    field_type(obj, "defer_loading", optional_bool, "a boolean")
}

/// `Ok` when `key` is absent or its value passes `accepts`; else the serde-style type error.
fn field_type(
    obj: &serde_json::Map<String, Value>,
    key: &str,
    accepts: impl Fn(&Value) -> bool,
    expected: &str,
) -> Result<(), String> {
    match obj.get(key) {
        Some(v) if !accepts(v) => Err(format!(
            "field `{key}`: invalid type: {}, expected {expected}",
            crate::strict::unexpected(v)
        )),
        _ => Ok(()),
    }
}
