//! Which model a request names, and whether (and how hard) it thinks.

use serde::Deserialize;

use recipe_core::{ModelVersion, ReasoningEffort};

use crate::error::{reject, ConvResult};
use crate::options::ConversionOptions;

/// Reasoning-effort names a request may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestEffort {
    None,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
    Ultra,
    Max,
}

impl RequestEffort {
    fn level(self) -> Option<ReasoningEffort> {
        match self {
            RequestEffort::None => None,
            RequestEffort::Minimal | RequestEffort::Low => Some(ReasoningEffort::Low),
            RequestEffort::Medium | RequestEffort::High => Some(ReasoningEffort::High),
            RequestEffort::Xhigh => Some(ReasoningEffort::XHigh),
            RequestEffort::Ultra | RequestEffort::Max => Some(ReasoningEffort::Max),
        }
    }
}

/// Thinking mode and effort from an explicit switch, an effort name and the server default.
pub fn resolve_thinking(
    switch: Option<bool>,
    effort: Option<RequestEffort>,
    default: bool,
) -> (bool, Option<ReasoningEffort>) {
    let thinking = match switch {
        Some(on) => on,
        None => match effort {
            Some(RequestEffort::None) => false,
            Some(_) => true,
            None => default,
        },
    };
    if !thinking {
        return (false, None);
    }
    (
        true,
        Some(
            effort
                .and_then(RequestEffort::level)
                .unwrap_or(ReasoningEffort::High),
        ),
    )
}

pub fn resolve_model(options: &ConversionOptions, model: &str) -> ConvResult<ModelVersion> {
    match options.model_version(model) {
        Some(v) => Ok(v),
        None => {
            let names: Vec<&str> = options
                .model_versions_by_name
                .keys()
                .map(String::as_str)
                .collect();
            reject(format!(
                "The supported API model names are {}, but you passed {model}.",
                names.join(", ")
            ))
        }
    }
}
