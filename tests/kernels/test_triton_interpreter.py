"""Runs ``kernels/tests`` (every Triton kernel under ``TRITON_INTERPRET=1`` against its reference) in a
process of its own: the interpreter has to be chosen before the kernels are decorated, and the
ahead-of-time compile checks in this process need the compiled (not interpreted) kernels."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CASES = Path(__file__).resolve().parents[2] / "kernels" / "tests"


def test_triton_kernels_under_the_interpreter() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(CASES)],
                         env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert " passed" in out.stdout and "skipped" not in out.stdout
