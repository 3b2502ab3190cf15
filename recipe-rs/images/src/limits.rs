//! The request limits of the image stage and the order they are checked in, as officially.
//! Each limit is checked before the work it protects:
//!
//! 1. **image count**: the quota's images plus this call's sources over [`MAX_IMAGES`] →
//!    `TooManyImages`, before any source is looked at. The count grows run by run (a run: the
//!    consecutive sources sharing one path, i.e. one message's images); the first run that
//!    takes it over is named, with the count at the end of that run (`got 601` for 601 images
//!    of one message followed by more of another);
//! 2. **each source, in order, until the first failure** (before any fetch or decode):
//!    * URL: starts with `http` in any case (`InvalidUrl` otherwise; `http:/x` or `httpx://a`
//!      pass and fail to download), then at most [`MAX_URL_BYTES`] bytes (`UrlTooLong`);
//!    * bytes: not empty (`EmptyImage`), at most [`MAX_IMAGE_BYTES`] (`ImageTooLarge`);
//!    * data URL: its header and media type, then the size its body can decode to (from the
//!      body's length, before decoding: `ImageTooLarge`), then the decoded bytes (not empty);
//!    * bytes and data URLs: the running total with the quota's bytes at most
//!      [`MAX_TOTAL_BYTES`] (`TotalSizeTooLarge`);
//! 3. **the URLs before that failure are fetched**, each cut off while it streams at the
//!    smallest of the fetcher's limit, [`MAX_IMAGE_BYTES`] and what is left of the total (the
//!    inline bytes before a source that took the total over do not count that source); the
//!    failure of the earliest source is reported (a fetch failure before the failure of step 2
//!    wins);
//! 4. **decoding**, image by image: the header's dimensions are checked before pixels are
//!    decoded (see `preprocess`), against [`max_dimension_px`]: 8,192 pixels a side, 4,096 when
//!    the request carries more than [`MANY_IMAGES`] images (the quota's and this call's).
//!
//! A failure names its image as `path.image[i]`, `i` counting the earlier sources with the same
//! path; the request-wide limits (count, URL length, total, URL scheme) name only the path.

/// Images one request may carry (over all resolve calls sharing a quota).
pub const MAX_IMAGES: u64 = 600;
/// Encoded bytes of one image given inline (bytes or data URL) or fetched.
pub const MAX_IMAGE_BYTES: u64 = 32 * MIB;
/// Encoded bytes of all images of one request.
pub const MAX_TOTAL_BYTES: u64 = 64 * MIB;
/// Bytes of one external image URL.
pub const MAX_URL_BYTES: usize = 8192;

pub const MIB: u64 = 1024 * 1024;

/// Largest side of an image in a request of at most [`MANY_IMAGES`] images.
pub const MAX_DIMENSION_PX: u32 = 8192;
/// Images a request may carry before its images must be smaller.
pub const MANY_IMAGES: u64 = 14;
/// Largest side of an image in a request of more than [`MANY_IMAGES`] images.
pub const MANY_IMAGES_MAX_DIMENSION_PX: u32 = 4096;

/// The largest side an image may have in a request of `count` images (found on the official
/// package: 14 images of 8192×8192 are accepted; a 15th image, even 1×1, makes every side over
/// 4,096 `ImageDimensionsTooLarge`, checked from the header like the plain limit).
pub fn max_dimension_px(count: u64) -> u32 {
    if count > MANY_IMAGES {
        MANY_IMAGES_MAX_DIMENSION_PX
    } else {
        MAX_DIMENSION_PX
    }
}

/// `Too many images: …`.
pub fn too_many_images(count: u64) -> String {
    format!("Too many images: max {MAX_IMAGES} images per request, got {count}")
}

/// `external link length …` (the resolver's wording; conversion adds its own prefix and advice).
pub fn url_too_long(len: usize) -> String {
    format!("external link length {len} too long, max link length {MAX_URL_BYTES}")
}

/// `Total image size exceeds the limit: …` (sizes in whole MiB, rounded down).
pub fn total_too_large(total: u64) -> String {
    format!(
        "Total image size exceeds the limit: max {} MB per request, got {} MB",
        MAX_TOTAL_BYTES / MIB,
        total / MIB
    )
}

/// `image file size exceeds limit …`.
pub fn image_too_large(limit: u64) -> String {
    format!("image file size exceeds limit {} MB", limit / MIB)
}

/// The most bytes a base64 body of `len` characters can decode to, as officially estimated
/// (every character counted, whitespace and padding included).
pub fn base64_decoded_bound(len: usize) -> u64 {
    len as u64 * 3 / 4
}
