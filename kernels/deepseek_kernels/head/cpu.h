// Greedy head arg-max: blocked float32 scan and the int8-prefiltered exact variant (torch-free CPU kernels).
#pragma once
#include "../csrc/lanes.h"
#include <limits.h>

/* Arg-max over v of dot(h[m], W[v]) for every row m.
   h: [M, K] with M a multiple of 8 (row chunks of HEAD_ROWS); wb: W in blocks, [nblocks, K, 8] (row v = 8*b + lane);
   tail: the last V - 8*nblocks rows of W, plain [rest, K]. */

#define HEAD_ROWS 256
static inline void head_argmax(const float *h, int64_t M, int64_t K, const float *wb, int64_t nblocks, const float *tail,
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
   |wq| <= 127. When K4 == 32 the
   blocks come in pairs instead, [nblocks / 2, 8, 16, 4] (nblocks even: k-group g of blocks 2p and 2p + 1 side
   by side in 64 bytes, the layout of one 512-bit register and of one AMX tile row); q8_group gives the address.
   rowsum: sum over k of each quantised row [nblocks * 8]. w: the float32 weight [V, K].
   Each row of h is rounded to hq in [-QH, QH] at scale s_h (in [-127, 127] on the AMX path, whose products are
   signed x signed); the integer products D[v] = hq . wq[v] are exact, and
   |h . w[v] - s_h * s_w * D[v]| <= err (from the rounding errors of both sides, bounded in double precision), so
   the float32 arg-max lies among the rows with D[v] >= max D - delta, delta covering twice err plus the float32
   rounding of the exact dots. Those candidates (and the V - 8 * nblocks rows after the last block) get the same
   fmaf dot as head_argmax; the largest wins, ties to the lowest ID. out[m] = -1 when a row needs the plain
   kernel (all-zero row, or too many candidates for the buffer). cand, cval: [M, cap] scratch. */
#define QH 31
#define QOFF 32
#define QROWS 64

#if defined(__AMX_INT8__) && defined(__AMX_TILE__) && defined(__linux__)
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#define HEAD_AMX 1
#define AMX_GROUP 8 /* pairs of blocks per threshold check */
/* Whether this thread may use the AMX tiles: Linux hands out the tile state on request (once per process).
   DEEPSEEK_KERNELS_NO_AMX (set when the process starts) keeps the VNNI / AVX2 loops, so tests can run them on
   a machine with AMX. */
static inline int head_amx_ready(void) {
    static int state = -1;
    if (state < 0)
        state = getenv("DEEPSEEK_KERNELS_NO_AMX") == NULL &&
                syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
    return state;
}
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((packed)) head_tile_config;
#endif

/* The 32 bytes of k-group g of block b in wq (see head_argmax_q8 for the two layouts). */
static inline const int8_t *q8_group(const int8_t *wq, int64_t K4, int64_t b, int64_t g) {
    if (K4 == 32) return wq + (b >> 1) * 512 + g * 64 + (b & 1) * 32;
    return wq + b * K4 * 8 + g * 32;
}
static inline void q8_take(int64_t b, const int32_t *lanes, int64_t cap, int32_t *rc, int32_t *rv, int64_t *n,
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

static inline void head_argmax_q8(const float *h, int64_t M, int64_t K, int64_t K4, const int8_t *wq, const int32_t *rowsum,
                    int64_t nblocks, double s_w, double ew, double aw, double wmax, const float *w, int64_t V,
                    int32_t *cand, int32_t *cval, int64_t cap, int64_t *out, float *out_val) {
    static __thread uint8_t hu[QROWS][256] __attribute__((aligned(32)));
#if defined(HEAD_AMX)
    const int amx = K4 == 32 && nblocks >= 4 && head_amx_ready();
    /* (on the stack: thread-local arrays cost an address look-up per access in a shared library) */
    int8_t hs[QROWS][32] __attribute__((aligned(64)));
    int32_t dots[AMX_GROUP][32][16] __attribute__((aligned(64)));
#else
    const int amx = 0;
#endif
    const int qh = amx ? 127 : QH;
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
            const double s_h = hmax / qh;
            double eh = 0.0, qabs = 0.0;
#if defined(HEAD_AMX)
            if (amx) memset(hs[r], 0, 32);
#endif
            for (int64_t k = 0; k < K; k++) {
                double q = nearbyint((double)hr[k] / s_h);
                if (q > qh) q = qh;
                if (q < -qh) q = -qh;
                double e = fabs((double)hr[k] - q * s_h);
                if (e > eh) eh = e;
                qabs += fabs(q);
#if defined(HEAD_AMX)
                if (amx) { hs[r][k] = (int8_t)q; continue; }
#endif
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
        int64_t b_first = 0;
#if defined(HEAD_AMX)
        if (amx) {
            /* AMX, 32 rows of h at a time (two tiles of signed bytes, tiles 0-1): per two pairs of blocks, two B
               tiles (2-3: 8 k-groups x 16 vocabulary rows x 4 bytes) and four tdpbssd into zeroed C tiles (4-7),
               stored into `dots`; signed x signed needs no offset. The rows are checked once per AMX_GROUP pairs
               against their running threshold through the lane-wise maximum over the group, and only a row with a
               hit walks the group's blocks in order through q8_take. The integer dots are exact and a row meets
               the blocks in the same order as in the loops below, so candidates and thresholds are theirs. */
            head_tile_config cfg;
            memset(&cfg, 0, sizeof(cfg));
            cfg.palette = 1;
            for (int t = 0; t < 2; t++) { cfg.rows[t] = 16; cfg.colsb[t] = 32; }
            for (int t = 2; t < 4; t++) { cfg.rows[t] = 8; cfg.colsb[t] = 64; }
            for (int t = 4; t < 8; t++) { cfg.rows[t] = 16; cfg.colsb[t] = 64; }
            _tile_loadconfig(&cfg);
            const int64_t npairs = nblocks / 2 / 2 * 2;  /* an even number of pairs: two per step */
            for (int64_t r0 = 0; r0 < mc; r0 += 32) {
                const int64_t rn = (mc - r0) < 32 ? (mc - r0) : 32;
                _tile_loadd(0, hs[r0], 32);
                if (rn > 16) _tile_loadd(1, hs[r0 + 16], 32);
                for (int64_t p0 = 0; p0 < npairs; p0 += AMX_GROUP) {
                    const int64_t gp = (npairs - p0) < AMX_GROUP ? (npairs - p0) : AMX_GROUP;
                    for (int64_t j = 0; j < gp; j += 2) {
                        _tile_loadd(2, wq + (p0 + j) * 512, 64);
                        _tile_loadd(3, wq + (p0 + j + 1) * 512, 64);
                        _tile_zero(4);
                        _tile_zero(5);
                        _tile_dpbssd(4, 0, 2);
                        _tile_dpbssd(5, 0, 3);
                        _tile_stored(4, dots[j][0], 64);
                        _tile_stored(5, dots[j + 1][0], 64);
                        if (rn > 16) {
                            _tile_zero(6);
                            _tile_zero(7);
                            _tile_dpbssd(6, 1, 2);
                            _tile_dpbssd(7, 1, 3);
                            _tile_stored(6, dots[j][16], 64);
                            _tile_stored(7, dots[j + 1][16], 64);
                        }
                    }
                    for (int64_t i = 0; i < rn; i++) {
                        const int64_t r = r0 + i;
                        __m512i mx = _mm512_load_si512((const void *)dots[0][i]);
                        for (int64_t j = 1; j < gp; j++)
                            mx = _mm512_max_epi32(mx, _mm512_load_si512((const void *)dots[j][i]));
                        if (!_mm512_cmpgt_epi32_mask(mx, _mm512_set1_epi32(thr[r]))) continue;
                        for (int64_t j = 0; j < gp; j++) {
                            const int64_t b = 2 * (p0 + j);
                            const int32_t *lanes = dots[j][i];
                            const __mmask16 hit = _mm512_cmpgt_epi32_mask(_mm512_load_si512((const void *)lanes),
                                                                          _mm512_set1_epi32(thr[r]));
                            if (hit & 0xFF)
                                q8_take(b, lanes, cap, rc + r * cap, rv + r * cap, &n[r], &runmax[r], delta[r],
                                        &thr[r], &dead[r]);
                            if (hit >> 8)
                                q8_take(b + 1, lanes + 8, cap, rc + r * cap, rv + r * cap, &n[r], &runmax[r],
                                        delta[r], &thr[r], &dead[r]);
                        }
                    }
                }
            }
            _tile_release();
            /* an odd last pair: the same exact integers, one block after the other */
            for (int64_t b = 2 * npairs; b < nblocks; b++)
                for (int64_t r = 0; r < mc; r++) {
                    int32_t lanes[8];
                    for (int l = 0; l < 8; l++) {
                        int32_t acc = 0;
                        for (int64_t k = 0; k < 32; k++)
                            acc += (int32_t)hs[r][k] * (int32_t)q8_group(wq, 32, b, k / 4)[l * 4 + (k % 4)];
                        lanes[l] = acc;
                    }
                    q8_take(b, lanes, cap, rc + r * cap, rv + r * cap, &n[r], &runmax[r], delta[r], &thr[r], &dead[r]);
                }
            b_first = nblocks;
        }
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
        if (K4 == 32) {
            /* One pair of blocks per 512-bit register (lanes 0-7: block b, 8-15: block b + 1); vpdpbusd adds four exact
               byte products per lane, so every D[v] equals the maddubs path's. Per row the blocks reach q8_take in
               the same order as below, so the candidates and thresholds are the same too. */
            for (; b_first + 2 <= nblocks; b_first += 2) {
                const int8_t *wp = wq + (b_first >> 1) * 512;  /* the pair: k-group g of both blocks in 64 bytes */
                __m512i wg[8];
                for (int g = 0; g < 8; g++) wg[g] = _mm512_loadu_si512((const void *)(wp + g * 64));
                const __m512i off = _mm512_mullo_epi32(_mm512_loadu_si512((const void *)(rowsum + b_first * 8)),
                                                       _mm512_set1_epi32(QOFF));
                for (int64_t r = 0; r < mc; r++) {
                    const int32_t *x = (const int32_t *)hu[r];
                    __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
                    for (int g = 0; g < 8; g += 2) {
                        a0 = _mm512_dpbusd_epi32(a0, _mm512_set1_epi32(x[g]), wg[g]);
                        a1 = _mm512_dpbusd_epi32(a1, _mm512_set1_epi32(x[g + 1]), wg[g + 1]);
                    }
                    const __m512i dv = _mm512_sub_epi32(_mm512_add_epi32(a0, a1), off);
                    const __mmask16 hit = _mm512_cmpgt_epi32_mask(dv, _mm512_set1_epi32(thr[r]));
                    if (!hit) continue;
                    int32_t lanes[16];
                    _mm512_storeu_si512((void *)lanes, dv);
                    if (hit & 0xFF)
                        q8_take(b_first, lanes, cap, rc + r * cap, rv + r * cap, &n[r], &runmax[r], delta[r], &thr[r],
                                &dead[r]);
                    if (hit >> 8)
                        q8_take(b_first + 1, lanes + 8, cap, rc + r * cap, rv + r * cap, &n[r], &runmax[r], delta[r],
                                &thr[r], &dead[r]);
                }
            }
        }
#endif
        for (int64_t b = b_first; b < nblocks; b++) {
            const int8_t *wb = q8_group(wq, K4, b, 0);
#if defined(__AVX2__)
            const __m256i ones = _mm256_set1_epi16(1);
            const __m256i off = _mm256_mullo_epi32(_mm256_loadu_si256((const __m256i *)(rowsum + b * 8)),
                                                   _mm256_set1_epi32(QOFF));
            if (K4 == 32) {
                /* all eight k-groups in registers; four byte products (hu <= 63, |wq| <= 127) fit in 16 bits */
                __m256i wg[8];
                for (int g = 0; g < 8; g++) wg[g] = _mm256_loadu_si256((const __m256i *)q8_group(wq, K4, b, g));
                for (int64_t r = 0; r < mc; r++) {
                    const int32_t *x = (const int32_t *)hu[r];
                    __m256i s[4];
                    for (int g = 0; g < 4; g++)
                        s[g] = _mm256_madd_epi16(
                            _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(x[2 * g]), wg[2 * g]),
                                             _mm256_maddubs_epi16(_mm256_set1_epi32(x[2 * g + 1]), wg[2 * g + 1])),
                            ones);
                    const __m256i dv = _mm256_sub_epi32(
                        _mm256_add_epi32(_mm256_add_epi32(s[0], s[1]), _mm256_add_epi32(s[2], s[3])), off);
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
                        s += ((int32_t)hu[r][k] - QOFF) * (int32_t)q8_group(wq, K4, b, k / 4)[l * 4 + (k % 4)];
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

