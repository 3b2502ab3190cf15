// step_layout: no torch-free kernel of its own here.
#pragma once

// The op's entry points that other ops call (torch types; defined in cpu.cpp). decode_stack composes them,
// so each is declared here, where its op lives, not found by the order of the translation unit.
#include <ATen/ATen.h>
#include <optional>
#include <tuple>
#include <vector>

std::vector<at::Tensor> decode_layout_cpu(const at::Tensor &positions, const at::Tensor &tables,
                                                 const c10::optional<at::Tensor> &prompt_lens, int64_t block_size,
                                                 int64_t window, at::IntArrayRef rates);
