// deepseek_kernels::wo_linear and ::wo_experts on the CPU: schemas, argument checks, threads over output rows.
#include "cpu.h"
#include "../csrc/torch_glue.h"
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

namespace {

const char *fmt_name(int64_t fmt) {
    static const char *names[] = {"bf16", "int8", "fp8", "mxfp4"};
    return fmt >= 0 && fmt < 4 ? names[fmt] : "?";
}

// Checks one packed matrix (`lead` leading expert axes) and returns its view for the kernel.
dk_wo::Packed packed_view(const char *op, const char *name, const at::Tensor &w, const c10::optional<at::Tensor> &scale,
                          int64_t fmt, int64_t br, int64_t bc, int64_t lead) {
    dk::expect(fmt >= 0 && fmt <= 3, op, "fmt must be 0 (bf16), 1 (int8), 2 (fp8) or 3 (mxfp4)");
    dk::expect(w.dim() == 2 + lead && w.is_contiguous(), op,
               std::string(name) + " must be a contiguous tensor of " + std::to_string(2 + lead) + " dimensions");
    const auto want = fmt == dk_wo::BF16 ? at::kBFloat16 : fmt == dk_wo::INT8 ? at::kChar : at::kByte;
    dk::expect_dtype(op, name, w, want);
    dk_wo::Packed p{};
    p.fmt = fmt;
    p.N = w.size(lead);
    p.K = fmt == dk_wo::MXFP4 ? 2 * w.size(lead + 1) : w.size(lead + 1);
    p.w = reinterpret_cast<const uint8_t *>(w.data_ptr());
    p.br = br;
    p.bc = bc;
    const int64_t experts = lead ? w.size(0) : 1;
    if (fmt == dk_wo::BF16) {
        dk::expect(!scale.has_value(), op, std::string(name) + ": bf16 weights take no scale");
        return p;
    }
    dk::expect(scale.has_value() && scale->is_contiguous(), op, std::string(name) + ": a contiguous scale is needed for " + fmt_name(fmt));
    const auto &s = *scale;
    if (fmt == dk_wo::MXFP4) {
        dk::expect(p.K % 32 == 0, op, std::string(name) + ": MXFP4 rows must hold a multiple of 32 values");
        dk::expect_dtype(op, "scale", s, at::kByte);
        dk::expect(s.numel() == experts * p.N * (p.K / 32), op, std::string(name) + ": MXFP4 scales must be [..., N, K / 32] e8m0 bytes");
        p.escale = s.data_ptr<uint8_t>();
        return p;
    }
    dk::expect_dtype(op, "scale", s, at::kFloat);
    dk::expect(br >= 1 && bc >= 1 && (bc % 8 == 0 || bc >= p.K), op,
               "block_rows and block_cols must be positive, block_cols a multiple of 8 or at least K");
    const int64_t grid = ((p.N + br - 1) / br) * ((p.K + bc - 1) / bc);
    dk::expect(s.numel() == experts * grid, op,
               std::string(name) + ": scale must hold one float per block of block_rows x block_cols weights");
    p.fscale = s.data_ptr<float>();
    return p;
}

// Expert `e` of a stacked packed tensor.
dk_wo::Packed expert(const dk_wo::Packed &all, int64_t e) {
    dk_wo::Packed p = all;
    p.w += e * all.N * dk_wo::row_bytes(all.fmt, all.K);
    if (all.escale) p.escale += e * all.N * (all.K / 32);
    if (all.fscale) p.fscale += e * ((all.N + all.br - 1) / all.br) * ((all.K + all.bc - 1) / all.bc);
    return p;
}

// x rows copied into a zero-padded buffer whose row count is a multiple of the kernel's tile height.
std::vector<float> padded(const float *x, int64_t M, int64_t K, int64_t ldx, int64_t &Mp) {
    const int64_t t = dk_wo::tile_rows(M);
    Mp = (M + t - 1) / t * t;
    std::vector<float> buf(Mp * K, 0.0f);
    for (int64_t m = 0; m < M; m++) std::copy(x + m * ldx, x + m * ldx + K, buf.data() + m * K);
    return buf;
}

int64_t grain_rows(int64_t K) { return std::max<int64_t>(4, 32768 / std::max<int64_t>(K, 1)); }

at::Tensor wo_linear_cpu(const at::Tensor &x, const at::Tensor &weight, const c10::optional<at::Tensor> &scale,
                         int64_t fmt, int64_t block_rows, int64_t block_cols) {
    const char *op = "wo_linear";
    dk::expect_float(op, "x", x);
    const auto p = packed_view(op, "weight", weight, scale, fmt, block_rows, block_cols, 0);
    dk::expect(x.dim() >= 1 && x.size(-1) == p.K, op, "x's last dimension must be the weight's input width");
    auto xf = dk::f32(x).reshape({-1, p.K});
    const int64_t M = xf.size(0), N = p.N, K = p.K;
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = N;
    auto out = at::empty({M, N}, x.options().dtype(at::kFloat));
    if (M && N) {
        int64_t Mp;
        auto buf = padded(xf.data_ptr<float>(), M, K, K, Mp);
        std::vector<float> y(Mp == M ? 0 : Mp * N);
        float *dst = Mp == M ? out.data_ptr<float>() : y.data();
        at::parallel_for(0, N, grain_rows(K), [&](int64_t n0, int64_t n1) {
            dk_wo::rows(p, buf.data(), Mp, K, n0, n1, dst, N);
        });
        if (Mp != M) std::copy(y.begin(), y.begin() + M * N, out.data_ptr<float>());
    }
    return dk::like(out.view(shape), x.scalar_type());
}

inline float silu(float v) { return v / (1.0f + std::exp(-v)); }

at::Tensor wo_experts_cpu(const at::Tensor &x, const at::Tensor &experts, const at::Tensor &weights,
                          const at::Tensor &w13, const c10::optional<at::Tensor> &s13, const at::Tensor &w2,
                          const c10::optional<at::Tensor> &s2, int64_t fmt, int64_t block_rows, int64_t block_cols,
                          int64_t down_block_rows, int64_t down_block_cols, double limit) {
    const char *op = "wo_experts";
    dk::expect_float(op, "x", x);
    dk::expect_dim(op, "x", x, 2);
    dk::expect_dim(op, "experts", experts, 2);
    dk::expect_dtype(op, "experts", experts, at::kLong);
    dk::expect(weights.sizes() == experts.sizes(), op, "weights must have the shape of experts [T, k]");
    const auto up = packed_view(op, "w13", w13, s13, fmt, block_rows, block_cols, 1);
    const auto down = packed_view(op, "w2", w2, s2, fmt, down_block_rows, down_block_cols, 1);
    const int64_t T = x.size(0), H = x.size(1), k = experts.size(1), E = w13.size(0);
    dk::expect(experts.size(0) == T, op, "experts must have one row per token of x");
    dk::expect(up.K == H && up.N % 2 == 0, op, "w13 must be [E, 2 I, H] (gate rows, then up rows)");
    const int64_t I = up.N / 2;
    dk::expect(w2.size(0) == E && down.N == H && down.K == I, op, "w2 must be [E, H, I]");
    auto xf = dk::f32(x);
    auto ids = experts.contiguous();
    auto wf = dk::f32(weights);
    const int64_t *id = ids.data_ptr<int64_t>();
    for (int64_t i = 0; i < T * k; i++) dk::expect(id[i] >= 0 && id[i] < E, op, "expert ids must lie in [0, E)");
    // the (token, slot) pairs of each expert, experts in increasing order
    std::vector<int64_t> count(E + 1, 0);
    for (int64_t i = 0; i < T * k; i++) count[id[i] + 1]++;
    for (int64_t e = 0; e < E; e++) count[e + 1] += count[e];
    std::vector<int64_t> pairs(T * k), fill(count.begin(), count.end() - 1);
    for (int64_t i = 0; i < T * k; i++) pairs[fill[id[i]]++] = i;
    std::vector<int64_t> active;
    for (int64_t e = 0; e < E; e++)
        if (count[e + 1] > count[e]) active.push_back(e);
    // per active expert: its tokens' rows, padded to the tile height, at offset base[a] of the gathered buffers
    const int64_t A = active.size();
    std::vector<int64_t> rows_of(A), base(A + 1, 0);
    for (int64_t a = 0; a < A; a++) {
        const int64_t c = count[active[a] + 1] - count[active[a]], t = dk_wo::tile_rows(c);
        rows_of[a] = (c + t - 1) / t * t;
        base[a + 1] = base[a] + rows_of[a];
    }
    const int64_t R = base[A];
    std::vector<float> xs(R * H, 0.0f), g(R * 2 * I), act(R * I, 0.0f), ys(R * H);
    const float *xp = xf.data_ptr<float>();
    for (int64_t a = 0; a < A; a++)
        for (int64_t j = count[active[a]]; j < count[active[a] + 1]; j++)
            std::copy(xp + (pairs[j] / k) * H, xp + (pairs[j] / k + 1) * H, xs.data() + (base[a] + j - count[active[a]]) * H);
    // work items: (active expert, block of output rows), one parallel_for per projection
    auto project = [&](const dk_wo::Packed &all, const std::vector<float> &in, int64_t in_w, std::vector<float> &res) {
        const int64_t block = std::max<int64_t>(8, grain_rows(in_w)), per = (all.N + block - 1) / block;
        at::parallel_for(0, A * per, 1, [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1; i++) {
                const int64_t a = i / per, n0 = (i % per) * block, n1 = std::min(all.N, n0 + block);
                dk_wo::rows(expert(all, active[a]), in.data() + base[a] * in_w, rows_of[a], in_w, n0, n1,
                            res.data() + base[a] * all.N, all.N);
            }
        });
    };
    project(up, xs, H, g);
    const float lim = float(limit);
    for (int64_t a = 0; a < A; a++) {
        const int64_t c = count[active[a] + 1] - count[active[a]];
        for (int64_t r = base[a]; r < base[a] + c; r++)
            for (int64_t i = 0; i < I; i++) {
                const float gate = std::min(g[r * 2 * I + i], lim), u = std::min(std::max(g[r * 2 * I + I + i], -lim), lim);
                act[r * I + i] = silu(gate) * u;
            }
    }
    project(down, act, I, ys);
    // each token sums its experts' outputs (times the routing weight) in increasing expert order, from zero
    auto out = at::zeros({T, H}, x.options().dtype(at::kFloat));
    float *o = out.data_ptr<float>();
    const float *wp = wf.data_ptr<float>();
    for (int64_t a = 0; a < A; a++)
        for (int64_t j = count[active[a]]; j < count[active[a] + 1]; j++) {
            const int64_t pair = pairs[j], t = pair / k;
            const float wt = wp[pair], *y = ys.data() + (base[a] + j - count[active[a]]) * H;
            for (int64_t h = 0; h < H; h++) o[t * H + h] += y[h] * wt;
        }
    return dk::like(out, x.scalar_type());
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("wo_linear(Tensor x, Tensor weight, Tensor? scale, int fmt, int block_rows, int block_cols) -> Tensor");
    m.def("wo_experts(Tensor x, Tensor experts, Tensor weights, Tensor w13, Tensor? s13, Tensor w2, Tensor? s2, "
          "int fmt, int block_rows, int block_cols, int down_block_rows, int down_block_cols, float limit) -> Tensor");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) {
    m.impl("wo_linear", &wo_linear_cpu);
    m.impl("wo_experts", &wo_experts_cpu);
}
