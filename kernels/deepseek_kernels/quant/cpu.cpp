// deepseek_kernels::dequantize_fp8_blocks / ::dequantize_mxfp4 / ::fp8_gemm / ::mxfp4_gemm on the CPU.
#include "cpu.h"
#include "../csrc/torch_glue.h"

static bool is_e4m3(const at::Tensor &t) { return t.scalar_type() == at::kFloat8_e4m3fn; }

static at::Tensor dequantize_fp8_blocks_cpu(const at::Tensor &w, const at::Tensor &scale, int64_t bo, int64_t bi) {
    const char *op = "dequantize_fp8_blocks";
    dk::expect(is_e4m3(w), op, "w must be float8_e4m3fn");
    dk::expect_dim(op, "w", w, 2);
    dk::expect_dim(op, "scale", scale, 2);
    dk::expect(bo > 0 && bi > 0, op, "block edges must be positive");
    const int64_t o = w.size(0), i = w.size(1);
    dk::expect(scale.size(0) == (o + bo - 1) / bo && scale.size(1) == (i + bi - 1) / bi, op,
               "scale must be [ceil(O / bo), ceil(I / bi)]");
    auto wc = w.contiguous().view(at::kByte);
    auto sc = dk::f32(scale);
    auto out = at::empty({o, i}, sc.options());
    dequant_fp8_blocks(wc.data_ptr<uint8_t>(), o, i, sc.data_ptr<float>(), bo, bi, out.data_ptr<float>());
    return out;
}

static at::Tensor dequantize_mxfp4_cpu(const at::Tensor &packed, const at::Tensor &scale) {
    const char *op = "dequantize_mxfp4";
    dk::expect(packed.scalar_type() == at::kByte || packed.scalar_type() == at::kChar, op, "packed must be bytes");
    dk::expect(scale.scalar_type() == at::kByte || scale.scalar_type() == at::kFloat8_e8m0fnu, op,
               "scale must be e8m0 exponent bytes");
    dk::expect_dim(op, "packed", packed, 2);
    dk::expect_dim(op, "scale", scale, 2);
    const int64_t o = packed.size(0), i = packed.size(1) * 2;
    dk::expect(i % 32 == 0 && scale.size(0) == o && scale.size(1) * 32 == i, op,
               "scale must hold one exponent per 32 inputs of each row");
    auto pc = packed.contiguous().view(at::kByte), sc = scale.contiguous().view(at::kByte);
    auto out = at::empty({o, i}, packed.options().dtype(at::kFloat));
    dequant_mxfp4(pc.data_ptr<uint8_t>(), o, i, sc.data_ptr<uint8_t>(), out.data_ptr<float>());
    return out;
}

// e4m3 activations with one scale per (row, block of 128 inputs), as DeepSeek's FP8 GEMMs take them.
static at::Tensor dequantize_rows(const char *op, const at::Tensor &a, const at::Tensor &a_scale, int64_t group) {
    dk::expect(is_e4m3(a), op, "a must be float8_e4m3fn");
    dk::expect_dim(op, "a", a, 2);
    dk::expect(a_scale.dim() == 2 && a_scale.size(0) == a.size(0) && a_scale.size(1) == (a.size(1) + group - 1) / group,
               op, "a_scale must hold one scale per row and input group");
    at::Tensor s = a_scale;
    if (s.scalar_type() == at::kByte || s.scalar_type() == at::kFloat8_e8m0fnu) {
        auto bytes = s.contiguous().view(at::kByte);
        s = at::empty(bytes.sizes(), bytes.options().dtype(at::kFloat));
        const uint8_t *src = bytes.data_ptr<uint8_t>();
        float *dst = s.data_ptr<float>();
        for (int64_t i = 0; i < bytes.numel(); i++) dst[i] = e8m0_to_float(src[i]);
    }
    return dequantize_fp8_blocks_cpu(a, s, 1, group);
}

// The CPU has no FP8 / FP4 arithmetic: dequantise both operands, then one float32 GEMM.
static at::Tensor fp8_gemm_cpu(const at::Tensor &a, const at::Tensor &a_scale, const at::Tensor &b,
                               const at::Tensor &b_scale) {
    const char *op = "fp8_gemm";
    dk::expect(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(1), op, "a [M, K] and b [N, K]");
    auto da = dequantize_rows(op, a, a_scale, 128);
    auto db = dequantize_fp8_blocks_cpu(b, b_scale, 128, 128);
    return at::matmul(da, db.t());
}

static at::Tensor mxfp4_gemm_cpu(const at::Tensor &a, const at::Tensor &a_scale, const at::Tensor &b,
                                 const at::Tensor &b_scale) {
    const char *op = "mxfp4_gemm";
    dk::expect(a.dim() == 2 && b.dim() == 2 && a.size(1) == 2 * b.size(1), op, "a [M, K] and packed b [N, K / 2]");
    auto da = dequantize_rows(op, a, a_scale, 32);
    auto db = dequantize_mxfp4_cpu(b, b_scale);
    return at::matmul(da, db.t());
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("dequantize_fp8_blocks(Tensor w, Tensor scale, int bo, int bi) -> Tensor");
    m.def("dequantize_mxfp4(Tensor packed, Tensor scale) -> Tensor");
    m.def("fp8_gemm(Tensor a, Tensor a_scale, Tensor b, Tensor b_scale) -> Tensor");
    m.def("mxfp4_gemm(Tensor a, Tensor a_scale, Tensor b, Tensor b_scale) -> Tensor");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) {
    m.impl("dequantize_fp8_blocks", &dequantize_fp8_blocks_cpu);
    m.impl("dequantize_mxfp4", &dequantize_mxfp4_cpu);
    m.impl("fp8_gemm", &fp8_gemm_cpu);
    m.impl("mxfp4_gemm", &mxfp4_gemm_cpu);
}
