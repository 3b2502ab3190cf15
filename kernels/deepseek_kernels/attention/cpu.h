// Attention with a sink logit: gathered keys (prefill) and paged pools (decode); torch-free CPU kernels.
#pragma once
#include "../csrc/lanes.h"

#include <vector>

/* Attention with a sink logit for B sequences: q [B, Tq*H, D] (row tq*H + h), keys [B, K, D] (also the values),
   visible [B, Tq, K] (bytes), sink [H]. out [B, Tq*H, D]. Per row: logits = (q . key) * scale where visible,
   softmax over the logits and the sink, then the probability-weighted sum of the visible keys. */
static inline void sink_attention(const float *q, const float *keys, const uint8_t *visible, const float *sink, int64_t B,
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


/* One query of the paged kernel, written out plainly: per head the dots of the visible rows (dot_row, times
   scale), the max from the sink, sexp, the denominator from the sink's term in row order, then the
   probability-weighted sum of the rows. The arithmetic of sink_attention; used where the vector path is not
   compiled in or D is not a multiple of 8. probs: nv floats. */
static inline void paged_query_plain(const float *qb, const float *const *rows, int64_t nv, int64_t H, int64_t D,
                                     const float *sink, float scale, float *probs, float *ob) {
    for (int64_t h = 0; h < H; h++) {
        const float *qr = qb + h * D;
        float mx = sink[h];
        for (int64_t i = 0; i < nv; i++) {
            const float dot = dot_row(qr, rows[i], D) * scale;
            probs[i] = dot;
            if (dot > mx) mx = dot;
        }
        float s = sexp(sink[h] - mx);
        for (int64_t i = 0; i < nv; i++) {
            probs[i] = sexp(probs[i] - mx);
            s += probs[i];
        }
        const float inv = 1.0f / s;
        float *o = ob + h * D;
        for (int64_t d = 0; d < D; d++) o[d] = 0.0f;
        for (int64_t i = 0; i < nv; i++) {
            const float p = probs[i] * inv;
            for (int64_t d = 0; d < D; d++) o[d] += p * rows[i][d];
        }
    }
}

/* The rows of the next sequence, fetched into the cache a few at a time while this one is worked on (a burst
   of prefetches at once stalls on the fill buffers). */
struct PagedPrefetch {
    const float *const *next = nullptr;
    int64_t left = 0, D = 0;
    void pump(int64_t count) {
        for (; count > 0 && left > 0; count--, left--, next++)
            for (int64_t d = 0; d < D; d += 16) __builtin_prefetch(*next + d, 0, 3);
    }
};

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define DK_ATTENTION_AVX512 1
/* (v16f, v16i and vexp16, vexp8's operations on sixteen lanes: csrc/lanes.h) */

/* lane_sums8 for two heads at once: a[j] holds key j's eight partial sums for head A in lanes 0-7 and for head
   B in lanes 8-15. Result lanes 0-7: head A's dots with keys 0-7, lanes 8-15: head B's; each is
   ((0 + part[0]) + part[1]) + ... + part[7], the order of lane_sums8 and dot_row. */
static inline v16f lane_sums8_pair(const v16f *a) {
    __m512 r0 = (__m512)a[0], r1 = (__m512)a[1], r2 = (__m512)a[2], r3 = (__m512)a[3];
    __m512 r4 = (__m512)a[4], r5 = (__m512)a[5], r6 = (__m512)a[6], r7 = (__m512)a[7];
    __m512 t0 = _mm512_unpacklo_ps(r0, r1), t1 = _mm512_unpackhi_ps(r0, r1);
    __m512 t2 = _mm512_unpacklo_ps(r2, r3), t3 = _mm512_unpackhi_ps(r2, r3);
    __m512 t4 = _mm512_unpacklo_ps(r4, r5), t5 = _mm512_unpackhi_ps(r4, r5);
    __m512 t6 = _mm512_unpacklo_ps(r6, r7), t7 = _mm512_unpackhi_ps(r6, r7);
    /* per 128-bit lane: u0 holds partial 0 (low half of a head) or 4 (high half) of keys 0-3, u1 partials 1/5,
       u2 2/6, u3 3/7; u4-u7 the same for keys 4-7 */
    __m512 u0 = _mm512_shuffle_ps(t0, t2, 0x44), u1 = _mm512_shuffle_ps(t0, t2, 0xEE);
    __m512 u2 = _mm512_shuffle_ps(t1, t3, 0x44), u3 = _mm512_shuffle_ps(t1, t3, 0xEE);
    __m512 u4 = _mm512_shuffle_ps(t4, t6, 0x44), u5 = _mm512_shuffle_ps(t4, t6, 0xEE);
    __m512 u6 = _mm512_shuffle_ps(t5, t7, 0x44), u7 = _mm512_shuffle_ps(t5, t7, 0xEE);
    const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    const __m512i hi = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    /* c_l: partial l of keys 0-7, head A then head B */
    __m512 c0 = _mm512_permutex2var_ps(u0, lo, u4), c1 = _mm512_permutex2var_ps(u1, lo, u5);
    __m512 c2 = _mm512_permutex2var_ps(u2, lo, u6), c3 = _mm512_permutex2var_ps(u3, lo, u7);
    __m512 c4 = _mm512_permutex2var_ps(u0, hi, u4), c5 = _mm512_permutex2var_ps(u1, hi, u5);
    __m512 c6 = _mm512_permutex2var_ps(u2, hi, u6), c7 = _mm512_permutex2var_ps(u3, hi, u7);
    __m512 s = _mm512_add_ps(_mm512_setzero_ps(), c0);
    s = _mm512_add_ps(s, c1); s = _mm512_add_ps(s, c2); s = _mm512_add_ps(s, c3);
    s = _mm512_add_ps(s, c4); s = _mm512_add_ps(s, c5); s = _mm512_add_ps(s, c6); s = _mm512_add_ps(s, c7);
    return (v16f)s;
}

/* Probabilities of a pair of heads A, B in blocks of sixteen floats: A's values for eight rows, then B's for
   the same rows (the lanes of one dot block). Row i of head A sits at pair_at(i), of head B at pair_at(i) + 8. */
static inline int64_t pair_at(int64_t i) { return (i >> 3) * 16 + (i & 7); }

/* Scaled dots of two heads (qq: per block of eight columns, head A's eight then head B's) with the rows
   rows[0, nv) (padded to a multiple of eight with readable rows), eight rows at a time, into pp (pair blocks);
   mxv: the lane-wise running max of the real rows' dots (head A in lanes 0-7). */
static inline void paged_dots_pair(const float *qq, const float *const *rows, int64_t nv, int64_t D, float scale,
                                   float *pp, v16f &mxv, PagedPrefetch &pf) {
    for (int64_t i0 = 0; i0 < nv; i0 += 8) {
        pf.pump(4);
        v16f acc[8];
        for (int j = 0; j < 8; j++) acc[j] = (v16f){0};
        for (int64_t d = 0; d < D; d += 8) {
            const v16f a = (v16f)_mm512_loadu_ps(qq + 2 * d);
            for (int j = 0; j < 8; j++)
                acc[j] = acc[j] + a * (v16f)_mm512_broadcast_f32x8(_mm256_loadu_ps(rows[i0 + j] + d));
        }
        const v16f dots = lane_sums8_pair(acc) * scale;
        _mm512_storeu_ps(pp + 2 * i0, (__m512)dots);
        const int64_t cnt = nv - i0 < 8 ? nv - i0 : 8;
        const __mmask16 real = (__mmask16)(((1u << cnt) - 1) * 0x0101u);
        /* max(dots, mxv) lane-wise is "dots > mxv ? dots : mxv": the scalar kernel's test */
        mxv = (v16f)_mm512_mask_max_ps((__m512)mxv, real, (__m512)dots, (__m512)mxv);
    }
}

/* s[c] += p[c][pair_at(i)] for i in [i0, i1), C chains side by side (each in its own order) */
template <int C>
static inline void paged_sums(const float *const *p, int64_t i0, int64_t i1, float *s) {
    float t[C];
    for (int c = 0; c < C; c++) t[c] = s[c];
    for (int64_t i = i0; i < i1; i++) {
        const int64_t at = pair_at(i);
        for (int c = 0; c < C; c++) t[c] += p[c][at];
    }
    for (int c = 0; c < C; c++) s[c] = t[c];
}

static inline void paged_sums_n(const float *const *p, int64_t n, int64_t i0, int64_t i1, float *s) {
    switch (n) {
    case 1: paged_sums<1>(p, i0, i1, s); break;
    case 2: paged_sums<2>(p, i0, i1, s); break;
    case 3: paged_sums<3>(p, i0, i1, s); break;
    case 4: paged_sums<4>(p, i0, i1, s); break;
    case 5: paged_sums<5>(p, i0, i1, s); break;
    case 6: paged_sums<6>(p, i0, i1, s); break;
    case 7: paged_sums<7>(p, i0, i1, s); break;
    default: paged_sums<8>(p, i0, i1, s); break;
    }
}

/* o[h * D + c] for NH heads and 16 * NC columns from c0 (the last vector of columns limited to `last`): sum over
   the rows in order of ph[h][pair_at(i)] * rows[i][c], from 0 (the scalar kernel's order per element). */
template <int NH, int NC>
static inline void paged_values(const float *const *rows, int64_t nv, int64_t c0, const float *const *ph,
                                float *o, int64_t D, __mmask16 last) {
    v16f acc[NH][NC];
    for (int h = 0; h < NH; h++)
        for (int c = 0; c < NC; c++) acc[h][c] = (v16f){0};
    for (int64_t i = 0; i < nv; i++) {
        const float *kr = rows[i] + c0;
        const int64_t at = pair_at(i);
        v16f k[NC];
        for (int c = 0; c < NC; c++)
            k[c] = (v16f)(c == NC - 1 ? _mm512_maskz_loadu_ps(last, kr + 16 * c) : _mm512_loadu_ps(kr + 16 * c));
        for (int h = 0; h < NH; h++) {
            const v16f p = (v16f)_mm512_set1_ps(ph[h][at]);
            for (int c = 0; c < NC; c++) acc[h][c] = acc[h][c] + p * k[c];
        }
    }
    for (int h = 0; h < NH; h++)
        for (int c = 0; c < NC; c++) {
            float *dst = o + h * D + c0 + 16 * c;
            if (c == NC - 1) _mm512_mask_storeu_ps(dst, last, (__m512)acc[h][c]);
            else _mm512_storeu_ps(dst, (__m512)acc[h][c]);
        }
}

template <int NC>
static inline void paged_values_heads(const float *const *rows, int64_t nv, int64_t c0, const float *const *ph,
                                      float *o, int64_t D, int64_t nh, __mmask16 last) {
    switch (nh) {
    case 1: paged_values<1, NC>(rows, nv, c0, ph, o, D, last); break;
    case 2: paged_values<2, NC>(rows, nv, c0, ph, o, D, last); break;
    case 3: paged_values<3, NC>(rows, nv, c0, ph, o, D, last); break;
    default: paged_values<4, NC>(rows, nv, c0, ph, o, D, last); break;
    }
}

/* rows[nv..] += the rows ptrs[0, cnt) whose lane of `take` is set (cnt <= 8; ptrs readable for eight);
   returns the new nv. rows needs room for eight past the new nv. */
static inline int64_t take_rows(const float **rows, int64_t nv, const float *const *ptrs, __mmask8 take) {
    const __m512i p = _mm512_loadu_si512((const void *)ptrs);
    _mm512_storeu_si512((void *)(rows + nv), _mm512_maskz_compress_epi64(take, p));
    return nv + __builtin_popcount((unsigned)take);
}

/* visible lanes of the bytes vis[0, cnt), cnt <= 8 (bytes past cnt are not read) */
static inline __mmask8 visible_lanes(const uint8_t *vis, int64_t cnt) {
    const __mmask16 in = (__mmask16)((1u << cnt) - 1);
    const __m128i v = _mm_maskz_loadu_epi8(in, vis);
    return (__mmask8)_mm_test_epi8_mask(v, v);
}

/* One query of the vector path (D a multiple of 8): its rows (padded to a multiple of eight), output and
   scratch w, laid out by paged_layout: the probabilities of head pairs (pstride floats per pair, pair_at
   order), the pair of query rows, mx and the denominators s (hr floats each), the heads' probability rows ph. */
struct PagedJob {
    const float *qb;
    const float *const *rows;
    int64_t nv;
    float *w, *ob;
};

struct PagedLayout {
    float *probs, *qq, *mx, *s;
    const float **ph;
    PagedLayout(float *w, int64_t H, int64_t D, int64_t pstride) {
        const int64_t hr = (H + 15) & ~(int64_t)15;
        probs = w;
        qq = w + (H + 1) / 2 * pstride;
        mx = qq + 2 * D;
        s = mx + hr;
        ph = (const float **)(s + hr);
    }
};

/* Stage 1 of a query: the dots of each head pair (eight rows at a time), the max from the sink, the
   sixteen-lane exps, and each head's denominator started at exp(sink - max). */
static inline void paged_exps(const PagedJob &job, int64_t H, int64_t D, const float *sink, float scale,
                              int64_t pstride, PagedPrefetch &pf) {
    PagedLayout L(job.w, H, D, pstride);
    for (int64_t h = 0; h < H; h++) L.ph[h] = L.probs + (h / 2) * pstride + 8 * (h % 2);
    for (int64_t h = 0; h < H; h += 2) {
        /* an odd last head pairs with itself */
        const bool two = h + 1 < H;
        const float *qa = job.qb + h * D, *qc = two ? qa + D : qa;
        for (int64_t d = 0; d < D; d += 8) {
            const __m512 both = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(qa + d)),
                                                   _mm256_loadu_ps(qc + d), 1);
            _mm512_storeu_ps(L.qq + 2 * d, both);
        }
        v16f mxv = (v16f){0} - INFINITY;
        float *pp = L.probs + (h / 2) * pstride;
        paged_dots_pair(L.qq, job.rows, job.nv, D, scale, pp, mxv, pf);
        for (int64_t e = 0; e < 2 && h + e < H; e++) {
            float m = sink[h + e];
            for (int l = 0; l < 8; l++)
                if (mxv[8 * e + l] > m) m = mxv[8 * e + l];
            L.mx[h + e] = m;
        }
        const v16f m = (v16f)_mm512_insertf32x8(_mm512_set1_ps(L.mx[h]), _mm256_set1_ps(L.mx[two ? h + 1 : h]), 1);
        for (int64_t i0 = 0; i0 < job.nv; i0 += 8) {
            v16f v;
            memcpy(&v, pp + 2 * i0, sizeof(v));
            v = vexp16(v - m);
            memcpy(pp + 2 * i0, &v, sizeof(v));
        }
        v8f t = {0};
        t[0] = sink[h] - L.mx[h];
        if (two) t[1] = sink[h + 1] - L.mx[h + 1];
        const v8f es = vexp8(t);
        L.s[h] = es[0];
        if (two) L.s[h + 1] = es[1];
    }
}

/* Stage 2: the denominators, each head's exps added in row order. Two queries' heads run side by side when
   they fit in eight chains (a chain of additions alone waits on each addition's latency). */
static inline void paged_denominators(int64_t H, int64_t D, int64_t pstride, const PagedJob &j1, const PagedJob *j2) {
    PagedLayout L1(j1.w, H, D, pstride);
    if (j2 && 2 * H <= 8) {
        PagedLayout L2(j2->w, H, D, pstride);
        const float *p[8];
        float s[8];
        for (int64_t h = 0; h < H; h++) {
            p[h] = L1.ph[h], p[H + h] = L2.ph[h];
            s[h] = L1.s[h], s[H + h] = L2.s[h];
        }
        const int64_t both = j1.nv < j2->nv ? j1.nv : j2->nv;
        paged_sums_n(p, 2 * H, 0, both, s);
        paged_sums_n(p, H, both, j1.nv, s);
        paged_sums_n(p + H, H, both, j2->nv, s + H);
        for (int64_t h = 0; h < H; h++) L1.s[h] = s[h], L2.s[h] = s[H + h];
        return;
    }
    for (const PagedJob *j : {&j1, j2}) {
        if (!j) continue;
        PagedLayout L(j->w, H, D, pstride);
        for (int64_t h0 = 0; h0 < H; h0 += 8) paged_sums_n(L.ph + h0, H - h0 < 8 ? H - h0 : 8, 0, j->nv, L.s + h0);
    }
}

/* Stage 3: the probabilities times 1 / denominator, then the values of up to four heads x 32 columns in
   registers over the rows in order. */
static inline void paged_values_all(const PagedJob &job, int64_t H, int64_t D, int64_t pstride) {
    PagedLayout L(job.w, H, D, pstride);
    for (int64_t h = 0; h < H; h += 2) {
        const bool two = h + 1 < H;
        const float inv0 = 1.0f / L.s[h], inv1 = two ? 1.0f / L.s[h + 1] : inv0;
        const v16f r = (v16f)_mm512_insertf32x8(_mm512_set1_ps(inv0), _mm256_set1_ps(inv1), 1);
        float *pp = L.probs + (h / 2) * pstride;
        for (int64_t i0 = 0; i0 < job.nv; i0 += 8) {
            v16f v;
            memcpy(&v, pp + 2 * i0, sizeof(v));
            v = v * r;
            memcpy(pp + 2 * i0, &v, sizeof(v));
        }
    }
    for (int64_t c0 = 0; c0 < D; c0 += 32) {
        const int64_t rem = D - c0;
        for (int64_t h0 = 0; h0 < H; h0 += 4) {
            const int64_t nh = H - h0 < 4 ? H - h0 : 4;
            float *o = job.ob + h0 * D;
            if (rem > 16)
                paged_values_heads<2>(job.rows, job.nv, c0, L.ph + h0, o, D, nh,
                                      rem >= 32 ? (__mmask16)0xFFFF : (__mmask16)((1u << (rem - 16)) - 1));
            else
                paged_values_heads<1>(job.rows, job.nv, c0, L.ph + h0, o, D, nh,
                                      rem >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << rem) - 1));
        }
    }
}
#endif

#if defined(__AVX__) && !defined(DK_ATTENTION_AVX512)
/* One query, D a multiple of 8, on AVX without AVX-512: the arithmetic of paged_query_plain with eight rows'
   dots at a time per head (lane_sums8) and each head's value sums over 32 columns in four registers. probs:
   [H, stride] (stride >= nv), mx / sum: H floats each. */
static inline void paged_query_lanes8(const float *qb, const float *const *rows, int64_t nv, int64_t H, int64_t D,
                                      const float *sink, float scale, int64_t stride, float *probs, float *mx,
                                      float *sum, float *ob) {
    for (int64_t h = 0; h < H; h++) mx[h] = sink[h];
    int64_t i0 = 0;
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
            memcpy(probs + h * stride + i0, &dots, sizeof(dots));
            for (int j = 0; j < 8; j++)
                if (dots[j] > mx[h]) mx[h] = dots[j];
        }
    }
    for (int64_t i = i0; i < nv; i++)
        for (int64_t h = 0; h < H; h++) {
            const float dot = dot_row(qb + h * D, rows[i], D) * scale;
            probs[h * stride + i] = dot;
            if (dot > mx[h]) mx[h] = dot;
        }
    for (int64_t h = 0; h < H; h++) {
        float s = sexp(sink[h] - mx[h]);
        float *ph = probs + h * stride;
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
        for (int64_t d = 0; d < D; d++) ob[h * D + d] = 0.0f;
    }
    int64_t d0 = 0;
    for (; d0 + 32 <= D; d0 += 32)
        for (int64_t h = 0; h < H; h++) {
            const float *ph = probs + h * stride;
            const float inv = sum[h];
            v8f o0 = {0}, o1 = {0}, o2 = {0}, o3 = {0};
            for (int64_t i = 0; i < nv; i++) {
                const float *kr = rows[i] + d0;
                const float p = ph[i] * inv;
                v8f k0, k1, k2, k3;
                memcpy(&k0, kr, sizeof(k0));
                memcpy(&k1, kr + 8, sizeof(k1));
                memcpy(&k2, kr + 16, sizeof(k2));
                memcpy(&k3, kr + 24, sizeof(k3));
                o0 = o0 + p * k0;
                o1 = o1 + p * k1;
                o2 = o2 + p * k2;
                o3 = o3 + p * k3;
            }
            float *o = ob + h * D + d0;
            memcpy(o, &o0, sizeof(o0));
            memcpy(o + 8, &o1, sizeof(o1));
            memcpy(o + 16, &o2, sizeof(o2));
            memcpy(o + 24, &o3, sizeof(o3));
        }
    if (d0 < D)
        for (int64_t i = 0; i < nv; i++)
            for (int64_t h = 0; h < H; h++) {
                const float p = probs[h * stride + i] * sum[h];
                float *o = ob + h * D;
                for (int64_t d = d0; d < D; d++) o[d] += p * rows[i][d];
            }
}
#endif

/* Scratch of sink_attention_paged: floats and row pointers for H heads, K = Kw + N keys, width D. */
static inline int64_t paged_query_floats(int64_t H, int64_t K, int64_t D) {
    const int64_t pstride = 2 * ((K + 7) & ~(int64_t)7);
    return (H + 1) / 2 * pstride + 2 * D + 4 * ((H + 15) & ~(int64_t)15) + 32;
}
static inline int64_t paged_scratch_floats(int64_t H, int64_t K, int64_t D) {
    /* two queries in flight on the vector path */
    return 2 * paged_query_floats(H, K, D);
}
static inline int64_t paged_scratch_ptrs(int64_t K) { return 4 * K + 48; }

/* Attention with a sink logit reading its keys straight from the paged pools.
   q: [B, Tq, H, D]; keys of sequence b: the window rows kv_pool[key_slots[b, :Kw]] (visible per query where
   win_vis[b, tq, k]), then, when ent_pool is given, the compressed entries ent_pool[ent_slots[b, :N]], visible
   where ent_vis[b, tq, n] (ent_vis given) or n < threshold[b, tq]. Bit for bit the arithmetic of
   sink_attention over the concatenated keys: every output element sees the same float operations in the same
   order; only the blocking of independent outputs differs. w / ptrs: paged_scratch_floats / _ptrs entries.
   out: [B, Tq, H, D]. */
static inline void sink_attention_paged(const float *q, int64_t B, int64_t Tq, int64_t H, int64_t D, const float *kv_pool,
                          const int64_t *key_slots, int64_t Kw, const uint8_t *win_vis, const float *ent_pool,
                          const int64_t *ent_slots, int64_t N, const uint8_t *ent_vis, const int64_t *threshold,
                          const float *sink, float scale, float *w, const float **ptrs, float *out) {
    if (!ent_pool) N = 0;
    const int64_t K = Kw + N;
    /* ptrs: the sequence's key rows (window, then entries; eight spare), the next sequence's, then the visible
       ones of a query (two buffers: two queries are in flight on the vector path) */
    const float **krow = ptrs, **knext = ptrs + K + 8;
    PagedPrefetch pf;
    pf.D = D;
    int slot = 0;
#if defined(DK_ATTENTION_AVX512)
    const int64_t pstride = 2 * ((K + 7) & ~(int64_t)7), qfloats = paged_query_floats(H, K, D);
    PagedJob held = {};
    bool holding = false;
#endif
    for (int64_t b = 0; b < B; b++) {
        for (int64_t k = 0; k < Kw; k++) krow[k] = kv_pool + key_slots[b * Kw + k] * D;
        for (int64_t n = 0; n < N; n++) krow[Kw + n] = ent_pool + ent_slots[b * N + n] * D;
        for (int64_t k = K; k < K + 8; k++) krow[k] = krow[0];
        pf.pump(K);
        if (b + 1 < B) {
            for (int64_t k = 0; k < Kw; k++) knext[k] = kv_pool + key_slots[(b + 1) * Kw + k] * D;
            for (int64_t n = 0; n < N; n++) knext[Kw + n] = ent_pool + ent_slots[(b + 1) * N + n] * D;
            pf.next = knext;
            pf.left = K;
        }
        for (int64_t tq = 0; tq < Tq; tq++) {
            const uint8_t *wv = win_vis + (b * Tq + tq) * Kw;
            const uint8_t *ev = ent_vis ? ent_vis + (b * Tq + tq) * N : 0;
            const int64_t thr = threshold ? threshold[b * Tq + tq] : 0;
            const float *qb = q + (b * Tq + tq) * H * D;
            float *ob = out + (b * Tq + tq) * H * D;
            int64_t nv = 0;
            const float **rows = ptrs + 2 * K + 8 + slot * (K + 16);
#if defined(DK_ATTENTION_AVX512)
            for (int64_t k = 0; k < Kw; k += 8) {
                const int64_t cnt = Kw - k < 8 ? Kw - k : 8;
                nv = take_rows(rows, nv, krow + k, visible_lanes(wv + k, cnt));
            }
            for (int64_t n = 0; n < N; n += 8) {
                const int64_t cnt = N - n < 8 ? N - n : 8;
                __mmask8 take;
                if (ev) take = visible_lanes(ev + n, cnt);
                else {
                    const int64_t below = thr - n < 0 ? 0 : (thr - n < cnt ? thr - n : cnt);
                    take = (__mmask8)((1u << below) - 1);
                }
                nv = take_rows(rows, nv, krow + Kw + n, take);
            }
            if ((D & 7) == 0) {
                if (nv == 0) {
                    memset(ob, 0, (size_t)(H * D) * sizeof(float));
                    continue;
                }
                for (int64_t j = nv; j < ((nv + 7) & ~(int64_t)7); j++) rows[j] = rows[0];
                const PagedJob job = {qb, rows, nv, w + slot * qfloats, ob};
                paged_exps(job, H, D, sink, scale, pstride, pf);
                if (!holding) {
                    /* held until the next query's exps are done: their denominators are added side by side */
                    held = job;
                    holding = true;
                    slot ^= 1;
                    continue;
                }
                paged_denominators(H, D, pstride, held, &job);
                paged_values_all(held, H, D, pstride);
                paged_values_all(job, H, D, pstride);
                holding = false;
                slot ^= 1;
                continue;
            }
#else
            for (int64_t k = 0; k < Kw; k++)
                if (wv[k]) rows[nv++] = krow[k];
            for (int64_t n = 0; n < N; n++)
                if (ev ? ev[n] : n < thr) rows[nv++] = krow[Kw + n];
#if defined(__AVX__)
            if ((D & 7) == 0) {
                const int64_t stride = (K + 7) & ~(int64_t)7, hr = (H + 15) & ~(int64_t)15;
                paged_query_lanes8(qb, rows, nv, H, D, sink, scale, stride, w, w + H * stride,
                                   w + H * stride + hr, ob);
                continue;
            }
#endif
#endif
            paged_query_plain(qb, rows, nv, H, D, sink, scale, w, ob);
        }
    }
#if defined(DK_ATTENTION_AVX512)
    if (holding) {
        paged_denominators(H, D, pstride, held, nullptr);
        paged_values_all(held, H, D, pstride);
    }
#endif
}

// The op's entry points that other ops call (torch types; defined in cpu.cpp). decode_stack composes them,
// so each is declared here, where its op lives, not found by the order of the translation unit.
#include <ATen/ATen.h>
#include <optional>
#include <tuple>
#include <vector>

at::Tensor sink_attention_paged_cpu(const at::Tensor &q, const at::Tensor &kv_pool, const at::Tensor &key_slots,
                                           const at::Tensor &win_visible, const at::Tensor &sink, double scale,
                                           const std::optional<at::Tensor> &entry_pool,
                                           const std::optional<at::Tensor> &entry_slots,
                                           const std::optional<at::Tensor> &entry_visible,
                                           const std::optional<at::Tensor> &threshold);
