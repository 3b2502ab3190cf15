"""``compress_pool(kv, gate)``: pooling of a compressor's window; ``compress_windows``: every window a step
closes, pooled, normed, rotated and stored in the paged entry pool in one call (see ``reference.py``).

CPU: ``cpu.cpp`` (``compress_windows`` runs the code of ``compress_pool``, ``rms_norm`` and ``rope`` on rows it
gathers itself, float32 pools; the entry point sends pools of other dtypes to the composition); CUDA / Ascend: ``triton.py`` for ``compress_pool``, the PyTorch reference for
``compress_windows`` (a few dozen windows per step: the pooling kernel is the GPU part).
"""

from __future__ import annotations

import functools

import torch

from .._registry import device_impl, entry_point, fake, triton_impl
from .reference import compress_pool_reference, compress_windows_reference


@fake("compress_pool")
def _(kv, gate):
    return kv.new_empty(kv.shape[0], kv.shape[2])


triton_impl("compress_pool", "compressor.triton", "compress_pool_triton")


compress_pool = entry_point("compress_pool", compress_pool_reference)


@fake("compress_windows")
def _(entry_pool, kv_pool, gate_pool, ape, window_slots, prior_slots, has_prior, overlap, norm_weight, eps, c, s,
      out_slots):
    return None


device_impl("compress_windows", compress_windows_reference, "PyTorch reference")


_compress_windows = entry_point("compress_windows", compress_windows_reference)


@functools.wraps(compress_windows_reference)
def compress_windows(entry_pool, kv_pool, gate_pool, *rest):
    # The CPU kernel holds float32 pools; pools of other dtypes (a bfloat16 cache) take the composition, here
    # rather than in every caller.
    if kv_pool.dtype != torch.float32 and kv_pool.is_cpu:
        return compress_windows_reference(entry_pool, kv_pool, gate_pool, *rest)
    return _compress_windows(entry_pool, kv_pool, gate_pool, *rest)


__all__ = ["compress_pool", "compress_pool_reference", "compress_windows", "compress_windows_reference"]
