"""One large push in every parser state: the workloads of the stream memory test and of
benchmarks/stream_push_scaling.py.

Each state is entered with a short prefix push, then one push of `unit` repeated until it holds
about the requested number of bytes. The units are the adversarial ones: marker spellings that
never complete, tag openings that repeat, `<` and newline runs, so a parser that re-scans,
re-copies or recurses per unit shows up as memory or time growing faster than the push.

`run_state(name, size)` runs one workload in this interpreter and returns (seconds, peak RSS
growth in bytes, number of items returned); `child_code(name, size)` is the same as a
`python -c` program printing those three numbers, for a fresh interpreter.
"""

from __future__ import annotations

D = "｜DSML｜"
OPEN = f"<{D} calls>\n<{D} invoke name=\"f\">\n"
PARAM = f'<{D} parameter name="'

# name: (protocol, thinking, parsing options, prefix, unit, token input)
STATES = {
    "content_prose_marker": ("chat", False, {}, "Hi ", f"<{D}", False),
    "content_param_open": ("chat", False, {}, "", PARAM, False),
    "content_lt_newlines": ("chat", False, {}, "", "<\n\n", False),
    "content_marker_prefix": ("chat", False, {}, "", f"<{D[:2]}", False),
    "reasoning_prose_marker": ("responses", True, {"thinking_initial_stage": "ReasoningStart"}, "think ", f"<{D}", False),
    "reasoning_think_end_prefix": ("chat", True, {"thinking_initial_stage": "ReasoningStart"}, "", "</thin\n", False),
    "block_tentative": ("chat", False, {}, "x", f"<{D} cal", False),
    "block_between": ("chat", False, {}, f"<{D} calls>\n", PARAM, False),
    "invoke_name": ("chat", False, {}, f"<{D} calls>\n<{D} invoke name=\"", PARAM, False),
    "invoke_tag_end": ("chat", False, {}, f"<{D} calls>\n<{D} invoke name=\"f\"", PARAM, False),
    "invoke_body": ("messages", False, {}, OPEN, PARAM, False),
    "invoke_body_thinking": ("responses", True, {"thinking_initial_stage": "ReasoningStart"}, "plan" + OPEN, PARAM, False),
    "parameter_key": ("chat", False, {}, OPEN + f'<{D} parameter name="k', f"<{D}", False),
    "parameter_attrs": ("chat", False, {}, OPEN + f'<{D} parameter name="k" ', PARAM, False),
    "value_string": ("chat", False, {}, OPEN + f'<{D} parameter name="k" string="true">', f"</{D}x<", False),
    "value_raw": ("responses", False, {}, OPEN + f'<{D} parameter name="k" string="false">', f"</{D}x<", False),
    "value_buffered": ("chat", False, {}, OPEN + f'<{D} parameter name="k">', f"</{D}x<", False),
    "close_tag": ("chat", False, {}, OPEN + f'<{D} parameter name="k" string="true">v</{D} parameter', PARAM, False),
    "starts_in_calls": ("chat", False, {"starts_in_tool_calls": True}, "", PARAM, False),
    "stop_sequence_prefix": ("chat", False, {"stop_sequences": ["abcX", "<<z"]}, "", "abc<<", False),
    "json_output": ("chat", False, {"parse_json_output": True}, "Sure: ", '{"a": [1, "<' + D + '"], ', False),
    "json_prose_marker": ("chat", False, {"parse_json_output": True}, "Hi ", f"<{D}", False),
    "json_think_end": ("chat", False, {"parse_json_output": True}, "Hi ", "a</think>", False),
    "tokens_prose_marker": ("chat", False, {}, "Hi ", f"<{D}", True),
    "tokens_invoke_body": ("messages", False, {}, OPEN, PARAM, True),
}


def _generator(dr, fmt, thinking, stage):
    if fmt == "chat":
        return dr.ChatCompletionChunkGenerator("c", "m", thinking_mode=thinking, thinking_initial_stage=stage)
    if fmt == "responses":
        return dr.ResponsesChunkGenerator("r", "m", thinking_mode=thinking, thinking_initial_stage=stage)
    return dr.MessagesChunkGenerator("x", "m", thinking)


def run_state(name: str, size: int, tokenizer_path: str | None = None):
    import time

    import deepseek_recipe as dr

    fmt, thinking, options, prefix, unit, tokens = STATES[name]
    kw = dict(options)
    stage = kw.pop("thinking_initial_stage", None)
    stage = None if stage is None else getattr(dr.ThinkingInitialStage, stage)
    opts = dr.ParsingOptions(thinking_initial_stage=stage, **kw)
    tok = dr.Tokenizer.from_file(tokenizer_path) if tokens else None
    sp = dr.StreamProcessor(_generator(dr, fmt, thinking, stage), opts, tok)
    payload = unit * max(1, size // len(unit.encode()))
    if tokens:
        first, chunk = dr.InferenceChunk.tokens(tok.encode(prefix)), dr.InferenceChunk.tokens(tok.encode(payload))
    else:
        first, chunk = dr.InferenceChunk.text(prefix, 1), dr.InferenceChunk.text(payload, 1)
    sp.push(first)
    from peak_memory import peak_rss_bytes, reset_peak

    reset_peak()
    before = peak_rss_bytes()
    t = time.perf_counter()
    n = len(sp.push(chunk)) + len(sp.finish())
    took = time.perf_counter() - t
    return took, peak_rss_bytes() - before, n


def child_code(name: str, size: int, tokenizer_path: str | None = None) -> str:
    from pathlib import Path
    here = str(Path(__file__).resolve().parent)
    return (f"import sys; sys.path.insert(0, {here!r})\n"
            f"from stream_push_states import run_state\n"
            f"t, rss, n = run_state({name!r}, {size}, {tokenizer_path!r})\n"
            f"print(t, rss, n)\n")
