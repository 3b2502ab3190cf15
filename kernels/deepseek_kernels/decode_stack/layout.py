"""The argument layout of ``decode_stack``: one table for both sides.

The op takes its per-layer arguments as flat lists, one fixed-size record per layer: ``weights``, ``ints``,
``floats`` and ``pools``. The enums below name each record's fields in order; Python (the reference, the
engine's ``DecodeStackPlan``) indexes records with them, and ``layout.h``, which the C++ kernel includes, is
written from them (:func:`header`; ``setup.py`` writes it before every build, and
``tests/kernels/test_decode_stack_layout.py`` checks that the committed file is current). This module uses the
standard library only, so ``setup.py`` can load it without the package.
"""

from __future__ import annotations

from enum import IntEnum


class Weight(IntEnum):
    """``weights``: parameters, and the derived stacked matrices of the fused input product and of the experts."""

    HC_ATTN_FN = 0
    HC_ATTN_BASE = 1
    HC_ATTN_SCALE = 2
    ATTN_NORM = 3
    HC_FFN_FN = 4
    HC_FFN_BASE = 5
    HC_FFN_SCALE = 6
    FFN_NORM = 7
    FUSED = 8
    Q_NORM = 9
    WQ_B = 10
    KV_NORM = 11
    IDX_WQ_B = 12
    COMP_APE = 13
    COMP_NORM = 14
    IDX_APE = 15
    IDX_NORM = 16
    SINK = 17
    WO_A = 18
    WO_B = 19
    MOE_UP = 20
    MOE_DOWN = 21
    TID2EID = 22
    MOE_BIAS = 23


class Int(IntEnum):
    """``ints``: sizes and settings, among them the indices into ``rope_tables`` of the layer's attention and of
    its two compressors; ``COPY_OFFSETS`` is the first of ``MAX_COPIES`` entries."""

    HEADS = 0
    HEAD_DIM = 1
    IDX_HEADS = 2
    IDX_DIM = 3
    GROUPS = 4
    RATE = 5
    HAS_INDEXER = 6
    HW_START = 7
    HW_END = 8
    TOPK = 9
    COMP_OVERLAP = 10
    IDX_OVERLAP = 11
    MOE_EXPERTS = 12
    MOE_INTER = 13
    MOE_TOPK = 14
    SCORE_FUNC = 15
    ROPE = 16
    COMP_ROPE = 17
    IDX_ROPE = 18
    COPIES = 19
    COPY_OFFSETS = 20


class Float(IntEnum):
    """``floats``: epsilons and scales."""

    ATTN_NORM_EPS = 0
    FFN_NORM_EPS = 1
    Q_EPS = 2
    HEAD_EPS = 3
    KV_EPS = 4
    SCALE = 5
    COMP_EPS = 6
    IDX_EPS = 7
    IDX_QSCALE = 8
    IDX_WSCALE = 9
    MOE_SCALE = 10
    MOE_LIMIT = 11


class Pool(IntEnum):
    """``pools``: the layer's paged pools (written: the new rows and the closed entries)."""

    KV = 0
    COMP_KV = 1
    COMP_GATE = 2
    ENTRIES = 3
    IDX_KV = 4
    IDX_GATE = 5
    IDX_ENTRIES = 6


#: Copy offsets of the fused product into the compressor / indexer pools, at most.
MAX_COPIES = 4
#: ``ints[Int.SCORE_FUNC]`` indexes this (the routing score function's name).
SCORE_FUNCS = ("sqrtsoftplus", "softmax", "sigmoid")

#: Entries per layer of each list.
WEIGHTS = len(Weight)
INTS = Int.COPY_OFFSETS + MAX_COPIES
FLOATS = len(Float)
POOLS = len(Pool)

#: The C++ spelling of each enum: (enum name, member prefix, the count's name or None).
_CPP = ((Weight, "Weight", "W_", "WEIGHTS"), (Int, "Int", "I_", None), (Float, "Float", "F_", "FLOATS"),
        (Pool, "Pool", "P_", "POOLS"))


def header() -> str:
    """The text of ``layout.h``: the same records as C++ enums (``W_FUSED``, ..., ``WEIGHTS``)."""
    lines = ["// Generated from layout.py (deepseek_kernels.decode_stack.layout.header); do not edit.",
             "// The per-layer records of decode_stack's flat argument lists.",
             "#pragma once", "#include <cstdint>", "", "namespace decode_stack_layout {"]
    for enum, name, prefix, count in _CPP:
        members = [prefix + m.name for m in enum] + ([count] if count else [])
        assert [m.value for m in enum] == list(range(len(enum))), f"{name}: values must be 0, 1, ... in order"
        lines.append(f"enum {name} {{ {', '.join(members)} }};")
    lines.append(f"constexpr int64_t MAX_COPIES = {MAX_COPIES}, INTS = I_COPY_OFFSETS + MAX_COPIES;")
    lines.append("// I_SCORE_FUNC: an index into this table (moe_dense_experts takes the name)")
    lines.append("constexpr const char *SCORE_FUNCS[] = {" + ", ".join(f'"{s}"' for s in SCORE_FUNCS) + "};")
    lines.append("}  // namespace decode_stack_layout")
    return "\n".join(lines) + "\n"
