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
    dk::expect_slots(op, "entry_slots", es, di ? entry_pool.numel() / di : 0);
    dk::gather_rows_f32(pool, es);
    auto scores = at::empty({b, tq, n}, qf.options());
    if (scores.numel())
        indexer_scores(qf.data_ptr<float>(), wf.data_ptr<float>(), b, tq, hi, di, pool.data_ptr<float>(),
                       es.data_ptr<int64_t>(), n, th.data_ptr<int64_t>(), (float)qscale, (float)wscale,
                       scores.data_ptr<float>());
    return scores;
}

// at::topk's order on a row (largest first, NaN above everything).
static inline bool topk_before(float x, float y) { return (std::isnan(x) && !std::isnan(y)) || x > y; }

// The entries each query attends to: the scores above ranked as at::topk ranks them (the reference's own ranking,
// so its tie order) over rows of the reference's length totals[b], kept where below the query's threshold, as a
// mask. Only the set of the k best matters, and it is plain from the scores unless entries tied with the k-th
// best are partly in it: then which of them at::topk keeps decides, and when one of those could reach the mask
// (below the threshold), the row goes through at::topk itself, as the whole call did before.
at::Tensor indexer_select_cpu(const at::Tensor &q, const at::Tensor &weights, const at::Tensor &entry_pool,
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
    for (int64_t t : totals) {
        dk::expect(t >= 0, op, "totals must not be negative");
        uniform = uniform && t == n;
    }
    auto th = threshold.contiguous();
    const int64_t *thr = th.data_ptr<int64_t>();
    const float *sc = scores.data_ptr<float>();
    bool *out = allowed.data_ptr<bool>();
    std::vector<float> vals;
    for (int64_t i = 0; i < b; i++) {
        const int64_t len = uniform ? n : totals[i];  // the reference's row: cut to len, or -inf past n
        if (!len) continue;
        const int64_t k = std::min(topk, len), real = std::min(len, n);
        for (int64_t j = 0; j < tq; j++) {
            const int64_t row = i * tq + j, lim = std::min(thr[row], real);
            const float *sr = sc + row * n;
            bool *o = out + row * n;
#if defined(__AVX512F__)
            if (len <= 32) {
                // each entry's rank by counting (two registers of 16 entries): those ranked before it and those
                // tied with it, NaN above everything
                const uint32_t valid = len == 32 ? 0xFFFFFFFFu : (1u << len) - 1;
                const uint32_t cut = real == 32 ? 0xFFFFFFFFu : (1u << real) - 1;
                const __m512 ninf = _mm512_set1_ps(-INFINITY);
                const __m512 v0 = _mm512_mask_loadu_ps(ninf, (__mmask16)cut, sr);
                const __m512 v1 = _mm512_mask_loadu_ps(ninf, (__mmask16)(cut >> 16), sr + 16);
                const uint32_t nan = ((uint32_t)_mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) |
                                      (uint32_t)_mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q) << 16) & valid;
                uint32_t picked = 0;
                bool decided = true;
                for (int64_t e = 0; e < lim; e++) {
                    const float x = sr[e];
                    uint32_t before, tied;
                    if (std::isnan(x)) {
                        before = 0;
                        tied = nan;
                    } else {
                        const __m512 xv = _mm512_set1_ps(x);
                        before = (nan | (uint32_t)_mm512_cmp_ps_mask(v0, xv, _CMP_GT_OQ) |
                                  (uint32_t)_mm512_cmp_ps_mask(v1, xv, _CMP_GT_OQ) << 16) & valid;
                        tied = ((uint32_t)_mm512_cmp_ps_mask(v0, xv, _CMP_EQ_OQ) |
                                (uint32_t)_mm512_cmp_ps_mask(v1, xv, _CMP_EQ_OQ) << 16) & valid;
                    }
                    const int a = __builtin_popcount(before), t = __builtin_popcount(tied);
                    if (a + t <= k) picked |= 1u << e;
                    else if (a < k) decided = false;  // a tie at the k-th place that at::topk splits
                }
                if (decided) {
                    for (int64_t e = 0; e < lim; e++) o[e] = picked >> e & 1;
                    continue;
                }
            } else
#endif
            {
                vals.assign(sr, sr + real);
                vals.resize((size_t)len, -INFINITY);
                std::nth_element(vals.begin(), vals.begin() + (k - 1), vals.end(), topk_before);
                const float kth = vals[(size_t)(k - 1)];
                int64_t above = 0, ties = 0, ties_reachable = 0;
                for (int64_t e = 0; e < len; e++) {
                    const float v = e < real ? sr[e] : -INFINITY;
                    if (topk_before(v, kth)) {
                        above++;
                    } else if (!topk_before(kth, v)) {
                        ties++;
                        ties_reachable += e < lim;
                    }
                }
                if (above + ties == k || ties_reachable == 0) {
                    for (int64_t e = 0; e < lim; e++)
                        if (topk_before(sr[e], kth) || (above + ties == k && !topk_before(kth, sr[e]))) o[e] = true;
                    continue;
                }
            }
            at::Tensor r = scores.select(0, i).select(0, j).narrow(-1, 0, real);
            if (len > n) r = at::constant_pad_nd(r, {0, len - n}, -INFINITY);
            auto picked = std::get<1>(r.topk(k, -1)).contiguous();
            const int64_t *pk = picked.data_ptr<int64_t>();
            for (int64_t x = 0; x < k; x++)
                if (pk[x] < lim) o[pk[x]] = true;
        }
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
