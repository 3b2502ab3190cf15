// deepseek_kernels::decode_stack on the CPU: a decode step's decoder stack in one call.
//
// It calls the CPU implementations of the other ops (hc_step, attn_front, compress_windows, indexer_select,
// sink_attention_paged, attn_back, moe_dense_experts, hc_merge) in the order of the reference composition
// (reference.py: decode_stack_reference through stack_layers, which the engine's layer loop runs too), with the
// same arguments, so the results are those ops' bits; what it saves is the Python
// between them: per layer about a dozen dispatcher calls, their argument conversions and the glue that picks
// their arguments. setup.py compiles this file after the ops it calls (one translation unit).
#include "../csrc/torch_glue.h"

#include <optional>
#include <string>
#include <vector>

namespace decode_stack_layout {
// The positions of reference.py (tests/kernels/test_decode_stack.py checks that both sides agree).
enum Weight {
    W_HC_ATTN_FN, W_HC_ATTN_BASE, W_HC_ATTN_SCALE, W_ATTN_NORM, W_HC_FFN_FN, W_HC_FFN_BASE, W_HC_FFN_SCALE,
    W_FFN_NORM, W_FUSED, W_Q_NORM, W_WQ_B, W_KV_NORM, W_IDX_WQ_B, W_COMP_APE, W_COMP_NORM, W_IDX_APE, W_IDX_NORM,
    W_SINK, W_WO_A, W_WO_B, W_MOE_UP, W_MOE_DOWN, W_TID2EID, W_MOE_BIAS, WEIGHTS
};
enum Int {
    I_HEADS, I_HEAD_DIM, I_IDX_HEADS, I_IDX_DIM, I_GROUPS, I_RATE, I_HAS_INDEXER, I_HW_START, I_HW_END, I_TOPK,
    I_COMP_OVERLAP, I_IDX_OVERLAP, I_MOE_EXPERTS, I_MOE_INTER, I_MOE_TOPK, I_SCORE_FUNC, I_COPIES, I_COPY_OFFSETS
};
constexpr int64_t MAX_COPIES = 4, INTS = I_COPY_OFFSETS + MAX_COPIES;
enum Float {
    F_ATTN_NORM_EPS, F_FFN_NORM_EPS, F_Q_EPS, F_HEAD_EPS, F_KV_EPS, F_SCALE, F_COMP_EPS, F_IDX_EPS, F_IDX_QSCALE,
    F_IDX_WSCALE, F_MOE_SCALE, F_MOE_LIMIT, FLOATS
};
enum Step {
    S_COS, S_SIN, S_COS_INV, S_SIN_INV, S_ENTRY_SLOTS, S_THRESHOLD, S_WINDOW_SLOTS, S_PRIOR_SLOTS, S_HAS_PRIOR,
    S_ENTRY_OUT_SLOTS, S_COMP_COS, S_COMP_SIN, S_IDX_COS, S_IDX_SIN, S_KV, S_COMP_KV, S_COMP_GATE, S_ENTRIES,
    S_IDX_KV, S_IDX_GATE, S_IDX_ENTRIES, STEP
};
// I_SCORE_FUNC: an index into this table (moe_dense_experts takes the name)
constexpr const char *SCORE_FUNCS[] = {"sqrtsoftplus", "softmax", "sigmoid"};
}  // namespace decode_stack_layout

// The entry of a flat per-layer list, which must be given.
static const at::Tensor &required(const std::vector<std::optional<at::Tensor>> &list, int64_t index,
                                  const char *what) {
    const auto &t = list[(size_t)index];
    TORCH_CHECK(t.has_value(), "deepseek_kernels::decode_stack: ", what, " (entry ", index, ") is missing");
    return *t;
}

static at::Tensor decode_stack_cpu(const at::Tensor &streams_in, const at::Tensor &input_ids, const at::Tensor &slots,
                                   const at::Tensor &key_slots, const at::Tensor &window_visible,
                                   const c10::List<std::optional<at::Tensor>> &weight_list, at::IntArrayRef ints,
                                   at::ArrayRef<double> floats,
                                   const c10::List<std::optional<at::Tensor>> &step_list, at::IntArrayRef totals,
                                   int64_t hc, int64_t iters, double hc_eps, double norm_eps) {
    using namespace decode_stack_layout;
    const char *op = "decode_stack";
    const int64_t layers = (int64_t)ints.size() / INTS;
    dk::expect(layers > 0, op, "at least one layer");
    dk::expect((int64_t)weight_list.size() == layers * WEIGHTS && (int64_t)ints.size() == layers * INTS &&
                   (int64_t)floats.size() == layers * FLOATS && (int64_t)step_list.size() == layers * STEP,
               op, "weights, ints, floats and step must hold one fixed-size record per layer");
    dk::expect_dim(op, "streams", streams_in, 3);
    const int64_t b = streams_in.size(0);
    dk::expect(input_ids.numel() == b && slots.numel() == b, op, "one token per sequence: input_ids and slots are [B]");
    const std::vector<std::optional<at::Tensor>> weights = weight_list.vec(), step = step_list.vec();
    at::Tensor streams = streams_in, post, comb, block;
    int64_t used = 0;  // entries of totals read so far
    for (int64_t layer = 0; layer < layers; layer++) {
        const int64_t w0 = layer * WEIGHTS, s0 = layer * STEP;
        const int64_t *n = ints.data() + layer * INTS;
        const double *f = floats.data() + layer * FLOATS;
        auto W = [&](int64_t i, const char *what) -> const at::Tensor & { return required(weights, w0 + i, what); };
        auto S = [&](int64_t i, const char *what) -> const at::Tensor & { return required(step, s0 + i, what); };
        auto maybe_w = [&](int64_t i) -> const std::optional<at::Tensor> & { return weights[(size_t)(w0 + i)]; };
        auto has_s = [&](int64_t i) { return step[(size_t)(s0 + i)].has_value(); };

        at::Tensor x;
        std::tie(streams, post, comb, x) =
            hc_step_cpu(streams, block.defined() ? std::optional<at::Tensor>(block) : std::nullopt,
                        post.defined() ? std::optional<at::Tensor>(post) : std::nullopt,
                        comb.defined() ? std::optional<at::Tensor>(comb) : std::nullopt, W(W_HC_ATTN_FN, "hc_attn_fn"),
                        W(W_HC_ATTN_BASE, "hc_attn_base"), W(W_HC_ATTN_SCALE, "hc_attn_scale"), hc, iters, hc_eps,
                        norm_eps, W(W_ATTN_NORM, "attn_norm"), f[F_ATTN_NORM_EPS]);
        const at::Tensor y = at::linear(x, W(W_FUSED, "fused input weight"));
        const int64_t rate = n[I_RATE];
        const bool indexed = n[I_HAS_INDEXER] != 0;
        std::vector<at::Tensor> copy_pools;
        if (rate) {
            copy_pools.push_back(S(S_COMP_KV, "comp_kv"));
            copy_pools.push_back(S(S_COMP_GATE, "comp_gate"));
        }
        if (indexed) {
            copy_pools.push_back(S(S_IDX_KV, "idx_kv"));
            copy_pools.push_back(S(S_IDX_GATE, "idx_gate"));
        }
        dk::expect(n[I_COPIES] >= 0 && n[I_COPIES] <= MAX_COPIES, op, "at most four copy offsets");
        const at::IntArrayRef offsets(n + I_COPY_OFFSETS, (size_t)n[I_COPIES]);
        at::Tensor q, qi;
        std::tie(std::ignore, q, qi) =
            attn_front_cpu(y, W(W_Q_NORM, "q_norm"), f[F_Q_EPS], W(W_WQ_B, "wq_b"), n[I_HEADS], n[I_HEAD_DIM],
                           f[F_HEAD_EPS], W(W_KV_NORM, "kv_norm"), f[F_KV_EPS], S(S_COS, "cos"), S(S_SIN, "sin"),
                           slots, S(S_KV, "kv pool"), offsets, copy_pools, maybe_w(W_IDX_WQ_B), n[I_IDX_HEADS],
                           n[I_IDX_DIM]);
        std::optional<at::Tensor> entry_pool, entry_slots, entry_visible, threshold;
        if (rate) {
            const bool closing = has_s(S_WINDOW_SLOTS);
            if (closing)
                compress_windows_cpu(S(S_ENTRIES, "entries"), S(S_COMP_KV, "comp_kv"), S(S_COMP_GATE, "comp_gate"),
                                     W(W_COMP_APE, "comp_ape"), S(S_WINDOW_SLOTS, "window_slots"),
                                     S(S_PRIOR_SLOTS, "prior_slots"), S(S_HAS_PRIOR, "has_prior"),
                                     n[I_COMP_OVERLAP] != 0, W(W_COMP_NORM, "comp_norm"), f[F_COMP_EPS],
                                     S(S_COMP_COS, "comp_cos"), S(S_COMP_SIN, "comp_sin"),
                                     S(S_ENTRY_OUT_SLOTS, "entry_out_slots"));
            entry_pool = S(S_ENTRIES, "entries");
            entry_slots = S(S_ENTRY_SLOTS, "entry_slots");
            if (indexed) {
                if (closing)
                    compress_windows_cpu(S(S_IDX_ENTRIES, "idx_entries"), S(S_IDX_KV, "idx_kv"),
                                         S(S_IDX_GATE, "idx_gate"), W(W_IDX_APE, "idx_ape"),
                                         S(S_WINDOW_SLOTS, "window_slots"), S(S_PRIOR_SLOTS, "prior_slots"),
                                         S(S_HAS_PRIOR, "has_prior"), n[I_IDX_OVERLAP] != 0, W(W_IDX_NORM, "idx_norm"),
                                         f[F_IDX_EPS], S(S_IDX_COS, "idx_cos"), S(S_IDX_SIN, "idx_sin"),
                                         S(S_ENTRY_OUT_SLOTS, "entry_out_slots"));
                dk::expect(used + b <= (int64_t)totals.size(), op, "totals must hold B entries per indexed layer");
                const at::IntArrayRef row_lengths = totals.slice((size_t)used, (size_t)b);
                used += b;
                if (entry_slots->size(1) == 0) {
                    entry_visible = at::zeros({b, 1, 0}, streams.options().dtype(at::kBool));
                } else {
                    const int64_t heads = n[I_IDX_HEADS];
                    entry_visible = indexer_select_cpu(
                        qi.view({b, 1, heads, n[I_IDX_DIM]}), y.slice(1, n[I_HW_START], n[I_HW_END]).view({b, 1, heads}),
                        S(S_IDX_ENTRIES, "idx_entries"), *entry_slots, S(S_THRESHOLD, "threshold"), f[F_IDX_QSCALE],
                        f[F_IDX_WSCALE], n[I_TOPK], row_lengths);
                }
            } else {
                threshold = S(S_THRESHOLD, "threshold");
            }
        }
        const int64_t heads = n[I_HEADS], dim = n[I_HEAD_DIM];
        const at::Tensor core =
            sink_attention_paged_cpu(q.view({b, 1, heads, dim}), S(S_KV, "kv pool"), key_slots, window_visible,
                                     W(W_SINK, "sink"), f[F_SCALE], entry_pool, entry_slots, entry_visible, threshold);
        block = attn_back_cpu(core.reshape({b, heads, dim}).contiguous(), S(S_COS_INV, "cos_inv"),
                              S(S_SIN_INV, "sin_inv"), W(W_WO_A, "wo_a"), n[I_GROUPS], W(W_WO_B, "wo_b"));
        std::tie(streams, post, comb, x) =
            hc_step_cpu(streams, block, post, comb, W(W_HC_FFN_FN, "hc_ffn_fn"), W(W_HC_FFN_BASE, "hc_ffn_base"),
                        W(W_HC_FFN_SCALE, "hc_ffn_scale"), hc, iters, hc_eps, norm_eps, W(W_FFN_NORM, "ffn_norm"),
                        f[F_FFN_NORM_EPS]);
        const bool hashed = maybe_w(W_TID2EID).has_value();
        dk::expect(n[I_SCORE_FUNC] >= 0 && n[I_SCORE_FUNC] < 3, op, "unknown score function index");
        block = moe_dense_experts_cpu(at::linear(x, W(W_MOE_UP, "moe_up")), n[I_MOE_EXPERTS], n[I_MOE_INTER],
                                      n[I_MOE_TOPK], SCORE_FUNCS[n[I_SCORE_FUNC]], maybe_w(W_TID2EID),
                                      hashed ? std::optional<at::Tensor>(input_ids) : std::nullopt, maybe_w(W_MOE_BIAS),
                                      f[F_MOE_SCALE], f[F_MOE_LIMIT], W(W_MOE_DOWN, "moe_down"));
    }
    dk::expect(used == (int64_t)totals.size(), op, "totals must hold B entries per indexed layer, and no more");
    return hc_merge_cpu(streams, block, post, comb);
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("decode_stack(Tensor streams, Tensor input_ids, Tensor slots, Tensor key_slots, Tensor window_visible,"
          " Tensor?[] weights, int[] ints, float[] floats, Tensor(a!)?[] step, int[] totals, int hc, int iters,"
          " float hc_eps, float norm_eps) -> Tensor");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("decode_stack", &decode_stack_cpu); }
