// deepseek_kernels::decode_stack on the CPU: a decode step's decoder stack in one call.
//
// It builds the step's layout (decode_layout's gather indices, the windows the step closes, the rotary rows of
// the positions and of the closing windows) and calls the CPU implementations of the other ops (hc_step,
// attn_front, compress_windows, indexer_select, sink_attention_paged, attn_back, moe_dense_experts, hc_merge;
// the fused input and expert products through row_linear, so a row's bits never depend on the step's other rows)
// in the order of the reference composition (reference.py: decode_stack_reference; the engine's run_layers
// writes the same order), with the same arguments, so the results are those ops' bits; what it saves is the
// Python between them: per layer about a dozen dispatcher calls, their argument conversions and the glue
// that picks their arguments, and per step the layout's bookkeeping. The entry points it calls are declared in
// their ops' cpu.h; the argument records come from layout.h, written from layout.py (the one table both the
// Python and the C++ side read).
#include "layout.h"
#include "../attention/cpu.h"
#include "../attention_block/cpu.h"
#include "../compressor/cpu.h"
#include "../csrc/torch_glue.h"
#include "../hyper_connection/cpu.h"
#include "../indexer/cpu.h"
#include "../moe/cpu.h"
#include "../row_linear/cpu.h"
#include "../step_layout/cpu.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>


// The entry of a flat per-layer list, which must be given.
static const at::Tensor &required(const std::vector<std::optional<at::Tensor>> &list, int64_t index,
                                  const char *what) {
    const auto &t = list[(size_t)index];
    TORCH_CHECK(t.has_value(), "deepseek_kernels::decode_stack: ", what, " (entry ", index, ") is missing");
    return *t;
}

// What a decode step's layers of one compression rate read: decode_layout's entry rows and thresholds, each
// sequence's ranking length (the indexer's totals), and the windows the step closes (none: w undefined).
struct RateStep {
    at::Tensor entry_slots, threshold, w, window_slots, prior_slots, has_prior, entry_out_slots;
    std::vector<int64_t> totals;
};

// The windows of `rate` a decode step closes, in sequence order: a sequence at position p closes window
// p / rate when p + 1 is a multiple of rate. Their rows (the window's own and the previous window's, clamped
// at 0) as pool slots, whether a previous window exists, and the slot of the row that closes each window.
static void closing_windows(RateStep &out, const int64_t *pos, const int64_t *tab, int64_t b, int64_t width,
                            int64_t block_size, int64_t rate, const at::TensorOptions &opts) {
    std::vector<int64_t> seqs;
    for (int64_t i = 0; i < b; i++)
        if ((pos[i] + 1) / rate > pos[i] / rate) seqs.push_back(i);
    const int64_t nw = (int64_t)seqs.size();
    out.w = at::empty({nw}, opts);
    out.window_slots = at::empty({nw, rate}, opts);
    out.prior_slots = at::empty({nw, rate}, opts);
    out.has_prior = at::empty({nw}, opts.dtype(at::kBool));
    out.entry_out_slots = at::empty({nw}, opts);
    int64_t *w = out.w.data_ptr<int64_t>(), *ws = out.window_slots.data_ptr<int64_t>();
    int64_t *ps = out.prior_slots.data_ptr<int64_t>(), *eo = out.entry_out_slots.data_ptr<int64_t>();
    bool *hp = out.has_prior.data_ptr<bool>();
    for (int64_t i = 0; i < nw; i++) {
        const int64_t s = seqs[(size_t)i];
        auto slot = [&](int64_t row) { return tab[s * width + row / block_size] * block_size + row % block_size; };
        w[i] = pos[s] / rate;
        hp[i] = w[i] > 0;
        for (int64_t k = 0; k < rate; k++) {
            const int64_t row = w[i] * rate + k;
            ws[i * rate + k] = slot(row);
            ps[i * rate + k] = slot(std::max<int64_t>(row - rate, 0));
        }
        eo[i] = ws[i * rate + rate - 1];
    }
}

static at::Tensor decode_stack_cpu(const at::Tensor &streams_in, const at::Tensor &input_ids,
                                   const at::Tensor &positions_in, const at::Tensor &slots,
                                   const at::Tensor &tables_in, const std::optional<at::Tensor> &prompt_lens,
                                   int64_t block_size, int64_t window, at::TensorList rope_tables,
                                   const c10::List<std::optional<at::Tensor>> &weight_list, at::IntArrayRef ints,
                                   at::ArrayRef<double> floats, const c10::List<std::optional<at::Tensor>> &pool_list,
                                   int64_t hc, int64_t iters, double hc_eps, double norm_eps) {
    using namespace decode_stack_layout;
    const char *op = "decode_stack";
    const int64_t layers = (int64_t)ints.size() / INTS;
    dk::expect(layers > 0, op, "at least one layer");
    dk::expect((int64_t)weight_list.size() == layers * WEIGHTS && (int64_t)ints.size() == layers * INTS &&
                   (int64_t)floats.size() == layers * FLOATS && (int64_t)pool_list.size() == layers * POOLS,
               op, "weights, ints, floats and pools must hold one fixed-size record per layer");
    dk::expect_dim(op, "streams", streams_in, 3);
    const int64_t b = streams_in.size(0);
    dk::expect(input_ids.numel() == b && slots.numel() == b && positions_in.numel() == b, op,
               "one token per sequence: input_ids, positions and slots are [B]");
    for (const auto &t : rope_tables)
        dk::expect(t.dim() == 3 && t.size(0) == 3 && t.scalar_type() == at::kFloat && t.is_contiguous(), op,
                   "rope_tables hold float32 [3, n, R] tables (cos, sin, -sin rows)");

    // The step's layout: decode_layout's indices for every compression rate of the layers.
    std::vector<int64_t> rates;
    for (int64_t layer = 0; layer < layers; layer++) {
        const int64_t r = ints[(size_t)(layer * INTS + I_RATE)];
        dk::expect(r >= 0, op, "compression rates are positive (0: none)");
        if (r && std::find(rates.begin(), rates.end(), r) == rates.end()) rates.push_back(r);
    }
    std::sort(rates.begin(), rates.end());
    const std::vector<at::Tensor> found =
        decode_layout_cpu(positions_in, tables_in, prompt_lens, block_size, window, rates);
    const at::Tensor &rank_ends = found[0], &key_slots = found[1], &window_visible = found[2];
    const at::Tensor positions = positions_in.contiguous(), tables = tables_in.contiguous();
    const int64_t *pos = positions.data_ptr<int64_t>(), *tab = tables.data_ptr<int64_t>(),
                  *ends = rank_ends.data_ptr<int64_t>(), *closed = found.back().data_ptr<int64_t>();
    std::vector<RateStep> per_rate(rates.size());
    for (size_t j = 0; j < rates.size(); j++) {
        RateStep &rs = per_rate[j];
        rs.entry_slots = found[3 + 3 * j];
        rs.threshold = found[5 + 3 * j];
        for (int64_t i = 0; i < b; i++) rs.totals.push_back(ends[i] / rates[j]);
        if (closed[j])
            closing_windows(rs, pos, tab, b, tables.size(1), block_size, rates[j], positions.options());
    }
    // Rotary rows: the step's positions per table, and the closing windows' first positions per (table, rate).
    std::vector<at::Tensor> step_rows(rope_tables.size());
    std::vector<std::vector<at::Tensor>> window_rows(rope_tables.size(), std::vector<at::Tensor>(rates.size()));
    auto table_at = [&](int64_t index) -> int64_t {
        dk::expect(index >= 0 && index < (int64_t)rope_tables.size(), op, "a rope table index is out of range");
        return index;
    };
    auto rows_of = [&](int64_t index) -> const at::Tensor & {
        at::Tensor &r = step_rows[(size_t)table_at(index)];
        if (!r.defined()) r = rope_tables[(size_t)index].index_select(1, positions);
        return r;
    };
    auto windows_of = [&](int64_t index, size_t j) -> const at::Tensor & {
        at::Tensor &r = window_rows[(size_t)table_at(index)][j];
        if (!r.defined()) r = rope_tables[(size_t)index].index_select(1, per_rate[j].w * rates[j]);
        return r;
    };

    const std::vector<std::optional<at::Tensor>> weights = weight_list.vec(), pools = pool_list.vec();
    at::Tensor streams = streams_in, post, comb, block;
    for (int64_t layer = 0; layer < layers; layer++) {
        const int64_t w0 = layer * WEIGHTS, p0 = layer * POOLS;
        const int64_t *n = ints.data() + layer * INTS;
        const double *f = floats.data() + layer * FLOATS;
        auto W = [&](int64_t i, const char *what) -> const at::Tensor & { return required(weights, w0 + i, what); };
        auto P = [&](int64_t i, const char *what) -> const at::Tensor & { return required(pools, p0 + i, what); };
        auto maybe_w = [&](int64_t i) -> const std::optional<at::Tensor> & { return weights[(size_t)(w0 + i)]; };

        at::Tensor x;
        std::tie(streams, post, comb, x) =
            hc_step_cpu(streams, block.defined() ? std::optional<at::Tensor>(block) : std::nullopt,
                        post.defined() ? std::optional<at::Tensor>(post) : std::nullopt,
                        comb.defined() ? std::optional<at::Tensor>(comb) : std::nullopt, W(W_HC_ATTN_FN, "hc_attn_fn"),
                        W(W_HC_ATTN_BASE, "hc_attn_base"), W(W_HC_ATTN_SCALE, "hc_attn_scale"), hc, iters, hc_eps,
                        norm_eps, W(W_ATTN_NORM, "attn_norm"), f[F_ATTN_NORM_EPS]);
        const at::Tensor y = row_linear_cpu(x, W(W_FUSED, "fused input weight"));
        const at::Tensor &rope = rows_of(n[I_ROPE]);
        const at::Tensor c = rope[0], s = rope[1], s_inv = rope[2];
        const int64_t rate = n[I_RATE];
        const bool indexed = n[I_HAS_INDEXER] != 0;
        dk::expect(!indexed || rate, op, "an indexer needs its layer's compressor");
        std::vector<at::Tensor> copy_pools;
        if (rate) {
            copy_pools.push_back(P(P_COMP_KV, "comp_kv"));
            copy_pools.push_back(P(P_COMP_GATE, "comp_gate"));
        }
        if (indexed) {
            copy_pools.push_back(P(P_IDX_KV, "idx_kv"));
            copy_pools.push_back(P(P_IDX_GATE, "idx_gate"));
        }
        dk::expect(n[I_COPIES] >= 0 && n[I_COPIES] <= MAX_COPIES, op, "at most four copy offsets");
        const at::IntArrayRef offsets(n + I_COPY_OFFSETS, (size_t)n[I_COPIES]);
        at::Tensor q, qi;
        std::tie(std::ignore, q, qi) =
            attn_front_cpu(y, W(W_Q_NORM, "q_norm"), f[F_Q_EPS], W(W_WQ_B, "wq_b"), n[I_HEADS], n[I_HEAD_DIM],
                           f[F_HEAD_EPS], W(W_KV_NORM, "kv_norm"), f[F_KV_EPS], c, s, slots, P(P_KV, "kv pool"),
                           offsets, copy_pools, maybe_w(W_IDX_WQ_B), n[I_IDX_HEADS], n[I_IDX_DIM]);
        std::optional<at::Tensor> entry_pool, entry_slots, entry_visible, threshold;
        if (rate) {
            const size_t j = (size_t)(std::find(rates.begin(), rates.end(), rate) - rates.begin());
            const RateStep &rs = per_rate[j];
            if (rs.w.defined()) {
                const at::Tensor &cw = windows_of(n[I_COMP_ROPE], j);
                compress_windows_cpu(P(P_ENTRIES, "entries"), P(P_COMP_KV, "comp_kv"), P(P_COMP_GATE, "comp_gate"),
                                     W(W_COMP_APE, "comp_ape"), rs.window_slots, rs.prior_slots, rs.has_prior,
                                     n[I_COMP_OVERLAP] != 0, W(W_COMP_NORM, "comp_norm"), f[F_COMP_EPS], cw[0], cw[1],
                                     rs.entry_out_slots);
            }
            entry_pool = P(P_ENTRIES, "entries");
            entry_slots = rs.entry_slots;
            if (indexed) {
                if (rs.w.defined()) {
                    const at::Tensor &iw = windows_of(n[I_IDX_ROPE], j);
                    compress_windows_cpu(P(P_IDX_ENTRIES, "idx_entries"), P(P_IDX_KV, "idx_kv"),
                                         P(P_IDX_GATE, "idx_gate"), W(W_IDX_APE, "idx_ape"), rs.window_slots,
                                         rs.prior_slots, rs.has_prior, n[I_IDX_OVERLAP] != 0,
                                         W(W_IDX_NORM, "idx_norm"), f[F_IDX_EPS], iw[0], iw[1], rs.entry_out_slots);
                }
                if (rs.entry_slots.size(1) == 0) {
                    entry_visible = at::zeros({b, 1, 0}, streams.options().dtype(at::kBool));
                } else {
                    const int64_t heads = n[I_IDX_HEADS];
                    entry_visible = indexer_select_cpu(
                        qi.view({b, 1, heads, n[I_IDX_DIM]}), y.slice(1, n[I_HW_START], n[I_HW_END]).view({b, 1, heads}),
                        P(P_IDX_ENTRIES, "idx_entries"), rs.entry_slots, rs.threshold, f[F_IDX_QSCALE],
                        f[F_IDX_WSCALE], n[I_TOPK], rs.totals);
                }
            } else {
                threshold = rs.threshold;
            }
        }
        const int64_t heads = n[I_HEADS], dim = n[I_HEAD_DIM];
        const at::Tensor core =
            sink_attention_paged_cpu(q.view({b, 1, heads, dim}), P(P_KV, "kv pool"), key_slots, window_visible,
                                     W(W_SINK, "sink"), f[F_SCALE], entry_pool, entry_slots, entry_visible, threshold);
        block = attn_back_cpu(core.reshape({b, heads, dim}).contiguous(), c, s_inv, W(W_WO_A, "wo_a"), n[I_GROUPS],
                              W(W_WO_B, "wo_b"));
        std::tie(streams, post, comb, x) =
            hc_step_cpu(streams, block, post, comb, W(W_HC_FFN_FN, "hc_ffn_fn"), W(W_HC_FFN_BASE, "hc_ffn_base"),
                        W(W_HC_FFN_SCALE, "hc_ffn_scale"), hc, iters, hc_eps, norm_eps, W(W_FFN_NORM, "ffn_norm"),
                        f[F_FFN_NORM_EPS]);
        const bool hashed = maybe_w(W_TID2EID).has_value();
        dk::expect(n[I_SCORE_FUNC] >= 0 && n[I_SCORE_FUNC] < 3, op, "unknown score function index");
        block = moe_dense_experts_cpu(row_linear_cpu(x, W(W_MOE_UP, "moe_up")), n[I_MOE_EXPERTS], n[I_MOE_INTER],
                                      n[I_MOE_TOPK], SCORE_FUNCS[n[I_SCORE_FUNC]], maybe_w(W_TID2EID),
                                      hashed ? std::optional<at::Tensor>(input_ids) : std::nullopt, maybe_w(W_MOE_BIAS),
                                      f[F_MOE_SCALE], f[F_MOE_LIMIT], W(W_MOE_DOWN, "moe_down"));
    }
    return hc_merge_cpu(streams, block, post, comb);
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("decode_stack(Tensor streams, Tensor input_ids, Tensor positions, Tensor slots, Tensor tables,"
          " Tensor? prompt_lens, int block_size, int window, Tensor[] rope_tables, Tensor?[] weights, int[] ints,"
          " float[] floats, Tensor(a!)?[] pools, int hc, int iters, float hc_eps, float norm_eps) -> Tensor");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("decode_stack", &decode_stack_cpu); }
