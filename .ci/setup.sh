#!/usr/bin/env bash
# Set up everything the project needs in ./.venv, from the project's own files:
# the Rust codec built into the `deepseek_recipe` package (release profile), its test
# dependencies, and the `deepseek_engine` package with torch.
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
VIRTUAL_ENV="$PWD/.venv" "$PWD/.venv/bin/maturin" develop --release -q --extras test
# The engine depends on the codec installed above (and on torch).
"$VENV_PY" -m pip install -q -e "engine[reference]"
