//! Why a grammar could not be built or a matcher could not go on.

/// A grammar that cannot be built for a request, or a matcher call that cannot be served.
///
/// Every variant is a refusal with a message for the caller (HTTP 400 in a server), never an
/// internal failure: a schema, regular expression or Lark text that llguidance refuses ends up
/// here with llguidance's own explanation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrammarError {
    /// A tool's parameter schema or a response schema that the grammar cannot express.
    #[error("unsupported schema: {0}")]
    UnsupportedSchema(String),
    /// The tokenizer lacks a control token the grammar needs, or spells it as several tokens.
    #[error("tokenizer: {0}")]
    Vocabulary(String),
    /// The request's constraint text (tool list, regex, schema) or the caller's Lark grammar is
    /// malformed, or llguidance refused the assembled grammar.
    #[error("invalid grammar: {0}")]
    Invalid(String),
    /// A matcher call with bad arguments (a bitmask of the wrong shape, an unknown token ID,
    /// rolling back more tokens than were accepted).
    #[error("{0}")]
    Matcher(String),
}

pub type GrammarResult<T> = Result<T, GrammarError>;
