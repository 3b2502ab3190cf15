"""Child process for test_body_memory.py: build one request body of a given shape and size, then
report the peak RSS growth (bytes) of parsing and converting it, as JSON on stdout.

    python _body_memory_probe.py SHAPE SIZE_MB FORMAT KIND   (KIND: text | object)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peak_memory import peak_rss_bytes, reset_peak  # noqa: E402


def make_body(shape: str, size: int, fmt: str) -> dict:
    q = {"role": "user", "content": "What is the weather?"}
    if fmt == "responses":
        base = {"model": "DeepSeek-V4.1-Flash", "input": [q]}
    elif fmt == "messages":
        base = {"model": "DeepSeek-V4.1-Flash", "max_tokens": 100, "messages": [q]}
    else:
        base = {"model": "DeepSeek-V4.1-Flash", "messages": [q]}
    if shape == "flat_string":
        base["unknown"] = "x" * size
    elif shape == "small_objects":
        base["unknown"] = [{"a": i % 10} for i in range(size // 10)]
    elif shape == "nested_arrays":
        unit = "[" * 100 + "]" * 100
        base["unknown"] = "NESTED"
        text = json.dumps(base)
        return text.replace('"NESTED"', "[" + ",".join([unit] * (size // (len(unit) + 1))) + "]")
    elif shape == "messages":
        text = "The quick brown fox jumps over the lazy dog, again and again. " * 3
        turns = []
        for i in range(size // (2 * len(text) + 80)):
            turns.append({"role": "user", "content": f"{i} {text}"})
            turns.append({"role": "assistant", "content": text})
        turns.append(q)
        key = "input" if fmt == "responses" else "messages"
        base[key] = turns
    return base


def main() -> None:
    shape, size_mb, fmt, kind = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
    import deepseek_recipe as dr

    size = int(size_mb * 1024 * 1024)
    body = make_body(shape, size, fmt)
    text = body if isinstance(body, str) else json.dumps(body)
    payload = text.encode() if kind == "text" else json.loads(text)
    del body
    cls = {"chat": dr.ChatCompletionRequest, "responses": dr.ResponsesRequest, "messages": dr.MessagesRequest}[fmt]
    opts = dr.ConversionOptions()
    del text
    import gc

    gc.collect()
    base = _current_rss()
    reset = reset_peak()
    req = cls(payload)
    converted = req.convert(opts)
    peak = peak_rss_bytes()
    print(json.dumps({"body_bytes": size, "growth": peak - base, "peak_reset": reset,
                      "model": str(converted.model_version)}))


def _current_rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


if __name__ == "__main__":
    main()
