// Exponential-race sampling (torch-free CPU kernel): per row, the index of the largest probs / noise.
#pragma once
#include <math.h>
#include <stdint.h>

/* out[r] = argmax_v probs[r, v] / noise[r, v] (float32 quotient, first index of the maximum; NaN wins, as in
   torch.argmax). */
static inline void sample_race(const float *probs, const float *noise, int64_t R, int64_t V, int64_t *out) {
    for (int64_t r = 0; r < R; r++) {
        const float *p = probs + r * V, *e = noise + r * V;
        float best = -INFINITY;
        int64_t bi = 0;
        for (int64_t v = 0; v < V; v++) {
            const float q = p[v] / e[v];
            if (isnan(q)) { bi = v; break; }
            if (q > best) { best = q; bi = v; }
        }
        out[r] = bi;
    }
}
