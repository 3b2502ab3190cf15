"""Small CPU kernels for the decode step, built on first use with the system C compiler.

Two parts of a DeepSeek V4 step are many tiny PyTorch operations (per-op
overhead dominates) or a large product whose result is thrown away at once:

* ``hc_mix`` / ``hc_merge``: the hyper-connection weights after the linear map —
  sigmoids for ``pre``/``post``, the row softmax of ``comb`` and its Sinkhorn
  iterations, the collapse of the streams — and the merge of a block's output
  back into the streams. In PyTorch this is about 140 operations on ``[T, 4, 4]``
  tensors per site; here it is two calls doing the same float32 arithmetic (sums
  run in index order, so results agree with PyTorch up to rounding).
* ``sink_attention``: the attention core (scores, the softmax with the sink
  logit, the weighted sum of values) for a step's padded batch.
* ``rms_norm``: RMS norms of small row batches (one call instead of about six
  operations).
* ``rope_apply``: the interleaved rotary embedding with per-step tables, the
  same products and sums as ``layers.rotary_embedding.apply_rotary_tables``.
* ``head_argmax``: greedy decoding only needs the arg-max of ``h @ W.T`` over the
  vocabulary. Materialising ``[rows, vocab]`` logits and scanning them again is
  most of the cost; this kernel keeps a running maximum per row instead, over a
  copy of ``W`` laid out in blocks of 8 vocabulary rows. Each logit is an
  ordinary float32 dot product (accumulated in order over the hidden axis), so it
  agrees with the BLAS product up to rounding; ties go to the lowest ID, as with
  ``torch.argmax``.

The library is compiled once per source version into a cache folder
(``DEEPSEEK_ENGINE_CACHE``, default ``~/.cache/deepseek_engine``) and loaded
with ``ctypes``. ``DEEPSEEK_ENGINE_NATIVE=0`` disables it; without a working
``cc``/``gcc`` the callers fall back to the PyTorch code paths, which compute
the same results.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import torch

_SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

/* pre/post/comb of one hyper-connection site for T tokens, and the collapsed input of the block.
   mixes: [T, 2*hc + hc*hc]; base: [2*hc + hc*hc]; scale: [3]; streams: [T, hc, D] (may be NULL). */
static void hc_mix_one(const float *m, int hc, const float *base, float ps, float qs, float cs, float hc_eps,
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
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

/* exp of eight floats: range reduction by ln 2 (split in two parts) and a degree-7 polynomial, within about
   two float32 ulps of the exact value; 0 below -87.33 (where expf would give a subnormal). Every operation is
   lane-wise, so sexp (one lane) gives the same bits as vexp8. */
static inline v8f vexp8(v8f x) {
    const v8f hi = (v8f){0} + 88.3762626647949f, lo = (v8f){0} - 87.3365447505531f;
    const v8i under = x < lo, over = x > hi;
    x = (v8f)(((v8i)x & ~over) | ((v8i)hi & over));
    x = (v8f)(((v8i)x & ~under) | ((v8i)lo & under));
    const v8f fx = x * 1.44269504088896341f + 0.5f;
    v8f tf = __builtin_convertvector(__builtin_convertvector(fx, v8i), v8f);
    tf = tf + __builtin_convertvector(tf > fx, v8f); /* floor: -1 where truncation went up */
    const v8i ti = __builtin_convertvector(tf, v8i);
    x = x - tf * 0.693359375f;
    x = x - tf * -2.12194440e-4f;
    const v8f z = x * x;
    v8f y = (v8f){0} + 1.9875691500E-4f;
    y = y * x + 1.3981999507E-3f;
    y = y * x + 8.3334519073E-3f;
    y = y * x + 4.1665795894E-2f;
    y = y * x + 1.6666665459E-1f;
    y = y * x + 5.0000001201E-1f;
    y = y * z + x + 1.0f;
    y = y * (v8f)((ti + 127) << 23);
    return (v8f)((v8i)y & ~under);
}

static inline float sexp(float x) { return vexp8((v8f){0} + x)[0]; }

/* Dot product of two [D] rows: eight partial sums added up in lane order when D is a multiple of
   8, else one running sum (the summation orders the attention kernels share). */
static inline float dot_row(const float *a, const float *b, int64_t D) {
    float s = 0.0f;
    if ((D & 7) != 0) {
        for (int64_t d = 0; d < D; d++) s += a[d] * b[d];
        return s;
    }
    v8f acc = {0};
    for (int64_t d = 0; d < D; d += 8) {
        v8f x, y;
        memcpy(&x, a + d, sizeof(x));
        memcpy(&y, b + d, sizeof(y));
        acc = acc + x * y;
    }
    for (int l = 0; l < 8; l++) s += acc[l];
    return s;
}

/* out = exp(x) through vexp8 (eight at a time) and sexp (the rest); out may be x. Exposed for tests. */
void exp_lanes(const float *x, int64_t n, float *out) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f v;
        memcpy(&v, x + i, sizeof(v));
        v = vexp8(v);
        memcpy(out + i, &v, sizeof(v));
    }
    for (; i < n; i++) out[i] = sexp(x[i]);
}

static void sinkhorn8(v8f *c, int hc, int iters, float hc_eps) {
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

void hc_mix(const float *mixes, int64_t T, int hc, const float *base, const float *scale, int iters,
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
            for (int64_t d = 0; d < D; d++) {
                float acc = pre[t * hc] * st[d];
                for (int i = 1; i < hc; i++) acc = acc + pre[t * hc + i] * st[i * D + d];
                out[d] = acc;
            }
        }
    }
}

/* new[t, j, :] = post[t, j] * block[t, :] + sum_i comb[t, i, j] * streams[t, i, :] */
void hc_merge(const float *streams, const float *block, const float *post, const float *comb, int64_t T,
              int hc, int64_t D, float *out) {
    for (int64_t t = 0; t < T; t++) {
        const float *st = streams + t * hc * D, *bl = block + t * D, *cm = comb + t * hc * hc;
        for (int j = 0; j < hc; j++) {
            float *o = out + (t * hc + j) * D;
            const float p = post[t * hc + j];
            for (int64_t d = 0; d < D; d++) {
                float acc = cm[j] * st[d];
                for (int i = 1; i < hc; i++) acc = acc + cm[i * hc + j] * st[i * D + d];
                o[d] = p * bl[d] + acc;
            }
        }
    }
}

/* RMS norm of each [D] row of x (row r at x + r * stride): out = x * (1 / sqrt(mean(x^2) + eps)) [* w]. */
void rms_norm(const float *x, int64_t rows, int64_t D, int64_t stride, const float *w, float eps, float *out) {
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

/* Rotary embedding on the trailing R channels of each [D] row: x: [T, inner, D]; c, s: [T, R].
   out = x * c + swap_pairs(x) * s on those channels (each product rounded, then the sum), a copy elsewhere. */
void rope_apply(const float *x, int64_t T, int64_t inner, int64_t D, int64_t R, const float *c, const float *s,
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

/* Attention with a sink logit for B sequences: q [B, Tq*H, D] (row tq*H + h), keys [B, K, D] (also the values),
   visible [B, Tq, K] (bytes), sink [H]. out [B, Tq*H, D]. Per row: logits = (q . key) * scale where visible,
   softmax over the logits and the sink, then the probability-weighted sum of the visible keys. */
void sink_attention(const float *q, const float *keys, const uint8_t *visible, const float *sink, int64_t B,
                    int64_t Tq, int64_t H, int64_t K, int64_t D, float scale, float *probs, float *out) {
    for (int64_t b = 0; b < B; b++) {
        const float *kb = keys + b * K * D;
        for (int64_t tq = 0; tq < Tq; tq++) {
            const uint8_t *vis = visible + (b * Tq + tq) * K;
            for (int64_t h = 0; h < H; h++) {
                const float *qr = q + ((b * Tq + tq) * H + h) * D;
                float *o = out + ((b * Tq + tq) * H + h) * D;
                float mx = sink[h];
                for (int64_t k = 0; k < K; k++) {
                    if (!vis[k]) { probs[k] = -INFINITY; continue; }
                    const float *kr = kb + k * D;
                    float dot = dot_row(qr, kr, D) * scale;
                    probs[k] = dot;
                    if (dot > mx) mx = dot;
                }
                float sum = sexp(sink[h] - mx);
                for (int64_t k = 0; k < K; k++) {
                    if (!vis[k]) { probs[k] = 0.0f; continue; }
                    probs[k] = sexp(probs[k] - mx);
                    sum += probs[k];
                }
                const float inv = 1.0f / sum;
                for (int64_t d = 0; d < D; d++) o[d] = 0.0f;
                for (int64_t k = 0; k < K; k++) {
                    if (!vis[k]) continue;
                    const float p = probs[k] * inv;
                    const float *kr = kb + k * D;
                    for (int64_t d = 0; d < D; d++) o[d] += p * kr[d];
                }
            }
        }
    }
}

/* Arg-max over v of dot(h[m], W[v]) for every row m.
   h: [M, K] with M a multiple of 8 (row chunks of HEAD_ROWS); wb: W in blocks, [nblocks, K, 8] (row v = 8*b + lane);
   tail: the last V - 8*nblocks rows of W, plain [rest, K]. */
static inline v8f fma8(v8f a, v8f b, v8f c) {
#if defined(__FMA__)
    return (v8f)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
    return a * b + c;
#endif
}

static inline v8f bc(float x) { return (v8f){x, x, x, x, x, x, x, x}; }

#define HEAD_ROWS 256
void head_argmax(const float *h, int64_t M, int64_t K, const float *wb, int64_t nblocks, const float *tail,
                 int64_t rest, int64_t *out, float *out_val) {
    static __thread v8f best[HEAD_ROWS];
    static __thread v8i bidx[HEAD_ROWS];
    for (int64_t c0 = 0; c0 < M; c0 += HEAD_ROWS) {
        const int64_t mc = (M - c0) < HEAD_ROWS ? (M - c0) : HEAD_ROWS;
        const float *hc = h + c0 * K;
        for (int64_t r = 0; r < mc; r++) { best[r] = bc(-INFINITY); bidx[r] = (v8i){0} - 1; }
        for (int64_t b = 0; b < nblocks; b++) {
            const float *wp = wb + b * K * 8;
            const v8i bb = (v8i){0} + (int32_t)b;
            for (int64_t m0 = 0; m0 < mc; m0 += 8) {
                const float *hm = hc + m0 * K;
                v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
                for (int64_t k = 0; k < K; k++) {
                    v8f w;
                    memcpy(&w, wp + 8 * k, sizeof(w));
                    a0 = fma8(w, bc(hm[0 * K + k]), a0);
                    a1 = fma8(w, bc(hm[1 * K + k]), a1);
                    a2 = fma8(w, bc(hm[2 * K + k]), a2);
                    a3 = fma8(w, bc(hm[3 * K + k]), a3);
                    a4 = fma8(w, bc(hm[4 * K + k]), a4);
                    a5 = fma8(w, bc(hm[5 * K + k]), a5);
                    a6 = fma8(w, bc(hm[6 * K + k]), a6);
                    a7 = fma8(w, bc(hm[7 * K + k]), a7);
                }
                v8f acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
                for (int r = 0; r < 8; r++) {
                    v8i gt = acc[r] > best[m0 + r];
                    best[m0 + r] = (v8f)(((v8i)acc[r] & gt) | ((v8i)best[m0 + r] & ~gt));
                    bidx[m0 + r] = (bb & gt) | (bidx[m0 + r] & ~gt);
                }
            }
        }
        for (int64_t r = 0; r < mc; r++) {
            const float *hr = hc + r * K;
            float bv = -INFINITY;
            int64_t bi = -1;
            for (int l = 0; l < 8; l++) {
                if (bidx[r][l] < 0) continue;
                int64_t idx = (int64_t)bidx[r][l] * 8 + l;
                float v = best[r][l];
                if (bi < 0 || v > bv || (v == bv && idx < bi)) { bv = v; bi = idx; }
            }
            for (int64_t j = 0; j < rest; j++) {
                float v = 0.0f;
                for (int64_t k = 0; k < K; k++) v = fmaf(tail[j * K + k], hr[k], v);
                if (bi < 0 || v > bv) { bv = v; bi = nblocks * 8 + j; }
            }
            out[c0 + r] = bi;
            out_val[c0 + r] = bv;
        }
    }
}

/* Greedy head, pre-filtered in 8-bit integers.
   wq: the head weight rounded to integers at one scale s_w, in blocks of 8 vocabulary rows:
   [nblocks, K4 / 4, 8, 4] (4 consecutive k of row 8*b + lane), K4 = K rounded up to a multiple of 4 (zeros);
   |wq| <= 127, and <= 63 when K4 == 32 (that layout sums four byte products in 16 bits).
   rowsum: sum over k of each quantised row [nblocks * 8]. w: the float32 weight [V, K].
   Each row of h is rounded to hq in [-QH, QH] at scale s_h; the integer products D[v] = hq . wq[v] are exact, and
   |h . w[v] - s_h * s_w * D[v]| <= err (from the rounding errors of both sides, bounded in double precision), so
   the float32 arg-max lies among the rows with D[v] >= max D - delta, delta covering twice err plus the float32
   rounding of the exact dots. Those candidates (and the V - 8 * nblocks rows after the last block) get the same
   fmaf dot as head_argmax; the largest wins, ties to the lowest ID. out[m] = -1 when a row needs the plain
   kernel (all-zero row, or too many candidates for the buffer). cand, cval: [M, cap] scratch. */
#define QH 31
#define QOFF 32
#define QROWS 64
static void q8_take(int64_t b, const int32_t *lanes, int64_t cap, int32_t *rc, int32_t *rv, int64_t *n,
                    int64_t *runmax, int64_t delta, int32_t *thr, int *dead) {
    for (int l = 0; l < 8; l++) {
        if (lanes[l] <= *thr) continue;
        if (*n == cap) {
            /* drop what the current maximum already excludes */
            int64_t keep = 0;
            for (int64_t i = 0; i < *n; i++)
                if (rv[i] > *thr) { rc[keep] = rc[i]; rv[keep] = rv[i]; keep++; }
            *n = keep;
            if (keep > cap / 2) { *dead = 2; *thr = INT32_MAX; return; }
        }
        rc[*n] = (int32_t)(b * 8 + l);
        rv[*n] = lanes[l];
        (*n)++;
        if (lanes[l] > *runmax) {
            *runmax = lanes[l];
            int64_t t = *runmax - delta - 1;
            *thr = t < INT32_MIN ? INT32_MIN : (int32_t)t;
        }
    }
}

void head_argmax_q8(const float *h, int64_t M, int64_t K, int64_t K4, const int8_t *wq, const int32_t *rowsum,
                    int64_t nblocks, double s_w, double ew, double aw, double wmax, const float *w, int64_t V,
                    int32_t *cand, int32_t *cval, int64_t cap, int64_t *out, float *out_val) {
    static __thread uint8_t hu[QROWS][256] __attribute__((aligned(32)));
    int64_t delta[QROWS], runmax[QROWS], n[QROWS];
    int32_t thr[QROWS];
    int dead[QROWS];
    const int64_t kg = K4 / 4;
    (void)kg; /* (only the generic AVX2 loop uses it) */
    for (int64_t m0 = 0; m0 < M; m0 += QROWS) {
        const int64_t mc = (M - m0) < QROWS ? (M - m0) : QROWS;
        for (int r = 0; r < mc; r++) {
            memset(hu[r], QOFF, (size_t)K4);
            dead[r] = 1; n[r] = 0; runmax[r] = INT32_MIN; thr[r] = INT32_MAX; delta[r] = 0;
            const float *hr = h + (m0 + r) * K;
            double hmax = 0.0, habs = 0.0;
            for (int64_t k = 0; k < K; k++) { double a = fabs((double)hr[k]); habs += a; if (a > hmax) hmax = a; }
            if (!(hmax > 0.0) || !(hmax < 1e30)) continue;
            const double s_h = hmax / QH;
            double eh = 0.0, qabs = 0.0;
            for (int64_t k = 0; k < K; k++) {
                double q = nearbyint((double)hr[k] / s_h);
                if (q > QH) q = QH;
                if (q < -QH) q = -QH;
                double e = fabs((double)hr[k] - q * s_h);
                if (e > eh) eh = e;
                qabs += fabs(q);
                hu[r][k] = (uint8_t)((int)q + QOFF);
            }
            /* rounding of both sides, plus the float32 error of two exact dots, with slack */
            double err = s_h * qabs * ew + eh * aw;
            err = err * (1.0 + 1e-9) + 4.0 * (double)(K + 2) * 5.97e-8 * habs * wmax + 1e-30;
            double d = floor(2.0 * err / (s_h * s_w)) + 2.0;
            if (!(d < 1e9)) continue;
            delta[r] = (int64_t)d;
            dead[r] = 0;
            thr[r] = INT32_MIN;
        }
        int32_t *rc = cand + m0 * cap, *rv = cval + m0 * cap;
        for (int64_t b = 0; b < nblocks; b++) {
            const int8_t *wb = wq + b * K4 * 8;
#if defined(__AVX2__)
            const __m256i ones = _mm256_set1_epi16(1);
            const __m256i off = _mm256_mullo_epi32(_mm256_loadu_si256((const __m256i *)(rowsum + b * 8)),
                                                   _mm256_set1_epi32(QOFF));
            if (K4 == 32) {
                /* all eight k-groups in registers; four byte-pair sums fit in 16 bits (|wq| <= 63) */
                __m256i wg[8];
                for (int g = 0; g < 8; g++) wg[g] = _mm256_loadu_si256((const __m256i *)(wb + g * 32));
                for (int64_t r = 0; r < mc; r++) {
                    const int32_t *x = (const int32_t *)hu[r];
                    __m256i s0 = _mm256_add_epi16(
                        _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(x[0]), wg[0]),
                                         _mm256_maddubs_epi16(_mm256_set1_epi32(x[1]), wg[1])),
                        _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(x[2]), wg[2]),
                                         _mm256_maddubs_epi16(_mm256_set1_epi32(x[3]), wg[3])));
                    __m256i s1 = _mm256_add_epi16(
                        _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(x[4]), wg[4]),
                                         _mm256_maddubs_epi16(_mm256_set1_epi32(x[5]), wg[5])),
                        _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(x[6]), wg[6]),
                                         _mm256_maddubs_epi16(_mm256_set1_epi32(x[7]), wg[7])));
                    const __m256i dv = _mm256_sub_epi32(
                        _mm256_add_epi32(_mm256_madd_epi16(s0, ones), _mm256_madd_epi16(s1, ones)), off);
                    if (!_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(dv, _mm256_set1_epi32(thr[r])))))
                        continue;
                    int32_t lanes[8];
                    _mm256_storeu_si256((__m256i *)lanes, dv);
                    q8_take(b, lanes, cap, rc + r * cap, rv + r * cap, &n[r], &runmax[r], delta[r], &thr[r], &dead[r]);
                }
                continue;
            }
            for (int64_t r = 0; r < mc; r++) {
                __m256i acc = _mm256_setzero_si256();
                for (int64_t g = 0; g < kg; g++) {
                    int32_t x0;
                    memcpy(&x0, hu[r] + 4 * g, 4);
                    const __m256i w0 = _mm256_loadu_si256((const __m256i *)(wb + g * 32));
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(x0), w0),
                                                                  ones));
                }
                const __m256i dv = _mm256_sub_epi32(acc, off);
                if (!_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(dv, _mm256_set1_epi32(thr[r])))))
                    continue;
                int32_t lanes[8];
                _mm256_storeu_si256((__m256i *)lanes, dv);
                q8_take(b, lanes, cap, rc + r * cap, rv + r * cap, &n[r], &runmax[r], delta[r], &thr[r], &dead[r]);
            }
#else
            for (int64_t r = 0; r < mc; r++) {
                int32_t lanes[8];
                int any = 0;
                for (int l = 0; l < 8; l++) {
                    int32_t s = 0;
                    for (int64_t k = 0; k < K4; k++)
                        s += ((int32_t)hu[r][k] - QOFF) * (int32_t)wb[(k / 4) * 32 + l * 4 + (k % 4)];
                    lanes[l] = s;
                    any |= s > thr[r];
                }
                if (any)
                    q8_take(b, lanes, cap, rc + r * cap, rv + r * cap, &n[r], &runmax[r], delta[r], &thr[r],
                            &dead[r]);
            }
#endif
        }
        for (int r = 0; r < mc; r++) {
            if (dead[r]) { out[m0 + r] = -1; out_val[m0 + r] = 0.0f; continue; }
            const float *hr = h + (m0 + r) * K;
            const int32_t *cr = rc + r * cap, *vr = rv + r * cap;
            float bv = -INFINITY;
            int64_t bi = -1;
            for (int64_t i = 0; i < n[r]; i++) {
                if (vr[i] <= thr[r]) continue;
                const int64_t v = cr[i];
                const float *wr = w + v * K;
                float s = 0.0f;
                for (int64_t k = 0; k < K; k++) s = fmaf(wr[k], hr[k], s);
                if (bi < 0 || s > bv) { bv = s; bi = v; }
            }
            for (int64_t v = nblocks * 8; v < V; v++) {
                const float *wr = w + v * K;
                float s = 0.0f;
                for (int64_t k = 0; k < K; k++) s = fmaf(wr[k], hr[k], s);
                if (bi < 0 || s > bv) { bv = s; bi = v; }
            }
            out[m0 + r] = bi;
            out_val[m0 + r] = bv;
        }
    }
}

/* Mixture of experts after the stacked up-projection, for few experts.
   y: [T, E + 2 * (E + 1) * I]: router logits, then gate inputs of experts 0..E-1 and the shared expert E, then
   their up inputs. down: [E + 1, I, H] (transposed down weights). Routing: score = sqrt(softplus) (score_func 0),
   softmax (1) or sigmoid (2) of the logits; experts from tid2eid[ids[t]] (hash routing, tid2eid [*, topk]) or
   the topk largest score + bias (ties to the lower expert); weights = chosen scores / (their sum + 1e-20) * scale.
   out[t] = sum over the chosen experts in increasing expert order of weight * expert(x), plus the shared expert;
   expert(x) = down^T (silu(min(gate, limit)) * clamp(up, -limit, limit)). Needs 1 <= topk <= E <= 64, I <= 4096, H <= 4096. */
static float softplus1(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

void moe_experts(const float *y, int64_t T, int64_t E, int64_t I, int64_t H, int64_t topk, int score_func,
                 const int64_t *tid2eid, const int64_t *ids, const float *bias, float scale, float limit,
                 const float *down, float *out) {
    const int64_t width = E + 2 * (E + 1) * I;
    float score[64], pick[64], wt[64];
    int64_t chosen[64];
    float act[4096], tmp[4096];
    for (int64_t t = 0; t < T; t++) {
        const float *yt = y + t * width;
        if (score_func == 1) {
            float mx = -INFINITY, s = 0.0f;
            for (int64_t e = 0; e < E; e++) if (yt[e] > mx) mx = yt[e];
            for (int64_t e = 0; e < E; e++) { score[e] = expf(yt[e] - mx); s += score[e]; }
            for (int64_t e = 0; e < E; e++) score[e] = score[e] / s;
        } else {
            for (int64_t e = 0; e < E; e++)
                score[e] = score_func == 0 ? sqrtf(softplus1(yt[e])) : 1.0f / (1.0f + expf(-yt[e]));
        }
        if (tid2eid) {
            for (int64_t j = 0; j < topk; j++) chosen[j] = tid2eid[ids[t] * topk + j];
        } else {
            for (int64_t e = 0; e < E; e++) pick[e] = score[e] + (bias ? bias[e] : 0.0f);
            for (int64_t j = 0; j < topk; j++) {
                int64_t best = -1;
                for (int64_t e = 0; e < E; e++) {
                    int taken = 0;
                    for (int64_t i = 0; i < j; i++) taken |= chosen[i] == e;
                    if (!taken && (best < 0 || pick[e] > pick[best])) best = e;
                }
                chosen[j] = best;
            }
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < topk; j++) { wt[j] = score[chosen[j]]; sum += wt[j]; }
        sum = sum + 1e-20f;
        for (int64_t j = 0; j < topk; j++) wt[j] = (wt[j] / sum) * scale;
        /* increasing expert order (stable) */
        for (int64_t j = 1; j < topk; j++)
            for (int64_t i = j; i > 0 && chosen[i - 1] > chosen[i]; i--) {
                int64_t c = chosen[i]; chosen[i] = chosen[i - 1]; chosen[i - 1] = c;
                float f = wt[i]; wt[i] = wt[i - 1]; wt[i - 1] = f;
            }
        float *o = out + t * H;
        for (int64_t j = 0; j <= topk; j++) {
            const int64_t e = j < topk ? chosen[j] : E;
            const float *g = yt + E + e * I, *u = yt + E + (E + 1) * I + e * I;
            for (int64_t i = 0; i < I; i++) {
                float a = g[i] < limit ? g[i] : limit;
                tmp[i] = -a;
                act[i] = a;
            }
            exp_lanes(tmp, I, tmp); /* in place */
            for (int64_t i = 0; i < I; i++) {
                float b = u[i] < -limit ? -limit : (u[i] > limit ? limit : u[i]);
                act[i] = (act[i] / (1.0f + tmp[i])) * b;
            }
            const float *dw = down + e * I * H;
            for (int64_t h = 0; h < H; h++) tmp[h] = 0.0f;
            for (int64_t i = 0; i < I; i++) {
                const float a = act[i];
                const float *dr = dw + i * H;
                for (int64_t h = 0; h < H; h++) tmp[h] = tmp[h] + a * dr[h];
            }
            if (j == 0) {
                for (int64_t h = 0; h < H; h++) o[h] = tmp[h] * wt[0];
            } else if (j < topk) {
                for (int64_t h = 0; h < H; h++) o[h] = o[h] + tmp[h] * wt[j];
            } else {
                for (int64_t h = 0; h < H; h++) o[h] = o[h] + tmp[h];
            }
        }
    }
}

/* Attention with a sink logit reading its keys straight from the paged pools.
   q: [B, Tq, H, D]; keys of sequence b: the window rows kv_pool[key_slots[b, :Kw]] (visible per query where
   win_vis[b, tq, k]), then, when ent_pool is given, the compressed entries ent_pool[ent_slots[b, :N]], visible
   where ent_vis[b, tq, n] (ent_vis given) or n < threshold[b, tq]. Same arithmetic as sink_attention over the
   concatenated keys. probs: scratch of H * K + 2 * K + 2 floats (K = Kw + N). out: [B, Tq, H, D]. */
#if defined(__AVX__)
/* dots[j] = ((0 + a[j][0]) + a[j][1]) + ... + a[j][7] for eight vectors at once (the scalar lane order). */
static inline __m256 lane_sums8(const v8f *a) {
    __m256 r0 = (__m256)a[0], r1 = (__m256)a[1], r2 = (__m256)a[2], r3 = (__m256)a[3];
    __m256 r4 = (__m256)a[4], r5 = (__m256)a[5], r6 = (__m256)a[6], r7 = (__m256)a[7];
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    /* column l of the 8x8 matrix (lane j = a[j][l]) */
    __m256 c0 = _mm256_permute2f128_ps(u0, u4, 0x20), c1 = _mm256_permute2f128_ps(u1, u5, 0x20);
    __m256 c2 = _mm256_permute2f128_ps(u2, u6, 0x20), c3 = _mm256_permute2f128_ps(u3, u7, 0x20);
    __m256 c4 = _mm256_permute2f128_ps(u0, u4, 0x31), c5 = _mm256_permute2f128_ps(u1, u5, 0x31);
    __m256 c6 = _mm256_permute2f128_ps(u2, u6, 0x31), c7 = _mm256_permute2f128_ps(u3, u7, 0x31);
    __m256 s = _mm256_add_ps(_mm256_setzero_ps(), c0);
    s = _mm256_add_ps(s, c1); s = _mm256_add_ps(s, c2); s = _mm256_add_ps(s, c3);
    s = _mm256_add_ps(s, c4); s = _mm256_add_ps(s, c5); s = _mm256_add_ps(s, c6); s = _mm256_add_ps(s, c7);
    return s;
}
#endif

void sink_attention_paged(const float *q, int64_t B, int64_t Tq, int64_t H, int64_t D, const float *kv_pool,
                          const int64_t *key_slots, int64_t Kw, const uint8_t *win_vis, const float *ent_pool,
                          const int64_t *ent_slots, int64_t N, const uint8_t *ent_vis, const int64_t *threshold,
                          const float *sink, float scale, float *probs, float *out) {
    /* All heads of a query against each key in turn (one shared key/value head): the same per-head
       arithmetic as sink_attention, with every key row read once per query. probs: [H, K] scratch. */
    const int64_t K = Kw + (ent_pool ? N : 0);
    const float **rows = (const float **)(probs + ((H * K + 1) & ~(int64_t)1));
    for (int64_t b = 0; b < B; b++) {
        for (int64_t tq = 0; tq < Tq; tq++) {
            const uint8_t *wv = win_vis + (b * Tq + tq) * Kw;
            const uint8_t *ev = ent_vis ? ent_vis + (b * Tq + tq) * N : 0;
            const int64_t thr = threshold ? threshold[b * Tq + tq] : 0;
            const float *qb = q + (b * Tq + tq) * H * D;
            float *ob = out + (b * Tq + tq) * H * D;
            int64_t nv = 0;
            for (int64_t k = 0; k < K; k++) {
                int vis;
                const float *kr;
                if (k < Kw) { vis = wv[k]; kr = kv_pool + key_slots[b * Kw + k] * D; }
                else {
                    const int64_t n = k - Kw;
                    vis = ev ? ev[n] : n < thr;
                    kr = ent_pool + ent_slots[b * N + n] * D;
                }
                if (vis) rows[nv++] = kr;
            }
            for (int64_t h = 0; h < H; h++) probs[h * K] = 0.0f;
            float mx[64], sum[64];
            for (int64_t h = 0; h < H; h++) mx[h] = sink[h];
            int64_t i0 = 0;
#if defined(__AVX__)
            if ((D & 7) == 0) {
                /* eight keys at a time: per key the same eight-lane partial sums, added up in lane order */
                for (; i0 + 8 <= nv; i0 += 8) {
                    for (int64_t h = 0; h < H; h++) {
                        const float *qr = qb + h * D;
                        v8f acc[8];
                        for (int j = 0; j < 8; j++) acc[j] = (v8f){0};
                        for (int64_t d = 0; d < D; d += 8) {
                            v8f a;
                            memcpy(&a, qr + d, sizeof(a));
                            for (int j = 0; j < 8; j++) {
                                v8f c;
                                memcpy(&c, rows[i0 + j] + d, sizeof(c));
                                acc[j] = acc[j] + a * c;
                            }
                        }
                        v8f dots = (v8f)lane_sums8(acc) * scale;
                        memcpy(probs + h * K + i0, &dots, sizeof(dots));
                        for (int j = 0; j < 8; j++) if (dots[j] > mx[h]) mx[h] = dots[j];
                    }
                }
            }
#endif
            for (int64_t i = i0; i < nv; i++) {
                const float *kr = rows[i];
                for (int64_t h = 0; h < H; h++) {
                    const float *qr = qb + h * D;
                    float dot = dot_row(qr, kr, D) * scale;
                    probs[h * K + i] = dot;
                    if (dot > mx[h]) mx[h] = dot;
                }
            }
            for (int64_t h = 0; h < H; h++) {
                float s = sexp(sink[h] - mx[h]);
                float *ph = probs + h * K;
                int64_t i = 0;
                for (; i + 8 <= nv; i += 8) {
                    v8f v;
                    memcpy(&v, ph + i, sizeof(v));
                    v = vexp8(v - mx[h]);
                    memcpy(ph + i, &v, sizeof(v));
                }
                for (; i < nv; i++) ph[i] = sexp(ph[i] - mx[h]);
                for (i = 0; i < nv; i++) s += ph[i];
                sum[h] = 1.0f / s;
                float *o = ob + h * D;
                for (int64_t d = 0; d < D; d++) o[d] = 0.0f;
            }
            for (int64_t i = 0; i < nv; i++) {
                const float *kr = rows[i];
                for (int64_t h = 0; h < H; h++) {
                    const float p = probs[h * K + i] * sum[h];
                    float *o = ob + h * D;
                    for (int64_t d = 0; d < D; d++) o[d] += p * kr[d];
                }
            }
        }
    }
}

/* Lightning-indexer scores from the paged entry pool: q [B, Tq, Hi, di], w [B, Tq, Hi] (head weights),
   entries ent_pool[ent_slots[b, :N]]; scores [B, Tq, N] = sum over heads of (relu(q . entry) * qscale) *
   (w * wscale), -inf for entries n >= threshold[b, tq]. */
void indexer_scores(const float *q, const float *w, int64_t B, int64_t Tq, int64_t Hi, int64_t di,
                    const float *ent_pool, const int64_t *ent_slots, int64_t N, const int64_t *threshold,
                    float qscale, float wscale, float *scores) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t tq = 0; tq < Tq; tq++) {
            const int64_t row = b * Tq + tq, thr = threshold[row];
            float *sr = scores + row * N;
            for (int64_t n = 0; n < N; n++) {
                if (n >= thr) { sr[n] = -INFINITY; continue; }
                const float *kr = ent_pool + ent_slots[b * N + n] * di;
                float s = 0.0f;
                for (int64_t h = 0; h < Hi; h++) {
                    const float *qr = q + (row * Hi + h) * di;
                    float dot = 0.0f;
                    for (int64_t d = 0; d < di; d++) dot += qr[d] * kr[d];
                    float r = dot > 0.0f ? dot : 0.0f;
                    float term = (r * qscale) * (w[row * Hi + h] * wscale);
                    s = h == 0 ? term : s + term;
                }
                sr[n] = s;
            }
        }
}

/* y[t, j] = x[t, :] . w[j, :] for x [T, n] (row stride xs), w [m, n]; eight-lane partial sums added in lane
   order (eight outputs at a time through lane_sums8 when n is a multiple of 8: the same sums). */
static void small_linear(const float *x, int64_t T, int64_t n, int64_t xs, const float *w, int64_t m, float *y) {
    for (int64_t t = 0; t < T; t++) {
        const float *xr = x + t * xs;
        int64_t j = 0;
#if defined(__AVX__)
        if ((n & 7) == 0) {
            for (; j + 8 <= m; j += 8) {
                v8f acc[8];
                for (int jj = 0; jj < 8; jj++) acc[jj] = (v8f){0};
                for (int64_t k = 0; k < n; k += 8) {
                    v8f a;
                    memcpy(&a, xr + k, sizeof(a));
                    for (int jj = 0; jj < 8; jj++) {
                        v8f c;
                        memcpy(&c, w + (j + jj) * n + k, sizeof(c));
                        acc[jj] = acc[jj] + a * c;
                    }
                }
                v8f dots = (v8f)lane_sums8(acc);
                memcpy(y + t * m + j, &dots, sizeof(dots));
            }
        }
#endif
        for (; j < m; j++) {
            const float *wr = w + j * n;
            float dot = 0.0f;
            int64_t k = 0;
            if (n >= 8) {
                v8f acc = {0};
                for (; k + 8 <= n; k += 8) {
                    v8f a, c;
                    memcpy(&a, xr + k, sizeof(a));
                    memcpy(&c, wr + k, sizeof(c));
                    acc = acc + a * c;
                }
                for (int l = 0; l < 8; l++) dot += acc[l];
            }
            for (; k < n; k++) dot += xr[k] * wr[k];
            y[t * m + j] = dot;
        }
    }
}

/* One boundary between decoder sub-blocks, for T tokens: when block is given, first merge it into the streams
   (hc_merge with post_prev / comb_prev); then the next site's weights (hc_mix after the unweighted RMS norm of
   the flattened streams and their product with fn [mix, hc * D], partial sums in eight lanes), and the block
   input: the collapsed streams through a weighted RMS norm (norm_w, norm_eps). streams_out may be streams_in
   only when block is NULL. Scratch: flat [T, hc * D], mixes [T, mix], pre [T, hc], collapsed [T, D]. */
void hc_step(const float *streams_in, const float *block, const float *post_prev, const float *comb_prev, int64_t T,
             int hc, int64_t D, const float *fn, const float *base, const float *scale, int iters, float hc_eps,
             float norm_eps, const float *norm_w, float *streams_out, float *post, float *comb, float *x_out,
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
    rms_norm(collapsed, T, D, D, norm_w, norm_eps, x_out);
}

/* The per-token front of an attention block after its fused input projection proj [T, P]:
   q_latent = RMSNorm(q_norm_w)(proj[:, :qa]); q = rope(rms_per_head(q_latent @ wq_b^T)) [T, H, D];
   the shared key/value rope(RMSNorm(kv_norm_w)(proj[:, qa:qa + D])) stored at kv_pool row slots[t];
   ncopy raw column ranges of proj (offset copy_off[i], width copy_w[i]) stored at row slots[t] of copy_pools[i];
   with idx_wq_b, the indexer queries rope(q_latent @ idx_wq_b^T) [T, Hi, di]. Rope tables c, s: [T, R].
   scratch: T * (H * D + H * D + D + D + Hi * di) floats. */
void attn_front(const float *proj, int64_t T, int64_t P, int64_t qa, const float *q_norm_w, float q_eps,
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
void attn_back(const float *x, int64_t T, int64_t H, int64_t D, int64_t R, const float *c, const float *s,
               const float *wo_a, int64_t G, int64_t r, const float *wo_b, int64_t hidden, float *out,
               float *scratch) {
    float *rot = scratch, *y = scratch + T * H * D;
    const int64_t in = H * D / G;
    rope_apply(x, T, H, D, R, c, s, rot);
    for (int64_t g = 0; g < G; g++) {
        /* group g's inputs are columns g*in .. of each rotated row; outputs go to columns g*r .. of y */
        for (int64_t t = 0; t < T; t++) {
            float tmp[512];
            small_linear(rot + t * H * D + g * in, 1, in, in, wo_a + g * r * in, r, tmp);
            memcpy(y + t * G * r + g * r, tmp, (size_t)r * sizeof(float));
        }
    }
    small_linear(y, T, G * r, G * r, wo_b, hidden, out);
}
"""

_lock = threading.Lock()
_lib: ctypes.CDLL | None | bool = False  # False: not tried yet


def _cache_dir() -> Path:
    root = os.environ.get("DEEPSEEK_ENGINE_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "deepseek_engine"


def _cpu_identity() -> str:
    info = platform.machine() + platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "flags", "Features")):
                    info += line
                if line.strip() == "":  # the first processor is enough
                    break
    except OSError:
        pass
    return info


def _build() -> ctypes.CDLL | None:
    if os.environ.get("DEEPSEEK_ENGINE_NATIVE", "1") == "0":
        return None
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None
    flags = ["-O3", "-march=native", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC"]
    # -march=native: the library is only valid for this kind of CPU, so its identity is part of the name.
    tag = hashlib.sha256((_SOURCE + cc + " ".join(flags) + _cpu_identity()).encode()).hexdigest()[:16]
    folder = _cache_dir()
    lib_path = folder / f"native-{tag}.so"
    if not lib_path.is_file():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=folder) as tmp:
                src = Path(tmp) / "native.c"
                src.write_text(_SOURCE)
                out = Path(tmp) / "native.so"
                subprocess.run([cc, *flags, str(src), "-o", str(out), "-lm"], check=True, capture_output=True,
                               timeout=120)
                os.replace(out, lib_path)
        except (OSError, subprocess.SubprocessError):
            return None
    try:
        lib = ctypes.CDLL(str(lib_path))
    except OSError:
        return None
    p, i64, i32, f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_float
    lib.hc_mix.argtypes = [p, i64, i32, p, p, i32, f32, p, p, p, p, i64, p]
    lib.hc_mix.restype = None
    lib.hc_merge.argtypes = [p, p, p, p, i64, i32, i64, p]
    lib.sink_attention.argtypes = [p, p, p, p, i64, i64, i64, i64, i64, f32, p, p]
    lib.sink_attention.restype = None
    lib.rms_norm.argtypes = [p, i64, i64, i64, p, f32, p]
    lib.rms_norm.restype = None
    lib.rope_apply.argtypes = [p, i64, i64, i64, i64, p, p, p]
    lib.rope_apply.restype = None
    lib.hc_merge.restype = None
    lib.head_argmax.argtypes = [p, i64, i64, p, i64, p, i64, p, p]
    lib.head_argmax.restype = None
    f64 = ctypes.c_double
    lib.head_argmax_q8.argtypes = [p, i64, i64, i64, p, p, i64, f64, f64, f64, f64, p, i64, p, p, i64, p, p]
    lib.head_argmax_q8.restype = None
    lib.moe_experts.argtypes = [p, i64, i64, i64, i64, i64, i32, p, p, p, f32, f32, p, p]
    lib.moe_experts.restype = None
    lib.attn_back.argtypes = [p, i64, i64, i64, i64, p, p, p, i64, i64, p, i64, p, p]
    lib.attn_back.restype = None
    lib.exp_lanes.argtypes = [p, i64, p]
    lib.exp_lanes.restype = None
    lib.attn_front.argtypes = [p, i64, i64, i64, p, f32, p, i64, i64, f32, p, f32, i64, p, p, p, p, i64, p, p, p,
                               p, i64, i64, p, p, p, p]
    lib.attn_front.restype = None
    lib.hc_step.argtypes = [p, p, p, p, i64, i32, i64, p, p, p, i32, f32, f32, p, p, p, p, p, p, p, p, p]
    lib.hc_step.restype = None
    lib.sink_attention_paged.argtypes = [p, i64, i64, i64, i64, p, p, i64, p, p, p, i64, p, p, p, f32, p, p]
    lib.sink_attention_paged.restype = None
    lib.indexer_scores.argtypes = [p, p, i64, i64, i64, i64, p, p, i64, p, f32, f32, p]
    lib.indexer_scores.restype = None
    return lib


def library() -> ctypes.CDLL | None:
    """The compiled kernels, or ``None`` when they are disabled or cannot be built."""
    global _lib
    if _lib is False:
        with _lock:
            if _lib is False:
                _lib = _build()
    return _lib  # type: ignore[return-value]


def _usable(*tensors: torch.Tensor) -> bool:
    for t in tensors:
        if t.dtype != torch.float32 or not t.is_cpu:
            return False
    return True


def hc_mix(mixes: torch.Tensor, base: torch.Tensor, scale: torch.Tensor, hc: int, iters: int, hc_eps: float,
           streams: torch.Tensor):
    """``(pre [T, hc], post [T, hc], comb [T, hc, hc], collapsed [T, D])`` of one hyper-connection site.

    ``mixes`` ``[T, (2 + hc) * hc]`` is the float32 linear map of the normed streams,
    ``streams`` ``[T, hc, D]`` the residual streams. Returns ``None`` when the kernels
    are unavailable or the dtypes are not float32 (the caller computes it in PyTorch).
    """
    lib = library()
    if lib is None or not _usable(mixes, base, scale, streams) or hc > 8 or iters < 1:
        return None
    mixes, base, scale, streams = mixes.contiguous(), base.contiguous(), scale.contiguous(), streams.contiguous()
    t, d = streams.shape[0], streams.shape[-1]
    pre = torch.empty(t, hc)
    post = torch.empty(t, hc)
    comb = torch.empty(t, hc, hc)
    collapsed = torch.empty(t, d)
    lib.hc_mix(mixes.data_ptr(), t, hc, base.data_ptr(), scale.data_ptr(), iters, hc_eps, pre.data_ptr(),
               post.data_ptr(), comb.data_ptr(), streams.data_ptr(), d, collapsed.data_ptr())
    return pre, post, comb, collapsed


def hc_merge(streams: torch.Tensor, block_out: torch.Tensor, post: torch.Tensor, comb: torch.Tensor):
    """``post`` spreads ``block_out`` over the streams, ``comb`` mixes the old ones (``None``: use PyTorch)."""
    lib = library()
    if lib is None or not _usable(streams, block_out, post, comb):
        return None
    streams, block_out = streams.contiguous(), block_out.contiguous()
    post, comb = post.contiguous(), comb.contiguous()
    t, hc, d = streams.shape
    out = torch.empty(t, hc, d)
    lib.hc_merge(streams.data_ptr(), block_out.data_ptr(), post.data_ptr(), comb.data_ptr(), t, hc, d,
                 out.data_ptr())
    return out


def sink_attention(q: torch.Tensor, keys: torch.Tensor, visible: torch.Tensor, sink: torch.Tensor,
                   scale: float) -> torch.Tensor | None:
    """Softmax attention with a per-head sink logit (float32 only; ``None``: use PyTorch).

    ``q`` ``[B, Tq, H, D]``, ``keys`` ``[B, K, D]`` (also the values), ``visible``
    ``[B, Tq, K]`` bool, ``sink`` ``[H]``; returns ``[B, Tq, H, D]``.
    """
    lib = library()
    if lib is None or not _usable(q, keys, sink) or visible.dtype != torch.bool:
        return None
    b, tq, h, d = q.shape
    k = keys.shape[1]
    q, keys, sink = q.contiguous(), keys.contiguous(), sink.contiguous()
    visible = visible.contiguous()
    out = torch.empty(b, tq, h, d)
    probs = torch.empty(max(k, 1))
    lib.sink_attention(q.data_ptr(), keys.data_ptr(), visible.data_ptr(), sink.data_ptr(), b, tq, h, k, d, scale,
                       probs.data_ptr(), out.data_ptr())
    return out


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor | None:
    """RMS norm over the last axis (float32 only; ``None``: use PyTorch)."""
    lib = library()
    if lib is None or not _usable(x) or (weight is not None and not _usable(weight)) or x.dim() < 1:
        return None
    d = x.shape[-1]
    if x.numel() == 0 or d == 0:
        return None
    rows = x.numel() // d
    flat = x.reshape(rows, d) if x.dim() != 2 else x
    if flat.stride(1) != 1:
        flat = flat.contiguous()
    if weight is not None:
        weight = weight.contiguous()
    out = torch.empty(x.shape)
    lib.rms_norm(flat.data_ptr(), rows, d, flat.stride(0), None if weight is None else weight.data_ptr(), eps,
                 out.data_ptr())
    return out


def rope_apply(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor) -> torch.Tensor | None:
    """``apply_rotary_tables`` (float32 only; ``None``: use PyTorch)."""
    lib = library()
    if lib is None or not _usable(x, c, s) or x.dim() < 2 or x.shape[0] != c.shape[0]:
        return None
    x, c, s = x.contiguous(), c.contiguous(), s.contiguous()
    t, d, r = x.shape[0], x.shape[-1], c.shape[-1]
    if r > d or r % 2:
        return None
    out = torch.empty_like(x)
    lib.rope_apply(x.data_ptr(), t, x.numel() // max(t * d, 1), d, r, c.data_ptr(), s.data_ptr(), out.data_ptr())
    return out


_META_CACHE: dict[tuple, torch.Tensor] = {}


def attn_front(proj: torch.Tensor, q_norm_w: torch.Tensor, q_eps: float, wq_b: torch.Tensor, n_heads: int,
               head_dim: int, head_eps: float, kv_norm_w: torch.Tensor, kv_eps: float, c: torch.Tensor,
               s: torch.Tensor, slots: torch.Tensor, kv_pool: torch.Tensor, copies: list[tuple[int, int, torch.Tensor]],
               idx_wq_b: torch.Tensor | None = None, idx_heads: int = 0, idx_dim: int = 0):
    """Per-token front of an attention block from its fused input projection ``proj`` ``[T, P]`` (columns:
    q-LoRA input, shared KV, then the rest): ``(q_latent, q, indexer q or None)``, with the rotated shared KV
    and the raw ``copies`` ``(column offset, width, pool)`` stored at ``slots``. ``None``: use PyTorch."""
    lib = library()
    if lib is None:
        return None
    weights = [proj, q_norm_w, wq_b, kv_norm_w, c, s, kv_pool] + [pool for _, _, pool in copies]
    if idx_wq_b is not None:
        weights.append(idx_wq_b)
    for x in weights:
        if x.dtype != torch.float32 or not x.is_cpu or not x.is_contiguous():
            return None
    if slots.dtype != torch.long or not slots.is_contiguous() or proj.dim() != 2:
        return None
    t, width = proj.shape
    qa = q_norm_w.shape[0]
    r = c.shape[-1]
    if (c.shape != (t, r) or s.shape != (t, r) or r % 2 or r > head_dim or wq_b.shape != (n_heads * head_dim, qa)
            or kv_norm_w.shape != (head_dim,) or kv_pool.shape[-1] != head_dim or slots.shape != (t,)
            or qa + head_dim > width):
        return None
    for off, w, pool in copies:
        if pool.shape[-1] != w or off + w > width:
            return None
    if idx_wq_b is not None and (idx_wq_b.shape != (idx_heads * idx_dim, qa) or r > idx_dim):
        return None
    q_latent = torch.empty(t, qa)
    q = torch.empty(t, n_heads, head_dim)
    qi = torch.empty(t, idx_heads, idx_dim) if idx_wq_b is not None else None
    scratch = torch.empty(t * (2 * n_heads * head_dim + 2 * head_dim + idx_heads * idx_dim) + 1)
    rows = tuple((off, w, pool.data_ptr()) for off, w, pool in copies) or ((0, 0, 0),)
    meta = _META_CACHE.get(rows)
    if meta is None:  # (offsets, widths, pool addresses): the same few per layer, step after step
        meta = torch.tensor(rows, dtype=torch.long).t().contiguous()
        if len(_META_CACHE) > 256:
            _META_CACHE.clear()
        _META_CACHE[rows] = meta
    lib.attn_front(proj.data_ptr(), t, width, qa, q_norm_w.data_ptr(), q_eps, wq_b.data_ptr(), n_heads, head_dim,
                   head_eps, kv_norm_w.data_ptr(), kv_eps, r, c.data_ptr(), s.data_ptr(), slots.data_ptr(),
                   kv_pool.data_ptr(), len(copies), meta[0].data_ptr(), meta[1].data_ptr(), meta[2].data_ptr(),
                   None if idx_wq_b is None else idx_wq_b.data_ptr(), idx_heads, idx_dim, q_latent.data_ptr(),
                   q.data_ptr(), None if qi is None else qi.data_ptr(), scratch.data_ptr())
    return q_latent, q, qi


def attn_back(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor, wo_a: torch.Tensor, groups: int,
              wo_b: torch.Tensor) -> torch.Tensor | None:
    """Inverse RoPE (tables ``c``, ``s`` = the negated sine table), grouped ``wo_a`` and ``wo_b`` of the heads'
    outputs ``x`` ``[T, H, D]`` in one call; ``None``: use PyTorch."""
    lib = library()
    if lib is None or x.dim() != 3:
        return None
    for v in (x, c, s, wo_a, wo_b):
        if v.dtype != torch.float32 or not v.is_cpu or not v.is_contiguous():
            return None
    t, h, d = x.shape
    r2 = c.shape[-1]
    if groups <= 0 or (h * d) % groups or c.shape != (t, r2) or s.shape != (t, r2) or r2 % 2 or r2 > d:
        return None
    width = (h * d) // groups
    if wo_a.dim() != 2 or wo_a.shape[1] != width or wo_a.shape[0] % groups:
        return None
    rank = wo_a.shape[0] // groups
    if rank > 512 or wo_b.dim() != 2 or wo_b.shape[1] != groups * rank:
        return None
    out = torch.empty(t, wo_b.shape[0])
    scratch = torch.empty(t * (h * d + groups * rank) + 1)
    lib.attn_back(x.data_ptr(), t, h, d, r2, c.data_ptr(), s.data_ptr(), wo_a.data_ptr(), groups, rank,
                  wo_b.data_ptr(), wo_b.shape[0], out.data_ptr(), scratch.data_ptr())
    return out


def hc_step(streams: torch.Tensor, block: torch.Tensor | None, post_prev: torch.Tensor | None,
            comb_prev: torch.Tensor | None, fn: torch.Tensor, base: torch.Tensor, scale: torch.Tensor, hc: int,
            iters: int, hc_eps: float, norm_eps: float, norm_weight: torch.Tensor):
    """Merge ``block`` (when given) into ``streams``, then the next site's ``(streams, post, comb, x)``:
    ``hyper_merge`` followed by ``hyper_weights`` and the block's input norm ``RMSNorm(norm_weight)`` in one
    call. All float32 and contiguous; ``None``: use the separate functions."""
    lib = library()
    if lib is None or streams.dtype != torch.float32 or hc > 8 or iters < 1:
        return None
    tensors = [streams, fn, base, scale, norm_weight]
    if block is not None:
        tensors += [block, post_prev, comb_prev]
    for x in tensors:
        if x.dtype != torch.float32 or not x.is_cpu or not x.is_contiguous():
            return None
    t, _, d = streams.shape
    mix = (2 + hc) * hc
    if fn.shape != (mix, hc * d) or norm_weight.shape != (d,):
        return None
    out = torch.empty(t, hc, d) if block is not None else streams
    post, comb, x = torch.empty(t, hc), torch.empty(t, hc, hc), torch.empty(t, d)
    scratch = torch.empty(t * (hc * d + mix + hc + d))
    a = scratch.data_ptr()
    lib.hc_step(streams.data_ptr(), None if block is None else block.data_ptr(),
                None if block is None else post_prev.data_ptr(), None if block is None else comb_prev.data_ptr(),
                t, hc, d, fn.data_ptr(), base.data_ptr(), scale.data_ptr(), iters, hc_eps, norm_eps,
                norm_weight.data_ptr(), out.data_ptr(), post.data_ptr(), comb.data_ptr(), x.data_ptr(),
                a, a + 4 * t * hc * d, a + 4 * t * (hc * d + mix), a + 4 * t * (hc * d + mix + hc))
    return out, post, comb, x


def sink_attention_paged(q: torch.Tensor, kv_pool: torch.Tensor, key_slots: torch.Tensor, win_visible: torch.Tensor,
                         sink: torch.Tensor, scale: float, entry_pool: torch.Tensor | None = None,
                         entry_slots: torch.Tensor | None = None, entry_visible: torch.Tensor | None = None,
                         threshold: torch.Tensor | None = None) -> torch.Tensor | None:
    """``sink_attention`` over keys read from the pools: the window rows ``key_slots`` ``[B, Kw]`` of
    ``kv_pool``, then (optionally) the entries ``entry_slots`` ``[B, N]`` of ``entry_pool``, visible where
    ``entry_visible`` ``[B, Tq, N]`` or below ``threshold`` ``[B, Tq]``. ``None``: use PyTorch."""
    lib = library()
    if lib is None or not _usable(q, kv_pool, sink) or win_visible.dtype != torch.bool:
        return None
    b, tq, h, d = q.shape
    kw = key_slots.shape[1]
    n = 0
    if entry_pool is not None:
        if not _usable(entry_pool) or entry_pool.shape[-1] != d or (entry_visible is None) == (threshold is None):
            return None
        n = entry_slots.shape[1]
        entry_slots = entry_slots.contiguous()
        if entry_visible is not None:
            if entry_visible.dtype != torch.bool:
                return None
            entry_visible = entry_visible.contiguous()
        else:
            threshold = threshold.contiguous()
    if kv_pool.shape[-1] != d or not kv_pool.is_contiguous() or (entry_pool is not None
                                                                  and not entry_pool.is_contiguous()):
        return None
    q, key_slots, win_visible, sink = q.contiguous(), key_slots.contiguous(), win_visible.contiguous(), sink.contiguous()
    if h > 64:
        return None
    out = torch.empty(b, tq, h, d)
    probs = torch.empty((h + 2) * (kw + n) + 2)
    lib.sink_attention_paged(q.data_ptr(), b, tq, h, d, kv_pool.data_ptr(), key_slots.data_ptr(), kw,
                             win_visible.data_ptr(), None if entry_pool is None else entry_pool.data_ptr(),
                             None if entry_pool is None else entry_slots.data_ptr(), n,
                             None if entry_visible is None else entry_visible.data_ptr(),
                             None if threshold is None else threshold.data_ptr(), sink.data_ptr(), scale,
                             probs.data_ptr(), out.data_ptr())
    return out


def indexer_scores(q: torch.Tensor, weights: torch.Tensor, entry_pool: torch.Tensor, entry_slots: torch.Tensor,
                   threshold: torch.Tensor, qscale: float, wscale: float) -> torch.Tensor | None:
    """Lightning-indexer scores ``[B, Tq, N]`` for ``q`` ``[B, Tq, Hi, di]`` and head ``weights``
    ``[B, Tq, Hi]`` against the entries ``entry_slots`` ``[B, N]`` of ``entry_pool``; ``-inf`` at and above
    ``threshold`` ``[B, Tq]``. ``None``: use PyTorch."""
    lib = library()
    if lib is None or not _usable(q, weights, entry_pool) or not entry_pool.is_contiguous():
        return None
    b, tq, hi, di = q.shape
    if entry_pool.shape[-1] != di:
        return None
    n = entry_slots.shape[1]
    q, weights, entry_slots, threshold = q.contiguous(), weights.contiguous(), entry_slots.contiguous(), threshold.contiguous()
    scores = torch.empty(b, tq, n)
    lib.indexer_scores(q.data_ptr(), weights.data_ptr(), b, tq, hi, di, entry_pool.data_ptr(), entry_slots.data_ptr(),
                       n, threshold.data_ptr(), qscale, wscale, scores.data_ptr())
    return scores


_SCORE_FUNCS = {"sqrtsoftplus": 0, "softmax": 1, "sigmoid": 2}


def moe_experts(y: torch.Tensor, n_experts: int, inter: int, top_k: int, score_func: str,
                tid2eid: torch.Tensor | None, input_ids: torch.Tensor | None, bias: torch.Tensor | None,
                scale: float, limit: float, down: torch.Tensor) -> torch.Tensor | None:
    """Routing, SwiGLU and down projections of the chosen and the shared experts after the stacked
    up-projection ``y`` ``[T, E + 2 (E + 1) I]`` (``DeepseekV4MoE._all_experts``); ``None``: use PyTorch."""
    lib = library()
    func = _SCORE_FUNCS.get(score_func)
    if (lib is None or func is None or not _usable(y, down) or (bias is not None and not _usable(bias))
            or not 1 <= top_k <= n_experts <= 64 or inter > 4096 or y.dim() != 2 or down.dim() != 3):
        return None
    t = y.shape[0]
    h = down.shape[-1]
    if h > 4096 or y.shape[1] != n_experts + 2 * (n_experts + 1) * inter:
        return None
    if tid2eid is not None:
        if input_ids is None or tid2eid.dtype != torch.long or input_ids.dtype != torch.long:
            return None
        tid2eid, input_ids = tid2eid.contiguous(), input_ids.contiguous()
    y, down = y.contiguous(), down.contiguous()
    if bias is not None:
        bias = bias.contiguous()
    out = torch.empty(t, h)
    lib.moe_experts(y.data_ptr(), t, n_experts, inter, h, top_k, func,
                    None if tid2eid is None else tid2eid.data_ptr(),
                    None if tid2eid is None else input_ids.data_ptr(),
                    None if bias is None else bias.data_ptr(), scale, limit, down.data_ptr(), out.data_ptr())
    return out


class GreedyHead:
    """Arg-max of ``x @ weight.T`` per row without materialising the logits.

    Holds a blocked float32 copy of ``weight`` and an 8-bit rounded copy. The
    integer pass (``head_argmax_q8``) bounds every logit from the rounding errors
    of both operands and keeps only the rows that can still be the maximum; those
    get the exact float32 dot of ``head_argmax``, so the chosen IDs are the ones the
    float32 kernel picks. Rows it cannot decide (an all-zero row, too many
    near-equal logits) go through the float32 kernel. ``None`` from ``__call__``
    means the caller should compute the logits and ``torch.argmax`` them.
    """

    #: Largest head (in bytes) for which the blocked copy is made.
    MAX_BYTES = 1 << 30
    #: Candidate buffer per row of the integer pass.
    CANDIDATES = 2048

    def __init__(self, weight: torch.Tensor, quantized: bool = True) -> None:
        self.weight = weight
        self.quantized = quantized
        self._blocked: tuple[torch.Tensor, torch.Tensor] | None = None
        self._q8: tuple | None = None
        self._version = None
        self._finite = False

    def _blocks(self) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.weight
        if self._blocked is None or self._version != (w.data_ptr(), w._version):
            v, k = w.shape
            n = v // 8
            with torch.no_grad():
                plain = w.detach()
                blocked = plain[: n * 8].reshape(n, 8, k).transpose(1, 2).contiguous()
                tail = plain[n * 8 :].contiguous()
                self._finite = bool(torch.isfinite(plain).all())
                self._q8 = self._quantize(plain.contiguous()) if self._finite and 0 < k <= 256 else None
            self._blocked = (blocked, tail)
            self._version = (w.data_ptr(), w._version)
        return self._blocked

    @staticmethod
    def _quantize(w: torch.Tensor) -> tuple | None:
        """int8 blocks, row sums and the error bounds ``head_argmax_q8`` needs (float64 arithmetic)."""
        v, k = w.shape
        n = v // 8
        w64 = w.double()
        wmax = float(w64.abs().max()) if w.numel() else 0.0
        if n == 0 or not wmax > 0.0:
            return None
        k4 = -(-k // 4) * 4
        if k4 < 32:  # the kernel's register path takes exactly 32 (zero-padded) columns, 7-bit values
            k4 = 32
        qmax = 63 if k4 == 32 else 127
        s_w = wmax / qmax
        q = torch.round(w64 / s_w).clamp_(-qmax, qmax)
        ew = float((w64 - q * s_w).abs().max()) * (1 + 1e-9)
        aw = float(w64.abs().sum(dim=1).max()) * (1 + 1e-9)
        q8 = torch.zeros(n * 8, k4, dtype=torch.int8)
        q8[:, :k] = q[: n * 8].to(torch.int8)
        rowsum = q8.to(torch.int32).sum(dim=1).to(torch.int32).contiguous()  # (sum widens to int64)
        blocks = q8.view(n, 8, k4 // 4, 4).permute(0, 2, 1, 3).contiguous()
        return blocks, rowsum, k4, s_w, ew, aw, wmax, w

    def __call__(self, x: torch.Tensor) -> torch.Tensor | None:
        w = self.weight
        lib = library()
        if (lib is None or not _usable(x, w) or w.dim() != 2 or x.dim() != 2 or x.shape[1] != w.shape[1]
                or w.numel() * 4 > self.MAX_BYTES or x.shape[0] == 0):
            return None
        blocked, tail = self._blocks()
        # The running maximum skips NaN, where torch.argmax would pick it: leave such rows to torch.
        if not (self._finite and bool(torch.isfinite(x).all())):
            return None
        m = x.shape[0]
        x = x.contiguous()
        if self.quantized and self._q8 is not None:
            blocks, rowsum, k4, s_w, ew, aw, wmax, plain = self._q8
            cap = self.CANDIDATES
            out = torch.empty(m, dtype=torch.long)
            val = torch.empty(m)
            # Candidate buffers are reused across calls (a fresh 128 KiB per step costs page faults).
            scratch = self.__dict__.get("_scratch")
            if scratch is None or scratch.shape[0] < m or scratch.shape[2] != cap:
                scratch = torch.empty(2, max(m, 64), cap, dtype=torch.int32)
                self.__dict__["_scratch"] = scratch
            cand, cval = scratch[0], scratch[1]
            lib.head_argmax_q8(x.data_ptr(), m, x.shape[1], k4, blocks.data_ptr(), rowsum.data_ptr(),
                               blocks.shape[0], s_w, ew, aw, wmax, plain.data_ptr(), plain.shape[0],
                               cand.data_ptr(), cval.data_ptr(), cap, out.data_ptr(), val.data_ptr())
            undecided = torch.nonzero(out < 0).flatten()
            if undecided.numel():
                rest = self._plain(lib, x[undecided], blocked, tail)
                if rest is None:
                    return None
                out[undecided] = rest
            return out
        return self._plain(lib, x, blocked, tail)

    @staticmethod
    def _plain(lib, x: torch.Tensor, blocked: torch.Tensor, tail: torch.Tensor) -> torch.Tensor | None:
        m = x.shape[0]
        m8 = -(-m // 8) * 8
        h = torch.zeros(m8, x.shape[1])
        h[:m] = x
        out = torch.empty(m8, dtype=torch.long)
        val = torch.empty(m8)
        lib.head_argmax(h.data_ptr(), m8, x.shape[1], blocked.data_ptr(), blocked.shape[0], tail.data_ptr(),
                        tail.shape[0], out.data_ptr(), val.data_ptr())
        if bool((out[:m] < 0).any()) or bool(torch.isnan(val[:m]).any()):
            return None
        return out[:m]
