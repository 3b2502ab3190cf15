// Compressor pooling (torch-free CPU kernel): a softmax over the window axis of the gate, per channel, weights
// the window's KV rows.
#pragma once
#include <math.h>
#include <stdint.h>

/* kv, gate: [N, R, C]; out [N, C]: out[n, c] = sum_r kv[n, r, c] * softmax_r(gate[n, :, c])[r]. */
static inline void compress_pool(const float *kv, const float *gate, int64_t N, int64_t R, int64_t C, float *out,
                                 float *w) {
    for (int64_t n = 0; n < N; n++) {
        const float *kn = kv + n * R * C, *gn = gate + n * R * C;
        for (int64_t c = 0; c < C; c++) {
            float mx = -INFINITY;
            for (int64_t r = 0; r < R; r++) mx = gn[r * C + c] > mx ? gn[r * C + c] : mx;
            float s = 0.0f;
            for (int64_t r = 0; r < R; r++) {
                w[r] = expf(gn[r * C + c] - mx);
                s += w[r];
            }
            float acc = 0.0f;
            for (int64_t r = 0; r < R; r++) acc += kn[r * C + c] * (w[r] / s);
            out[n * C + c] = acc;
        }
    }
}
