"""The Triton kernels under the interpreter: ``TRITON_INTERPRET=1`` must be set before the kernels are
decorated, so this folder runs in its own process (``tests/kernels/test_triton_interpreter.py`` starts it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"
_ROOT = Path(__file__).resolve().parents[2]
for folder in ("engine", "kernels"):
    path = str(_ROOT / folder)
    if path not in sys.path:
        sys.path.insert(0, path)
