"""Random stream cases: realistic and adversarial model outputs, cut into backend chunks.

`draw(n, seed, tokenizer)` returns cases in the fixture format of generate_stream.py (generator,
parsing options, backend chunks), so a case found by the differential (diff_stream_random.py)
can be replayed by the fixture tests as it is.

An output is assembled from parts the model writes: reasoning, `</think>`, content, a DSML
tool-call block in the V4.1 (` calls`) or V4 (`tool_calls`) dialect, and text after it. Each part
is drawn from realistic pieces (prose, code, JSON, Unicode) mixed with adversarial ones (control
token spellings, marker prefixes, `<` and newline runs, unfinished or malformed tags). The same
output is then fed as text or as token IDs (some control tokens written out in ordinary tokens,
sometimes ending in half a character), whole, one character or token per push, or at random
cuts, with random prompt usage, finish reasons, logprobs, stop sequences, special-token
overrides, JSON output mode, namespace maps, echo settings and signatures.

Cases that can trigger a documented deviation (docs/stream-deviations.md) carry its number in
`deviations`, so the differential reports them apart from real differences.
"""

from __future__ import annotations

import random

from generate_stream import make_case, split_at

D = "｜DSML｜"
MODEL = "DeepSeek-V4.1-Flash"

PROSE = ["Hello, world!", "Let me think about this.", "Step 1: compute 2 + 2 = 4.", "The answer is 42.",
         "Sure.", "ok", " ", "\n", "\n\n", "\n\n\n", "Grüße, 世界 🦀 — ça va?", "日本語のテキスト", "ꙮ 𝒳 e\u0301",
         "a < b and c > d", "x<y", "<", "<<", "</", "< /think>", "</thin", "</think", "<thinking>", "</thinking>",
         "if (a<b) { return; }", "```python\nprint('hi')\n```", "- item\n- item 2\n", "\t\tindent",
         "quote \" and \\ backslash", "emoji 👩‍💻🇨🇳", "\u2028line sep", "tail.\n"]
# Control-token spellings and marker look-alikes that may appear inside text.
SPECIALS = ["<think>", "<｜User｜>", "<｜Assistant｜>", "<｜begin▁of▁sentence｜>", "<｜latest_reminder｜>",
            "<｜image｜>", "<｜System｜>", f"{D}", f"<{D}", f"</{D}", "<｜", "｜>", "<|User|>"]
VALUES = ["Paris", "rust é", "", " 7 ", "line1\nline2", 'print("hi")\n\tx = \'\\\\\'', "a < b", "<", "x</y",
          "日本 🦀", "{not json", "</", "a\n\n", "<b>bold</b>",
          # Control-token spellings inside a value (token input gives them by ID).
          "<｜image｜>", "a<think>b", "x<｜User｜>y", "<｜Assistant｜>\n", "*** Begin Patch\n+<｜image｜>\n"]
RAW_VALUES = ["3", "-1.5", "true", "null", '{"a": [1, 2, {"b": null}]}', "[1,2]", '"s"', " 7 "]
NAMES = ["get_weather", "search", "f", "c_d-e", "gh::create_issue", "mcp__srv__op", "ns__tool", "lookup",
         "日本", "a.b"]
KEYS = ["city", "query", "q", "n", "cfg", "名前", "a b", "k\"q", "input", "input", "k<｜image｜>", "<think>"]
STOPS = ["STOP", "\n\n", "END", "本d", "<", "Hello", "42", " the", "}", "```", "ok", "é", "</", "\n"]
FINISHES = ["Stop", "Length", "ContentFilter", None]
# Token IDs from here on are the added vocabulary (control tokens).
SPECIAL_IDS = 128000


def prose(rng: random.Random, n: int, specials: float = 0.15) -> str:
    parts = []
    for _ in range(n):
        parts.append(rng.choice(SPECIALS) if rng.random() < specials else rng.choice(PROSE))
    return "".join(parts)


def param(rng: random.Random, sp: str, d: str) -> tuple[str, set]:
    """One parameter tag; returns the text and the deviations it may trigger."""
    key = rng.choice(KEYS)
    r = rng.random()
    devs = set()
    if " " in key or '"' in key:
        devs.add(6)
    if r < 0.55:
        attr, value = ' string="true"', rng.choice(VALUES)
    elif r < 0.9:
        attr, value = ' string="false"', rng.choice(RAW_VALUES)
    else:
        attr, value = rng.choice(["", ' string="maybe"']), rng.choice(VALUES + RAW_VALUES)
        devs.add(2)
    return f'<{d}{sp}parameter name="{key}"{attr}>{value}</{d}{sp}parameter>\n', devs


def invoke(rng: random.Random, sp: str, d: str, name: str) -> tuple[str, set]:
    devs = set()
    body = ""
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        p, dv = param(rng, sp, d)
        body += p
        devs |= dv
    if not body and sp:
        body = "\n"
    return f'<{d}{sp}invoke name="{name}">\n{body}</{d}{sp}invoke>\n', devs


def calls_block(rng: random.Random, d: str, names: list) -> tuple[str, set]:
    """A DSML block in either dialect, sometimes malformed in ways the parser must survive."""
    v4 = rng.random() < 0.35
    sp = "" if v4 else " "
    tag = "tool_calls" if v4 else " calls"
    devs = set()
    invokes = ""
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        inv, dv = invoke(rng, sp, d, rng.choice(names))
        invokes += inv
        devs |= dv
    lead = rng.choice(["\n\n", "\n", "", "\n\n\n"])
    block = f"{lead}<{d}{tag}>\n{invokes}</{d}{tag}>"
    r = rng.random()
    if r < 0.12:
        # No calls wrapper: the block opens with its first invoke.
        block = lead + invokes + rng.choice(["", f"</{d}{tag}>"])
    elif r < 0.24:
        # The stream ends inside the block.
        cut = rng.randrange(len(lead) + len(f"<{d}{tag}>"), len(block) + 1)
        block = block[:cut]
    elif r < 0.32:
        # Garbage between tags inside the block.
        pos = block.find(">", len(lead)) + 1
        block = block[:pos] + rng.choice(["junk ", "\n\n  ", "<b>", "</x>", "<", prose(rng, 1, 0)]) + block[pos:]
    return block, devs


def draw_output(rng: random.Random, thinking: bool, stage, parse_tools: bool, d: str, think_end: str,
                names: list, json_mode: bool) -> tuple[str, set]:
    devs = set()
    parts = []
    in_reasoning = stage in ("ReasoningStart", "ReasoningContinuation")
    if in_reasoning:
        parts.append(rng.choice(["", "\n\n", "\n"]) + prose(rng, rng.randint(0, 4)))
        if rng.random() < 0.8:
            parts.append(think_end)
            parts.append(rng.choice(["", "\n\n", "\n"]))
    if json_mode:
        value = rng.choice(['{"a": [1, {"b": "x}"}], "c": null}', '[1, 2, 3]', '{"k": "v"}', '{"s": "日本"}'])
        fence = rng.random() < 0.4
        # Fences the filter reads and look-alikes it does not (another case, a space, no newline).
        opening = rng.choice(["```json\n"] * 4 + ["```\n", "```JSON\n", "``` json\n", "```json "])
        body = f"{opening}{value}\n```" if fence else value
        # Prose around the value, some of it with backticks that open no fence.
        parts.append(rng.choice(["", "Sure, here: ", "Here:\n", "Use `x` and ``: ", "a ``` b\n"]) + body
                     + rng.choice(["", " hope that helps", "\nDone.", "\n```", "```\nmore"]))
    else:
        parts.append(prose(rng, rng.randint(0, 5)))
    block_at = -1
    if parse_tools and rng.random() < 0.45:
        block, dv = calls_block(rng, d, names)
        block_at = len(parts)
        parts.append(block)
        devs |= dv
        if rng.random() < 0.2:
            parts.append(prose(rng, 2))
    if rng.random() < 0.06:
        # A marker spelling in prose that does not open a block.
        at = rng.randrange(len(parts) + 1)
        parts.insert(at, f"<{d}" + rng.choice(["and more", " cal", "", "x"]))
        if block_at >= at:
            block_at += 1
    # Prose that mentions `<｜DSML｜` without opening a block is kept by us and swallowed by the
    # official package (deviation 1).
    if parse_tools and any(f"<{d}" in p for i, p in enumerate(parts) if i != block_at):
        devs.add(1)
    return "".join(parts), devs


def draw_options(rng: random.Random, thinking: bool, stage, fmt: str):
    opts = {}
    if rng.random() < 0.15:
        opts["parse_tool_calls"] = False
    if rng.random() < 0.08:
        opts["starts_in_tool_calls"] = True
    if rng.random() < 0.1:
        opts["parse_json_output"] = True
    opts["thinking_initial_stage"] = stage
    if rng.random() < 0.05:
        opts["thinking_initial_stage"] = rng.choice([None, "ReasoningStart", "ReasoningContinuation",
                                                     "ContentContinuation"])
    if rng.random() < 0.25:
        opts["stop_sequences"] = rng.sample(STOPS, rng.randint(1, 3))
    if rng.random() < 0.08:
        special = {}
        if rng.random() < 0.5:
            special["thinking_end"] = rng.choice(["</end>", "</think>", "<｜User｜>", "ENDTHINK"])
        if rng.random() < 0.5 or not special:
            special["dsml"] = rng.choice(["｜TOOL｜", "｜DSML｜", "DSML"])
        opts["special_tokens"] = special
    return opts


def draw_generator(rng: random.Random, fmt: str, k: int, names: list):
    thinking = rng.random() < 0.5
    stage = "ReasoningStart" if thinking else None
    if fmt == "chat" and thinking and rng.random() < 0.25:
        stage = rng.choice(["ReasoningContinuation", "ContentContinuation"])
    gen = {"format": fmt, "id": f"{fmt[:3]}-r{k}", "model": MODEL, "thinking_mode": thinking, "stage": stage}
    request = draw_request(rng, fmt, stage, names)
    if request is not None:
        gen["request"] = request
    if fmt == "responses":
        if not thinking:
            gen["echo"] = {"reasoning": {"effort": "none"}}
        if rng.random() < 0.3:
            mapped = rng.sample(names, 2)
            gen["namespace_map"] = {m: [rng.choice(["myns", "gh", "srv"]), rng.choice(["fn", "create", m])]
                                    for m in mapped}
        if rng.random() < 0.3:
            body = {}
            for key, vals in (("instructions", ["Be nice", "日本"]), ("temperature", [0.5, 0.0, 1.3]),
                              ("top_p", [0.9, 1.0]), ("max_output_tokens", [100, 1]), ("user", ["u1"]),
                              ("top_logprobs", [3, 0]),
                              ("text", [{"format": {"type": "json_object"}}, {"format": {"type": "text"}},
                                        {"verbosity": "low"}]),
                              ("tool_choice", ["auto", "none", "required"])):
                if rng.random() < 0.5:
                    body[key] = rng.choice(vals)
            if not thinking:
                body["reasoning"] = {"effort": "none"}
            elif rng.random() < 0.5:
                body["reasoning"] = {"effort": rng.choice(["high", "low"]), "summary": rng.choice(["auto", None])}
            if rng.random() < 0.5:
                body["tools"] = [{"type": "function", "name": "f", "description": "d",
                                  "parameters": {"type": "object", "properties": {}}}]
            gen["echo_body"] = body
            gen["echo"] = body
    if fmt == "messages" and rng.random() < 0.3:
        gen["signature"] = rng.choice(["sig-123", "", "Ωsig"])
    return gen, thinking, stage


SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}
CHAT_FORMATS = [None, {"type": "text"}, {"type": "json_object"},
                {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}},
                {"type": "regex", "regex": "[a-z]+"}]
RESPONSES_FORMATS = [None, {"format": {"type": "text"}}, {"format": {"type": "json_object"}},
                     {"format": {"type": "json_schema", "name": "x", "schema": SCHEMA}}]
FUNCTION_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


def draw_stream_flags(rng: random.Random, fmt: str) -> dict:
    """`stream` absent, false or true; for Chat with true, `stream_options` with or without usage."""
    body = {}
    flag = rng.choice([None, False, True, True])
    if flag is not None:
        body["stream"] = flag
    if fmt == "chat" and flag:
        opt = rng.choice([None, {"include_usage": True}, {"include_usage": False}, {}])
        if opt is not None:
            body["stream_options"] = opt
    return body


def draw_request(rng: random.Random, fmt: str, stage, names: list):
    """Fields the converted request adds to its body (every response format, thinking setting and
    stream option; Responses tools, custom ones among them), or None for the bare request."""
    if rng.random() < 0.2:
        return None
    body = draw_stream_flags(rng, fmt)
    if fmt == "chat":
        # A prefix assistant turn (the continuation stages) cannot go with json_object.
        fmt_choice = rng.choice(CHAT_FORMATS if stage not in ("ReasoningContinuation", "ContentContinuation")
                                else CHAT_FORMATS[:2])
        if fmt_choice is not None:
            body["response_format"] = fmt_choice
        if stage is not None and rng.random() < 0.5:
            body["thinking"] = {"type": "enabled"}
    elif fmt == "responses":
        text = rng.choice(RESPONSES_FORMATS)
        if text is not None:
            body["text"] = text
        tools = []
        if rng.random() < 0.5:
            # The custom apply_patch tool: its calls are `custom_tool_call` items with `input`.
            tools.append({"type": "custom", "name": "apply_patch"})
            names.append("apply_patch")
        for name in rng.sample(names[:3], rng.randint(0, 2)):
            if "::" not in name:
                tools.append({"type": "function", "name": name, "parameters": FUNCTION_SCHEMA})
        if tools:
            body["tools"] = tools
    else:
        if stage is not None and rng.random() < 0.3:
            body["thinking"] = {"type": "enabled", "budget_tokens": rng.choice([1024, 4096])}
    return body


def cuts_for(rng: random.Random, n: int) -> list:
    """Cut positions: whole, every position, or random cuts."""
    r = rng.random()
    if n <= 1 or r < 0.25:
        return []
    if r < 0.5:
        return list(range(1, n))
    k = rng.randint(1, min(n - 1, 12))
    return sorted(rng.sample(range(1, n), k))


def logprobs_for(rng: random.Random, ids: list, vocab: int = 128000) -> list:
    out = []
    for t in ids:
        lp = -round(rng.random() * 5, 3)
        top = [[t, lp]] + [[rng.randrange(vocab), -round(rng.random() * 9, 3)] for _ in range(rng.choice([0, 1, 2]))]
        out.append([lp, top])
    return out


def draw_case(rng: random.Random, k: int, tok) -> dict:
    fmt = rng.choice(["chat", "responses", "messages"])
    names = rng.sample(NAMES, 3)
    gen, thinking, stage = draw_generator(rng, fmt, k, names)
    opts = draw_options(rng, thinking, stage, fmt)
    special = opts.get("special_tokens", {})
    d = special.get("dsml", D)
    think_end = special.get("thinking_end", "</think>")
    parse_tools = opts.get("parse_tool_calls", True)
    text, devs = draw_output(rng, thinking, opts["thinking_initial_stage"], parse_tools, d, think_end, names,
                             opts.get("parse_json_output", False))
    if opts.get("starts_in_tool_calls"):
        inv, dv = invoke(rng, " ", d, rng.choice(names))
        text = inv + f"</{d} calls>" + (prose(rng, 1) if rng.random() < 0.3 else "")
        devs |= dv
    if opts.get("parse_json_output"):
        devs.add(5)
    use_tokens = rng.random() < 0.5
    ready = None
    if rng.random() < 0.7:
        ready = {"prompt_tokens": rng.randint(0, 5000), "prompt_cache_hit_tokens": 0,
                 "system_fingerprint": rng.choice([None, "fp_test"])}
        ready["prompt_cache_hit_tokens"] = rng.randint(0, ready["prompt_tokens"])
        if rng.random() < 0.15:
            ready = {"system_fingerprint": ready["system_fingerprint"]}  # no prompt usage
    finish = rng.choice(FINISHES)
    if use_tokens:
        ids = tok.encode(text)
        if rng.random() < 0.2:
            # Some control tokens written out in ordinary tokens (one character at a time), as a
            # model may spell one: only a token given by ID is the control token.
            spelled = [t >= SPECIAL_IDS and rng.random() < 0.5 for t in ids]
            if parse_tools and any(s and tok.decode([t]) == d for t, s in zip(ids, spelled)):
                # A block whose opening marker is written out is prose, and a later `<` with the
                # marker by ID that opens no block is swallowed by the official package.
                devs.add(1)
            ids = [i for t, s in zip(ids, spelled)
                   for i in ([j for ch in tok.decode([t]) for j in tok.encode(ch)] if s else [t])]
        if rng.random() < 0.05:
            # The output ends in the first byte of a two-byte-token character.
            ids.append(tok.encode("\u2028")[0])
        if 1 in ids:
            devs.add(3)
        with_lp = rng.random() < 0.5
        lps = logprobs_for(rng, ids) if with_lp else None
        chunks = []
        pos = 0
        for piece in split_at(ids, cuts_for(rng, len(ids))):
            c = {"tokens": piece}
            if with_lp:
                c["logprobs"] = lps[pos:pos + len(piece)]
            pos += len(piece)
            chunks.append(c)
        if chunks and rng.random() < 0.08:
            # An error in the middle of the stream: a chunk whose log-probability count does not
            # match its IDs, or an ID outside the vocabulary (deviation 4); the response is then
            # accumulated from what came before.
            at = rng.randrange(len(chunks) + 1)
            if rng.random() < 0.5:
                bad = {"tokens": [67, 68], "logprobs": [[-1.0, []]]}
            else:
                bad = {"tokens": [67, 999999, 68]}
                devs.add(4)
            chunks.insert(at, bad)
    else:
        chunks = [{"text": p, "token_count": rng.randint(0, 3)} for p in split_at(text, cuts_for(rng, len(text)))]
    case = make_case(f"random/{k}/{fmt}/{'tokens' if use_tokens else 'text'}", gen, opts, chunks, ready, finish,
                     tokenizer=use_tokens)
    if rng.random() < 0.15:
        # The caller ends the stream without a finish: closes it or just stops, sometimes before
        # the backend's last chunks; the response is accumulated from what was pushed.
        case["end"] = rng.choice(["close", "none"])
        case["input"] = case["input"][:rng.randint(0, len(case["input"]))]
    case["deviations"] = sorted(devs)
    return case


def draw(n: int, seed: int, tok) -> list:
    rng = random.Random(seed)
    return [draw_case(rng, k, tok) for k in range(n)]
