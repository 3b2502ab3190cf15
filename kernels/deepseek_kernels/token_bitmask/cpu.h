// Token bitmask (torch-free CPU kernel): the logits a bitmask disallows set to -inf, in place.
#pragma once
#include <math.h>
#include <stdint.h>

/* x[r, v] = -inf unless bit v % 32 of mask[r, v / 32] is set (and for v >= 32 * W). All-ones words, most of a
   free-text position's mask, are skipped; all-zero words, most of a structural position's, are filled without
   looking at bits. */
static inline void mask_rows(float *x, const int32_t *mask, int64_t R, int64_t V, int64_t W) {
    for (int64_t r = 0; r < R; r++) {
        float *xr = x + r * V;
        const uint32_t *m = (const uint32_t *)(mask + r * W);
        for (int64_t w = 0; w * 32 < V; w++) {
            const int64_t base = w * 32, n = V - base < 32 ? V - base : 32;
            const uint32_t word = w < W ? m[w] : 0u;
            if (word == 0xFFFFFFFFu) continue;
            if (word == 0u) {
                for (int64_t b = 0; b < n; b++) xr[base + b] = -INFINITY;
            } else {
                for (int64_t b = 0; b < n; b++)
                    if (!((word >> b) & 1u)) xr[base + b] = -INFINITY;
            }
        }
    }
}
