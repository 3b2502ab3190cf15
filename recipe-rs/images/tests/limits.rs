//! The request limits of the resolver and their order (`src/limits.rs`), on inline sources
//! (the network cases are recorded from the official package and replayed by the Python tests).

use recipe_core::conversation::{ImageData, ImageDetail, ImageSource};
use recipe_images::data_url::decode_data_url_within;
use recipe_images::limits::{MAX_IMAGE_BYTES, MIB};
use recipe_images::{ImageErrorKind, ImageQuota, ImageResolver};

const TINY: &[u8] = include_bytes!("../../../tests/conformance/images/inputs/size_1x1.png");

fn bytes(path: &str, pad: usize) -> ImageSource {
    let mut data = TINY.to_vec();
    data.resize(TINY.len() + pad, 0);
    ImageSource {
        data: ImageData::Bytes(data),
        detail: ImageDetail::High,
        path: path.to_owned(),
    }
}

fn source(path: &str, data: ImageData) -> ImageSource {
    ImageSource {
        data,
        detail: ImageDetail::High,
        path: path.to_owned(),
    }
}

fn failure(sources: &[ImageSource], quota: &mut ImageQuota) -> (ImageErrorKind, String) {
    let e = ImageResolver::default()
        .resolve(sources, quota)
        .expect_err("refused");
    (e.error.kind, e.message)
}

#[test]
fn the_count_comes_before_anything_and_names_the_first_image_over() {
    let junk = source("m", ImageData::Bytes(b"junk".to_vec()));
    let many = vec![junk; 100_000];
    let (kind, message) = failure(&many, &mut ImageQuota::default());
    assert_eq!(kind, ImageErrorKind::TooManyImages);
    assert_eq!(
        message,
        "m: Too many images: max 600 images per request, got 100000"
    );
    let mut quota = ImageQuota {
        image_count: 599,
        byte_size: 0,
    };
    let two = [bytes("x", 0), bytes("y", 0)];
    assert_eq!(
        failure(&two, &mut quota).1,
        "y: Too many images: max 600 images per request, got 601"
    );
}

#[test]
fn sizes_are_checked_before_decoding_in_source_order() {
    let junk = source("a", ImageData::Bytes(b"junk".to_vec()));
    let over = bytes("b", 32 * MIB as usize);
    let (kind, message) = failure(&[junk.clone(), over], &mut ImageQuota::default());
    assert_eq!(kind, ImageErrorKind::ImageTooLarge);
    assert_eq!(message, "b.image[0]: image file size exceeds limit 32 MB");
    let mid = 22 * MIB as usize;
    let three = [junk, bytes("b", mid), bytes("c", mid), bytes("d", mid)];
    assert_eq!(
        failure(&three, &mut ImageQuota::default()),
        (
            ImageErrorKind::TotalSizeTooLarge,
            "d: Total image size exceeds the limit: max 64 MB per request, got 66 MB".to_owned()
        )
    );
    let long = source("", ImageData::Url(format!("http://x/{}", "a".repeat(9000))));
    assert_eq!(
        failure(&[long], &mut ImageQuota::default()).1,
        "external link length 9009 too long, max link length 8192"
    );
}

#[test]
fn the_total_counts_the_quota_and_a_failed_call_leaves_it_alone() {
    let mid = 22 * MIB as usize;
    let mut quota = ImageQuota::default();
    // A PNG followed by zeros decodes (the trailing bytes are ignored) and counts in full.
    ImageResolver::default()
        .resolve(&[bytes("a", mid), bytes("b", mid)], &mut quota)
        .unwrap();
    assert_eq!(quota.image_count, 2);
    let before = quota;
    assert_eq!(
        failure(&[bytes("c", mid)], &mut quota),
        (
            ImageErrorKind::TotalSizeTooLarge,
            "c: Total image size exceeds the limit: max 64 MB per request, got 66 MB".to_owned()
        )
    );
    assert_eq!(before, quota);
}

#[test]
fn images_are_named_by_their_index_among_sources_of_the_same_path() {
    let junk = |p: &str| source(p, ImageData::Bytes(b"junk".to_vec()));
    let (_, message) = failure(
        &[bytes("a", 0), bytes("b", 0), junk("a")],
        &mut ImageQuota::default(),
    );
    assert!(message.starts_with("a.image[1]: "), "{message}");
    let (_, message) = failure(
        &[bytes("", 0), bytes("", 0), junk("")],
        &mut ImageQuota::default(),
    );
    assert!(message.starts_with("image[2]: "), "{message}");
}

#[test]
fn a_data_url_over_the_limit_is_refused_from_its_length_alone() {
    // Invalid base64 throughout: had it been decoded, the error would be InvalidDataUrl.
    let body = "@".repeat((MAX_IMAGE_BYTES / 3 * 4 + 8) as usize);
    let e = decode_data_url_within(&format!("data:image/png;base64,{body}"), MAX_IMAGE_BYTES)
        .unwrap_err();
    assert_eq!(e.kind, ImageErrorKind::ImageTooLarge);
    // Just under: decoded (and found invalid).
    let e = decode_data_url_within("data:image/png;base64,@@@@", MAX_IMAGE_BYTES).unwrap_err();
    assert_eq!(e.kind, ImageErrorKind::InvalidDataUrl);
    // The media type comes first.
    let e = decode_data_url_within(&format!("data:image/bmp;base64,{body}"), MAX_IMAGE_BYTES)
        .unwrap_err();
    assert_eq!(e.kind, ImageErrorKind::UnsupportedMediaType);
}
