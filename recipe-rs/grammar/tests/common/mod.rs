//! Shared helpers: the stock tokenizer's grammar vocabulary (built once per test binary),
//! request conversion, and feeding token IDs to a matcher.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use recipe_core::Tokenizer;
use recipe_grammar::{GrammarVocabulary, OutputGrammar};
use recipe_protocol::chat::ChatCompletionRequest;
use recipe_protocol::{ConversationRequest, ConversionOptions};
use serde_json::Value;

pub fn tokenizer() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| {
        let path = std::env::var("DEEPSEEK_TOKENIZER_JSON")
            .expect("DEEPSEEK_TOKENIZER_JSON points at the stock tokenizer.json");
        Tokenizer::from_file(path).expect("tokenizer loads")
    })
}

pub fn vocabulary() -> &'static Arc<GrammarVocabulary> {
    static V: OnceLock<Arc<GrammarVocabulary>> = OnceLock::new();
    V.get_or_init(|| GrammarVocabulary::from_tokenizer(tokenizer()).expect("vocabulary builds"))
}

pub fn chat(body: Value) -> ConversationRequest {
    ChatCompletionRequest::from_value(body)
        .expect("valid chat body")
        .convert(&ConversionOptions::default())
        .expect("request converts")
}

pub fn grammar(request: &ConversationRequest) -> OutputGrammar {
    OutputGrammar::compile(request, vocabulary(), None, None)
        .expect("grammar compiles")
        .expect("request has a constraint")
}

/// Token IDs of `text` with control-token spellings as their IDs.
pub fn ids(text: &str) -> Vec<u32> {
    tokenizer().encode_with_special(text).expect("encodes")
}

pub fn eos() -> u32 {
    vocabulary().eos()
}

/// Feed `ids` then EOS, checking each token against the mask too: `Ok` when all are accepted
/// and the matcher ends terminated, else the index of the first rejected token (`ids.len()` for
/// EOS).
pub fn run(grammar: &OutputGrammar, ids: &[u32]) -> Result<(), usize> {
    let mut m = grammar.matcher();
    let mut row = vec![0u32; m.mask_words()];
    for (i, &t) in ids.iter().chain(std::iter::once(&eos())).enumerate() {
        m.fill_bitmask(&mut row).expect("mask");
        let allowed = row[t as usize / 32] >> (t % 32) & 1 == 1;
        let accepted = m.accept_token(t).expect("accept");
        assert_eq!(
            allowed, accepted,
            "mask and accept_token disagree on token {t} at {i}"
        );
        if !accepted {
            return Err(i);
        }
    }
    assert!(
        m.is_terminated(),
        "EOS accepted but the matcher is not terminated"
    );
    Ok(())
}

/// The stock tokenizer plus `<｜System｜>` as ID 129280, which V4.1's header needs (as in the
/// core crate's tests).
pub fn system_tokenizer() -> Tokenizer {
    let path = std::env::var("DEEPSEEK_TOKENIZER_JSON").expect("DEEPSEEK_TOKENIZER_JSON");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["added_tokens"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
        "id": 129280, "content": "<｜System｜>", "single_word": false, "lstrip": false,
        "rstrip": false, "normalized": false, "special": true}));
    Tokenizer::from_json(&v.to_string()).expect("augmented tokenizer loads")
}
