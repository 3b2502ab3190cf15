//! Declared Responses tools: functions, namespaces (flattened into functions), the
//! `apply_patch` custom tool and the web search server tools.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};

use recipe_core::ModelVersion;

use crate::common::{self, DeclaredTool};
use crate::error::{reject, ConvResult};
use crate::options::{ConversionOptions, WebSearchBehavior};

/// The fixed function tool that stands in for the `apply_patch` custom tool (its text differs
/// slightly between model versions).
fn apply_patch_tool(version: ModelVersion) -> DeclaredTool {
    let text = match version {
        ModelVersion::DeepseekV4Pro => include_str!("../../data/apply_patch_tool_v4.json"),
        ModelVersion::DeepseekV41Flash => include_str!("../../data/apply_patch_tool.json"),
    };
    let data: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    DeclaredTool {
        name: "apply_patch".to_owned(),
        description: data
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned),
        parameters: data.get("parameters").cloned(),
        strict: None,
        defer_loading: false,
    }
}

pub(super) fn str_field(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key).and_then(Value::as_str).map(str::to_owned)
}

type NamespaceMap = BTreeMap<String, (String, String)>;

fn function_tool(
    obj: &Map<String, Value>,
    name: String,
    description: Option<String>,
) -> DeclaredTool {
    DeclaredTool {
        name,
        description,
        parameters: obj.get("parameters").filter(|p| !p.is_null()).cloned(),
        strict: obj.get("strict").and_then(Value::as_bool),
        defer_loading: false,
    }
}

/// The function tools a request declares, and the namespace map. With `names_only`, only the
/// name checks run (what `namespace_tool_map` reports).
pub(super) fn declared_tools(
    tools: &[Value],
    options: &ConversionOptions,
    version: ModelVersion,
    names_only: bool,
) -> ConvResult<(Vec<DeclaredTool>, NamespaceMap)> {
    let mut out = Vec::new();
    let mut taken = plain_function_names(tools);
    let mut map = NamespaceMap::new();
    for (i, tool) in tools.iter().enumerate() {
        let Some(obj) = tool.as_object() else {
            continue;
        };
        match obj.get("type").and_then(Value::as_str).unwrap_or("") {
            "function" => {
                let name = str_field(obj, "name").unwrap_or_default();
                common::check_tool_name(&name, &format!("tools[{i}].name"))?;
                out.push(function_tool(obj, name, str_field(obj, "description")));
            }
            "namespace" => {
                let ns = str_field(obj, "name").unwrap_or_default();
                common::check_tool_name(&ns, &format!("tools[{i}].name"))?;
                let ns_desc = str_field(obj, "description");
                let inner = obj
                    .get("tools")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut locals = std::collections::HashSet::new();
                for (j, t) in inner.iter().enumerate() {
                    let Some(t) = t.as_object() else { continue };
                    let kind = match t.get("type") {
                        Some(Value::String(k)) => k.as_str(),
                        Some(Value::Number(n)) if n.as_u64() == Some(0) => "function",
                        Some(Value::Number(n)) if n.as_u64() == Some(1) => "custom",
                        _ => "",
                    };
                    if kind == "custom" {
                        let name = str_field(t, "name").unwrap_or_default();
                        return reject(format!(
                            "Currently custom tools are not allowed inside a namespace. Found custom tool '{name}' in tools[{i}].tools[{j}]."
                        ));
                    }
                    if kind != "function" {
                        continue;
                    }
                    let local = str_field(t, "name").unwrap_or_default();
                    common::check_tool_name(&local, &format!("tools[{i}].tools[{j}].name"))?;
                    if !locals.insert(local.clone()) {
                        return reject("Tool names within a namespace must be unique.");
                    }
                    let rules = &version.profile().conversion;
                    let description = match (&ns_desc, str_field(t, "description")) {
                        (Some(n), d) if rules.namespace_description_prefixed && !n.is_empty() => {
                            Some(format!("{n}\n{}", d.unwrap_or_default()))
                        }
                        (_, d) => d,
                    };
                    let base = format!("{ns}{}{local}", rules.namespace_separator);
                    let full = free_name(base, &mut taken);
                    map.insert(full.clone(), (ns.clone(), local));
                    let tool = function_tool(t, full, description);
                    out.push(tool);
                }
            }
            "custom" => {
                let name = str_field(obj, "name").unwrap_or_default();
                if names_only {
                    continue;
                }
                if name != "apply_patch" {
                    return reject(format!(
                        "Unsupported custom tool: '{name}'. Only 'apply_patch' is supported."
                    ));
                }
                out.push(apply_patch_tool(version));
            }
            // Only the web search tool (`web_search`, `web_search_2025_08_26`) is refused; the
            // preview tool is left out even then, as the official package does.
            "web_search" | "web_search_2025_08_26"
                if !names_only && options.responses_web_search == WebSearchBehavior::Reject =>
            {
                return reject("Server tools are not supported");
            }
            _ => {}
        }
    }
    Ok((out, map))
}

/// The names of the plain (not namespaced) function tools: a flattened namespace name may not
/// take one of them.
fn plain_function_names(tools: &[Value]) -> HashSet<String> {
    tools
        .iter()
        .filter_map(Value::as_object)
        .filter(|o| o.get("type").and_then(Value::as_str) == Some("function"))
        .filter_map(|o| str_field(o, "name"))
        .collect()
}

/// `base`, or if that is taken (by a plain function or an earlier namespaced tool) the first of
/// `base_1`, `base_2`, … that is free, as the official package renames a repeated namespaced
/// tool; the name is then taken.
fn free_name(base: String, taken: &mut HashSet<String>) -> String {
    if taken.insert(base.clone()) {
        return base;
    }
    let mut k = 1;
    loop {
        let candidate = format!("{base}_{k}");
        if taken.insert(candidate.clone()) {
            return candidate;
        }
        k += 1;
    }
}
