// deepseek_kernels::compress_pool and ::compress_windows on the CPU.
#include "cpu.h"
#include "../rms_norm/cpu.h"
#include "../rope/cpu.h"
#include "../csrc/torch_glue.h"

#include <vector>

static at::Tensor compress_pool_cpu(const at::Tensor &kv, const at::Tensor &gate) {
    const char *op = "compress_pool";
    dk::expect_dim(op, "kv", kv, 3);
    dk::expect(gate.sizes() == kv.sizes(), op, "gate must have the shape of kv [N, R, C]");
    dk::expect_float(op, "kv", kv);
    const int64_t n = kv.size(0), r = kv.size(1), c = kv.size(2);
    dk::expect(r > 0, op, "an empty window");
    auto k = dk::f32(kv), g = dk::f32(gate);
    auto out = at::empty({n, c}, k.options());
    std::vector<float> w((size_t)r);
    compress_pool(k.data_ptr<float>(), g.data_ptr<float>(), n, r, c, out.data_ptr<float>(), w.data());
    return dk::like(out, kv.scalar_type());
}

#if defined(__AVX512F__)
// compress_windows without the gathered copies: sixteen channels of a window at a time, its rows read straight
// from the pools, through compress_pool's operations in its order (the gate plus ape; the running maximum; each
// weight exp(gate - max) and their running sum; the running sum of kv * (weight / sum)), the exponentials
// sixteen at a time with expf's bits (expf16); then rms_norm and rope_apply on the pooled rows as before.
static void compress_windows_fused(float *ep, const float *kvp, const float *gp, const float *ap, const int64_t *ws,
                                   const int64_t *ps, const bool *has, bool overlap, int64_t n, int64_t r, int64_t d,
                                   const float *nw, float eps, int64_t rot, const float *c, const float *s,
                                   const int64_t *os) {
    const int64_t width = overlap ? 2 * d : d, rr = overlap ? 2 * r : r, off = overlap ? d : 0;
    thread_local std::vector<float> buf;
    if ((int64_t)buf.size() < 2 * n * d + 16 * rr) buf.resize((size_t)(2 * n * d + 16 * rr));
    float *pooled = buf.data(), *normed = pooled + n * d, *wts = normed + n * d;
    const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
    const bool lanes_match = expf_glibc16_matches_expf();
    for (int64_t i = 0; i < n; i++) {
        const int64_t *wrow = ws + i * r, *prow = ps + i * r;
        const bool prior = overlap && has[i];
        for (int64_t c0 = 0; c0 < d; c0 += 16) {
            const __mmask16 m = d - c0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (d - c0)) - 1);
            /* window row q: the previous window's first d channels (q < r, CSA), else this window's own */
            __m512 mx = neg_inf;
            for (int64_t q = 0; q < rr; q++) {
                __m512 g;
                if (overlap && q < r) {
                    g = prior ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, gp + prow[q] * width + c0),
                                              _mm512_maskz_loadu_ps(m, ap + q * width + c0))
                              : neg_inf;
                } else {
                    const int64_t j = overlap ? q - r : q;
                    g = _mm512_add_ps(_mm512_maskz_loadu_ps(m, gp + wrow[j] * width + off + c0),
                                      _mm512_maskz_loadu_ps(m, ap + j * width + off + c0));
                }
                _mm512_storeu_ps(wts + q * 16, g);
                mx = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(g, mx, _CMP_GT_OQ), mx, g);
            }
            __m512 sum = _mm512_setzero_ps();
            for (int64_t q = 0; q < rr; q++) {
                const __m512 w = expf16(_mm512_sub_ps(_mm512_loadu_ps(wts + q * 16), mx), lanes_match);
                _mm512_storeu_ps(wts + q * 16, w);
                sum = _mm512_add_ps(sum, w);
            }
            __m512 acc = _mm512_setzero_ps();
            for (int64_t q = 0; q < rr; q++) {
                __m512 kv;
                if (overlap && q < r)
                    kv = prior ? _mm512_maskz_loadu_ps(m, kvp + prow[q] * width + c0) : _mm512_setzero_ps();
                else
                    kv = _mm512_maskz_loadu_ps(m, kvp + wrow[overlap ? q - r : q] * width + off + c0);
                acc = _mm512_add_ps(acc, _mm512_mul_ps(kv, _mm512_div_ps(_mm512_loadu_ps(wts + q * 16), sum)));
            }
            _mm512_mask_storeu_ps(pooled + i * d + c0, m, acc);
        }
    }
    rms_norm(pooled, n, d, d, nw, eps, normed);
    for (int64_t i = 0; i < n; i++) rope_apply(normed + i * d, 1, 1, d, rot, c + i * rot, s + i * rot, ep + os[i] * d);
}
#endif

// The windows a step closes, pooled, normed, rotated and stored in one call (see compress_windows_reference):
// the same compress_pool, rms_norm and rope_apply code as the three ops, on rows gathered here.
void compress_windows_cpu(at::Tensor entry_pool, const at::Tensor &kv_pool, const at::Tensor &gate_pool,
                                 const at::Tensor &ape, const at::Tensor &window_slots, const at::Tensor &prior_slots,
                                 const at::Tensor &has_prior, bool overlap, const at::Tensor &norm_weight, double eps,
                                 const at::Tensor &c, const at::Tensor &s, const at::Tensor &out_slots) {
    const char *op = "compress_windows";
    for (const at::Tensor *t : std::initializer_list<const at::Tensor *>{&entry_pool, &kv_pool, &gate_pool})
        dk::expect(t->scalar_type() == at::kFloat && t->is_contiguous(), op, "the pools must be contiguous float32");
    dk::expect_dim(op, "window_slots", window_slots, 2);
    dk::expect_dtype(op, "window_slots", window_slots, at::kLong);
    const int64_t n = window_slots.size(0), r = window_slots.size(1), d = entry_pool.size(-1);
    const int64_t width = kv_pool.size(-1), rows = kv_pool.numel() / std::max<int64_t>(width, 1);
    const int64_t entry_rows = entry_pool.numel() / std::max<int64_t>(d, 1);
    dk::expect(r > 0 && d > 0, op, "an empty window or entry");
    dk::expect(width == (overlap ? 2 * d : d) && gate_pool.sizes() == kv_pool.sizes(), op,
               "kv and gate pools must be [.., entry width] (twice it with overlap) and of one shape");
    dk::expect(ape.scalar_type() == at::kFloat && ape.dim() == 2 && ape.size(0) == r && ape.size(1) == width, op,
               "ape must be float32 [rate, pool width]");
    dk::expect_dtype(op, "prior_slots", prior_slots, at::kLong);
    dk::expect(prior_slots.sizes() == window_slots.sizes(), op, "prior_slots must have the shape of window_slots");
    dk::expect_dtype(op, "has_prior", has_prior, at::kBool);
    dk::expect(has_prior.numel() == n, op, "one has_prior flag per window");
    dk::expect(norm_weight.scalar_type() == at::kFloat && norm_weight.numel() == d, op,
               "norm_weight must be float32 with one entry per channel");
    dk::expect(c.scalar_type() == at::kFloat && c.dim() == 2 && c.size(0) == n && c.sizes() == s.sizes() &&
                   s.scalar_type() == at::kFloat, op, "c and s must be float32 [windows, rotated width]");
    const int64_t rot = c.size(1);
    dk::expect(rot % 2 == 0 && rot <= d, op, "the rotated width must be even and at most the entry width");
    dk::expect_dtype(op, "out_slots", out_slots, at::kLong);
    dk::expect(out_slots.numel() == n, op, "one output row per window");
    auto ws_t = window_slots.contiguous(), ps_t = prior_slots.contiguous(), has_t = has_prior.contiguous();
    auto os_t = out_slots.contiguous(), ape_t = ape.contiguous(), nw_t = norm_weight.contiguous();
    auto c_t = c.contiguous(), s_t = s.contiguous();
    const int64_t *ws = ws_t.data_ptr<int64_t>(), *ps = ps_t.data_ptr<int64_t>(), *os = os_t.data_ptr<int64_t>();
    const bool *has = has_t.data_ptr<bool>();
    for (int64_t i = 0; i < n * r; i++)
        dk::expect(ws[i] >= 0 && ws[i] < rows && (!overlap || (ps[i] >= 0 && ps[i] < rows)), op,
                   "window rows must lie inside the pools");
    for (int64_t i = 0; i < n; i++) dk::expect(os[i] >= 0 && os[i] < entry_rows, op, "out_slots outside the entry pool");
    if (!n) return;
#if defined(__AVX512F__)
    compress_windows_fused(entry_pool.data_ptr<float>(), kv_pool.data_ptr<float>(), gate_pool.data_ptr<float>(),
                           ape_t.data_ptr<float>(), ws, ps, has, overlap, n, r, d, nw_t.data_ptr<float>(), (float)eps,
                           rot, c_t.data_ptr<float>(), s_t.data_ptr<float>(), os);
#else
    const float *kvp = kv_pool.data_ptr<float>(), *gp = gate_pool.data_ptr<float>(), *ap = ape_t.data_ptr<float>();
    const int64_t rr = overlap ? 2 * r : r;
    std::vector<float> kv((size_t)(n * rr * d)), gate((size_t)(n * rr * d)), pooled((size_t)(n * d)),
        normed((size_t)(n * d)), out((size_t)(n * d)), w((size_t)rr);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < r; j++) {
            const float *kr = kvp + ws[i * r + j] * width, *gr = gp + ws[i * r + j] * width, *ar = ap + j * width;
            // the window's own rows: all channels (HCA), or the last d after the previous window's rows (CSA)
            float *kd = kv.data() + (i * rr + (overlap ? r : 0) + j) * d, *gd = gate.data() + (i * rr + (overlap ? r : 0) + j) * d;
            const int64_t off = overlap ? d : 0;
            for (int64_t k = 0; k < d; k++) {
                kd[k] = kr[off + k];
                gd[k] = gr[off + k] + ar[off + k];
            }
            if (!overlap) continue;
            float *kp = kv.data() + (i * rr + j) * d, *gq = gate.data() + (i * rr + j) * d;
            if (has[i]) {
                const float *pk = kvp + ps[i * r + j] * width, *pg = gp + ps[i * r + j] * width;
                for (int64_t k = 0; k < d; k++) {
                    kp[k] = pk[k];
                    gq[k] = pg[k] + ar[k];
                }
            } else {
                for (int64_t k = 0; k < d; k++) {
                    kp[k] = 0.0f;
                    gq[k] = -INFINITY;
                }
            }
        }
    }
    compress_pool(kv.data(), gate.data(), n, rr, d, pooled.data(), w.data());
    rms_norm(pooled.data(), n, d, d, nw_t.data_ptr<float>(), (float)eps, normed.data());
    rope_apply(normed.data(), n, 1, d, rot, c_t.data_ptr<float>(), s_t.data_ptr<float>(), out.data());
    float *ep = entry_pool.data_ptr<float>();
    for (int64_t i = 0; i < n; i++) memcpy(ep + os[i] * d, out.data() + i * d, (size_t)d * sizeof(float));
#endif
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("compress_pool(Tensor kv, Tensor gate) -> Tensor");
    m.def("compress_windows(Tensor(a!) entry_pool, Tensor kv_pool, Tensor gate_pool, Tensor ape, Tensor window_slots,"
          " Tensor prior_slots, Tensor has_prior, bool overlap, Tensor norm_weight, float eps, Tensor c, Tensor s,"
          " Tensor out_slots) -> ()");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) {
    m.impl("compress_pool", &compress_pool_cpu);
    m.impl("compress_windows", &compress_windows_cpu);
}
