"""Bounded crash and memory fuzz of the codec's entry points (ours only).

    .venv/bin/python tests/conformance/fuzz_entry_points.py SECONDS [SEED]

Each round runs a child process on a fresh seed, alternating two kinds of round:

* requests: random inputs (deep nesting in every JSON slot, long and odd strings, every special
  spelling, images everywhere, random bodies as text / bytes / objects) through
  `ToolDefinition`, `Conversation`, the three request classes, `convert`,
  `render_conversation` and `encode`;
* streams: cases drawn by stream_random.py (all three generators, every parser option, text and
  token input), some with one part repeated thousands of times (marker runs, parameter tags,
  `<` and newline runs) and pushed whole, one piece per push or at random cuts, through
  `StreamProcessor.push` / `finish` and the response accumulators.

Python exceptions are expected. A round fails when the child dies from a signal or when one
input raises the child's peak RSS by more than 64 MiB + 40x the input's size (the memory flag);
the child then prints what it was given. Prints the number of inputs, the crashing rounds and
the memory flags, with their seeds.
"""

from __future__ import annotations

import subprocess
import sys
import time

CHILD = r'''
import json, random, resource, sys
sys.path.insert(0, "../python")
import deepseek_recipe as dr
from encoding_spec import tokenizer_path, system_tokenizer_json
seed, n, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
r = random.Random(seed)
tok = dr.Tokenizer.from_str(system_tokenizer_json(open(tokenizer_path(), encoding="utf-8").read()))

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

def check_memory(before, size, what):
    grew = peak() - before
    if grew > 64 * 2**20 + 40 * size:
        print(f"MEMORY seed {seed}: {what}: peak RSS grew {grew >> 20} MiB for an input of {size} bytes",
              file=sys.stderr)
        sys.exit(3)
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

def request_round():
    for _ in range(n):
        before = peak()
        fmt = r.choice(["chat", "responses", "messages"])
        cls = {"chat": dr.ChatCompletionRequest, "responses": dr.ResponsesRequest,
               "messages": dr.MessagesRequest}[fmt]
        size = 0
        try:
            b = body(fmt)
            kind = r.random()
            try:
                payload = json.dumps(b) if kind < 0.3 else (json.dumps(b).encode() if kind < 0.5 else b)
            except (RecursionError, ValueError):
                payload = b
            size = len(payload) if isinstance(payload, (str, bytes)) else 0
            conv = cls(payload).convert(dr.ConversionOptions()).conversation
        except Exception:
            try:
                conv = dr.Conversation(
                    [dr.UserMessage(text(), [dr.UrlImageSource("https://x/a.png")] * r.randint(0, 2)),
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
        check_memory(before, size, f"{fmt} request")

# Pieces repeated to build one large adversarial push (marker runs inside and outside blocks).
D = "\uff5cDSML\uff5c"
AMPLIFY = [f"<{D}", f"<{D}parameter name=\"", f"<{D} invoke name=\"f\">", f"</{D} parameter>", "<", "\n",
           "</think>", "</thin", f"<{D} calls>", "<\uff5c", "\"", "{", "[", "é", "🦀"]

def amplified(case):
    """The case's output with one piece repeated 1,000-20,000 times, cut like the original."""
    piece = r.choice(AMPLIFY) * r.choice([1000, 5000, 20000])
    prefix = r.choice(["", f"<{D} calls>\n<{D} invoke name=\"f\">\n<{D} parameter name=\"q\" string=\"true\">",
                       "reasoning</think>", "text "])
    text = prefix + piece
    if case["tokenizer"]:
        ids = stream_tok.encode(text)
        chunks = [{"tokens": ids}] if r.random() < 0.5 else [{"tokens": ids[i:i + 97]} for i in range(0, len(ids), 97)]
    else:
        chunks = [{"text": text, "token_count": 1}] if r.random() < 0.5 else \
            [{"text": text[i:i + 101], "token_count": 1} for i in range(0, len(text), 101)]
    keep = [c for c in case["input"] if "ready" in c or "finish" in c]
    case["input"] = keep[:1] + chunks + keep[1:]
    return case, len(text.encode())

def lean_replay(case):
    """Push the case like stream_replay.replay, keeping nothing but the accumulated response."""
    from stream_replay import RESPONSE_CLASS_NAMES, inference_chunk, parsing_options
    from stream_support import generator
    cls = getattr(dr, RESPONSE_CLASS_NAMES[case["generator"]["format"]])
    sp = dr.StreamProcessor(generator(case["generator"]), parsing_options(dr, case["options"]),
                            stream_tok if case["tokenizer"] else None)
    resp = cls("id", "m", 0, 0, 0)
    for c in [*case["input"], None]:
        if c is None and sp.finished:
            break
        for item in sp.push(inference_chunk(dr, c)) if c is not None else sp.finish():
            item.to_json()
            cls.sse_event_name(item)
            resp.accumulate(item)
    resp.to_json()

def stream_round():
    import stream_random
    for case in stream_random.draw(n, seed, stream_tok):
        size = sum(len(json.dumps(c)) for c in case["input"])
        if r.random() < 0.3:
            case, size = amplified(case)
        before = peak()
        try:
            lean_replay(case)
        except Exception:
            pass
        check_memory(before, size, f"stream {case['name']}")

stream_tok = dr.Tokenizer.from_file(tokenizer_path())
request_round() if mode == "requests" else stream_round()
print(n)
'''


def main(argv):
    seconds = float(argv[0]) if argv else 60
    seed = int(argv[1]) if len(argv) > 1 else 1
    here = __file__.rsplit("/", 1)[0]
    end, crashes, flags = time.time() + seconds, [], []
    total = {"requests": 0, "streams": 0}
    while time.time() < end:
        mode = "requests" if seed % 2 else "streams"
        n = 200 if mode == "requests" else 40
        out = subprocess.run([sys.executable, "-c", CHILD, str(seed), str(n), mode], capture_output=True,
                             text=True, cwd=here, env=None)
        if out.returncode == 3:
            flags.append((seed, mode, out.stderr[-400:]))
        elif out.returncode != 0:
            crashes.append((seed, mode, out.returncode, out.stderr[-300:]))
        else:
            total[mode] += int(out.stdout.strip() or 0)
        seed += 1
    print(f"{total['requests']} request inputs, {total['streams']} streams, {len(crashes)} crashing rounds, "
          f"{len(flags)} memory flags")
    for c in crashes:
        print("crash: seed", c[0], c[1], "exit", c[2], c[3])
    for f in flags:
        print("memory: seed", f[0], f[1], f[2])
    return 1 if crashes or flags else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
