//! Conversion policy chosen by the server operator, not by the request.

use std::collections::BTreeMap;

use recipe_core::{ModelVersion, SpecialTokens};

/// What to do with an assistant turn that lacks reasoning content in thinking mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReasoningContentBehavior {
    /// Use an empty reasoning.
    #[default]
    FillEmpty,
    /// Reject tool-call turns after the last user message that lack reasoning.
    Reject,
}

/// What to do with web-search tools, choices and server-tool blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebSearchBehavior {
    Drop,
    Reject,
}

pub const DEFAULT_MAX_TOKENS_UPPER_BOUND: u32 = 393_216;

/// Conversion settings shared by the three request formats.
#[derive(Clone, Debug, PartialEq)]
pub struct ConversionOptions {
    pub default_thinking_mode: bool,
    pub reasoning_content_behavior: ReasoningContentBehavior,
    pub responses_web_search: WebSearchBehavior,
    pub messages_web_search: WebSearchBehavior,
    pub thinking_max_tokens_upper_bound: u32,
    pub non_thinking_max_tokens_upper_bound: u32,
    pub special_tokens: SpecialTokens,
    /// Accepted request model names (sorted, the order error messages list them in).
    pub model_versions_by_name: BTreeMap<String, ModelVersion>,
}

impl Default for ConversionOptions {
    fn default() -> Self {
        ConversionOptions {
            default_thinking_mode: true,
            reasoning_content_behavior: ReasoningContentBehavior::FillEmpty,
            responses_web_search: WebSearchBehavior::Drop,
            messages_web_search: WebSearchBehavior::Reject,
            thinking_max_tokens_upper_bound: DEFAULT_MAX_TOKENS_UPPER_BOUND,
            non_thinking_max_tokens_upper_bound: DEFAULT_MAX_TOKENS_UPPER_BOUND,
            special_tokens: SpecialTokens::default(),
            model_versions_by_name: BTreeMap::from([
                ("DeepSeek-V4-Pro".to_owned(), ModelVersion::DeepseekV4Pro),
                (
                    "DeepSeek-V4.1-Flash".to_owned(),
                    ModelVersion::DeepseekV41Flash,
                ),
            ]),
        }
    }
}

impl ConversionOptions {
    /// Accept `model` as a name of `version` (replacing the version of an existing name).
    pub fn with_model_alias(mut self, model: impl Into<String>, version: ModelVersion) -> Self {
        self.model_versions_by_name.insert(model.into(), version);
        self
    }

    /// The version a request model name maps to (exact, case-sensitive match).
    pub fn model_version(&self, model: &str) -> Option<ModelVersion> {
        self.model_versions_by_name.get(model).copied()
    }

    pub fn max_tokens_upper_bound(&self, thinking: bool) -> u32 {
        if thinking {
            self.thinking_max_tokens_upper_bound
        } else {
            self.non_thinking_max_tokens_upper_bound
        }
    }
}
