"""Tiny random DeepSeek V4 checkpoints for demos and benchmarks (needs ``transformers``).

``ensure_tiny_checkpoint(folder)`` writes, once, a seeded random
``DeepseekV4ForCausalLM`` with a small hidden size but the real 129280-entry
vocabulary, so prompts encoded with the real tokenizer fit. The same seed always
gives the same weights. The checkpoint is written by ``transformers``'
``save_pretrained``, so both ``transformers`` and this engine can load it.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

TINY_CONFIG = dict(
    hidden_size=32, moe_intermediate_size=32, num_hidden_layers=4, num_attention_heads=4, head_dim=32,
    q_lora_rank=16, num_experts_per_tok=2, n_routed_experts=4,
    layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                 "compressed_sparse_attention"],
    mlp_layer_types=["hash_moe", "moe", "moe", "moe"],
    compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
    o_groups=2, o_lora_rank=16, index_n_heads=4, index_head_dim=16, index_topk=8,
    partial_rotary_factor=0.25, sliding_window=64, max_position_embeddings=4096,
    hc_sinkhorn_iters=20, bos_token_id=0, eos_token_id=1,
)


@torch.no_grad()
def _randomize(model, seed: int) -> None:
    """Seeded values for every weight; the library's own init leaves several at zero."""
    g = torch.Generator().manual_seed(seed)
    for name, p in sorted(model.named_parameters()):
        if name.endswith("norm.weight"):
            value = 1.0 + 0.1 * torch.randn(p.shape, generator=g)
        elif name.endswith("embed_tokens.weight"):
            value = torch.randn(p.shape, generator=g)
        elif p.dim() >= 2:
            value = torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1])
        else:
            value = 0.2 * torch.randn(p.shape, generator=g)
        p.copy_(value.to(p.dtype))
    experts, k = model.config.n_routed_experts, model.config.num_experts_per_tok
    for name, b in model.named_buffers():
        if name.endswith("tid2eid"):
            b.copy_(torch.rand(b.shape[0], experts, generator=g).argsort(dim=1)[:, :k])
        elif name.endswith("e_score_correction_bias"):
            b.copy_(0.1 * torch.randn(b.shape, generator=g))


def ensure_tiny_checkpoint(folder: str | Path, vocab_size: int = 129280, seed: int = 0,
                           config: dict | None = None) -> Path:
    """Create the tiny checkpoint in ``folder`` unless it is already there; return the folder.

    ``config`` replaces ``TINY_CONFIG`` (other sizes, e.g. the benchmark's larger random model)."""
    folder = Path(folder)
    if (folder / "config.json").is_file() and any(folder.glob("*.safetensors")):
        return folder
    try:
        from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
    except ImportError as err:
        raise RuntimeError("creating the tiny checkpoint needs transformers >= 5.23 (DeepseekV4ForCausalLM)") from err
    config = DeepseekV4Config(vocab_size=vocab_size, **(TINY_CONFIG if config is None else config))
    torch.manual_seed(seed)
    model = DeepseekV4ForCausalLM(config).eval()
    _randomize(model, seed)
    tmp = folder.with_name(folder.name + ".partial")
    model.save_pretrained(tmp)
    tmp.rename(folder)
    return folder


@torch.no_grad()
def add_random_mtp_layer(folder: str | Path, seed: int = 7) -> None:
    """Write seeded random ``mtp.0.*`` weights (native names, routed experts one tensor per expert) into the
    checkpoint in ``folder``'s first shard, in place, so that MTP speculation can run on it."""
    from safetensors.torch import load_file, save_file

    from deepseek_engine.models.loader import load_model
    from deepseek_engine.speculative.mtp import DeepseekV4MTP

    folder = Path(folder)
    shard = sorted(folder.glob("*.safetensors"))[0]
    mtp = DeepseekV4MTP(load_model(folder).config)
    g = torch.Generator().manual_seed(seed)
    state = load_file(str(shard))
    for name, p in mtp.named_parameters():
        if name.endswith("norm.weight"):
            v = 1 + 0.1 * torch.randn(p.shape, generator=g)
        elif p.dim() >= 2:
            v = torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1])
        else:
            v = 0.2 * torch.randn(p.shape, generator=g)
        key = "mtp.0." + (name[len("block."):] if name.startswith("block.") else name)
        if key.endswith((".experts.w1", ".experts.w2", ".experts.w3")):
            for e in range(v.shape[0]):
                state[f"{key[:-3]}.{e}.{key[-2:]}.weight"] = v[e].contiguous()
        else:
            state[key] = v.contiguous()
    save_file(state, str(shard), metadata={"format": "pt"})
