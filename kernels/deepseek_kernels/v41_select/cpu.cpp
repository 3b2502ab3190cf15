// deepseek_kernels::v41_select on the CPU: per row, the reference's candidate mask, candidate blocks and top-k
// mask by selection over one total order (larger value first, NaN above every number, ties to the lower index),
// the order torch.sort(descending=True, stable=True) gives; no arithmetic but the maximum of each block.
#include "../csrc/torch_glue.h"
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>
#include <vector>

namespace {

// Whether entry a ranks before entry b.
inline bool ranks_before(const float *v, int64_t a, int64_t b) {
    const bool an = std::isnan(v[a]), bn = std::isnan(v[b]);
    if (an != bn) return an;
    if (!an && v[a] != v[b]) return v[a] > v[b];
    return a < b;
}

// torch.amax of the block's visible values: -inf when none, NaN when any is NaN.
inline float block_max(const float *v, int64_t lo, int64_t hi) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t i = lo; i < hi; i++) {
        if (std::isnan(v[i])) return v[i];
        if (v[i] > m) m = v[i];
    }
    return m;
}

}  // namespace

static std::tuple<at::Tensor, at::Tensor> v41_select_cpu(const at::Tensor &logits, const at::Tensor &ends, int64_t topk,
                                                         const c10::optional<at::Tensor> &candidates,
                                                         int64_t block_size, int64_t write_blocks) {
    const char *op = "v41_select";
    dk::expect_float(op, "logits", logits);
    dk::expect_dim(op, "logits", logits, 2);
    dk::expect_dtype(op, "ends", ends, at::kLong);
    const int64_t rows = logits.size(0), n = logits.size(1);
    dk::expect(ends.dim() == 1 && ends.size(0) == rows, op, "ends must be [R] with R the rows of logits");
    dk::expect(topk >= 0 && block_size >= 1 && write_blocks >= 0, op,
               "topk and write_blocks must be >= 0 and block_size >= 1");
    const bool reading = candidates.has_value() && candidates->defined();
    at::Tensor cand;
    if (reading) {
        dk::expect_dtype(op, "candidates", *candidates, at::kLong);
        dk::expect(candidates->dim() == 2 && candidates->size(0) == rows, op, "candidates must be [R, C]");
        cand = candidates->contiguous();
    }
    auto lf = dk::f32(logits);
    auto ef = ends.contiguous();
    auto mask = at::zeros({rows, n}, logits.options().dtype(at::kBool));
    auto chosen = at::full({rows, write_blocks}, -1, logits.options().dtype(at::kLong));
    const float *lp = lf.data_ptr<float>();
    const int64_t *ep = ef.data_ptr<int64_t>();
    bool *mp = mask.data_ptr<bool>();
    int64_t *cp = chosen.data_ptr<int64_t>();
    const int64_t nblocks = (n + block_size - 1) / block_size, nc = reading ? cand.size(1) : 0;
    const int64_t *candp = reading ? cand.data_ptr<int64_t>() : nullptr;
    const float ninf = -std::numeric_limits<float>::infinity();
    std::vector<float> v(n), scores(nblocks);
    std::vector<char> keep(nblocks);
    std::vector<int64_t> idx(std::max(n, nblocks));
    for (int64_t r = 0; r < rows; r++) {
        const int64_t end = ep[r];
        std::copy(lp + r * n, lp + (r + 1) * n, v.begin());
        if (reading && n) {
            std::fill(keep.begin(), keep.end(), 0);
            for (int64_t c = 0; c < nc; c++) {
                const int64_t b = candp[r * nc + c];
                if (b >= 0 && b < nblocks) keep[b] = 1;
            }
            for (int64_t i = 0; i < n; i++)
                if (!keep[i / block_size]) v[i] = ninf;
        }
        if (write_blocks > 0 && n) {
            const int64_t visible = std::min(std::max(end, (int64_t)0), n);
            for (int64_t b = 0; b < nblocks; b++)
                scores[b] = block_max(v.data(), b * block_size, std::min(visible, (b + 1) * block_size));
            const int64_t newest = (end - 1) / block_size;  // past the last block when end > n: nothing pinned
            if (end > 0 && newest < nblocks) scores[newest] = std::numeric_limits<float>::infinity();
            const int64_t k = std::min(write_blocks, nblocks);
            std::iota(idx.begin(), idx.begin() + nblocks, (int64_t)0);
            std::partial_sort(idx.begin(), idx.begin() + k, idx.begin() + nblocks,
                              [&](int64_t a, int64_t b) { return ranks_before(scores.data(), a, b); });
            for (int64_t j = 0; j < k; j++) cp[r * write_blocks + j] = scores[idx[j]] != ninf ? idx[j] : -1;
        }
        bool *mrow = mp + r * n;
        if (end <= topk) {  // the row sees at most topk entries: all of them
            for (int64_t i = 0; i < std::min(std::max(end, (int64_t)0), n); i++) mrow[i] = true;
            continue;
        }
        const int64_t k = std::min(topk, n);
        std::iota(idx.begin(), idx.begin() + n, (int64_t)0);
        if (k < n)
            std::nth_element(idx.begin(), idx.begin() + k, idx.begin() + n,
                             [&](int64_t a, int64_t b) { return ranks_before(v.data(), a, b); });
        for (int64_t j = 0; j < k; j++) {
            const int64_t i = idx[j];
            if (v[i] != ninf && i < end) mrow[i] = true;
        }
    }
    return {mask, chosen};
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("v41_select(Tensor logits, Tensor ends, int topk, Tensor? candidates, int block_size, int write_blocks) "
          "-> (Tensor, Tensor)");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("v41_select", &v41_select_cpu); }
