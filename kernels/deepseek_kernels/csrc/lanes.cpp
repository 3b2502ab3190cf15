// exp_lanes: the shared eight-lane exponential, exposed as an op so tests can bound its error.
#include "lanes.h"
#include "torch_glue.h"

static at::Tensor exp_lanes_cpu(const at::Tensor &x) {
    dk::expect_dtype("exp_lanes", "x", x, at::kFloat);
    auto xc = x.contiguous();
    auto out = at::empty_like(xc);
    exp_lanes(xc.data_ptr<float>(), xc.numel(), out.data_ptr<float>());
    return out;
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) { m.def("exp_lanes(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) { m.impl("exp_lanes", &exp_lanes_cpu); }
