//! Methods that join request conversion (`protocol.rs`) and output processing (`stream.rs`):
//! the static `chunk_generator` of each request class and `ResponsesChunkGenerator.with_echo`.
//!
//! A generator takes from a converted request only what shapes its output: whether the
//! conversation is in thinking mode, and whether parsing starts in reasoning.

use pyo3::prelude::*;
use recipe_protocol::ConversationRequest;
use recipe_stream::generator::namespace_map_from_tools;
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

#[pymethods]
impl PyChatCompletionRequest {
    /// A Chat Completions generator for the converted `request`, writing chunks with `id` and
    /// `model`.
    #[staticmethod]
    fn chunk_generator(
        #[pyo3(from_py_with = crate::args::instance::<PyConversationRequest>)] request: PyRef<
            '_,
            PyConversationRequest,
        >,
        #[pyo3(from_py_with = crate::args::string)] id: String,
        #[pyo3(from_py_with = crate::args::string)] model: String,
    ) -> PyChatCompletionChunkGenerator {
        PyChatCompletionChunkGenerator {
            inner: Some(ChatGenerator::new(id, model, config(&request.inner))),
        }
    }
}

#[pymethods]
impl PyResponsesRequest {
    /// A Responses generator for the converted `request`. A request converted from a Responses
    /// body reports that body's settings (instructions, temperature, reasoning, tools, …) in
    /// its response objects; `with_echo` replaces them.
    #[staticmethod]
    fn chunk_generator(
        #[pyo3(from_py_with = crate::args::instance::<PyConversationRequest>)] request: PyRef<
            '_,
            PyConversationRequest,
        >,
        #[pyo3(from_py_with = crate::args::string)] id: String,
        #[pyo3(from_py_with = crate::args::string)] model: String,
    ) -> PyResponsesChunkGenerator {
        let mut generator = ResponsesGenerator::new(id, model, config(&request.inner));
        if let Some(echo) = &request.inner.responses_echo {
            // Calls into the request's namespace tools are reported by name and namespace.
            if let Some(tools) = &echo.tools {
                generator = generator.with_namespace_tool_map(namespace_map_from_tools(tools));
            }
            generator = generator.with_echo(echo.clone());
        }
        PyResponsesChunkGenerator {
            inner: Some(generator),
        }
    }
}

#[pymethods]
impl PyMessagesRequest {
    /// A Messages generator for the converted `request`.
    #[staticmethod]
    fn chunk_generator(
        #[pyo3(from_py_with = crate::args::instance::<PyConversationRequest>)] request: PyRef<
            '_,
            PyConversationRequest,
        >,
        #[pyo3(from_py_with = crate::args::string)] id: String,
        #[pyo3(from_py_with = crate::args::string)] model: String,
    ) -> PyMessagesChunkGenerator {
        PyMessagesChunkGenerator {
            inner: Some(MessagesGenerator::new(
                id,
                model,
                request.inner.conversation.thinking_mode,
            )),
        }
    }
}

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
        let g = self.take()?;
        Ok(PyResponsesChunkGenerator {
            inner: Some(g.with_echo(echo.inner.clone())),
        })
    }
}
