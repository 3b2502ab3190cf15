//! Methods that join request conversion (`protocol.rs`) and output processing (`stream.rs`):
//! the static `chunk_generator` of each request class and `ResponsesChunkGenerator.with_echo`.
//!
//! A generator takes from a converted request only what shapes its output: whether the
//! conversation is in thinking mode, whether parsing starts in reasoning, and (Responses) the
//! request settings its response objects report.

use pyo3::prelude::*;
use recipe_protocol::ConversationRequest;
use recipe_stream::generator::{custom_tools_from_tools, namespace_map_from_tools};
use recipe_stream::{ChatGenerator, GeneratorConfig, MessagesGenerator, ResponsesGenerator};

use crate::protocol::{
    PyChatCompletionRequest, PyConversationRequest, PyMessagesRequest, PyResponsesEcho,
    PyResponsesRequest,
};
use crate::stream::{
    PyChatCompletionChunkGenerator, PyMessagesChunkGenerator, PyResponsesChunkGenerator,
};

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
trait ForRequest {
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

/// Declares the static `chunk_generator(request, id, model)` of one request class.
macro_rules! chunk_generator_method {
    ($(#[$doc:meta])* $request:ty => $py_generator:ident($generator:ty)) => {
        #[pymethods]
        impl $request {
            $(#[$doc])*
            #[staticmethod]
            fn chunk_generator(
                #[pyo3(from_py_with = crate::args::instance::<PyConversationRequest>)]
                request: PyRef<'_, PyConversationRequest>,
                #[pyo3(from_py_with = crate::args::string)] id: String,
                #[pyo3(from_py_with = crate::args::string)] model: String,
            ) -> $py_generator {
                $py_generator::new(<$generator>::for_request(id, model, &request.inner))
            }
        }
    };
}

chunk_generator_method!(
    /// A Chat Completions generator for the converted `request`, writing chunks with `id` and
    /// `model`.
    PyChatCompletionRequest => PyChatCompletionChunkGenerator(ChatGenerator)
);
chunk_generator_method!(
    /// A Responses generator for the converted `request`. A request converted from a Responses
    /// body reports that body's settings (instructions, temperature, reasoning, tools, …) in
    /// its response objects; `with_echo` replaces them.
    PyResponsesRequest => PyResponsesChunkGenerator(ResponsesGenerator)
);
chunk_generator_method!(
    /// A Messages generator for the converted `request`.
    PyMessagesRequest => PyMessagesChunkGenerator(MessagesGenerator)
);

#[pymethods]
impl PyResponsesChunkGenerator {
    /// Consume this generator; the new one reports `echo` (the request settings) in its
    /// response objects.
    fn with_echo(
        &mut self,
        #[pyo3(from_py_with = crate::args::instance::<PyResponsesEcho>)] echo: PyRef<
            '_,
            PyResponsesEcho,
        >,
    ) -> PyResult<Self> {
        self.map(|g| g.with_echo(echo.inner.clone()))
    }
}
