//! Helpers shared by the stream crate's integration tests.

use recipe_core::Tokenizer;
use recipe_stream::{InferenceChunk, StreamProcessor};
use serde_json::Value;

/// The real DeepSeek V4 tokenizer (`DEEPSEEK_TOKENIZER_JSON`), loaded once per test binary.
pub fn tokenizer() -> Tokenizer {
    static TOK: std::sync::OnceLock<Tokenizer> = std::sync::OnceLock::new();
    TOK.get_or_init(|| {
        let path = std::env::var("DEEPSEEK_TOKENIZER_JSON").unwrap_or_else(|_| {
            panic!("set DEEPSEEK_TOKENIZER_JSON to the path of the DeepSeek V4 tokenizer.json (from the deepseek-tokenizer package)")
        });
        Tokenizer::from_file(&path).unwrap_or_else(|e| panic!("cannot load tokenizer {path}: {e}"))
    })
    .clone()
}

/// Pushes `ids` with a log probability of -1 (and no alternatives) for each; the chunks as JSON.
#[allow(dead_code)] // (not every test binary that includes this module pushes log probabilities)
pub fn push_with_logprobs(sp: &mut StreamProcessor, ids: Vec<u32>) -> Vec<Value> {
    let logprobs = ids.iter().map(|_| (-1.0, Vec::new())).collect();
    let items = sp
        .push(InferenceChunk::Tokens {
            token_ids: ids,
            logprobs: Some(logprobs),
        })
        .unwrap();
    items.into_iter().map(|i| i.to_value()).collect()
}

/// The tokens of a chunk's log probabilities (`choices[0].logprobs.content[].token`).
#[allow(dead_code)]
pub fn logprob_tokens(chunk: &Value) -> Vec<String> {
    chunk["choices"][0]["logprobs"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|lp| lp["token"].as_str().unwrap_or_default().to_owned())
        .collect()
}
