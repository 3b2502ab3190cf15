// deepseek_kernels::indexer_scores and ::indexer_select on the CPU.
#include "cpu.h"
#include "../csrc/torch_glue.h"

static at::Tensor indexer_scores_cpu(const at::Tensor &q, const at::Tensor &weights, const at::Tensor &entry_pool,
                                     const at::Tensor &entry_slots, const at::Tensor &threshold, double qscale,
                                     double wscale) {
    const char *op = "indexer_scores";
    dk::expect_dim(op, "q", q, 4);
    const int64_t b = q.size(0), tq = q.size(1), hi = q.size(2), di = q.size(3);
    dk::expect(weights.numel() == b * tq * hi, op, "weights must be [B, Tq, Hi]");
    dk::expect_float(op, "entry_pool", entry_pool);
    dk::expect(entry_pool.size(-1) == di, op, "entry_pool rows must have the indexer head width");
    dk::expect_dtype(op, "entry_slots", entry_slots, at::kLong);
    dk::expect(entry_slots.dim() == 2 && entry_slots.size(0) == b, op, "entry_slots must be [B, N]");
    dk::expect_dtype(op, "threshold", threshold, at::kLong);
    dk::expect(threshold.numel() == b * tq, op, "threshold must be [B, Tq]");
    const int64_t n = entry_slots.size(1);
    auto qf = dk::f32(q), wf = dk::f32(weights), es = entry_slots.contiguous(), th = threshold.contiguous();
    at::Tensor pool = entry_pool;
    dk::gather_rows_f32(pool, es);
    auto scores = at::empty({b, tq, n}, qf.options());
    if (scores.numel())
        indexer_scores(qf.data_ptr<float>(), wf.data_ptr<float>(), b, tq, hi, di, pool.data_ptr<float>(),
                       es.data_ptr<int64_t>(), n, th.data_ptr<int64_t>(), (float)qscale, (float)wscale,
                       scores.data_ptr<float>());
    return scores;
}

// The entries each query attends to: the scores above, ranked by at::topk (the reference's own ranking, so its tie
// order) over rows of the reference's length totals[b], kept where below the query's threshold, as a mask.
static at::Tensor indexer_select_cpu(const at::Tensor &q, const at::Tensor &weights, const at::Tensor &entry_pool,
                                     const at::Tensor &entry_slots, const at::Tensor &threshold, double qscale,
                                     double wscale, int64_t topk, at::IntArrayRef totals) {
    const char *op = "indexer_select";
    auto scores = indexer_scores_cpu(q, weights, entry_pool, entry_slots, threshold, qscale, wscale);
    const int64_t b = scores.size(0), tq = scores.size(1), n = scores.size(2);
    dk::expect((int64_t)totals.size() == b, op, "totals must hold one row length per sequence");
    dk::expect(topk >= 1, op, "topk must be positive");
    auto allowed = at::zeros({b, tq, n}, scores.options().dtype(at::kBool));
    if (n == 0 || tq == 0) return allowed;
    bool uniform = true;
    int64_t widest = 0;
    for (int64_t t : totals) {
        dk::expect(t >= 0, op, "totals must not be negative");
        uniform = uniform && t == n;
        widest = std::max(widest, t);
    }
    const int64_t k = std::min(topk, uniform ? n : widest);
    at::Tensor picked;
    if (uniform) {
        picked = std::get<1>(scores.topk(k, -1)).contiguous();
    } else {
        picked = at::full({b, tq, k}, n, scores.options().dtype(at::kLong));
        for (int64_t i = 0; i < b; i++) {
            const int64_t total = totals[i];
            if (!total) continue;
            auto row = scores.select(0, i).narrow(-1, 0, std::min(total, n));
            if (total > n) row = at::constant_pad_nd(row, {0, total - n}, -INFINITY);
            const int64_t ki = std::min(topk, total);
            picked.select(0, i).narrow(-1, 0, ki).copy_(std::get<1>(row.topk(ki, -1)));
        }
    }
    auto th = threshold.contiguous();
    const int64_t *pk = picked.data_ptr<int64_t>(), *thr = th.data_ptr<int64_t>();
    bool *out = allowed.data_ptr<bool>();
    for (int64_t r = 0; r < b * tq; r++)
        for (int64_t j = 0; j < k; j++) {
            const int64_t e = pk[r * k + j];
            if (e < thr[r] && e < n) out[r * n + e] = true;
        }
    return allowed;
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("indexer_scores(Tensor q, Tensor weights, Tensor entry_pool, Tensor entry_slots, Tensor threshold,"
          " float qscale, float wscale) -> Tensor");
    m.def("indexer_select(Tensor q, Tensor weights, Tensor entry_pool, Tensor entry_slots, Tensor threshold,"
          " float qscale, float wscale, int topk, int[] totals) -> Tensor");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) {
    m.impl("indexer_scores", &indexer_scores_cpu);
    m.impl("indexer_select", &indexer_select_cpu);
}
