// deepseek_kernels::indexer_scores on the CPU.
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

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("indexer_scores(Tensor q, Tensor weights, Tensor entry_pool, Tensor entry_slots, Tensor threshold,"
          " float qscale, float wscale) -> Tensor");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("indexer_scores", &indexer_scores_cpu); }
