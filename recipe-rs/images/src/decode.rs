//! Decoding to 8-bit RGB: the first frame of animations, 16-bit samples rounded to 8 bits
//! (`v/257`), grey copied to three channels, transparency composited on the official
//! background `#FDFDFD`, EXIF orientation ignored (as the official package does).
//!
//! Memory: the header's dimensions are checked against the caller's maximum side and against a
//! decoded-size budget *before* any pixel buffer is allocated; PNG (the format whose 16-bit
//! files are the worst case) is decoded row by row straight into the 8-bit buffer, so the peak
//! is about one 8-bit RGB image plus one row.

use std::io::Cursor;

use image::{ImageDecoder, ImageReader, Limits};

use crate::error::{ImageError, ImageErrorKind};
use crate::resample::Pixels;
use crate::sniff::MediaType;

/// Background behind transparent pixels.
pub const BACKGROUND: u8 = 0xFD;

/// The largest decoded image, in pixels, one decode may produce (8192² by default; the
/// official default `max_dimension_px` allows that much).
pub const DEFAULT_PIXEL_BUDGET: u64 = 8192 * 8192;

fn decode_err(e: impl std::fmt::Display) -> ImageError {
    ImageError::new(ImageErrorKind::Decode, e.to_string())
}

/// A PNG, JPEG or WebP whose header reads but whose pixels do not: the official decoder
/// (OpenCV) returns an empty image then, reported as `EmptyImage`.
fn body_err(e: impl std::fmt::Display) -> ImageError {
    ImageError::new(ImageErrorKind::EmptyImage, e.to_string())
}

/// The width and height the header declares.
pub fn header_dimensions(data: &[u8], media: MediaType) -> Result<(u32, u32), ImageError> {
    if media == MediaType::Png {
        return png_header_size(data).ok_or_else(|| decode_err("invalid PNG header"));
    }
    let reader = ImageReader::new(Cursor::new(data))
        .with_guessed_format()
        .map_err(decode_err)?;
    let decoder = reader.into_decoder().map_err(decode_err)?;
    Ok(decoder.dimensions())
}

/// The size a PNG's IHDR chunk declares, read as libpng reads it: the whole chunk present with
/// its CRC right, both sides from 1 to 2^32 - 1 (sides over 2^31 - 1 too: they are over any
/// maximum side, so `ImageDimensionsTooLarge` rather than a decode error, as officially), a
/// valid bit depth for the colour type, compression and filter method 0, interlace 0 or 1.
pub fn png_header_size(data: &[u8]) -> Option<(u32, u32)> {
    let chunk = data.get(8..33)?;
    if &chunk[..8] != b"\0\0\0\x0dIHDR" {
        return None;
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    if crc32fast::hash(&chunk[4..21]) != be(&chunk[21..25]) {
        return None;
    }
    let (w, h) = (be(&chunk[8..12]), be(&chunk[12..16]));
    let (depth, color) = (chunk[16], chunk[17]);
    let depth_ok = match color {
        0 => matches!(depth, 1 | 2 | 4 | 8 | 16),
        3 => matches!(depth, 1 | 2 | 4 | 8),
        2 | 4 | 6 => matches!(depth, 8 | 16),
        _ => false,
    };
    (w > 0 && h > 0 && depth_ok && chunk[18] == 0 && chunk[19] == 0 && chunk[20] <= 1)
        .then_some((w, h))
}

/// Decode to 8-bit RGB. `pixel_budget` bounds width×height before allocation.
pub fn decode_rgb(data: &[u8], media: MediaType, pixel_budget: u64) -> Result<Pixels, ImageError> {
    let pixels = match media {
        MediaType::Png => decode_png(data, pixel_budget)?,
        _ => decode_other(data, media, pixel_budget)?,
    };
    if pixels.width == 0 || pixels.height == 0 {
        return Err(ImageError::new(ImageErrorKind::EmptyImage, "no pixels"));
    }
    Ok(pixels)
}

fn check_budget(w: u32, h: u32, budget: u64) -> Result<(), ImageError> {
    if w as u64 * h as u64 > budget {
        return Err(ImageError::new(
            ImageErrorKind::DecodedSizeTooLarge,
            format!("{w}x{h} exceeds the decode budget"),
        ));
    }
    Ok(())
}

fn blend(c: u8, a: u8) -> u8 {
    ((c as u32 * a as u32 + BACKGROUND as u32 * (255 - a as u32) + 127) / 255) as u8
}

fn from16(v: u16) -> u8 {
    // Round half to even of v/257; v/257 is never exactly half-way, so plain rounding matches.
    ((v as u32 * 2 + 257) / 514) as u8
}

/// Write one decoded row of `samples` (1–4 channels, 8-bit) as RGB.
fn put_row(samples: &[u8], channels: usize, out: &mut [u8]) {
    for (px, o) in samples.chunks_exact(channels).zip(out.chunks_exact_mut(3)) {
        match channels {
            1 => o.fill(px[0]),
            2 => o.fill(blend(px[0], px[1])),
            3 => o.copy_from_slice(px),
            _ => {
                o[0] = blend(px[0], px[3]);
                o[1] = blend(px[1], px[3]);
                o[2] = blend(px[2], px[3]);
            }
        }
    }
}

fn decode_png(data: &[u8], budget: u64) -> Result<Pixels, ImageError> {
    // Like the official decoder (libpng's defaults): a bad CRC on a critical chunk (IHDR,
    // IDAT, IEND, ...) or a bad zlib checksum is fatal, on an ancillary chunk it is not.
    let mut options = png::DecodeOptions::default();
    options.set_ignore_adler32(false);
    options.set_ignore_crc(false);
    let mut decoder = png::Decoder::new_with_options(Cursor::new(data), options);
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder.read_info().map_err(decode_err)?;
    let (w, h) = (reader.info().width, reader.info().height);
    check_budget(w, h, budget)?;
    let (color, depth) = reader.output_color_type();
    let channels = color.samples();
    let wide = depth == png::BitDepth::Sixteen;
    let mut out = Pixels::filled(w as usize, h as usize, 3, 0);
    let row_out = w as usize * 3;
    if reader.info().interlaced {
        // Adam7 rows arrive pass by pass: decode the whole frame (still within the budget).
        let sample_bytes = if wide { 2 } else { 1 };
        let mut frame = vec![0u8; w as usize * h as usize * channels * sample_bytes];
        reader.next_frame(&mut frame).map_err(body_err)?;
        let row_in = w as usize * channels * sample_bytes;
        let mut narrow = vec![0u8; w as usize * channels];
        for y in 0..h as usize {
            let bytes = &frame[y * row_in..(y + 1) * row_in];
            let samples: &[u8] = if wide {
                for (n, pair) in narrow.iter_mut().zip(bytes.chunks_exact(2)) {
                    *n = from16(u16::from_be_bytes([pair[0], pair[1]]));
                }
                &narrow
            } else {
                bytes
            };
            put_row(
                samples,
                channels,
                &mut out.data[y * row_out..(y + 1) * row_out],
            );
        }
        // The rest of the file (checksums, IEND) as libpng reads it after the pixels.
        reader.finish().map_err(body_err)?;
        return Ok(out);
    }
    let mut narrow = vec![0u8; w as usize * channels];
    let mut y = 0usize;
    while let Some(row) = reader.next_row().map_err(body_err)? {
        if y >= h as usize {
            break;
        }
        let bytes = row.data();
        let samples: &[u8] = if wide {
            for (n, pair) in narrow.iter_mut().zip(bytes.chunks_exact(2)) {
                *n = from16(u16::from_be_bytes([pair[0], pair[1]]));
            }
            &narrow
        } else {
            bytes
        };
        put_row(
            samples,
            channels,
            &mut out.data[y * row_out..(y + 1) * row_out],
        );
        y += 1;
    }
    if y < h as usize {
        return Err(body_err("truncated PNG"));
    }
    reader.finish().map_err(body_err)?;
    Ok(out)
}

/// Whether a JPEG's compressed data ends: an EOI marker (`FF D9`) after the first scan
/// (`FF DA`). Markers before the scan are walked by their lengths, so an EXIF thumbnail's EOI
/// does not count; inside scans `FF` is always stuffed, so `FF D9` there is the real end. The
/// official decoder refuses a truncated JPEG (baseline or progressive) as an empty image.
fn jpeg_has_end(data: &[u8]) -> bool {
    let mut i = 2;
    while i + 4 <= data.len() {
        if data[i] != 0xFF {
            return false;
        }
        let marker = data[i + 1];
        if marker == 0xFF {
            i += 1;
            continue;
        }
        if marker == 0xDA {
            return data[i + 2..].windows(2).any(|w| w == [0xFF, 0xD9]);
        }
        let len = u16::from_be_bytes([data[i + 2], data[i + 3]]) as usize;
        i += 2 + len;
    }
    false
}

fn decode_other(data: &[u8], media: MediaType, budget: u64) -> Result<Pixels, ImageError> {
    let mut reader = ImageReader::new(Cursor::new(data))
        .with_guessed_format()
        .map_err(decode_err)?;
    let mut limits = Limits::default();
    limits.max_alloc = Some(budget.saturating_mul(8));
    reader.limits(limits);
    let decoder = reader.into_decoder().map_err(decode_err)?;
    let (w, h) = decoder.dimensions();
    check_budget(w, h, budget)?;
    if media == MediaType::Jpeg && !jpeg_has_end(data) {
        return Err(body_err(
            "JPEG without an end-of-image marker after its scan",
        ));
    }
    let body = |e: String| {
        if media == MediaType::Gif {
            decode_err(e)
        } else {
            body_err(e)
        }
    };
    let img = image::DynamicImage::from_decoder(decoder).map_err(|e| body(e.to_string()))?;
    let (channels, bytes): (usize, Vec<u8>) = match img {
        image::DynamicImage::ImageLuma8(b) => (1, b.into_raw()),
        image::DynamicImage::ImageLumaA8(b) => (2, b.into_raw()),
        image::DynamicImage::ImageRgb8(b) => (3, b.into_raw()),
        image::DynamicImage::ImageRgba8(b) => (4, b.into_raw()),
        other => (4, other.to_rgba8().into_raw()),
    };
    let mut out = Pixels::filled(w as usize, h as usize, 3, 0);
    let row_in = w as usize * channels;
    let row_out = w as usize * 3;
    for y in 0..h as usize {
        put_row(
            &bytes[y * row_in..(y + 1) * row_in],
            channels,
            &mut out.data[y * row_out..(y + 1) * row_out],
        );
    }
    Ok(out)
}
