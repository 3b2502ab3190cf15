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


/* Sinkhorn iterations for as many tokens as V has lanes (eight or sixteen): c[i*hc + j] holds entry (i, j) of
   each token's matrix, one token per lane; the arithmetic per lane is the scalar loop's. Between iterations it
   also takes side[i] = expf(side[i]) for a slice of the nside floats of side (all of them by the last
   iteration): work for the integer and FMA ports while the divider, which bounds the iterations, is busy. */
template <typename V>
static inline void sinkhorn_lanes(V *c, int hc, int iters, float hc_eps, float *side = 0, int nside = 0) {
    V colsum[8];
    const V eps = (V){0} + hc_eps;
    int done = 0;
    for (int it = 0; it < iters; it++) {
        if (it > 0) {
            for (int i = 0; i < hc; i++) {
                V s = c[i * hc];
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
        const int upto = (int)((int64_t)nside * (it + 1) / iters);
        for (; done < upto; done++) side[done] = expf(side[done]);
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
        sinkhorn_lanes(c, hc, iters, hc_eps);
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


/* Sixteen tokens side by side, one per lane of a v16f (an AVX-512 register): the boundary below runs its
   per-token scalar work (norms, the mix projection, sigmoids, softmax, Sinkhorn) on sixteen tokens per
   instruction, each lane doing the operations of the one-token loops above in the same order. */
enum { HC_LANES = 16 };

static inline v16f sqrt16(v16f x) {
#if defined(__AVX512F__)
    return (v16f)_mm512_maskz_sqrt_ps(0xFFFF, (__m512)x);
#else
    for (int l = 0; l < HC_LANES; l++) x[l] = sqrtf(x[l]);
    return x;
#endif
}

/* Sum of x[k] * y[k] over k < n for sixteen tokens (x[k], y[k]: column k, one token per lane), in the order of
   small_linear (wide = 8) or rms_norm (wide = 16): eight lane sums of the columns k = l mod 8 below the last
   multiple of eight, added up in lane order, then the rest one by one; under `wide` columns, one running sum. */
static inline v16f lanes_dot(const v16f *x, const v16f *y, int64_t n, int64_t wide) {
    v16f s = {0};
    int64_t k = 0;
    if (n >= wide) {
        v16f acc[8];
        for (int l = 0; l < 8; l++) acc[l] = (v16f){0};
        for (; k + 8 <= n; k += 8)
            for (int l = 0; l < 8; l++) acc[l] = acc[l] + x[k + l] * y[k + l];
        for (int l = 0; l < 8; l++) s = s + acc[l];
    }
    for (; k < n; k++) s = s + x[k] * y[k];
    return s;
}

/* y[j] = sum_k x[k] * w[j, k] for sixteen tokens (x[k]: column k of their rows), in small_linear's order;
   two rows of w per pass over x. */
static inline void lanes_linear(const v16f *x, int64_t n, const float *w, int64_t m, v16f *y) {
    const int64_t n8 = n >= 8 ? (n & ~(int64_t)7) : 0;
    int64_t j = 0;
    for (; j + 2 <= m; j += 2) {
        const float *w0 = w + j * n, *w1 = w0 + n;
        v16f a0[8], a1[8];
        for (int l = 0; l < 8; l++) a0[l] = a1[l] = (v16f){0};
        for (int64_t k = 0; k < n8; k += 8)
            for (int l = 0; l < 8; l++) {
                const v16f xv = x[k + l];
                a0[l] = a0[l] + xv * w0[k + l];
                a1[l] = a1[l] + xv * w1[k + l];
            }
        v16f s0 = {0}, s1 = {0};
        for (int l = 0; l < 8 && n8; l++) { s0 = s0 + a0[l]; s1 = s1 + a1[l]; }
        for (int64_t k = n8; k < n; k++) { s0 = s0 + x[k] * w0[k]; s1 = s1 + x[k] * w1[k]; }
        y[j] = s0, y[j + 1] = s1;
    }
    for (; j < m; j++) {
        const float *w0 = w + j * n;
        v16f a0[8];
        for (int l = 0; l < 8; l++) a0[l] = (v16f){0};
        for (int64_t k = 0; k < n8; k += 8)
            for (int l = 0; l < 8; l++) a0[l] = a0[l] + x[k + l] * w0[k + l];
        v16f s0 = {0};
        for (int l = 0; l < 8 && n8; l++) s0 = s0 + a0[l];
        for (int64_t k = n8; k < n; k++) s0 = s0 + x[k] * w0[k];
        y[j] = s0;
    }
}

static inline v16f ld16(const float *p) { v16f v; memcpy(&v, p, sizeof(v)); return v; }
static inline void st16(float *p, v16f v) { memcpy(p, &v, sizeof(v)); }

/* The arguments of hc_mix_one's exponentials for sixteen tokens from their mixes m[(2 + hc) * hc] (one token per
   lane): -(pre logit), -(post logit), then comb logit - its row's maximum; arg[e * 16 + lane]. */
static inline void hc_exp_args16(const v16f *m, int hc, const float *base, float ps, float qs, float cs, float *arg) {
    for (int i = 0; i < hc; i++) {
        v16f a = m[i] * ps;
        a = a + base[i];
        st16(arg + i * HC_LANES, -a);
        v16f b = m[hc + i] * qs;
        b = b + base[hc + i];
        st16(arg + (hc + i) * HC_LANES, -b);
    }
    for (int i = 0; i < hc; i++) {
        v16f row[8];
        v16f mx = (v16f){0} - INFINITY;
        for (int j = 0; j < hc; j++) {
            v16f v = m[2 * hc + i * hc + j] * cs;
            v = v + base[2 * hc + i * hc + j];
            row[j] = v;
            mx = v > mx ? v : mx;
        }
        for (int j = 0; j < hc; j++) st16(arg + (2 * hc + i * hc + j) * HC_LANES, row[j] - mx);
    }
}

/* pre, post and the row-softmaxed comb (before Sinkhorn) of hc_mix_one from the exponentials e of
   hc_exp_args16's arguments. */
static inline void hc_weights16(const float *e, int hc, float hc_eps, v16f *pre, v16f *post, v16f *comb) {
    for (int i = 0; i < hc; i++) {
        pre[i] = 1.0f / (1.0f + ld16(e + i * HC_LANES)) + hc_eps;
        post[i] = 2.0f * (1.0f / (1.0f + ld16(e + (hc + i) * HC_LANES)));
    }
    for (int i = 0; i < hc; i++) {
        const float *r = e + (2 * hc + i * hc) * HC_LANES;
        v16f s = {0};
        for (int j = 0; j < hc; j++) s = s + ld16(r + j * HC_LANES);
        for (int j = 0; j < hc; j++) comb[i * hc + j] = ld16(r + j * HC_LANES) / s + hc_eps;
    }
}

/* out[d] = sum_i a[i] * x[i * D + d] over i < hc, the first term without an addition (hc_mix's collapse). */
static inline void weighted_rows(const float *a, const float *x, int hc, int64_t D, float *out) {
    int64_t d = 0;
    for (; d + 16 <= D; d += 16) {
        v16f acc, v;
        memcpy(&v, x + d, sizeof(v));
        acc = a[0] * v;
        for (int i = 1; i < hc; i++) { memcpy(&v, x + i * D + d, sizeof(v)); acc = acc + a[i] * v; }
        memcpy(out + d, &acc, sizeof(acc));
    }
    for (; d + 8 <= D; d += 8) {
        v8f acc = a[0] * load8(x + d);
        for (int i = 1; i < hc; i++) acc = acc + a[i] * load8(x + i * D + d);
        store8(out + d, acc);
    }
    for (; d < D; d++) {
        float acc = a[0] * x[d];
        for (int i = 1; i < hc; i++) acc = acc + a[i] * x[i * D + d];
        out[d] = acc;
    }
}

/* hc_merge of one token. */
static inline void hc_merge_token(const float *st, const float *bl, const float *post, const float *cm, int hc, int64_t D,
                                  float *out) {
    for (int j = 0; j < hc; j++) {
        float *o = out + j * D;
        const float p = post[j];
        int64_t d = 0;
        for (; d + 16 <= D; d += 16) {
            v16f acc, v, b;
            memcpy(&v, st + d, sizeof(v));
            acc = cm[j] * v;
            for (int i = 1; i < hc; i++) { memcpy(&v, st + i * D + d, sizeof(v)); acc = acc + cm[i * hc + j] * v; }
            memcpy(&b, bl + d, sizeof(b));
            acc = p * b + acc;
            memcpy(o + d, &acc, sizeof(acc));
        }
        for (; d + 8 <= D; d += 8) {
            v8f acc = cm[j] * load8(st + d);
            for (int i = 1; i < hc; i++) acc = acc + cm[i * hc + j] * load8(st + i * D + d);
            store8(o + d, p * load8(bl + d) + acc);
        }
        for (; d < D; d++) {
            float acc = cm[j] * st[d];
            for (int i = 1; i < hc; i++) acc = acc + cm[i * hc + j] * st[i * D + d];
            o[d] = p * bl[d] + acc;
        }
    }
}

/* Scratch floats hc_step needs: see below. */
static inline int64_t hc_step_scratch(int hc, int64_t D) {
    return (int64_t)HC_LANES * ((int64_t)hc * D + D + 2 * (2 + hc) * hc);
}

/* out[c] = (rows[0][k0 + c], ..., rows[15][k0 + c]) for c < 16: a 16 x 16 transpose in registers (GCC's
   generic shuffles: unpack, in-lane shuffle and 128-bit lane shuffle instructions on AVX-512). */
static inline void transpose16(const float *const *rows, int64_t k0, v16f *out) {
    const v16i lo = {0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29};     /* unpacklo_ps */
    const v16i hi = {2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31};   /* unpackhi_ps */
    const v16i s44 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29};    /* shuffle_ps 0x44 */
    const v16i see = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31};  /* shuffle_ps 0xEE */
    const v16i l88 = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};    /* shuffle_f32x4 0x88 */
    const v16i ldd = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31};  /* shuffle_f32x4 0xDD */
    v16f r[16], t[16];
    for (int i = 0; i < 16; i++) memcpy(&r[i], rows[i] + k0, sizeof(v16f));
    for (int i = 0; i < 8; i++) {
        t[2 * i] = __builtin_shuffle(r[2 * i], r[2 * i + 1], lo);
        t[2 * i + 1] = __builtin_shuffle(r[2 * i], r[2 * i + 1], hi);
    }
    /* r[4 i + c], 128-bit lane q: column 4 q + c of rows 4 i .. 4 i + 3 */
    for (int i = 0; i < 4; i++) {
        r[4 * i] = __builtin_shuffle(t[4 * i], t[4 * i + 2], s44);
        r[4 * i + 1] = __builtin_shuffle(t[4 * i], t[4 * i + 2], see);
        r[4 * i + 2] = __builtin_shuffle(t[4 * i + 1], t[4 * i + 3], s44);
        r[4 * i + 3] = __builtin_shuffle(t[4 * i + 1], t[4 * i + 3], see);
    }
    for (int c = 0; c < 4; c++) {
        const v16f a0 = __builtin_shuffle(r[c], r[4 + c], l88), a1 = __builtin_shuffle(r[c], r[4 + c], ldd);
        const v16f b0 = __builtin_shuffle(r[8 + c], r[12 + c], l88), b1 = __builtin_shuffle(r[8 + c], r[12 + c], ldd);
        out[c] = __builtin_shuffle(a0, b0, l88);
        out[8 + c] = __builtin_shuffle(a0, b0, ldd);
        out[4 + c] = __builtin_shuffle(a1, b1, l88);
        out[12 + c] = __builtin_shuffle(a1, b1, ldd);
    }
}

/* The first half of hc_step for the group of n tokens at t0 (n <= 16): merge (or copy) its streams into
   streams_out, take the columns of its flattened rows (lanes past n repeat the last token), RMS-norm them, project
   them with fn and leave the exponentials' arguments in arg. xt: [hc * D] v16f of scratch. */
static inline void hc_step_prepare(const float *streams_in, const float *block, const float *post_prev,
                                   const float *comb_prev, int64_t t0, int n, int hc, int64_t D, const float *fn,
                                   const float *base, float ps, float qs, float cs, float norm_eps, float *streams_out,
                                   v16f *xt, float *arg) {
    const int64_t width = (int64_t)hc * D;
    const int hh = hc * hc;
    float *so = streams_out + t0 * width;
    if (block) {
        for (int l = 0; l < n; l++)
            hc_merge_token(streams_in + (t0 + l) * width, block + (t0 + l) * D, post_prev + (t0 + l) * hc,
                           comb_prev + (t0 + l) * hh, hc, D, so + l * width);
    } else if (streams_out != streams_in) {
        memcpy(so, streams_in + t0 * width, (size_t)(n * width) * sizeof(float));
    }
    const float *rows[HC_LANES];
    for (int l = 0; l < HC_LANES; l++) rows[l] = so + (l < n ? l : n - 1) * width;
    int64_t k0 = 0;
    for (; k0 + 16 <= width; k0 += 16) transpose16(rows, k0, xt + k0);
    float *xf = (float *)xt;
    for (int l = 0; l < HC_LANES; l++)
        for (int64_t k = k0; k < width; k++) xf[k * HC_LANES + l] = rows[l][k];
    const v16f ss = lanes_dot(xt, xt, width, 16);
    const v16f inv = 1.0f / sqrt16(ss / (float)width + norm_eps);
    for (int64_t k = 0; k < width; k++) xt[k] = xt[k] * inv;
    v16f m[80];
    lanes_linear(xt, width, fn, (2 + hc) * hc, m);
    hc_exp_args16(m, hc, base, ps, qs, cs, arg);
}

/* hc_step token by token for tokens t0 .. t1 - 1 (at most eight): hc_merge, rms_norm, small_linear, hc_mix and the
   weighted rms_norm over those rows, the composition the grouped path reproduces. scratch: as hc_step's. */
static inline void hc_step_tokens(const float *streams_in, const float *block, const float *post_prev,
                                  const float *comb_prev, int64_t t0, int64_t t1, int hc, int64_t D, const float *fn,
                                  const float *base, const float *scale, int iters, float hc_eps, float norm_eps,
                                  const float *norm_w, float block_eps, float *streams_out, float *post, float *comb,
                                  float *x_out, float *scratch) {
    const int64_t width = (int64_t)hc * D, n = t1 - t0;
    const int mix = (2 + hc) * hc, hh = hc * hc;
    float *flat = scratch, *collapsed = scratch + HC_LANES * width, *mixes = collapsed + HC_LANES * D;
    float pre[8 * 8];
    float *st = streams_out + t0 * width;
    if (block)
        hc_merge(streams_in + t0 * width, block + t0 * D, post_prev + t0 * hc, comb_prev + t0 * hh, n, hc, D, st);
    else if (streams_out != streams_in)
        memcpy(st, streams_in + t0 * width, (size_t)(n * width) * sizeof(float));
    rms_norm(st, n, width, width, 0, norm_eps, flat);
    small_linear(flat, n, width, width, fn, mix, mixes);
    hc_mix(mixes, n, hc, base, scale, iters, hc_eps, pre, post + t0 * hc, comb + t0 * hh, st, D, collapsed);
    rms_norm(collapsed, n, D, D, norm_w, block_eps, x_out + t0 * D);
}

/* One boundary between decoder sub-blocks, for T tokens: when block is given, first merge it into the streams
   (hc_merge with post_prev / comb_prev); then the next site's weights (hc_mix after the unweighted RMS norm of
   the flattened streams and their product with fn [mix, hc * D], small_linear's sums), and the block input: the
   collapsed streams through a weighted RMS norm (norm_w, block_eps). streams_out may be streams_in only when
   block is NULL. Works on sixteen tokens at a time (the last group padded with copies of its last token), each
   output with the operations of hc_merge, rms_norm, small_linear and hc_mix in their order, so the bits of
   that composition; the next group's exponentials run during this group's Sinkhorn iterations. A last group of
   at most eight tokens runs that composition itself (hc_step_tokens).
   scratch: hc_step_scratch(hc, D) floats, 64-byte aligned. */
static inline void hc_step(const float *streams_in, const float *block, const float *post_prev, const float *comb_prev, int64_t T,
             int hc, int64_t D, const float *fn, const float *base, const float *scale, int iters, float hc_eps,
             float norm_eps, const float *norm_w, float block_eps, float *streams_out, float *post, float *comb, float *x_out,
             float *scratch) {
    const int64_t width = (int64_t)hc * D;
    const int mix = (2 + hc) * hc, hh = hc * hc, nexp = mix * HC_LANES;
    const float ps = scale[0], qs = scale[1], cs = scale[2];
    v16f *xt = (v16f *)scratch;                           /* [width] columns of a group's flattened streams */
    float *collapsed = scratch + HC_LANES * width;        /* [16, D] */
    float *args[2] = {collapsed + HC_LANES * D, collapsed + HC_LANES * D + nexp}; /* this group's, the next's */
    v16f pre[8], po[8], cm[64];
    /* A last group of at most eight tokens (decode of a few sequences) costs less token by token. */
    const int64_t tail = T % HC_LANES <= HC_LANES / 2 ? T % HC_LANES : 0, grouped = T - tail;
    if (tail) hc_step_tokens(streams_in, block, post_prev, comb_prev, grouped, T, hc, D, fn, base, scale, iters, hc_eps,
                             norm_eps, norm_w, block_eps, streams_out, post, comb, x_out, scratch);
    T = grouped;
    if (T <= 0) return;
    hc_step_prepare(streams_in, block, post_prev, comb_prev, 0, (int)(T < HC_LANES ? T : HC_LANES), hc, D, fn, base,
                    ps, qs, cs, norm_eps, streams_out, xt, args[0]);
    for (int e = 0; e < nexp; e++) args[0][e] = expf(args[0][e]);
    for (int64_t t0 = 0, g = 0; t0 < T; t0 += HC_LANES, g ^= 1) {
        const int n = (int)((T - t0) < HC_LANES ? (T - t0) : HC_LANES);
        hc_weights16(args[g], hc, hc_eps, pre, po, cm);
        const int64_t t1 = t0 + HC_LANES;
        if (t1 < T)
            hc_step_prepare(streams_in, block, post_prev, comb_prev, t1, (int)((T - t1) < HC_LANES ? (T - t1) : HC_LANES),
                            hc, D, fn, base, ps, qs, cs, norm_eps, streams_out, xt, args[g ^ 1]);
        sinkhorn_lanes(cm, hc, iters, hc_eps, args[g ^ 1], t1 < T ? nexp : 0);
        const float *so = streams_out + t0 * width;
        for (int l = 0; l < n; l++) {
            float *pt = post + (t0 + l) * hc, *ct = comb + (t0 + l) * hh;
            float a[8];
            for (int i = 0; i < hc; i++) pt[i] = po[i][l], a[i] = pre[i][l];
            for (int e = 0; e < hh; e++) ct[e] = cm[e][l];
            weighted_rows(a, so + l * width, hc, D, collapsed + l * D);
        }
        rms_norm(collapsed, n, D, D, norm_w, block_eps, x_out + t0 * D);
    }
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

// The op's entry points that other ops call (torch types; defined in cpu.cpp). decode_stack composes them,
// so each is declared here, where its op lives, not found by the order of the translation unit.
#include <ATen/ATen.h>
#include <optional>
#include <tuple>
#include <vector>

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> hc_step_cpu(
        const at::Tensor &streams, const std::optional<at::Tensor> &block, const std::optional<at::Tensor> &post_prev,
        const std::optional<at::Tensor> &comb_prev, const at::Tensor &fn, const at::Tensor &base,
        const at::Tensor &scale, int64_t hc, int64_t iters, double hc_eps, double norm_eps,
        const at::Tensor &norm_weight, double block_eps);
at::Tensor hc_merge_cpu(const at::Tensor &streams, const at::Tensor &block, const at::Tensor &post,
                               const at::Tensor &comb);
