//! Image errors: a kind (the official variant name), whether retrying may help, and the message a
//! 400 response carries (the request location of the image, then the failure).

use std::fmt;

/// The official error variants, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageErrorKind {
    EmptyImage,
    Decode,
    UnsupportedMediaType,
    InvalidDataUrl,
    InvalidUrl,
    UrlTooLong,
    TooManyImages,
    TotalSizeTooLarge,
    Fetch,
    FetchStatus {
        retryable: bool,
    },
    DestinationRejected,
    ImageTooLarge,
    ImageDimensionsTooLarge,
    Resize,
    Encode,
    /// Ours: an option value the official package would wrap to a negative number.
    InvalidOption,
    /// Ours: the decoded pixels would exceed the memory budget.
    DecodedSizeTooLarge,
}

impl ImageErrorKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::EmptyImage => "EmptyImage",
            Self::Decode => "Decode",
            Self::UnsupportedMediaType => "UnsupportedMediaType",
            Self::InvalidDataUrl => "InvalidDataUrl",
            Self::InvalidUrl => "InvalidUrl",
            Self::UrlTooLong => "UrlTooLong",
            Self::TooManyImages => "TooManyImages",
            Self::TotalSizeTooLarge => "TotalSizeTooLarge",
            Self::Fetch => "Fetch",
            Self::FetchStatus { .. } => "FetchStatus",
            Self::DestinationRejected => "DestinationRejected",
            Self::ImageTooLarge => "ImageTooLarge",
            Self::ImageDimensionsTooLarge => "ImageDimensionsTooLarge",
            Self::Resize => "Resize",
            Self::Encode => "Encode",
            Self::InvalidOption => "InvalidOption",
            Self::DecodedSizeTooLarge => "DecodedSizeTooLarge",
        }
    }

    /// Transport failures and 5xx statuses may succeed on another attempt; nothing else does.
    pub fn is_retryable(self) -> bool {
        matches!(self, Self::Fetch | Self::FetchStatus { retryable: true })
    }

    /// Failures of a request-wide rule (scheme, URL length, count, total): their message names
    /// the source's path only, not `path.image[i]`.
    pub fn names_path_only(self) -> bool {
        matches!(
            self,
            Self::InvalidUrl | Self::UrlTooLong | Self::TooManyImages | Self::TotalSizeTooLarge
        )
    }
}

/// The one sentence the official package shows for every content problem.
pub const UNSUPPORTED_IMAGE: &str = "You have uploaded an unsupported image. Please make sure your image is valid and has one of the following formats: webp, png, jpeg, and gif.";

/// An image failure. `detail` is for logs; the client sees [`ImageError::message`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageError {
    pub kind: ImageErrorKind,
    /// What the client is told after the location (URL errors carry their URL here).
    pub public: String,
    /// The underlying cause, for logs only.
    pub detail: String,
}

impl ImageError {
    pub fn new(kind: ImageErrorKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            public: UNSUPPORTED_IMAGE.to_string(),
            detail: detail.into(),
        }
    }

    pub fn with_public(
        kind: ImageErrorKind,
        public: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            public: public.into(),
            detail: detail.into(),
        }
    }

    pub fn download_failed(kind: ImageErrorKind, url: &str, detail: impl Into<String>) -> Self {
        Self::with_public(kind, format!("Failed to download image from {url}"), detail)
    }

    /// The 400 message for the `index`-th image with the request location `path` (`image[i]`
    /// when the source has no path; request-wide failures name the path alone, or nothing).
    pub fn message(&self, path: &str, index: usize) -> String {
        if self.kind.names_path_only() {
            if path.is_empty() {
                return self.public.clone();
            }
            return format!("{path}: {}", self.public);
        }
        if path.is_empty() {
            format!("image[{index}]: {}", self.public)
        } else {
            format!("{path}.image[{index}]: {}", self.public)
        }
    }
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({})", self.kind.name(), self.public, self.detail)
    }
}

impl std::error::Error for ImageError {}

/// An error already placed at its request location: what a resolve call reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocatedImageError {
    pub error: ImageError,
    pub message: String,
}
