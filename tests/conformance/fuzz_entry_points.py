"""Bounded crash fuzz of the request-conversion and encoding entry points (ours only).

    .venv/bin/python tests/conformance/fuzz_entry_points.py SECONDS [SEED]

Each round runs a child process that feeds random inputs (deep nesting in every JSON slot, long
and odd strings, every special spelling, images everywhere, random bodies as text / bytes /
objects) through `ToolDefinition`, `Conversation`, the three request classes, `convert`,
`render_conversation` and `encode`. Python exceptions are expected; the child must never die
from a signal. Prints the number of inputs and any crashing seed.
"""

from __future__ import annotations

import subprocess
import sys
import time

CHILD = r'''
import json, random, sys
import deepseek_recipe as dr
from encoding_spec import tokenizer_path, system_tokenizer_json
seed, n = int(sys.argv[1]), int(sys.argv[2])
r = random.Random(seed)
tok = dr.Tokenizer.from_str(system_tokenizer_json(open(tokenizer_path(), encoding="utf-8").read()))
SP = ["<｜image｜>", "<｜User｜>", "</think>", "｜DSML｜", "<｜ref｜>", "<｜begin▁of▁sentence｜>", "\ud7ff", "é", "\x00", ""]

def deep(depth):
    v = r.choice(["x", 1, None, 1.5, True])
    for _ in range(depth):
        v = r.choice([[v], {"k": v}, {"type": "object", "properties": {"p": v}}])
    return v

def text():
    return "".join(r.choice(SP + ["a", " "]) for _ in range(r.randint(0, 6)))

def value():
    c = r.random()
    if c < 0.2:
        return deep(r.choice([1, 5, 127, 128, 129, 1000, 20000]))
    if c < 0.5:
        return text()
    return r.choice([None, 0, -1, 2**70, 1e308, [], {}, [text()], {"type": "string"}])

def body(fmt):
    img = {"chat": {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
           "responses": {"type": "input_image", "image_url": "https://x/a.png"},
           "messages": {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}}}[fmt]
    tpart = {"type": "input_text" if fmt == "responses" else "text", "text": text()}
    content = r.choice([text(), [tpart, img], [img, tpart, img], value()])
    msg = {"role": r.choice(["user", "system", "assistant", "tool", "developer"]), "content": content}
    b = {"model": r.choice(["DeepSeek-V4-Pro", "DeepSeek-V4.1-Flash"]), "max_tokens": 10}
    b["input" if fmt == "responses" else "messages"] = [msg, {"role": "user", "content": text() or "q"}]
    b["tools"] = r.choice([[{"type": "function", "function": {"name": "f", "parameters": value()}}],
                           [{"type": "function", "name": "f", "parameters": value()}],
                           [{"name": "f", "input_schema": value()}], value()])
    if r.random() < 0.5:
        b[r.choice(["unknown", "response_format", "text", "metadata", "tool_choice"])] = value()
    return b

for i in range(n):
    fmt = r.choice(["chat", "responses", "messages"])
    cls = {"chat": dr.ChatCompletionRequest, "responses": dr.ResponsesRequest, "messages": dr.MessagesRequest}[fmt]
    try:
        b = body(fmt)
        kind = r.random()
        try:
            payload = json.dumps(b) if kind < 0.3 else (json.dumps(b).encode() if kind < 0.5 else b)
        except (RecursionError, ValueError):
            payload = b
        conv = cls(payload).convert(dr.ConversionOptions()).conversation
    except Exception:
        try:
            conv = dr.Conversation([dr.UserMessage(text(), [dr.UrlImageSource("https://x/a.png")] * r.randint(0, 2)),
                                    dr.ToolMessage(text(), text() or None)],
                                   tools=[dr.ToolDefinition("f", text(), value())], response_schema=value())
        except Exception:
            continue
    for enc in (dr.DeepseekV4Encoding(), dr.DeepseekV41Encoding()):
        try:
            enc.render_conversation(conv)
            enc.with_tokenizer(tok).encode(conv)
        except Exception:
            pass
print(n)
'''


def main(argv):
    seconds = float(argv[0]) if argv else 60
    seed = int(argv[1]) if len(argv) > 1 else 1
    here = __file__.rsplit("/", 1)[0]
    end, total, crashes = time.time() + seconds, 0, []
    while time.time() < end:
        out = subprocess.run([sys.executable, "-c", CHILD, str(seed), "200"], capture_output=True, text=True,
                             cwd=here, env=None)
        if out.returncode != 0:
            crashes.append((seed, out.returncode, out.stderr[-300:]))
        else:
            total += int(out.stdout.strip() or 0)
        seed += 1
    print(f"{total} inputs, {len(crashes)} crashing rounds")
    for c in crashes:
        print("seed", c[0], "exit", c[1], c[2])
    return 1 if crashes else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
