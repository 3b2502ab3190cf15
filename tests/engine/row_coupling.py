"""Which ATen calls of a run could make one row's result depend on the other rows of its tensor.

Shared by the structural batch-invariance tests of V4.1 (``test_v41_model.py``) and V4
(``test_serving_model.py``): a BLAS product picks its blocking, and so its order of additions, from the row
count; a float reduction may be split across threads by the tensor's size; a transcendental elementwise
function's vector and scalar (tail) code can round differently, so an element's bits depend on its offset
unless the tensor is whole vectors (``deepseek_engine.layers.row_invariant``).
"""

from __future__ import annotations

import torch

#: Products whose blocking, and so order of additions, a BLAS picks from the row count.
BLAS_OPS = {"mm", "bmm", "addmm", "baddbmm", "matmul", "mv", "addmv", "dot", "vdot", "linear", "einsum",
            "_addmm_activation", "tensordot"}
#: Float reductions that may be split across threads by the tensor's size.
FLOAT_REDUCTIONS = {"sum", "mean", "var", "std", "prod", "norm", "linalg_vector_norm", "cumsum", "logsumexp",
                    "nansum", "_softmax", "_log_softmax"}
#: Elementwise functions whose vector and scalar (tail) code can round differently.
TRANSCENDENTAL = {"exp", "exp2", "expm1", "log", "log1p", "log2", "sigmoid", "silu", "softplus", "tanh", "cos", "sin",
                  "erf", "gelu", "pow_"}


def coupling_ops(run) -> list[str]:
    """The ATen calls ``run()`` makes whose result for one row could depend on the rest of the tensor."""
    from torch.utils._python_dispatch import TorchDispatchMode

    found = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            first = args[0] if args and isinstance(args[0], torch.Tensor) else None
            if name in BLAS_OPS:
                found.append(name)
            elif name in FLOAT_REDUCTIONS and first is not None and first.is_floating_point():
                found.append(name)
            elif name in TRANSCENDENTAL and first is not None and first.numel() % 64:
                found.append(f"{name}[{first.numel()} elements]")
            return func(*args, **(kwargs or {}))

    with Recorder():
        run()
    return found
