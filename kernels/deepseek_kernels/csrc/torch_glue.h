// Shared argument checks and conversions for the CPU wrappers of the torch.library ops.
#pragma once
#include <ATen/ATen.h>
#include <torch/library.h>

namespace dk {

// A float32, contiguous view of t (no copy when it already is one). The common case, a float32 contiguous
// tensor, returns t itself (what ``to`` and ``contiguous`` would return) without the dispatcher round trip of
// ``to``: several arguments of every op pass through here on every call.
inline at::Tensor f32(const at::Tensor &t) {
    if (t.scalar_type() == at::kFloat && t.is_contiguous()) return t;
    return t.to(at::kFloat).contiguous();
}

inline void expect(bool ok, const char *op, const std::string &what) {
    TORCH_CHECK(ok, "deepseek_kernels::", op, ": ", what);
}

inline void expect_cpu(const char *op, const char *name, const at::Tensor &t) {
    TORCH_CHECK(t.device().is_cpu(), "deepseek_kernels::", op, ": ", name, " must be on the CPU, got ", t.device());
}

inline void expect_dim(const char *op, const char *name, const at::Tensor &t, int64_t dim) {
    TORCH_CHECK(t.dim() == dim, "deepseek_kernels::", op, ": ", name, " must have ", dim, " dimensions, got shape ",
                t.sizes());
}

inline void expect_dtype(const char *op, const char *name, const at::Tensor &t, at::ScalarType dtype) {
    TORCH_CHECK(t.scalar_type() == dtype, "deepseek_kernels::", op, ": ", name, " must be ", dtype, ", got ",
                t.scalar_type());
}

inline void expect_float(const char *op, const char *name, const at::Tensor &t) {
    TORCH_CHECK(at::isFloatingType(t.scalar_type()), "deepseek_kernels::", op, ": ", name,
                " must be a floating-point tensor, got ", t.scalar_type());
}

// Back to the caller's dtype (no copy for float32).
inline at::Tensor like(const at::Tensor &out, at::ScalarType dtype) {
    return dtype == at::kFloat ? out : out.to(dtype);
}

inline const float *ptr_or_null(const at::Tensor &t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

// Every entry of the int64 tensor `slots` names a row of a pool of `rows` rows (the kernels read the pools at
// these rows without further checks).
inline void expect_slots(const char *op, const char *name, const at::Tensor &slots, int64_t rows) {
    const auto flat = slots.contiguous();
    const int64_t *p = flat.data_ptr<int64_t>(), n = flat.numel();
    int64_t lo = 0, hi = -1;
    for (int64_t i = 0; i < n; i++) {
        lo = p[i] < lo ? p[i] : lo;
        hi = p[i] > hi ? p[i] : hi;
    }
    TORCH_CHECK(n == 0 || (lo >= 0 && hi < rows), "deepseek_kernels::", op, ": ", name, " must be rows of the pool (0 .. ",
                rows - 1, "), got ", lo < 0 ? lo : hi);
}

// Pools that the kernels cannot read in place (another dtype, not contiguous): the rows that ``slots`` name,
// gathered into a float32 pool of their own, and ``slots`` renumbered to match.
inline void gather_rows_f32(at::Tensor &pool, at::Tensor &slots) {
    if (pool.scalar_type() == at::kFloat && pool.is_contiguous()) return;
    auto flat = slots.reshape({-1});
    pool = pool.reshape({-1, pool.size(-1)}).index_select(0, flat).to(at::kFloat).contiguous();
    slots = at::arange(flat.numel(), slots.options()).view(slots.sizes());
}

}  // namespace dk
