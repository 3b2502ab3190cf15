//! What an image URL of a V4.1 request must be before conversion accepts it, as officially:
//!
//! * anything that starts with `http` (any case, nothing before it: `httpx:a` and `http:/x`
//!   pass, ` http://x` does not) and is at most [`MAX_URL_BYTES`] bytes; or
//! * a `data:` URL (any case) whose header ends in `;base64`, whose media type (before the
//!   first `;`, trimmed, any case) is PNG, JPEG (`image/jpg` too), GIF or WebP, and whose body
//!   is standard base64 as the image stage decodes it (percent-escapes and ASCII whitespace
//!   removed first; padding absent or exact; stray low bits allowed).
//!
//! The length is checked in a pass of its own over a message's parts, before the other checks
//! of any part ([`url_too_long`]): officially a long URL is reported before an unsupported or
//! malformed image part earlier in the same message, and before "Image in assistant message".
//!
//! Nothing is decoded into a buffer: the body is scanned once.

use recipe_core::ImageData;

/// Bytes of one external image URL (the image stage refuses longer ones too).
pub const MAX_URL_BYTES: usize = 8192;

/// Media types an image data URL may declare (compared without case).
const ACCEPTED_MEDIA_TYPES: [&str; 5] = [
    "image/png",
    "image/jpeg",
    "image/jpg",
    "image/gif",
    "image/webp",
];

/// Why an image URL is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageUrlProblem {
    /// Neither http(s) nor a base64 data URL: `Unsupported image_url format`.
    Format,
    /// A data URL of another media type: the unsupported-image sentence.
    MediaType,
    /// A data URL whose body is not base64: `Invalid base64 data`.
    Base64,
    /// An external URL of this many bytes, over [`MAX_URL_BYTES`].
    TooLong(usize),
}

/// The official sentence for an image of an unsupported kind.
pub const UNSUPPORTED_IMAGE_SENTENCE: &str = "You have uploaded an unsupported image. Please make sure your image is valid and has one of the following formats: webp, png, jpeg, and gif.";

impl ImageUrlProblem {
    /// The message after the location, for the problems that name the message only.
    pub fn message(self) -> &'static str {
        match self {
            Self::Format => "Unsupported image_url format",
            Self::MediaType => UNSUPPORTED_IMAGE_SENTENCE,
            Self::Base64 => "Invalid base64 data",
            Self::TooLong(_) => "external link too long",
        }
    }
}

/// `external link length N too long, max link length 8192. Consider …` (each API puts its own
/// field name before it).
pub fn too_long_advice(len: usize) -> String {
    format!("external link length {len} too long, max link length {MAX_URL_BYTES}. Consider passing file data directly with base64 data url instead.")
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    (s.len() >= prefix.len()
        && s.is_char_boundary(prefix.len())
        && s[..prefix.len()].eq_ignore_ascii_case(prefix))
    .then(|| &s[prefix.len()..])
}

/// Whether `url` counts as an external URL: officially any value that starts with `http` (any
/// case, no leading whitespace); the image stage checks the scheme itself.
pub fn is_http_url(url: &str) -> bool {
    strip_prefix_ignore_case(url, "http").is_some()
}

/// The byte length of an external URL over [`MAX_URL_BYTES`], checked before anything else
/// about an image part.
pub fn url_too_long(url: &str) -> Option<usize> {
    (is_http_url(url) && url.len() > MAX_URL_BYTES).then_some(url.len())
}

/// Check an image URL of a request whose model sees images; the source keeps `url` unchanged.
pub fn checked_image_url(url: &str) -> Result<ImageData, ImageUrlProblem> {
    let t = url.trim_start();
    if let Some(rest) = strip_prefix_ignore_case(t, "data:") {
        let (header, body) = rest.split_once(',').ok_or(ImageUrlProblem::Format)?;
        let Some(header) = header.strip_suffix(";base64") else {
            return Err(ImageUrlProblem::Format);
        };
        let media_type = header.split(';').next().unwrap_or("").trim();
        if !ACCEPTED_MEDIA_TYPES
            .iter()
            .any(|m| m.eq_ignore_ascii_case(media_type))
        {
            return Err(ImageUrlProblem::MediaType);
        }
        if !is_lenient_base64(body) {
            return Err(ImageUrlProblem::Base64);
        }
        return Ok(ImageData::DataUrl(url.to_owned()));
    }
    if is_http_url(url) {
        if let Some(n) = url_too_long(url) {
            return Err(ImageUrlProblem::TooLong(n));
        }
        return Ok(ImageData::Url(url.to_owned()));
    }
    Err(ImageUrlProblem::Format)
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Whether `body` decodes as the image stage's base64: percent-escapes resolved and ASCII
/// whitespace dropped first, the standard alphabet, padding either absent or exact (the whole
/// length then a multiple of four), no symbol after padding, never one symbol alone in the
/// last group.
pub fn is_lenient_base64(body: &str) -> bool {
    let b = body.as_bytes();
    let (mut symbols, mut pads) = (0usize, 0usize);
    let mut i = 0;
    while i < b.len() {
        let mut c = b[i];
        i += 1;
        if c == b'%' {
            if let (Some(h), Some(l)) = (
                b.get(i).copied().and_then(hex),
                b.get(i + 1).copied().and_then(hex),
            ) {
                c = h * 16 + l;
                i += 2;
            }
        }
        match c {
            c if c.is_ascii_whitespace() => {}
            b'=' => pads += 1,
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'+' | b'/' if pads == 0 => symbols += 1,
            _ => return false,
        }
    }
    if symbols % 4 == 1 {
        return false;
    }
    pads == 0 || (symbols % 4 != 0 && symbols % 4 + pads == 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observed_official_answers() {
        use ImageUrlProblem::*;
        let too_long = format!("http://x/{}", "a".repeat(8184));
        for (url, want) in [
            ("data:image/png;base64,AAAA", Ok(())),
            ("DATA:image/PNG;base64,AA==", Ok(())),
            (" data:image/png ;x;base64,A A\nA\tA", Ok(())),
            ("data:image/png;base64,%41AAA", Ok(())),
            ("data:image/png;base64,", Ok(())),
            ("data:image/png;base64,iVBORw0KGgp=", Ok(())),
            ("HTTP://x/", Ok(())),
            ("http", Ok(())),
            ("httpx://a", Ok(())),
            ("http:/x", Ok(())),
            ("https:abc", Ok(())),
            (" http://x/a.png", Err(Format)),
            ("htt", Err(Format)),
            ("data:image/png;base64,@@@@", Err(Base64)),
            ("data:image/png;base64,AA=", Err(Base64)),
            ("data:image/png;base64,AAA==", Err(Base64)),
            ("data:image/png;base64,AAAA====", Err(Base64)),
            ("data:image/png;base64,AA======", Err(Base64)),
            ("data:image/png;base64,AAA=====", Err(Base64)),
            ("data:image/png;base64,AA=A", Err(Base64)),
            ("data:image/png;base64,AAAA%", Err(Base64)),
            ("data:image/png;base64,A", Err(Base64)),
            ("data:image/png;base64,-_-_", Err(Base64)),
            ("data:image/bmp;base64,@@", Err(MediaType)),
            ("data:;base64,AAAA", Err(MediaType)),
            ("data:image/png,%89PNG", Err(Format)),
            ("data:image/png;BASE64,AAAA", Err(Format)),
            ("data:image/png;base64;x,AAAA", Err(Format)),
            ("data:image/png;base64", Err(Format)),
            ("ftp://x", Err(Format)),
            (too_long.as_str(), Err(TooLong(8193))),
        ] {
            assert_eq!(checked_image_url(url).map(|_| ()), want, "{url:?}");
        }
    }
}
