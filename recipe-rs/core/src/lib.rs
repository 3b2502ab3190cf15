//! DeepSeek V4 / V4.1 codec core.
//!
//! Data flows one way through these modules:
//! [`conversation`] (what was asked) → [`encoding`] (template → rendered spans) →
//! [`tokenizer`] (spans → token IDs, control tokens by ID only). [`check`] compares what another
//! encoder produced with that canonical result.
//! [`special_tokens`], [`parsing_options`] and [`responses_echo`] are shared vocabulary for the
//! protocol and stream crates; [`profile`] holds what differs between model versions, as data
//! that rendering and request conversion read.

pub mod check;
pub mod conversation;
pub mod conversation_json;
pub mod encoding;
pub mod parsing_options;
pub mod profile;
pub mod responses_echo;
pub mod special_tokens;
pub mod tokenizer;

pub use conversation::*;
pub use parsing_options::{ParsingOptions, ThinkingInitialStage};
pub use responses_echo::ResponsesEcho;
pub use special_tokens::{SpecialToken, SpecialTokens};
pub use tokenizer::Tokenizer;
