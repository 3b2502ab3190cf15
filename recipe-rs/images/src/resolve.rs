//! Resolving the image sources of one request: bytes from data URLs, URLs or the request, each
//! preprocessed with its detail, in order; the request's quota records the count and encoded
//! bytes of successful calls only. URL downloads are retried ([`RetryPolicy`]).
//!
//! The official resolver handles a request's sources concurrently; ours takes them one after
//! another (a bound on peak memory, see `docs/image-deviations.md`). The outcome is the same;
//! only the order of requests a server sees, and the time several failing URLs take, differ.

use recipe_core::conversation::{ImageData, ImageDetail, ImageSource};

use crate::data_url::decode_data_url;
use crate::error::{ImageError, ImageErrorKind, LocatedImageError};
use crate::fetch::ImageFetcher;
use crate::preprocess::{preprocess, Detail, ImageInfo, PreprocessOptions};
use crate::retry::{as_resolver_failure, RetryPolicy};

/// Largest side the resolver accepts.
pub const MAX_DIMENSION_PX: u32 = 8192;
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

impl ImageResolver {
    /// A resolver with the official retry schedule.
    pub fn new(fetcher: ImageFetcher) -> Self {
        Self {
            fetcher,
            retry: RetryPolicy::default(),
        }
    }

    /// The bytes of one source.
    pub fn source_bytes(&self, source: &ImageSource) -> Result<Vec<u8>, ImageError> {
        match &source.data {
            ImageData::Bytes(b) => Ok(b.clone()),
            ImageData::DataUrl(u) => decode_data_url(u),
            ImageData::Url(u) => {
                let lower = u.get(..8).unwrap_or(u).to_ascii_lowercase();
                if !(lower.starts_with("http://") || lower.starts_with("https://")) {
                    return Err(ImageError::with_public(
                        ImageErrorKind::InvalidUrl,
                        format!("invalid url: {u:?}"),
                        "not http(s)",
                    ));
                }
                self.retry
                    .run(|| self.fetcher.fetch(u))
                    .map_err(|e| as_resolver_failure(e, u))
            }
        }
    }

    /// Resolve `sources` in order; on success add them to `quota`, on failure leave it alone.
    pub fn resolve(
        &self,
        sources: &[ImageSource],
        quota: &mut ImageQuota,
    ) -> Result<Vec<ImageInfo>, LocatedImageError> {
        let mut images = Vec::with_capacity(sources.len());
        let mut bytes = 0u64;
        for source in sources {
            let located = |error: ImageError| {
                let message = error.message(&source.path, 0);
                LocatedImageError { error, message }
            };
            let data = self.source_bytes(source).map_err(located)?;
            let options = PreprocessOptions::new(
                detail_of(source.detail),
                MAX_DIMENSION_PX as u64,
                LOW_DETAIL_MAX_DIMENSION_PX as u64,
            )
            .map_err(located)?;
            let info = preprocess(&data, &options).map_err(located)?;
            bytes += data.len() as u64;
            images.push(info);
        }
        quota.image_count += images.len() as u64;
        quota.byte_size += bytes;
        Ok(images)
    }
}
