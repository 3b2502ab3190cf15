"""Our front end over `vllm serve --tokens-only` against `vllm serve` itself (needs a GPU; not in CI).

    python tests/integration/vllm_serve_diff.py MODEL_DIR [--model-version v4|v41] [--port-base 8100]

Starts three servers on 127.0.0.1: `vllm serve MODEL --tokens-only` (token IDs in and out),
`deepseek-recipe serve --backend vllm=...` in front of it, and a plain `vllm serve MODEL` with this
codec's plugin (`--tokenizer-mode deepseek_recipe ...`) as the reference. It sends the same greedy
requests (Chat, Responses, Messages; plain, thinking, tools, JSON mode, stop sequences, streaming)
to both front ends with the official SDKs and prints, per request, whether the answers agree
(text, reasoning, tool calls, finish reason, usage token counts). Differences in Responses and
Messages are expected where vLLM translates those APIs through Chat (README, "Serving at scale");
each one is printed with both answers. Exit status 0 when every Chat request agrees.
Run it from a venv holding vLLM 0.33 and `deepseek-recipe[server]`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from typing import Any

import anthropic
import httpx
import openai

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
ASK = [{"role": "user", "content": "What is 17 * 23? Answer briefly."}]
CHAT_CASES: list[tuple[str, dict[str, Any]]] = [
    ("plain", {"messages": ASK, "extra_body": {"thinking": {"type": "disabled"}}}),
    ("thinking", {"messages": ASK, "extra_body": {"thinking": {"type": "enabled"}}}),
    ("tools", {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER]}),
    ("json", {"messages": [{"role": "user", "content": "Give a JSON object with key a=1."}],
              "response_format": {"type": "json_object"}, "extra_body": {"thinking": {"type": "disabled"}}}),
    ("stop", {"messages": ASK, "stop": ["3"], "extra_body": {"thinking": {"type": "disabled"}}}),
    ("logprobs", {"messages": ASK, "logprobs": True, "top_logprobs": 2,
                  "extra_body": {"thinking": {"type": "disabled"}}}),
]


def start(cmd: list[str], url: str, log: str) -> subprocess.Popen[bytes]:
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{cmd[0]} exited; see {log}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc
        time.sleep(2)
    raise SystemExit(f"{url} did not become healthy; see {log}")


def chat_summary(r: Any) -> dict[str, Any]:
    m = r.choices[0].message
    return {"content": m.content, "reasoning": (m.model_extra or {}).get("reasoning_content"),
            "tool_calls": [(c.function.name, json.loads(c.function.arguments)) for c in m.tool_calls or []],
            "finish": r.choices[0].finish_reason, "prompt_tokens": r.usage.prompt_tokens,
            "completion_tokens": r.usage.completion_tokens}


def stream_summary(client: openai.OpenAI, model: str, case: dict[str, Any]) -> dict[str, Any]:
    text, reasoning = "", ""
    for chunk in client.chat.completions.create(model=model, stream=True, temperature=0, max_tokens=256, **case):
        for c in chunk.choices:
            text += c.delta.content or ""
            reasoning += (c.delta.model_extra or {}).get("reasoning_content") or ""
    return {"content": text, "reasoning": reasoning or None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--model-version", choices=["v4", "v41"], default="v41")
    ap.add_argument("--port-base", type=int, default=8100)
    ap.add_argument("--served-model-name", default="model")
    args = ap.parse_args()
    p_tokens, p_front, p_ref = args.port_base, args.port_base + 1, args.port_base + 2
    name = args.served_model_name
    procs = []
    try:
        procs.append(start(["vllm", "serve", args.model, "--tokens-only", "--port", str(p_tokens),
                            "--served-model-name", name, "--enable-prompt-tokens-details",
                            "--gpu-memory-utilization", "0.4"], f"http://127.0.0.1:{p_tokens}", "vllm-tokens.log"))
        procs.append(start([sys.executable, "-m", "deepseek_recipe", "serve", "--backend",
                            f"vllm=http://127.0.0.1:{p_tokens}", "--port", str(p_front), "--served-model-name", name,
                            "--model-version", args.model_version, "--tokenizer", f"{args.model}/tokenizer.json"],
                           f"http://127.0.0.1:{p_front}", "front-end.log"))
        procs.append(start(["vllm", "serve", args.model, "--port", str(p_ref), "--served-model-name", name,
                            "--tokenizer-mode", "deepseek_recipe", "--enable-auto-tool-choice",
                            "--tool-call-parser", "deepseek_recipe", "--reasoning-parser", "deepseek_recipe",
                            "--gpu-memory-utilization", "0.4"], f"http://127.0.0.1:{p_ref}", "vllm-ref.log"))
        ours = openai.OpenAI(base_url=f"http://127.0.0.1:{p_front}/v1", api_key="x", _strict_response_validation=True)
        ref = openai.OpenAI(base_url=f"http://127.0.0.1:{p_ref}/v1", api_key="x")
        chat_diffs = 0
        for label, case in CHAT_CASES:
            a = chat_summary(ours.chat.completions.create(model=name, temperature=0, max_tokens=256, **case))
            b = chat_summary(ref.chat.completions.create(model=name, temperature=0, max_tokens=256, **case))
            same = a == b
            chat_diffs += not same
            print(f"chat/{label}: {'same' if same else 'DIFFERENT'}")
            if not same:
                print("  ours:", json.dumps(a, ensure_ascii=False))
                print("  vllm:", json.dumps(b, ensure_ascii=False))
            a, b = stream_summary(ours, name, case), stream_summary(ref, name, case)
            print(f"chat/{label}/stream: {'same' if a == b else 'DIFFERENT'}")
            chat_diffs += a != b
        for label, make in (
            ("responses", lambda c: c.responses.create(model=name, input="What is 17 * 23?", temperature=0,
                                                       max_output_tokens=256).output_text),
        ):
            a, b = make(ours), make(ref)
            print(f"{label}: {'same' if a == b else 'different (expected where vLLM translates through Chat)'}")
        claude_ours = anthropic.Anthropic(base_url=f"http://127.0.0.1:{p_front}", api_key="x")
        claude_ref = anthropic.Anthropic(base_url=f"http://127.0.0.1:{p_ref}", api_key="x")
        body = {"model": name, "max_tokens": 256, "temperature": 0,
                "system": [{"type": "text", "text": "Be terse."}, {"type": "text", "text": "Use digits."}],
                "messages": [{"role": "user", "content": "What is 17 * 23?"}]}
        a = [b.model_dump() for b in claude_ours.messages.create(**body).content]
        b = [b.model_dump() for b in claude_ref.messages.create(**body).content]
        print(f"messages/system-blocks: {'same' if a == b else 'different (vLLM joins system blocks)'}")
        print(f"{chat_diffs} Chat differences")
        return 1 if chat_diffs else 0
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(60)


if __name__ == "__main__":
    sys.exit(main())
