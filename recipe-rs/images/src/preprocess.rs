//! One image's bytes → the preprocessed image the model sees, in the official order:
//! empty check → format sniff → header dimensions against `max_dimension_px` → decode →
//! (low detail) shrink the long side to `low_detail_max_dimension_px` by area averaging → the
//! V4.1 fit (aspect kept, centred on grey `127` padding, bicubic) → lossy WebP at quality 90.

use crate::decode::{decode_rgb, header_dimensions, DEFAULT_PIXEL_BUDGET};
use crate::error::{ImageError, ImageErrorKind};
use crate::resample::{resize_area, resize_cubic, Pixels};
use crate::sniff::sniff;
use crate::spec::ImageTokenSpec;

/// Grey of the padding around a fitted image (the model's normalisation mean).
pub const PAD: u8 = 127;
/// WebP cannot encode a side longer than this.
pub const WEBP_MAX_SIDE: usize = 16383;
/// Lossy WebP quality of the output.
pub const WEBP_QUALITY: f32 = 90.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Detail {
    Low,
    High,
    Original,
    Auto,
}

impl Detail {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "low" => Self::Low,
            "high" => Self::High,
            "original" => Self::Original,
            "auto" => Self::Auto,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::High => "high",
            Self::Original => "original",
            Self::Auto => "auto",
        }
    }
}

/// Options of one preprocessing call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreprocessOptions {
    pub detail: Detail,
    pub max_dimension_px: u32,
    pub low_detail_max_dimension_px: u32,
    /// Ours: the largest width×height decoded (see `docs/image-deviations.md`).
    pub pixel_budget: u64,
}

/// The largest option value: the official package stores sides as `i32` and wraps above it.
pub const MAX_OPTION_VALUE: u64 = i32::MAX as u64;

impl PreprocessOptions {
    /// Options with the default decode budget; values above `i32::MAX` are refused.
    pub fn new(
        detail: Detail,
        max_dimension_px: u64,
        low_detail_max_dimension_px: u64,
    ) -> Result<Self, ImageError> {
        for (name, v) in [
            ("max_dimension_px", max_dimension_px),
            ("low_detail_max_dimension_px", low_detail_max_dimension_px),
        ] {
            if v > MAX_OPTION_VALUE {
                return Err(ImageError::with_public(
                    ImageErrorKind::InvalidOption,
                    format!("{name} must be at most {MAX_OPTION_VALUE}, got {v}"),
                    "option out of range",
                ));
            }
        }
        Ok(Self {
            detail,
            max_dimension_px: max_dimension_px as u32,
            low_detail_max_dimension_px: low_detail_max_dimension_px as u32,
            pixel_budget: DEFAULT_PIXEL_BUDGET,
        })
    }
}

/// A preprocessed image: WebP bytes and the size after preprocessing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub data: Vec<u8>,
    pub width: u32,
    pub height: u32,
}

fn too_large() -> ImageError {
    ImageError::new(
        ImageErrorKind::ImageDimensionsTooLarge,
        "image side over max_dimension_px",
    )
}

/// Preprocess one encoded image.
pub fn preprocess(data: &[u8], options: &PreprocessOptions) -> Result<ImageInfo, ImageError> {
    if data.is_empty() {
        return Err(ImageError::new(ImageErrorKind::EmptyImage, "no bytes"));
    }
    let media = sniff(data)?;
    let max_side = options.max_dimension_px;
    let (w, h) = header_dimensions(data, media)?;
    if w > max_side || h > max_side {
        return Err(too_large());
    }
    let mut pixels = decode_rgb(data, media, options.pixel_budget)?;
    if options.detail == Detail::Low {
        pixels = limit_long_side(pixels, options.low_detail_max_dimension_px as usize);
    }
    if pixels.width > max_side as usize || pixels.height > max_side as usize {
        return Err(too_large());
    }
    let (tw, th) = webp_target_size(pixels.width, pixels.height)?;
    let fitted = if (tw, th) == (pixels.width, pixels.height) {
        pixels
    } else {
        fit_onto_canvas(&pixels, tw, th)
    };
    let encoded = encode_webp(&fitted)?;
    Ok(ImageInfo {
        data: encoded,
        width: tw as u32,
        height: th as u32,
    })
}

/// Low detail: shrink by area averaging so that the long side is at most `max_side` (sides
/// rounded, at least 1).
fn limit_long_side(pixels: Pixels, max_side: usize) -> Pixels {
    let long = pixels.width.max(pixels.height);
    if long <= max_side {
        return pixels;
    }
    let ratio = max_side as f64 / long as f64;
    let w = ((pixels.width as f64 * ratio).round() as usize).max(1);
    let h = ((pixels.height as f64 * ratio).round() as usize).max(1);
    resize_area(&pixels, w, h)
}

/// The fitted size, also within WebP's side limit: a fitted side over the limit is brought to
/// the largest patch multiple under it, the short side scaled and rounded up to the patch
/// grid, and the fit repeated from there (six rounds at most).
pub fn webp_target_size(width: usize, height: usize) -> Result<(usize, usize), ImageError> {
    let spec = ImageTokenSpec::V41;
    let mut source = (width, height);
    for _ in 0..6 {
        let fitted = spec
            .fit(source.0, source.1)
            .map_err(|e| ImageError::new(ImageErrorKind::Resize, e.to_string()))?;
        if fitted.width <= WEBP_MAX_SIDE && fitted.height <= WEBP_MAX_SIDE {
            if fitted.width == 0 || fitted.height == 0 {
                return Err(ImageError::new(ImageErrorKind::Resize, "empty target size"));
            }
            return Ok((fitted.width, fitted.height));
        }
        let long = fitted.width.max(fitted.height);
        let new_long = WEBP_MAX_SIDE / spec.patch * spec.patch;
        let short =
            (fitted.width.min(fitted.height) as f64 * new_long as f64 / long as f64).round();
        let new_short = (short as usize).max(1).div_ceil(spec.patch) * spec.patch;
        source = if fitted.width >= fitted.height {
            (new_long, new_short)
        } else {
            (new_short, new_long)
        };
    }
    Err(ImageError::new(
        ImageErrorKind::Resize,
        format!("no V4.1 target size within {WEBP_MAX_SIDE} pixels for an image of {width}x{height} pixels"),
    ))
}

/// Scale keeping the aspect so the image touches the target on one axis (the other side
/// rounded half to even), then centre it on grey padding (offsets rounded half to even).
fn fit_onto_canvas(src: &Pixels, tw: usize, th: usize) -> Pixels {
    let src_ratio = src.width as f64 / src.height as f64;
    let dst_ratio = tw as f64 / th as f64;
    let (w, h) = if src_ratio > dst_ratio {
        (
            tw,
            ((src.height as f64 / src.width as f64 * tw as f64).round_ties_even() as usize).max(1),
        )
    } else if src_ratio < dst_ratio {
        (
            ((src.width as f64 / src.height as f64 * th as f64).round_ties_even() as usize).max(1),
            th,
        )
    } else {
        (tw, th)
    };
    let scaled = resize_cubic(src, w, h);
    if (w, h) == (tw, th) {
        return scaled;
    }
    let left = ((tw as f64 - w as f64) * 0.5).round_ties_even() as usize;
    let top = ((th as f64 - h as f64) * 0.5).round_ties_even() as usize;
    let mut canvas = Pixels::filled(tw, th, 3, PAD);
    for y in 0..h.min(th) {
        let from = &scaled.data[y * w * 3..(y * w + w.min(tw)) * 3];
        let at = ((top + y) * tw + left) * 3;
        canvas.data[at..at + from.len()].copy_from_slice(from);
    }
    canvas
}

fn encode_webp(p: &Pixels) -> Result<Vec<u8>, ImageError> {
    let encoder = webp::Encoder::from_rgb(&p.data, p.width as u32, p.height as u32);
    let encoded = encoder
        .encode_simple(false, WEBP_QUALITY)
        .map_err(|e| ImageError::new(ImageErrorKind::Encode, format!("{e:?}")))?;
    Ok(encoded.to_vec())
}
