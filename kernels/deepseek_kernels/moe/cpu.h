// Routing and SwiGLU experts after the stacked up-projection (torch-free CPU kernel).
#pragma once
#include "../csrc/lanes.h"

#include <vector>

/* Mixture of experts after the stacked up-projection, for few experts.
   y: [T, E + 2 * (E + 1) * I]: router logits, then gate inputs of experts 0..E-1 and the shared expert E, then
   their up inputs. down: [E + 1, I, H] (transposed down weights). Routing: score = sqrt(softplus) (score_func 0),
   softmax (1) or sigmoid (2) of the logits; experts from tid2eid[ids[t]] (hash routing, tid2eid [*, topk]) or
   the topk largest score + bias (ties to the lower expert); weights = chosen scores / (their sum + 1e-20) * scale.
   out[t] = sum over the chosen experts in increasing expert order of weight * expert(x), plus the shared expert;
   expert(x) = down^T (silu(min(gate, limit)) * clamp(up, -limit, limit)). Needs 1 <= topk <= E. */
static inline float softplus1(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* Routing of one token from its router logits yt [E]: scores (score_func 0 sqrt(softplus), 1 softmax, 2 sigmoid),
   experts from hash_row [topk] (hash routing) or the topk largest score + bias (ties to the lower expert, chosen
   in decreasing order), weights = chosen scores / (their sum + 1e-20) * scale. score, pick: [E] scratch. */
static inline void route_one(const float *yt, int64_t E, int64_t topk, int score_func, const int64_t *hash_row,
                             const float *bias, float scale, float *score, float *pick, int64_t *chosen, float *wt) {
    if (score_func == 1) {
        float mx = -INFINITY, s = 0.0f;
        for (int64_t e = 0; e < E; e++) if (yt[e] > mx) mx = yt[e];
        for (int64_t e = 0; e < E; e++) { score[e] = expf(yt[e] - mx); s += score[e]; }
        for (int64_t e = 0; e < E; e++) score[e] = score[e] / s;
    } else if (hash_row) { /* only the chosen experts' scores are read */
        for (int64_t j = 0; j < topk; j++) {
            const int64_t e = hash_row[j];
            score[e] = score_func == 0 ? sqrtf(softplus1(yt[e])) : 1.0f / (1.0f + expf(-yt[e]));
        }
    } else {
        for (int64_t e = 0; e < E; e++)
            score[e] = score_func == 0 ? sqrtf(softplus1(yt[e])) : 1.0f / (1.0f + expf(-yt[e]));
    }
    if (hash_row) {
        for (int64_t j = 0; j < topk; j++) chosen[j] = hash_row[j];
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
}

/* acc[j][c] = sum over i < I, in increasing i from +0, of act[j * I + i] * dw[j][i * H + 16 c + (0..15)]: the
   down projections of NJ experts for 16 C columns of one token (NJ * C independent sums in registers). */
template <int NJ, int C>
static inline void moe_down_group(const float *act, int64_t I, const float *const *dw, int64_t H, v16f acc[][2]) {
    for (int j = 0; j < NJ; j++)
        for (int c = 0; c < C; c++) acc[j][c] = (v16f){0};
    for (int64_t i = 0; i < I; i++)
        for (int j = 0; j < NJ; j++) {
            const float a = act[j * I + i];
            const float *r = dw[j] + i * H;
            for (int c = 0; c < C; c++) {
                v16f v;
                memcpy(&v, r + 16 * c, sizeof(v));
                acc[j][c] = acc[j][c] + a * v;
            }
        }
}

/* o[0..16 C) of one token from its experts' activations: expert j's down projection (moe_down_group), times
   wt[j] into o (j = 0: o = d * wt[0]; chosen experts: o = o + d * wt[j]; j = topk, the shared expert: o = o + d),
   in increasing j. dw: each expert's down weights offset to the first column. */
template <int C>
static inline void moe_down_columns(const float *act, int64_t I, const float *const *dw, int64_t H, int64_t topk,
                                    const float *wt, float *o) {
    v16f acc[4][2];
    for (int64_t j0 = 0; j0 <= topk; j0 += 4) {
        const int64_t nj = topk + 1 - j0 < 4 ? topk + 1 - j0 : 4;
        switch (nj) {
            case 1: moe_down_group<1, C>(act + j0 * I, I, dw + j0, H, acc); break;
            case 2: moe_down_group<2, C>(act + j0 * I, I, dw + j0, H, acc); break;
            case 3: moe_down_group<3, C>(act + j0 * I, I, dw + j0, H, acc); break;
            default: moe_down_group<4, C>(act + j0 * I, I, dw + j0, H, acc); break;
        }
        for (int64_t jj = 0; jj < nj; jj++) {
            const int64_t j = j0 + jj;
            for (int c = 0; c < C; c++) {
                v16f v;
                if (j == 0) {
                    v = acc[jj][c] * wt[0];
                } else {
                    memcpy(&v, o + 16 * c, sizeof(v));
                    v = j < topk ? v + acc[jj][c] * wt[j] : v + acc[jj][c];
                }
                memcpy(o + 16 * c, &v, sizeof(v));
            }
        }
    }
}

static inline void moe_experts(const float *y, int64_t T, int64_t E, int64_t I, int64_t H, int64_t topk, int score_func,
                 const int64_t *tid2eid, const int64_t *ids, const float *bias, float scale, float limit,
                 const float *down, float *out) {
    const int64_t width = E + 2 * (E + 1) * I;
    std::vector<float> score_v((size_t)E), pick_v((size_t)E), wt_v((size_t)topk + 1);
    std::vector<int64_t> chosen_v((size_t)topk + 1);
    std::vector<float> act_v((size_t)((topk + 1) * I)), tmp_v((size_t)(I > H ? I : H));
    std::vector<const float *> dw_v((size_t)topk + 1);
    float *score = score_v.data(), *pick = pick_v.data(), *wt = wt_v.data(), *tmp = tmp_v.data();
    int64_t *chosen = chosen_v.data();
    const float **dw = dw_v.data();
    for (int64_t t = 0; t < T; t++) {
        const float *yt = y + t * width;
        route_one(yt, E, topk, score_func, tid2eid ? tid2eid + ids[t] * topk : nullptr, bias, scale, score, pick,
                  chosen, wt);
        /* increasing expert order (stable) */
        for (int64_t j = 1; j < topk; j++)
            for (int64_t i = j; i > 0 && chosen[i - 1] > chosen[i]; i--) {
                int64_t c = chosen[i]; chosen[i] = chosen[i - 1]; chosen[i - 1] = c;
                float f = wt[i]; wt[i] = wt[i - 1]; wt[i - 1] = f;
            }
        /* the SwiGLU activations of the chosen experts and the shared one, in that order */
        for (int64_t j = 0; j <= topk; j++) {
            const int64_t e = j < topk ? chosen[j] : E;
            const float *g = yt + E + e * I, *u = yt + E + (E + 1) * I + e * I;
            float *act = act_v.data() + j * I;
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
            dw[j] = down + e * I * H;
        }
        /* down projections, weighted and summed: sixteen or thirty-two columns at a time in registers, the rest
           one column at a time; each column with the same operations */
        float *o = out + t * H;
        int64_t h0 = 0;
        for (; h0 + 32 <= H; h0 += 32) {
            moe_down_columns<2>(act_v.data(), I, dw, H, topk, wt, o + h0);
            for (int64_t j = 0; j <= topk; j++) dw[j] += 32;
        }
        for (; h0 + 16 <= H; h0 += 16) {
            moe_down_columns<1>(act_v.data(), I, dw, H, topk, wt, o + h0);
            for (int64_t j = 0; j <= topk; j++) dw[j] += 16;
        }
        if (h0 == H) continue;
        for (int64_t j = 0; j <= topk; j++) {
            const float *act = act_v.data() + j * I;
            for (int64_t h = h0; h < H; h++) tmp[h] = 0.0f;
            for (int64_t i = 0; i < I; i++) {
                const float a = act[i];
                const float *dr = dw[j] - h0 + i * H;
                for (int64_t h = h0; h < H; h++) tmp[h] = tmp[h] + a * dr[h];
            }
            if (j == 0) {
                for (int64_t h = h0; h < H; h++) o[h] = tmp[h] * wt[0];
            } else if (j < topk) {
                for (int64_t h = h0; h < H; h++) o[h] = o[h] + tmp[h] * wt[j];
            } else {
                for (int64_t h = h0; h < H; h++) o[h] = o[h] + tmp[h];
            }
        }
    }
}


/* Expert choice and weights for T tokens from their router logits [T, E] (route_one per token); experts [T, topk]
   in the order chosen, weights [T, topk]. scratch: 2 * E floats. */
static inline void moe_route(const float *logits, int64_t T, int64_t E, int64_t topk, int score_func,
                             const int64_t *tid2eid, const int64_t *ids, const float *bias, float scale,
                             int64_t *experts, float *weights, float *scratch) {
    for (int64_t t = 0; t < T; t++)
        route_one(logits + t * E, E, topk, score_func, tid2eid ? tid2eid + ids[t] * topk : nullptr, bias, scale,
                  scratch, scratch + E, experts + t * topk, weights + t * topk);
}

// The op's entry points that other ops call (torch types; defined in cpu.cpp). decode_stack composes them,
// so each is declared here, where its op lives, not found by the order of the translation unit.
#include <ATen/ATen.h>
#include <optional>
#include <tuple>
#include <vector>

at::Tensor moe_dense_experts_cpu(const at::Tensor &y, int64_t n_experts, int64_t inter, int64_t top_k,
                                        c10::string_view score_func, const std::optional<at::Tensor> &tid2eid,
                                        const std::optional<at::Tensor> &input_ids,
                                        const std::optional<at::Tensor> &bias, double scale, double limit,
                                        const at::Tensor &down);
