"""Speculative decoding: V4 multi-token prediction (``mtp.0``) and V4.1 DSpark (``mtp.0..2``).

``SpeculativeLLM(model_dir, SpeculativeConfig(method, num_speculative_tokens, adaptive))``
loads the target and its drafter from one checkpoint folder and generates
token IDs like :class:`deepseek_engine.LLM`, each result also reporting the
drafts accepted per step and the number of drafts verified per step. See
:mod:`deepseek_engine.speculative.decoding` for the loop and its guarantees.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from pathlib import Path

import torch

from deepseek_engine.sampling_params import SamplingParams
from deepseek_engine.speculative.config import SpeculativeConfig
from deepseek_engine.speculative.decoding import SpeculativeDecoder, SpeculativeResult

__all__ = ["SpeculativeConfig", "SpeculativeLLM", "SpeculativeOutput", "load_drafter"]


def _drafter_name(method: str, name: str, last: int) -> str | None:
    """Parameter name in the drafter module for a checkpoint tensor name (``None``: not the drafter's)."""
    m = re.match(r"^(?:model\.)?mtp\.(\d+)\.(.*)$", name)
    if m is None:
        return None
    stage, rest = int(m.group(1)), m.group(2)
    if method == "mtp":
        if stage != 0 or rest.startswith(("emb.", "head.")):
            return None  # embedding and head are the target's
        if rest.startswith(("enorm.", "hnorm.", "e_proj.", "h_proj.", "hc_head_", "norm.")):
            return rest
        return "block." + rest
    if rest.startswith("markov_head.embed."):
        return "markov_embed." + rest[len("markov_head.embed."):]
    if rest.startswith("markov_head.head."):
        return "markov_head." + rest[len("markov_head.head."):]
    if rest.startswith("confidence_head.proj."):
        return "confidence." + rest[len("confidence_head.proj."):]
    if rest.startswith(("main_proj.", "main_norm.", "norm.")):
        return rest
    if rest.startswith(("emb.", "head.")):
        return None
    return f"layers.{stage}.{rest}"


def load_drafter(folder: str | os.PathLike, target: torch.nn.Module, method: str) -> torch.nn.Module:
    """Build the drafter of ``target`` and fill it from the ``mtp.*`` tensors of the checkpoint ``folder``."""
    from contextlib import ExitStack

    from deepseek_engine.models import loader

    if method == "dspark":
        from deepseek_engine.speculative.dspark import DSparkDrafter

        drafter = DSparkDrafter(target.config)
    else:
        from deepseek_engine.speculative.mtp import DeepseekV4MTP

        drafter = DeepseekV4MTP(target.config)
    drafter.to(device=target.device)
    keep_fp32 = ("hc_", "attn_sink", "norm.weight", "gate.bias", "confidence.")
    params = {}
    for name, p in drafter.named_parameters():
        if p.is_floating_point() and not any(k in name for k in keep_fp32):
            p.data = p.data.to(target.dtype)
        params[name] = p.data
    filled: dict[str, int] = {}
    last = getattr(target.config, "num_nextn_predict_layers", 1) - 1
    with ExitStack() as stack:
        src = loader._Sources(loader._shard_files(Path(folder)), stack)
        hint = loader._block_hint(target.config)
        for key in src.where:
            if src.is_scale(key):
                continue
            base = key[: -len("_blocks")] if key.endswith("_blocks") else key
            name = _drafter_name(method, base, last)
            if name is None:
                continue
            tensor = src.get(key)
            scale_key = src.scale_for(key)
            if scale_key is not None:
                tensor = loader.dequantize(tensor, src.get(scale_key), hint)
            name = name.replace(".kv_norm.", ".norm.")
            stacked = re.sub(r"\.experts\.(\d+)\.(w[123])\.weight$", r".experts.\2", name)
            if stacked != name:
                e = int(re.search(r"\.experts\.(\d+)\.", name).group(1))
                if stacked not in params or e >= params[stacked].shape[0]:
                    raise ValueError(f"unexpected drafter tensor {key}")
                loader._copy(params[stacked][e], tensor, key)
                filled[stacked] = filled.get(stacked, 0) + 1
                continue
            if name not in params:
                raise ValueError(f"unexpected drafter tensor {key} (read as {name})")
            loader._copy(params[name], tensor, key)
            filled[name] = 1
    missing = [n for n, t in params.items()
               if filled.get(n, 0) < (t.shape[0] if re.search(r"\.experts\.w[123]$", n) else 1)]
    if missing:
        raise ValueError(f"checkpoint {folder} lacks {len(missing)} drafter tensors, e.g. {missing[:6]}")
    drafter.eval()
    loader.process_weights_after_loading(drafter)
    return drafter


@dataclass
class SpeculativeOutput:
    """One request's result: generated tokens plus, per step, accepted drafts and verified drafts."""

    request_id: int
    prompt_token_ids: list[int]
    token_ids: list[int]
    finish_reason: str
    accepted_per_step: list[int] = field(default_factory=list)
    verify_lengths: list[int] = field(default_factory=list)
    target_forwards: int = 0


class SpeculativeLLM:
    """Token-ID generation with speculative decoding (one request at a time)."""

    def __init__(self, model_dir: str | os.PathLike, speculative: SpeculativeConfig, dtype: torch.dtype | None = None,
                 device: str | torch.device = "cpu", block_size: int = 16, max_model_len: int = 8192) -> None:
        from deepseek_engine.models.loader import load_model

        self.model = load_model(model_dir, dtype or torch.float32, device)
        self.drafter = load_drafter(model_dir, self.model, speculative.method)
        self._init(speculative, block_size, max_model_len)

    @classmethod
    def from_models(cls, model, drafter, speculative: SpeculativeConfig, block_size: int = 16,
                    max_model_len: int = 8192) -> SpeculativeLLM:
        self = cls.__new__(cls)
        self.model, self.drafter = model, drafter
        self._init(speculative, block_size, max_model_len)
        return self

    def _init(self, speculative: SpeculativeConfig, block_size: int, max_model_len: int) -> None:
        self.speculative = speculative
        self.decoder = SpeculativeDecoder(self.model, self.drafter, speculative, block_size)
        eos = self.model.config.eos_token_id
        self.eos_token_ids = frozenset([eos] if isinstance(eos, int) else (eos or []))
        self.max_model_len = max_model_len
        self._next_id = 0
        self._seed_rng = random.Random(int.from_bytes(os.urandom(8), "little"))

    def generate(self, prompts: Seq[Seq[int]], sampling_params: SamplingParams | None = None) -> list[SpeculativeOutput]:
        params = sampling_params or SamplingParams()
        if params.constraint is not None and len(prompts) > 1:
            from deepseek_engine.core.constraint import TokenMatcher

            if isinstance(params.constraint, TokenMatcher):
                raise ValueError("a token matcher constrains one request only; give a grammar whose matcher() "
                                 "makes one per request")
        outs = []
        for prompt in prompts:
            ids = [int(t) for t in prompt]
            if not ids or any(not 0 <= t < self.model.config.vocab_size for t in ids):
                raise ValueError("prompts must be non-empty lists of in-vocabulary token IDs")
            generator = torch.Generator(device=self.model.device)
            generator.manual_seed(params.seed if params.seed is not None else self._seed_rng.getrandbits(63))
            constraint = None
            if params.constraint is not None:  # (a grammar: each prompt gets a matcher of its own)
                from deepseek_engine.core.constraint import SequenceConstraint

                ends = set(params.stop_token_ids) | (set() if params.ignore_eos else set(self.eos_token_ids))
                budget = params.max_tokens if params.max_tokens is not None else 1 << 30
                if self.max_model_len is not None:
                    budget = min(budget, self.max_model_len - len(ids))
                constraint = SequenceConstraint.create(params.constraint, self.model.config.vocab_size, ends,
                                                       max(budget, 1))
            r: SpeculativeResult = self.decoder.generate(ids, params, generator, self.eos_token_ids, self.max_model_len,
                                                         constraint)
            outs.append(SpeculativeOutput(self._next_id, ids, r.token_ids, r.finish_reason, r.accepted_per_step,
                                          r.verify_lengths, r.target_forwards))
            self._next_id += 1
        return outs
