//! Which of the four accepted formats the bytes are, read from their magic numbers.

use crate::error::{ImageError, ImageErrorKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaType {
    Png,
    Jpeg,
    Gif,
    Webp,
}

/// The media type of an encoded image; other formats (BMP, TIFF, AVIF, …) are unsupported.
pub fn sniff(data: &[u8]) -> Result<MediaType, ImageError> {
    if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        Ok(MediaType::Png)
    } else if data.len() > 2 && data.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Ok(MediaType::Jpeg)
    } else if data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a") {
        Ok(MediaType::Gif)
    } else if data.len() >= 12 && &data[0..4] == b"RIFF" && &data[8..12] == b"WEBP" {
        Ok(MediaType::Webp)
    } else {
        Err(ImageError::new(
            ImageErrorKind::UnsupportedMediaType,
            "unknown media type",
        ))
    }
}
