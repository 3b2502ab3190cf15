//! JSON Schema compilation, shared by tool parameters and response formats.

use serde_json::Value;

/// Why `schema` is not a usable JSON Schema: the first error the `jsonschema` crate reports
/// when it compiles the schema (meta-schema violations, unresolvable references), or `None`.
///
/// References are resolved offline only: a remote `$ref` is an error.
pub fn schema_error(schema: &Value) -> Option<String> {
    match jsonschema::options().offline().build(schema) {
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    }
}
