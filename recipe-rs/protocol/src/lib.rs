//! Request conversion: OpenAI Chat Completions, OpenAI Responses and Anthropic Messages bodies
//! become a model-neutral [`recipe_core::Conversation`] plus the sampling settings for the
//! backend ([`InferenceOptions`]) and the settings for the output parser
//! ([`recipe_core::ParsingOptions`]).
//!
//! Each format has a typed request (`chat::ChatCompletionRequest`, …) read with serde from a JSON
//! value; shape errors are [`RequestError`]s, semantic rejections are [`ConversionError`]s with
//! an OpenAI-style error body.

pub mod body;
pub mod chat;
pub mod common;
pub mod driver;
pub mod error;
pub mod messages;
pub mod options;
pub mod request;
pub mod responses;
pub mod strict;

pub use error::{ConversionError, RequestError};
pub use options::{ConversionOptions, ReasoningContentBehavior, WebSearchBehavior};
pub use request::{ConversationRequest, InferenceOptions, OutputConstraint, OutputConstraintKind};
