// deepseek_kernels::sink_attention (keys gathered per sequence) and ::sink_attention_paged (keys read from the
// paged pools) on the CPU.
#include "cpu.h"
#include "../csrc/torch_glue.h"

static at::Tensor sink_attention_cpu(const at::Tensor &q, const at::Tensor &keys, const at::Tensor &visible,
                                     const at::Tensor &sink, double scale) {
    const char *op = "sink_attention";
    dk::expect_dim(op, "q", q, 4);
    dk::expect_dim(op, "keys", keys, 3);
    dk::expect_dim(op, "visible", visible, 3);
    dk::expect_dtype(op, "visible", visible, at::kBool);
    const int64_t b = q.size(0), tq = q.size(1), h = q.size(2), d = q.size(3), k = keys.size(1);
    dk::expect(keys.size(0) == b && keys.size(2) == d, op, "keys must be [B, K, D]");
    dk::expect(visible.size(0) == b && visible.size(1) == tq && visible.size(2) == k, op,
               "visible must be [B, Tq, K]");
    dk::expect(sink.numel() == h, op, "one sink logit per head");
    auto qf = dk::f32(q), kf = dk::f32(keys), sf = dk::f32(sink);
    auto vis = visible.contiguous();
    auto out = at::empty({b, tq, h, d}, qf.options());
    auto probs = at::empty({std::max<int64_t>(k, 1)}, qf.options());
    if (out.numel())
        sink_attention(qf.data_ptr<float>(), kf.data_ptr<float>(), (const uint8_t *)vis.data_ptr<bool>(),
                       sf.data_ptr<float>(), b, tq, h, k, d, (float)scale, probs.data_ptr<float>(),
                       out.data_ptr<float>());
    return dk::like(out, q.scalar_type());
}

at::Tensor sink_attention_paged_cpu(const at::Tensor &q, const at::Tensor &kv_pool, const at::Tensor &key_slots,
                                           const at::Tensor &win_visible, const at::Tensor &sink, double scale,
                                           const std::optional<at::Tensor> &entry_pool,
                                           const std::optional<at::Tensor> &entry_slots,
                                           const std::optional<at::Tensor> &entry_visible,
                                           const std::optional<at::Tensor> &threshold) {
    const char *op = "sink_attention_paged";
    dk::expect_dim(op, "q", q, 4);
    const int64_t b = q.size(0), tq = q.size(1), h = q.size(2), d = q.size(3);
    dk::expect_float(op, "kv_pool", kv_pool);
    dk::expect(kv_pool.size(-1) == d, op, "kv_pool rows must have the head width D");
    dk::expect_dtype(op, "key_slots", key_slots, at::kLong);
    dk::expect(key_slots.dim() == 2 && key_slots.size(0) == b, op, "key_slots must be [B, Kw]");
    const int64_t kw = key_slots.size(1);
    dk::expect_dtype(op, "win_visible", win_visible, at::kBool);
    dk::expect(win_visible.dim() == 3 && win_visible.size(0) == b && win_visible.size(1) == tq &&
                   win_visible.size(2) == kw, op, "win_visible must be [B, Tq, Kw]");
    dk::expect(sink.numel() == h, op, "one sink logit per head");
    int64_t n = 0;
    at::Tensor ep, es, ev, th;
    if (entry_pool.has_value()) {
        ep = *entry_pool;
        dk::expect_float(op, "entry_pool", ep);
        dk::expect(ep.size(-1) == d, op, "entry_pool rows must have the head width D");
        dk::expect(entry_slots.has_value(), op, "entry_slots are needed with entry_pool");
        dk::expect(entry_visible.has_value() != threshold.has_value(), op,
                   "exactly one of entry_visible and threshold selects the visible entries");
        es = entry_slots->contiguous();
        dk::expect_dtype(op, "entry_slots", es, at::kLong);
        dk::expect(es.dim() == 2 && es.size(0) == b, op, "entry_slots must be [B, N]");
        n = es.size(1);
        if (entry_visible.has_value()) {
            ev = entry_visible->contiguous();
            dk::expect_dtype(op, "entry_visible", ev, at::kBool);
            dk::expect(ev.numel() == b * tq * n, op, "entry_visible must be [B, Tq, N]");
        } else {
            th = threshold->contiguous();
            dk::expect_dtype(op, "threshold", th, at::kLong);
            dk::expect(th.numel() == b * tq, op, "threshold must be [B, Tq]");
        }
    }
    auto qf = dk::f32(q), sf = dk::f32(sink), ks = key_slots.contiguous(), wv = win_visible.contiguous();
    // float32 pools are read in place; others through a float32 copy of the rows this call reads
    at::Tensor kvp = kv_pool;
    dk::expect_slots(op, "key_slots", ks, d ? kv_pool.numel() / d : 0);
    if (ep.defined()) dk::expect_slots(op, "entry_slots", es, d ? ep.numel() / d : 0);
    dk::gather_rows_f32(kvp, ks);
    if (ep.defined()) dk::gather_rows_f32(ep, es);
    auto out = at::empty({b, tq, h, d}, qf.options());
    // scratch kept per thread between calls (no allocation on the decode path once it has grown)
    thread_local std::vector<float> scratch;
    thread_local std::vector<const float *> ptrs;
    const int64_t kall = kw + n;
    if ((int64_t)scratch.size() < paged_scratch_floats(h, kall, d)) scratch.resize(paged_scratch_floats(h, kall, d));
    if ((int64_t)ptrs.size() < paged_scratch_ptrs(kall)) ptrs.resize(paged_scratch_ptrs(kall));
    if (out.numel())
        sink_attention_paged(qf.data_ptr<float>(), b, tq, h, d, kvp.data_ptr<float>(), ks.data_ptr<int64_t>(), kw,
                             (const uint8_t *)wv.data_ptr<bool>(), ep.defined() ? ep.data_ptr<float>() : nullptr,
                             es.defined() ? es.data_ptr<int64_t>() : nullptr, n,
                             ev.defined() ? (const uint8_t *)ev.data_ptr<bool>() : nullptr,
                             th.defined() ? th.data_ptr<int64_t>() : nullptr, sf.data_ptr<float>(), (float)scale,
                             scratch.data(), ptrs.data(), out.data_ptr<float>());
    return dk::like(out, q.scalar_type());
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("sink_attention(Tensor q, Tensor keys, Tensor visible, Tensor sink, float scale) -> Tensor");
    m.def("sink_attention_paged(Tensor q, Tensor kv_pool, Tensor key_slots, Tensor win_visible, Tensor sink,"
          " float scale, Tensor? entry_pool=None, Tensor? entry_slots=None, Tensor? entry_visible=None,"
          " Tensor? threshold=None) -> Tensor");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) {
    m.impl("sink_attention", &sink_attention_cpu);
    m.impl("sink_attention_paged", &sink_attention_paged_cpu);
}
