// Fused per-token front and back of an attention block (torch-free CPU kernels).
#pragma once
#include "../csrc/lanes.h"
#include "../rms_norm/cpu.h"
#include "../rope/cpu.h"

/* Columns of a transposed weight block: the output width rounded up to whole 16-float registers. */
static inline int64_t padded16(int64_t m) { return (m + 15) & ~(int64_t)15; }

/* wt [n, padded16(m)] = w [m, n] transposed, zero in the padding columns. */
static inline void transpose_weights(const float *w, int64_t m, int64_t n, float *wt) {
    const int64_t mp = padded16(m);
    for (int64_t k = 0; k < n; k++) {
        float *row = wt + k * mp;
        for (int64_t j = 0; j < m; j++) row[j] = w[j * n + k];
        for (int64_t j = m; j < mp; j++) row[j] = 0.0f;
    }
}

/* y[t, j] (row stride ys) = x[t, :] . w[j, :] for x [T, n] (row stride xs), with the transposed weights wt
   (transpose_weights). The arithmetic of small_linear, per output: for n >= 8 eight partial sums over the
   8-column chunks in order (lane l takes columns l, 8 + l, ...), added up in lane order onto 0, then the tail
   columns one by one; for n < 8 one running sum from 0. Here sixteen outputs are computed at once, one per
   lane of a 16-float register (the weights of column k for those outputs are one row of wt), so no lane sums
   have to be transposed. Each lane's partial sum starts at its first product instead of 0 + it: the two differ
   at most in the sign of a zero, which the final sum (it starts at +0 and so never holds -0) does not see. */
static inline void linear_t(const float *x, int64_t T, int64_t n, int64_t xs, const float *wt, int64_t m, float *y,
                            int64_t ys) {
    const int64_t mp = padded16(m), nc = n >= 8 ? n / 8 : 0, k0 = nc * 8;
#if defined(__AVX512F__)
    for (int64_t j = 0; j < m; j += 16) {
        const __mmask16 mask = m - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (m - j)) - 1);
        const float *wj = wt + j;
        int64_t t = 0;
        /* two tokens per pass share each loaded weight row */
        for (; t + 2 <= T; t += 2) {
            const float *x0 = x + t * xs, *x1 = x0 + xs;
            __m512 d0 = _mm512_setzero_ps(), d1 = _mm512_setzero_ps();
            if (nc) {
                __m512 a0[8], a1[8];
                for (int l = 0; l < 8; l++) {
                    const __m512 wv = _mm512_loadu_ps(wj + l * mp);
                    a0[l] = _mm512_mul_ps(_mm512_set1_ps(x0[l]), wv);
                    a1[l] = _mm512_mul_ps(_mm512_set1_ps(x1[l]), wv);
                }
                for (int64_t kc = 1; kc < nc; kc++)
                    for (int l = 0; l < 8; l++) {
                        const int64_t k = kc * 8 + l;
                        const __m512 wv = _mm512_loadu_ps(wj + k * mp);
                        a0[l] = _mm512_add_ps(a0[l], _mm512_mul_ps(_mm512_set1_ps(x0[k]), wv));
                        a1[l] = _mm512_add_ps(a1[l], _mm512_mul_ps(_mm512_set1_ps(x1[k]), wv));
                    }
                for (int l = 0; l < 8; l++) {
                    d0 = _mm512_add_ps(d0, a0[l]);
                    d1 = _mm512_add_ps(d1, a1[l]);
                }
            }
            for (int64_t k = k0; k < n; k++) {
                const __m512 wv = _mm512_loadu_ps(wj + k * mp);
                d0 = _mm512_add_ps(d0, _mm512_mul_ps(_mm512_set1_ps(x0[k]), wv));
                d1 = _mm512_add_ps(d1, _mm512_mul_ps(_mm512_set1_ps(x1[k]), wv));
            }
            _mm512_mask_storeu_ps(y + t * ys + j, mask, d0);
            _mm512_mask_storeu_ps(y + (t + 1) * ys + j, mask, d1);
        }
        for (; t < T; t++) {
            const float *x0 = x + t * xs;
            __m512 d0 = _mm512_setzero_ps();
            if (nc) {
                __m512 a0[8];
                for (int l = 0; l < 8; l++) a0[l] = _mm512_mul_ps(_mm512_set1_ps(x0[l]), _mm512_loadu_ps(wj + l * mp));
                for (int64_t kc = 1; kc < nc; kc++)
                    for (int l = 0; l < 8; l++) {
                        const int64_t k = kc * 8 + l;
                        a0[l] = _mm512_add_ps(a0[l], _mm512_mul_ps(_mm512_set1_ps(x0[k]), _mm512_loadu_ps(wj + k * mp)));
                    }
                for (int l = 0; l < 8; l++) d0 = _mm512_add_ps(d0, a0[l]);
            }
            for (int64_t k = k0; k < n; k++)
                d0 = _mm512_add_ps(d0, _mm512_mul_ps(_mm512_set1_ps(x0[k]), _mm512_loadu_ps(wj + k * mp)));
            _mm512_mask_storeu_ps(y + t * ys + j, mask, d0);
        }
    }
#else
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < m; j++) {
            const float *xr = x + t * xs;
            float dot = 0.0f;
            if (nc) {
                float acc[8];
                for (int l = 0; l < 8; l++) acc[l] = xr[l] * wt[l * mp + j];
                for (int64_t kc = 1; kc < nc; kc++)
                    for (int l = 0; l < 8; l++) acc[l] = acc[l] + xr[kc * 8 + l] * wt[(kc * 8 + l) * mp + j];
                for (int l = 0; l < 8; l++) dot = dot + acc[l];
            }
            for (int64_t k = k0; k < n; k++) dot = dot + xr[k] * wt[k * mp + j];
            y[t * ys + j] = dot;
        }
#endif
}

/* The per-token front of an attention block after its fused input projection proj [T, P]:
   q_latent = RMSNorm(q_norm_w)(proj[:, :qa]); q = rope(rms_per_head(q_latent @ wq_b^T)) [T, H, D];
   the shared key/value rope(RMSNorm(kv_norm_w)(proj[:, qa:qa + D])) stored at kv_pool row slots[t];
   ncopy raw column ranges of proj (offset copy_off[i], width copy_w[i]) stored at row slots[t] of copy_pools[i];
   with idx_wq_b, the indexer queries rope(q_latent @ idx_wq_b^T) [T, Hi, di]. Rope tables c, s: [T, R].
   The weights come transposed (transpose_weights): wq_bt [qa, padded16(H * D)], idx_wq_bt [qa, padded16(Hi * di)].
   scratch: T * (H * D + D + Hi * di) floats. */
static inline void attn_front(const float *proj, int64_t T, int64_t P, int64_t qa, const float *q_norm_w, float q_eps,
                const float *wq_bt, int64_t H, int64_t D, float head_eps, const float *kv_norm_w, float kv_eps,
                int64_t R, const float *c, const float *s, const int64_t *slots, float *kv_pool, int64_t ncopy,
                const int64_t *copy_off, const int64_t *copy_w, const int64_t *copy_pools,
                const float *idx_wq_bt, int64_t Hi, int64_t di, float *q_latent, float *q_out, float *qi_out,
                float *scratch) {
    float *qraw = scratch, *kvn = qraw + T * H * D, *qiraw = kvn + T * D;
    rms_norm(proj, T, qa, P, q_norm_w, q_eps, q_latent);
    linear_t(q_latent, T, qa, qa, wq_bt, H * D, qraw, H * D);
    rms_norm(qraw, T * H, D, D, 0, head_eps, q_out);
    rope_apply(q_out, T, H, D, R, c, s, q_out);
    rms_norm(proj + qa, T, D, P, kv_norm_w, kv_eps, kvn);
    for (int64_t t = 0; t < T; t++) {
        rope_apply(kvn + t * D, 1, 1, D, R, c + t * R, s + t * R, kv_pool + slots[t] * D);
        const float *pr = proj + t * P;
        for (int64_t i = 0; i < ncopy; i++) {
            float *dst = (float *)(intptr_t)copy_pools[i] + slots[t] * copy_w[i];
            const float *src = pr + copy_off[i];
            for (int64_t k = 0; k < copy_w[i]; k++) dst[k] = src[k];
        }
    }
    if (idx_wq_bt) {
        linear_t(q_latent, T, qa, qa, idx_wq_bt, Hi * di, qiraw, Hi * di);
        rope_apply(qiraw, T, Hi, di, R, c, s, qi_out);
    }
}

/* The back of an attention block: the heads' outputs x [T, H, D] rotated back (rope_apply with c and the
   negated sine table), the grouped projection (group g of the G head groups through rows g*r .. g*r + r - 1 of
   wo_a [G * r, H * D / G]) and wo_b [hidden, G * r]. The weights come transposed (transpose_weights): group g's
   block of wo_a at wo_at + g * (H * D / G) * padded16(r), wo_bt [G * r, padded16(hidden)].
   scratch: T * (H * D + G * r) floats. */
static inline void attn_back(const float *x, int64_t T, int64_t H, int64_t D, int64_t R, const float *c, const float *s,
               const float *wo_at, int64_t G, int64_t r, const float *wo_bt, int64_t hidden, float *out,
               float *scratch) {
    float *rot = scratch, *y = scratch + T * H * D;
    const int64_t in = H * D / G;
    rope_apply(x, T, H, D, R, c, s, rot);
    /* group g's inputs are columns g*in .. of each rotated row; outputs go to columns g*r .. of y */
    for (int64_t g = 0; g < G; g++)
        linear_t(rot + g * in, T, in, H * D, wo_at + g * in * padded16(r), r, y + g * r, G * r);
    linear_t(y, T, G * r, G * r, wo_bt, hidden, out, hidden);
}

// The op's entry points that other ops call (torch types; defined in cpu.cpp). decode_stack composes them,
// so each is declared here, where its op lives, not found by the order of the translation unit.
#include <ATen/ATen.h>
#include <optional>
#include <tuple>
#include <vector>

std::tuple<at::Tensor, at::Tensor, at::Tensor> attn_front_cpu(
        const at::Tensor &proj_in, const at::Tensor &q_norm_w, double q_eps, const at::Tensor &wq_b, int64_t n_heads,
        int64_t head_dim, double head_eps, const at::Tensor &kv_norm_w, double kv_eps, const at::Tensor &c,
        const at::Tensor &s, const at::Tensor &slots_in, const at::Tensor &kv_pool, at::IntArrayRef copy_offsets,
        at::TensorList copy_pools, const std::optional<at::Tensor> &idx_wq_b, int64_t idx_heads, int64_t idx_dim);
at::Tensor attn_back_cpu(const at::Tensor &x, const at::Tensor &c, const at::Tensor &s, const at::Tensor &wo_a,
                                int64_t groups, const at::Tensor &wo_b);
