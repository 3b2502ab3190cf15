"""Registration of the Python-side implementations of the ``deepseek_kernels`` ops.

The schemas and CPU implementations come from the compiled extension (each op's ``cpu.cpp``). This module
adds, per op: the fake (meta) implementation that ``torch.compile`` and meta tensors use, the CUDA
implementation, and the Ascend one (``PrivateUse1``) when ``torch_npu`` is installed.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

import torch

from ._mode import reference_mode

NAMESPACE = "deepseek_kernels"

try:
    from . import _C  # noqa: F401  (registers schemas and CPU kernels)
except ImportError as err:  # no silent fallback: the package is unusable without its compiled kernels
    raise ImportError(
        "deepseek_kernels._C (the compiled CPU kernels) cannot be loaded; reinstall deepseek-kernels with a "
        f"working C++ compiler (pip install --no-build-isolation ./kernels): {err}"
    ) from err

_LIB = torch.library.Library(NAMESPACE, "IMPL")
_HAS_NPU = importlib.util.find_spec("torch_npu") is not None
#: op name -> {"CUDA": description, "PrivateUse1": description}: what each device runs (docs and tests read it).
DEVICE_IMPLS: dict[str, dict[str, str]] = {}


def op(name: str):
    """The dispatcher handle ``torch.ops.deepseek_kernels.<name>``."""
    return getattr(getattr(torch.ops, NAMESPACE), name)


def fake(name: str) -> Callable:
    """Decorator: the fake (shape-only) implementation of ``name``."""
    return torch.library.register_fake(f"{NAMESPACE}::{name}")


def device_impl(name: str, fn: Callable, what: str, devices: tuple[str, ...] = ("CUDA", "PrivateUse1")) -> None:
    """Register ``fn`` for the accelerator ``devices`` (``PrivateUse1`` only when torch_npu is present)."""
    for key in devices:
        if key == "PrivateUse1" and not _HAS_NPU:
            continue
        _LIB.impl(name, fn, key)
        DEVICE_IMPLS.setdefault(name, {})[key] = what


def triton_impl(name: str, module: str, attr: str, what: str = "triton",
                devices: tuple[str, ...] = ("CUDA", "PrivateUse1")) -> None:
    """Register ``deepseek_kernels.<module>.<attr>`` (imported on first call: Triton loads only where used)
    for the accelerator ``devices``."""
    def run(*args):
        return getattr(importlib.import_module(f"{__package__}.{module}"), attr)(*args)

    device_impl(name, run, what, devices)


def entry_point(name: str, reference: Callable) -> Callable:
    """The function the model calls: the op ``name`` through the dispatcher, or ``reference`` in reference mode.

    Positional arguments only (the op's schema order); it carries the reference's signature and docstring.
    """
    handle = op(name)

    @functools.wraps(reference)
    def call(*args):
        if reference_mode():
            return reference(*args)
        return handle(*args)

    call.__name__ = call.__qualname__ = name
    return call
