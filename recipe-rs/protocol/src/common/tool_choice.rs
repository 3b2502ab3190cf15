//! The tool choice of a request applied to its declared tools.

use recipe_core::ToolChoice;

use crate::common::tools::DeclaredTool;
use crate::error::{reject, ConvResult};

/// The tool choice of a request, before it is applied to the declared tools.
pub enum RequestToolChoice {
    Auto,
    None,
    Required,
    Named(String),
}

/// Apply a tool choice: `none` drops all tools, a named tool keeps only that one. Thinking mode
/// refuses `required` and a named tool.
pub fn apply_tool_choice(
    tools: Vec<DeclaredTool>,
    choice: Option<RequestToolChoice>,
    thinking: bool,
) -> ConvResult<(Vec<DeclaredTool>, ToolChoice)> {
    let choice = choice.unwrap_or(RequestToolChoice::Auto);
    if tools.is_empty() {
        let tc = match choice {
            RequestToolChoice::None => ToolChoice::None,
            _ => ToolChoice::Auto,
        };
        return Ok((tools, tc));
    }
    match choice {
        RequestToolChoice::Auto => Ok((tools, ToolChoice::Auto)),
        RequestToolChoice::None => Ok((Vec::new(), ToolChoice::None)),
        RequestToolChoice::Required => {
            if thinking {
                return reject(THINKING_REFUSES_CHOICE);
            }
            Ok((tools, ToolChoice::Required))
        }
        RequestToolChoice::Named(name) => {
            let Some(tool) = tools.into_iter().find(|t| t.name == name) else {
                return reject(format!(
                    "Invalid value for 'tool_call': no function named '{name}' was specified in the 'tools' parameter."
                ));
            };
            if thinking {
                return reject(THINKING_REFUSES_CHOICE);
            }
            Ok((vec![tool], ToolChoice::Required))
        }
    }
}

const THINKING_REFUSES_CHOICE: &str = "Thinking mode does not support this tool_choice";

/// `tool_choice: none` removes the tools before their schemas are checked for `type: object`
/// (their schemas still have to be valid JSON Schemas).
pub fn drop_tools_for_none(declared: &mut Vec<DeclaredTool>, choice: &Option<RequestToolChoice>) {
    if matches!(choice, Some(RequestToolChoice::None)) {
        declared.clear();
    }
}
