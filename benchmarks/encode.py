"""Conversation -> token IDs throughput: ours vs the official deepseek-recipe 0.2.0.

    python benchmarks/encode.py [--seconds 1.0] [--version v4|v41]

Run with the interpreter of the venv that has our package (`bash .ci/setup.sh` builds it into `.venv`). The
official package runs in the side venv (tests/conformance/official_venv.py) as a subprocess that
times its own loop on the same conversations.

The `agent_*_next_turn` workloads time an agent's next turn (the model's new tool call plus its
result appended to an 8K-100K token history): ours with an `EncodingSession` that encoded the
previous turn, against a cold `encode` of the whole new history by the official package. The
session's memory is printed beside it. For each workload it prints the time per
conversation for `encode` and for `render_conversation` alone (so the tokenizer's share is
(encode - render) / encode), and the ratio official/ours (> 1 means ours is faster).

The two packages are measured in alternating rounds (`--rounds`) and the fastest time of each is
kept, so a busy machine disturbs the comparison as little as possible.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "conformance"))

from encoding_spec import build_conversation, system_tokenizer_json, tokenizer_path  # noqa: E402


def workloads():
    tools = [{"name": f"tool_{i}", "description": f"Tool number {i}: performs operation {i} on the workspace. " * 3,
              "parameters": {"type": "object", "properties": {f"arg_{k}": {"type": "string", "description": f"Argument {k} of tool {i}."}
                                                              for k in range(6)}, "required": ["arg_0"]}} for i in range(10)]
    history = [{"role": "system", "content": "You are a coding agent. Work carefully."},
               {"role": "user", "content": "Please refactor the module and run the tests. 请用中文总结。"}]
    turn = 0
    while len(json.dumps(history, ensure_ascii=False)) < 30000:  # ~8K tokens
        cid = f"call_{turn:02d}_abcdefghijklmnopqrstuvwx"
        history.append({"role": "assistant", "content": "", "reasoning_content": f"Step {turn}: I will inspect the files and decide. " * 4,
                        "tool_calls": [{"id": cid, "name": f"tool_{turn % 10}", "arguments": json.dumps({"arg_0": f"src/module_{turn}.py", "arg_1": "x" * 40})}]})
        history.append({"role": "tool", "content": f"def function_{turn}(a, b):\n    return a + b  # result {turn}\n" * 12, "tool_call_id": cid})
        turn += 1
    history.append({"role": "user", "content": "Great, now summarize."})
    paragraph = ("In the beginning the universe was created. This has made a lot of people very angry and been widely "
                 "regarded as a bad move. 人工智能正在改变世界。Numbers 12345 and symbols {}[]() appear too.\n\n")
    doc = paragraph * 1450  # ~100K tokens
    next_turns = {name: agent_history(chars, tools) for name, chars in NEXT_TURN_SIZES.items()}
    return next_turns, {
        "short_chat": {"messages": [{"role": "system", "content": "Be helpful."}, {"role": "user", "content": "Hi! How are you?"},
                                    {"role": "assistant", "content": "Fine, thanks."}, {"role": "user", "content": "Tell me a joke."}],
                       "thinking_mode": False},
        "agent_8k_10_tools": {"messages": history, "tools": tools, "thinking_mode": True},
        "document_100k": {"messages": [{"role": "user", "content": "Summarize this document:\n\n" + doc}], "thinking_mode": False},
    }


def agent_history(target_chars, tools):
    """An agent history of about `target_chars` characters ending with a tool result, and the
    next turn: one new assistant call and its result."""
    history = [{"role": "system", "content": "You are a coding agent. Work carefully."},
               {"role": "user", "content": "Please refactor the module and run the tests. 请用中文总结。"}]

    def turn(t):
        cid = f"call_{t:03d}_abcdefghijklmnopqrstuvwx"
        return [{"role": "assistant", "content": "", "reasoning_content": f"Step {t}: I will inspect the files and decide. " * 4,
                 "tool_calls": [{"id": cid, "name": f"tool_{t % 10}", "arguments": json.dumps({"arg_0": f"src/module_{t}.py", "arg_1": "x" * 40})}]},
                {"role": "tool", "content": f"def function_{t}(a, b):\n    return a + b  # result {t}\n" * 12, "tool_call_id": cid}]
    t = 0
    while len(json.dumps(history, ensure_ascii=False)) < target_chars:
        history += turn(t)
        t += 1
    spec = {"messages": history, "tools": tools, "thinking_mode": True}
    return spec, {**spec, "messages": history + turn(t)}


NEXT_TURN_SIZES = {"agent_8k_next_turn": 30000, "agent_32k_next_turn": 120000, "agent_100k_next_turn": 380000}


def time_loop(fn, seconds):
    """Fastest of repeated calls during `seconds` (at least 3 calls)."""
    fn()  # warm-up
    samples = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(samples) < 3:
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return min(samples)


def measure(seconds, version):
    """Time encode and render for every workload with whatever `deepseek_recipe` is importable."""
    import deepseek_recipe as dr

    text = Path(tokenizer_path()).read_text(encoding="utf-8")
    tok = dr.Tokenizer.from_str(system_tokenizer_json(text) if version == "v41" else text)
    enc = (dr.DeepseekV41Encoding() if version == "v41" else dr.DeepseekV4Encoding()).with_tokenizer(tok)
    out = {}
    next_turns, plain = workloads()
    for name, spec in plain.items():
        conv = build_conversation(dr, spec)
        n_tokens = len(enc.encode(conv))
        out[name] = {"tokens": n_tokens,
                     "encode_s": time_loop(lambda: enc.encode(conv), seconds),
                     "render_s": time_loop(lambda: enc.render_conversation(conv), seconds)}
    for name, (prev_spec, next_spec) in next_turns.items():
        prev, nxt = build_conversation(dr, prev_spec), build_conversation(dr, next_spec)
        cold = enc.encode(nxt)
        row = {"tokens": len(cold), "encode_s": time_loop(lambda: enc.encode(nxt), seconds)}
        if hasattr(dr, "EncodingSession"):  # ours only: the next turn through a warm session
            session = dr.EncodingSession(enc)
            assert session.encode(prev) is not None and session.encode(nxt) == cold
            assert session.last_turn.extends_previous
            row["session_s"] = time_session(session, prev, nxt, seconds)
            row["session_bytes"] = session.memory_bytes
        out[name] = row
    return out


def time_session(session, prev, nxt, seconds):
    """Fastest `session.encode(nxt)` right after `session.encode(prev)` (at least 3 samples)."""
    samples = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(samples) < 3:
        session.encode(prev)
        t = time.perf_counter()
        session.encode(nxt)
        samples.append(time.perf_counter() - t)
    return min(samples)


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--version", choices=["v4", "v41"], default="v4")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.seconds, args.version)))
        return 0
    from official_venv import run_in_official

    def best(a, b):
        return {k: {m: b[k][m] if m in ("tokens", "session_bytes") else min(a[k][m], b[k][m]) for m in b[k]} for k in b}

    ours = official = None
    for _ in range(args.rounds):
        o = measure(args.seconds, args.version)
        f = json.loads(run_in_official(__file__, "--child", "--seconds", str(args.seconds), "--version", args.version).stdout)
        ours = o if ours is None else best(ours, o)
        official = f if official is None else best(official, f)
    print(f"encoding {args.version}; fastest time per conversation over {args.rounds} alternating rounds")
    print(f"{'workload':20} {'tokens':>7} {'ours enc':>10} {'off. enc':>10} {'ratio':>6} {'ours tok%':>9} {'off. tok%':>9}")
    for name, o in ours.items():
        if "session_s" in o:
            continue
        f = official[name]
        assert o["tokens"] == f["tokens"], f"{name}: token counts differ ({o['tokens']} vs {f['tokens']})"
        share = lambda r: 100 * max(0.0, r["encode_s"] - r["render_s"]) / r["encode_s"]  # noqa: E731
        print(f"{name:20} {o['tokens']:7d} {o['encode_s'] * 1e3:8.3f}ms {f['encode_s'] * 1e3:8.3f}ms "
              f"{f['encode_s'] / o['encode_s']:6.2f} {share(o):8.1f}% {share(f):8.1f}%")
    print()
    print("agent next turn: ours with an EncodingSession vs a cold encode of the whole history")
    print(f"{'workload':22} {'tokens':>7} {'ours sess.':>10} {'ours cold':>10} {'off. cold':>10} {'vs off.':>8} {'vs ours':>8} {'memory':>9}")
    for name, o in ours.items():
        if "session_s" not in o:
            continue
        f = official[name]
        assert o["tokens"] == f["tokens"], f"{name}: token counts differ ({o['tokens']} vs {f['tokens']})"
        print(f"{name:22} {o['tokens']:7d} {o['session_s'] * 1e3:8.3f}ms {o['encode_s'] * 1e3:8.3f}ms "
              f"{f['encode_s'] * 1e3:8.3f}ms {f['encode_s'] / o['session_s']:7.1f}x {o['encode_s'] / o['session_s']:7.1f}x "
              f"{o['session_bytes'] / 2**20:7.2f}MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
