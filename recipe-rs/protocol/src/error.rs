//! The two ways a request can fail.
//!
//! * [`RequestError`]: the body is not JSON, or its JSON does not have the shape of the format
//!   (a wrong type, a missing field, an unknown enum value). Python sees a `ValueError`.
//! * [`ConversionError`]: the body has the right shape but asks for something the backend does
//!   not accept. It carries an HTTP status and an OpenAI-style error body.

use std::fmt;

/// A body that could not be read as a request of the expected format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// The bytes are not JSON (or nest deeper than the parser allows).
    Json(String),
    /// The JSON does not match the request schema.
    Body(String),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Json(m) => write!(f, "invalid JSON request: {m}"),
            RequestError::Body(m) => write!(f, "invalid request body: {m}"),
        }
    }
}

impl std::error::Error for RequestError {}

/// A semantic rejection of a well-formed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversionError {
    pub status_code: u16,
    pub message: String,
}

impl ConversionError {
    /// A 400 `invalid_request_error`.
    pub fn invalid(message: impl Into<String>) -> Self {
        ConversionError {
            status_code: 400,
            message: message.into(),
        }
    }

    /// The JSON error body an OpenAI-compatible server returns for this error.
    pub fn body(&self) -> String {
        let body = serde_json::json!({
            "error": {
                "message": self.message,
                "type": "invalid_request_error",
                "param": null,
                "code": "invalid_request_error",
            }
        });
        body.to_string()
    }
}

impl fmt::Display for ConversionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConversionError {}

pub type ConvResult<T> = Result<T, ConversionError>;

/// Shorthand for `Err(ConversionError::invalid(..))`.
pub(crate) fn reject<T>(message: impl Into<String>) -> ConvResult<T> {
    Err(ConversionError::invalid(message))
}
