// deepseek_kernels::hc_mix / hc_merge / hc_step / hc_head on the CPU.
#include "cpu.h"
#include "../csrc/torch_glue.h"

static void check_site(const char *op, int64_t hc, int64_t iters, const at::Tensor &base, const at::Tensor &scale) {
    dk::expect(hc >= 1 && hc <= 8, op, "hc must lie in [1, 8]");
    dk::expect(iters >= 1, op, "at least one Sinkhorn iteration");
    dk::expect(base.numel() == (2 + hc) * hc, op, "base must hold (2 + hc) * hc values");
    dk::expect(scale.numel() == 3, op, "scale must hold three values");
}

static std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> hc_mix_cpu(
        const at::Tensor &mixes, const at::Tensor &base, const at::Tensor &scale, int64_t hc, int64_t iters,
        double hc_eps, const at::Tensor &streams) {
    const char *op = "hc_mix";
    check_site(op, hc, iters, base, scale);
    dk::expect_dim(op, "mixes", mixes, 2);
    dk::expect_dim(op, "streams", streams, 3);
    const int64_t t = streams.size(0), d = streams.size(2);
    dk::expect(mixes.size(0) == t && mixes.size(1) == (2 + hc) * hc, op, "mixes must be [T, (2 + hc) * hc]");
    dk::expect(streams.size(1) == hc, op, "streams must be [T, hc, D]");
    auto m = dk::f32(mixes), b = dk::f32(base), sc = dk::f32(scale), st = dk::f32(streams);
    auto opts = m.options();
    auto pre = at::empty({t, hc}, opts), post = at::empty({t, hc}, opts), comb = at::empty({t, hc, hc}, opts);
    auto collapsed = at::empty({t, d}, opts);
    if (t) hc_mix(m.data_ptr<float>(), t, (int)hc, b.data_ptr<float>(), sc.data_ptr<float>(), (int)iters,
                  (float)hc_eps, pre.data_ptr<float>(), post.data_ptr<float>(), comb.data_ptr<float>(),
                  st.data_ptr<float>(), d, collapsed.data_ptr<float>());
    return {pre, post, comb, dk::like(collapsed, streams.scalar_type())};
}

at::Tensor hc_merge_cpu(const at::Tensor &streams, const at::Tensor &block, const at::Tensor &post,
                               const at::Tensor &comb) {
    const char *op = "hc_merge";
    dk::expect_dim(op, "streams", streams, 3);
    const int64_t t = streams.size(0), hc = streams.size(1), d = streams.size(2);
    dk::expect(block.dim() == 2 && block.size(0) == t && block.size(1) == d, op, "block must be [T, D]");
    dk::expect(post.dim() == 2 && post.size(0) == t && post.size(1) == hc, op, "post must be [T, hc]");
    dk::expect(comb.dim() == 3 && comb.size(0) == t && comb.size(1) == hc && comb.size(2) == hc, op,
               "comb must be [T, hc, hc]");
    auto st = dk::f32(streams), bl = dk::f32(block), p = dk::f32(post), cm = dk::f32(comb);
    auto out = at::empty({t, hc, d}, st.options());
    if (t) hc_merge(st.data_ptr<float>(), bl.data_ptr<float>(), p.data_ptr<float>(), cm.data_ptr<float>(), t,
                    (int)hc, d, out.data_ptr<float>());
    return dk::like(out, streams.scalar_type());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> hc_step_cpu(
        const at::Tensor &streams, const std::optional<at::Tensor> &block, const std::optional<at::Tensor> &post_prev,
        const std::optional<at::Tensor> &comb_prev, const at::Tensor &fn, const at::Tensor &base,
        const at::Tensor &scale, int64_t hc, int64_t iters, double hc_eps, double norm_eps,
        const at::Tensor &norm_weight, double block_eps) {
    const char *op = "hc_step";
    check_site(op, hc, iters, base, scale);
    dk::expect_dim(op, "streams", streams, 3);
    const int64_t t = streams.size(0), d = streams.size(2), mix = (2 + hc) * hc;
    dk::expect(streams.size(1) == hc, op, "streams must be [T, hc, D]");
    dk::expect(fn.dim() == 2 && fn.size(0) == mix && fn.size(1) == hc * d, op, "fn must be [(2 + hc) * hc, hc * D]");
    dk::expect(norm_weight.dim() == 1 && norm_weight.size(0) == d, op, "norm_weight must be [D]");
    const bool merge = block.has_value();
    dk::expect(merge == post_prev.has_value() && merge == comb_prev.has_value(), op,
               "block, post_prev and comb_prev are given together");
    auto st = dk::f32(streams), f = dk::f32(fn), b = dk::f32(base), sc = dk::f32(scale), nw = dk::f32(norm_weight);
    at::Tensor bl, pp, cp;
    if (merge) {
        bl = dk::f32(*block), pp = dk::f32(*post_prev), cp = dk::f32(*comb_prev);
        dk::expect(bl.dim() == 2 && bl.size(0) == t && bl.size(1) == d, op, "block must be [T, D]");
        dk::expect(pp.numel() == t * hc && cp.numel() == t * hc * hc, op, "post_prev [T, hc], comb_prev [T, hc, hc]");
    }
    auto opts = st.options();
    // Without a block the streams pass through unchanged; the op returns them as a fresh tensor (no aliasing),
    // which the kernel fills.
    auto out = at::empty({t, hc, d}, opts);
    auto post = at::empty({t, hc}, opts), comb = at::empty({t, hc, hc}, opts), x = at::empty({t, d}, opts);
    // Scratch for one group of sixteen tokens: on the stack for the small models, else one allocation.
    alignas(64) float small[4096];
    const int64_t need = hc_step_scratch((int)hc, d);
    at::Tensor scratch;
    float *a = small;
    if (need > 4096) {
        scratch = at::empty({need + 16}, opts);
        a = scratch.data_ptr<float>();
        a += (16 - (((uintptr_t)a >> 2) & 15)) & 15;  // 64-byte aligned
    }
    if (t)
        hc_step(st.data_ptr<float>(), merge ? bl.data_ptr<float>() : nullptr,
                merge ? pp.data_ptr<float>() : nullptr, merge ? cp.data_ptr<float>() : nullptr, t, (int)hc, d,
                f.data_ptr<float>(), b.data_ptr<float>(), sc.data_ptr<float>(), (int)iters, (float)hc_eps,
                (float)norm_eps, nw.data_ptr<float>(), (float)block_eps, out.data_ptr<float>(), post.data_ptr<float>(),
                comb.data_ptr<float>(), x.data_ptr<float>(), a);
    return {dk::like(out, streams.scalar_type()), post, comb, dk::like(x, streams.scalar_type())};
}

static at::Tensor hc_head_cpu(const at::Tensor &streams, const at::Tensor &fn, const at::Tensor &base,
                              const at::Tensor &scale, double hc_eps, double norm_eps, const at::Tensor &norm_weight,
                              double block_eps) {
    const char *op = "hc_head";
    dk::expect_dim(op, "streams", streams, 3);
    const int64_t t = streams.size(0), hc = streams.size(1), d = streams.size(2);
    dk::expect(hc >= 1 && hc <= 8, op, "hc must lie in [1, 8]");
    dk::expect(fn.dim() == 2 && fn.size(0) == hc && fn.size(1) == hc * d, op, "fn must be [hc, hc * D]");
    dk::expect(base.numel() == hc, op, "base must hold hc values");
    dk::expect(scale.numel() == 1, op, "scale must hold one value");
    dk::expect(norm_weight.dim() == 1 && norm_weight.size(0) == d, op, "norm_weight must be [D]");
    auto st = dk::f32(streams), f = dk::f32(fn), b = dk::f32(base), sc = dk::f32(scale), nw = dk::f32(norm_weight);
    auto x = at::empty({t, d}, st.options());
    auto scratch = at::empty({t * (hc * d + hc + d)}, st.options());
    float *a = scratch.data_ptr<float>();
    if (t)
        hc_head(st.data_ptr<float>(), t, (int)hc, d, f.data_ptr<float>(), b.data_ptr<float>(), sc.item<float>(),
                (float)hc_eps, (float)norm_eps, nw.data_ptr<float>(), (float)block_eps, x.data_ptr<float>(), a,
                a + t * hc * d, a + t * (hc * d + hc));
    return dk::like(x, streams.scalar_type());
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("hc_mix(Tensor mixes, Tensor base, Tensor scale, int hc, int iters, float hc_eps, Tensor streams)"
          " -> (Tensor pre, Tensor post, Tensor comb, Tensor collapsed)");
    m.def("hc_merge(Tensor streams, Tensor block, Tensor post, Tensor comb) -> Tensor");
    m.def("hc_step(Tensor streams, Tensor? block, Tensor? post_prev, Tensor? comb_prev, Tensor fn, Tensor base,"
          " Tensor scale, int hc, int iters, float hc_eps, float norm_eps, Tensor norm_weight, float block_eps)"
          " -> (Tensor streams_out, Tensor post, Tensor comb, Tensor x)");
    m.def("hc_head(Tensor streams, Tensor fn, Tensor base, Tensor scale, float hc_eps, float norm_eps,"
          " Tensor norm_weight, float block_eps) -> Tensor");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) {
    m.impl("hc_mix", &hc_mix_cpu);
    m.impl("hc_merge", &hc_merge_cpu);
    m.impl("hc_step", &hc_step_cpu);
    m.impl("hc_head", &hc_head_cpu);
}
