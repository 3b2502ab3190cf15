// deepseek_kernels::sample_tokens on the CPU.
#include "cpu.h"
#include "../csrc/torch_glue.h"

static at::Tensor sample_tokens_cpu(const at::Tensor &probs, const at::Tensor &noise) {
    const char *op = "sample_tokens";
    dk::expect_dim(op, "probs", probs, 2);
    dk::expect(noise.sizes() == probs.sizes(), op, "noise must have the shape of probs");
    dk::expect(probs.size(1) > 0, op, "an empty vocabulary");
    auto p = dk::f32(probs), e = dk::f32(noise);
    auto out = at::empty({probs.size(0)}, p.options().dtype(at::kLong));
    sample_race(p.data_ptr<float>(), e.data_ptr<float>(), p.size(0), p.size(1), out.data_ptr<int64_t>());
    return out;
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) { m.def("sample_tokens(Tensor probs, Tensor noise) -> Tensor"); }
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("sample_tokens", &sample_tokens_cpu); }
