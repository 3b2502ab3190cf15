// deepseek_kernels::rms_norm on the CPU: schema, argument checks, and the call into rms_norm/cpu.h.
#include "cpu.h"
#include "../csrc/torch_glue.h"

static at::Tensor rms_norm_cpu(const at::Tensor &x, const std::optional<at::Tensor> &weight, double eps) {
    const char *op = "rms_norm";
    dk::expect_float(op, "x", x);
    dk::expect(x.dim() >= 1 && x.size(-1) > 0, op, "x needs a non-empty last axis");
    const int64_t d = x.size(-1);
    at::Tensor w;
    if (weight.has_value()) {
        dk::expect_dim(op, "weight", *weight, 1);
        dk::expect(weight->size(0) == d, op, "weight must have one entry per channel of x");
        w = dk::f32(*weight);
    }
    // Rows of a float32 matrix are read in place through their stride (column slices of a wider product).
    at::Tensor xf = x;
    if (!(x.scalar_type() == at::kFloat && x.dim() == 2 && x.stride(1) == 1)) xf = dk::f32(x).reshape({-1, d});
    const int64_t rows = xf.size(0);
    auto out = at::empty(x.sizes(), x.options().dtype(at::kFloat));
    if (rows)
        rms_norm(xf.data_ptr<float>(), rows, d, xf.stride(0), dk::ptr_or_null(w), (float)eps, out.data_ptr<float>());
    return dk::like(out, x.scalar_type());
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) { m.def("rms_norm(Tensor x, Tensor? weight, float eps) -> Tensor"); }
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("rms_norm", &rms_norm_cpu); }
