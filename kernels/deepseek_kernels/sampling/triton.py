"""Triton exponential-race sampling: one program per row, a running (value, index) maximum over blocks."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def sample_tokens_kernel(p_ptr, e_ptr, out_ptr, V, BLOCK_V: tl.constexpr):
    r = tl.program_id(0)
    best = float("-inf")
    best_i = 0
    for v0 in range(0, V, BLOCK_V):
        vs = v0 + tl.arange(0, BLOCK_V)
        vm = vs < V
        q = tl.load(p_ptr + r * V + vs, mask=vm, other=0.0) / tl.load(e_ptr + r * V + vs, mask=vm, other=1.0)
        q = tl.where(vm, q, float("-inf"))
        m = tl.max(q, axis=0)
        i = tl.argmax(q, axis=0, tie_break_left=True) + v0
        take = m > best
        best_i = tl.where(take, i, best_i)
        best = tl.where(take, m, best)
    tl.store(out_ptr + r, best_i.to(tl.int64))


def sample_tokens_triton(probs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    r, v = probs.shape
    out = torch.empty(r, dtype=torch.long, device=probs.device)
    if r:
        sample_tokens_kernel[(r,)](probs.float().contiguous(), noise.float().contiguous(), out, v, BLOCK_V=1024)
    return out
