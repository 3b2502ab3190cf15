// Lightning-indexer scores over the paged entry pool (torch-free CPU kernel).
#pragma once
#include "../csrc/lanes.h"

/* Lightning-indexer scores from the paged entry pool: q [B, Tq, Hi, di], w [B, Tq, Hi] (head weights),
   entries ent_pool[ent_slots[b, :N]]; scores [B, Tq, N] = sum over heads of (relu(q . entry) * qscale) *
   (w * wscale), -inf for entries n >= threshold[b, tq]. */
static inline void indexer_scores(const float *q, const float *w, int64_t B, int64_t Tq, int64_t Hi, int64_t di,
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

