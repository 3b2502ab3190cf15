"""Import ``deepseek_kernels`` (and ``deepseek_engine``) from this source tree, ahead of installed copies.

The compiled ``_C`` module sits next to the sources after ``pip install -e kernels`` (or
``python setup.py build_ext --inplace``) from this checkout.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
for folder in ("engine", "kernels"):
    path = str(_ROOT / folder)
    if path not in sys.path:
        sys.path.insert(0, path)
