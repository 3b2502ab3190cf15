//! The request settings a Responses response object reports back.

use serde_json::Value;

use recipe_core::ResponsesEcho;

use super::types::ResponsesRequest;

impl ResponsesRequest {
    /// The request settings a Responses response reports back.
    pub fn echo(&self) -> ResponsesEcho {
        ResponsesEcho {
            instructions: self.instructions.clone(),
            max_output_tokens: self.max_output_tokens.map(u64::from),
            temperature: self.temperature.map(f64::from).unwrap_or(1.0),
            top_p: self.top_p.map(f64::from).unwrap_or(1.0),
            top_logprobs: self.top_logprobs.map(u64::from).unwrap_or(0),
            user: self.user.clone(),
            reasoning: self.raw_reasoning.clone(),
            text: self.raw_text.clone(),
            tool_choice: self.tool_choice.clone().filter(|v| !v.is_null()),
            tools: self
                .tools
                .as_ref()
                .map(|tools| Value::Array(echo_tools(tools))),
        }
    }
}

/// The declared tools as a Responses response object reports them: each kind in its own
/// fixed shape (absent fields as `null`), and the kinds the response never lists
/// (`web_search_preview`, `file_search`, a bare `apply_patch`) left out.
fn echo_tools(tools: &[Value]) -> Vec<Value> {
    fn field(obj: &serde_json::Map<String, Value>, key: &str) -> Value {
        obj.get(key).cloned().unwrap_or(Value::Null)
    }
    fn function(obj: &serde_json::Map<String, Value>) -> Value {
        serde_json::json!({
            "type": "function",
            "name": field(obj, "name"),
            "description": field(obj, "description"),
            "parameters": field(obj, "parameters"),
            "strict": field(obj, "strict"),
        })
    }
    let mut out = Vec::new();
    for tool in tools {
        let Some(obj) = tool.as_object() else {
            continue;
        };
        match obj.get("type").and_then(Value::as_str) {
            Some("function") => out.push(function(obj)),
            Some("namespace") => {
                let inner: Vec<Value> = obj
                    .get("tools")
                    .and_then(Value::as_array)
                    .map(|ts| {
                        ts.iter()
                            .filter_map(Value::as_object)
                            .map(function)
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(serde_json::json!({
                    "type": "namespace",
                    "name": field(obj, "name"),
                    "description": field(obj, "description"),
                    "tools": inner,
                }));
            }
            Some("custom") => {
                out.push(serde_json::json!({"type": "custom", "name": field(obj, "name")}))
            }
            Some("web_search") => {
                let location = match obj.get("user_location") {
                    Some(Value::Object(loc)) => serde_json::json!({
                        "city": field(loc, "city"),
                        "country": field(loc, "country"),
                        "region": field(loc, "region"),
                        "timezone": field(loc, "timezone"),
                    }),
                    _ => Value::Null,
                };
                out.push(serde_json::json!({
                    "type": "web_search",
                    "search_context_size": field(obj, "search_context_size"),
                    "user_location": location,
                }));
            }
            _ => {}
        }
    }
    out
}
