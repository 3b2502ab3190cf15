//! Resolving the image sources of one request under the request [`limits`](crate::limits), in
//! their official order: the count, then each source's own checks (URL scheme and length,
//! inline sizes, data-URL decoding, the running total), then the downloads, then decoding; the
//! request's quota records the count and encoded bytes of successful calls only. URL downloads
//! are retried ([`RetryPolicy`]).
//!
//! The official resolver downloads and decodes a request's sources concurrently and reports
//! the failure of the earliest source; ours takes them one after another (a bound on peak
//! memory, see `docs/image-deviations.md`). The outcome is the same; only the order of requests
//! a server sees, the time several failing URLs take, and which of several URLs that together
//! exceed the total is named differ.

use std::borrow::{Borrow, Cow};
use std::collections::HashMap;

use recipe_core::conversation::{ImageData, ImageDetail, ImageSource};

use crate::data_url::decode_data_url_within;
use crate::error::{ImageError, ImageErrorKind, LocatedImageError};
use crate::fetch::ImageFetcher;
use crate::limits::{
    image_too_large, max_dimension_px, too_many_images, total_too_large, url_too_long, MAX_IMAGES,
    MAX_IMAGE_BYTES, MAX_TOTAL_BYTES, MAX_URL_BYTES,
};
use crate::preprocess::{preprocess, Detail, ImageInfo, PreprocessOptions};
use crate::retry::{as_resolver_failure, RetryPolicy};

pub use crate::limits::MAX_DIMENSION_PX;
/// Long side of a low-detail image before the fit.
pub const LOW_DETAIL_MAX_DIMENSION_PX: u32 = 512;

/// Images and encoded bytes recorded by the completed resolve calls of one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImageQuota {
    pub image_count: u64,
    pub byte_size: u64,
}

#[derive(Debug, Clone, Default)]
pub struct ImageResolver {
    pub fetcher: ImageFetcher,
    pub retry: RetryPolicy,
}

fn detail_of(d: ImageDetail) -> Detail {
    match d {
        ImageDetail::Low => Detail::Low,
        ImageDetail::High => Detail::High,
        ImageDetail::Original => Detail::Original,
        ImageDetail::Auto => Detail::Auto,
    }
}

/// A source after its own checks: its bytes, or a URL still to download.
enum Loaded<'a> {
    Bytes(Cow<'a, [u8]>),
    Remote(&'a str),
}

fn empty_image() -> ImageError {
    ImageError::new(ImageErrorKind::EmptyImage, "no bytes")
}

fn request_wide(kind: ImageErrorKind, public: String) -> ImageError {
    ImageError::with_public(kind, public, "request limit")
}

/// The scheme and length of an external URL. As officially, anything that starts with `http`
/// (any case, nothing before it) counts as http(s) here; what is not a usable URL then fails
/// to download (a retryable `Fetch`).
fn check_url(url: &str) -> Result<(), ImageError> {
    if !url.get(..4).is_some_and(|s| s.eq_ignore_ascii_case("http")) {
        return Err(ImageError::with_public(
            ImageErrorKind::InvalidUrl,
            format!("invalid url: {url:?}"),
            "not http(s)",
        ));
    }
    if url.len() > MAX_URL_BYTES {
        return Err(request_wide(
            ImageErrorKind::UrlTooLong,
            url_too_long(url.len()),
        ));
    }
    Ok(())
}

/// The inline bytes of one source within the per-image limit (not empty), or its URL.
fn load_inline(source: &ImageSource) -> Result<Loaded<'_>, ImageError> {
    let bytes: Cow<'_, [u8]> = match &source.data {
        ImageData::Url(u) => {
            check_url(u)?;
            return Ok(Loaded::Remote(u));
        }
        ImageData::Bytes(b) => {
            if b.len() as u64 > MAX_IMAGE_BYTES {
                return Err(ImageError::with_public(
                    ImageErrorKind::ImageTooLarge,
                    image_too_large(MAX_IMAGE_BYTES),
                    "bytes over the size limit",
                ));
            }
            Cow::Borrowed(b)
        }
        ImageData::DataUrl(u) => Cow::Owned(decode_data_url_within(u, MAX_IMAGE_BYTES)?),
    };
    if bytes.is_empty() {
        return Err(empty_image());
    }
    Ok(Loaded::Bytes(bytes))
}

/// The request location of `sources[k]`: its path and how many earlier sources share it.
fn located<S: Borrow<ImageSource>>(
    sources: &[S],
    k: usize,
    error: ImageError,
) -> LocatedImageError {
    let path = &Borrow::<ImageSource>::borrow(&sources[k]).path;
    let index = sources[..k]
        .iter()
        .filter(|s| &Borrow::<ImageSource>::borrow(*s).path == path)
        .count();
    let message = error.message(path, index);
    LocatedImageError { error, message }
}

impl ImageResolver {
    /// A resolver with the official retry schedule.
    pub fn new(fetcher: ImageFetcher) -> Self {
        Self {
            fetcher,
            retry: RetryPolicy::default(),
        }
    }

    /// The bytes of one source on its own (no request limits but the fetcher's).
    pub fn source_bytes(&self, source: &ImageSource) -> Result<Vec<u8>, ImageError> {
        match load_inline(source)? {
            Loaded::Bytes(b) => Ok(b.into_owned()),
            Loaded::Remote(u) => self.download(u, u64::MAX),
        }
    }

    /// One URL with retries, cut off above `limit` bytes; an empty body is `EmptyImage`.
    fn download(&self, url: &str, limit: u64) -> Result<Vec<u8>, ImageError> {
        let body = self
            .retry
            .run(|| self.fetcher.fetch_within(url, limit))
            .map_err(|e| as_resolver_failure(e, url))?;
        if body.is_empty() {
            return Err(empty_image());
        }
        Ok(body)
    }

    /// Resolve `sources` in order; on success add them to `quota`, on failure leave it alone.
    /// The limits are checked in the order `crate::limits` lists; sources are borrowed, never
    /// copied.
    pub fn resolve<S: Borrow<ImageSource>>(
        &self,
        sources: &[S],
        quota: &mut ImageQuota,
    ) -> Result<Vec<ImageInfo>, LocatedImageError> {
        // The count grows by runs of consecutive sources with one path (a message's images),
        // as officially: the first run that takes it over the limit is named, with the count
        // up to the end of that run.
        let path_of = |k: usize| Borrow::<ImageSource>::borrow(&sources[k]).path.as_str();
        let mut running = quota.image_count;
        let mut start = 0;
        while start < sources.len() {
            let path = path_of(start);
            let end = (start + 1..sources.len())
                .find(|&k| path_of(k) != path)
                .unwrap_or(sources.len());
            running = running.saturating_add((end - start) as u64);
            if running > MAX_IMAGES {
                let error = request_wide(ImageErrorKind::TooManyImages, too_many_images(running));
                let message = error.message(path, 0);
                return Err(LocatedImageError { error, message });
            }
            start = end;
        }
        let count = running;
        // Each source's own checks and the running total, until the first failure.
        let mut loaded: Vec<Loaded<'_>> = Vec::with_capacity(sources.len());
        let mut total = quota.byte_size;
        let mut first_failure: Option<(usize, ImageError)> = None;
        for (k, source) in sources.iter().enumerate() {
            // The source that takes the total over the limit is not counted in what the
            // downloads before it may use (as officially: 30 MiB, 30 MiB, then a 3 MiB URL and
            // another 30 MiB is `TotalSizeTooLarge`, got 90 MB; a 5 MiB URL there fails to
            // download, the 4 MiB left being too few).
            let checked = load_inline(Borrow::<ImageSource>::borrow(source)).and_then(|l| {
                if let Loaded::Bytes(b) = &l {
                    let next = total.saturating_add(b.len() as u64);
                    if next > MAX_TOTAL_BYTES {
                        return Err(request_wide(
                            ImageErrorKind::TotalSizeTooLarge,
                            total_too_large(next),
                        ));
                    }
                    total = next;
                }
                Ok(l)
            });
            match checked {
                Ok(l) => loaded.push(l),
                Err(e) => {
                    first_failure = Some((k, e));
                    break;
                }
            }
        }
        // The downloads before that failure, within what is left of the total; every one is
        // made (as the official concurrent ones are), the earliest failure kept.
        let mut bytes: Vec<Cow<'_, [u8]>> = Vec::with_capacity(loaded.len());
        let mut fetch_failure: Option<(usize, ImageError)> = None;
        for (k, l) in loaded.into_iter().enumerate() {
            match l {
                Loaded::Bytes(b) => bytes.push(b),
                Loaded::Remote(url) => {
                    let left = (MAX_TOTAL_BYTES.saturating_sub(total)).min(MAX_IMAGE_BYTES);
                    match self.download(url, left) {
                        Ok(body) => {
                            total = total.saturating_add(body.len() as u64);
                            bytes.push(Cow::Owned(body));
                        }
                        Err(e) => {
                            fetch_failure.get_or_insert((k, e));
                            bytes.push(Cow::Borrowed(&[]));
                        }
                    }
                }
            }
        }
        if let Some((k, e)) = fetch_failure.or(first_failure) {
            return Err(located(sources, k, e));
        }
        // Decoding, image by image; the largest side allowed depends on the request's count.
        // An image whose bytes and detail repeat an earlier one's is preprocessed once (the
        // result is the same; a request repeating one picture costs one decode).
        let max_side = max_dimension_px(count);
        let mut images: Vec<ImageInfo> = Vec::with_capacity(sources.len());
        let mut seen: HashMap<(&[u8], Detail), usize> = HashMap::new();
        for (k, (source, data)) in sources.iter().zip(&bytes).enumerate() {
            let detail = detail_of(Borrow::<ImageSource>::borrow(source).detail);
            if let Some(&earlier) = seen.get(&(&**data, detail)) {
                images.push(images[earlier].clone());
                continue;
            }
            let options =
                PreprocessOptions::new(detail, max_side as u64, LOW_DETAIL_MAX_DIMENSION_PX as u64)
                    .map_err(|e| located(sources, k, e))?;
            let info = preprocess(data, &options).map_err(|e| located(sources, k, e))?;
            seen.insert((&**data, detail), k);
            images.push(info);
        }
        quota.image_count += images.len() as u64;
        quota.byte_size = total;
        Ok(images)
    }
}
