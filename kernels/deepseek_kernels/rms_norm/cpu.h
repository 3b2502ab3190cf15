// RMS norm over rows (torch-free CPU kernel).
#pragma once
#include "../csrc/lanes.h"

/* RMS norm of each [D] row of x (row r at x + r * stride): out = x * (1 / sqrt(mean(x^2) + eps)) [* w], one row
   at a time. */
static inline void rms_norm_each_row(const float *x, int64_t rows, int64_t D, int64_t stride, const float *w, float eps,
                                     float *out) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * stride;
        float *o = out + r * D;
        float s = 0.0f;
        int64_t d0 = 0;
        if (D >= 16) {
            /* eight partial sums, added up in lane order */
            v8f acc = {0};
            for (; d0 + 8 <= D; d0 += 8) {
                v8f a;
                memcpy(&a, xr + d0, sizeof(a));
                acc = acc + a * a;
            }
            for (int l = 0; l < 8; l++) s += acc[l];
        }
        for (int64_t d = d0; d < D; d++) s += xr[d] * xr[d];
        const float inv = 1.0f / sqrtf(s / (float)D + eps);
        if (w) {
            for (int64_t d = 0; d < D; d++) o[d] = w[d] * (xr[d] * inv);
        } else {
            for (int64_t d = 0; d < D; d++) o[d] = xr[d] * inv;
        }
    }
}

/* RMS norm of each [D] row of x (row r at x + r * stride): out = x * (1 / sqrt(mean(x^2) + eps)) [* w]. When
   the row width is a multiple of 8 and at least 16, eight rows' lane sums are added up at once through
   lane_sums8 (the same sums in the same order as one row at a time); other widths and the last rows go through
   rms_norm_each_row. */
static inline void rms_norm(const float *x, int64_t rows, int64_t D, int64_t stride, const float *w, float eps,
                            float *out) {
    int64_t r0 = 0;
#if defined(__AVX__)
    if (D >= 16 && (D & 7) == 0) {
        const v8f dv = bc((float)D), ev = bc(eps), one = bc(1.0f);
        for (; r0 + 8 <= rows; r0 += 8) {
            v8f acc[8];
            for (int i = 0; i < 8; i++) {
                const float *xr = x + (r0 + i) * stride;
                v8f a = {0};
                for (int64_t d = 0; d < D; d += 8) {
                    v8f v;
                    memcpy(&v, xr + d, sizeof(v));
                    a = a + v * v;
                }
                acc[i] = a;
            }
            const v8f s = (v8f)lane_sums8(acc);
            v8f sq = s / dv + ev;
            sq = (v8f)_mm256_sqrt_ps((__m256)sq);
            const v8f inv = one / sq;
            for (int i = 0; i < 8; i++) {
                const float *xr = x + (r0 + i) * stride;
                float *o = out + (r0 + i) * D;
                const v8f iv = bc(inv[i]);
                for (int64_t d = 0; d < D; d += 8) {
                    v8f v;
                    memcpy(&v, xr + d, sizeof(v));
                    v = v * iv;
                    if (w) {
                        v8f wv;
                        memcpy(&wv, w + d, sizeof(wv));
                        v = wv * v;
                    }
                    memcpy(o + d, &v, sizeof(v));
                }
            }
        }
    }
#endif
    if (r0 < rows) rms_norm_each_row(x + r0 * stride, rows - r0, D, stride, w, eps, out + r0 * D);
}
