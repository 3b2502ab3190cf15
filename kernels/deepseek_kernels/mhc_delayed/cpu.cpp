// deepseek_kernels::mhc_pre_delayed on the CPU: the site weights of hyper_connection/cpu.h (hc_mix), then the
// collapse with the previous site's pre (or stream 0).
#include "../hyper_connection/cpu.h"
#include "../csrc/torch_glue.h"

static std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> mhc_pre_delayed_cpu(
        const at::Tensor &mixes, const at::Tensor &base, const at::Tensor &scale, int64_t hc, int64_t iters,
        double hc_eps, const at::Tensor &streams, const std::optional<at::Tensor> &pre_mix) {
    const char *op = "mhc_pre_delayed";
    dk::expect(hc >= 1 && hc <= 8, op, "hc must lie in [1, 8]");
    dk::expect(iters >= 1, op, "at least one Sinkhorn iteration");
    dk::expect(base.numel() == (2 + hc) * hc && scale.numel() == 3, op, "base must hold (2 + hc) * hc values, scale 3");
    dk::expect_dim(op, "mixes", mixes, 2);
    dk::expect_dim(op, "streams", streams, 3);
    const int64_t t = streams.size(0), d = streams.size(2);
    dk::expect(mixes.size(0) == t && mixes.size(1) == (2 + hc) * hc, op, "mixes must be [T, (2 + hc) * hc]");
    dk::expect(streams.size(1) == hc, op, "streams must be [T, hc, D]");
    auto m = dk::f32(mixes), b = dk::f32(base), sc = dk::f32(scale);
    auto opts = m.options();
    auto pre = at::empty({t, hc}, opts), post = at::empty({t, hc}, opts), comb = at::empty({t, hc, hc}, opts);
    if (t) hc_mix(m.data_ptr<float>(), t, (int)hc, b.data_ptr<float>(), sc.data_ptr<float>(), (int)iters,
                  (float)hc_eps, pre.data_ptr<float>(), post.data_ptr<float>(), comb.data_ptr<float>(), nullptr, d,
                  nullptr);
    if (!pre_mix.has_value()) return {post, comb, pre, streams.select(1, 0).contiguous()};
    dk::expect(pre_mix->dim() == 2 && pre_mix->size(0) == t && pre_mix->size(1) == hc, op, "pre_mix must be [T, hc]");
    auto st = dk::f32(streams), pm = dk::f32(*pre_mix);
    auto out = at::empty({t, d}, opts);
    const float *s = st.data_ptr<float>(), *w = pm.data_ptr<float>();
    float *o = out.data_ptr<float>();
    for (int64_t r = 0; r < t; r++)  // sum over streams in index order, as the reference's sum(dim=1)
        for (int64_t c = 0; c < d; c++) {
            float acc = w[r * hc] * s[(r * hc) * d + c];
            for (int64_t i = 1; i < hc; i++) acc = acc + w[r * hc + i] * s[(r * hc + i) * d + c];
            o[r * d + c] = acc;
        }
    return {post, comb, pre, dk::like(out, streams.scalar_type())};
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("mhc_pre_delayed(Tensor mixes, Tensor base, Tensor scale, int hc, int iters, float hc_eps, Tensor streams, "
          "Tensor? pre_mix) -> (Tensor, Tensor, Tensor, Tensor)");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("mhc_pre_delayed", &mhc_pre_delayed_cpu); }
