// deepseek_kernels::engram_hash on the CPU: rolling XOR n-gram hashes and their table rows (exact integers).
#include "../csrc/torch_glue.h"

static at::Tensor engram_hash_cpu(const at::Tensor &compressed, const at::Tensor &positions, const at::Tensor &multipliers,
                                  const at::Tensor &primes, const at::Tensor &offsets, int64_t n_heads, int64_t pad_id,
                                  int64_t dead_id) {
    const char *op = "engram_hash";
    for (auto *t : {&compressed, &positions, &multipliers, &primes, &offsets}) dk::expect_dtype(op, "inputs", *t, at::kLong);
    dk::expect_dim(op, "multipliers", multipliers, 2);
    const int64_t layers = multipliers.size(0), max_ngram = multipliers.size(1), lookback = max_ngram - 1;
    const int64_t t = positions.numel(), cols = lookback * n_heads;
    dk::expect(max_ngram >= 2 && n_heads >= 1, op, "need max_ngram >= 2 and n_heads >= 1");
    dk::expect(compressed.numel() == t + lookback, op, "compressed must hold max_ngram - 1 lookback ids, then one per position");
    dk::expect(primes.dim() == 2 && primes.size(0) == layers && primes.size(1) == cols, op,
               "primes must be [layers, (max_ngram - 1) * n_heads]");
    dk::expect(offsets.sizes() == primes.sizes(), op, "offsets must have the shape of primes");
    auto ids = compressed.contiguous(), pos = positions.contiguous(), mult = multipliers.contiguous();
    auto pr = primes.contiguous(), off = offsets.contiguous();
    const int64_t *c = ids.data_ptr<int64_t>(), *p = pos.data_ptr<int64_t>(), *mu = mult.data_ptr<int64_t>();
    const int64_t *pm = pr.data_ptr<int64_t>(), *of = off.data_ptr<int64_t>();
    for (int64_t i = 0; i < layers * cols; i++) dk::expect(pm[i] > 0, op, "primes must be positive");
    auto out = at::empty({t, layers, cols}, ids.options());
    int64_t *o = out.data_ptr<int64_t>();
    for (int64_t r = 0; r < t; r++) {
        for (int64_t l = 0; l < layers; l++) {
            uint64_t rolling = 0;
            bool blocked = false;
            for (int64_t s = 0; s < max_ngram; s++) {
                const int64_t src = c[r + lookback - s];
                blocked = blocked || p[r] - s < 0 || src == dead_id;
                const uint64_t v = (uint64_t)(blocked ? pad_id : src);
                rolling ^= v * (uint64_t)mu[l * max_ngram + s];  // wraps modulo 2^64, as torch's int64 product
                if (!s) continue;
                for (int64_t j = 0; j < n_heads; j++) {
                    const int64_t col = (s - 1) * n_heads + j, prime = pm[l * cols + col];
                    int64_t m = (int64_t)rolling % prime;
                    if (m < 0) m += prime;  // floor modulo (prime > 0)
                    o[(r * layers + l) * cols + col] = m + of[l * cols + col];
                }
            }
        }
    }
    return out;
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("engram_hash(Tensor compressed, Tensor positions, Tensor multipliers, Tensor primes, Tensor offsets, "
          "int n_heads, int pad_id, int dead_id) -> Tensor");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("engram_hash", &engram_hash_cpu); }
