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


/* Attention with a sink logit reading its keys straight from the paged pools.
   q: [B, Tq, H, D]; keys of sequence b: the window rows kv_pool[key_slots[b, :Kw]] (visible per query where
   win_vis[b, tq, k]), then, when ent_pool is given, the compressed entries ent_pool[ent_slots[b, :N]], visible
   where ent_vis[b, tq, n] (ent_vis given) or n < threshold[b, tq]. Same arithmetic as sink_attention over the
   concatenated keys. probs: scratch of H * K + 2 * K + 2 floats (K = Kw + N). out: [B, Tq, H, D]. */
static inline void sink_attention_paged(const float *q, int64_t B, int64_t Tq, int64_t H, int64_t D, const float *kv_pool,
                          const int64_t *key_slots, int64_t Kw, const uint8_t *win_vis, const float *ent_pool,
                          const int64_t *ent_slots, int64_t N, const uint8_t *ent_vis, const int64_t *threshold,
                          const float *sink, float scale, float *probs, float *out) {
    /* All heads of a query against each key in turn (one shared key/value head): the same per-head
       arithmetic as sink_attention, with every key row read once per query. probs: [H, K] scratch. */
    const int64_t K = Kw + (ent_pool ? N : 0);
    const float **rows = (const float **)(probs + ((H * K + 1) & ~(int64_t)1));
    std::vector<float> mx((size_t)H), sum((size_t)H);
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
            int64_t d0 = 0;
            /* per head, 32 output columns in four registers over all keys in order: each output element gets the
               same products added in the same order as in the loop below */
            for (; d0 + 32 <= D; d0 += 32)
                for (int64_t h = 0; h < H; h++) {
                    const float *ph = probs + h * K;
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
                for (int64_t i = 0; i < nv; i++) {
                    const float *kr = rows[i];
                    for (int64_t h = 0; h < H; h++) {
                        const float p = probs[h * K + i] * sum[h];
                        float *o = ob + h * D;
                        for (int64_t d = d0; d < D; d++) o[d] += p * kr[d];
                    }
                }
        }
    }
}

