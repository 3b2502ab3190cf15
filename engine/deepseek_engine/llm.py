"""Offline engine API: token-ID prompts in, token IDs (and log probabilities) out.

This module knows nothing of protocols or the codec: request bodies are served by
``protocol_api.ProtocolEngine`` (and the batch CLI), which import ``LLM``, never the reverse.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Sequence as Seq
from dataclasses import dataclass
from typing import Any

import torch

from deepseek_engine.core.block_manager import BlockManager
from deepseek_engine.core.constraint import SequenceConstraint, TokenMatcher
from deepseek_engine.core.model_runner import ModelRunner
from deepseek_engine.core.scheduler import Scheduler
from deepseek_engine.core.sequence import Sequence, TokenLogprob
from deepseek_engine.sampling_params import SamplingParams


@dataclass
class RequestOutput:
    """The result of one request.

    ``request_id`` is the ID ``add_request`` returned (the caller's own, when it gave one).
    ``token_ids`` are the generated tokens; when generation ended on EOS or a stop
    token (``finish_reason == "stop"``) that token is the last one and is also in
    ``stop_token_id`` (``None`` when an ``on_token`` callback ended the request).
    ``finish_reason == "length"`` means ``max_tokens`` or the context length was
    reached; ``"abort"`` that ``abort_request`` ended it. ``num_cached_tokens`` is how
    many prompt tokens came from the prefix cache.
    """

    request_id: int | str
    prompt_token_ids: list[int]
    token_ids: list[int]
    finish_reason: str
    stop_token_id: int | None
    num_cached_tokens: int
    logprobs: list[TokenLogprob] | None
    # With speculative decoding (``LLM(..., speculative=SpeculativeConfig(...))``): drafts accepted
    # in each step and drafts verified in each step.
    spec_accepted_per_step: list[int] | None = None
    spec_verify_lengths: list[int] | None = None
    # Tokens recomputed to rebuild sliding-window KV after prefix-cache hits (V4.1 bounded replay).
    num_replayed_tokens: int = 0

    @property
    def spec_acceptance_rate(self) -> float | None:
        """Accepted drafts over verified drafts of a speculative request (``None``: not speculative)."""
        if self.spec_verify_lengths is None:
            return None
        return sum(self.spec_accepted_per_step) / max(1, sum(self.spec_verify_lengths))


def _resolve_dtype(dtype: torch.dtype | str | None) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    names = {"float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
             "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16, "half": torch.float16}
    try:
        return names[str(dtype).lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(names)}") from None


class LLM:
    """A paged, continuously batched generation engine around one causal LM.

    ``LLM(model_dir, dtype=...)`` loads a checkpoint directory; ``LLM.from_model``
    wraps a model object already in memory together with a function that creates
    its paged cache storage (``make_kv(num_blocks, block_size)``).
    """

    def __init__(self, model_dir: str | os.PathLike, dtype: torch.dtype | str | None = None, *,
                 device: str | torch.device = "cpu", speculative: Any = None, swa_replay: str | None = "exact",
                 **engine_args: Any) -> None:
        """``speculative``: a ``deepseek_engine.speculative.SpeculativeConfig``, the speculative setting of
        requests whose ``SamplingParams.speculative`` is ``None`` (a request may also choose its own, or
        ``False``). The drafter comes from the checkpoint's ``mtp.*`` tensors; speculative requests report
        accepted drafts and verify lengths per step (``deepseek_engine.speculative.serving``).

        ``swa_replay`` (V4.1): ``"exact"`` keeps sliding-window KV out of the shared cache blocks and
        rebuilds it after a prefix-cache hit by replaying ``num_layers * (window - 1)`` tokens (equal to
        a full forward); ``"window"`` replays only ``window`` tokens (vLLM's bounded replay, not exact);
        ``None`` keeps window KV in the blocks. See ``models/deepseek_v41/serving.py``."""
        from deepseek_engine import models

        device = torch.device(device)
        model, make_kv, info = models.load(os.fspath(model_dir), _resolve_dtype(dtype), device, swa_replay)
        self._init(model, make_kv, info, device=device, **engine_args)
        self.model_dir = os.fspath(model_dir)
        self._default_speculative = speculative
        if speculative is not None:
            self._speculation()  # load the drafter now: a checkpoint without one fails here

    @classmethod
    def from_model(cls, model: torch.nn.Module, make_kv: Callable[[int, int], Any] | None = None, *,
                   device: str | torch.device = "cpu", vocab_size: int | None = None,
                   eos_token_id: int | list[int] | None = None, max_model_len: int | None = None,
                   swa_replay: str | None = "exact", **engine_args: Any) -> LLM:
        """Wrap a model already in memory.

        Without ``make_kv`` the model must be a ``DeepseekV4ForCausalLM`` and everything
        else is read from its config (explicit arguments win). Any other model follows
        the contract of ``model_runner`` and needs ``make_kv(num_blocks, block_size)``,
        ``vocab_size``, ``eos_token_id`` and ``max_model_len``.
        """
        if make_kv is None:
            from deepseek_engine import models

            model, make_kv, info = models.wrap(model, swa_replay)
        else:
            info = {}
        given = {"vocab_size": vocab_size, "eos_token_id": eos_token_id, "max_model_len": max_model_len}
        info.update({k: v for k, v in given.items() if v is not None or k not in info})
        if info["vocab_size"] is None or info["max_model_len"] is None:
            raise ValueError("vocab_size and max_model_len are required with a custom make_kv")
        self = cls.__new__(cls)
        self._init(model, make_kv, info, device=torch.device(device), **engine_args)
        return self

    def _init(self, model: torch.nn.Module, make_kv: Callable[[int, int], Any], info: dict, *,
              device: torch.device, max_model_len: int | None = None, block_size: int = 16,
              num_kv_blocks: int | None = None, max_num_seqs: int = 32, max_num_batched_tokens: int = 2048,
              enable_prefix_caching: bool = True, num_threads: int | None = None) -> None:
        """Engine settings: ``num_threads`` (torch intra-op threads; default: the thread count already set, at
        most one per physical core, :func:`~deepseek_engine.core.threads.intra_op_threads`),
        ``max_model_len`` (context length, default from the model),
        ``block_size`` (tokens per cache block), ``num_kv_blocks`` (cache size),
        ``max_num_seqs`` (sequences per step), ``max_num_batched_tokens`` (token budget
        per step; longer prompts are prefilled in chunks) and ``enable_prefix_caching``
        (share full cache blocks between requests with the same prefix)."""
        from deepseek_engine.core.threads import intra_op_threads

        torch.set_num_threads(intra_op_threads(num_threads))
        max_model_len = max_model_len or info["max_model_len"]
        vocab_size, eos_token_id = info["vocab_size"], info["eos_token_id"]
        blocks_per_seq = -(-max_model_len // block_size)
        if num_kv_blocks is None:
            # Room for max_num_seqs sequences of up to 1024 tokens, and one of max_model_len.
            num_kv_blocks = max(blocks_per_seq, max_num_seqs * min(blocks_per_seq, -(-1024 // block_size)))
        if num_kv_blocks < blocks_per_seq:
            raise ValueError(
                f"{num_kv_blocks} cache blocks of {block_size} tokens cannot hold one sequence of "
                f"max_model_len={max_model_len} tokens"
            )
        self.model = model.eval()
        self.device = device
        self.vocab_size = vocab_size
        self.max_model_len = max_model_len
        self.block_manager = BlockManager(num_kv_blocks, block_size, enable_prefix_caching)
        self.scheduler = Scheduler(self.block_manager, max_num_seqs=max_num_seqs,
                                   max_num_batched_tokens=max_num_batched_tokens,
                                   max_model_len=max_model_len, eos_token_id=eos_token_id)
        self.runner = ModelRunner(self.model, make_kv(num_kv_blocks, block_size), block_size, device)
        self.model_dir: str | None = None
        self._default_speculative = None
        self._spec_requests = None
        self._next_id = 0
        self._requests: dict[int | str, Sequence] = {}  # unfinished requests by request ID
        self._seed_rng = random.Random(int.from_bytes(os.urandom(8), "little"))

    def reload_weights(self, weights: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]] | None = None,
                       ) -> None:
        """Tell the engine that the model's weights changed; with ``weights`` (names of the model's
        ``state_dict``, e.g. ``llm.model.model.state_dict()``'s keys), copy them in first.

        The derived tensors (stacked and blocked copies, per-layer plans, the greedy head) are built once after
        loading and never checked on the step path, so a change made to the weights directly (in place, by new
        parameter objects, or by moving the model) is seen only after this call. It also drops the prefix cache
        (its blocks hold KV computed with the old weights). Only between requests: it raises while requests are
        unfinished."""
        if self.has_unfinished_requests():
            raise RuntimeError("reload_weights needs every request finished (their caches hold the old weights' KV)")
        if weights is not None:
            from deepseek_engine.models.loader import copy_weights

            copy_weights(getattr(self.model, "model", self.model), weights)
        prepare = getattr(self.model, "process_weights_after_loading", None)
        if prepare is not None:
            prepare()
        self.block_manager.reset_prefix_cache()

    # -- request-level API ---------------------------------------------------------------------
    def check_prompt(self, prompt: Seq[int], generating: bool = True) -> list[int]:
        """Validate token IDs; a prompt to generate from must leave room for one more token."""
        ids = [int(t) for t in prompt]
        if not ids:
            raise ValueError("prompt must hold at least one token")
        bad = [t for t in ids if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(f"token IDs out of range [0, {self.vocab_size}): {bad[:5]}")
        if len(ids) >= self.max_model_len + (0 if generating else 1):
            raise ValueError(
                f"{len(ids)} tokens leave no room within the context length of {self.max_model_len} tokens"
                if generating else f"{len(ids)} tokens exceed the context length of {self.max_model_len}"
            )
        return ids

    def add_request(self, prompt: Seq[int], params: SamplingParams | None = None,
                    on_token: Callable[[Sequence], bool] | None = None,
                    request_id: str | None = None) -> int | str:
        """Queue one token-ID prompt; return its request ID.

        ``request_id`` names the request (a server passes its own request ID), a string
        that is not the ID of an unfinished request; without one the engine numbers
        requests (ints, so they never collide with a caller's names).
        ``on_token(seq)`` runs after each generated token other than EOS or a stop
        token; returning ``True`` ends the request (``finish_reason`` "stop").
        """
        params = params or SamplingParams()
        ids = self.check_prompt(prompt)
        if params.speculative not in (None, False):
            raise ValueError("speculative requests run through generate(), not add_request()")
        if request_id is not None and not isinstance(request_id, str):
            raise TypeError(f"request_id must be a string, got {type(request_id).__name__}")
        if request_id is not None and request_id in self._requests:
            raise ValueError(f"request ID {request_id!r} is already in use by an unfinished request")
        self._check_matchers([params], busy=True)
        seq = Sequence(self._next_id, ids, params, self._generator(params), request_id)
        seq.on_token = on_token
        seq.constraint = self._constraint(params, len(ids))
        self._next_id += 1
        self._requests[seq.request_id] = seq
        self.scheduler.add(seq)
        return seq.request_id

    def abort_request(self, request_id: int | str) -> RequestOutput | None:
        """End an unfinished request now: it leaves the scheduler and its cache blocks are freed
        (``finish_reason`` "abort", with the tokens generated so far). ``None`` when no unfinished
        request has this ID (it finished already, say). Call it between steps, like ``add_request``."""
        seq = self._requests.pop(request_id, None)
        if seq is None:
            return None
        self.scheduler.abort(seq)
        return self._output(seq)

    def _generator(self, params: SamplingParams) -> torch.Generator:
        seed = params.seed if params.seed is not None else self._seed_rng.getrandbits(63)
        generator = torch.Generator(device=self.device)
        generator.manual_seed(seed)
        return generator

    def _constraint(self, params: SamplingParams, prompt_len: int) -> SequenceConstraint | None:
        """A new sequence's grammar state (``None``: unconstrained); the tokens that end it are EOS (unless
        ``ignore_eos``) and the request's stop tokens; its output budget is ``max_tokens`` or what the context
        leaves after the prompt, whichever is less."""
        if params.constraint is None:
            return None
        ends = set(params.stop_token_ids)
        if not params.ignore_eos:
            ends |= self.scheduler.eos_token_ids
        budget = self.scheduler.max_model_len - prompt_len
        if params.max_tokens is not None:
            budget = min(budget, params.max_tokens)
        return SequenceConstraint.create(params.constraint, self.vocab_size, ends, max(budget, 1))

    def _check_matchers(self, params_list: Seq[SamplingParams], busy: bool = False) -> None:
        """A ``TokenMatcher`` given as a constraint serves one sequence: refuse one given twice (or, with
        ``busy``, one an unfinished request already uses); a grammar (``matcher()``) serves any number."""
        if all(p.constraint is None or not isinstance(p.constraint, TokenMatcher) for p in params_list):
            return
        seen: set[int] = set()
        if busy:
            seen = {id(s.constraint.matcher) for s in self._requests.values() if s.constraint is not None}
        for params in params_list:
            c = params.constraint
            if c is None or not isinstance(c, TokenMatcher):
                continue
            if id(c) in seen:
                raise ValueError("a token matcher constrains one request only; give each request its own, or a "
                                 "grammar whose matcher() makes one per request")
            seen.add(id(c))

    def _speculation(self):
        if self._spec_requests is None:
            from deepseek_engine.speculative.serving import SpeculativeRequests

            self._spec_requests = SpeculativeRequests(self.model.model, self.model_dir, self._default_speculative,
                                                      self.max_model_len)
        return self._spec_requests

    def _speculative_config(self, params: SamplingParams):
        if params.speculative is None and self._default_speculative is None or params.speculative is False:
            return None
        return self._speculation().config_for(params)

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished()

    def step(self) -> list[RequestOutput]:
        """Run one scheduled model step; return the requests that finished in it."""
        batch = self.scheduler.schedule()
        sampled = self.runner.step(batch)
        finished = self.scheduler.postprocess(batch, sampled)
        for seq in finished:
            del self._requests[seq.request_id]
        return [self._output(s) for s in finished]

    @staticmethod
    def _output(seq: Sequence) -> RequestOutput:
        return RequestOutput(
            request_id=seq.request_id,
            prompt_token_ids=seq.token_ids[: seq.num_prompt_tokens],
            token_ids=seq.output_token_ids,
            finish_reason=seq.finish_reason or "length",
            stop_token_id=seq.stop_token_id,
            num_cached_tokens=seq.num_cached_tokens or 0,
            logprobs=seq.logprobs if seq.params.logprobs is not None else None,
            num_replayed_tokens=seq.model_state.get("replayed_tokens", 0),
        )

    def generate(self, prompts: Seq[Seq[int]], sampling_params: SamplingParams | Seq[SamplingParams] | None = None,
                 use_tqdm: bool = False) -> list[RequestOutput]:
        """Generate for every prompt; outputs come back in prompt order.

        ``sampling_params`` is one ``SamplingParams`` for all prompts or one per prompt.
        Every prompt is validated before any work starts. Speculative requests (see
        ``__init__``) run in lock step after the plain ones; ``add_request``/``step``
        serve plain decoding only.
        """
        if sampling_params is None or isinstance(sampling_params, SamplingParams):
            params_list = [sampling_params or SamplingParams()] * len(prompts)
        else:
            params_list = list(sampling_params)
            if len(params_list) != len(prompts):
                raise ValueError(f"{len(prompts)} prompts but {len(params_list)} sampling parameters")
        for p in prompts:
            self.check_prompt(p)
        # (one SamplingParams for every prompt: a bare matcher in it would be shared, which is refused)
        self._check_matchers(params_list, busy=True)
        specs = [self._speculative_config(sp) for sp in params_list]
        ids = [None if spec is not None else self.add_request(p, sp)
               for p, sp, spec in zip(prompts, params_list, specs)]
        results: dict[int | str, RequestOutput] = {}
        bar = None
        if use_tqdm:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(ids), desc="generate", unit="req")
        while self.has_unfinished_requests():
            for out in self.step():
                results[out.request_id] = out
                if bar is not None:
                    bar.update(1)
        spec_rows = [i for i, spec in enumerate(specs) if spec is not None]
        if spec_rows:
            checked = {i: self.check_prompt(prompts[i]) for i in spec_rows}
            runs = self._speculation().run([(checked[i], params_list[i], specs[i], self._generator(params_list[i]),
                                             self._constraint(params_list[i], len(checked[i])))
                                            for i in spec_rows])
            for i, run in zip(spec_rows, runs):
                ids[i] = self._next_id
                results[self._next_id] = self._speculative_output(self._next_id, run)
                self._next_id += 1
                if bar is not None:
                    bar.update(1)
        if bar is not None:
            bar.close()
        return [results[i] for i in ids]

    @staticmethod
    def _speculative_output(request_id: int, run) -> RequestOutput:
        out = run.outcome()
        stop = out.token_ids[-1] if out.finish_reason == "stop" and out.token_ids else None
        return RequestOutput(request_id, list(run.prompt), out.token_ids, out.finish_reason, stop, 0, None,
                             out.accepted_per_step, out.verify_lengths)

    def forward_logits(self, token_ids: Seq[int]) -> torch.Tensor:
        """Logits ``[len(token_ids), vocab]`` of one sequence, each row predicting the next token."""
        if self.scheduler.has_unfinished():
            raise RuntimeError("forward_logits needs an idle engine")
        ids = self.check_prompt(token_ids, generating=False)
        seq = Sequence(-1, ids, SamplingParams(), torch.Generator(device=self.device))
        if self.block_manager.allocate(seq, use_prefix_cache=False) is None:
            raise RuntimeError("not enough cache blocks for this sequence")
        try:
            logits = self.runner.forward([seq], [len(ids)], all_logits=True)
        finally:
            self.block_manager.deallocate(seq)
        return logits.float()
