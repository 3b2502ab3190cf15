//! Response formats: the format a request asks for, its schema check, and the "json" rule of
//! `json_object`.

use serde_json::Value;

use recipe_core::{Message, ResponseFormat};

use crate::common::schema::schema_error;
use crate::error::{reject, ConvResult};

/// A non-strict response-format schema must compile as a JSON Schema.
pub fn check_response_schema(schema: &Value) -> ConvResult<()> {
    match schema_error(schema) {
        Some(m) => reject(format!("Invalid json schema: {m}")),
        None => Ok(()),
    }
}

/// Whether the text of the messages mentions "json" (any case), as json_object requires.
pub fn mentions_json(messages: &[Message]) -> bool {
    messages
        .iter()
        .any(|m| m.content().to_ascii_lowercase().contains("json"))
}

pub const JSON_WORD_REQUIRED: &str =
    "Prompt must contain the word 'json' in some form to use 'response_format' of type 'json_object'.";

/// The response format a request asks for, before its schema is checked.
pub enum RequestedFormat {
    Text,
    JsonObject,
    JsonSchema { schema: Value, strict: bool },
    Regex(String),
}

impl RequestedFormat {
    pub fn is_json_object(&self) -> bool {
        matches!(self, RequestedFormat::JsonObject)
    }

    /// Check a json_schema format's schema: a strict one is normalised (its compact JSON is
    /// returned as the output constraint), a non-strict one must compile.
    pub fn check_schema(&self) -> ConvResult<Option<String>> {
        match self {
            RequestedFormat::JsonSchema {
                schema,
                strict: true,
            } => Ok(Some(
                crate::strict::normalize_response_schema(schema.clone())?.to_string(),
            )),
            RequestedFormat::JsonSchema { schema, .. } => {
                check_response_schema(schema)?;
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// The conversation's response format and the constraint text of a json_schema format
    /// (`strict_constraint` from [`RequestedFormat::check_schema`]).
    pub fn into_conversation(
        self,
        strict_constraint: Option<String>,
    ) -> (ResponseFormat, Option<String>) {
        match self {
            RequestedFormat::Text => (ResponseFormat::Text, None),
            RequestedFormat::JsonObject => (ResponseFormat::JsonObject, None),
            RequestedFormat::JsonSchema { schema, .. } => {
                let constraint = strict_constraint.unwrap_or_else(|| schema.to_string());
                (ResponseFormat::JsonSchema(schema), Some(constraint))
            }
            RequestedFormat::Regex(r) => (ResponseFormat::Regex(r), None),
        }
    }
}
