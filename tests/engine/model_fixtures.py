"""Shared helpers for the model tests: fixture paths, cached model loading, greedy decoding."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import torch
from deepseek_engine.models.deepseek_v4.model import DeepseekV4ForCausalLM
from deepseek_engine.models.loader import load_model
from safetensors.torch import load_file

DATA = Path(__file__).resolve().parent / "data"
PLAIN = DATA / "tiny_v4"
QUANT = DATA / "tiny_v4_quant"

torch.set_num_threads(1)


@cache
def model(path: Path) -> DeepseekV4ForCausalLM:
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"missing fixture {path}; regenerate with tests/engine/make_reference.py")
    return load_model(path)


@cache
def reference(name: str) -> dict[str, torch.Tensor]:
    return load_file(str(DATA / f"{name}_reference.safetensors"))


def greedy(m: DeepseekV4ForCausalLM, prompt: torch.Tensor, steps: int, block_size: int = 16) -> list[int]:
    """Prefill ``prompt`` then decode ``steps`` tokens one at a time through the paged cache."""
    cache = m.new_cache(prompt.numel() + steps, block_size)
    logits = m(prompt, torch.arange(prompt.numel()), cache)
    out = [int(logits[-1].argmax())]
    while len(out) < steps:
        logits = m(torch.tensor([out[-1]]), torch.tensor([cache.num_tokens]), cache)
        out.append(int(logits[-1].argmax()))
    return out


def describe_token_diff(got: list[int], want: list[int]) -> str:
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    return f"first difference at step {first}: got {got[first:first + 8]} want {want[first:first + 8]}"
