//! Declared tools: names, parameter schemas, strict/non-strict rules, and the final list.

use serde_json::{Map, Value};

use recipe_core::ToolDefinition;

use crate::common::schema::schema_error;
use crate::error::{reject, ConvResult};

/// A tool as declared by a request, before validation.
pub struct DeclaredTool {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Option<Value>,
    pub strict: Option<bool>,
    pub defer_loading: bool,
}

pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The longest declared tool name, in UTF-8 bytes (the official package measures bytes, not
/// characters: 65 two-byte characters are "length 130").
pub const MAX_TOOL_NAME_BYTES: usize = 128;

/// Validate the name of `tools[i]` (`field` is the JSON path used in the message): not empty, at
/// most [`MAX_TOOL_NAME_BYTES`], then the name pattern (a long name with bad characters is "too
/// long"). A declared tool's name only: names in tool choices and past calls are not checked here.
pub fn check_tool_name(name: &str, field: &str) -> ConvResult<()> {
    if name.is_empty() {
        return reject(format!(
            "Invalid '{field}': empty string. Expected a string with minimum length 1, but got an empty string instead."
        ));
    }
    if name.len() > MAX_TOOL_NAME_BYTES {
        return reject(format!(
            "Invalid '{field}': string too long. Expected a string with maximum length {MAX_TOOL_NAME_BYTES}, but got a string with length {} instead.",
            name.len()
        ));
    }
    if !is_valid_tool_name(name) {
        return reject(format!(
            "Invalid '{field}': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
        ));
    }
    Ok(())
}

/// A non-strict tool's parameters must compile as a JSON Schema.
pub fn meta_check(name: &str, parameters: &Option<Value>) -> ConvResult<()> {
    let Some(p) = parameters else { return Ok(()) };
    match schema_error(p) {
        Some(m) => reject(format!("Invalid schema for function '{name}': {m}")),
        None => Ok(()),
    }
}

pub fn check_parameters(name: &str, parameters: &Option<Value>) -> ConvResult<()> {
    let Some(p) = parameters else { return Ok(()) };
    meta_check(name, parameters)?;
    let ty = p.get("type").cloned().unwrap_or(Value::Null);
    if ty != Value::String("object".into()) {
        return reject(format!(
            "Invalid schema for function '{name}': schema must be a JSON Schema of 'type: \"object\"', got 'type: {ty}'."
        ));
    }
    Ok(())
}

/// Validated tools: duplicates and strict/non-strict mixing rejected, strict schemas normalised.
pub struct Tools {
    pub tools: Vec<ToolDefinition>,
    /// Whether every tool is strict (and there is at least one).
    pub strict: bool,
}

/// A strict tool's schema is validated and normalised as soon as the tool is read.
pub fn declare_strict(tool: &mut DeclaredTool) -> ConvResult<()> {
    if tool.strict == Some(true) {
        if crate::strict::non_object_top_level(tool.parameters.as_ref()) {
            // Reported later, when the tool list is finished (and only if the tool is kept).
            return Ok(());
        }
        let schema = tool
            .parameters
            .take()
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
        tool.parameters = Some(crate::strict::normalize_strict_schema(schema)?);
    }
    Ok(())
}

/// Per tool, in order: names must be unique, and a non-strict tool needs an object schema
/// (strict tools are checked when they are normalised).
pub fn check_tools(declared: &mut [DeclaredTool]) -> ConvResult<()> {
    let mut seen = std::collections::HashSet::new();
    for t in declared.iter_mut() {
        if !seen.insert(t.name.clone()) {
            return reject("Tool names must be unique.");
        }
        if t.strict != Some(true) {
            check_parameters(&t.name, &t.parameters)?;
        } else if crate::strict::non_object_top_level(t.parameters.as_ref()) {
            return reject("The top level of the function parameters schema must be an object.");
        } else {
            declare_strict(t)?;
        }
    }
    Ok(())
}

/// Reject strict/non-strict mixing and normalise strict schemas.
pub fn finish_tools(declared: Vec<DeclaredTool>) -> ConvResult<Tools> {
    let n_strict = declared.iter().filter(|t| t.strict == Some(true)).count();
    if n_strict > 0 && n_strict != declared.len() {
        return reject("Cannot use strict tool with non-strict tool in the same request");
    }
    let strict = n_strict > 0;
    let mut tools = Vec::with_capacity(declared.len());
    for t in declared {
        // Strict schemas were normalised when the tool was declared (`declare_strict`).
        if strict && crate::strict::non_object_top_level(t.parameters.as_ref()) {
            return reject("The top level of the function parameters schema must be an object.");
        }
        let parameters = t.parameters.unwrap_or_else(|| Value::Object(Map::new()));
        tools.push(ToolDefinition {
            name: t.name,
            description: t.description,
            parameters,
            strict: t.strict,
            defer_loading: t.defer_loading,
        });
    }
    Ok(Tools { tools, strict })
}
