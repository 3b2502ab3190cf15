//! Reading a request body: bytes → JSON value → typed request.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::RequestError;

/// Parse JSON text (serde_json's own 128-level nesting limit applies).
pub fn parse_json(bytes: &[u8]) -> Result<Value, RequestError> {
    serde_json::from_slice(bytes).map_err(|e| RequestError::Json(e.to_string()))
}

/// Deserialize a parsed value into a typed request.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, RequestError> {
    serde_json::from_value(value).map_err(|e| RequestError::Body(e.to_string()))
}

/// Parse and deserialize in one step.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, RequestError> {
    from_value(parse_json(bytes)?)
}

/// Deserialize helpers for fields whose accepted shapes serde cannot express with a derive.
pub(crate) mod de {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer};
    use serde_json::Value;

    /// A `content` that is either a string or a list of typed parts.
    #[derive(Debug)]
    pub enum StringOrList<T> {
        String(String),
        List(Vec<T>),
    }

    impl<'de, T: serde::de::DeserializeOwned> StringOrList<T> {
        pub fn deserialize_with<D: Deserializer<'de>>(d: D, message: &str) -> Result<Self, D::Error> {
            match Value::deserialize(d)? {
                Value::String(s) => Ok(StringOrList::String(s)),
                v @ Value::Array(_) => serde_json::from_value(v).map(StringOrList::List).map_err(D::Error::custom),
                _ => Err(D::Error::custom(message)),
            }
        }
    }
}
