"""Building the kernels on a machine without a working C++ compiler fails, loudly: there is no package
without its compiled kernels, so CI cannot go green on a broken or missing kernel build."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def test_build_without_a_compiler_fails(tmp_path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.py", "pyproject.toml"):
        shutil.copy(KERNELS / name, src / name)
    shutil.copytree(KERNELS / "deepseek_kernels", src / "deepseek_kernels",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    missing = str(tmp_path / "no-such-compiler")
    env = {**os.environ, "CXX": missing, "CC": missing}
    # `pip wheel` builds without touching the environment the tests run in.
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                          "-w", str(tmp_path / "wheels"), str(src)], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode != 0
    assert "deepseek-kernels" in out.stdout + out.stderr
    assert not list((tmp_path / "wheels").glob("*.whl")) if (tmp_path / "wheels").exists() else True
