"""Which implementation the op functions run: the registered kernels (default) or the PyTorch references.

``DEEPSEEK_KERNELS=reference`` (read at import) or :func:`set_mode` selects the references, for debugging
and for tests that compare the two. There is no automatic switch: a kernel that is missing or rejects its
arguments raises an error naming the op.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

MODES = ("kernels", "reference")
_mode = os.environ.get("DEEPSEEK_KERNELS", "kernels").strip().lower() or "kernels"
if _mode not in MODES:
    raise ValueError(f"DEEPSEEK_KERNELS must be one of {MODES}, got {_mode!r}")


def mode() -> str:
    """``"kernels"`` or ``"reference"``."""
    return _mode


def reference_mode() -> bool:
    return _mode == "reference"


def set_mode(value: str) -> None:
    global _mode
    if value not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {value!r}")
    _mode = value


@contextlib.contextmanager
def using(value: str) -> Iterator[None]:
    """Run a block in the given mode, then restore the previous one."""
    old = _mode
    set_mode(value)
    try:
        yield
    finally:
        set_mode(old)
