"""Replaying one recorded stream case through a `deepseek_recipe` module.

The fixture generator runs this against the official package (inside its side venv) and the
Python tests run it against ours, so both sides turn a case into the same record in the same
way. Everything here takes the package module as `dr`; how the chunk generator is built is the
caller's business (the generator goes through the official request classes, the tests use the
constructors directly).
"""

from __future__ import annotations

import json
import re

# Call IDs end in 24 random characters; the test compares them through this marker.
CALL_ID = re.compile(r"(call_\d{2}_(?:ET_)?)[A-Za-z0-9]{24}")
WALL_CLOCK_KEYS = ("created", "created_at", "completed_at")
RESPONSE_CLASS_NAMES = {"chat": "ChatCompletionResponse", "responses": "ResponsesResponse",
                        "messages": "MessagesResponse"}


def normalise(value):
    """Replace random call IDs and wall-clock timestamps by fixed markers (recursively)."""
    if isinstance(value, dict):
        return {k: (0 if k in WALL_CLOCK_KEYS and isinstance(v, int) else normalise(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, str):
        return CALL_ID.sub(r"\1<random>", value)
    return value


def parsing_options(dr, options: dict):
    """The case's parser settings as a `ParsingOptions` of `dr`."""
    kw = dict(options)
    stage = kw.pop("thinking_initial_stage", None)
    if stage is not None:
        kw["thinking_initial_stage"] = getattr(dr.ThinkingInitialStage, stage)
    special = kw.pop("special_tokens", None)
    if special is not None:
        kw["special_tokens"] = dr.SpecialTokens(**special)
    return dr.ParsingOptions(**kw)


def inference_chunk(dr, c: dict):
    """One recorded backend update as an `InferenceChunk` of `dr`."""
    if "ready" in c:
        r = c["ready"]
        if "prompt_tokens" not in r:
            return dr.InferenceChunk.ready(system_fingerprint=r.get("system_fingerprint"))
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


def replay(dr, case: dict, chunk_generator, tokenizer) -> dict:
    """Push the case's input through a stream processor over `chunk_generator`.

    Returns what is compared: the items of every push (and of `finish`), the error that stopped
    the stream, whether it finished, the SSE event names, the end-of-stream data and the
    accumulated response.
    """
    gen = case["generator"]
    sp = dr.StreamProcessor(chunk_generator, parsing_options(dr, case["options"]),
                            tokenizer if case["tokenizer"] else None)
    cls = getattr(dr, RESPONSE_CLASS_NAMES[gen["format"]])
    ready = next((c["ready"] for c in case["input"] if "ready" in c), None)
    resp = cls(gen["id"], gen["model"], 0, ready.get("prompt_tokens", 0) if ready else 0,
               ready.get("prompt_cache_hit_tokens", 0) if ready else 0)
    pushes, error, items = [], None, []
    try:
        for c in case["input"]:
            out = sp.push(inference_chunk(dr, c))
            pushes.append([normalise(json.loads(i.to_json())) for i in out])
            items += out
        # How the caller ends the stream: `finish` (the default), `close` (abandoned: the
        # processor is closed without a finish) or `none` (left as it is: the response is
        # accumulated from what was pushed).
        end = case.get("end", "finish")
        if end == "finish":
            out = sp.finish()
            pushes.append([normalise(json.loads(i.to_json())) for i in out])
            items += out
        elif end == "close":
            sp.close()
    except RuntimeError as e:
        error = str(e)
    names = [cls.sse_event_name(i) for i in items]
    for i in items:
        resp.accumulate(i)
    return {"pushes": pushes, "error": error, "finished": sp.finished, "sse_event_names": names,
            "sse_done_data": cls.sse_done_data(), "response": normalise(json.loads(resp.to_json()))}
