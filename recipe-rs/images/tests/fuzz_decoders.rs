//! A short seeded fuzz run of the decoders (the long run is `examples/fuzz_decoders.rs`), plus
//! the malformed inputs kept as regressions: each must return, never panic.

#[path = "../examples/support/fuzz.rs"]
mod fuzz_support;

use recipe_images::{preprocess, Detail, PreprocessOptions};

fn inputs() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/conformance/images/inputs")
}

#[test]
fn seeded_mutations_never_panic() {
    let (n, decoded) = fuzz_support::run(&inputs(), 3000, 7);
    assert_eq!(n, 3000);
    assert!(
        decoded > 0 && decoded < n,
        "mutations should both decode and fail: {decoded}/{n}"
    );
}

#[test]
fn corrupted_animated_png_is_an_error_or_an_image() {
    let anim = std::fs::read(inputs().join("anim.png")).unwrap();
    let idat = anim.windows(4).position(|w| w == b"IDAT").unwrap();
    let options = PreprocessOptions::new(Detail::High, 8192, 512).unwrap();
    for offset in [4usize, 8, 16, 40, 100] {
        for fill in [0x00u8, 0xFF, 0x5A] {
            let mut bad = anim.clone();
            for b in bad.iter_mut().skip(idat + offset).take(8) {
                *b = fill;
            }
            if let Err(e) = preprocess(&bad, &options) {
                assert!(matches!(e.kind.name(), "Decode" | "EmptyImage"), "{e}");
            }
        }
    }
}
