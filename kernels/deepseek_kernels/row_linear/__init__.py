"""``row_linear(x, weight)``: ``x @ weight.T`` whose every row depends on that row and ``weight`` only.

A BLAS product chooses its blocking (and so its order of additions) from the number of rows, so a row's result
can move by an ulp when other rows join the call; the V4.1 path runs its token-dimension products through this op
instead, so a sequence gives the same bits alone and in a batch. CPU: ``cpu.h`` (``small_linear``'s order;
float32 or bfloat16 weights read as stored, bfloat16 converted in registers; sixteen-lane, eight-lane and scalar
paths with the same operations, the outputs split across threads; bit for bit the reference on every path).
``DEEPSEEK_ROW_LINEAR_PATH`` (``avx512``, ``avx2``, ``scalar``; read once) overrides the build's widest path, and
the debug op ``torch.ops.deepseek_kernels.row_linear_path(x, weight, path)`` runs one path (tests compare them).
CUDA / Ascend: the Triton kernel of ``triton.py`` (column blocks fixed by the widths). Every device computes in
float32 and returns ``x``'s dtype.
"""

from __future__ import annotations

from .._registry import entry_point, fake, triton_impl
from .reference import row_linear_reference


@fake("row_linear")
def _(x, weight):
    return x.new_empty(*x.shape[:-1], weight.shape[0])


triton_impl("row_linear", "row_linear.triton", "row_linear_triton")


row_linear = entry_point("row_linear", row_linear_reference)


__all__ = ["row_linear", "row_linear_reference"]
