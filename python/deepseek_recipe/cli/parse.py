"""`parse`: model output (token IDs or text) → the response object of an API, or its SSE stream."""

from __future__ import annotations

import json
import sys
import time

import deepseek_recipe as dr
from deepseek_recipe.apis import BY_FORMAT

from .inputs import InputError, load_tokenizer, prepare, read_json, read_text, read_token_ids


def stream_parts(args):
    """(generator, parsing options, response class, version) from `--request` or the flags."""
    if args.request:
        prep = prepare(read_json(args.request), args.format, args.model_version)
        if prep.request is None:
            raise InputError("parse needs a request body (chat, responses or messages), not conversation JSON")
        spec = BY_FORMAT[prep.fmt]
        gen = spec.request.chunk_generator(prep.request, args.id, prep.model)
        return gen, prep.request.parsing_options, spec.response, prep.version
    api = args.api or "chat"
    stage = dr.ThinkingInitialStage.ReasoningStart if args.thinking else None
    if api == "messages":
        gen = dr.MessagesChunkGenerator(args.id, args.model, args.thinking)
    else:
        gen = BY_FORMAT[api].chunk_generator(args.id, args.model, thinking_mode=args.thinking,
                                             thinking_initial_stage=stage)
    opts = dr.ParsingOptions(parse_tool_calls=args.tools, thinking_initial_stage=stage)
    return gen, opts, BY_FORMAT[api].response, args.model_version or "v41"


def chunks_of(args, version):
    """The output as inference chunks, cut into `--chunk-size` pieces (0: one chunk)."""
    if args.text:
        text = read_text(args.output)
        n = args.chunk_size or len(text) or 1
        return [dr.InferenceChunk.text(text[i:i + n]) for i in range(0, len(text), n)], None
    ids = read_token_ids(args.output)
    tok = load_tokenizer(args.tokenizer, version)
    n = args.chunk_size or len(ids) or 1
    return [dr.InferenceChunk.tokens(ids[i:i + n]) for i in range(0, len(ids), n)], tok


def run_stream(gen, opts, tok, chunks, finish):
    """Push `chunks` and a finish chunk through a stream processor; all emitted items."""
    proc = dr.StreamProcessor(gen, opts, tok)
    out = list(proc.push(dr.InferenceChunk.ready()))
    for c in chunks:
        if proc.finished:
            break
        out += proc.push(c)
    if not proc.finished:
        out += proc.push(dr.InferenceChunk.finish(finish))
    out += proc.finish()
    return out


FINISH = {"stop": "Stop", "length": "Length", "content_filter": "ContentFilter"}


def cmd_parse(args) -> int:
    gen, opts, response_cls, version = stream_parts(args)
    chunks, tok = chunks_of(args, version)
    try:
        items = run_stream(gen, opts, tok, chunks, getattr(dr.InferenceFinishReason, FINISH[args.finish]))
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.sse:
        for item in items:
            name = response_cls.sse_event_name(item)
            if name:
                sys.stdout.write(f"event: {name}\n")
            sys.stdout.write(f"data: {item.to_json()}\n\n")
        done = response_cls.sse_done_data()
        if done is not None:
            sys.stdout.write(f"data: {done}\n\n")
        return 0
    resp = response_cls(args.id, args.model, int(time.time()), 0, 0)
    for item in items:
        resp.accumulate(item)
    print(json.dumps(json.loads(resp.to_json()), ensure_ascii=False, indent=None if args.compact else 2))
    return 0
