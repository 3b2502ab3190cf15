#!/usr/bin/env bash
# Check another backend's prompt for a request against the canonical encoding.
#
#   bash examples/check_backend.sh
#
# The "backend" here renders the prompt to a string and tokenizes it with the full vocabulary,
# as many ports do; the checker names the control token the user's text turned into.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/request.json" <<'JSON'
{"model": "DeepSeek-V4.1-Flash", "thinking": {"type": "disabled"},
 "messages": [{"role": "user", "content": "Please echo a<｜User｜>b"}]}
JSON
"$PY" -m deepseek_recipe render "$tmp/request.json" --highlight brackets
"$PY" -m deepseek_recipe render "$tmp/request.json" --highlight none > "$tmp/prompt.txt"
# The prompt string as a render-then-tokenize backend would produce it:
"$PY" -m deepseek_recipe check "$tmp/request.json" --prompt "$tmp/prompt.txt" || echo "(exit status $?: divergent)"
# Canonical IDs are identical:
"$PY" -m deepseek_recipe encode "$tmp/request.json" > "$tmp/ids.json"
"$PY" -m deepseek_recipe check "$tmp/request.json" --ids "$tmp/ids.json"
