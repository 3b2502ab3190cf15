// deepseek_kernels::decode_layout on the CPU: a decode step's gather indices (window rows, compressed entry
// rows, visibility) in one pass over the sequences instead of some forty small tensor operations.
#include "cpu.h"
#include "../csrc/torch_glue.h"

#include <algorithm>
#include <vector>

std::vector<at::Tensor> decode_layout_cpu(const at::Tensor &positions, const at::Tensor &tables,
                                                 const c10::optional<at::Tensor> &prompt_lens, int64_t block_size,
                                                 int64_t window, at::IntArrayRef rates) {
    const char *op = "decode_layout";
    dk::expect_dtype(op, "positions", positions, at::kLong);
    dk::expect_dim(op, "positions", positions, 1);
    dk::expect_dtype(op, "tables", tables, at::kLong);
    dk::expect_dim(op, "tables", tables, 2);
    const int64_t b = positions.size(0), width = tables.size(1);
    dk::expect(b >= 1 && tables.size(0) == b, op, "tables must have one row per sequence (at least one)");
    dk::expect(block_size >= 1 && window >= 1, op, "block_size and window must be positive");
    for (int64_t r : rates) dk::expect(r >= 1, op, "rates must be positive");
    auto pos_t = positions.contiguous(), tab_t = tables.contiguous();
    const int64_t *pos = pos_t.data_ptr<int64_t>(), *tab = tab_t.data_ptr<int64_t>();
    at::Tensor prompt_t;
    const int64_t *prompt = nullptr;
    if (prompt_lens.has_value() && prompt_lens->defined()) {
        dk::expect_dtype(op, "prompt_lens", *prompt_lens, at::kLong);
        dk::expect(prompt_lens->numel() == b, op, "prompt_lens must have one entry per sequence");
        prompt_t = prompt_lens->contiguous();
        prompt = prompt_t.data_ptr<int64_t>();
    }
    int64_t k_max = 0;
    for (int64_t i = 0; i < b; i++) {
        dk::expect(pos[i] >= 0 && pos[i] < width * block_size, op, "every position must lie inside its block table");
        k_max = std::max(k_max, pos[i] + 1 - std::max<int64_t>(0, pos[i] - window + 1));
    }
    auto slot = [&](int64_t i, int64_t row) { return tab[i * width + row / block_size] * block_size + row % block_size; };
    auto opts = pos_t.options();
    auto rank_ends = at::empty({b}, opts);
    auto key_slots = at::empty({b, k_max}, opts);
    auto visible = at::empty({b, 1, k_max}, opts.dtype(at::kBool));
    int64_t *re = rank_ends.data_ptr<int64_t>(), *ks = key_slots.data_ptr<int64_t>();
    bool *vis = visible.data_ptr<bool>();
    for (int64_t i = 0; i < b; i++) {
        const int64_t p = pos[i], end = p + 1, first = std::max<int64_t>(0, p - window + 1), count = end - first;
        re[i] = (prompt && end <= prompt[i]) ? prompt[i] : end;
        for (int64_t k = 0; k < k_max; k++) {
            const int64_t kp = first + k;
            ks[i * k_max + k] = slot(i, std::min(kp, end - 1));
            vis[i * k_max + k] = k < count && kp <= p && kp > p - window;
        }
    }
    std::vector<at::Tensor> out{rank_ends, key_slots, visible};
    auto closing = at::empty({(int64_t)rates.size()}, opts);
    for (size_t j = 0; j < rates.size(); j++) {
        const int64_t rate = rates[j];
        int64_t n_max = 0, closed = 0;
        for (int64_t i = 0; i < b; i++) {
            n_max = std::max(n_max, (pos[i] + 1) / rate);
            closed += (pos[i] + 1) / rate - pos[i] / rate;
        }
        auto entry_slots = at::empty({b, n_max}, opts);
        auto entry_valid = at::empty({b, n_max}, opts.dtype(at::kBool));
        auto threshold = at::empty({b, 1}, opts);
        int64_t *es = entry_slots.data_ptr<int64_t>(), *th = threshold.data_ptr<int64_t>();
        bool *ev = entry_valid.data_ptr<bool>();
        for (int64_t i = 0; i < b; i++) {
            const int64_t end = pos[i] + 1, total = end / rate;
            th[i] = total;
            for (int64_t e = 0; e < n_max; e++) {
                es[i * n_max + e] = slot(i, std::min((e + 1) * rate - 1, end - 1));
                ev[i * n_max + e] = e < total;
            }
        }
        out.insert(out.end(), {entry_slots, entry_valid, threshold});
        closing.data_ptr<int64_t>()[j] = closed;
    }
    out.push_back(closing);
    return out;
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("decode_layout(Tensor positions, Tensor tables, Tensor? prompt_lens, int block_size, int window, "
          "int[] rates) -> Tensor[]");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("decode_layout", &decode_layout_cpu); }
