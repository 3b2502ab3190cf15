//! Area resampling that reproduces OpenCV's `resize(…, INTER_AREA)` on 8-bit images when
//! shrinking (both scales at least 1), which is all the low-detail shrink does.
//!
//! Each output pixel is the mean of the source area it covers. Two cases, as in OpenCV:
//!
//! * **Whole-number scales** on both axes (`src = k·dst` exactly): each output pixel averages a
//!   `kx×ky` block with integer sums. A 2×2 block rounds `(sum + 2) >> 2` (OpenCV's vector path);
//!   any other block multiplies the sum by the `f32` reciprocal of its area and rounds half to
//!   even.
//! * **Fractional scales**: output pixel `d` covers source span `[d·s, (d+1)·s)` on each axis
//!   (`s = src/dst`, the inverse of `dst/src` in `f64`). Every source pixel the span touches
//!   gets the weight `overlap / cell`, where `cell` is the span's length clipped to the image;
//!   partial overlaps under 0.001 of a pixel are dropped. Rows are summed horizontally into `f32`
//!   buffers, then accumulated vertically in source-row order, and the total rounds half to even
//!   and saturates to 0..=255.
//!
//! The `f32` arithmetic and the order of the sums follow OpenCV's, so results agree to the level.

use super::Pixels;

/// One weight of the fractional-scale table: output index, source index, weight.
#[derive(Debug, Clone, Copy, PartialEq)]
struct AreaWeight {
    dst: usize,
    src: usize,
    alpha: f32,
}

/// The weights of one axis, ordered by output index then source index.
fn area_weights(src_len: usize, dst_len: usize, scale: f64) -> Vec<AreaWeight> {
    let mut table = Vec::with_capacity(src_len * 2);
    for d in 0..dst_len {
        let start = d as f64 * scale;
        let end = start + scale;
        let cell = scale.min(src_len as f64 - start);
        let last = (end.floor() as usize).min(src_len - 1);
        let first = (start.ceil() as usize).min(last);
        if first as f64 - start > 1e-3 {
            table.push(AreaWeight {
                dst: d,
                src: first - 1,
                alpha: ((first as f64 - start) / cell) as f32,
            });
        }
        for s in first..last {
            table.push(AreaWeight {
                dst: d,
                src: s,
                alpha: (1.0 / cell) as f32,
            });
        }
        if end - last as f64 > 1e-3 {
            table.push(AreaWeight {
                dst: d,
                src: last,
                alpha: ((end - last as f64).min(1.0).min(cell) / cell) as f32,
            });
        }
    }
    table
}

/// `src_len / dst_len` as OpenCV derives it (through the inverse scale).
fn scale_of(src_len: usize, dst_len: usize) -> f64 {
    1.0 / (dst_len as f64 / src_len as f64)
}

/// The whole-number scale of an axis, if it is one.
fn whole_scale(scale: f64) -> Option<usize> {
    let k = scale.round();
    ((scale - k).abs() < f64::EPSILON).then_some(k as usize)
}

/// Shrink `src` to `width`×`height` (each at least 1 and at most the source side) by area
/// averaging.
pub fn resize_area(src: &Pixels, width: usize, height: usize) -> Pixels {
    assert!(
        width >= 1 && height >= 1 && width <= src.width && height <= src.height,
        "area resampling only shrinks"
    );
    let (sx, sy) = (scale_of(src.width, width), scale_of(src.height, height));
    match (whole_scale(sx), whole_scale(sy)) {
        (Some(kx), Some(ky)) => block_mean(src, width, height, kx, ky),
        _ => weighted_area(src, width, height, sx, sy),
    }
}

/// Whole-number scales: the rounded mean of each `kx×ky` block.
fn block_mean(src: &Pixels, width: usize, height: usize, kx: usize, ky: usize) -> Pixels {
    let ch = src.channels;
    let row = src.width * ch;
    let reciprocal = 1.0f32 / (kx * ky) as f32;
    let mut out = Pixels::filled(width, height, ch, 0);
    for dy in 0..height {
        for dx in 0..width {
            for c in 0..ch {
                let mut sum = 0u32;
                for y in dy * ky..(dy + 1) * ky {
                    let base = y * row + c;
                    for x in dx * kx..(dx + 1) * kx {
                        sum += src.data[base + x * ch] as u32;
                    }
                }
                let v = if kx == 2 && ky == 2 {
                    (sum + 2) >> 2
                } else {
                    (sum as f32 * reciprocal).round_ties_even() as u32
                };
                out.data[(dy * width + dx) * ch + c] = v.min(255) as u8;
            }
        }
    }
    out
}

/// Fractional scales: area weights on both axes, `f32` sums in OpenCV's order.
fn weighted_area(src: &Pixels, width: usize, height: usize, sx: f64, sy: f64) -> Pixels {
    let ch = src.channels;
    let xw = area_weights(src.width, width, sx);
    let yw = area_weights(src.height, height, sy);
    let row_len = width * ch;
    let mut out = Pixels::filled(width, height, ch, 0);
    let mut buf = vec![0f32; row_len];
    let mut sum = vec![0f32; row_len];
    let mut current = yw.first().map_or(0, |w| w.dst);
    let flush = |out: &mut Pixels, dy: usize, sum: &[f32]| {
        let dst = &mut out.data[dy * row_len..(dy + 1) * row_len];
        for (d, &s) in dst.iter_mut().zip(sum) {
            *d = s.round_ties_even().clamp(0.0, 255.0) as u8;
        }
    };
    for w in &yw {
        let line = &src.data[w.src * src.width * ch..(w.src + 1) * src.width * ch];
        buf.fill(0.0);
        for xwk in &xw {
            for c in 0..ch {
                let i = xwk.dst * ch + c;
                buf[i] += line[xwk.src * ch + c] as f32 * xwk.alpha;
            }
        }
        if w.dst != current {
            flush(&mut out, current, &sum);
            for (s, &b) in sum.iter_mut().zip(&buf) {
                *s = w.alpha * b;
            }
            current = w.dst;
        } else {
            for (s, &b) in sum.iter_mut().zip(&buf) {
                *s += w.alpha * b;
            }
        }
    }
    flush(&mut out, current, &sum);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn image(width: usize, height: usize, channels: usize, f: impl Fn(usize) -> u8) -> Pixels {
        Pixels {
            width,
            height,
            channels,
            data: (0..width * height * channels).map(f).collect(),
        }
    }

    #[test]
    fn weights_of_each_output_sum_to_one() {
        for (src, dst) in [(10, 3), (3000, 512), (40, 7), (7, 7), (1000, 1), (5, 4)] {
            let table = area_weights(src, dst, scale_of(src, dst));
            for d in 0..dst {
                let total: f32 = table.iter().filter(|w| w.dst == d).map(|w| w.alpha).sum();
                assert!((total - 1.0).abs() < 1e-4, "{src}->{dst} at {d}: {total}");
            }
            assert!(table
                .windows(2)
                .all(|p| (p[0].dst, p[0].src) < (p[1].dst, p[1].src)));
        }
    }

    #[test]
    fn three_to_two_splits_the_middle_pixel() {
        // Output 0 covers [0, 1.5): all of pixel 0 and half of pixel 1, over a cell of 1.5.
        let table = area_weights(3, 2, 1.5);
        let expect = [
            (0, 0, 2.0 / 3.0),
            (0, 1, 1.0 / 3.0),
            (1, 1, 1.0 / 3.0),
            (1, 2, 2.0 / 3.0),
        ];
        assert_eq!(table.len(), expect.len());
        for (w, (d, s, a)) in table.iter().zip(expect) {
            assert_eq!((w.dst, w.src), (d, s));
            assert!((w.alpha - a as f32).abs() < 1e-6);
        }
        let src = image(3, 1, 1, |i| [0, 90, 180][i]);
        assert_eq!(resize_area(&src, 2, 1).data, vec![30, 150]);
    }

    #[test]
    fn whole_scales_average_blocks() {
        // 2×2 rounds halves up; 3×1 rounds half to even through the f32 reciprocal.
        let src = image(2, 2, 1, |i| [1, 2, 2, 2][i]);
        assert_eq!(resize_area(&src, 1, 1).data, vec![2]); // 7/4 = 1.75
        let src = image(2, 2, 1, |i| [1, 1, 2, 2][i]);
        assert_eq!(resize_area(&src, 1, 1).data, vec![2]); // 6/4 = 1.5 rounds up
        let src = image(4, 1, 1, |i| [1, 2, 2, 5][i]);
        assert_eq!(resize_area(&src, 1, 1).data, vec![2]); // 10/4 = 2.5 rounds to even
        let src = image(6, 1, 3, |i| (i * 10) as u8);
        assert_eq!(
            resize_area(&src, 2, 1).data,
            vec![30, 40, 50, 120, 130, 140]
        );
    }

    #[test]
    fn flat_stays_flat_and_identity_is_exact() {
        let flat = Pixels::filled(3000, 40, 3, 77);
        assert_eq!(resize_area(&flat, 512, 7), Pixels::filled(512, 7, 3, 77));
        let src = image(5, 4, 3, |i| (i * 7 % 256) as u8);
        assert_eq!(resize_area(&src, 5, 4), src);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        /// Each output sample is a weighted mean, so it lies within the range of the source
        /// samples of its channel; a constant image stays constant.
        #[test]
        fn outputs_stay_within_the_source_range(
            (w, h, dw, dh, seed) in (1usize..40, 1usize..40)
                .prop_flat_map(|(w, h)| (Just(w), Just(h), 1..=w, 1..=h, any::<u64>()))
        ) {
            let src = image(w, h, 3, |i| (seed.wrapping_mul(i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8);
            let out = resize_area(&src, dw, dh);
            prop_assert_eq!((out.width, out.height, out.data.len()), (dw, dh, dw * dh * 3));
            for c in 0..3 {
                let lo = src.data.iter().skip(c).step_by(3).min().unwrap();
                let hi = src.data.iter().skip(c).step_by(3).max().unwrap();
                prop_assert!(out.data.iter().skip(c).step_by(3).all(|v| lo <= v && v <= hi));
            }
            let flat = Pixels::filled(w, h, 3, (seed % 256) as u8);
            prop_assert_eq!(resize_area(&flat, dw, dh), Pixels::filled(dw, dh, 3, (seed % 256) as u8));
        }
    }
}
