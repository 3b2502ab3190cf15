"""Checkpoint loading: tensor name layouts, exact dequantisation, config layouts."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import torch
from deepseek_engine.layers.moe import PackedRoutedExperts, PackedSharedExpert
from deepseek_engine.layers.packed_linear import PackedLinear
from deepseek_engine.models import load_config
from deepseek_engine.models.deepseek_v4.config import DeepseekV4ModelConfig
from deepseek_engine.models.loader import canonical_name, load_model
from deepseek_engine.models.quantization import decode_scale, dequantize_fp8, dequantize_mxfp4
from deepseek_kernels.weight_only import dequantize_packed
from model_fixtures import DATA, PLAIN, QUANT, model, reference
from safetensors import safe_open
from safetensors.torch import load_file, save_file


def params_by_native_name(m) -> dict[str, torch.Tensor]:
    """Model parameters keyed by DeepSeek checkpoint names (experts unstacked; experts and projections kept packed
    dequantised by the kernels' reference, ``dequantize_packed``)."""
    out = {}
    for name, module in m.named_modules():
        if isinstance(module, PackedLinear):
            out[f"{name}.weight"] = dequantize_packed(*module.packed.args())
    for i, layer in enumerate(m.layers):
        experts, shared = layer.ffn.experts, layer.ffn.shared_experts
        if isinstance(experts, PackedRoutedExperts):
            for e in range(experts.n):
                w13 = dequantize_packed(experts.w13.weight[e], experts.w13.scale[e], *experts.w13.args()[2:])
                w2 = dequantize_packed(experts.w2.weight[e], experts.w2.scale[e], *experts.w2.args()[2:])
                base = f"layers.{i}.ffn.experts.{e}"
                out[f"{base}.w1.weight"], out[f"{base}.w3.weight"] = w13[: experts.inter], w13[experts.inter:]
                out[f"{base}.w2.weight"] = w2
        if isinstance(shared, PackedSharedExpert):
            for w in ("w1", "w2", "w3"):
                out[f"layers.{i}.ffn.shared_experts.{w}.weight"] = dequantize_packed(*getattr(shared, w).args())
    for name, p in list(m.named_parameters()) + list(m.named_buffers()):
        hit = re.match(r"(layers\.\d+\.ffn\.experts)\.(w[123])$", name)
        if hit:
            for e in range(p.shape[0]):
                out[f"{hit.group(1)}.{e}.{hit.group(2)}.weight"] = p[e]
        else:
            out[name] = p
    return out


def test_quantized_checkpoint_loads_to_dequantized_weights():
    want = load_file(str(DATA / "tiny_v4_quant_dequantized_layer0.safetensors"))
    assert any(".experts." in k for k in want) and any(".attn.wq_b." in k for k in want)
    for m in (model(QUANT), load_model(QUANT, keep_packed=False)):  # kept packed, and dequantised at load
        got = params_by_native_name(m)
        for name, value in want.items():
            assert torch.equal(got[name].float(), value), f"{name} differs from its dequantised reference"


def test_quantized_checkpoint_really_is_quantized():
    kinds = set()
    for f in QUANT.glob("*.safetensors"):
        with safe_open(str(f), "pt") as fh:
            for k in fh.keys():
                kinds.add(str(fh.get_slice(k).get_dtype()))
    assert {"F8_E4M3", "F8_E8M0", "I8", "BF16", "F32"} <= kinds


def test_mxfp4_nibble_order_and_scale():
    # byte 0x21: low nibble 1 (0.5) comes first, high nibble 2 (1.0) second; 0xF8: -0.0 then -6.0.
    packed = torch.tensor([[0x21, 0xF8] + [0] * 14], dtype=torch.uint8)
    scale = torch.tensor([[128]], dtype=torch.uint8)  # 2 ** 1
    values = dequantize_mxfp4(packed, scale)
    assert values.shape == (1, 32)
    assert values[0, :4].tolist() == [1.0, 2.0, -0.0, -12.0]
    assert torch.equal(values[0, 4:], torch.zeros(28))


@pytest.mark.parametrize("block", [32, 128])
def test_fp8_block_scales(block):
    g = torch.Generator().manual_seed(block)
    w = (torch.randn(160, 70, generator=g) * 4).to(torch.float8_e4m3fn)
    grid = (-(-160 // block), -(-70 // block))
    exps = torch.randint(120, 135, grid, generator=g).to(torch.uint8)
    got = dequantize_fp8(w, exps.view(torch.float8_e8m0fnu))
    for i in range(160):
        for j in (0, 33, 69):
            expect = float(w[i, j].float()) * 2.0 ** (int(exps[i // block, j // block]) - 127)
            assert float(got[i, j]) == expect
    fp32_scale = decode_scale(exps)
    torch.testing.assert_close(dequantize_fp8(w, fp32_scale), got, rtol=0, atol=0)


def test_scale_without_matching_grid_is_an_error():
    w = torch.zeros(64, 64).to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="scale grid"):
        dequantize_fp8(w, torch.ones(3, 5))


def _fully_renamed(native: str) -> str:
    """DeepSeek name -> the module names of transformers' DeepseekV4 implementation."""
    rules = [
        (r"^embed\.", "model.embed_tokens."), (r"^head\.", "lm_head."), (r"^norm\.", "model.norm."),
        (r"^hc_head_(fn|base|scale)$", r"model.hc_head.hc_\1"), (r"^layers\.", "model.layers."),
        (r"\.attn\.indexer\.weights_proj\.", ".self_attn.compressor.indexer.scorer.weights_proj."),
        (r"\.attn\.indexer\.wq_b\.", ".self_attn.compressor.indexer.q_b_proj."),
        (r"\.attn\.indexer\.compressor\.", ".self_attn.compressor.indexer."),
        (r"\.attn\.", ".self_attn."), (r"\.ffn\.shared_experts\.w1\.", ".mlp.shared_experts.gate_proj."),
        (r"\.ffn\.shared_experts\.w2\.", ".mlp.shared_experts.down_proj."),
        (r"\.ffn\.shared_experts\.w3\.", ".mlp.shared_experts.up_proj."), (r"\.ffn\.", ".mlp."),
        (r"\.attn_norm\.", ".input_layernorm."), (r"\.ffn_norm\.", ".post_attention_layernorm."),
        (r"\.hc_attn_(fn|base|scale)$", r".attn_hc.\1"), (r"\.hc_ffn_(fn|base|scale)$", r".ffn_hc.\1"),
        (r"\.attn_sink$", ".sinks"), (r"\.ape$", ".position_bias"), (r"\.wq_a\.", ".q_a_proj."),
        (r"\.wq_b\.", ".q_b_proj."), (r"\.wkv\.", ".kv_proj."), (r"\.wgate\.", ".gate_proj."),
        (r"\.wo_a\.", ".o_a_proj."), (r"\.wo_b\.", ".o_b_proj."), (r"\.q_norm\.", ".q_a_norm."),
        (r"(self_attn|compressor|indexer)\.norm\.", r"\1.kv_norm."), (r"\.gate\.bias$", ".gate.e_score_correction_bias"),
    ]
    for pattern, repl in rules:
        native = re.sub(pattern, repl, native)
    return native


def test_fully_renamed_transformers_layout_with_fused_experts(tmp_path):
    stored = load_file(str(PLAIN / "model.safetensors"))
    native = {canonical_name(k): v for k, v in stored.items()}
    assert all(n is not None for n in native)
    renamed, experts = {}, {}
    for name, t in native.items():
        hit = re.match(r"layers\.(\d+)\.ffn\.experts\.(\d+)\.(w[123])\.weight$", name)
        if hit:
            experts.setdefault(int(hit.group(1)), {})[(int(hit.group(2)), hit.group(3))] = t
        else:
            renamed[_fully_renamed(name)] = t
    for layer, parts in experts.items():
        n = 1 + max(e for e, _ in parts)
        renamed[f"model.layers.{layer}.mlp.experts.gate_up_proj"] = torch.stack(
            [torch.cat([parts[(e, "w1")], parts[(e, "w3")]]) for e in range(n)])
        renamed[f"model.layers.{layer}.mlp.experts.down_proj"] = torch.stack([parts[(e, "w2")] for e in range(n)])
    assert "model.layers.1.self_attn.compressor.indexer.scorer.weights_proj.weight" in renamed
    save_file(renamed, str(tmp_path / "model.safetensors"))
    shutil.copy(PLAIN / "config.json", tmp_path / "config.json")
    ids = reference("tiny_v4")["prefill_1.input_ids"]
    torch.testing.assert_close(load_model(tmp_path).forward_full(ids), model(PLAIN).forward_full(ids),
                               atol=0, rtol=0)


def test_deepseek_v41_nested_config_loads(tmp_path):
    flat = json.loads((PLAIN / "config.json").read_text())
    nested = {"model_type": "deepseek_v41", "architectures": ["DeepseekV41ForConditionalGeneration"],
              "text_config": {**flat, "model_type": "deepseek_v41_text"},
              "vision_config": {"hidden_size": 8}}
    (tmp_path / "config.json").write_text(json.dumps(nested))
    stored = load_file(str(PLAIN / "model.safetensors"))
    prefixed = {("model.language_model." + k[len("model."):] if k.startswith("model.") else
                 "language_model." + k): v for k, v in stored.items()}
    prefixed["model.vision_tower.patch_embed.weight"] = torch.zeros(2, 2)
    save_file(prefixed, str(tmp_path / "model.safetensors"))
    cfg = load_config(tmp_path)
    assert cfg.model_copy(update={"model_type": "deepseek_v4"}) == load_config(PLAIN)
    ids = reference("tiny_v4")["prefill_1.input_ids"]
    torch.testing.assert_close(load_model(tmp_path).forward_full(ids), reference("tiny_v4")["prefill_1.logits"],
                               atol=1e-4, rtol=0)


def test_legacy_flat_config_keys_match_new_layout():
    new = json.loads((PLAIN / "config.json").read_text())
    legacy = {k: v for k, v in new.items()
              if k not in ("layer_types", "mlp_layer_types", "compress_rates", "rope_parameters",
                           "partial_rotary_factor")}
    legacy.update({"compress_ratios": [0, 4, 16, 4, 4], "compress_rate_hca": 16, "num_hash_layers": 2,
                   "qk_rope_head_dim": 8, "rope_scaling": {k: v for k, v in new["rope_parameters"]["compress"].items()
                                                           if k not in ("rope_theta", "partial_rotary_factor",
                                                                        "attention_factor")}})
    assert DeepseekV4ModelConfig.from_dict(legacy) == load_config(PLAIN)


def test_short_argument_names_are_understood():
    cfg = DeepseekV4ModelConfig.from_dict({"dim": 64, "n_layers": 2, "n_heads": 2, "head_dim": 32,
                                           "rope_head_dim": 8, "index_head_dim": 16, "o_groups": 2,
                                           "compress_ratios": [0, 128]})
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.qk_rope_head_dim) == (64, 2, 8)
    assert cfg.layer_types == ["sliding_attention", "heavily_compressed_attention"]


def test_bad_configs_give_clear_errors(tmp_path):
    base = json.loads((PLAIN / "config.json").read_text())
    with pytest.raises(ValueError, match="layer_types"):
        DeepseekV4ModelConfig.from_dict({**base, "layer_types": ["sliding_attention"] * 3})
    with pytest.raises(ValueError, match="unknown attention layer types"):
        DeepseekV4ModelConfig.from_dict({**base, "layer_types": ["full_attention"] * 4})
    with pytest.raises(FileNotFoundError):
        load_config(tmp_path)


def test_missing_and_misshapen_tensors_are_reported(tmp_path):
    stored = load_file(str(PLAIN / "model.safetensors"))
    shutil.copy(PLAIN / "config.json", tmp_path / "config.json")
    partial = {k: v for k, v in stored.items() if "hc_head" not in k}
    save_file(partial, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="lacks"):
        load_model(tmp_path)
    stored["lm_head.weight"] = torch.zeros(3, 3)
    save_file(stored, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="shape"):
        load_model(tmp_path)


def test_bfloat16_model_is_usable():
    m = load_model(PLAIN, dtype=torch.bfloat16)
    assert m.layers[0].attn.wq_a.weight.dtype == torch.bfloat16
    ref = reference("tiny_v4")
    ids = ref["prefill_0.input_ids"][:200]
    got = m.forward_full(ids)
    want = ref["prefill_0.logits"][:200]
    assert torch.isfinite(got).all()
    agree = (got.argmax(-1) == want.argmax(-1)).float().mean()
    assert agree > 0.8, f"bf16 argmax agrees on only {float(agree):.2f} of positions"
    assert float((got - want).abs().mean()) < 0.1


def test_fused_mxfp4_blocks_and_scale_inv_names(tmp_path):
    """Experts fused as ``gate_up_proj_blocks``/``_scales`` and FP8 scales named ``weight_scale_inv``."""
    stored = {}
    for f in QUANT.glob("*.safetensors"):
        stored.update(load_file(str(f)))
    out, experts = {}, {}
    for name, t in stored.items():
        hit = re.match(r"layers\.(\d+)\.ffn\.experts\.(\d+)\.(w[123])\.(weight|scale)$", name)
        if hit:
            experts.setdefault(int(hit.group(1)), {})[(int(hit.group(2)), hit.group(3), hit.group(4))] = t
        elif name.endswith(".scale") and name[: -len(".scale")] + ".weight" in stored:
            out[name[: -len(".scale")] + ".weight_scale_inv"] = t
        else:
            out[name] = t
    for layer, parts in experts.items():
        n = 1 + max(e for e, _, _ in parts)

        def blocks(e, w):
            packed = parts[(e, w, "weight")]
            return packed.view(torch.uint8).reshape(packed.shape[0], -1, 16)

        base = f"layers.{layer}.ffn.experts"
        out[f"{base}.gate_up_proj_blocks"] = torch.stack([torch.cat([blocks(e, "w1"), blocks(e, "w3")])
                                                          for e in range(n)])
        out[f"{base}.gate_up_proj_scales"] = torch.stack(
            [torch.cat([parts[(e, "w1", "scale")], parts[(e, "w3", "scale")]]).view(torch.uint8) for e in range(n)])
        out[f"{base}.down_proj_blocks"] = torch.stack([blocks(e, "w2") for e in range(n)])
        out[f"{base}.down_proj_scales"] = torch.stack([parts[(e, "w2", "scale")].view(torch.uint8) for e in range(n)])
    save_file(out, str(tmp_path / "model.safetensors"))
    shutil.copy(QUANT / "config.json", tmp_path / "config.json")
    ids = reference("tiny_v4_quant")["prefill_0.input_ids"][:150]
    # both read the experts as dequantised float32 (fused names are not kept packed): the same bits
    torch.testing.assert_close(load_model(tmp_path, keep_packed=False).forward_full(ids),
                               load_model(QUANT, keep_packed=False).forward_full(ids), atol=0, rtol=0)


def test_tied_embeddings_reuse_the_embedding(tmp_path):
    stored = load_file(str(PLAIN / "model.safetensors"))
    stored.pop("head.weight", None)
    stored.pop("lm_head.weight", None)
    save_file(stored, str(tmp_path / "model.safetensors"))
    cfg = json.loads((PLAIN / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "tie_word_embeddings": True}))
    m = load_model(tmp_path)
    assert torch.equal(m.head.weight, m.embed.weight)


def test_fp8_per_tensor_and_per_row_scales():
    w = torch.tensor([[1.0, -2.0], [0.5, 4.0]]).to(torch.float8_e4m3fn)
    assert dequantize_fp8(w, torch.tensor(0.25)).tolist() == [[0.25, -0.5], [0.125, 1.0]]
    assert dequantize_fp8(w, torch.tensor([2.0, 3.0])).tolist() == [[2.0, -4.0], [1.5, 12.0]]
