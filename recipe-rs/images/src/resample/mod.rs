//! Resampling 8-bit images the way OpenCV's `resize` does, so that our pixels land where the
//! official pipeline's do: [`resize_cubic`] (`INTER_CUBIC`, the V4.1 fit) and [`resize_area`]
//! (`INTER_AREA`, the low-detail shrink).

mod area;
mod cubic;

pub use area::resize_area;
pub use cubic::resize_cubic;

/// An 8-bit image with `channels` interleaved samples per pixel, rows without padding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pixels {
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    pub data: Vec<u8>,
}

impl Pixels {
    pub fn filled(width: usize, height: usize, channels: usize, value: u8) -> Self {
        Self {
            width,
            height,
            channels,
            data: vec![value; width * height * channels],
        }
    }
}
