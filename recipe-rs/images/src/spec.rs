//! The V4.1 image token specification: which pixel size an image is fitted to and how many
//! model tokens it occupies.
//!
//! An image is cut into 14-pixel patches; every 3×3 patches become one model token; each token
//! row ends with a newline token and the image is framed by a start and an end token, so a grid
//! of `rows × cols` tokens costs `rows·(cols+1)+2`. An image with a positive area below 544²
//! pixels is first scaled up to about that area; sides are then rounded up to the patch grid; a
//! grid over the 1024-token budget is scaled down to the largest aspect-keeping grid inside it.
//! One such step is not always a fixed point (rounding moves the aspect), so it is repeated
//! until the size stops changing, at most ten times.

use std::fmt;

/// A fitted size and its token count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResizeResult {
    pub token_rows: usize,
    pub token_cols: usize,
    pub height: usize,
    pub width: usize,
    pub num_tokens: usize,
}

/// Fitting did not reach a fixed point within the step limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalcResizeError {
    pub steps: usize,
    pub last: ResizeResult,
}

impl fmt::Display for CalcResizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.last;
        write!(
            f,
            "image resize did not converge after {} iterations, last result: ResizeResult {{ n_llm_h: {}, n_llm_w: {}, best_height: {}, best_width: {}, num_tokens: {} }}",
            self.steps, r.token_rows, r.token_cols, r.height, r.width, r.num_tokens
        )
    }
}

impl std::error::Error for CalcResizeError {}

/// The numbers that define the V4.1 image grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageTokenSpec {
    pub patch: usize,
    pub merge: usize,
    pub max_tokens: usize,
    pub min_pixels: usize,
}

const MAX_STEPS: usize = 10;

impl ImageTokenSpec {
    pub const V41: ImageTokenSpec = ImageTokenSpec {
        patch: 14,
        merge: 3,
        max_tokens: 1024,
        min_pixels: 544 * 544,
    };

    /// Tokens of an image of `width`×`height` pixels (after fitting).
    pub fn tokens(&self, width: usize, height: usize) -> Result<usize, CalcResizeError> {
        self.fit(width, height).map(|r| r.num_tokens)
    }

    /// The fitted size of an image: the fixed point of [`Self::fit_step`].
    pub fn fit(&self, width: usize, height: usize) -> Result<ResizeResult, CalcResizeError> {
        let mut current = self.fit_step(width, height);
        for _ in 1..MAX_STEPS {
            let next = self.fit_step(current.width, current.height);
            if next == current {
                return Ok(current);
            }
            current = next;
        }
        Err(CalcResizeError {
            steps: MAX_STEPS,
            last: current,
        })
    }

    /// One step: raise a small area, round up to the patch grid, shrink into the token budget.
    fn fit_step(&self, width: usize, height: usize) -> ResizeResult {
        let (mut w, mut h) = (width, height);
        let area = w.saturating_mul(h);
        if area > 0 && area < self.min_pixels {
            let up = (self.min_pixels as f64 / area as f64).sqrt();
            w = (w as f64 * up) as usize;
            h = (h as f64 * up) as usize;
        }
        let on_grid = self.grid(
            h.div_ceil(self.patch) * self.patch,
            w.div_ceil(self.patch) * self.patch,
        );
        if on_grid.num_tokens <= self.max_tokens {
            return on_grid;
        }
        self.shrink_into_budget(w, h)
    }

    /// Token grid and count of a size already on the patch grid.
    fn grid(&self, height: usize, width: usize) -> ResizeResult {
        let token_rows = (height / self.patch).div_ceil(self.merge);
        let token_cols = (width / self.patch).div_ceil(self.merge);
        ResizeResult {
            token_rows,
            token_cols,
            height,
            width,
            num_tokens: token_rows * (token_cols + 1) + 2,
        }
    }

    /// The largest size keeping the aspect of `width`×`height` whose grid fits the budget.
    ///
    /// With `r = h/w`, a grid of `c` columns and `c·r` rows costs about `c·r·(c+1)+2`; solving
    /// for `c` gives the widest column count; extreme aspects fall back to a one-token strip.
    fn shrink_into_budget(&self, width: usize, height: usize) -> ResizeResult {
        let unit = self.patch * self.merge;
        let budget = self.max_tokens - 2;
        let aspect = height as f64 / width as f64;
        let cols = (budget as f64 / aspect + 0.25).sqrt() - 0.5;
        let rows = cols * aspect;
        if cols < 1.0 {
            return self.grid(budget / 2 * unit, unit);
        }
        if rows < 1.0 {
            return self.grid(unit, (budget - 1) * unit);
        }
        let scale_w = (cols as usize * unit) as f64 / width as f64;
        let scale_h = (rows as usize * unit) as f64 / height as f64;
        let scale = scale_w.min(scale_h);
        let w = (width as f64 * scale / self.patch as f64) as usize * self.patch;
        let h = (height as f64 * scale / self.patch as f64) as usize * self.patch;
        self.grid(h, w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_examples() {
        let s = ImageTokenSpec::V41;
        // (width, height) → (fitted width, fitted height, tokens), observed from the official package.
        for (w, h, fw, fh, t) in [
            (1, 1, 546, 546, 184),
            (64, 48, 630, 476, 194),
            (800, 600, 812, 602, 317),
            (4000, 3000, 1512, 1134, 1001),
            (2, 1, 770, 392, 202),
            (0, 0, 0, 0, 2),
        ] {
            let r = s.fit(w, h).unwrap();
            assert_eq!((r.width, r.height, r.num_tokens), (fw, fh, t), "{w}x{h}");
        }
    }

    #[test]
    fn fitted_sizes_are_fixed_points() {
        let s = ImageTokenSpec::V41;
        for w in (1..3000).step_by(97) {
            for h in (1..3000).step_by(89) {
                let r = s.fit(w, h).unwrap();
                assert_eq!(s.fit(r.width, r.height).unwrap(), r);
                assert!(r.num_tokens <= s.max_tokens);
                assert_eq!(r.width % 14, 0);
            }
        }
    }
}
