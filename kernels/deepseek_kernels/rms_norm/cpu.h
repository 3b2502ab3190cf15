// RMS norm over rows (torch-free CPU kernel).
#pragma once
#include "../csrc/lanes.h"

/* RMS norm of each [D] row of x (row r at x + r * stride): out = x * (1 / sqrt(mean(x^2) + eps)) [* w]. */
static inline void rms_norm(const float *x, int64_t rows, int64_t D, int64_t stride, const float *w, float eps, float *out) {
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

