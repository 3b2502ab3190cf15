// deepseek_kernels::rope on the CPU: interleaved rotation of the trailing channels with per-row tables.
#include "cpu.h"
#include "../csrc/torch_glue.h"

static at::Tensor rope_cpu(const at::Tensor &x, const at::Tensor &c, const at::Tensor &s) {
    const char *op = "rope";
    dk::expect_float(op, "x", x);
    dk::expect(x.dim() >= 2, op, "x must be [T, ..., D]");
    dk::expect_dim(op, "c", c, 2);
    dk::expect(c.sizes() == s.sizes(), op, "c and s must have the same shape");
    const int64_t t = x.size(0), d = x.size(-1), r = c.size(1);
    dk::expect(c.size(0) == t, op, "one table row per token of x");
    dk::expect(r % 2 == 0 && r <= d, op, "the rotated width must be even and at most the head width");
    auto xf = dk::f32(x), cf = dk::f32(c), sf = dk::f32(s);
    auto out = at::empty(xf.sizes(), xf.options());
    const int64_t inner = (t > 0 && d > 0) ? xf.numel() / (t * d) : 0;
    if (xf.numel()) rope_apply(xf.data_ptr<float>(), t, inner, d, r, cf.data_ptr<float>(), sf.data_ptr<float>(),
                               out.data_ptr<float>());
    return dk::like(out, x.scalar_type());
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) { m.def("rope(Tensor x, Tensor c, Tensor s) -> Tensor"); }
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("rope", &rope_cpu); }
