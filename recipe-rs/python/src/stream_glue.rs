//! What joins request conversion (`protocol.rs`) and output processing (`stream.rs`): the
//! generator each request class's static `chunk_generator` builds. (The method itself is
//! declared with its class: PyO3 takes one `#[pymethods]` block per class.)
//!
//! A generator takes from a converted request only what shapes its output: whether the
//! conversation is in thinking mode, whether parsing starts in reasoning, and (Responses) the
//! request settings its response objects report.

use recipe_protocol::ConversationRequest;
use recipe_stream::generator::{custom_tools_from_tools, namespace_map_from_tools};
use recipe_stream::{ChatGenerator, GeneratorConfig, MessagesGenerator, ResponsesGenerator};

use crate::protocol::PyConversationRequest;

fn config(request: &ConversationRequest) -> GeneratorConfig {
    GeneratorConfig {
        thinking_mode: request.conversation.thinking_mode,
        starts_in_reasoning: request
            .parsing_options
            .thinking_initial_stage
            .is_some_and(|s| s.starts_in_reasoning()),
    }
}

/// A protocol's generator for a converted request.
pub trait ForRequest {
    fn for_request(id: String, model: String, request: &ConversationRequest) -> Self;
}

impl ForRequest for ChatGenerator {
    /// A streamed request that did not ask for usage on every chunk gets it on the last only.
    fn for_request(id: String, model: String, request: &ConversationRequest) -> Self {
        let generator = ChatGenerator::new(id, model, config(request));
        if request.stream && !request.include_usage {
            generator.without_null_usage()
        } else {
            generator
        }
    }
}

impl ForRequest for ResponsesGenerator {
    /// A request converted from a Responses body reports that body's settings, calls into
    /// its namespace tools by name and namespace, and calls of its custom tools as
    /// `custom_tool_call` items.
    fn for_request(id: String, model: String, request: &ConversationRequest) -> Self {
        let mut generator = ResponsesGenerator::new(id, model, config(request));
        if let Some(echo) = &request.responses_echo {
            if let Some(tools) = &echo.tools {
                generator = generator
                    .with_namespace_tool_map(namespace_map_from_tools(tools))
                    .with_custom_tools(custom_tools_from_tools(tools));
            }
            generator = generator.with_echo(echo.clone());
        }
        generator
    }
}

impl ForRequest for MessagesGenerator {
    fn for_request(id: String, model: String, request: &ConversationRequest) -> Self {
        MessagesGenerator::new(id, model, request.conversation.thinking_mode)
    }
}

/// The generator of protocol `G` for a converted request, with `id` and `model` (what each
/// request class's static `chunk_generator` returns, declared with the class in `protocol.rs`).
pub fn generator_for<G: ForRequest>(
    id: String,
    model: String,
    request: &PyConversationRequest,
) -> G {
    G::for_request(id, model, &request.inner)
}
