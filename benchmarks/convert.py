"""Request body -> token IDs throughput for the three request formats: ours vs the official
deepseek-recipe 0.2.0, in the same run.

    python benchmarks/convert.py [--seconds 1.0]

Run it with the interpreter of the environment that has our package (`bash .ci/setup.sh`
builds it into `.venv`).

Each workload is a JSON body (bytes, as a gateway receives it). One iteration parses it,
converts it (`convert(ConversionOptions())`), renders and encodes the conversation with the
encoding of the request's model version (V4.1 uses a copy of the tokenizer that has
`<｜System｜>`, which the stock V4 tokenizer lacks). The official package runs in its side venv
(tests/conformance/official_venv.py) and times its own loop on the same bodies. Printed: median
time per request for conversion alone and for body -> token IDs, and official/ours ratios
(> 1 means ours is faster). Token IDs are checked to be identical.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "conformance"))

from encoding_spec import system_tokenizer_json, tokenizer_path  # noqa: E402


def _tools(n):
    return [{"name": f"tool_{i}", "description": f"Tool {i}: performs operation {i} on the workspace.",
             "parameters": {"type": "object", "properties": {f"arg_{k}": {"type": "string", "description": f"Argument {k}."}
                                                             for k in range(5)}, "required": ["arg_0"]}} for i in range(n)]


def workloads():
    """name -> (format, body dict)."""
    chat_tools = [{"type": "function", "function": t} for t in _tools(10)]
    chat_history = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Refactor the module."}]
    resp_items = [{"role": "user", "content": "Refactor the module."}]
    msg_history = [{"role": "user", "content": "Refactor the module."}]
    for turn in range(40):
        cid = f"call_{turn:02d}_abcdefghijklmnopqrstuvwx"
        args = json.dumps({"arg_0": f"src/module_{turn}.py", "arg_1": "x" * 40})
        out = f"def function_{turn}(a, b):\n    return a + b  # result {turn}\n" * 8
        chat_history += [{"role": "assistant", "content": "", "reasoning_content": f"Step {turn}: inspect. " * 6,
                          "tool_calls": [{"id": cid, "type": "function", "function": {"name": f"tool_{turn % 10}", "arguments": args}}]},
                         {"role": "tool", "tool_call_id": cid, "content": out}]
        resp_items += [{"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": f"Step {turn}: inspect. " * 6}]},
                       {"type": "function_call", "call_id": cid, "name": f"tool_{turn % 10}", "arguments": args},
                       {"type": "function_call_output", "call_id": cid, "output": out}]
        msg_history += [{"role": "assistant", "content": [{"type": "thinking", "thinking": f"Step {turn}: inspect. " * 6, "signature": "s"},
                                                          {"type": "tool_use", "id": cid, "name": f"tool_{turn % 10}", "input": json.loads(args)}]},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": out}]}]
    chat_history.append({"role": "user", "content": "Summarize."})
    resp_items.append({"role": "user", "content": "Summarize."})
    msg_history.append({"role": "user", "content": "Summarize."})
    short = [{"role": "user", "content": "Hi! Tell me a joke about compilers."}]
    return {
        "chat_short_v4": ("chat", {"model": "DeepSeek-V4-Pro", "messages": short, "thinking": {"type": "disabled"}, "temperature": 0.7}),
        "chat_agent_v4": ("chat", {"model": "DeepSeek-V4-Pro", "messages": chat_history, "tools": chat_tools}),
        "chat_agent_v41": ("chat", {"model": "DeepSeek-V4.1-Flash", "messages": chat_history, "tools": chat_tools}),
        "responses_agent_v4": ("responses", {"model": "DeepSeek-V4-Pro", "instructions": "You are a coding agent.", "input": resp_items,
                                             "tools": [dict(t, type="function") for t in _tools(10)]}),
        "messages_agent_v4": ("messages", {"model": "DeepSeek-V4-Pro", "max_tokens": 4096, "system": "You are a coding agent.",
                                           "messages": msg_history, "tools": [{"name": t["name"], "description": t["description"],
                                                                               "input_schema": t["parameters"]} for t in _tools(10)]}),
    }


def time_loop(fn, seconds):
    fn()
    samples = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(samples) < 5:
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def measure(seconds):
    import deepseek_recipe as dr

    text = Path(tokenizer_path()).read_text(encoding="utf-8")
    encoders = {
        "DeepseekV4Pro": dr.DeepseekV4Encoding().with_tokenizer(dr.Tokenizer.from_str(text)),
        "DeepseekV41Flash": dr.DeepseekV41Encoding().with_tokenizer(dr.Tokenizer.from_str(system_tokenizer_json(text))),
    }
    classes = {"chat": dr.ChatCompletionRequest, "responses": dr.ResponsesRequest, "messages": dr.MessagesRequest}
    options = dr.ConversionOptions()
    out = {}
    for name, (fmt, body) in workloads().items():
        raw = json.dumps(body).encode()
        cls = classes[fmt]

        def convert():
            return cls(raw).convert(options)

        def to_ids():
            req = convert()
            return encoders[str(req.model_version).split(".")[-1]].encode(req.conversation)

        out[name] = {"bytes": len(raw), "ids": to_ids(), "convert_s": time_loop(convert, seconds),
                     "total_s": time_loop(to_ids, seconds)}
    return out


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.seconds)))
        return 0
    from official_venv import run_in_official

    ours = measure(args.seconds)
    official = json.loads(run_in_official(__file__, "--child", "--seconds", str(args.seconds)).stdout)
    print("median time per request; ratio = official / ours (> 1: ours faster)")
    print(f"{'workload':20} {'bytes':>8} {'tokens':>7} {'ours conv':>10} {'off. conv':>10} {'ratio':>6} "
          f"{'ours total':>11} {'off. total':>11} {'ratio':>6}")
    for name, o in ours.items():
        f = official[name]
        same = "" if o["ids"] == f["ids"] else "  (token IDs differ!)"
        print(f"{name:20} {o['bytes']:8d} {len(o['ids']):7d} {o['convert_s'] * 1e3:8.3f}ms {f['convert_s'] * 1e3:8.3f}ms "
              f"{f['convert_s'] / o['convert_s']:6.2f} {o['total_s'] * 1e3:9.3f}ms {f['total_s'] * 1e3:9.3f}ms "
              f"{f['total_s'] / o['total_s']:6.2f}{same}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
