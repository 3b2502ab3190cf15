// Lightning-indexer scores over the paged entry pool (torch-free CPU kernel).
#pragma once
#include "../csrc/lanes.h"

/* Lightning-indexer scores from the paged entry pool: q [B, Tq, Hi, di], w [B, Tq, Hi] (head weights),
   entries ent_pool[ent_slots[b, :N]]; scores [B, Tq, N] = sum over heads of (relu(q . entry) * qscale) *
   (w * wscale), -inf for entries n >= threshold[b, tq]. Each dot is one running sum over d in order.
   Eight entries below the threshold are scored at once, one per lane (their rows transposed into a [di, 8]
   block): every lane does the scalar loop's operations in its order, so the scores are the same bits; the
   eight independent sums replace one long chain of dependent additions. */
static inline void indexer_scores(const float *q, const float *w, int64_t B, int64_t Tq, int64_t Hi, int64_t di,
                    const float *ent_pool, const int64_t *ent_slots, int64_t N, const int64_t *threshold,
                    float qscale, float wscale, float *scores) {
    enum { MAX_DI = 256 };
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
