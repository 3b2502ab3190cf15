"""An encoder command for `deepseek-recipe check --command` / `corpus --command`: vLLM's own
DeepSeek V4.1 prompt path (`vllm/tokenizers/deepseek_v41.py` and `deepseek_v41_encoding.py`, as
installed with `pip install vllm`), run unchanged on one Chat Completions body.

    python examples/vllm_v41_encoder.py < request.json      # prints the token IDs vLLM would use

Run it with the interpreter of a venv that has vLLM (no GPU needed). The two vLLM files are
loaded by path with light stand-ins for the vLLM modules they import for typing and caching
only (importing the `vllm` package itself pulls in torch and takes a minute). The tokenizer is
`transformers`' own, built from `$DEEPSEEK_TOKENIZER_JSON` with `<｜System｜>` added as ID 129280
when missing (the same copy `deepseek-recipe` uses), wrapped by vLLM's `get_deepseek_v41_tokenizer`,
whose `apply_chat_template` renders the prompt string and then tokenizes it.

Request → vLLM arguments, as a vLLM server passes them: `messages`, `tools` (left out for
`tool_choice: "none"`), and the template switches `thinking` (from `thinking.type`, default on)
and `reasoning_effort`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types


def _load_vllm_v41():
    spec = importlib.util.find_spec("vllm")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        sys.exit("vLLM is not installed in this interpreter")
    root = os.path.join(spec.submodule_search_locations[0], "tokenizers")
    for name in ("vllm", "vllm.tokenizers", "vllm.renderers"):
        mod = types.ModuleType(name)
        mod.__path__ = []
        sys.modules[name] = mod
    chat_utils = types.ModuleType("vllm.renderers.chat_utils")
    chat_utils.ChatCompletionMessageParam = dict
    hf = types.ModuleType("vllm.tokenizers.hf")
    hf.HfTokenizer = object
    hf.get_cached_tokenizer = lambda tok: tok
    protocol = types.ModuleType("vllm.tokenizers.protocol")
    protocol.TokenizerLike = object
    sys.modules.update({m.__name__: m for m in (chat_utils, hf, protocol)})
    loaded = {}
    for name in ("deepseek_v41_encoding", "deepseek_v41"):
        s = importlib.util.spec_from_file_location(f"vllm.tokenizers.{name}", os.path.join(root, f"{name}.py"))
        module = importlib.util.module_from_spec(s)
        sys.modules[s.name] = module
        s.loader.exec_module(module)
        loaded[name] = module
    return loaded["deepseek_v41"]


def _tokenizer():
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    path = os.environ.get("DEEPSEEK_TOKENIZER_JSON")
    if not path:
        sys.exit("set DEEPSEEK_TOKENIZER_JSON to tokenizer.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not any(t["content"] == "<｜System｜>" for t in data["added_tokens"]):
        data["added_tokens"].append({"id": 129280, "content": "<｜System｜>", "single_word": False, "lstrip": False,
                                     "rstrip": False, "normalized": False, "special": True})
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(data)),
                                   bos_token="<｜begin▁of▁sentence｜>", eos_token="<｜end▁of▁sentence｜>")


def main() -> int:
    body = json.load(sys.stdin)
    v41 = _load_vllm_v41()
    tok = v41.get_deepseek_v41_tokenizer(_tokenizer())
    kwargs = {"thinking": (body.get("thinking") or {}).get("type", "enabled") != "disabled"}
    if body.get("reasoning_effort") is not None:
        kwargs["reasoning_effort"] = body["reasoning_effort"]
    tools = body.get("tools") if body.get("tool_choice") != "none" else None
    ids = tok.apply_chat_template(body["messages"], tools=tools, **kwargs)
    print(json.dumps(list(ids)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
