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

/// A PNG of `w`×`h` 8-bit grey pixels (the pixel data only for small heights: larger images
/// carry one stored row, for header checks); `bad` breaks one part ("ihdr", "idat", "iend":
/// that chunk's CRC, "adler": the zlib checksum, "text": an ancillary chunk's CRC).
fn png(w: u32, h: u32, bad: &str) -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8], ok: bool) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let crc = crc32fast::hash(&out[start..]);
        out.extend_from_slice(&(if ok { crc } else { crc ^ 1 }).to_be_bytes());
    }
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    // Stored (uncompressed) deflate blocks: one per row, the last one final.
    let (row_len, rows) = if w <= 8192 && h <= 64 {
        (w as usize + 1, h as usize)
    } else {
        (2, 1)
    };
    let mut z = vec![0x78, 0x01];
    let mut adler = (1u32, 0u32);
    for r in 0..rows {
        let row: Vec<u8> = std::iter::once(0)
            .chain((0..row_len - 1).map(|i| (i * 9 + r) as u8))
            .collect();
        z.push(u8::from(r + 1 == rows));
        z.extend_from_slice(&(row_len as u16).to_le_bytes());
        z.extend_from_slice(&(!(row_len as u16)).to_le_bytes());
        for &b in &row {
            adler.0 = (adler.0 + b as u32) % 65521;
            adler.1 = (adler.1 + adler.0) % 65521;
        }
        z.extend_from_slice(&row);
    }
    let sum = (adler.1 << 16) | adler.0;
    z.extend_from_slice(&(if bad == "adler" { sum ^ 1 } else { sum }).to_be_bytes());
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &ihdr, bad != "ihdr");
    chunk(&mut out, b"tEXt", b"k\0v", bad != "text");
    chunk(&mut out, b"IDAT", &z, bad != "idat");
    chunk(&mut out, b"IEND", &[], bad != "iend");
    out
}

fn preprocessed(data: &[u8]) -> Result<(u32, u32), ImageErrorKind> {
    let options =
        recipe_images::PreprocessOptions::new(recipe_images::Detail::High, 8192, 512).unwrap();
    recipe_images::preprocess(data, &options)
        .map(|i| (i.width, i.height))
        .map_err(|e| e.kind)
}

#[test]
fn png_headers_and_checksums_as_libpng_reads_them() {
    use ImageErrorKind::*;
    // Observed on the official package: sides are read from a whole IHDR chunk with a right
    // CRC, whatever their size (2^31 - 1 and over included), before any decode.
    assert!(preprocessed(&png(16, 16, "")).is_ok());
    for (w, h) in [
        (2_147_483_647, 1),
        (1 << 31, 1),
        (u32::MAX, 1),
        (9000, 1),
        (1, 8193),
    ] {
        assert_eq!(
            preprocessed(&png(w, h, "")),
            Err(ImageDimensionsTooLarge),
            "{w}x{h}"
        );
    }
    for (w, h) in [(0, 1), (1, 0), (0, 9000)] {
        assert_eq!(preprocessed(&png(w, h, "")), Err(Decode), "{w}x{h}");
    }
    assert_eq!(preprocessed(&png(9000, 1, "ihdr")), Err(Decode));
    assert_eq!(preprocessed(&png(9000, 1, "")[..32]), Err(Decode));
    assert_eq!(
        preprocessed(&png(9000, 1, "")[..33]),
        Err(ImageDimensionsTooLarge)
    );
    // A bad CRC on a critical chunk, or a bad zlib checksum, is fatal; on an ancillary chunk
    // it is not.
    assert_eq!(preprocessed(&png(4, 2, "ihdr")), Err(Decode));
    for bad in ["idat", "iend", "adler"] {
        assert_eq!(preprocessed(&png(4, 2, bad)), Err(EmptyImage), "{bad}");
    }
    assert!(preprocessed(&png(4, 2, "text")).is_ok());
}

#[test]
fn more_than_fourteen_images_must_have_sides_of_at_most_4096() {
    let wide = |p: &str, w: u32| source(p, ImageData::Bytes(png(w, 1, "")));
    // 14 images of side 8192 pass the header check (header-only files would fail to decode:
    // these decode); a 15th image, even 1x1, makes every side over 4,096 too large.
    let fourteen: Vec<_> = (0..14).map(|_| wide("a", 8192)).collect();
    assert!(ImageResolver::default()
        .resolve(&fourteen, &mut ImageQuota::default())
        .is_ok());
    let mut fifteen = vec![bytes("a", 0)];
    fifteen.extend(fourteen.iter().cloned());
    let (kind, message) = failure(&fifteen, &mut ImageQuota::default());
    assert_eq!(kind, ImageErrorKind::ImageDimensionsTooLarge);
    assert!(message.starts_with("a.image[1]: "), "{message}");
    let at_4096: Vec<_> = (0..15).map(|_| wide("a", 4096)).collect();
    assert!(ImageResolver::default()
        .resolve(&at_4096, &mut ImageQuota::default())
        .is_ok());
    // The quota's images count too.
    let mut quota = ImageQuota {
        image_count: 10,
        byte_size: 0,
    };
    let five: Vec<_> = (0..5).map(|_| wide("b", 4097)).collect();
    assert_eq!(
        failure(&five, &mut quota).0,
        ImageErrorKind::ImageDimensionsTooLarge
    );
}

#[test]
fn the_count_grows_by_runs_of_one_path() {
    let run = |p: &str, n: usize| vec![bytes(p, 0); n];
    let message = |sources: Vec<ImageSource>| failure(&sources, &mut ImageQuota::default()).1;
    // Observed: 600 of "b", one of "a", one of "b" gives "a: … got 601"; 50 of "b" then 600 of
    // "a" gives "a: … got 650"; 601 then one more of the same path, then another path: 602.
    let mut s = run("b", 600);
    s.extend(run("a", 1));
    s.extend(run("b", 1));
    assert_eq!(
        message(s),
        "a: Too many images: max 600 images per request, got 601"
    );
    let mut s = run("b", 50);
    s.extend(run("a", 600));
    assert_eq!(
        message(s),
        "a: Too many images: max 600 images per request, got 650"
    );
    let mut s = run("q", 602);
    s.extend(run("m", 1));
    assert_eq!(
        message(s),
        "q: Too many images: max 600 images per request, got 602"
    );
}

#[test]
fn external_urls_are_anything_that_starts_with_http() {
    for url in ["httpx://a", "HTTP:/x", "http"] {
        let (kind, message) = failure(
            &[source("p", ImageData::Url(url.to_owned()))],
            &mut ImageQuota::default(),
        );
        assert_eq!(kind, ImageErrorKind::Fetch, "{url}");
        assert_eq!(
            message,
            format!("p.image[0]: Failed to download image from {url}")
        );
    }
    for url in [" http://x/", "htt://x", ""] {
        let (kind, _) = failure(
            &[source("p", ImageData::Url(url.to_owned()))],
            &mut ImageQuota::default(),
        );
        assert_eq!(kind, ImageErrorKind::InvalidUrl, "{url:?}");
    }
}

#[test]
fn base64_padding_is_absent_or_exact() {
    let tiny = |suffix: &str| {
        let b64 = base64_of(TINY);
        format!(
            "data:image/png;base64,{}{suffix}",
            b64.trim_end_matches('=')
        )
    };
    let pad = (4 - base64_of(TINY).trim_end_matches('=').len() % 4) % 4;
    assert!(decode_data_url_within(&tiny(""), MAX_IMAGE_BYTES).is_ok());
    assert!(decode_data_url_within(&tiny(&"=".repeat(pad)), MAX_IMAGE_BYTES).is_ok());
    for extra in [pad + 1, pad + 4] {
        let e = decode_data_url_within(&tiny(&"=".repeat(extra)), MAX_IMAGE_BYTES).unwrap_err();
        assert_eq!(e.kind, ImageErrorKind::InvalidDataUrl, "{extra}");
    }
    if pad == 2 {
        let e = decode_data_url_within(&tiny("="), MAX_IMAGE_BYTES).unwrap_err();
        assert_eq!(e.kind, ImageErrorKind::InvalidDataUrl);
    }
}

fn base64_of(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}
