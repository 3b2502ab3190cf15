//! The committed official fixtures (`tests/conformance/encoding/*.json`) must come out identical:
//! prompt, special ranges (code points), image sources, token IDs with the stock tokenizer and with
//! the `<｜System｜>`-augmented copy, and the same error messages.

mod common;

use common::*;
use recipe_core::conversation::ImageData;
use recipe_core::encoding::{Encoding, EncodingVersion};
use serde_json::Value;

fn image_record(src: &recipe_core::ImageSource) -> Value {
    let (kind, value) = match &src.data {
        ImageData::DataUrl(s) => ("data_url", s.clone()),
        ImageData::Url(s) => ("url", s.clone()),
        ImageData::Bytes(b) => ("bytes", b.iter().map(|x| format!("{x:02x}")).collect()),
    };
    serde_json::json!([kind, value, src.detail.as_str(), src.path])
}

#[test]
fn official_fixtures_match() {
    let json = tokenizer_json();
    let toks = [
        ("tokens", stock_tokenizer(&json)),
        ("tokens_sys", system_tokenizer(&json)),
    ];
    let cases = load_cases();
    assert!(
        cases.len() >= 150,
        "expected at least 150 fixture cases, found {}",
        cases.len()
    );
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in &cases {
        let name = case["name"].as_str().unwrap_or("?");
        let official = &case["official"];
        if official.get("construct_error").is_some() || case.get("raw").is_some() {
            continue; // construction and argument errors are checked by the Python tests
        }
        let conv = conversation(case);
        for (key, version) in [("v4", EncodingVersion::V4), ("v41", EncodingVersion::V41)] {
            let want = &official[key];
            if want["render_error"]["type"] == "PanicException" {
                continue; // the official renderer panics; ours renders (documented difference)
            }
            let enc = Encoding::new(version).with_special_tokens(special_tokens(case));
            let rendered = enc.render(&conv);
            checked += 1;
            if rendered.prompt() != want["prompt"].as_str().unwrap_or_default() {
                failures.push(format!(
                    "{name} {key}: prompt differs\n  official {:?}\n  ours     {:?}",
                    want["prompt"],
                    rendered.prompt()
                ));
                continue;
            }
            let ranges: Vec<Value> = rendered
                .special_char_ranges()
                .iter()
                .map(|(a, b)| serde_json::json!([a, b]))
                .collect();
            if Value::Array(ranges) != want["special_ranges"] {
                failures.push(format!("{name} {key}: special ranges differ"));
            }
            let imgs: Vec<Value> = rendered.image_sources.iter().map(image_record).collect();
            if Value::Array(imgs) != want["image_sources"] {
                failures.push(format!("{name} {key}: image sources differ"));
            }
            for (tname, tok) in &toks {
                let got = enc.clone().with_tokenizer(tok.clone()).encode(&conv);
                let w = &want[*tname];
                match (got, w.as_array()) {
                    (Ok(ids), Some(wids)) => {
                        let wids: Vec<u32> = wids
                            .iter()
                            .map(|x| x.as_u64().unwrap_or(u64::MAX) as u32)
                            .collect();
                        if ids != wids {
                            failures.push(format!(
                                "{name} {key} {tname}: {}",
                                token_diff(tok, &wids, &ids)
                            ));
                        }
                    }
                    (Err(e), None) => {
                        if w["error"]["type"] != "RuntimeError"
                            || w["error"]["message"] != e.to_string().as_str()
                        {
                            failures.push(format!(
                                "{name} {key} {tname}: error {e} vs official {}",
                                w["error"]
                            ));
                        }
                    }
                    (Ok(_), None) => failures.push(format!(
                        "{name} {key} {tname}: official failed with {}, ours encoded",
                        w["error"]
                    )),
                    (Err(e), Some(_)) => {
                        failures.push(format!("{name} {key} {tname}: ours failed: {e}"))
                    }
                }
            }
        }
    }
    assert!(checked > 300, "too few renderings checked: {checked}");
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
