"""A random DeepSeek V4 checkpoint of about 1 GB in the weight formats real checkpoints use (needs ``transformers``
for the parameter list, and for :func:`load_transformers`).

``ensure_bandwidth_checkpoint(folder, fmt)`` writes, once, a seeded random model whose decode is bound by memory
bandwidth: hidden 1024, 16 layers (sliding, CSA and HCA attention), 64 routed experts of intermediate size 512,
top-6, a 16384-token vocabulary. Tensors carry DeepSeek's own names (``layers.N.ffn.experts.E.w1.weight`` ...)
and are stored as real V4 checkpoints store them:

``fmt="v4"`` (default)
    routed experts MXFP4 (e2m1 pairs, low nibble first, one e8m0 scale per 32 inputs); attention and shared-expert
    projections FP8 e4m3 with one e8m0 scale per 128 x 128 block; embedding, head, router, compressors and the
    indexer's weight projection bfloat16; norms, hyper-connections, sinks and biases float32.
``fmt="int8"``
    the same, but experts, attention and shared-expert projections int8 weight-only with one float32 scale per
    output row (``scale`` of shape ``[out, 1]``).

Values are drawn directly in the stored format (codes and scales), scaled so that each product has roughly unit
variance per output: the checkpoint needs no float32 copy of itself to be written. The same seed gives the same
bytes. ``load_transformers(folder)`` builds ``transformers``' ``DeepseekV4ForCausalLM`` from the folder with every
weight dequantised exactly (the oracle the benchmark compares with).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

BANDWIDTH_CONFIG = dict(
    hidden_size=1024, moe_intermediate_size=512, num_hidden_layers=16, num_attention_heads=8, head_dim=128,
    q_lora_rank=512, num_experts_per_tok=6, n_routed_experts=64,
    layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                 "compressed_sparse_attention"] * 4,
    mlp_layer_types=["hash_moe"] * 2 + ["moe"] * 14,
    compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
    o_groups=4, o_lora_rank=256, index_n_heads=8, index_head_dim=64, index_topk=16,
    partial_rotary_factor=0.5, sliding_window=128, max_position_embeddings=4096,
    hc_sinkhorn_iters=20, bos_token_id=0, eos_token_id=1,
)
BANDWIDTH_VOCAB = 16384
FORMATS = ("v4", "int8")

#: DeepSeek names (suffixes) of the projections stored in FP8 (``v4``) or int8 (``int8``).
_LINEAR = (".attn.wq_a.weight", ".attn.wq_b.weight", ".attn.wkv.weight", ".attn.wo_a.weight", ".attn.wo_b.weight",
           ".attn.indexer.wq_b.weight", ".shared_experts.w1.weight", ".shared_experts.w2.weight",
           ".shared_experts.w3.weight")
_E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def _native_shapes(config) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """DeepSeek tensor name -> (shape, dtype) of every stored tensor of ``config`` (experts one by one)."""
    from transformers import DeepseekV4ForCausalLM

    from deepseek_engine.models.loader import canonical_name

    with torch.device("meta"):
        model = DeepseekV4ForCausalLM(config)
    out: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
    for key, t in model.state_dict().items():
        name = canonical_name(key)
        if name is None:
            continue
        if name.endswith(".experts.gate_up_proj"):
            e, two_i, h = t.shape
            for j in range(e):
                for w in ("w1", "w3"):
                    out[name.replace("gate_up_proj", f"{j}.{w}.weight")] = ((two_i // 2, h), torch.float32)
        elif name.endswith(".experts.down_proj"):
            e, h, i = t.shape
            for j in range(e):
                out[name.replace("down_proj", f"{j}.w2.weight")] = ((h, i), torch.float32)
        else:
            out[name] = (tuple(t.shape), t.dtype)
    return out


def _mxfp4(shape, g: torch.Generator) -> dict[str, torch.Tensor]:
    out_dim, in_dim = shape
    codes = torch.randint(0, 256, (out_dim, in_dim // 2), generator=g, dtype=torch.int32).to(torch.uint8)
    # e2m1 codes drawn uniformly have a mean square of about 8.4; the group exponent spreads +-1 around the
    # value that gives unit variance per output
    base = round(-math.log2(math.sqrt(8.4 * in_dim)))
    exps = base + torch.randint(-1, 2, (out_dim, in_dim // 32), generator=g)
    return {"weight": codes.view(torch.int8), "scale": (exps + 127).to(torch.uint8).view(torch.float8_e8m0fnu)}


def _fp8(shape, g: torch.Generator) -> dict[str, torch.Tensor]:
    out_dim, in_dim = shape
    q = torch.randn(shape, generator=g).mul_(64.0).clamp_(-448, 448).to(torch.float8_e4m3fn)
    base = round(-math.log2(64.0 * math.sqrt(in_dim)))
    exps = base + torch.randint(-1, 2, (-(-out_dim // 128), -(-in_dim // 128)), generator=g)
    return {"weight": q, "scale": (exps + 127).to(torch.uint8).view(torch.float8_e8m0fnu)}


def _int8(shape, g: torch.Generator) -> dict[str, torch.Tensor]:
    out_dim, in_dim = shape
    q = torch.randint(-127, 128, shape, generator=g, dtype=torch.int32).to(torch.int8)
    scale = (1.0 + 0.25 * torch.rand(out_dim, 1, generator=g)) / (73.0 * math.sqrt(in_dim))
    return {"weight": q, "scale": scale}


def _plain(name: str, shape, dtype: torch.dtype, g: torch.Generator, experts: int, top_k: int) -> torch.Tensor:
    if name.endswith("tid2eid"):
        return torch.rand(shape[0], experts, generator=g).argsort(dim=1)[:, :top_k].to(dtype)
    if name.endswith("norm.weight"):
        return 1.0 + 0.1 * torch.randn(shape, generator=g)
    if name == "embed.weight":
        return torch.randn(shape, generator=g).to(torch.bfloat16)
    if len(shape) >= 2:
        t = torch.randn(shape, generator=g) / math.sqrt(shape[-1])
        return t if name.startswith("hc_") or ".hc_" in name else t.to(torch.bfloat16)
    return 0.2 * torch.randn(shape, generator=g)


def ensure_bandwidth_checkpoint(folder: str | Path, fmt: str = "v4", seed: int = 0, num_layers: int | None = None,
                                ) -> Path:
    """Create the checkpoint in ``folder`` unless it is already there; return the folder. ``num_layers`` keeps the
    first layers only (smaller copies for checks)."""
    from safetensors.torch import save_file
    from transformers import DeepseekV4Config

    if fmt not in FORMATS:
        raise ValueError(f"unknown weight format {fmt!r}; expected one of {FORMATS}")
    folder = Path(folder)
    if (folder / "config.json").is_file() and (folder / "model.safetensors.index.json").is_file():
        return folder
    raw = dict(BANDWIDTH_CONFIG)
    if num_layers is not None:
        raw.update(num_hidden_layers=num_layers, layer_types=raw["layer_types"][:num_layers],
                   mlp_layer_types=raw["mlp_layer_types"][:num_layers])
    config = DeepseekV4Config(vocab_size=BANDWIDTH_VOCAB, **raw)
    shapes = _native_shapes(config)
    g = torch.Generator().manual_seed(seed)
    quantize_linear = _fp8 if fmt == "v4" else _int8
    quantize_expert = _mxfp4 if fmt == "v4" else _int8
    tmp = folder.with_name(folder.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    shards: dict[str, list[str]] = {}
    for name in sorted(shapes):
        shard = name.split(".")[1] if name.startswith("layers.") else "top"
        shards.setdefault(shard, []).append(name)
    weight_map: dict[str, str] = {}
    for shard, names in shards.items():
        stored: dict[str, torch.Tensor] = {}
        for name in names:
            shape, dtype = shapes[name]
            if ".ffn.experts." in name or name.endswith(_LINEAR):
                parts = (quantize_expert if ".ffn.experts." in name else quantize_linear)(shape, g)
                base = name[: -len(".weight")]
                stored[name], stored[base + ".scale"] = parts["weight"], parts["scale"]
            else:
                stored[name] = _plain(name, shape, dtype, g, config.n_routed_experts, config.num_experts_per_tok)
        fname = f"model-{shard}.safetensors"
        save_file({k: v.contiguous() for k, v in stored.items()}, str(tmp / fname), metadata={"format": "pt"})
        weight_map.update({k: fname for k in stored})
    (tmp / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    cfg = json.loads(config.to_json_string())
    if fmt == "v4":
        cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                                      "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
        cfg["expert_dtype"] = "fp4"
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True))
    tmp.rename(folder)
    return folder


@torch.no_grad()
def load_transformers(folder: str | Path, dtype: torch.dtype = torch.float32):
    """``transformers``' ``DeepseekV4ForCausalLM`` with the folder's weights, every one dequantised exactly
    (:mod:`deepseek_engine.models.quantization`) and cast to ``dtype``."""
    from safetensors import safe_open
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

    from deepseek_engine.models.loader import canonical_name
    from deepseek_engine.models.quantization import dequantize

    folder = Path(folder)
    raw = json.loads((folder / "config.json").read_text())
    raw.pop("quantization_config", None)
    config = DeepseekV4Config.from_dict(raw)
    with torch.device("meta"):
        model = DeepseekV4ForCausalLM(config)
    model.to_empty(device="cpu")
    model.to(dtype)  # floating tensors only: tid2eid stays int64
    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    handles = {f: safe_open(str(folder / f), framework="pt") for f in set(index.values())}

    def get(name: str) -> torch.Tensor:
        t = handles[index[name]].get_tensor(name)
        scale = name[: -len(".weight")] + ".scale"
        if name.endswith(".weight") and scale in index:
            return dequantize(t, handles[index[scale]].get_tensor(scale), 128)
        return t

    for key, p in model.state_dict().items():
        name = canonical_name(key)
        if name is None:
            continue
        if name.endswith(".experts.gate_up_proj"):
            base = name[: -len("gate_up_proj")]
            for e in range(p.shape[0]):
                inter = p.shape[1] // 2
                p[e, :inter].copy_(get(f"{base}{e}.w1.weight"))
                p[e, inter:].copy_(get(f"{base}{e}.w3.weight"))
        elif name.endswith(".experts.down_proj"):
            base = name[: -len("down_proj")]
            for e in range(p.shape[0]):
                p[e].copy_(get(f"{base}{e}.w2.weight"))
        elif name in index:
            p.copy_(get(name))
    # the rotary modules' inverse frequencies are not stored: built anew on the CPU (to_empty left them unset)
    for module in model.modules():
        if type(module).__name__ == "DeepseekV4RotaryEmbedding":
            fresh = type(module)(config)
            for name, buf in fresh.named_buffers(recurse=False):
                setattr(module, name, buf)
    return model.eval()
