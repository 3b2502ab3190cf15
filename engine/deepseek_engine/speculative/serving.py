"""Speculative requests inside ``LLM``: drafters loaded on first use, requests run in lock step.

A request speculates when its ``SamplingParams.speculative`` is a ``SpeculativeConfig``
(or is ``None`` and the ``LLM`` was built with one). Its drafter comes from the
checkpoint's ``mtp.*`` tensors, loaded once per method. All speculative requests of
a ``generate`` call advance together, one speculative step each per round
(:func:`~deepseek_engine.speculative.decoding.run_lockstep`), each with private drafter
caches; DSpark (V4.1) requests keep their target caches in one shared pool and each round
verifies all of them in one batched target pass
(:func:`~deepseek_engine.speculative.decoding.verify_together`); plain requests of the
same call go through the scheduler.
"""

from __future__ import annotations

import torch

from deepseek_engine.core.constraint import SequenceConstraint
from deepseek_engine.sampling_params import SamplingParams
from deepseek_engine.speculative.config import SpeculativeConfig
from deepseek_engine.speculative.decoding import SpeculativeDecoder, SpeculativeRun, run_lockstep


class SpeculativeRequests:
    def __init__(self, target: torch.nn.Module, model_dir: str | None, default: SpeculativeConfig | None,
                 max_model_len: int, block_size: int = 16) -> None:
        self.target, self.model_dir, self.default = target, model_dir, default
        self.max_model_len, self.block_size = max_model_len, block_size
        self._drafters: dict[str, torch.nn.Module] = {}
        self._decoders: dict[str, SpeculativeDecoder] = {}
        eos = target.config.eos_token_id
        self.eos_token_ids = frozenset([eos] if isinstance(eos, int) else (eos or []))
        if default is not None:
            self._decoder(default)  # load the drafter now: a bad checkpoint fails at construction

    def config_for(self, params: SamplingParams) -> SpeculativeConfig | None:
        """The speculative setting a request runs with (``None``: plain decoding)."""
        if params.speculative is False:
            return None
        return params.speculative if params.speculative is not None else self.default

    def _decoder(self, spec: SpeculativeConfig) -> SpeculativeDecoder:
        key = repr(spec)
        if key not in self._decoders:
            if spec.method not in self._drafters:
                if self.model_dir is None:
                    raise ValueError("speculative decoding loads its drafter from a checkpoint folder; "
                                     "this LLM wraps a model in memory")
                from deepseek_engine.speculative import load_drafter

                self._drafters[spec.method] = load_drafter(self.model_dir, self.target, spec.method)
            self._decoders[key] = SpeculativeDecoder(self.target, self._drafters[spec.method], spec, self.block_size)
        return self._decoders[key]

    def run(self, requests: list[tuple[list[int], SamplingParams, SpeculativeConfig, torch.Generator,
                                       SequenceConstraint | None]]) -> list[SpeculativeRun]:
        """Generate every request to the end in lock step; return the finished runs in order (the last item of
        each request is its grammar state, ``None`` when unconstrained)."""
        decoders = [self._decoder(request[2]) for request in requests]
        caches = self._shared_caches(requests, decoders)
        steps = []
        for (prompt, params, _, generator, constraint), dec, cache in zip(requests, decoders, caches):
            steps.append((dec, dec.begin(prompt, params, generator, self.eos_token_ids, self.max_model_len, cache,
                                         constraint)))
        run_lockstep(steps)
        return [run for _, run in steps]

    def _shared_caches(self, requests, decoders: list[SpeculativeDecoder]) -> list:
        """Target caches for the requests: DSpark (V4.1) runs get block tables of one pool, so that each round
        verifies all of them in one batched pass; the others get their own (``None``)."""
        caches: list = [None] * len(requests)
        shared = [i for i, dec in enumerate(decoders) if dec.v41]
        if len(shared) < 2:
            return caches
        from deepseek_engine.models.deepseek_v4.kv_cache import SequenceCache
        from deepseek_engine.models.deepseek_v41.kv_cache import V41CachePool

        bs = self.block_size
        blocks = [-(-decoders[i].cache_tokens(requests[i][0], requests[i][1], self.max_model_len) // bs)
                  for i in shared]
        t = self.target
        pool = V41CachePool(t.config, sum(blocks), bs, t.dtype, t.device)
        first = 0
        for i, n in zip(shared, blocks):
            caches[i] = SequenceCache(pool, range(first, first + n))
            first += n
        return caches
