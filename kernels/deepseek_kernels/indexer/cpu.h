// Lightning-indexer scores over the paged entry pool (torch-free CPU kernel).
#pragma once
#include "../csrc/lanes.h"

/* Lightning-indexer scores from the paged entry pool: q [B, Tq, Hi, di], w [B, Tq, Hi] (head weights),
   entries ent_pool[ent_slots[b, :N]]; scores [B, Tq, N] = sum over heads of (relu(q . entry) * qscale) *
   (w * wscale), -inf for entries n >= threshold[b, tq]. Each dot is one running sum over d in order.
   Eight entries below the threshold are scored at once, one per lane (their rows transposed into a [di, 8]
   block): every lane does the scalar loop's operations in its order, so the scores are the same bits; the
   eight independent sums replace one long chain of dependent additions. With AVX-512, sixteen entries per pass
   the same way, every entry of a row included. */
static inline void indexer_scores(const float *q, const float *w, int64_t B, int64_t Tq, int64_t Hi, int64_t di,
                    const float *ent_pool, const int64_t *ent_slots, int64_t N, const int64_t *threshold,
                    float qscale, float wscale, float *scores) {
    enum { MAX_DI = 256 };
#if defined(__AVX512F__)
    /* Sixteen entries per pass, one per lane (the last pass of a row masked), every entry of the row: lanes at
       or past the threshold get -inf, the others the one-entry loop's operations in its order. */
    if (di <= MAX_DI) {
        alignas(64) float blk[MAX_DI * 16];
        for (int64_t b = 0; b < B; b++)
            for (int64_t tq = 0; tq < Tq; tq++) {
                const int64_t row = b * Tq + tq, thr = threshold[row];
                float *sr = scores + row * N;
                for (int64_t n0 = 0; n0 < N; n0 += 16) {
                    const int64_t cnt = N - n0 < 16 ? N - n0 : 16;
                    const __mmask16 valid = (__mmask16)(cnt == 16 ? 0xFFFF : (1u << cnt) - 1);
                    const int64_t below = thr <= n0 ? 0 : (thr - n0 < cnt ? thr - n0 : cnt);
                    const __mmask16 live = (__mmask16)(below == 16 ? 0xFFFF : (1u << below) - 1);
                    __m512 sv = _mm512_set1_ps(-INFINITY);
                    if (below) {
                        for (int64_t j = 0; j < below; j++) {
                            const float *kr = ent_pool + ent_slots[b * N + n0 + j] * di;
                            for (int64_t d = 0; d < di; d++) blk[d * 16 + j] = kr[d];
                        }
                        __m512 s = _mm512_setzero_ps();
                        for (int64_t h = 0; h < Hi; h++) {
                            const float *qr = q + (row * Hi + h) * di;
                            __m512 dot = _mm512_setzero_ps();
                            for (int64_t d = 0; d < di; d++)
                                dot = _mm512_add_ps(dot, _mm512_mul_ps(_mm512_set1_ps(qr[d]), _mm512_load_ps(blk + d * 16)));
                            /* relu as above: NaN and -0 give +0 */
                            const __m512 r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(dot, _mm512_setzero_ps(), _CMP_GT_OQ), dot);
                            const __m512 term = _mm512_mul_ps(_mm512_mul_ps(r, _mm512_set1_ps(qscale)),
                                                              _mm512_set1_ps(w[row * Hi + h] * wscale));
                            s = h == 0 ? term : _mm512_add_ps(s, term);
                        }
                        sv = _mm512_mask_mov_ps(sv, live, s);
                    }
                    _mm512_mask_storeu_ps(sr + n0, valid, sv);
                }
            }
        return;
    }
#endif
    v8f block[MAX_DI];
    for (int64_t b = 0; b < B; b++)
        for (int64_t tq = 0; tq < Tq; tq++) {
            const int64_t row = b * Tq + tq, thr = threshold[row];
            float *sr = scores + row * N;
            int64_t n0 = 0;
            if (di <= MAX_DI) {
                for (; n0 + 8 <= N && n0 + 8 <= thr; n0 += 8) {
                    for (int j = 0; j < 8; j++) {
                        const float *kr = ent_pool + ent_slots[b * N + n0 + j] * di;
                        for (int64_t d = 0; d < di; d++) block[d][j] = kr[d];
                    }
                    v8f s = {0};
                    for (int64_t h = 0; h < Hi; h++) {
                        const float *qr = q + (row * Hi + h) * di;
                        v8f dot = {0};
                        for (int64_t d = 0; d < di; d++) dot = dot + qr[d] * block[d];
                        const v8f r = (v8f)((v8i)dot & (dot > 0.0f));  /* relu; NaN and -0 give +0 as above */
                        const v8f term = (r * qscale) * (w[row * Hi + h] * wscale);
                        s = h == 0 ? term : s + term;
                    }
                    memcpy(sr + n0, &s, sizeof(s));
                }
            }
            for (int64_t n = n0; n < N; n++) {
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

// The op's entry points that other ops call (torch types; defined in cpu.cpp). decode_stack composes them,
// so each is declared here, where its op lives, not found by the order of the translation unit.
#include <ATen/ATen.h>
#include <optional>
#include <tuple>
#include <vector>

at::Tensor indexer_select_cpu(const at::Tensor &q, const at::Tensor &weights, const at::Tensor &entry_pool,
                                     const at::Tensor &entry_slots, const at::Tensor &threshold, double qscale,
                                     double wscale, int64_t topk, at::IntArrayRef totals);
