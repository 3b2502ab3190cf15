//! Bicubic resampling that reproduces OpenCV's `resize(…, INTER_CUBIC)` on 8-bit images.
//!
//! OpenCV samples the source at `(d + 0.5)·scale − 0.5` with the Keys kernel (a = −0.75) over
//! four taps, for upscales and downscales alike (no antialiasing: a large downscale reads only
//! four source pixels per output pixel). Taps outside the image repeat the edge pixel. The
//! weights are quantised to 11 bits; the horizontal pass keeps integer sums, the vertical pass
//! multiplies by the row weights and rounds the 22-bit product back to 8 bits.

use super::Pixels;

const COEF_BITS: u32 = 11;
const COEF_SCALE: f32 = (1 << COEF_BITS) as f32;
const A: f32 = -0.75;

/// The four Keys weights for a fractional offset `x` in [0, 1), computed in f32 as OpenCV does.
fn cubic_weights(x: f32) -> [f32; 4] {
    let w0 = ((A * (x + 1.0) - 5.0 * A) * (x + 1.0) + 8.0 * A) * (x + 1.0) - 4.0 * A;
    let w1 = ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let w2 = ((A + 2.0) * (1.0 - x) - (A + 3.0)) * (1.0 - x) * (1.0 - x) + 1.0;
    [w0, w1, w2, 1.0 - w0 - w1 - w2]
}

/// Round half to even, saturated to i16 (OpenCV's `saturate_cast<short>(float)`).
fn to_fixed(v: f32) -> i32 {
    (v.round_ties_even() as i32).clamp(i16::MIN as i32, i16::MAX as i32)
}

/// Per output coordinate: the first of the four source taps and the fixed-point weights.
fn taps(src_len: usize, dst_len: usize) -> Vec<(isize, [i32; 4])> {
    // OpenCV stores the inverse scale and inverts it back; keep its rounding.
    let scale = 1.0 / (dst_len as f64 / src_len as f64);
    (0..dst_len)
        .map(|d| {
            let f = ((d as f64 + 0.5) * scale - 0.5) as f32;
            let s = f.floor();
            let w = cubic_weights(f - s);
            (s as isize - 1, w.map(|c| to_fixed(c * COEF_SCALE)))
        })
        .collect()
}

/// Resize `src` to `width`×`height` with OpenCV's bicubic rule.
pub fn resize_cubic(src: &Pixels, width: usize, height: usize) -> Pixels {
    let ch = src.channels;
    let xt = taps(src.width, width);
    let yt = taps(src.height, height);
    let clamp_x = |x: isize| x.clamp(0, src.width as isize - 1) as usize;
    let clamp_y = |y: isize| y.clamp(0, src.height as isize - 1) as usize;

    // Horizontal pass over every source row a destination row needs, cached by source row.
    let row_len = width * ch;
    let horizontal = |sy: usize, out: &mut [i32]| {
        let row = &src.data[sy * src.width * ch..(sy + 1) * src.width * ch];
        for (dx, (first, w)) in xt.iter().enumerate() {
            for c in 0..ch {
                let mut acc = 0i32;
                for (k, wk) in w.iter().enumerate() {
                    acc += row[clamp_x(first + k as isize) * ch + c] as i32 * wk;
                }
                out[dx * ch + c] = acc;
            }
        }
    };

    let mut out = Pixels::filled(width, height, ch, 0);
    let mut cache: Vec<(usize, Vec<i32>)> = Vec::with_capacity(4);
    for (dy, (first, w)) in yt.iter().enumerate() {
        let rows: [usize; 4] = std::array::from_fn(|k| clamp_y(first + k as isize));
        let mut buffers: Vec<Vec<i32>> = Vec::with_capacity(4);
        for &sy in &rows {
            if let Some((_, b)) = cache.iter().find(|(y, _)| *y == sy) {
                buffers.push(b.clone());
            } else {
                let mut b = vec![0i32; row_len];
                horizontal(sy, &mut b);
                buffers.push(b);
            }
        }
        cache = rows.iter().copied().zip(buffers.iter().cloned()).collect();
        let dst = &mut out.data[dy * row_len..(dy + 1) * row_len];
        for (i, d) in dst.iter_mut().enumerate() {
            let v = buffers[0][i] as i64 * w[0] as i64
                + buffers[1][i] as i64 * w[1] as i64
                + buffers[2][i] as i64 * w[2] as i64
                + buffers[3][i] as i64 * w[3] as i64;
            let r = (v + (1i64 << (2 * COEF_BITS - 1))) >> (2 * COEF_BITS);
            *d = r.clamp(0, 255) as u8;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_sum_to_one() {
        for i in 0..100 {
            let w = cubic_weights(i as f32 / 100.0);
            assert!((w.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        }
    }

    #[test]
    fn identity_and_flat() {
        let src = Pixels {
            width: 3,
            height: 2,
            channels: 3,
            data: (0..18).map(|v| v as u8 * 10).collect(),
        };
        assert_eq!(resize_cubic(&src, 3, 2), src);
        let flat = Pixels::filled(7, 5, 3, 99);
        assert_eq!(resize_cubic(&flat, 20, 13), Pixels::filled(20, 13, 3, 99));
    }
}
