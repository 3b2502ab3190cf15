// Interleaved partial rotary embedding (torch-free CPU kernel).
#pragma once
#include "../csrc/lanes.h"

/* Rotary embedding on the trailing R channels of each [D] row: x: [T, inner, D]; c, s: [T, R].
   out = x * c + swap_pairs(x) * s on those channels (each product rounded, then the sum), a copy elsewhere.
   out may be x. Eight rotated channels at a time (their pairs swapped inside the register), the rest one pair
   at a time: the same products and sums either way. */
static inline void rope_apply(const float *x, int64_t T, int64_t inner, int64_t D, int64_t R, const float *c, const float *s,
                float *out) {
    const int64_t keep = D - R;
    for (int64_t t = 0; t < T; t++) {
        const float *ct = c + t * R, *st = s + t * R;
        for (int64_t h = 0; h < inner; h++) {
            const float *xr = x + (t * inner + h) * D;
            float *o = out + (t * inner + h) * D;
            if (o != xr)
                for (int64_t k = 0; k < keep; k++) o[k] = xr[k];
            const float *xe = xr + keep;
            float *oe = o + keep;
            int64_t j = 0;
            for (; j + 8 <= R; j += 8) {
                v8f xv, cv, sv;
                memcpy(&xv, xe + j, sizeof(xv));
                memcpy(&cv, ct + j, sizeof(cv));
                memcpy(&sv, st + j, sizeof(sv));
                const v8f sw = __builtin_shuffle(xv, (v8i){1, 0, 3, 2, 5, 4, 7, 6});
                const v8f a = xv * cv, b = sw * sv;
                const v8f r = a + b;
                memcpy(oe + j, &r, sizeof(r));
            }
            for (; j < R; j += 2) {
                float a = xe[j] * ct[j], b = xe[j + 1] * st[j];
                float a2 = xe[j + 1] * ct[j + 1], b2 = xe[j] * st[j + 1];
                oe[j] = a + b;
                oe[j + 1] = a2 + b2;
            }
        }
    }
}
