//! Settings that tell the output parser (`recipe-stream`) how the model's answer begins and
//! what to look for in it. Protocol conversion derives them from the request.

use crate::special_tokens::SpecialTokens;

/// Where parsing begins when thinking mode is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThinkingInitialStage {
    /// A new assistant turn: reasoning first, leading newlines dropped.
    ReasoningStart,
    /// A prefix continuation still inside its reasoning; leading newlines kept.
    ReasoningContinuation,
    /// A prefix continuation whose reasoning already ended; leading newlines kept.
    ContentContinuation,
}

impl ThinkingInitialStage {
    pub fn starts_in_reasoning(self) -> bool {
        !matches!(self, ThinkingInitialStage::ContentContinuation)
    }

    pub fn name(self) -> &'static str {
        match self {
            ThinkingInitialStage::ReasoningStart => "ReasoningStart",
            ThinkingInitialStage::ReasoningContinuation => "ReasoningContinuation",
            ThinkingInitialStage::ContentContinuation => "ContentContinuation",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ParsingOptions {
    pub parse_tool_calls: bool,
    pub starts_in_tool_calls: bool,
    pub parse_json_output: bool,
    /// `None` means thinking mode is off.
    pub thinking_initial_stage: Option<ThinkingInitialStage>,
    pub stop_sequences: Vec<String>,
    pub special_tokens: SpecialTokens,
}

impl Default for ParsingOptions {
    fn default() -> Self {
        ParsingOptions {
            parse_tool_calls: true,
            starts_in_tool_calls: false,
            parse_json_output: false,
            thinking_initial_stage: None,
            stop_sequences: Vec::new(),
            special_tokens: SpecialTokens::default(),
        }
    }
}
