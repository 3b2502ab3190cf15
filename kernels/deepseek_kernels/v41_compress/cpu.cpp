// deepseek_kernels::v41_compress_pool on the CPU: ratio-1 / ratio-2 pooling of compressor rows, then the RMS norm.
#include "../rms_norm/cpu.h"
#include "../csrc/torch_glue.h"

/* latents[g] = rms_norm(sum_k softmax_k(score[g*r + k]) * kv[g*r + k]) * w, per channel (ratio 1: kv itself). */
static inline void v41_compress_pool(const float *rows, int64_t groups, int ratio, int64_t hd, const float *w,
                                     float eps, float *pooled, float *out) {
    const int64_t width = ratio * hd;
    for (int64_t g = 0; g < groups; g++) {
        float *p = pooled + g * hd;
        if (ratio == 1) {
            memcpy(p, rows + g * width, hd * sizeof(float));
            continue;
        }
        const float *a = rows + (2 * g) * width, *b = a + width;
        for (int64_t c = 0; c < hd; c++) {
            const float sa = a[hd + c], sb = b[hd + c], mx = sa > sb ? sa : sb;
            const float ea = expf(sa - mx), eb = expf(sb - mx), s = ea + eb;
            p[c] = a[c] * (ea / s) + b[c] * (eb / s);
        }
    }
    rms_norm(pooled, groups, hd, hd, w, eps, out);
}

static at::Tensor v41_compress_pool_cpu(const at::Tensor &rows, int64_t ratio, const at::Tensor &norm_weight, double eps) {
    const char *op = "v41_compress_pool";
    dk::expect(ratio == 1 || ratio == 2, op, "ratio must be 1 or 2");
    dk::expect_dim(op, "rows", rows, 2);
    dk::expect(rows.size(0) % ratio == 0, op, "rows must hold whole groups");
    dk::expect(rows.size(1) % ratio == 0, op, "rows must be [n * ratio, ratio * head_dim]");
    const int64_t hd = rows.size(1) / ratio, groups = rows.size(0) / ratio;
    dk::expect(norm_weight.dim() == 1 && norm_weight.size(0) == hd, op, "norm_weight must be [head_dim]");
    auto r = dk::f32(rows), w = dk::f32(norm_weight);
    auto pooled = at::empty({groups, hd}, r.options()), out = at::empty({groups, hd}, r.options());
    if (groups) v41_compress_pool(r.data_ptr<float>(), groups, (int)ratio, hd, w.data_ptr<float>(), (float)eps,
                                  pooled.data_ptr<float>(), out.data_ptr<float>());
    return out;
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("v41_compress_pool(Tensor rows, int ratio, Tensor norm_weight, float eps) -> Tensor");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("v41_compress_pool", &v41_compress_pool_cpu); }
