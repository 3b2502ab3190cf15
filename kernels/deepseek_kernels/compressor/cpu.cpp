// deepseek_kernels::compress_pool on the CPU.
#include "cpu.h"
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

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) { m.def("compress_pool(Tensor kv, Tensor gate) -> Tensor"); }
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("compress_pool", &compress_pool_cpu); }
