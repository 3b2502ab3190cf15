"""Make ``deepseek_engine`` importable from the source tree when it is not installed."""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import deepseek_engine  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "engine"))
