// Generated from layout.py (deepseek_kernels.decode_stack.layout.header); do not edit.
// The per-layer records of decode_stack's flat argument lists.
#pragma once
#include <cstdint>

namespace decode_stack_layout {
enum Weight { W_HC_ATTN_FN, W_HC_ATTN_BASE, W_HC_ATTN_SCALE, W_ATTN_NORM, W_HC_FFN_FN, W_HC_FFN_BASE, W_HC_FFN_SCALE, W_FFN_NORM, W_FUSED, W_Q_NORM, W_WQ_B, W_KV_NORM, W_IDX_WQ_B, W_COMP_APE, W_COMP_NORM, W_IDX_APE, W_IDX_NORM, W_SINK, W_WO_A, W_WO_B, W_MOE_UP, W_MOE_DOWN, W_TID2EID, W_MOE_BIAS, WEIGHTS };
enum Int { I_HEADS, I_HEAD_DIM, I_IDX_HEADS, I_IDX_DIM, I_GROUPS, I_RATE, I_HAS_INDEXER, I_HW_START, I_HW_END, I_TOPK, I_COMP_OVERLAP, I_IDX_OVERLAP, I_MOE_EXPERTS, I_MOE_INTER, I_MOE_TOPK, I_SCORE_FUNC, I_ROPE, I_COMP_ROPE, I_IDX_ROPE, I_COPIES, I_COPY_OFFSETS };
enum Float { F_ATTN_NORM_EPS, F_FFN_NORM_EPS, F_Q_EPS, F_HEAD_EPS, F_KV_EPS, F_SCALE, F_COMP_EPS, F_IDX_EPS, F_IDX_QSCALE, F_IDX_WSCALE, F_MOE_SCALE, F_MOE_LIMIT, FLOATS };
enum Pool { P_KV, P_COMP_KV, P_COMP_GATE, P_ENTRIES, P_IDX_KV, P_IDX_GATE, P_IDX_ENTRIES, POOLS };
constexpr int64_t MAX_COPIES = 4, INTS = I_COPY_OFFSETS + MAX_COPIES;
// I_SCORE_FUNC: an index into this table (moe_dense_experts takes the name)
constexpr const char *SCORE_FUNCS[] = {"sqrtsoftplus", "softmax", "sigmoid"};
}  // namespace decode_stack_layout
