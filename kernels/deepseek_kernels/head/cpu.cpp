// deepseek_kernels::head_argmax (blocked float32 scan) and ::head_argmax_q8 (int8 prefilter, exact float32
// decision) on the CPU.
#include "cpu.h"
#include "../csrc/torch_glue.h"

#include <vector>

static std::tuple<at::Tensor, at::Tensor> head_argmax_cpu(const at::Tensor &h, const at::Tensor &blocked,
                                                          const at::Tensor &tail) {
    const char *op = "head_argmax";
    dk::expect_dtype(op, "h", h, at::kFloat);
    dk::expect_dim(op, "h", h, 2);
    const int64_t m = h.size(0), k = h.size(1);
    dk::expect(m % 8 == 0, op, "rows of h come in multiples of 8 (pad with zeros)");
    dk::expect_dtype(op, "blocked", blocked, at::kFloat);
    dk::expect(blocked.dim() == 3 && blocked.size(1) == k && blocked.size(2) == 8 && blocked.is_contiguous(), op,
               "blocked must be a contiguous [V / 8, K, 8]");
    dk::expect_dtype(op, "tail", tail, at::kFloat);
    dk::expect(tail.dim() == 2 && tail.size(1) == k && tail.size(0) < 8 && tail.is_contiguous(), op,
               "tail must be the last V % 8 rows, [V % 8, K]");
    auto hc = h.contiguous();
    auto out = at::empty({m}, hc.options().dtype(at::kLong));
    auto val = at::empty({m}, hc.options());
    if (m)
        head_argmax(hc.data_ptr<float>(), m, k, blocked.data_ptr<float>(), blocked.size(0), tail.data_ptr<float>(),
                    tail.size(0), out.data_ptr<int64_t>(), val.data_ptr<float>());
    return {out, val};
}

static std::tuple<at::Tensor, at::Tensor> head_argmax_q8_cpu(const at::Tensor &h, const at::Tensor &wq,
                                                             const at::Tensor &rowsum, double s_w, double ew, double aw,
                                                             double wmax, const at::Tensor &w, int64_t candidates) {
    const char *op = "head_argmax_q8";
    dk::expect_dtype(op, "h", h, at::kFloat);
    dk::expect_dim(op, "h", h, 2);
    const int64_t m = h.size(0), k = h.size(1);
    dk::expect_dtype(op, "wq", wq, at::kChar);
    dk::expect(wq.dim() == 4 && wq.size(3) == 4 && wq.is_contiguous(), op,
               "wq must be a contiguous [V / 16, 8, 16, 4] (K4 = 32) or [V / 8, K4 / 4, 8, 4] (K4 > 32)");
    const int64_t k4 = wq.size(1) * 4;
    dk::expect(k4 == 32 ? wq.size(2) == 16 : wq.size(2) == 8, op,
               "K4 = 32 takes blocks in pairs, [V / 16, 8, 16, 4]; wider rows [V / 8, K4 / 4, 8, 4]");
    const int64_t nblocks = k4 == 32 ? 2 * wq.size(0) : wq.size(0);
    dk::expect(k4 >= k && k4 >= 32 && k4 <= 256, op, "K4 must cover K, be at least 32 and at most 256");
    dk::expect_dtype(op, "rowsum", rowsum, at::kInt);
    dk::expect(rowsum.numel() == nblocks * 8 && rowsum.is_contiguous(), op, "one row sum per quantised row");
    dk::expect_dtype(op, "w", w, at::kFloat);
    dk::expect(w.dim() == 2 && w.size(1) == k && w.size(0) >= nblocks * 8 && w.is_contiguous(), op,
               "w must be the float32 head [V, K]");
    dk::expect(candidates >= 16, op, "at least 16 candidates per row");
    auto hc = h.contiguous();
    auto out = at::empty({m}, hc.options().dtype(at::kLong));
    auto val = at::empty({m}, hc.options());
    // Candidate buffers live per thread and are reused (fresh pages every step cost page faults).
    thread_local std::vector<int32_t> scratch;
    const size_t need = (size_t)2 * (size_t)std::max<int64_t>(m, 64) * (size_t)candidates;
    if (scratch.size() < need) scratch.resize(need);
    int32_t *cand = scratch.data(), *cval = cand + (size_t)std::max<int64_t>(m, 64) * candidates;
    if (m)
        head_argmax_q8(hc.data_ptr<float>(), m, k, k4, wq.data_ptr<int8_t>(), rowsum.data_ptr<int32_t>(), nblocks,
                       s_w, ew, aw, wmax, w.data_ptr<float>(), w.size(0), cand, cval, candidates,
                       out.data_ptr<int64_t>(), val.data_ptr<float>());
    return {out, val};
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("head_argmax(Tensor h, Tensor blocked, Tensor tail) -> (Tensor index, Tensor value)");
    m.def("head_argmax_q8(Tensor h, Tensor wq, Tensor rowsum, float s_w, float ew, float aw, float wmax, Tensor w,"
          " int candidates) -> (Tensor index, Tensor value)");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) {
    m.impl("head_argmax", &head_argmax_cpu);
    m.impl("head_argmax_q8", &head_argmax_q8_cpu);
}
