//! `data:` URLs: the media type must name an accepted image format (`image/jpg` included,
//! parameters such as `;charset=` ignored); the body is base64 in the standard alphabet
//! (padding absent or exact, ASCII whitespace and percent-escapes removed first; the URL-safe alphabet
//! is refused, as officially) or, without `;base64`, percent-encoded bytes.
//!
//! [`decode_data_url_within`] checks the size limit before decoding: from the body's length for
//! base64 (nothing is allocated for a body over the limit, however long), by counting the
//! percent-decoded bytes otherwise.

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::{DecodePaddingMode, Engine};

use crate::error::{ImageError, ImageErrorKind};
use crate::limits::{base64_decoded_bound, image_too_large};

/// Media types a data URL may declare (compared without case).
pub const ACCEPTED_MEDIA_TYPES: [&str; 5] = [
    "image/png",
    "image/jpeg",
    "image/jpg",
    "image/gif",
    "image/webp",
];

const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_decode_padding_mode(DecodePaddingMode::Indifferent)
    .with_decode_allow_trailing_bits(true);
const STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);

fn invalid(detail: &str) -> ImageError {
    ImageError::new(ImageErrorKind::InvalidDataUrl, detail)
}

/// The bytes a data URL carries (no size limit).
pub fn decode_data_url(url: &str) -> Result<Vec<u8>, ImageError> {
    decode_data_url_within(url, u64::MAX)
}

/// The bytes a data URL carries, refused as `ImageTooLarge` before decoding when they could
/// exceed `max_bytes`.
pub fn decode_data_url_within(url: &str, max_bytes: u64) -> Result<Vec<u8>, ImageError> {
    let rest = strip_prefix_ignore_case(url.trim_start(), "data:")
        .ok_or_else(|| invalid("not a data URL"))?;
    let (header, body) = rest
        .split_once(',')
        .ok_or_else(|| invalid("missing comma"))?;
    let mut params = header.split(';');
    let media_type = params.next().unwrap_or("").trim();
    let is_base64 = params.any(|p| p.trim().eq_ignore_ascii_case("base64"));
    if !ACCEPTED_MEDIA_TYPES
        .iter()
        .any(|m| m.eq_ignore_ascii_case(media_type))
    {
        return Err(ImageError::new(
            ImageErrorKind::UnsupportedMediaType,
            format!("data URL media type {media_type:?}"),
        ));
    }
    let too_large = || {
        ImageError::with_public(
            ImageErrorKind::ImageTooLarge,
            image_too_large(max_bytes),
            "data URL over the size limit",
        )
    };
    if is_base64 {
        if base64_decoded_bound(body.len()) > max_bytes {
            return Err(too_large());
        }
        decode_base64(body)
    } else {
        if percent_encoding::percent_decode_str(body).count() as u64 > max_bytes {
            return Err(too_large());
        }
        Ok(percent_encoding::percent_decode_str(body).collect())
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    (s.len() >= prefix.len()
        && s.is_char_boundary(prefix.len())
        && s[..prefix.len()].eq_ignore_ascii_case(prefix))
    .then(|| &s[prefix.len()..])
}

/// Standard base64; percent-escapes and whitespace are removed first.
fn decode_base64(body: &str) -> Result<Vec<u8>, ImageError> {
    let unescaped: Vec<u8> = percent_encoding::percent_decode_str(body).collect();
    let compact: Vec<u8> = unescaped
        .into_iter()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    // Padding is absent or exact (`AA=` and `AA===` are refused, as officially).
    if compact.contains(&b'=') && !compact.len().is_multiple_of(4) {
        return Err(invalid("base64: padding not exact"));
    }
    STANDARD
        .decode(&compact)
        .map_err(|e| invalid(&format!("base64: {e}")))
}
