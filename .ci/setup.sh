#!/usr/bin/env bash
# Set up everything the project needs in ./.venv, from the project's own files:
# the Rust codec built into the `deepseek_recipe` package (release profile), its test
# dependencies, the `deepseek_kernels` package (C++ CPU kernels built here) and the
# `deepseek_engine` package with torch.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
VENV_PY="$PWD/.venv/bin/python"

"$VENV_PY" -m pip install -q --upgrade pip
"$VENV_PY" -m pip install -q "maturin>=1.7,<2"
# The codec: Rust core + PyO3 bindings, installed editable into .venv.
VIRTUAL_ENV="$PWD/.venv" "$PWD/.venv/bin/maturin" develop --release -q --extras test,server
# torch first: the kernels are compiled against the torch the engine imports.
"$VENV_PY" -m pip install -q "torch>=2.4"
# The kernels: C++ CPU kernels compiled now, with this machine's C++ compiler. A compiler error fails
# this script (and CI); there is no slower fallback to install instead.
"$VENV_PY" -m pip install -q --no-build-isolation -e kernels
"$VENV_PY" -c "import deepseek_kernels"
# The engine depends on the codec and the kernels installed above (and on torch).
"$VENV_PY" -m pip install -q -e "engine[reference]"
