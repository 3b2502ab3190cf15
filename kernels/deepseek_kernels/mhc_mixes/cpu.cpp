// deepseek_kernels::mhc_mixes on the CPU: row_linear's dots of the flattened streams with fn, scaled by the
// reciprocal RMS (its sum of squares in row_linear's order too), in the reference's float operations.
#include "../row_linear/cpu.h"
#include "../csrc/torch_glue.h"
#include <vector>

static at::Tensor mhc_mixes_cpu(const at::Tensor &streams, const at::Tensor &fn, double eps) {
    const char *op = "mhc_mixes";
    dk::expect_float(op, "streams", streams);
    dk::expect_float(op, "fn", fn);
    dk::expect_dim(op, "streams", streams, 3);
    dk::expect_dim(op, "fn", fn, 2);
    const int64_t t = streams.size(0), n = streams.size(1) * streams.size(2), m = fn.size(0);
    dk::expect(fn.size(1) == n, op, "fn must be [M, hc * D]");
    auto x = dk::f32(streams).reshape({t, n});
    auto w = dk::f32(fn);
    auto out = at::empty({t, m}, x.options());
    if (!t) return out;
    const float *xp = x.data_ptr<float>();
    float *o = out.data_ptr<float>();
    row_linear(xp, t, n, n, w.data_ptr<float>(), m, o);
    std::vector<float> sq(n), ones(n, 1.0f);
    for (int64_t r = 0; r < t; r++) {
        const float *xr = xp + r * n;
        for (int64_t k = 0; k < n; k++) sq[k] = xr[k] * xr[k];
        const float sum_sq = row_linear_one(sq.data(), ones.data(), n);
        const float inv = 1.0f / sqrtf(sum_sq / (float)n + (float)eps);
        for (int64_t j = 0; j < m; j++) o[r * m + j] = o[r * m + j] * inv;
    }
    return out;
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) { m.def("mhc_mixes(Tensor streams, Tensor fn, float eps) -> Tensor"); }
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("mhc_mixes", &mhc_mixes_cpu); }
