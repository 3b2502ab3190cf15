// deepseek_kernels::attn_front and ::attn_back on the CPU: the per-token work around the attention core
// (norms, query projection, RoPE, cache stores; inverse RoPE and the grouped output projection) in one call each.
#include "cpu.h"
#include "../csrc/torch_glue.h"

#include <vector>

// A pool the kernel can write in place (float32, contiguous), or a float32 stand-in of T rows whose rows are
// copied into the real pool (in its dtype) after the kernel ran.
struct PoolTarget {
    at::Tensor pool, rows;
    bool direct;
    float *ptr() { return (direct ? pool : rows).data_ptr<float>(); }
    void finish(const at::Tensor &slots) {
        if (!direct) pool.view({-1, pool.size(-1)}).index_copy_(0, slots, rows.to(pool.scalar_type()));
    }
};

// A float buffer of at least n floats, kept from call to call (one per thread): the kernels' scratch and the
// transposed weights, without an allocation per call.
static std::vector<float> &scratch_floats(int64_t n) {
    thread_local std::vector<float> buf;
    if ((int64_t)buf.size() < n) buf.resize((size_t)n);
    return buf;
}

static PoolTarget target(const char *op, const at::Tensor &pool, int64_t t) {
    dk::expect_float(op, "pool", pool);
    const bool direct = pool.scalar_type() == at::kFloat && pool.is_contiguous();
    dk::expect(direct || pool.is_contiguous(), op, "pools must be contiguous");
    return {pool, direct ? at::Tensor() : at::empty({t, pool.size(-1)}, pool.options().dtype(at::kFloat)), direct};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attn_front_cpu(
        const at::Tensor &proj_in, const at::Tensor &q_norm_w, double q_eps, const at::Tensor &wq_b, int64_t n_heads,
        int64_t head_dim, double head_eps, const at::Tensor &kv_norm_w, double kv_eps, const at::Tensor &c,
        const at::Tensor &s, const at::Tensor &slots_in, const at::Tensor &kv_pool, at::IntArrayRef copy_offsets,
        at::TensorList copy_pools, const std::optional<at::Tensor> &idx_wq_b, int64_t idx_heads, int64_t idx_dim) {
    const char *op = "attn_front";
    dk::expect_float(op, "proj", proj_in);
    dk::expect_dim(op, "proj", proj_in, 2);
    dk::expect_dtype(op, "slots", slots_in, at::kLong);
    const int64_t t = proj_in.size(0), width = proj_in.size(1), qa = q_norm_w.size(0), r = c.size(-1);
    dk::expect(c.dim() == 2 && c.size(0) == t && s.sizes() == c.sizes(), op, "c and s must be [T, R]");
    dk::expect(r % 2 == 0 && r <= head_dim, op, "the rotated width must be even and at most the head width");
    dk::expect(wq_b.dim() == 2 && wq_b.size(0) == n_heads * head_dim && wq_b.size(1) == qa, op,
               "wq_b must be [H * D, q_lora_rank]");
    dk::expect(kv_norm_w.numel() == head_dim && kv_pool.size(-1) == head_dim, op, "kv rows have the head width");
    dk::expect(slots_in.numel() == t, op, "one slot per token");
    dk::expect(qa + head_dim <= width, op, "proj holds the q-LoRA input and the shared KV");
    dk::expect((int64_t)copy_offsets.size() == (int64_t)copy_pools.size(), op, "one offset per copy pool");
    auto slots = slots_in.contiguous();
    if (t) {
        const int64_t *sp = slots.data_ptr<int64_t>();
        int64_t lo = sp[0], hi = sp[0];
        for (int64_t i = 1; i < t; i++) {
            lo = std::min(lo, sp[i]);
            hi = std::max(hi, sp[i]);
        }
        dk::expect(lo >= 0 && hi < kv_pool.numel() / head_dim, op, "slots must be rows of kv_pool");
        for (const auto &p : copy_pools) dk::expect(hi < p.numel() / p.size(-1), op, "slots must be rows of every pool");
    }
    if (idx_wq_b.has_value()) {
        dk::expect(idx_wq_b->dim() == 2 && idx_wq_b->size(0) == idx_heads * idx_dim && idx_wq_b->size(1) == qa, op,
                   "idx_wq_b must be [Hi * di, q_lora_rank]");
        dk::expect(r <= idx_dim, op, "the rotated width fits the indexer head");
    }
    auto proj = dk::f32(proj_in), qn = dk::f32(q_norm_w), wb = dk::f32(wq_b), kvn = dk::f32(kv_norm_w);
    auto cf = dk::f32(c), sf = dk::f32(s);
    at::Tensor iw = idx_wq_b.has_value() ? dk::f32(*idx_wq_b) : at::Tensor();
    PoolTarget kv = target(op, kv_pool, t);
    std::vector<PoolTarget> copies;
    std::vector<int64_t> offs, widths, addrs;
    for (size_t i = 0; i < copy_pools.size(); i++) {
        copies.push_back(target(op, copy_pools[i], t));
        const int64_t w = copy_pools[i].size(-1);
        dk::expect(copy_offsets[i] >= 0 && copy_offsets[i] + w <= width, op, "copied columns lie inside proj");
        offs.push_back(copy_offsets[i]);
        widths.push_back(w);
    }
    for (auto &p : copies) addrs.push_back((int64_t)(intptr_t)p.ptr());
    // One slot list serves all pools: the real slots when every pool is written in place, else 0 .. T - 1
    // (the in-place pools then go through stand-ins too).
    bool all_direct = kv.direct;
    for (auto &p : copies) all_direct = all_direct && p.direct;
    if (!all_direct) {
        if (kv.direct) kv = {kv_pool, at::empty({t, head_dim}, proj.options()), false};
        for (size_t i = 0; i < copies.size(); i++)
            if (copies[i].direct) {
                copies[i] = {copy_pools[i], at::empty({t, copy_pools[i].size(-1)}, proj.options()), false};
                addrs[i] = (int64_t)(intptr_t)copies[i].ptr();
            }
    }
    // Stand-in pools are written at rows 0 .. T - 1.
    const at::Tensor write_slots = all_direct ? slots : at::arange(t, slots.options());
    auto opts = proj.options();
    const bool with_idx = iw.defined();
    auto q_latent = at::empty({t, qa}, opts), q = at::empty({t, n_heads, head_dim}, opts);
    auto qi = with_idx ? at::empty({t, idx_heads, idx_dim}, opts) : at::empty({0}, opts);
    if (t) {
        const int64_t hd = n_heads * head_dim, id = with_idx ? idx_heads * idx_dim : 0;
        std::vector<float> &buf = scratch_floats(t * (hd + head_dim + id) + qa * (padded16(hd) + padded16(id)));
        float *wq_bt = buf.data(), *idx_bt = wq_bt + qa * padded16(hd), *scratch = idx_bt + qa * padded16(id);
        transpose_weights(wb.data_ptr<float>(), hd, qa, wq_bt);
        if (with_idx) transpose_weights(iw.data_ptr<float>(), id, qa, idx_bt);
        attn_front(proj.data_ptr<float>(), t, width, qa, qn.data_ptr<float>(), (float)q_eps, wq_bt,
                   n_heads, head_dim, (float)head_eps, kvn.data_ptr<float>(), (float)kv_eps, r, cf.data_ptr<float>(),
                   sf.data_ptr<float>(), write_slots.data_ptr<int64_t>(), kv.ptr(), (int64_t)offs.size(), offs.data(),
                   widths.data(), addrs.data(), with_idx ? idx_bt : nullptr, idx_heads, idx_dim,
                   q_latent.data_ptr<float>(), q.data_ptr<float>(), with_idx ? qi.data_ptr<float>() : nullptr, scratch);
        kv.finish(slots);
        for (auto &p : copies) p.finish(slots);
    }
    const auto dt = proj_in.scalar_type();
    return {dk::like(q_latent, dt), dk::like(q, dt), dk::like(qi, dt)};
}

at::Tensor attn_back_cpu(const at::Tensor &x, const at::Tensor &c, const at::Tensor &s, const at::Tensor &wo_a,
                                int64_t groups, const at::Tensor &wo_b) {
    const char *op = "attn_back";
    dk::expect_dim(op, "x", x, 3);
    const int64_t t = x.size(0), h = x.size(1), d = x.size(2), r = c.size(-1);
    dk::expect(c.dim() == 2 && c.size(0) == t && s.sizes() == c.sizes(), op, "c and s must be [T, R]");
    dk::expect(r % 2 == 0 && r <= d, op, "the rotated width must be even and at most the head width");
    dk::expect(groups > 0 && (h * d) % groups == 0, op, "the heads split evenly into the output groups");
    const int64_t width = h * d / groups;
    dk::expect(wo_a.dim() == 2 && wo_a.size(1) == width && wo_a.size(0) % groups == 0, op,
               "wo_a must be [G * rank, H * D / G]");
    const int64_t rank = wo_a.size(0) / groups;
    dk::expect(wo_b.dim() == 2 && wo_b.size(1) == groups * rank, op, "wo_b must be [hidden, G * rank]");
    auto xf = dk::f32(x), cf = dk::f32(c), sf = dk::f32(s), wa = dk::f32(wo_a), wb = dk::f32(wo_b);
    auto out = at::empty({t, wo_b.size(0)}, xf.options());
    if (t) {
        const int64_t hidden = wo_b.size(0), rp = padded16(rank);
        std::vector<float> &buf = scratch_floats(t * (h * d + groups * rank) + groups * width * rp +
                                                 groups * rank * padded16(hidden));
        float *wo_at = buf.data(), *wo_bt = wo_at + groups * width * rp, *scratch = wo_bt + groups * rank * padded16(hidden);
        for (int64_t g = 0; g < groups; g++)
            transpose_weights(wa.data_ptr<float>() + g * rank * width, rank, width, wo_at + g * width * rp);
        transpose_weights(wb.data_ptr<float>(), hidden, groups * rank, wo_bt);
        attn_back(xf.data_ptr<float>(), t, h, d, r, cf.data_ptr<float>(), sf.data_ptr<float>(), wo_at, groups, rank,
                  wo_bt, hidden, out.data_ptr<float>(), scratch);
    }
    return dk::like(out, x.scalar_type());
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("attn_front(Tensor proj, Tensor q_norm_w, float q_eps, Tensor wq_b, int n_heads, int head_dim,"
          " float head_eps, Tensor kv_norm_w, float kv_eps, Tensor c, Tensor s, Tensor slots, Tensor(a!) kv_pool,"
          " int[] copy_offsets, Tensor(b!)[] copy_pools, Tensor? idx_wq_b, int idx_heads, int idx_dim)"
          " -> (Tensor q_latent, Tensor q, Tensor qi)");
    m.def("attn_back(Tensor x, Tensor c, Tensor s, Tensor wo_a, int groups, Tensor wo_b) -> Tensor");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) {
    m.impl("attn_front", &attn_front_cpu);
    m.impl("attn_back", &attn_back_cpu);
}
