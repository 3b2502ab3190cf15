// deepseek_kernels::engram_gate on the CPU: the reference's float operations per token and stream (row sums in
// row_linear's order), the sigmoid through libm's expf (the same bits at every position).
#include "../row_linear/cpu.h"
#include "../csrc/torch_glue.h"
#include <vector>

static at::Tensor engram_gate_cpu(const at::Tensor &streams, const at::Tensor &kv, const at::Tensor &q_weight,
                                  const at::Tensor &k_weight, const at::Tensor &keep, double eps) {
    const char *op = "engram_gate";
    dk::expect_float(op, "streams", streams);
    dk::expect_float(op, "kv", kv);
    dk::expect_dim(op, "streams", streams, 3);
    const int64_t t = streams.size(0), hc = streams.size(1), d = streams.size(2);
    dk::expect(kv.dim() == 2 && kv.size(0) == t && kv.size(1) == (hc + 1) * d, op, "kv must be [T, (hc + 1) * D]");
    dk::expect(q_weight.dim() == 2 && q_weight.size(0) == hc && q_weight.size(1) == d && q_weight.sizes() == k_weight.sizes(),
               op, "q_weight and k_weight must be [hc, D]");
    dk::expect(keep.dim() == 1 && keep.size(0) == t && keep.scalar_type() == at::kBool, op, "keep must be a [T] bool tensor");
    auto h = dk::f32(streams), k = dk::f32(kv), qw = dk::f32(q_weight), kw = dk::f32(k_weight);
    auto kp = keep.contiguous();
    auto out = at::empty({t, hc, d}, h.options());
    const float *hp = h.data_ptr<float>(), *kvp = k.data_ptr<float>(), *qwp = qw.data_ptr<float>(), *kwp = kw.data_ptr<float>();
    const bool *keepp = kp.data_ptr<bool>();
    float *o = out.data_ptr<float>();
    std::vector<float> sq(d), ones(d, 1.0f);
    const float inv_d = (float)(1.0 / std::sqrt((double)d)), floor_ = 1e-6f, e = (float)eps, df = (float)d;
    for (int64_t r = 0; r < t; r++) {
        const float *value = kvp + r * (hc + 1) * d + hc * d;
        for (int64_t i = 0; i < hc; i++) {
            const float *hr = hp + (r * hc + i) * d, *key = kvp + r * (hc + 1) * d + i * d;
            const float *q = qwp + i * d, *kk = kwp + i * d;
            for (int64_t c = 0; c < d; c++) sq[c] = hr[c] * hr[c];
            const float h_sq = row_linear_one(sq.data(), ones.data(), d);
            for (int64_t c = 0; c < d; c++) sq[c] = key[c] * key[c];
            const float k_sq = row_linear_one(sq.data(), ones.data(), d);
            for (int64_t c = 0; c < d; c++) sq[c] = ((hr[c] * q[c]) * kk[c]) * key[c];
            float dot = row_linear_one(sq.data(), ones.data(), d);
            dot = ((dot * (1.0f / sqrtf(h_sq / df + e))) * (1.0f / sqrtf(k_sq / df + e))) * inv_d;
            const float mag = fabsf(dot) > floor_ ? fabsf(dot) : floor_;
            const float signed_ = sqrtf(mag) * (dot < 0.0f ? -1.0f : 1.0f);
            const float gate = (1.0f / (1.0f + expf(-signed_))) * (keepp[r] ? 1.0f : 0.0f);
            float *orow = o + (r * hc + i) * d;
            for (int64_t c = 0; c < d; c++) orow[c] = hr[c] + gate * value[c];
        }
    }
    return dk::like(out, streams.scalar_type());
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("engram_gate(Tensor streams, Tensor kv, Tensor q_weight, Tensor k_weight, Tensor keep, float eps) -> Tensor");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("engram_gate", &engram_gate_cpu); }
