"""Soak test of structured output (issue #24): constrained generation from the tiny random checkpoints, whose
free output is garbage, must come out in the shape each request demands, every time.

Random tool sets with random JSON schemas (objects, nested objects, arrays, enums, integers, numbers,
booleans, bounded strings, optional and required keys), every ``tool_choice`` (``auto``, ``required``, a named
function), ``parallel_tool_calls`` on and off, and ``response_format`` ``json_object`` / ``json_schema``
without tools; thinking on and off (required and named choices without: the conversion refuses them in
thinking mode, as the official API does); DeepSeek V4 (the tiny checkpoint with the real 129280-token vocabulary)
and V4.1 (``write_tiny_v41`` over ``byte_tokenizer_json``: a tokenizer that can spell any text); each request with and without speculative decoding (V4
MTP with random ``mtp.0`` weights, V4.1 DSpark). Every request goes through the codec and the engine the way
``ProtocolEngine`` serves it (``prepare`` compiles its ``OutputGrammar``; ``finish`` parses the output), and
then:

* **shape**: ``required`` and named choices produce at least one call (named: only that function), calls only
  name tools of the request, ``parallel_tool_calls: false`` at most one call, and every call's arguments
  validate against the tool's schema (``jsonschema``); a JSON answer parses (and validates against its
  schema as the codec normalised it: a strict schema loses the keywords strict mode drops, such as
  ``maxLength``, as in the official package, and the prompt shows the model that schema). Outputs cut by
  ``max_tokens`` count as failures unless they hold a complete shape. A request whose ``max_tokens`` is below
  the length of its shortest valid output (the codec's closing planner measures it: a call with several
  required parameters in a byte-level vocabulary) gets that length plus ``ROOM`` instead, as a user would (no
  engine can do better); the count is printed.
* **chunking**: the same token IDs parsed again under several random chunkings give the same response
  (not checked for an output cut by ``max_tokens`` inside a UTF-8 character: the stream processor then drops
  the text of the last chunk whole, as the official one does, so that response depends on the chunking);
* **grammar**: a fresh matcher of the request's grammar accepts the output token for token (what the engine
  guarantees; a shape failure where this holds is the grammar's, which allowed that output).

Prints the counts per version, mode and speculation, and every failure (exit status 1 if there is one).
CI runs a small subset (``test_grammar_soak.py``); the full run::

    .venv/bin/python tests/engine/soak_grammar.py [--requests 1000] [--seed 0] [--versions v4,v41]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]

#: Names for tools and properties (random picks, so that schemas differ from request to request).
WORDS = ["alpha", "beta", "city", "date", "echo", "flag", "gamma", "hotel", "index", "jump", "kilo", "limit",
         "mode", "note", "offset", "page", "query", "radius", "size", "tag", "unit", "value", "width", "zone"]


def random_schema(rng: random.Random, depth: int = 0, strict: bool = False) -> dict[str, Any]:
    """A JSON schema of bounded size (strings at most 6 characters, arrays at most 2 items, nesting depth 2);
    ``strict``: every object property required (what strict ``json_schema`` demands)."""
    kinds = ["string", "integer", "number", "boolean", "enum"] + (["object", "array"] if depth < 2 else [])
    kind = rng.choice(kinds)
    if kind == "string":
        return {"type": "string", "maxLength": rng.randint(1, 6)}
    if kind == "integer":
        lo = rng.randint(-50, 50)
        return {"type": "integer", "minimum": lo, "maximum": lo + rng.randint(0, 500)}
    if kind == "number":
        return {"type": "number", "minimum": -10, "maximum": 10}
    if kind == "boolean":
        return {"type": "boolean"}
    if kind == "enum":
        return {"type": "string", "enum": rng.sample(WORDS, rng.randint(1, 4))}
    if kind == "array":
        return {"type": "array", "items": random_schema(rng, depth + 1, strict), "maxItems": rng.randint(0, 2)}
    return object_schema(rng, depth + 1, strict)


def object_schema(rng: random.Random, depth: int = 0, strict: bool = False) -> dict[str, Any]:
    names = rng.sample(WORDS, rng.randint(1, 3))
    props = {name: random_schema(rng, depth, strict) for name in names}
    required = [n for n in names if strict or rng.random() < 0.7]
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def random_tools(rng: random.Random) -> list[dict[str, Any]]:
    names = rng.sample(WORDS, rng.randint(1, 4))
    return [{"type": "function", "function": {"name": f"get_{name}", "description": f"Look up the {name}.",
                                              "parameters": object_schema(rng)}} for name in names]


@dataclass
class Case:
    """One request and what its answer must look like."""

    version: str  # "v4" | "v41"
    mode: str     # "auto" | "required" | "named" | "json_object" | "json_schema"
    thinking: bool
    body: dict[str, Any]
    tools: dict[str, dict[str, Any]]  # name -> parameters schema
    named: str | None = None
    parallel: bool = True
    schema: dict[str, Any] | None = None


MODES = ["auto", "required", "named", "json_object", "json_schema"]
#: Tokens beyond its shortest valid output that a request whose ``max_tokens`` is below that gets.
ROOM = 32


def random_case(rng: random.Random, version: str, mode: str, thinking: bool, max_tokens: int) -> Case:
    model = "DeepSeek-V4-Pro" if version == "v4" else "DeepSeek-V4.1-Flash"
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "temperature": 1.0,
                            "seed": rng.randrange(1 << 30),
                            "thinking": {"type": "enabled" if thinking else "disabled"}}
    text = f"Please help with {rng.choice(WORDS)} and {rng.choice(WORDS)}."
    if mode in ("json_object", "json_schema"):
        body["messages"] = [{"role": "user", "content": text + " Answer in JSON."}]
        strict = rng.random() < 0.5
        schema = object_schema(rng, strict=strict) if mode == "json_schema" else None
        body["response_format"] = {"type": "json_object"} if schema is None else \
            {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": strict}}
        return Case(version, mode, thinking, body, {}, schema=schema)
    tools = random_tools(rng)
    body["messages"] = [{"role": "user", "content": text}]
    body["tools"] = tools
    parallel = rng.random() < 0.5
    body["parallel_tool_calls"] = parallel
    named = None
    if mode == "named":
        named = rng.choice(tools)["function"]["name"]
        body["tool_choice"] = {"type": "function", "function": {"name": named}}
    else:
        body["tool_choice"] = mode
    return Case(version, mode, thinking, body, {t["function"]["name"]: t["function"]["parameters"] for t in tools},
                named, parallel)


def shape_problems(case: Case, resp: dict[str, Any]) -> list[str]:
    """What is wrong with a response's shape for its case (empty: nothing)."""
    import jsonschema

    message = resp["choices"][0]["message"]
    calls = message.get("tool_calls") or []
    problems = []
    if case.mode in ("json_object", "json_schema"):
        try:
            value = json.loads(message.get("content") or "")
        except ValueError as err:
            return [f"the answer is not JSON: {err}: {message.get('content')!r}"]
        if not isinstance(value, dict):
            problems.append(f"the answer is not an object: {value!r}")
        elif case.schema is not None:
            try:
                jsonschema.validate(value, case.schema)
            except jsonschema.ValidationError as err:
                problems.append(f"the answer does not match its schema: {err.message}")
        return problems + ([f"tool calls in a JSON answer: {calls}"] if calls else [])
    if case.mode in ("required", "named") and not calls:
        problems.append(f"no tool call (tool_choice {case.mode}); content {message.get('content')!r}")
    if not case.parallel and len(calls) > 1:
        problems.append(f"{len(calls)} calls with parallel_tool_calls false")
    for call in calls:
        name = call["function"]["name"]
        if name not in case.tools:
            problems.append(f"a call to an unknown tool {name!r}")
            continue
        if case.named is not None and name != case.named:
            problems.append(f"a call to {name!r}, not the named {case.named!r}")
        try:
            args = json.loads(call["function"]["arguments"])
        except ValueError as err:
            problems.append(f"{name}: arguments are not JSON: {err}")
            continue
        try:
            jsonschema.validate(args, case.tools[name])
        except jsonschema.ValidationError as err:
            problems.append(f"{name}: arguments do not match the schema: {err.message}")
    return problems


def normalised(resp: dict[str, Any]) -> dict[str, Any]:
    """A response without what differs from parse to parse (IDs, timestamps)."""
    out = json.loads(json.dumps(resp))
    out.pop("id", None)
    out.pop("created", None)
    for choice in out.get("choices", []):
        for call in choice.get("message", {}).get("tool_calls") or []:
            call.pop("id", None)
    return out


def chunkings(tokens: list[int], rng: random.Random, count: int) -> Iterator[list[list[int]]]:
    """One token per chunk, then ``count`` random cuts."""
    yield [[t] for t in tokens]
    for _ in range(count):
        cuts = sorted(rng.sample(range(1, len(tokens)), rng.randint(0, len(tokens) - 1))) if len(tokens) > 1 else []
        bounds = [0, *cuts, len(tokens)]
        yield [tokens[a:b] for a, b in zip(bounds, bounds[1:])]


def parse_chunked(eng, prep, tokens: list[int], chunks: list[list[int]], finish_reason: str) -> dict[str, Any]:
    """The response the codec's stream processor accumulates from ``chunks`` (as a server pushes them)."""
    import deepseek_recipe as dr

    api = prep.api
    gen = api.request.chunk_generator(prep.request, "resp_soak", prep.model)
    if prep.responses_extras is not None:
        echo, ns_map = prep.responses_extras
        gen = gen.with_namespace_tool_map(ns_map).with_echo(echo)
    proc = dr.StreamProcessor(gen, prep.request.parsing_options, eng.tokenizer)
    response = api.response("resp_soak", prep.model, 0, len(prep.prompt_ids), 0)
    items = list(proc.push(dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=len(prep.prompt_ids),
                                                                               prompt_cache_hit_tokens=0))))
    for chunk in chunks:
        if proc.finished:
            break
        items += proc.push(dr.InferenceChunk.tokens(chunk, None))
    if not proc.finished:
        reason = dr.InferenceFinishReason.Stop if finish_reason == "stop" else dr.InferenceFinishReason.Length
        items += proc.push(dr.InferenceChunk.finish(reason))
    items += proc.finish()
    for item in items:
        response.accumulate(item)
    return json.loads(response.to_json())


# -- checkpoints ------------------------------------------------------------------------------------------
def v4_checkpoint(cache: Path) -> Path:
    """The tiny V4 checkpoint (real vocabulary) plus random ``mtp.0`` weights (for MTP speculation)."""
    from deepseek_engine.testing.tiny_checkpoint import add_random_mtp_layer, ensure_tiny_checkpoint

    out = cache / "tiny-deepseek-v4-mtp"
    if (out / "config.json").is_file():
        return out
    base = ensure_tiny_checkpoint(cache / "tiny-deepseek-v4")
    tmp = cache / "tiny-deepseek-v4-mtp.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(base, tmp)
    add_random_mtp_layer(tmp)
    tmp.rename(out)
    return out


def v41_checkpoint(cache: Path) -> Path:
    """The tiny V4.1 checkpoint (with DSpark) over a byte-level tokenizer with the control tokens
    (``byte_tokenizer_json``): the grammar's JSON and DSML text must be spellable, which the word-level
    tokenizer of ``write_tiny_v41(special_tokens=True)`` is not."""
    from deepseek_engine.testing.tiny_checkpoint_v41 import byte_tokenizer_json, write_tiny_v41

    out = cache / "tiny-deepseek-v41-bytes"
    if not (out / "config.json").is_file():
        cache.mkdir(parents=True, exist_ok=True)
        tok = cache / "tiny-v41-byte-tokenizer.json"
        tok.write_text(byte_tokenizer_json(), encoding="utf-8")
        write_tiny_v41(out, tokenizer_json=tok)
    return out


# -- the run ----------------------------------------------------------------------------------------------
@dataclass
class Tally:
    runs: Counter
    failures: list[str]
    engine_errors: int = 0
    raised: int = 0  # requests whose max_tokens was below their shortest valid output (raised to fit)
    dump: Any = None  # a file: one JSON line (request body, output tokens, problems) per failed request

    def add(self, key: tuple, problems: list[str], label: str, body: Any = None, tokens: Any = None) -> None:
        self.runs[key + ("ok" if not problems else "failed",)] += 1
        self.failures += [f"{label}: {p}" for p in problems]
        if problems and self.dump is not None:
            self.dump.write(json.dumps({"label": label, "body": body, "tokens": tokens, "problems": problems},
                                       ensure_ascii=False) + "\n")


def run_version(version: str, folder: Path, cases: list[Case], speculative: bool, tally: Tally, rng: random.Random,
                cuts: int, thinking_budget: int, batch: int) -> None:
    from deepseek_engine import LLM
    from deepseek_engine.entrypoints.protocol_api import ProtocolEngine, ProtocolError
    from deepseek_engine.speculative import SpeculativeConfig

    spec = SpeculativeConfig("mtp" if version == "v4" else "dspark", num_speculative_tokens=2) \
        if speculative else None
    llm = LLM(folder, dtype="float32", max_num_seqs=batch)
    eng = ProtocolEngine(llm, thinking_budget=thinking_budget)
    for start in range(0, len(cases), batch):
        group = cases[start:start + batch]
        preps = []
        for case in group:
            try:
                prep = eng.prepare("chat.completions", case.body)
            except ProtocolError as err:
                tally.add((version, case.mode, speculative), [f"refused: {err.status_code} {err.message}"],
                          f"{version} {case.mode} spec={speculative}")
                preps.append(None)
                continue
            if prep.params.constraint is None:
                tally.add((version, case.mode, speculative), ["no grammar was compiled"], case.mode)
                preps.append(None)
                continue
            # No engine can fit an output in fewer tokens than its shortest valid form (a call with several
            # required parameters, a byte-level vocabulary): such a request gets room for it, as a user would.
            end = prep.params.constraint.matcher().closing_tokens(4096)
            if end is not None and len(end) + 1 + ROOM > prep.params.max_tokens:
                prep = replace(prep, params=replace(prep.params, max_tokens=len(end) + 1 + ROOM))
                tally.raised += 1
            if case.schema is not None:  # checked as the codec normalised it (strict drops e.g. maxLength)
                case.schema = json.loads(prep.request.inference_options.output_constraint.schema)
            preps.append(replace(prep, params=replace(prep.params, speculative=spec if spec else False)))
        ready = [(c, p) for c, p in zip(group, preps) if p is not None]
        outs = llm.generate([p.prompt_ids for _, p in ready], [p.params for _, p in ready])
        for (case, prep), out in zip(ready, outs):
            label = f"{version} {case.mode} thinking={case.thinking} spec={speculative} seed={case.body['seed']}"
            try:
                resp = eng.finish(prep, out)
            except ProtocolError as err:
                tally.add((version, case.mode, speculative), [f"parse failed: {err.message}"], label)
                continue
            problems = shape_problems(case, resp)
            tokens = list(out.token_ids)
            if out.stop_token_id is not None and tokens and tokens[-1] == out.stop_token_id:
                tokens.pop()
            # The engine's side: a fresh matcher of the request's grammar accepts the output token for token (a
            # shape problem with this true is the grammar's: it allowed that output).
            if prep.params.constraint.matcher().accept_tokens(tokens) != len(tokens):
                problems.append("the output leaves the grammar (an engine bug)")
                tally.engine_errors += 1
            whole = normalised(parse_chunked(eng, prep, tokens, [tokens], out.finish_reason))
            # An output cut inside a UTF-8 character: the stream processor drops the last chunk's text whole
            # (the official rule), so that parse depends on the chunking by design.
            cut_in_char = out.finish_reason == "length" and eng.tokenizer.decode(tokens).endswith("\ufffd")
            for chunks in [] if cut_in_char else chunkings(tokens, rng, cuts):
                if normalised(parse_chunked(eng, prep, tokens, chunks, out.finish_reason)) != whole:
                    problems.append(f"a chunking of {len(chunks)} chunks parses differently")
                    break
            if problems:
                problems[-1] += f" (finish {out.finish_reason}, {len(out.token_ids)} tokens)"
            tally.add((version, case.mode, speculative), problems, label, case.body, list(out.token_ids))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=1000, help="requests in all (split over versions and speculation)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--versions", default="v4,v41")
    p.add_argument("--max-tokens", type=int, default=400)
    p.add_argument("--thinking-budget", type=int, default=24)
    p.add_argument("--cuts", type=int, default=3, help="random chunkings per output (besides one token per chunk)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--cache", type=Path, default=ROOT / ".cache")
    p.add_argument("--dump", type=Path, help="write each failed request (body, output tokens, problems) here, JSONL")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    rng = random.Random(args.seed)
    versions = args.versions.split(",")
    tally = Tally(Counter(), [], dump=args.dump.open("w", encoding="utf-8") if args.dump else None)
    per_run = max(1, args.requests // (2 * len(versions)))
    t0 = time.perf_counter()
    for version in versions:
        folder = v4_checkpoint(args.cache) if version == "v4" else v41_checkpoint(args.cache)
        for speculative in (False, True):
            # (the codec's conversion refuses required and named tool choices in thinking mode, as the official
            # API does: they run without thinking)
            cases = [random_case(rng, version, MODES[i % len(MODES)],
                                 i % 2 == 0 and MODES[i % len(MODES)] not in ("required", "named"), args.max_tokens)
                     for i in range(per_run)]
            rng.shuffle(cases)
            run_version(version, folder, cases, speculative, tally, rng, args.cuts, args.thinking_budget, args.batch)
    total = sum(tally.runs.values())
    ok = sum(n for k, n in tally.runs.items() if k[-1] == "ok")
    print(f"{ok} / {total} requests in the required shape, re-parsed identically under {args.cuts + 1} chunkings "
          f"each ({time.perf_counter() - t0:.0f} s); outputs outside their grammar: {tally.engine_errors}; "
          f"max_tokens raised to the shortest valid output + {ROOM}: {tally.raised}")
    for key in sorted({k[:-1] for k in tally.runs}):
        good, bad = tally.runs[key + ("ok",)], tally.runs[key + ("failed",)]
        print(f"  {key[0]:>3} {key[1]:>11} speculative={str(key[2]):<5}  {good:4d} ok  {bad:3d} failed")
    if tally.dump is not None:
        tally.dump.close()
    for failure in tally.failures[:50]:
        print("FAIL", failure)
    return 0 if ok == total else 1


if __name__ == "__main__":
    sys.exit(main())
