//! The image stage of the data flow: image sources → bytes → preprocessed WebP + size → tokens.
//!
//! * [`spec`]: the V4.1 image token specification (patch grid, token budget, token count);
//! * [`sniff`] and [`data_url`]: what the bytes are and where they come from;
//! * [`decode`] → [`resample`] → [`preprocess`]: the pixels, fitted and encoded as WebP;
//! * [`fetch`]: external URLs (size limit, redirects, destination filter);
//! * [`resolve`]: sources of one request in order, with the request's quota, under the
//!   [`limits`] (count, URL length, sizes) in the official order; [`retry`]: the resolver's
//!   download retries.
//!
//! Behaviour follows the official `deepseek-recipe` 0.2.0 package (sizes, token counts and errors
//! are identical); where it crashes or allocates without bound we deviate, see
//! `docs/image-deviations.md`.

pub mod data_url;
pub mod decode;
pub mod error;
pub mod fetch;
pub mod limits;
pub mod preprocess;
pub mod resample;
pub mod resolve;
pub mod retry;
pub mod sniff;
pub mod spec;

pub use error::{ImageError, ImageErrorKind};
pub use fetch::{deny_private_destinations, DestinationFilter, ImageFetcher};
pub use preprocess::{preprocess, Detail, ImageInfo, PreprocessOptions};
pub use resolve::{ImageQuota, ImageResolver};
pub use retry::RetryPolicy;
pub use spec::{CalcResizeError, ImageTokenSpec, ResizeResult};
