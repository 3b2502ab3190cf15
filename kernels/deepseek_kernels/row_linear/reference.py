"""PyTorch definition of ``row_linear``: ``x @ weight.T`` in one fixed order of float32 operations per output.

For an input width ``n >= 8``, output ``j`` of a row is eight running sums (column ``k`` goes into sum ``k mod
8``, for the columns below the last multiple of eight) added up in lane order onto ``+0``, then the remaining
columns one by one; for ``n < 8`` one running sum from ``+0``. Every sum depends on that row and ``weight``
only, so a row's result is the same whatever other rows share the call (a BLAS product picks its blocking, and
so its order of additions, from the number of rows). Each product is rounded to float32 before it is added
(no fused multiply-add: the same bits on every instruction set, and in elementwise tensor operations here).
A bfloat16 weight enters as its exact float32 value. Written with elementwise tensor operations, so this
definition rounds exactly as the CPU kernel does, on each of its paths.
"""

from __future__ import annotations

import torch

#: Output columns evaluated per chunk of the reference (bounds its ``[T, chunk, n]`` product).
_CHUNK_ELEMS = 1 << 22


def row_linear_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x [..., n]``, ``weight [m, n]`` -> ``[..., m]`` in ``x``'s dtype (computed in float32)."""
    n = x.shape[-1]
    if weight.dim() != 2 or weight.shape[1] != n:
        raise ValueError(f"weight must be [m, {n}], got {tuple(weight.shape)}")
    m = weight.shape[0]
    xf = x.reshape(-1, n).float()
    wf = weight.float()
    t = xf.shape[0]
    out = torch.zeros(t, m, dtype=torch.float32, device=x.device)
    n8 = n - n % 8 if n >= 8 else 0
    step = max(1, _CHUNK_ELEMS // max(1, t * n))
    for j0 in range(0, m, step):
        prod = xf[:, None, :] * wf[None, j0:j0 + step, :]  # [T, chunk, n]
        total = torch.zeros(prod.shape[:2], dtype=torch.float32, device=x.device)
        if n8:
            acc = torch.zeros(*prod.shape[:2], 8, dtype=torch.float32, device=x.device)
            for k in range(0, n8, 8):
                acc = acc + prod[:, :, k:k + 8]
            for lane in range(8):
                total = total + acc[:, :, lane]
        for k in range(n8, n):
            total = total + prod[:, :, k]
        out[:, j0:j0 + step] = total
    return out.view(*x.shape[:-1], m).to(x.dtype)
