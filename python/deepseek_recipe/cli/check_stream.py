"""`check-stream`: a captured model output and what a backend parsed from it (reasoning, content,
tool calls) against our stream parser, replayed under many chunkings (whole, one token or
character per push, seeded random cuts), so differences that depend on chunking show up."""

from __future__ import annotations

import json
import random

import deepseek_recipe as dr

from .inputs import InputError, load_tokenizer, prepare, read_json, read_text, read_token_ids
from .parse import run_stream


def parsed_message(value) -> dict:
    """Normalise what the backend parsed: a chat message, a chat.completion, or a plain dict
    with `reasoning_content`/`reasoning`, `content` and `tool_calls`."""
    if isinstance(value, dict) and "choices" in value:
        value = value["choices"][0].get("message", {})
    if not isinstance(value, dict):
        raise InputError("the parsed result must be a JSON object")
    calls = []
    for c in value.get("tool_calls") or []:
        fn = c.get("function", c)
        calls.append({"name": fn.get("name"), "arguments": _args(fn.get("arguments"))})
    return {"reasoning_content": value.get("reasoning_content", value.get("reasoning")) or "",
            "content": value.get("content") or "", "tool_calls": calls}


def _args(a):
    if isinstance(a, str):
        try:
            return json.loads(a)
        except json.JSONDecodeError:
            return a
    return a


def chunkings(n: int, seed: int, random_runs: int) -> dict[str, list[int]]:
    """Named cut sizes covering `n` items: whole, one per push, and seeded random cuts."""
    out = {"whole": [max(n, 1)], "one_per_push": [1] * max(n, 1)}
    rng = random.Random(seed)
    for k in range(random_runs):
        sizes, left = [], n
        while left > 0:
            s = rng.randint(1, max(1, min(left, 7)))
            sizes.append(s)
            left -= s
        out[f"random_{k}"] = sizes or [1]
    return out


def our_message(gen_factory, opts, tok, pieces_of, sizes) -> dict:
    chunks, i = [], 0
    for s in sizes:
        chunk = pieces_of(i, i + s)
        if chunk is not None:
            chunks.append(chunk)
        i += s
    items = run_stream(gen_factory(), opts, tok, chunks, dr.InferenceFinishReason.Stop)
    resp = dr.ChatCompletionResponse("check", "check", 0, 0, 0)
    for item in items:
        resp.accumulate(item)
    return parsed_message(json.loads(resp.to_json()))


def differences(ours: dict, theirs: dict) -> list[dict]:
    out = []
    for field in ("reasoning_content", "content"):
        if ours[field] != theirs[field]:
            out.append({"field": field, "ours": ours[field], "backend": theirs[field]})
    a, b = ours["tool_calls"], theirs["tool_calls"]
    if len(a) != len(b):
        out.append({"field": "tool_calls", "ours": a, "backend": b, "why": f"{len(a)} calls vs {len(b)}"})
    else:
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                out.append({"field": f"tool_calls[{i}]", "ours": x, "backend": y})
    return out


def cmd_check_stream(args) -> int:
    if args.request:
        prep = prepare(read_json(args.request), args.format, args.model_version)
        if prep.request is None:
            raise InputError("check-stream needs a request body (chat, responses or messages)")
        opts, version = prep.request.parsing_options, prep.version
        thinking = prep.conversation.thinking_mode
    else:
        stage = dr.ThinkingInitialStage.ReasoningStart if args.thinking else None
        opts = dr.ParsingOptions(parse_tool_calls=args.tools, thinking_initial_stage=stage)
        version, thinking = args.model_version or "v41", args.thinking
    stage = opts.thinking_initial_stage

    def gen_factory():
        return dr.ChatCompletionChunkGenerator("check", "check", thinking_mode=thinking, thinking_initial_stage=stage)

    theirs = parsed_message(read_json(args.parsed))
    if args.text:
        text, tok = read_text(args.output), None
        n = len(text)

        def pieces_of(i, j):
            return dr.InferenceChunk.text(text[i:j]) if i < n else None
    else:
        ids, tok = read_token_ids(args.output), load_tokenizer(args.tokenizer, version)
        n = len(ids)

        def pieces_of(i, j):
            return dr.InferenceChunk.tokens(ids[i:j]) if i < n else None
    runs = {}
    try:
        for name, sizes in chunkings(n, args.seed, args.random_runs).items():
            runs[name] = our_message(gen_factory, opts, tok, pieces_of, sizes)
    except RuntimeError as e:
        raise InputError(f"the output cannot be parsed: {e}") from None
    reference = runs["whole"]
    report = {"identical": True, "chunkings": len(runs), "ours": reference, "backend": theirs,
              "differences": differences(reference, theirs),
              "chunking_dependent": [name for name, m in runs.items() if m != reference]}
    report["identical"] = not report["differences"] and not report["chunking_dependent"]
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        print(("IDENTICAL" if report["identical"] else "DIVERGENT") +
              f": backend parse vs ours under {len(runs)} chunkings")
        for d in report["differences"]:
            print(f"  {d['field']}: backend {json.dumps(d['backend'], ensure_ascii=False)}")
            print(f"  {' ' * len(d['field'])}  ours    {json.dumps(d['ours'], ensure_ascii=False)}")
        if report["chunking_dependent"]:
            print(f"  our parse changes under chunkings: {', '.join(report['chunking_dependent'])}")
    return 0 if report["identical"] else 1
