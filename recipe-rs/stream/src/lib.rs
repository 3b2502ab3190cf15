//! Backend output → protocol output.
//!
//! The flow is one way: [`processor::StreamProcessor`] decodes backend chunks (text, or token IDs
//! with the control tokens recognised by ID), feeds the single incremental [`parser::Parser`], and
//! hands its events to a per-protocol [`generator::Generator`] that writes Chat Completions
//! chunks, Responses events or Messages events. [`accumulate`] folds those back into complete
//! responses, and [`sse`] frames them for a server.

pub mod accumulate;
pub mod generator;
pub mod input;
pub mod json_output;
pub mod parser;
pub mod processor;
pub mod sse;

pub use accumulate::{ChatCompletionResponse, MessagesResponse, ResponsesResponse};
pub use generator::{
    ChatChunk, ChatGenerator, FinishKind, Generator, GeneratorConfig, MessagesEvent,
    MessagesGenerator, ResponsesEvent, ResponsesGenerator, StreamItem, Usage, WireJson,
};
pub use input::{
    IdLogprob, InferenceChunk, InferenceFinishReason, PromptUsage, TokenLogprob, TopLogprob,
};
pub use processor::{StreamError, StreamProcessor};
