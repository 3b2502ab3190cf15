// Fused per-token front and back of an attention block (torch-free CPU kernels).
#pragma once
#include "../csrc/lanes.h"
#include "../rms_norm/cpu.h"
#include "../rope/cpu.h"

#include <vector>

/* The per-token front of an attention block after its fused input projection proj [T, P]:
   q_latent = RMSNorm(q_norm_w)(proj[:, :qa]); q = rope(rms_per_head(q_latent @ wq_b^T)) [T, H, D];
   the shared key/value rope(RMSNorm(kv_norm_w)(proj[:, qa:qa + D])) stored at kv_pool row slots[t];
   ncopy raw column ranges of proj (offset copy_off[i], width copy_w[i]) stored at row slots[t] of copy_pools[i];
   with idx_wq_b, the indexer queries rope(q_latent @ idx_wq_b^T) [T, Hi, di]. Rope tables c, s: [T, R].
   scratch: T * (H * D + H * D + D + D + Hi * di) floats. */
static inline void attn_front(const float *proj, int64_t T, int64_t P, int64_t qa, const float *q_norm_w, float q_eps,
                const float *wq_b, int64_t H, int64_t D, float head_eps, const float *kv_norm_w, float kv_eps,
                int64_t R, const float *c, const float *s, const int64_t *slots, float *kv_pool, int64_t ncopy,
                const int64_t *copy_off, const int64_t *copy_w, const int64_t *copy_pools,
                const float *idx_wq_b, int64_t Hi, int64_t di, float *q_latent, float *q_out, float *qi_out,
                float *scratch) {
    float *qraw = scratch, *qn = qraw + T * H * D, *kvn = qn + T * H * D, *kvr = kvn + T * D, *qiraw = kvr + T * D;
    rms_norm(proj, T, qa, P, q_norm_w, q_eps, q_latent);
    small_linear(q_latent, T, qa, qa, wq_b, H * D, qraw);
    rms_norm(qraw, T * H, D, D, 0, head_eps, qn);
    rope_apply(qn, T, H, D, R, c, s, q_out);
    rms_norm(proj + qa, T, D, P, kv_norm_w, kv_eps, kvn);
    rope_apply(kvn, T, 1, D, R, c, s, kvr);
    for (int64_t t = 0; t < T; t++) {
        memcpy(kv_pool + slots[t] * D, kvr + t * D, (size_t)D * sizeof(float));
        for (int64_t i = 0; i < ncopy; i++) {
            float *pool = (float *)(intptr_t)copy_pools[i];
            memcpy(pool + slots[t] * copy_w[i], proj + t * P + copy_off[i], (size_t)copy_w[i] * sizeof(float));
        }
    }
    if (idx_wq_b) {
        small_linear(q_latent, T, qa, qa, idx_wq_b, Hi * di, qiraw);
        rope_apply(qiraw, T, Hi, di, R, c, s, qi_out);
    }
}

/* The back of an attention block: the heads' outputs x [T, H, D] rotated back (rope_apply with c and the
   negated sine table), the grouped projection (group g of the G head groups through rows g*r .. g*r + r - 1 of
   wo_a [G * r, H * D / G]) and wo_b [hidden, G * r]. scratch: T * (H * D + G * r) floats. */
static inline void attn_back(const float *x, int64_t T, int64_t H, int64_t D, int64_t R, const float *c, const float *s,
               const float *wo_a, int64_t G, int64_t r, const float *wo_b, int64_t hidden, float *out,
               float *scratch) {
    float *rot = scratch, *y = scratch + T * H * D;
    const int64_t in = H * D / G;
    rope_apply(x, T, H, D, R, c, s, rot);
    for (int64_t g = 0; g < G; g++) {
        /* group g's inputs are columns g*in .. of each rotated row; outputs go to columns g*r .. of y */
        for (int64_t t = 0; t < T; t++) {
            std::vector<float> tmp((size_t)r);
            small_linear(rot + t * H * D + g * in, 1, in, in, wo_a + g * r * in, r, tmp.data());
            memcpy(y + t * G * r + g * r, tmp.data(), (size_t)r * sizeof(float));
        }
    }
    small_linear(y, T, G * r, G * r, wo_b, hidden, out);
}
