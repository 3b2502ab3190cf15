// Hyper-connection weights (sigmoids, Sinkhorn), merge and the fused sub-block boundary (torch-free CPU kernels).
#pragma once
#include "../csrc/lanes.h"
#include "../rms_norm/cpu.h"

static inline v8f load8(const float *p) { v8f v; memcpy(&v, p, sizeof(v)); return v; }
static inline void store8(float *p, v8f v) { memcpy(p, &v, sizeof(v)); }

/* pre/post/comb of one hyper-connection site for T tokens, and the collapsed input of the block.
   mixes: [T, 2*hc + hc*hc]; base: [2*hc + hc*hc]; scale: [3]; streams: [T, hc, D] (may be NULL). */
static inline void hc_mix_one(const float *m, int hc, const float *base, float ps, float qs, float cs, float hc_eps,
                       float *pr, float *po, float *c) {
    for (int i = 0; i < hc; i++) {
        float a = m[i] * ps;
        a = a + base[i];
        pr[i] = 1.0f / (1.0f + expf(-a)) + hc_eps;
        float b = m[hc + i] * qs;
        b = b + base[hc + i];
        po[i] = 2.0f * (1.0f / (1.0f + expf(-b)));
    }
    for (int i = 0; i < hc; i++) {
        float *row = c + i * hc;
        float mx = -INFINITY;
        for (int j = 0; j < hc; j++) {
            float v = m[2 * hc + i * hc + j] * cs;
            v = v + base[2 * hc + i * hc + j];
            row[j] = v;
            if (v > mx) mx = v;
        }
        float s = 0.0f;
        for (int j = 0; j < hc; j++) { row[j] = expf(row[j] - mx); s += row[j]; }
        for (int j = 0; j < hc; j++) row[j] = row[j] / s + hc_eps;
    }
}


/* Sinkhorn iterations for 8 tokens at once: c[i*hc + j] holds entry (i, j) of each token's matrix,
   one token per lane; the arithmetic per lane is the scalar loop's. */
static inline void sinkhorn8(v8f *c, int hc, int iters, float hc_eps) {
    v8f colsum[64];
    const v8f eps = (v8f){0} + hc_eps;
    for (int it = 0; it < iters; it++) {
        if (it > 0) {
            for (int i = 0; i < hc; i++) {
                v8f s = c[i * hc];
                for (int j = 1; j < hc; j++) s = s + c[i * hc + j];
                s = s + eps;
                for (int j = 0; j < hc; j++) c[i * hc + j] = c[i * hc + j] / s;
            }
        }
        for (int j = 0; j < hc; j++) colsum[j] = c[j];
        for (int i = 1; i < hc; i++)
            for (int j = 0; j < hc; j++) colsum[j] = colsum[j] + c[i * hc + j];
        for (int j = 0; j < hc; j++) colsum[j] = colsum[j] + eps;
        for (int i = 0; i < hc; i++)
            for (int j = 0; j < hc; j++) c[i * hc + j] = c[i * hc + j] / colsum[j];
    }
}

static inline void hc_mix(const float *mixes, int64_t T, int hc, const float *base, const float *scale, int iters,
            float hc_eps, float *pre, float *post, float *comb, const float *streams, int64_t D,
            float *collapsed) {
    const int width = 2 * hc + hc * hc, hh = hc * hc;
    const float ps = scale[0], qs = scale[1], cs = scale[2];
    for (int64_t t = 0; t < T; t++)
        hc_mix_one(mixes + t * width, hc, base, ps, qs, cs, hc_eps, pre + t * hc, post + t * hc, comb + t * hh);
    v8f c[64];
    for (int64_t t0 = 0; t0 < T; t0 += 8) {
        const int64_t n = (T - t0) < 8 ? (T - t0) : 8;
        for (int e = 0; e < hh; e++) {
            c[e] = (v8f){0} + 1.0f;
            for (int64_t l = 0; l < n; l++) c[e][l] = comb[(t0 + l) * hh + e];
        }
        sinkhorn8(c, hc, iters, hc_eps);
        for (int e = 0; e < hh; e++)
            for (int64_t l = 0; l < n; l++) comb[(t0 + l) * hh + e] = c[e][l];
    }
    if (streams) {
        for (int64_t t = 0; t < T; t++) {
            const float *st = streams + t * hc * D;
            float *out = collapsed + t * D;
            int64_t d0 = 0;
            for (; d0 + 8 <= D; d0 += 8) { /* eight columns at once, each with the arithmetic of the loop below */
                v8f acc = pre[t * hc] * load8(st + d0);
                for (int i = 1; i < hc; i++) acc = acc + pre[t * hc + i] * load8(st + i * D + d0);
                store8(out + d0, acc);
            }
            for (int64_t d = d0; d < D; d++) {
                float acc = pre[t * hc] * st[d];
                for (int i = 1; i < hc; i++) acc = acc + pre[t * hc + i] * st[i * D + d];
                out[d] = acc;
            }
        }
    }
}

/* new[t, j, :] = post[t, j] * block[t, :] + sum_i comb[t, i, j] * streams[t, i, :] */
static inline void hc_merge(const float *streams, const float *block, const float *post, const float *comb, int64_t T,
              int hc, int64_t D, float *out) {
    for (int64_t t = 0; t < T; t++) {
        const float *st = streams + t * hc * D, *bl = block + t * D, *cm = comb + t * hc * hc;
        for (int j = 0; j < hc; j++) {
            float *o = out + (t * hc + j) * D;
            const float p = post[t * hc + j];
            int64_t d0 = 0;
            for (; d0 + 8 <= D; d0 += 8) { /* eight columns at once, each with the arithmetic of the loop below */
                v8f acc = cm[j] * load8(st + d0);
                for (int i = 1; i < hc; i++) acc = acc + cm[i * hc + j] * load8(st + i * D + d0);
                store8(o + d0, p * load8(bl + d0) + acc);
            }
            for (int64_t d = d0; d < D; d++) {
                float acc = cm[j] * st[d];
                for (int i = 1; i < hc; i++) acc = acc + cm[i * hc + j] * st[i * D + d];
                o[d] = p * bl[d] + acc;
            }
        }
    }
}


/* One boundary between decoder sub-blocks, for T tokens: when block is given, first merge it into the streams
   (hc_merge with post_prev / comb_prev); then the next site's weights (hc_mix after the unweighted RMS norm of
   the flattened streams and their product with fn [mix, hc * D], partial sums in eight lanes), and the block
   input: the collapsed streams through a weighted RMS norm (norm_w, block_eps). streams_out may be streams_in
   only when block is NULL. Scratch: flat [T, hc * D], mixes [T, mix], pre [T, hc], collapsed [T, D]. */
static inline void hc_step(const float *streams_in, const float *block, const float *post_prev, const float *comb_prev, int64_t T,
             int hc, int64_t D, const float *fn, const float *base, const float *scale, int iters, float hc_eps,
             float norm_eps, const float *norm_w, float block_eps, float *streams_out, float *post, float *comb, float *x_out,
             float *flat, float *mixes, float *pre, float *collapsed) {
    const int64_t width = (int64_t)hc * D, mix = (2 + hc) * hc;
    const float *st = streams_in;
    if (block) {
        hc_merge(streams_in, block, post_prev, comb_prev, T, hc, D, streams_out);
        st = streams_out;
    }
    rms_norm(st, T, width, width, 0, norm_eps, flat);
    small_linear(flat, T, width, width, fn, mix, mixes);
    hc_mix(mixes, T, hc, base, scale, iters, hc_eps, pre, post, comb, st, D, collapsed);
    rms_norm(collapsed, T, D, D, norm_w, block_eps, x_out);
}



/* The model's last hyper-connection site and final norm, for T tokens: pre = sigmoid(mix * scale + base) + hc_eps
   from the product of the unweighted RMS-normed flattened streams with fn [hc, hc * D] (partial sums in eight
   lanes), the pre-weighted sum of the streams, then a weighted RMS norm (norm_w, block_eps).
   Scratch: flat [T, hc * D], mixes [T, hc], collapsed [T, D]. */
static inline void hc_head(const float *streams, int64_t T, int hc, int64_t D, const float *fn, const float *base,
             float scale, float hc_eps, float norm_eps, const float *norm_w, float block_eps, float *x_out,
             float *flat, float *mixes, float *collapsed) {
    const int64_t width = (int64_t)hc * D;
    rms_norm(streams, T, width, width, 0, norm_eps, flat);
    small_linear(flat, T, width, width, fn, hc, mixes);
    for (int64_t t = 0; t < T; t++) {
        float pre[8];
        for (int i = 0; i < hc; i++) {
            float a = mixes[t * hc + i] * scale;
            a = a + base[i];
            pre[i] = 1.0f / (1.0f + expf(-a)) + hc_eps;
        }
        const float *st = streams + t * width;
        float *out = collapsed + t * D;
        int64_t d0 = 0;
        for (; d0 + 8 <= D; d0 += 8) {
            v8f acc = pre[0] * load8(st + d0);
            for (int i = 1; i < hc; i++) acc = acc + pre[i] * load8(st + i * D + d0);
            store8(out + d0, acc);
        }
        for (int64_t d = d0; d < D; d++) {
            float acc = pre[0] * st[d];
            for (int i = 1; i < hc; i++) acc = acc + pre[i] * st[i * D + d];
            out[d] = acc;
        }
    }
    rms_norm(collapsed, T, D, D, norm_w, block_eps, x_out);
}
