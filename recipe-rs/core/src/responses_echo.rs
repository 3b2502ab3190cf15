//! Request settings that an OpenAI Responses response object reports back.
//!
//! Produced by `recipe-protocol` from a Responses request, consumed by the Responses
//! generator of `recipe-stream`. It is plain data so neither crate depends on the other.

use serde_json::Value;

#[derive(Clone, Debug, PartialEq)]
pub struct ResponsesEcho {
    pub instructions: Option<String>,
    pub max_output_tokens: Option<u64>,
    /// The requested temperature (1.0 when absent), not the sampling temperature.
    pub temperature: f64,
    /// The requested top_p (1.0 when absent), not the sampling top_p.
    pub top_p: f64,
    pub top_logprobs: u64,
    pub user: Option<String>,
    /// The request's `reasoning`, `text`, `tool_choice` and `tools`, echoed as given
    /// (`None` when absent; the generator supplies the defaults the official package shows).
    pub reasoning: Option<Value>,
    pub text: Option<Value>,
    pub tool_choice: Option<Value>,
    pub tools: Option<Value>,
}

impl Default for ResponsesEcho {
    fn default() -> Self {
        ResponsesEcho {
            instructions: None,
            max_output_tokens: None,
            temperature: 1.0,
            top_p: 1.0,
            top_logprobs: 0,
            user: None,
            reasoning: None,
            text: None,
            tool_choice: None,
            tools: None,
        }
    }
}
