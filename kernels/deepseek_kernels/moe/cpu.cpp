// deepseek_kernels::moe_route (expert choice and weights) and ::moe_dense_experts (routing, SwiGLU and down
// projections after the stacked up-projection, for layers with few experts) on the CPU.
#include "cpu.h"
#include "../csrc/torch_glue.h"

#include <vector>

static int score_code(const std::string &name) {
    if (name == "sqrtsoftplus") return 0;
    if (name == "softmax") return 1;
    if (name == "sigmoid") return 2;
    TORCH_CHECK(false, "deepseek_kernels::moe_dense_experts: unknown score function '", name, "'");
}

// The routing inputs both ops share, checked once: hash routing's tid2eid rows (only those this step reads)
// must hold expert indices, the bias one value per expert.
struct RoutingInputs {
    at::Tensor t2e, ids, bias;
    const int64_t *t2e_ptr() const { return t2e.defined() ? t2e.data_ptr<int64_t>() : nullptr; }
    const int64_t *ids_ptr() const { return ids.defined() ? ids.data_ptr<int64_t>() : nullptr; }
};

static RoutingInputs check_routing(const char *op, int64_t t, int64_t n_experts, int64_t top_k,
                                   const std::optional<at::Tensor> &tid2eid, const std::optional<at::Tensor> &input_ids,
                                   const std::optional<at::Tensor> &bias) {
    RoutingInputs r;
    if (tid2eid.has_value()) {
        dk::expect(input_ids.has_value(), op, "hash routing needs input_ids");
        r.t2e = tid2eid->contiguous(), r.ids = input_ids->contiguous();
        dk::expect_dtype(op, "tid2eid", r.t2e, at::kLong);
        dk::expect_dtype(op, "input_ids", r.ids, at::kLong);
        dk::expect(r.t2e.dim() == 2 && r.t2e.size(1) == top_k, op, "tid2eid must be [vocab, top_k]");
        dk::expect(r.ids.numel() == t, op, "one input id per token");
        // Plain loops over the ids and the rows they pick (a few hundred integers; the tensor reductions they
        // replace cost more in dispatch than in work).
        const int64_t *ids = r.ids.data_ptr<int64_t>(), *t2e = r.t2e.data_ptr<int64_t>(), rows = r.t2e.size(0);
        bool ids_ok = true, entries_ok = true;
        for (int64_t i = 0; i < t; i++) ids_ok &= ids[i] >= 0 && ids[i] < rows;
        dk::expect(ids_ok, op, "input ids must index tid2eid");
        for (int64_t i = 0; i < t; i++)
            for (int64_t j = 0; j < top_k; j++) {
                const int64_t e = t2e[ids[i] * top_k + j];
                entries_ok &= e >= 0 && e < n_experts;
            }
        dk::expect(entries_ok, op, "tid2eid entries must be expert indices");
    }
    if (bias.has_value()) {
        r.bias = dk::f32(*bias);
        dk::expect(r.bias.numel() == n_experts, op, "one bias per expert");
    }
    return r;
}

at::Tensor moe_dense_experts_cpu(const at::Tensor &y, int64_t n_experts, int64_t inter, int64_t top_k,
                                        c10::string_view score_func, const std::optional<at::Tensor> &tid2eid,
                                        const std::optional<at::Tensor> &input_ids,
                                        const std::optional<at::Tensor> &bias, double scale, double limit,
                                        const at::Tensor &down) {
    const char *op = "moe_dense_experts";
    const int func = score_code(std::string(score_func));
    dk::expect(1 <= top_k && top_k <= n_experts, op, "needs 1 <= top_k <= n_experts");
    dk::expect_dim(op, "y", y, 2);
    dk::expect_dim(op, "down", down, 3);
    const int64_t t = y.size(0), h = down.size(2);
    dk::expect(y.size(1) == n_experts + 2 * (n_experts + 1) * inter, op, "y must be [T, E + 2 (E + 1) I]");
    dk::expect(down.size(0) == n_experts + 1 && down.size(1) == inter, op, "down must be [E + 1, I, H]");
    const RoutingInputs r = check_routing(op, t, n_experts, top_k, tid2eid, input_ids, bias);
    auto yf = dk::f32(y), df = dk::f32(down);
    auto out = at::empty({t, h}, yf.options());
    if (t)
        moe_experts(yf.data_ptr<float>(), t, n_experts, inter, h, top_k, func,
                    r.t2e_ptr(), r.ids_ptr(), dk::ptr_or_null(r.bias), (float)scale, (float)limit, df.data_ptr<float>(), out.data_ptr<float>());
    return dk::like(out, y.scalar_type());
}

static std::tuple<at::Tensor, at::Tensor> moe_route_cpu(const at::Tensor &logits, int64_t top_k,
                                                        c10::string_view score_func,
                                                        const std::optional<at::Tensor> &tid2eid,
                                                        const std::optional<at::Tensor> &input_ids,
                                                        const std::optional<at::Tensor> &bias, double scale) {
    const char *op = "moe_route";
    const int func = score_code(std::string(score_func));
    dk::expect_dim(op, "logits", logits, 2);
    const int64_t t = logits.size(0), e = logits.size(1);
    dk::expect(1 <= top_k && top_k <= e, op, "needs 1 <= top_k <= number of experts");
    const RoutingInputs r = check_routing(op, t, e, top_k, tid2eid, input_ids, bias);
    auto lf = dk::f32(logits);
    auto experts = at::empty({t, top_k}, lf.options().dtype(at::kLong));
    auto weights = at::empty({t, top_k}, lf.options());
    std::vector<float> scratch((size_t)(2 * e));
    if (t)
        moe_route(lf.data_ptr<float>(), t, e, top_k, func, r.t2e_ptr(), r.ids_ptr(), dk::ptr_or_null(r.bias), (float)scale,
                  experts.data_ptr<int64_t>(), weights.data_ptr<float>(), scratch.data());
    return {experts, dk::like(weights, logits.scalar_type())};
}

TORCH_LIBRARY_FRAGMENT(deepseek_kernels, m) {
    m.def("moe_route(Tensor logits, int top_k, str score_func, Tensor? tid2eid, Tensor? input_ids, Tensor? bias,"
          " float scale) -> (Tensor experts, Tensor weights)");
    m.def("moe_dense_experts(Tensor y, int n_experts, int inter, int top_k, str score_func, Tensor? tid2eid,"
          " Tensor? input_ids, Tensor? bias, float scale, float limit, Tensor down) -> Tensor");
}
TORCH_LIBRARY_IMPL(deepseek_kernels, CPU, m) {
    m.impl("moe_route", &moe_route_cpu);
    m.impl("moe_dense_experts", &moe_dense_experts_cpu);
}
