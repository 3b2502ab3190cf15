//! The plain-text shortcut (`tokenizer/fast.rs`) against the general `tokenizers` pipeline:
//! identical IDs on arbitrary text, on long line-structured text (cut and encoded in
//! parallel), and on every byte value; counting with the added vocabulary agrees with the full
//! encoding; and the shortcut is only taken for the supported shape.

mod common;

use common::*;
use proptest::prelude::*;
use recipe_core::Tokenizer;
use std::sync::OnceLock;

fn toks() -> &'static (Tokenizer, Tokenizer) {
    static T: OnceLock<(Tokenizer, Tokenizer)> = OnceLock::new();
    T.get_or_init(|| {
        let json = tokenizer_json();
        (stock_tokenizer(&json), system_tokenizer(&json))
    })
}

const CTRL: [&str; 12] = [
    "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>",
    "<think>",
    "</think>",
    "<｜System｜>",
    "<｜User｜>",
    "<｜Assistant｜>",
    "<｜latest_reminder｜>",
    "｜DSML｜",
    "<｜image｜>",
    "<｜ref｜>",
    "<｜/box｜>",
];

/// Characters from the classes the split expressions care about, edges of their ranges included.
fn interesting_char() -> impl Strategy<Value = char> {
    prop_oneof![
        // CJK ideographs and kana, and their range edges.
        (0x4E00u32..=0x9FA5).prop_map(|c| char::from_u32(c).unwrap()),
        (0x3040u32..=0x30FF).prop_map(|c| char::from_u32(c).unwrap()),
        prop::sample::select(vec![
            '\u{4DFF}', '\u{9FA6}', '\u{9FFF}', '\u{303F}', '\u{3100}', '々', '〆', 'ー', '・'
        ]),
        // Digits and other numbers.
        prop::sample::select(vec![
            '0', '1', '5', '9', '٣', '۷', '२', '²', '½', 'Ⅻ', '１', '①', '𝟗'
        ]),
        // Letters of several scripts.
        prop::sample::select(vec![
            'a', 'Z', 'q', 'é', 'ß', 'Ж', 'λ', 'ع', 'ש', 'ก', 'क', 'ㄱ', '한', 'ǅ'
        ]),
        // Combining marks, alone or after a letter.
        prop::sample::select(vec![
            '\u{0301}', '\u{0308}', '\u{0327}', '\u{20DD}', '\u{093F}', '\u{0E31}', '\u{FE0F}'
        ]),
        // Whitespace and line breaks.
        prop::sample::select(vec![
            ' ', ' ', '\t', '\n', '\r', '\u{0B}', '\u{0C}', '\u{85}', '\u{A0}', '\u{2028}',
            '\u{3000}', '\u{2009}'
        ]),
        // Punctuation and symbols.
        prop::sample::select(vec![
            '!', '"', '#', '$', '%', '&', '\'', '(', ')', '*', '+', ',', '-', '.', '/', ':', ';',
            '<', '=', '>', '?', '@', '[', '\\', ']', '^', '_', '`', '{', '|', '}', '~', '。', '、',
            '「', '」', '—', '…', '€', '©', '｜', '▁', '«'
        ]),
        // Emoji, joiners, format and control characters.
        prop::sample::select(vec![
            '😀',
            '👍',
            '\u{1F3FD}',
            '\u{200D}',
            '👩',
            '🚀',
            '\u{200B}',
            '\u{FEFF}',
            '\u{0}',
            '\u{7F}',
            '\u{1B}'
        ]),
        any::<char>(),
    ]
}

/// One stretch of text: a run of interesting characters, arbitrary Unicode, a common word or
/// number, or a control-token spelling.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::collection::vec(interesting_char(), 1..12).prop_map(|v| v.into_iter().collect()),
        2 => any::<String>().prop_map(|s| s.chars().take(16).collect()),
        2 => prop::sample::select(vec![
            "Hello", " world", " the", "don't", "I'm", "\r\n", "\n\n", "   ", " \n ", "12345", "3.14159", "2026-11-29",
            "人工智能", "ひらがなカタカナ", "日本語のテキスト", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "naïve café", "e\u{301}", "👩\u{200D}💻",
            "```python\n", "    return x\n", "{\"k\": [1, 2]}", "::", "...", "?!", "$100", "--flag", "\t\t",
        ]).prop_map(str::to_owned),
        1 => prop::sample::select(CTRL.to_vec()).prop_map(str::to_owned),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(), 0..24).prop_map(|v| v.concat())
}

/// Long text with line structure: fragments joined by line breaks, often followed by a
/// letter (the places where long texts are cut), tiled past the parallel threshold.
fn long_text() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(
            (
                fragment(),
                prop::sample::select(vec!["\n", "\nA", "\nthe ", "\r\nB", " ", "\n\n", "\n 1"]),
            ),
            1..40,
        ),
        0usize..7,
    )
        .prop_map(|(parts, skip)| {
            let unit: String = parts.iter().map(|(f, sep)| format!("{f}{sep}")).collect();
            let mut s = String::with_capacity(40 * 1024 + unit.len());
            let mut i = 0usize;
            while s.len() < 40 * 1024 {
                s.push_str(&unit);
                i += 1;
                // Vary the repeats a little so cuts do not always fall at the same offset.
                if i.is_multiple_of(skip + 2) {
                    s.push_str("\nword 12 ");
                }
            }
            s
        })
}

fn same(tok: &Tokenizer, text: &str) -> Result<(), TestCaseError> {
    let fast = tok
        .encode_ordinary(text)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let general = tok
        .encode_ordinary_general(text)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    if fast != general {
        let shown: String = text.chars().take(400).collect();
        return Err(TestCaseError::fail(format!(
            "text ({} bytes) starting {shown:?}\n{}",
            text.len(),
            token_diff(tok, &general, &fast)
        )));
    }
    // Counting with the added vocabulary goes through the shortcut too.
    let counted = tok
        .count_with_special(text)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let full = tok
        .encode_with_special(text)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(
        counted,
        full.len(),
        "count_with_special on text starting {:?}",
        text.chars().take(200).collect::<String>()
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn fast_path_matches_general_pipeline(t in text()) {
        let (stock, system) = toks();
        same(stock, &t)?;
        same(system, &t)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn fast_path_matches_general_pipeline_on_long_text(t in long_text()) {
        same(&toks().0, &t)?;
    }
}

#[test]
fn shortcut_is_used_for_the_deepseek_tokenizer() {
    let (stock, system) = toks();
    for tok in [stock, system] {
        assert!(
            tok.uses_fast_path(),
            "the V4 tokenizer should take the fast path"
        );
        assert!(
            tok.fast_path_cuts_lines(),
            "the V4 split expressions should allow parallel cuts"
        );
    }
}

/// Every byte value that UTF-8 can contain, as a lead or continuation byte, in a piece of its
/// own and inside a word: the byte table of the shortcut agrees with the pipeline's.
#[test]
fn every_byte_value_maps_like_the_pipeline() {
    let tok = &toks().0;
    let mut chars: Vec<char> = (0u32..0x800).filter_map(char::from_u32).collect();
    // Lead bytes 0xE0..=0xEF and 0xF0..=0xF4.
    chars.extend(
        (0xE0u32..=0xEF)
            .map(|b| (b - 0xE0) << 12)
            .map(|c| c.max(0x800))
            .filter_map(char::from_u32),
    );
    chars.extend(
        [0x10000u32, 0x40000, 0x80000, 0xC0000, 0x100000]
            .into_iter()
            .filter_map(char::from_u32),
    );
    for c in chars {
        for t in [c.to_string(), format!("a{c}b"), format!(" {c}{c}")] {
            let fast = tok.encode_ordinary(&t).unwrap();
            let general = tok.encode_ordinary_general(&t).unwrap();
            assert_eq!(fast, general, "U+{:04X} in {t:?}", c as u32);
        }
    }
}

/// A small byte-level BPE tokenizer with the V4 pre-tokenizer (or a changed one): every byte
/// value plus a few merges, so shape checks do not load the full vocabulary again.
fn small_tokenizer(edit: impl FnOnce(&mut serde_json::Value)) -> Tokenizer {
    let byte_chars: Vec<char> = {
        let mut printable: Vec<u32> = (0x21..=0x7E)
            .chain(0xA1..=0xAC)
            .chain(0xAE..=0xFF)
            .collect();
        let mut codes = printable.clone();
        let mut extra = 0;
        for b in 0..256u32 {
            if !printable.contains(&b) {
                printable.push(b);
                codes.push(256 + extra);
                extra += 1;
            }
        }
        let mut table = vec!['\0'; 256];
        for (b, c) in printable.into_iter().zip(codes) {
            table[b as usize] = char::from_u32(c).unwrap();
        }
        table
    };
    let mut vocab = serde_json::Map::new();
    for c in &byte_chars {
        vocab.insert(c.to_string(), serde_json::json!(vocab.len()));
    }
    let merges = ["Ġ t", "h e", "Ġt he", "1 2", "12 3", "Ġ a", "i n"];
    for m in merges {
        vocab.insert(m.replace(' ', ""), serde_json::json!(vocab.len()));
    }
    static V4_STEPS: OnceLock<(serde_json::Value, serde_json::Value)> = OnceLock::new();
    let (normalizer, pre_tokenizer) = V4_STEPS.get_or_init(|| {
        let full: serde_json::Value = serde_json::from_str(&tokenizer_json()).unwrap();
        (full["normalizer"].clone(), full["pre_tokenizer"].clone())
    });
    let mut v = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": normalizer, "pre_tokenizer": pre_tokenizer,
        "post_processor": null, "decoder": null,
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": merges},
    });
    edit(&mut v);
    Tokenizer::from_json(&v.to_string()).unwrap()
}

/// Tokenizers of other shapes keep the general pipeline; other split expressions take the
/// shortcut but never cut long texts; the V4 shape with another vocabulary takes both.
#[test]
fn other_shapes_fall_back() {
    let long = "Numbers 12345 and 人工智能 here, the end.\nNext line 6789 \u{301}\n".repeat(700);
    let check = |tok: &Tokenizer| {
        for t in [
            "Hello 世界 123 e\u{301}",
            " the 1234567 in\r\n\n  x",
            long.as_str(),
        ] {
            assert_eq!(
                tok.encode_ordinary(t).unwrap(),
                tok.encode_ordinary_general(t).unwrap(),
                "{:?}",
                &t[..t.len().min(40)]
            );
        }
    };
    let tok = small_tokenizer(|_| {});
    assert!(tok.uses_fast_path() && tok.fast_path_cuts_lines());
    check(&tok);

    type Edit = fn(&mut serde_json::Value);
    let edits: [(Edit, bool); 8] = [
        (
            |v| v["normalizer"] = serde_json::json!({"type": "NFC"}),
            true,
        ),
        (
            |v| {
                v["pre_tokenizer"]["pretokenizers"][3]["add_prefix_space"] = serde_json::json!(true)
            },
            true,
        ),
        (
            |v| v["pre_tokenizer"]["pretokenizers"][3]["use_regex"] = serde_json::json!(true),
            true,
        ),
        (
            |v| v["pre_tokenizer"]["pretokenizers"][0]["behavior"] = serde_json::json!("Removed"),
            true,
        ),
        (
            |v| v["pre_tokenizer"]["pretokenizers"][1]["invert"] = serde_json::json!(true),
            true,
        ),
        (
            |v| {
                v["pre_tokenizer"]["pretokenizers"][0]["pattern"] =
                    serde_json::json!({"String": "1"})
            },
            true,
        ),
        (
            |v| v["pre_tokenizer"] = v["pre_tokenizer"]["pretokenizers"][3].clone(),
            true,
        ),
        // Dropout makes the model random: no shortcut (and nothing to compare).
        (|v| v["model"]["dropout"] = serde_json::json!(0.5), false),
    ];
    for (edit, deterministic) in edits {
        let tok = small_tokenizer(edit);
        assert!(!tok.uses_fast_path());
        if deterministic {
            check(&tok);
        }
    }

    let tok = small_tokenizer(|v| {
        v["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] =
            serde_json::json!("\\p{N}{1,2}")
    });
    assert!(tok.uses_fast_path() && !tok.fast_path_cuts_lines());
    check(&tok);
    assert_eq!(
        tok.encode_ordinary("12345").unwrap().len(),
        4,
        "digits now split in twos: 12|3|4|5"
    );
    assert_eq!(
        small_tokenizer(|_| {})
            .encode_ordinary("12345")
            .unwrap()
            .len(),
        3,
        "V4 splits in threes: 123|4|5"
    );
}
