//! Token-level grammars of a request's valid outputs, built from the encoder's own tables.
//!
//! A converted request says what its output must be (`InferenceOptions::output_constraint`:
//! tool calls, required tool calls, JSON, a regex). This crate turns that, the model version's
//! DSML dialect ([`recipe_core::profile::DsmlDialect`]) and the thinking state of the rendered
//! prompt into one llguidance grammar over token IDs, where the `｜DSML｜`, `</think>` and EOS
//! control tokens appear only as themselves, at the places the template puts them.
//!
//! Data flows one way:
//! [`plan`] (request → shape of the output) → [`schema`] (tool schemas → value forms) →
//! [`compile`] and [`dsml`] (shape → Lark text) → [`matcher`] (Lark → llguidance matcher over
//! the tokenizer's [`vocabulary`]); [`closing`] steers a matcher to a valid end before its token
//! budget runs out. [`structural_tag`] exports the same shape as an xgrammar
//! structural tag for engines that match with xgrammar.

pub mod closing;
pub mod compile;
pub mod dsml;
pub mod error;
pub mod lark;
pub mod matcher;
pub mod plan;
pub mod schema;
pub mod structural_tag;
pub mod vocabulary;

pub use error::{GrammarError, GrammarResult};
pub use matcher::{GrammarMatcher, OutputGrammar};
pub use plan::{Answer, CallsPlan, GrammarPlan, Start, ToolSpec};
pub use vocabulary::GrammarVocabulary;
