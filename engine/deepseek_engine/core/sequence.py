"""The serving state of one request: its tokens, progress and paged-cache blocks."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import torch

from deepseek_engine.core.constraint import SequenceConstraint
from deepseek_engine.sampling_params import SamplingParams


class SequenceStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass
class TokenLogprob:
    """Log probability of a generated token and its most likely alternatives."""

    logprob: float
    top: list[tuple[int, float]]


class Sequence:
    """One request as the scheduler and the model runner see it.

    ``on_token``, when set, sees the sequence after each new token (other than EOS or
    a stop token) and returns ``True`` to end it there, with ``finish_reason`` "stop":
    a caller parsing the output as it grows stops generation on a stop sequence.

    ``num_computed_tokens`` counts the tokens whose keys and values are in the cache;
    everything after it still has to run through the model (a prefill, possibly in
    chunks, or the one new token of a decode step). ``block_table`` lists the cache
    blocks holding the sequence, in order.

    ``seq_id`` is the engine's own number for the sequence (block manager and sampler
    keys); ``request_id`` is the caller's name for it (``LLM.add_request``), by
    default the same number. ``block_hashes`` holds the prefix-cache hash of each
    full block of ``token_ids`` computed so far (``BlockManager`` extends it; full
    blocks never change, so the hashes stay valid as the sequence grows).

    ``constraint`` holds the sequence's grammar matcher when its request is constrained
    (:mod:`deepseek_engine.core.constraint`); it has accepted every output token but an ending one.
    """

    def __init__(
        self,
        seq_id: int,
        prompt_token_ids: list[int],
        params: SamplingParams,
        generator: torch.Generator,
        request_id: int | str | None = None,
    ) -> None:
        self.seq_id = seq_id
        self.request_id: int | str = seq_id if request_id is None else request_id
        self.token_ids: list[int] = list(prompt_token_ids)
        self.num_prompt_tokens = len(prompt_token_ids)
        self.params = params
        self.generator = generator
        self.status = SequenceStatus.WAITING
        self.block_table: list[int] = []
        self.num_computed_tokens = 0
        # Tokens found in the prefix cache at the first admission (reported as usage).
        self.num_cached_tokens: int | None = None
        self.logprobs: list[TokenLogprob] = []
        self.finish_reason: str | None = None
        self.stop_token_id: int | None = None
        self.num_preemptions = 0
        # Called after each generated token that is not EOS or a stop token; True ends the request.
        self.on_token: Callable[[Sequence], bool] | None = None
        # Private state the model keeps for this sequence between steps (``StepContext.seq_states``).
        self.model_state: dict = {}
        self.block_hashes: list[bytes] = []
        self.constraint: SequenceConstraint | None = None

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def num_uncomputed_tokens(self) -> int:
        return len(self.token_ids) - self.num_computed_tokens

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED
