//! Per-position mask cost of the grammar on the benchmark's workload (profiling aid; the
//! benchmark proper is `benchmarks/grammar.py`).
//!
//!     DEEPSEEK_TOKENIZER_JSON=… cargo run --release -p recipe-grammar --example grammar_cost

use std::time::Instant;

use recipe_core::Tokenizer;
use recipe_grammar::{GrammarVocabulary, OutputGrammar};
use recipe_protocol::chat::ChatCompletionRequest;
use recipe_protocol::ConversionOptions;
use serde_json::{json, Value};

fn tools(n: usize) -> Value {
    let props = json!({"path": {"type": "string"}, "count": {"type": "integer"},
        "mode": {"enum": ["r", "w"]}, "flags": {"type": "array", "items": {"type": "boolean"}},
        "meta": {"type": "object", "properties": {"k": {"type": "number"}}}});
    Value::Array(
        (0..n)
            .map(|i| {
                json!({"type": "function", "function": {"name": format!("tool_{i}"),
                "description": format!("Tool {i}."), "parameters": {"type": "object",
                "properties": props, "required": ["path"]}}})
            })
            .collect(),
    )
}

fn output(n: usize) -> String {
    let call = |i: usize| {
        format!("\n<｜DSML｜ invoke name=\"tool_{i}\">\n<｜DSML｜ parameter name=\"path\" string=\"true\">src/main.rs</｜DSML｜ parameter>\n<｜DSML｜ parameter name=\"count\" string=\"false\">12</｜DSML｜ parameter>\n<｜DSML｜ parameter name=\"flags\" string=\"false\">[true, false]</｜DSML｜ parameter>\n</｜DSML｜ invoke>")
    };
    format!(
        "I will look at the file first and then write the result back.\n\n<｜DSML｜ calls>{}{}\n</｜DSML｜ calls>",
        call(0),
        call(n - 1)
    )
}

fn main() {
    let path = std::env::var("DEEPSEEK_TOKENIZER_JSON").expect("DEEPSEEK_TOKENIZER_JSON");
    let tok = Tokenizer::from_file(path).unwrap();
    let t = Instant::now();
    let vocab = GrammarVocabulary::from_tokenizer(&tok).unwrap();
    println!("vocabulary: {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
    let verbose = std::env::var("VERBOSE").is_ok();
    for n in [1usize, 50] {
        let body = json!({"model": "DeepSeek-V4.1-Flash", "messages": [{"role": "user",
            "content": "Do the work."}], "tools": tools(n), "thinking": {"type": "disabled"}});
        let req = ChatCompletionRequest::from_value(body)
            .unwrap()
            .convert(&ConversionOptions::default())
            .unwrap();
        let mut times = vec![];
        for _ in 0..7 {
            let t = Instant::now();
            let g = OutputGrammar::compile(&req, &vocab, None, None)
                .unwrap()
                .unwrap();
            times.push(t.elapsed().as_secs_f64() * 1e3);
            drop(g);
        }
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let g = OutputGrammar::compile(&req, &vocab, None, None)
            .unwrap()
            .unwrap();
        if verbose && n == 1 {
            println!("{}", g.lark());
        }
        let mut ids = tok.encode_with_special(&output(n)).unwrap();
        ids.push(vocab.eos());
        let mut m = g.matcher();
        let mut row = vec![0u32; m.mask_words()];
        let mut steps = vec![];
        for (i, &id) in ids.iter().enumerate() {
            let t = Instant::now();
            m.fill_bitmask(&mut row).unwrap();
            let us = t.elapsed().as_secs_f64() * 1e6;
            steps.push(us);
            if verbose && us > 50.0 {
                let s = tok.decode(&ids[i.saturating_sub(3)..i]).unwrap_or_default();
                println!("  pos {i} after {s:?}: {us:.0} us");
            }
            assert!(m.accept_token(id).unwrap(), "rejected {id} at {i}");
        }
        let mut sorted = steps.clone();
        sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let p = |q: f64| sorted[((q * sorted.len() as f64) as usize).min(sorted.len() - 1)];
        println!(
            "{n} tools: compile median {:.2} ms (min {:.2}); {} tokens: p50 {:.1} us, p99 {:.1} us, max {:.1} us",
            times[3],
            times[0],
            ids.len(),
            p(0.5),
            p(0.99),
            sorted[sorted.len() - 1]
        );
    }
}
