// deepseek_kernels::row_linear on the CPU: schema, argument checks, the choice of path, and the split of the
// outputs across threads (row_linear/cpu.h computes).
#include "cpu.h"
#include "../csrc/torch_glue.h"
#include <ATen/Parallel.h>
#include <cstdlib>
#include <cstring>

/* The path by name ("avx512", "avx2", "scalar"; "" or "native": the build's widest). */
static RowLinearPath row_linear_path_named(const char *op, const std::string &name) {
    if (name.empty() || name == "native") return row_linear_native_path();
    if (name == "avx512") return ROW_LINEAR_AVX512;
    if (name == "avx2") return ROW_LINEAR_AVX2;
    if (name == "scalar") return ROW_LINEAR_SCALAR;
    dk::expect(false, op, "unknown path '" + name + "' (avx512, avx2, scalar or native)");
    return ROW_LINEAR_SCALAR;
}

/* The default path: DEEPSEEK_ROW_LINEAR_PATH when set (read once, at the first call), else the native one. */
static RowLinearPath row_linear_default_path() {
    static const RowLinearPath path = [] {
        const char *env = std::getenv("DEEPSEEK_ROW_LINEAR_PATH");
        return row_linear_path_named("row_linear", env ? std::string(env) : std::string());
    }();
    return path;
}

static at::Tensor row_linear_with(const at::Tensor &x, const at::Tensor &weight, RowLinearPath path) {
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
    // float32 and bfloat16 weights are read as stored (bfloat16 converted in registers); others become float32.
    const bool bf16 = weight.scalar_type() == at::kBFloat16;
    const at::Tensor w = bf16 ? weight.contiguous() : dk::f32(weight);
    const int64_t rows = xf.size(0);
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = m;
    auto out = at::empty(shape, x.options().dtype(at::kFloat));
    if (rows && m) {
        const float *xp = xf.data_ptr<float>();
        const int64_t xs = n ? xf.stride(0) : 0;
        float *yp = out.data_ptr<float>();
        const void *wp = w.data_ptr();
        // Blocks of 16 outputs; each output is computed whole by one thread (the split changes no sum).
        const int64_t blocks = (m + 15) / 16, work = rows * (n ? n : 1) * 16;
        const int64_t grain = work >= (1 << 18) ? 1 : ((1 << 18) + work - 1) / work;
        at::parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
            const int64_t j0 = b0 * 16, j1 = b1 * 16 < m ? b1 * 16 : m;
            if (bf16)
                row_linear_range(path, xp, rows, n, xs, static_cast<const uint16_t *>(wp), j0, j1, yp, m);
            else
                row_linear_range(path, xp, rows, n, xs, static_cast<const float *>(wp), j0, j1, yp, m);
        });
    } else if (rows) {
        out.zero_();
    }
    return dk::like(out, x.scalar_type());
}

at::Tensor row_linear_cpu(const at::Tensor &x, const at::Tensor &weight) {
    return row_linear_with(x, weight, row_linear_default_path());
}

/* row_linear by a named path (tests: every path gives the same bits). */
static at::Tensor row_linear_path_cpu(const at::Tensor &x, const at::Tensor &weight, c10::string_view path) {
    return row_linear_with(x, weight, row_linear_path_named("row_linear_path", std::string(path)));
}

/* The path row_linear takes by default, by name. */
static std::string row_linear_default_path_name() {
    switch (row_linear_default_path()) {
    case ROW_LINEAR_AVX512: return "avx512";
    case ROW_LINEAR_AVX2: return "avx2";
    default: return "scalar";
    }
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("row_linear(Tensor x, Tensor weight) -> Tensor");
    m.def("row_linear_path(Tensor x, Tensor weight, str path) -> Tensor");
    m.def("row_linear_default_path() -> str", &row_linear_default_path_name);
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) {
    m.impl("row_linear", &row_linear_cpu);
    m.impl("row_linear_path", &row_linear_path_cpu);
}
