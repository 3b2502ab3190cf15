"""Load a DeepSeek V4 checkpoint folder into :class:`DeepseekV4ForCausalLM`.

``load_model(path, dtype=torch.float32, device="cpu")`` reads ``config.json``
and every ``*.safetensors`` shard (through ``model.safetensors.index.json``
when present).  Tensors are opened with ``safe_open`` (memory-mapped) and
copied one at a time into parameters that were allocated once, so the
checkpoint never sits in RAM a second time.

Accepted tensor names:

* DeepSeek's own (``embed.weight``, ``layers.N.attn.wq_a.weight``,
  ``layers.N.ffn.experts.E.w1.weight``, ``hc_head_fn``, ``head.weight`` ...);
* what ``transformers`` ``save_pretrained`` writes for ``DeepseekV4ForCausalLM``
  (a ``model.`` prefix, partly renamed modules such as ``embed_tokens`` /
  ``hc_head.hc_fn``), and the fully renamed module names of the
  ``transformers`` implementation (``self_attn.q_a_proj``, ``mlp.experts.gate_up_proj`` ...);
* ``language_model.`` prefixes of multimodal (V4.1) layouts.  Multi-token
  prediction (``mtp.``) and vision tensors are skipped.

Quantised routed and shared experts stay packed in their stored format (``keep_packed``, below); other
quantised weights are dequantised exactly (see :mod:`deepseek_engine.models.quantization`):
a weight ``X.weight`` stored as FP8 or packed FP4 takes its scale from
``X.scale`` / ``X.weight_scale_inv`` / ``X.weight_scale``; a fused expert
tensor ``Y`` (``experts.gate_up_proj``) from ``Y_scale_inv`` / ``Y_scale``,
and grouped MXFP4 blocks ``Y_blocks`` from ``Y_scales``.  Without
``lm_head``/``head.weight``, ``tie_word_embeddings`` reuses the embedding.  Missing or
unknown tensors and shape mismatches raise ``ValueError``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn

from deepseek_engine.models import load_config, model_class
from deepseek_engine.models.deepseek_v4.config import DeepseekV4ModelConfig
from deepseek_engine.models.deepseek_v4.model import DeepseekV4ForCausalLM
from deepseek_engine.models.quantization import dequantize, is_fp8, is_packed_fp4

logger = logging.getLogger(__name__)

_PREFIXES = ("model.language_model.", "language_model.model.", "language_model.", "text_model.", "model.")
_SKIP = re.compile(r"(^|\.)(mtp|vision_tower|vision_model|visual|mm_projector|multi_modal_projector)\.|inv_freq$")
# V4.1 checkpoints declare the vision-language model even for text: its tower, aligner and image
# embeddings are left out (text-only engine), with one log line naming how many.
_VISION = re.compile(r"^(vision|aligner)\.|^image_|(^|\.)(vision_tower|vision_model|visual|mm_projector|multi_modal_projector)\.")
_SCALE_SUFFIXES = (".scale", ".weight_scale_inv", ".weight_scale", "_scale_inv", "_scale", "_scales")

# Ordered (pattern, replacement) pairs turning transformers module names into DeepSeek ones.
_RENAMES: tuple[tuple[str, str], ...] = (
    (r"^embed_tokens\.", "embed."),
    (r"^lm_head\.", "head."),
    (r"^hc_head\.hc_(fn|base|scale)$", r"hc_head_\1"),
    (r"\.self_attn\.", ".attn."),
    (r"\.mlp\.", ".ffn."),
    (r"\.input_layernorm\.", ".attn_norm."),
    (r"\.post_attention_layernorm\.", ".ffn_norm."),
    (r"\.attn_hc\.(fn|base|scale)$", r".hc_attn_\1"),
    (r"\.ffn_hc\.(fn|base|scale)$", r".hc_ffn_\1"),
    (r"\.sinks$", ".attn_sink"),
    (r"\.compressor\.indexer\.scorer\.weights_proj\.", ".indexer.weights_proj."),
    (r"\.compressor\.indexer\.q_b_proj\.", ".indexer.wq_b."),
    (r"\.compressor\.indexer\.", ".indexer.compressor."),
    (r"\.shared_experts\.gate_proj\.", ".shared_experts.w1."),
    (r"\.shared_experts\.down_proj\.", ".shared_experts.w2."),
    (r"\.shared_experts\.up_proj\.", ".shared_experts.w3."),
    (r"\.kv_norm\.", ".norm."),
    (r"\.q_a_norm\.", ".q_norm."),
    (r"\.position_bias$", ".ape"),
    (r"\.q_a_proj\.", ".wq_a."),
    (r"\.q_b_proj\.", ".wq_b."),
    (r"\.kv_proj\.", ".wkv."),
    (r"\.gate_proj\.", ".wgate."),
    (r"\.o_a_proj\.", ".wo_a."),
    (r"\.o_b_proj\.", ".wo_b."),
    (r"\.gate\.e_score_correction_bias$", ".gate.bias"),
)
_EXPERT = re.compile(r"^(layers\.\d+\.ffn\.experts)\.(\d+)\.(w[123])\.weight$")
_FUSED = re.compile(r"^(layers\.\d+\.ffn\.experts)\.(gate_up_proj|down_proj)$")


def canonical_name(name: str) -> str | None:
    """DeepSeek-style name for a stored tensor name, or ``None`` if it is not part of the text model."""
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    if _SKIP.search(name):
        return None
    for pattern, repl in _RENAMES:
        name = re.sub(pattern, repl, name)
    return name


def _shard_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        with index.open("r", encoding="utf-8") as fh:
            weight_map = json.load(fh).get("weight_map", {})
        files = sorted({folder / f for f in weight_map.values()})
    else:
        files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors files in {folder}")
    return files


def _block_hint(config: DeepseekV4ModelConfig) -> int | None:
    q = config.quantization_config or {}
    size = q.get("weight_block_size")
    return int(size[0]) if isinstance(size, (list, tuple)) and size else None


class _Sources:
    """Lazily opened shards and a name -> shard map across them."""

    def __init__(self, files: list[Path], stack: ExitStack) -> None:
        self.where: dict[str, object] = {}
        for f in files:
            handle = stack.enter_context(safe_open(str(f), framework="pt", device="cpu"))
            for key in handle.keys():
                self.where[key] = handle

    def get(self, key: str) -> torch.Tensor:
        return self.where[key].get_tensor(key)

    @staticmethod
    def _scale_candidates(key: str) -> list[str]:
        if key.endswith(".weight"):
            base = key[: -len(".weight")]
            return [base + ".scale", base + ".weight_scale_inv", base + ".weight_scale", key + ".scale"]
        if key.endswith("_blocks"):
            return [key[: -len("_blocks")] + "_scales"]
        return [key + "_scale_inv", key + "_scale", key + ".scale"]

    def scale_for(self, key: str) -> str | None:
        """Name of the scale tensor paired with a quantised weight ``key``, if any."""
        for cand in self._scale_candidates(key):
            if cand in self.where:
                return cand
        return None

    def is_scale(self, key: str) -> bool:
        """True when ``key`` is the scale of another stored tensor (consumed with it)."""
        for suffix in _SCALE_SUFFIXES:
            if key.endswith(suffix):
                owner = key[: -len(suffix)]
                for cand in (owner + ".weight", owner, owner + "_blocks"):
                    if cand in self.where and cand != key and key in self._scale_candidates(cand):
                        return True
        return False


def load_model(path: str | Path, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
               config: DeepseekV4ModelConfig | None = None, *, prepare: bool = True,
               keep_packed: bool = True) -> DeepseekV4ForCausalLM:
    """Build the model for ``path``, fill every parameter from its safetensors shards and prepare the derived
    weights (:func:`process_weights_after_loading`; ``prepare=False`` leaves that to the caller, as the serving
    wrappers do it themselves).

    ``keep_packed`` (V4 and V4.1 on the CPU): MoE layers whose routed and shared experts are stored quantised (FP8,
    MXFP4, int8, with DeepSeek's per-expert names) keep them in that format (:class:`~deepseek_engine.layers.moe.
    PackedRoutedExperts`, :class:`~deepseek_engine.layers.moe.PackedSharedExpert`; no float32 copy is ever made);
    ``False`` dequantises them into float32 parameters. Likewise the attention projections (query, KV, output),
    the compressors, the indexer and the head (:class:`_PackedLinears`): quantised ones, and in a quantised
    checkpoint the bf16 ones too, become :class:`~deepseek_engine.layers.packed_linear.PackedLinear` modules.

    A V4.1 config (:mod:`deepseek_engine.models.deepseek_v41.config`) builds
    :class:`~deepseek_engine.models.deepseek_v41.model.DeepseekV41ForCausalLM`; its engram
    layers read the token map built from the folder's ``tokenizer.json``.
    """
    from deepseek_engine.models.deepseek_v41.config import DeepseekV41ModelConfig

    folder = Path(path)
    config = config or load_config(folder)
    v41 = isinstance(config, DeepseekV41ModelConfig)
    with torch.device("meta"):
        model = model_class(config)(config)
    stack = ExitStack()
    src = _Sources(_shard_files(folder), stack)
    on_cpu = keep_packed and torch.device(device).type == "cpu"
    packed = _PackedExperts(model, src) if on_cpu else None
    linears = _PackedLinears(model, src, config) if on_cpu else None
    model.to_empty(device=device)
    keep_fp32 = re.compile(r"(hc_|attn_sink|\.ape$|norm\.weight$|gate\.bias$|gate\.bias_vl$)")
    params: dict[str, torch.Tensor] = {}
    for name, p in list(model.named_parameters()):
        if p.is_floating_point() and not keep_fp32.search(name):
            p.data = p.data.to(dtype)
        params[name] = p.data
    for name, b in model.named_buffers():
        params[name] = b
    filled: dict[str, int] = {}
    hint = _block_hint(config)

    skipped_vision = 0
    with stack:
        for key in src.where:
            if src.is_scale(key):
                continue
            if _VISION.search(key):
                skipped_vision += 1
                continue
            name = canonical_name(key[: -len("_blocks")] if key.endswith("_blocks") else key)
            if name is None:
                continue
            tensor = src.get(key)
            scale_key = src.scale_for(key)
            scale = None if scale_key is None else src.get(scale_key)
            if packed is not None and packed.take(name, tensor, scale, hint):
                continue
            if linears is not None and linears.take(name, tensor, scale, hint):
                continue
            if scale is not None:
                tensor = dequantize(tensor, scale, hint)
            elif is_fp8(tensor) or (is_packed_fp4(tensor) and not name.endswith("tid2eid")):
                raise ValueError(f"quantised tensor {key} has no sibling scale tensor")
            _assign(name, key, tensor, params, filled, config)

    if packed is not None:
        packed.finish()
    if linears is not None:
        linears.finish()
    if skipped_vision:
        logger.info("text-only engine: skipped %d vision tensors (vision tower, aligner, image embeddings) of %s",
                    skipped_vision, folder.name)
    if config.tie_word_embeddings and "head.weight" not in filled and "embed.weight" in filled:
        params["head.weight"].copy_(params["embed.weight"].to(params["head.weight"].dtype))
        filled["head.weight"] = 1
    missing = []
    for name, target in params.items():
        if name.endswith("inv_freq"):
            continue
        need = target.shape[0] if _is_stacked(name) else 1
        if filled.get(name, 0) < need:
            missing.append(name)
    if missing:
        raise ValueError(f"checkpoint {folder} lacks {len(missing)} tensors, e.g. {missing[:8]}")
    if v41 and config.engram_layer_ids:
        _install_token_map(model, folder, config)
    model.eval()
    if prepare:
        process_weights_after_loading(model)
    return model


class _PackedExperts:
    """The MoE layers whose experts stay in their stored format: chosen before the parameters are allocated (their
    float parameters are never created), filled tensor by tensor, stacked at the end."""

    _SHARED = re.compile(r"^layers\.(\d+)\.ffn\.shared_experts\.(w[123])\.weight$")

    def __init__(self, model: nn.Module, src: _Sources) -> None:
        from deepseek_engine.layers.moe import PackedRoutedExperts, PackedSharedExpert

        self.layers: dict[int, nn.Module] = {}
        self.parts: dict[tuple[int, str], dict[int, object]] = {}
        for i, layer in enumerate(getattr(model, "layers", [])):
            ffn = getattr(layer, "ffn", None)
            experts = getattr(ffn, "experts", None)
            if experts is None or not hasattr(experts, "w1"):
                continue
            first = f"layers.{i}.ffn.experts.0.w1.weight"
            if first not in src.where or src.scale_for(first) is None:
                continue  # float experts, or transformers' fused names: loaded as float32 as before
            n, inter, hidden = experts.w1.shape
            ffn.experts = PackedRoutedExperts(n, hidden, inter, experts.limit)
            shared = f"layers.{i}.ffn.shared_experts.w1.weight"
            if shared in src.where and src.scale_for(shared) is not None:
                ffn.shared_experts = PackedSharedExpert(ffn.shared_experts.limit)
            self.layers[i] = ffn

    def take(self, name: str, tensor: torch.Tensor, scale: torch.Tensor | None, hint: int | None) -> bool:
        """Pack ``name`` if it belongs to a packed layer (``True``), else leave it to the float path."""
        from deepseek_kernels.weight_only import pack

        from deepseek_engine.layers.moe import PackedSharedExpert

        m = _EXPERT.match(name)
        if m:
            i = int(m.group(1).split(".")[1])
            if i not in self.layers:
                return False
            e = int(m.group(2))
            if e >= self.layers[i].experts.n:
                raise ValueError(f"tensor {name} names expert {e} but the config has {self.layers[i].experts.n}")
            self.parts.setdefault((i, m.group(3)), {})[e] = pack(tensor, scale, hint)
            return True
        m = self._SHARED.match(name)
        if m and int(m.group(1)) in self.layers and isinstance(self.layers[int(m.group(1))].shared_experts,
                                                               PackedSharedExpert):
            setattr(self.layers[int(m.group(1))].shared_experts, m.group(2), pack(tensor, scale, hint))
            return True
        return False

    def finish(self) -> None:
        from deepseek_kernels.weight_only import stack_experts, stack_rows

        for i, ffn in self.layers.items():
            n = ffn.experts.n
            got = {w: self.parts.get((i, w), {}) for w in ("w1", "w2", "w3")}
            for w, experts in got.items():
                if len(experts) != n:
                    raise ValueError(f"checkpoint lacks {n - len(experts)} experts' {w} of layer {i}")
            w13 = stack_experts([stack_rows([got["w1"][e], got["w3"][e]]) for e in range(n)])
            ffn.experts.set_weights(w13, stack_experts([got["w2"][e] for e in range(n)]))
            shared = ffn.shared_experts
            for w in ("w1", "w2", "w3"):
                if getattr(shared, w, 0) is None:
                    raise ValueError(f"checkpoint lacks layers.{i}.ffn.shared_experts.{w}.weight")
        self.parts.clear()


class _PackedLinears:
    """The projections kept in their stored format: every ``nn.Linear`` of an attention block (query, KV, output,
    compressors, indexer) and the head whose stored weight is quantised (FP8, MXFP4, int8 with a scale) or, in a
    checkpoint with a ``quantization_config``, stored as bf16. Chosen from the tensor names before the parameters
    are allocated (their float parameters are never created), filled as the tensors come."""

    _KEEP = re.compile(r"^(layers\.\d+\.attn\..+|head)\.weight$")

    def __init__(self, model: nn.Module, src: _Sources, config) -> None:
        from deepseek_engine.layers.packed_linear import PackedGroupedOutput, PackedLinear
        from deepseek_engine.models.deepseek_v4.attention import GroupedOutputProjection

        quantised_checkpoint = bool(config.quantization_config)
        self.modules: dict[str, nn.Module] = {}
        for key in src.where:
            if src.is_scale(key):
                continue
            name = canonical_name(key)
            if name is None or not self._KEEP.match(name):
                continue
            stored = src.where[key].get_slice(key).get_dtype()
            if src.scale_for(key) is None and not (quantised_checkpoint and stored == "BF16"):
                continue
            path = name[: -len(".weight")]
            parent_path, _, attr = path.rpartition(".")
            parent = model.get_submodule(parent_path) if parent_path else model
            old = getattr(parent, attr, None)
            if not isinstance(old, nn.Linear) or old.bias is not None:
                continue
            if isinstance(old, GroupedOutputProjection):
                new = PackedGroupedOutput(old.in_features, old.out_features, old.groups)
            else:
                new = PackedLinear(old.in_features, old.out_features)
            setattr(parent, attr, new)
            self.modules[name] = new

    def take(self, name: str, tensor: torch.Tensor, scale: torch.Tensor | None, hint: int | None) -> bool:
        """Pack ``name`` if it is one of the kept projections (``True``), else leave it to the float path."""
        from deepseek_kernels.weight_only import pack

        module = self.modules.get(name)
        if module is None:
            return False
        if module.packed is not None:
            raise ValueError(f"tensor {name} is stored twice")
        module.set_weight(pack(tensor, scale, hint))
        return True

    def finish(self) -> None:
        missing = [name for name, m in self.modules.items() if m.packed is None]
        if missing:
            raise ValueError(f"checkpoint lacks {missing[:8]}")


def process_weights_after_loading(model: nn.Module) -> None:
    """The one step after loading (vLLM's ``process_weights_after_loading``): every submodule of ``model`` that
    derives tensors from its weights (stacked, transposed, blocked copies, plans) builds them now, from the weights
    as they are. Nothing checks the weights afterwards: after changing weights (in place or by new objects, or
    moving the model), run it again (``LLM.reload_weights`` does, with the serving plans)."""
    for module in model.modules():
        prepare = getattr(module, "process_weights_after_loading", None)
        if prepare is not None and module is not model:
            prepare()


def copy_weights(model: nn.Module, weights: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]) -> None:
    """Copy ``weights`` (parameter or buffer name -> tensor, the names of ``model.state_dict()``) into ``model``
    in place. Every name and shape is checked before anything is copied."""
    targets = dict(model.named_parameters())
    targets.update(model.named_buffers())
    items = list(weights.items() if isinstance(weights, Mapping) else weights)
    for name, tensor in items:
        if name not in targets:
            raise ValueError(f"unknown weight {name!r}")
        if tuple(targets[name].shape) != tuple(tensor.shape):
            raise ValueError(f"weight {name} has shape {tuple(tensor.shape)}, model expects {tuple(targets[name].shape)}")
    with torch.no_grad():
        for name, tensor in items:
            targets[name].copy_(tensor.to(targets[name].dtype))


def _install_token_map(model, folder: Path, config) -> None:
    """Engram layers hash tokenizer-normalised ids: build the map from the checkpoint's tokenizer."""
    from deepseek_engine.models.deepseek_v41.engram import load_token_map, tokenizer_json_in

    tokenizer = tokenizer_json_in(folder)
    if tokenizer is None:
        raise ValueError(f"checkpoint {folder} has engram layers but no tokenizer.json to build their token map from")
    model.set_token_map(load_token_map(tokenizer, config.vocab_size, config.engram_compressed_vocab_size))


def _is_stacked(name: str) -> bool:
    return bool(re.search(r"\.experts\.w[123]$", name))


def _copy(target: torch.Tensor, tensor: torch.Tensor, key: str) -> None:
    if tuple(target.shape) != tuple(tensor.shape):
        raise ValueError(f"tensor {key} has shape {tuple(tensor.shape)}, model expects {tuple(target.shape)}")
    target.copy_(tensor.to(target.dtype))


def _assign(name: str, key: str, tensor: torch.Tensor, params: dict, filled: dict, config) -> None:
    m = _EXPERT.match(name)
    if m:
        stacked = f"{m.group(1)}.{m.group(3)}"
        if stacked not in params:
            raise ValueError(f"unexpected tensor {key}")
        e = int(m.group(2))
        if e >= params[stacked].shape[0]:
            raise ValueError(f"tensor {key} names expert {e} but the config has {params[stacked].shape[0]}")
        _copy(params[stacked][e], tensor, key)
        filled[stacked] = filled.get(stacked, 0) + 1
        return
    m = _FUSED.match(name)
    if m:
        base = m.group(1)
        if m.group(2) == "gate_up_proj":
            inter = tensor.shape[1] // 2
            _copy(params[f"{base}.w1"], tensor[:, :inter], key)
            _copy(params[f"{base}.w3"], tensor[:, inter:], key)
            for w in ("w1", "w3"):
                filled[f"{base}.{w}"] = params[f"{base}.{w}"].shape[0]
        else:
            _copy(params[f"{base}.w2"], tensor, key)
            filled[f"{base}.w2"] = params[f"{base}.w2"].shape[0]
        return
    if name not in params:
        raise ValueError(f"unexpected tensor {key} (read as {name})")
    _copy(params[name], tensor, key)
    filled[name] = 1
