"""Record DeepSeek V4.1 component fixtures from vLLM 0.33's own functions (CPU only).

Run in a side virtual environment that has ``vllm==0.33.0`` (and its torch,
triton, transformers), from the repository root:

    <side-venv>/bin/python tests/engine/record_v41_components.py

Every case feeds seeded inputs to a vLLM function and writes inputs and
outputs to ``tests/engine/data/v41_components/<case>.safetensors`` (scalars in
``cases.json``); ``tests/engine/test_v41_components.py`` runs the engine's
functions on the same inputs. What each case calls in vLLM:

* ``mhc_pre_delayed`` / ``mhc_post``: ``model_executor.kernels.mhc.torch``
  (``mhc_pre_delayed_torch``, ``mhc_post_torch``: plain PyTorch references);
* ``compressor_r1`` / ``compressor_r2``: the Triton kernel behind
  ``fused_save_compress_norm`` (run by Triton's CPU interpreter; the ratio-2
  case is two chunks, the second starting with the token that closes the
  group left open in the ring by the first), then ``rope_quant_insert`` into a
  plain bf16 cache (rotation at the group's first position, with the
  ``cos_sin_cache`` of vLLM's own V4 YaRN rope);
* ``index_keys``: the Triton kernel behind ``indexer_k_norm_rope_store`` (FP8
  cache; the test compares FP8 codes);
* ``index_logits``: ``fp8_mqa_logits_torch`` (its PyTorch reference) fed bf16
  values with unit scales;
* ``candidates``: the Triton kernels behind ``select_candidate_blocks`` and
  ``apply_candidate_mask`` (their wrappers assert a CUDA tensor, so the
  kernels are launched here with the same arguments);
* ``engram_layout``: ``EngramLayout`` primes/offsets and
  ``compute_hash_multipliers``;
* ``engram_hash``: the Triton kernel behind ``NgramHashState.forward``
  (lookback ids given, no slot cache: the V2 runner's path), a chunk that
  starts mid-sequence with image tokens in it and in its lookback;
* ``engram_gate``: the Triton kernel ``_fused_engram_post_wkv_kernel``;
* ``token_map_tiny`` / ``token_map_real``: ``build_compressed_token_map`` over
  the tiny checkpoint's tokenizer and the real DeepSeek tokenizer
  (``DEEPSEEK_TOKENIZER_JSON``);
* ``moe_bias_vl``: ``fused_topk_bias`` routing with ``bias_vl`` for image-sentinel ids
  (its PyTorch branch, softmax scores: vLLM's other branches are compiled ops);
* ``rope_yarn``: ``DeepseekV4ScalingRotaryEmbedding.forward_native`` of the
  compress rope (ratio 1 and 2 layers) and of the plain sliding-window rope.
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
# An empty device list keeps vLLM's Triton detection on without a GPU driver (its
# "distributed environment" allowance); the interpreter then runs kernels on CPU tensors.
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent / "data" / "v41_components"
CASES: dict[str, dict] = {}


def save(name: str, tensors: dict[str, torch.Tensor], **scalars) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(OUT / f"{name}.safetensors"))
    CASES[name] = scalars
    print("recorded", name, {k: tuple(v.shape) for k, v in tensors.items()})


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def record_mhc() -> None:
    from vllm.model_executor.kernels.mhc.torch import mhc_post_torch, mhc_pre_delayed_torch

    g = gen(1)
    t, hc, d = 5, 4, 64
    residual = torch.randn(t, hc, d, generator=g).to(torch.bfloat16)
    fn = torch.randn((2 + hc) * hc, hc * d, generator=g) / 16
    scale = 1 + 0.1 * torch.randn(3, generator=g)
    base = 0.2 * torch.randn((2 + hc) * hc, generator=g)
    pre_mix = torch.rand(t, hc, generator=g) + 0.5
    out = {}
    for tag, pm in (("first", None), ("delayed", pre_mix)):
        post, comb, layer_input, pre = mhc_pre_delayed_torch(residual, fn, scale, base, 1e-6, 1e-6, 1e-6, 2.0, 20,
                                                             pre_mix=pm)
        out.update({f"{tag}.post": post, f"{tag}.comb": comb, f"{tag}.layer_input": layer_input, f"{tag}.pre": pre})
    block = torch.randn(t, d, generator=g).to(torch.bfloat16)
    merged = mhc_post_torch(block, residual, out["delayed.post"], out["delayed.comb"])
    save("mhc", {"residual": residual, "fn": fn, "scale": scale, "base": base, "pre_mix": pre_mix, "block": block,
                 "merged": merged, **out}, eps=1e-6, iters=20)


def _rope(ratio: int, max_pos: int = 4096):
    from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config
    from vllm.models.deepseek_v41.common.rope import build_deepseek_v4_rope

    cfg = types.SimpleNamespace(
        rope_parameters={"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 256,
                         "beta_fast": 32, "beta_slow": 1},
        rope_theta=10000.0, compress_rope_theta=160000.0)
    with set_current_vllm_config(VllmConfig(device_config=DeviceConfig(device="cpu"))):
        return build_deepseek_v4_rope(cfg, head_dim=512, rope_head_dim=64, max_position_embeddings=max_pos,
                                      compress_ratio=ratio)


def record_rope() -> None:
    g = gen(2)
    positions = torch.tensor([0, 1, 5, 63, 255, 256, 1000, 4095])
    q = torch.randn(positions.numel(), 2, 512, generator=g)
    tensors = {"positions": positions, "q": q}
    for tag, ratio in (("main", 0), ("compress", 1)):
        rope = _rope(ratio)
        rq, _ = rope.forward_native(positions, q.clone(), None)
        tensors[f"{tag}.out"] = rq
    save("rope_yarn", tensors, rope_theta=10000.0, compress_rope_theta=160000.0, factor=16.0, original=256,
         beta_fast=32, beta_slow=1, max_position_embeddings=4096)


def _run_compressor(ratio: int, chunks: list[int], seed: int) -> dict[str, torch.Tensor]:
    import vllm.models.deepseek_v41.common.ops.fused_compress_quant_cache as fc

    fc._JOIN_ROW_PTRS = False  # the interpreter cannot join pointer tiles
    g = gen(seed)
    total = sum(chunks)
    kv_score = torch.randn(total, 512 * ratio, generator=g)
    norm_w = (1 + 0.1 * torch.randn(512, generator=g)).to(torch.bfloat16)
    cap = 8
    state = torch.zeros(2, cap, 1024) if ratio == 2 else None
    rope = _rope(ratio)
    cache = torch.zeros(4, 16, 512, dtype=torch.bfloat16)
    latents = torch.zeros(total, 512, dtype=torch.bfloat16)
    start = 0
    for n in chunks:
        pos = torch.arange(start, start + n)
        rows = kv_score[start:start + n].contiguous()
        lat = torch.zeros(n, 512, dtype=torch.bfloat16)
        if ratio == 2:
            slots = 1 * cap + pos % cap  # request 0 owns ring block 1
            qsl = torch.tensor([0, n], dtype=torch.int32)
            req = torch.zeros(n, dtype=torch.int32)
            fc.fused_save_compress_norm(rows, pos, state, slots, qsl, req, norm_w, 1e-6, 2, lat)
        else:
            fc.fused_save_compress_norm(rows, pos, None, pos.clone(), None, None, norm_w, 1e-6, 1, lat)
        fc.rope_quant_insert(lat, pos, rope.cos_sin_cache, cache, pos.clone(), ratio)
        latents[start:start + n] = lat
        start += n
    closing = torch.tensor([p for p in range(total) if (p + 1) % ratio == 0])
    return {"kv_score": kv_score, "norm_weight": norm_w, "closing": closing, "latents": latents[closing],
            "entries": cache.view(-1, 512)[closing], "chunks": torch.tensor(chunks)}


def record_compressor() -> None:
    save("compressor_r1", _run_compressor(1, [3, 4], 3), ratio=1, eps=1e-6)
    save("compressor_r2", _run_compressor(2, [5, 5, 2], 4), ratio=2, eps=1e-6)


def record_index_keys() -> None:
    from vllm.models.deepseek_v41.common.ops.indexer_k_store import indexer_k_norm_rope_store

    g = gen(5)
    n = 6
    positions = torch.tensor([1, 3, 5, 7, 9, 11])
    k_pre = torch.randn(n, 128, generator=g).to(torch.bfloat16)
    w = (1 + 0.1 * torch.randn(128, generator=g)).to(torch.bfloat16)
    rope = _rope(2)
    cache = torch.zeros(1, 16, 132, dtype=torch.uint8)
    indexer_k_norm_rope_store(k_pre, positions, rope.cos_sin_cache, w, 1e-6, cache, torch.arange(n), 2, False)
    values = cache[0].reshape(-1)[: 16 * 128].view(16, 128)[:n].clone()  # a block: 16 rows of values, then scales
    scales = cache[0].reshape(-1)[16 * 128:].view(torch.float32)[:n].clone()
    save("index_keys", {"k_pre": k_pre, "k_norm_weight": w, "positions": positions, "fp8_codes": values,
                        "scales": scales}, ratio=2, eps=1e-6)


def record_index_logits() -> None:
    from vllm.v1.attention.ops.rocm_aiter_mla_sparse import fp8_mqa_logits_torch

    g = gen(6)
    m, h, d, n = 5, 4, 128, 9
    q = torch.randn(m, h, d, generator=g).to(torch.bfloat16)
    k = torch.randn(n, d, generator=g).to(torch.bfloat16)
    raw_w = torch.randn(m, h, generator=g)
    weights = raw_w * d**-0.5 * h**-0.5
    ends = torch.tensor([1, 3, 4, 8, 9], dtype=torch.int32)
    logits = fp8_mqa_logits_torch(q, (k, torch.ones(n, 1)), weights, torch.zeros(m, dtype=torch.int32), ends)
    save("index_logits", {"q": q, "k": k, "weights_proj_out": raw_w, "ends": ends, "logits": logits})


def record_candidates() -> None:
    from vllm.model_executor.kernels.attention.dsa import candidate_blocks as cb

    g = gen(7)
    rows, width, bs, k = 6, 23, 4, 3
    logits = torch.randn(rows, width, generator=g)
    ends = torch.tensor([1, 5, 9, 16, 21, 23], dtype=torch.int32)
    cols = torch.arange(width)
    logits = logits.masked_fill(cols[None] >= ends[:, None], float("-inf"))
    nblocks = -(-width // bs)
    scores = torch.empty(rows, nblocks)
    valid = torch.empty(rows, dtype=torch.int32)
    cb._block_scores_kernel[(rows, 32)](logits, None, ends, scores, valid, *logits.stride(), 0, ends.stride(0),
                                        scores.stride(0), width, nblocks, bs, False, 1, TILE=128, FULL_WIDTH=True)
    top = scores.topk(min(k, nblocks), dim=-1)
    out = torch.full((rows, k), -7, dtype=torch.int32)
    cb._store_candidates_kernel[(rows, 1)](top.values.contiguous(), top.indices.contiguous(), out, *out.stride(),
                                           top.values.shape[1], k, 256)
    other = torch.randn(rows, width, generator=g).masked_fill(cols[None] >= ends[:, None], float("-inf"))
    masked = other.clone()
    flags = torch.empty((rows, nblocks + 1), dtype=torch.uint8)
    cb._candidate_flags_kernel[(rows,)](out, None, flags, *out.stride(), 0, width, nblocks, bs, k, False, 1)
    cb._mask_candidates_kernel[(rows, 1)](masked, None, ends, flags, *masked.stride(), 0, ends.stride(0), width,
                                          nblocks, bs, False, 1, 1024)
    save("candidates", {"logits": logits, "ends": ends, "candidates": out, "other": other, "masked": masked},
         block_size=bs, topk_blocks=k)


def _layout_config():
    return types.SimpleNamespace(engram_layer_ids=[2, 4], engram_num_embeddings=[1200, 1200],
                                 engram_max_ngram_size=4, engram_n_heads=2, engram_head_dim=32,
                                 engram_compressed_vocab_size=700, engram_pad_token_id=2, engram_vocab_size=150)


def record_engram_layout() -> None:
    from vllm.models.deepseek_v41.common.engram import EngramLayout, compute_hash_multipliers

    cfg = _layout_config()
    layout = EngramLayout(cfg)
    mult = compute_hash_multipliers(layout.layer_ids, layout.max_ngram_size, cfg.engram_compressed_vocab_size)
    flagship = compute_hash_multipliers((1, 14), 4, 129280)
    save("engram_layout", {"primes": torch.tensor(layout.primes).reshape(len(cfg.engram_layer_ids), -1),
                           "offsets": layout.offsets, "multipliers": mult, "multipliers_1_14": flagship},
         **{k: v for k, v in vars(cfg).items()})


def record_engram_hash() -> None:
    import numpy as np
    from torch import nn
    from vllm.models.deepseek_v41.common.engram import (
        EngramLayout,
        NgramHashState,
        compute_hash_multipliers,
    )

    cfg = _layout_config()
    layout = EngramLayout(cfg)
    g = gen(8)
    token_map = torch.randint(0, cfg.engram_compressed_vocab_size, (1024,), generator=g, dtype=torch.int32)
    state = NgramHashState.__new__(NgramHashState)
    nn.Module.__init__(state)
    state.layout, state.use_slot_cache, state._cache, state.block_size = layout, False, None, 32
    state.lookback_depth = layout.max_ngram_size - 1
    state.pad_id = int(token_map[cfg.engram_pad_token_id])
    state.token_map = token_map
    state.primes = torch.tensor(layout.primes)
    state.offsets = layout.offsets
    state.multipliers = compute_hash_multipliers(layout.layer_ids, layout.max_ngram_size,
                                                 cfg.engram_compressed_vocab_size)
    # Two requests: one starting at position 0, one continuing at position 6 with three lookback ids.
    ids = torch.randint(3, 1024, (13,), generator=g)
    ids[3] = 1000  # stands for an image token (dead) in request 0
    positions = torch.cat([torch.arange(0, 7), torch.arange(6, 12)])
    qsl = torch.tensor([0, 7, 13], dtype=torch.int32)
    dead = torch.zeros(13, dtype=torch.bool)
    dead[3] = True
    lookback = torch.tensor([[-1, -1, -1], [int(ids[0]), 77, 1000]])  # col 0 = token just before the chunk
    lookback_dead = torch.tensor([[False] * 3, [False, False, True]])
    out = state(ids, positions, qsl, dead, lookback, lookback_dead, None, None)
    save("engram_hash", {"token_map": token_map, "input_ids": ids, "positions": positions, "query_start_loc": qsl,
                         "dead": dead, "lookback": lookback, "lookback_dead": lookback_dead, "hashes": out},
         pad_id=state.pad_id)
    del np


def record_engram_gate() -> None:
    import triton
    from vllm.models.deepseek_v41.common.engram import _fused_engram_post_wkv_kernel

    g = gen(9)
    t, hc, d = 5, 4, 64
    hidden = torch.randn(t, hc, d, generator=g).to(torch.bfloat16)
    kv = torch.randn(t, (hc + 1) * d, generator=g).to(torch.bfloat16)
    q_w = (1 + 0.3 * torch.randn(hc, d, generator=g)).to(torch.bfloat16)
    k_w = (1 + 0.3 * torch.randn(hc, d, generator=g)).to(torch.bfloat16)
    keep = torch.tensor([True, True, False, True, True])
    out = torch.empty_like(hidden)
    _fused_engram_post_wkv_kernel[(t * hc,)](
        hidden, kv, q_w, k_w, keep, out, t, *hidden.stride(), *kv.stride(), *q_w.stride(), *k_w.stride(),
        keep.stride(0), *out.stride(), 1e-6, 1e-6, DIM=d, HC_MULT=hc, BLOCK_SIZE=triton.next_power_of_2(d),
        HAS_MASK=True)
    save("engram_gate", {"hidden": hidden, "kv": kv, "q_weight": q_w, "k_weight": k_w, "keep": keep, "out": out},
         eps=1e-6)


def record_token_maps() -> None:
    from transformers import PreTrainedTokenizerFast
    from vllm.models.deepseek_v41.common.engram import build_compressed_token_map

    sys.path.insert(0, str(ROOT / "engine"))
    from deepseek_engine.testing.tiny_checkpoint_v41 import tiny_tokenizer_json

    tiny = OUT / "tiny_tokenizer.json"
    tiny.write_text(tiny_tokenizer_json(1024), encoding="utf-8")
    lookup, size = build_compressed_token_map(PreTrainedTokenizerFast(tokenizer_file=str(tiny)))
    save("token_map_tiny", {"map": torch.tensor(lookup, dtype=torch.int32)}, size=size)
    real = os.environ.get("DEEPSEEK_TOKENIZER_JSON")
    if real:
        lookup, size = build_compressed_token_map(PreTrainedTokenizerFast(tokenizer_file=real))
        save("token_map_real", {"map": torch.tensor(lookup, dtype=torch.int32)}, size=size, vocab=len(lookup))


def record_moe_bias_vl() -> None:
    import vllm.model_executor.layers.fused_moe.router.fused_topk_bias_router as router

    # The CUDA/C++ routing ops are not on a CPU build; the ROCm-enabled branch ends in vLLM's
    # PyTorch routing (softmax scores), which applies bias_vl the same way.
    router.rocm_aiter_ops.is_fused_moe_enabled = lambda: True
    g = gen(10)
    t, e, k = 7, 16, 4
    logits = torch.randn(t, e, generator=g)
    bias = 0.1 * torch.randn(e, generator=g)
    bias_vl = torch.randn(e, generator=g)
    ids = torch.tensor([5, 129264, 129266, 129268, 129269, 129263, 7])
    weights, experts = router.fused_topk_bias(torch.zeros(t, 8), logits, "softmax", bias, k, True, input_tokens=ids,
                                              routed_scaling_factor=1.5, bias_vl=bias_vl, image_sentinel_lo=129264)
    save("moe_bias_vl", {"logits": logits, "bias": bias, "bias_vl": bias_vl, "input_ids": ids, "weights": weights,
                         "experts": experts.long()}, top_k=k, scale=1.5)


RECORDERS = [record_mhc, record_rope, record_compressor, record_index_keys, record_index_logits, record_candidates,
             record_engram_layout, record_engram_hash, record_engram_gate, record_token_maps, record_moe_bias_vl]

if __name__ == "__main__":
    wanted = set(sys.argv[1:])
    old = json.loads((OUT / "cases.json").read_text()) if (OUT / "cases.json").is_file() else {}
    for fn in RECORDERS:
        if not wanted or fn.__name__ in wanted:
            fn()
    (OUT / "cases.json").write_text(json.dumps({**old, **CASES}, indent=1, sort_keys=True), encoding="utf-8")
