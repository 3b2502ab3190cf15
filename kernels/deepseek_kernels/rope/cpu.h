// Interleaved partial rotary embedding (torch-free CPU kernel).
#pragma once
#include "../csrc/lanes.h"

/* Rotary embedding on the trailing R channels of each [D] row: x: [T, inner, D]; c, s: [T, R].
   out = x * c + swap_pairs(x) * s on those channels (each product rounded, then the sum), a copy elsewhere. */
static inline void rope_apply(const float *x, int64_t T, int64_t inner, int64_t D, int64_t R, const float *c, const float *s,
                float *out) {
    for (int64_t t = 0; t < T; t++) {
        const float *ct = c + t * R, *st = s + t * R;
        for (int64_t h = 0; h < inner; h++) {
            const float *xr = x + (t * inner + h) * D;
            float *o = out + (t * inner + h) * D;
            memcpy(o, xr, (size_t)(D - R) * sizeof(float));
            const float *xe = xr + (D - R);
            float *oe = o + (D - R);
            for (int64_t j = 0; j < R; j += 2) {
                float a = xe[j] * ct[j], b = xe[j + 1] * st[j];
                oe[j] = a + b;
                float a2 = xe[j + 1] * ct[j + 1], b2 = xe[j] * st[j + 1];
                oe[j + 1] = a2 + b2;
            }
        }
    }
}

