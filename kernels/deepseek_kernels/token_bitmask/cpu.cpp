// deepseek_kernels::apply_token_bitmask_ on the CPU.
#include "cpu.h"
#include "../csrc/torch_glue.h"

static void apply_token_bitmask_cpu(const at::Tensor &logits, const at::Tensor &bitmask) {
    const char *op = "apply_token_bitmask_";
    dk::expect_dim(op, "logits", logits, 2);
    dk::expect_dim(op, "bitmask", bitmask, 2);
    dk::expect_dtype(op, "logits", logits, at::kFloat);
    dk::expect(logits.is_contiguous(), op, "logits must be contiguous (they are changed in place)");
    dk::expect_dtype(op, "bitmask", bitmask, at::kInt);
    dk::expect_cpu(op, "bitmask", bitmask);
    dk::expect(bitmask.size(0) == logits.size(0), op, "bitmask must have one row per row of logits");
    auto m = bitmask.contiguous();
    mask_rows(logits.data_ptr<float>(), m.data_ptr<int32_t>(), logits.size(0), logits.size(1), m.size(1));
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("apply_token_bitmask_(Tensor(a!) logits, Tensor bitmask) -> ()");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("apply_token_bitmask_", &apply_token_bitmask_cpu); }
