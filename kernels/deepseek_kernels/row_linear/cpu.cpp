// deepseek_kernels::row_linear on the CPU: schema, argument checks, and the call into row_linear/cpu.h.
#include "cpu.h"
#include "../csrc/torch_glue.h"

static at::Tensor row_linear_cpu(const at::Tensor &x, const at::Tensor &weight) {
    const char *op = "row_linear";
    dk::expect_float(op, "x", x);
    dk::expect_float(op, "weight", weight);
    dk::expect(x.dim() >= 1, op, "x needs at least one dimension");
    dk::expect_dim(op, "weight", weight, 2);
    const int64_t n = x.size(-1), m = weight.size(0);
    dk::expect(weight.size(1) == n, op, "weight must be [m, n] with n the last dimension of x");
    // Rows of a float32 matrix are read in place through their stride (column slices of a wider product).
    at::Tensor xf = x;
    if (!(x.scalar_type() == at::kFloat && x.dim() == 2 && x.stride(1) == 1)) xf = dk::f32(x).reshape({-1, n});
    auto w = dk::f32(weight);
    const int64_t rows = xf.size(0);
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = m;
    auto out = at::empty(shape, x.options().dtype(at::kFloat));
    if (rows && m) row_linear(xf.data_ptr<float>(), rows, n, n ? xf.stride(0) : 0, w.data_ptr<float>(), m,
                              out.data_ptr<float>());
    else if (rows) out.zero_();
    return dk::like(out, x.scalar_type());
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) { m.def("row_linear(Tensor x, Tensor weight) -> Tensor"); }
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("row_linear", &row_linear_cpu); }
