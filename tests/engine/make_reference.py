"""Build tiny random DeepSeek V4 checkpoints and float32 reference outputs.

Run with the torch venv (needs ``transformers`` 5.23, which the tests do not):

    .venv/bin/python tests/engine/make_reference.py [fixture names]

Writes ``tests/engine/data/`` (only the named fixtures when names are given):

* ``tiny_v4/``      – a checkpoint written by ``DeepseekV4ForCausalLM.save_pretrained``
  (transformers' own tensor names and config.json).  Layers: sliding, CSA,
  HCA, CSA; MLPs: hash, hash, learned, learned; YaRN on the compress rope.
* ``tiny_v4_quant/`` – a second model (other sizes and seed, default HCA rate
  128) saved with DeepSeek's native tensor names, its linear weights in FP8
  e4m3 with 128x128 e8m0 or 32x32 float32 block scales and its routed experts
  in MXFP4.  The reference outputs come from the transformers model loaded
  with the *dequantised* weights; ``dequantized_layer0.safetensors`` records
  those weights for layer 0.
* ``tiny_v4_ties/`` – regressions found by ``sweep_reference.py``: nested YaRN
  ropes with ``truncate: false`` and a tiny lightning indexer whose scores tie
  (see ``tiny_config_ties``).  Its generations are recorded from ``generate``
  without the uncached cross-check, and its prompts' logits are not checked to
  be prefixes of each other: ``torch.topk`` may break the ties differently for
  score rows of different lengths.
* ``<name>_reference.safetensors`` – float32 prefill logits for every position
  of a few prompts (a causal model's logits for a prefix equal the leading
  rows, which the script checks) and 40-token greedy generations from
  ``generate`` (which uses the reference cache), cross-checked against greedy
  decoding by repeated full forwards.

Everything is seeded; rerunning reproduces the same files.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

DATA = Path(__file__).resolve().parent / "data"
GEN_TOKENS = 40


def tiny_config_a() -> DeepseekV4Config:
    return DeepseekV4Config(
        vocab_size=128, hidden_size=32, moe_intermediate_size=16, num_hidden_layers=4,
        num_attention_heads=4, head_dim=32, q_lora_rank=16, num_experts_per_tok=2, n_routed_experts=4,
        layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                     "compressed_sparse_attention"],
        mlp_layer_types=["hash_moe", "hash_moe", "moe", "moe"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
        o_groups=2, o_lora_rank=16, index_n_heads=16, index_head_dim=16, index_topk=8,
        partial_rotary_factor=0.25, sliding_window=128, max_position_embeddings=1024,
        rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256,
                         "beta_fast": 32, "beta_slow": 1},
        hc_sinkhorn_iters=20, bos_token_id=0, eos_token_id=1,
    )


def tiny_config_b() -> DeepseekV4Config:
    return DeepseekV4Config(
        vocab_size=256, hidden_size=64, moe_intermediate_size=32, num_hidden_layers=3,
        num_attention_heads=4, head_dim=64, q_lora_rank=32, num_experts_per_tok=2, n_routed_experts=4,
        layer_types=["heavily_compressed_attention", "compressed_sparse_attention", "sliding_attention"],
        mlp_layer_types=["hash_moe", "moe", "moe"],
        o_groups=2, o_lora_rank=32, index_n_heads=16, index_head_dim=32, index_topk=16,
        partial_rotary_factor=0.25, sliding_window=128, max_position_embeddings=4096,
        hc_sinkhorn_iters=20, bos_token_id=0, eos_token_id=1,
    )


def tiny_config_ties() -> DeepseekV4Config:
    """Regression model for two bugs found by ``sweep_reference.py``.

    * Both rope kinds are YaRN with ``truncate: false`` in the nested layout; the
      reference ignores that flag (always rounds the correction range).
    * A one-head, 8-wide lightning indexer with ``index_topk=2`` and a small sliding
      window: indexer scores often tie exactly at zero, so which entries are picked
      depends on ``torch.topk``'s tie-breaking over each sequence's own entries, also
      when several sequences of different lengths decode in one batch.
    """
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "truncate": False}
    return DeepseekV4Config(
        vocab_size=64, hidden_size=16, moe_intermediate_size=16, num_hidden_layers=3,
        num_attention_heads=2, head_dim=32, q_lora_rank=16, num_experts_per_tok=2, n_routed_experts=4,
        layer_types=["compressed_sparse_attention", "sliding_attention", "compressed_sparse_attention"],
        mlp_layer_types=["hash_moe", "moe", "moe"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        o_groups=2, o_lora_rank=8, index_n_heads=1, index_head_dim=8, index_topk=2,
        partial_rotary_factor=0.25, sliding_window=8, max_position_embeddings=16384, hc_mult=2,
        rope_parameters={"main": {**yarn, "rope_theta": 10000.0, "beta_fast": 64, "beta_slow": 2},
                         "compress": {**yarn, "rope_theta": 40000.0}},
        hc_sinkhorn_iters=20, bos_token_id=0, eos_token_id=1,
    )


@torch.no_grad()
def randomize(model: DeepseekV4ForCausalLM, seed: int) -> None:
    """Give every parameter a non-trivial random value (the default init zeroes sinks, biases, ...)."""
    g = torch.Generator().manual_seed(seed)
    cfg = model.config
    for name, p in sorted(model.named_parameters()):
        def normal(std, mean=0.0):
            return torch.randn(p.shape, generator=g) * std + mean
        if name.endswith("norm.weight"):
            p.copy_(normal(0.2, 1.0))
        elif name.endswith(("attn_hc.fn", "ffn_hc.fn", "hc_head.hc_fn")):
            p.copy_(normal(0.5 / math.sqrt(p.shape[1])))
        elif name.endswith(("attn_hc.base", "ffn_hc.base", "hc_head.hc_base")):
            p.copy_(normal(0.5))
        elif name.endswith(("attn_hc.scale", "ffn_hc.scale", "hc_head.hc_scale")):
            p.copy_(normal(0.3, 1.0))
        elif name.endswith("sinks"):
            p.copy_(normal(1.0))
        elif name.endswith("position_bias"):
            p.copy_(normal(1.0))
        elif name.endswith("embed_tokens.weight"):
            p.copy_(normal(1.0))
        elif name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj"):
            p.copy_(normal(1.0 / math.sqrt(p.shape[-1])))
        elif p.dim() == 2:
            p.copy_(normal(1.0 / math.sqrt(p.shape[1])))
        else:
            p.copy_(normal(0.1))
    for name, b in model.named_buffers():
        if name.endswith("e_score_correction_bias"):
            b.copy_(torch.randn(b.shape, generator=g) * 0.1)
        elif name.endswith("tid2eid"):
            rows = [torch.randperm(cfg.n_routed_experts, generator=g)[: cfg.num_experts_per_tok]
                    for _ in range(b.shape[0])]
            b.copy_(torch.stack(rows))


def prompts(seed: int, vocab: int, lengths: list[int]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(2, vocab, (n,), generator=g) for n in lengths]


@torch.no_grad()
def full_logits(model, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids[None], use_cache=False).logits[0].float()


@torch.no_grad()
def greedy_reference(model, prompt: torch.Tensor, strict: bool = True) -> tuple[torch.Tensor, float]:
    """Greedy tokens from ``generate`` (cached path), checked against uncached greedy decoding.

    With ``strict=False`` the two may differ (exact indexer score ties broken differently
    by ``torch.topk`` for a prefill-shaped and a decode-shaped score tensor); the cached
    path is what ``generate`` returns, so it is the one recorded.
    """
    out = model.generate(prompt[None], max_new_tokens=GEN_TOKENS, do_sample=False, min_new_tokens=GEN_TOKENS,
                         eos_token_id=None, pad_token_id=0)[0, prompt.numel():]
    seq = prompt.clone()
    margin = float("inf")
    for _ in range(GEN_TOKENS):
        last = full_logits(model, seq)[-1]
        top2 = last.topk(2).values
        margin = min(margin, float(top2[0] - top2[1]))
        seq = torch.cat([seq, last.argmax().view(1)])
    if strict:
        assert torch.equal(seq[prompt.numel():], out), "generate() disagrees with uncached greedy decoding"
    return out, margin


@torch.no_grad()
def references(model, name: str, prompt_seed: int, lengths: list[int], gen_lengths: list[int],
               strict: bool = True) -> None:
    vocab = model.config.vocab_size
    tensors: dict[str, torch.Tensor] = {}
    for i, ids in enumerate(prompts(prompt_seed, vocab, lengths)):
        logits = full_logits(model, ids)
        for cut in (1, 64, 129) if strict else ():  # prefix logits are the leading rows (unless scores tie)
            if cut < ids.numel():
                assert torch.allclose(full_logits(model, ids[:cut]), logits[:cut], atol=1e-5), "prefix mismatch"
        tensors[f"prefill_{i}.input_ids"] = ids
        tensors[f"prefill_{i}.logits"] = logits.contiguous()
    margins = []
    for i, ids in enumerate(prompts(prompt_seed + 1, vocab, gen_lengths)):
        out, margin = greedy_reference(model, ids, strict)
        margins.append(margin)
        tensors[f"generate_{i}.input_ids"] = ids
        tensors[f"generate_{i}.output_ids"] = out
    save_file(tensors, str(DATA / f"{name}_reference.safetensors"),
              metadata={"greedy_min_margins": json.dumps(margins), "gen_tokens": str(GEN_TOKENS)})
    print(f"{name}: greedy min top-2 margins {margins}")


# ----------------------------------------------------------------------------- quantisation

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def quantize_fp8(w: torch.Tensor, block: int, e8m0: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (fp8 weight, stored scale, dequantised float32 weight)."""
    out_dim, in_dim = w.shape
    so, si = -(-out_dim // block), -(-in_dim // block)
    padded = torch.zeros(so * block, si * block)
    padded[:out_dim, :in_dim] = w
    amax = padded.view(so, block, si, block).abs().amax(dim=(1, 3)).clamp(min=1e-8)
    scale = amax / 448.0
    if e8m0:
        exps = torch.ceil(torch.log2(scale)).clamp(-127, 127)
        scale = torch.pow(2.0, exps)
        stored = (exps + 127).to(torch.uint8).view(torch.float8_e8m0fnu)
    else:
        stored = scale.clone()
    full = scale.repeat_interleave(block, 0)[:out_dim].repeat_interleave(block, 1)[:, :in_dim]
    q = (w / full).to(torch.float8_e4m3fn)
    return q, stored, q.float() * full


def quantize_mxfp4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (packed int8 weight, e8m0 scales, dequantised float32 weight)."""
    out_dim, in_dim = w.shape
    groups = w.view(out_dim, in_dim // 32, 32)
    amax = groups.abs().amax(dim=-1).clamp(min=1e-8)
    exps = torch.ceil(torch.log2(amax / 6.0)).clamp(-127, 127)
    scale = torch.pow(2.0, exps)
    scaled = groups / scale[..., None]
    codes = (scaled[..., None] - E2M1[:8].view(1, 1, 1, 8) * torch.sign(scaled)[..., None]).abs().argmin(-1)
    codes = torch.where(scaled < 0, codes + 8, codes).view(out_dim, in_dim)
    deq = E2M1[codes] * scale.repeat_interleave(32, dim=1)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8).view(torch.int8)
    stored = (exps + 127).to(torch.uint8).view(torch.float8_e8m0fnu)
    return packed, stored, deq


def native_names(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers module names -> DeepSeek checkpoint names (experts unfused)."""
    rules = [
        ("model.embed_tokens.weight", "embed.weight"), ("lm_head.weight", "head.weight"),
        ("model.hc_head.hc_fn", "hc_head_fn"), ("model.hc_head.hc_base", "hc_head_base"),
        ("model.hc_head.hc_scale", "hc_head_scale"), ("model.norm.weight", "norm.weight"),
    ]
    sub = [
        (".self_attn.compressor.indexer.scorer.weights_proj.", ".attn.indexer.weights_proj."),
        (".self_attn.compressor.indexer.q_b_proj.", ".attn.indexer.wq_b."),
        (".self_attn.compressor.indexer.", ".attn.indexer.compressor."),
        (".self_attn.", ".attn."), (".mlp.shared_experts.gate_proj.", ".ffn.shared_experts.w1."),
        (".mlp.shared_experts.up_proj.", ".ffn.shared_experts.w3."),
        (".mlp.shared_experts.down_proj.", ".ffn.shared_experts.w2."), (".mlp.", ".ffn."),
        (".input_layernorm.", ".attn_norm."), (".post_attention_layernorm.", ".ffn_norm."),
        (".attn_hc.fn", ".hc_attn_fn"), (".attn_hc.base", ".hc_attn_base"), (".attn_hc.scale", ".hc_attn_scale"),
        (".ffn_hc.fn", ".hc_ffn_fn"), (".ffn_hc.base", ".hc_ffn_base"), (".ffn_hc.scale", ".hc_ffn_scale"),
        (".sinks", ".attn_sink"), (".kv_norm.", ".norm."), (".position_bias", ".ape"),
        (".q_a_proj.", ".wq_a."), (".q_b_proj.", ".wq_b."), (".kv_proj.", ".wkv."), (".gate_proj.", ".wgate."),
        (".o_a_proj.", ".wo_a."), (".o_b_proj.", ".wo_b."), (".q_a_norm.", ".q_norm."),
        (".gate.e_score_correction_bias", ".gate.bias"),
    ]
    out = {}
    for name, t in state.items():
        for a, b in rules:
            if name == a:
                name = b
        if name.startswith("model.layers."):
            name = name[len("model."):]
            for a, b in sub:
                name = name.replace(a, b)
        if name.endswith(".experts.gate_up_proj"):
            inter = t.shape[1] // 2
            for e in range(t.shape[0]):
                out[name.replace("gate_up_proj", f"{e}.w1.weight")] = t[e, :inter].clone()
                out[name.replace("gate_up_proj", f"{e}.w3.weight")] = t[e, inter:].clone()
        elif name.endswith(".experts.down_proj"):
            for e in range(t.shape[0]):
                out[name.replace("down_proj", f"{e}.w2.weight")] = t[e].clone()
        else:
            out[name] = t.detach().clone()
    return out


def build_quantized(model: DeepseekV4ForCausalLM, folder: Path,
                    layer0_file: Path | None = DATA / "tiny_v4_quant_dequantized_layer0.safetensors") -> None:
    """Save ``model`` quantised into ``folder`` and load the dequantised weights back into it.

    ``layer0_file`` (if not ``None``) records layer 0's dequantised weights.
    """
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    native = native_names(state)
    stored: dict[str, torch.Tensor] = {}
    deq: dict[str, torch.Tensor] = {}
    fp8_targets = (".attn.wq_a.weight", ".attn.wq_b.weight", ".attn.wkv.weight", ".attn.wo_a.weight",
                   ".attn.wo_b.weight", ".shared_experts.w1.weight", ".shared_experts.w2.weight",
                   ".shared_experts.w3.weight", ".attn.indexer.wq_b.weight")
    for i, (name, t) in enumerate(sorted(native.items())):
        if ".ffn.experts." in name:
            q, s, d = quantize_mxfp4(t.float())
            stored[name], stored[name[: -len(".weight")] + ".scale"] = q, s
            deq[name] = d
        elif name.endswith(fp8_targets):
            big = name.endswith((".wq_b.weight", ".wo_a.weight"))
            q, s, d = quantize_fp8(t.float(), 128 if big else 32, e8m0=big or i % 2 == 0)
            stored[name], stored[name[: -len(".weight")] + ".scale"] = q, s
            deq[name] = d
        elif name in ("embed.weight", "head.weight"):
            stored[name] = t.to(torch.bfloat16)  # exercise a bf16 tensor
            deq[name] = stored[name].float()
        else:
            stored[name] = t
            deq[name] = t
    # Load the dequantised weights back into the reference model.
    with torch.no_grad():
        for key, p in model.state_dict().items():
            if key.endswith("experts.gate_up_proj"):
                base = key[len("model."): -len("gate_up_proj")].replace(".mlp.", ".ffn.")
                w = torch.stack([torch.cat([deq[f"{base}{e}.w1.weight"], deq[f"{base}{e}.w3.weight"]])
                                 for e in range(p.shape[0])])
                p.copy_(w)
            elif key.endswith("experts.down_proj"):
                base = key[len("model."): -len("down_proj")].replace(".mlp.", ".ffn.")
                p.copy_(torch.stack([deq[f"{base}{e}.w2.weight"] for e in range(p.shape[0])]))
            else:
                (native_key,) = native_names({key: p}).keys()
                p.copy_(deq[native_key])
    folder.mkdir(parents=True)
    half = len(stored) // 2
    names = sorted(stored)
    shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    weight_map = {}
    for fname, keys in shards.items():
        save_file({k: stored[k].contiguous() for k in keys}, str(folder / fname), metadata={"format": "pt"})
        weight_map.update({k: fname for k in keys})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map},
                                                                   indent=1))
    cfg = json.loads(model.config.to_json_string())
    cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                                  "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    cfg["expert_dtype"] = "fp4"
    (folder / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True))
    if layer0_file is not None:
        layer0 = {k: v.contiguous() for k, v in deq.items() if k.startswith("layers.0.") and k in deq
                  and stored[k].dtype in (torch.float8_e4m3fn, torch.int8)}
        save_file(layer0, str(layer0_file))


def build_plain() -> None:
    torch.manual_seed(1234)
    model_a = DeepseekV4ForCausalLM(tiny_config_a()).float().eval()
    randomize(model_a, seed=1234)
    model_a.save_pretrained(DATA / "tiny_v4")
    reloaded = DeepseekV4ForCausalLM.from_pretrained(DATA / "tiny_v4").float().eval()
    probe = torch.arange(2, 60)
    assert torch.allclose(full_logits(model_a, probe), full_logits(reloaded, probe)), "save/load round trip"
    references(reloaded, "tiny_v4", prompt_seed=7, lengths=[300, 129, 1], gen_lengths=[100, 121])


def build_quant() -> None:
    torch.manual_seed(99)
    model_b = DeepseekV4ForCausalLM(tiny_config_b()).float().eval()
    randomize(model_b, seed=99)
    build_quantized(model_b, DATA / "tiny_v4_quant")
    references(model_b.eval(), "tiny_v4_quant", prompt_seed=11, lengths=[300], gen_lengths=[110])


def build_ties() -> None:
    torch.manual_seed(5)
    model = DeepseekV4ForCausalLM(tiny_config_ties()).float().eval()
    randomize(model, seed=5)
    model.save_pretrained(DATA / "tiny_v4_ties")
    references(model, "tiny_v4_ties", prompt_seed=13, lengths=[300, 150, 37, 1], gen_lengths=[1, 37, 150],
               strict=False)


BUILDERS = {"tiny_v4": build_plain, "tiny_v4_quant": build_quant, "tiny_v4_ties": build_ties}


def main(names: list[str]) -> None:
    """Rebuild the named fixtures (all of them, from an empty folder, when none are named)."""
    torch.set_num_threads(2)
    unknown = set(names) - set(BUILDERS)
    if unknown:
        raise SystemExit(f"unknown fixtures {sorted(unknown)}; choose from {sorted(BUILDERS)}")
    if not names:
        if DATA.exists():
            shutil.rmtree(DATA)
        names = list(BUILDERS)
    DATA.mkdir(parents=True, exist_ok=True)
    for name in names:
        for old in DATA.glob(f"{name}*"):
            if old.name == name or old.name.startswith(f"{name}_reference") or old.name.startswith(f"{name}_dequant"):
                shutil.rmtree(old) if old.is_dir() else old.unlink()
        BUILDERS[name]()
    total = sum(f.stat().st_size for f in DATA.rglob("*") if f.is_file())
    print(f"wrote {DATA} ({total / 1e6:.2f} MB)")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
