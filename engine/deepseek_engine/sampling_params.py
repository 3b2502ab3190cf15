"""Per-request sampling and stopping parameters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deepseek_engine.core.constraint import MatcherSource, TokenMatcher
    from deepseek_engine.speculative.config import SpeculativeConfig


@dataclass
class SamplingParams:
    """How one request picks its tokens and when it stops.

    ``temperature == 0`` (or ``top_k == 1``) selects greedy decoding. ``top_k <= 0``
    and ``top_p == 1`` disable those filters. ``seed`` fixes the request's own random
    stream, so a seeded request yields the same tokens whatever else shares its batch;
    without a seed the engine draws one. ``max_tokens=None`` means "until the context
    is full". ``logprobs=N`` reports the chosen token's log probability plus the ``N``
    most likely alternatives (``0``: chosen token only); log probabilities come from
    the model's raw distribution, before temperature and filtering.

    ``speculative`` selects speculative decoding for this request: a
    ``SpeculativeConfig`` (drafter method, drafts per step, adaptive verification),
    ``False`` (never for this request) or ``None`` (the ``LLM``'s own setting).
    Greedy output is the same either way; sampled output has the same distribution.

    ``constraint`` restricts the output to a grammar's language: a ``TokenMatcher`` (for one request),
    or a ``MatcherSource`` such as ``deepseek_recipe.OutputGrammar`` whose ``matcher()`` gives each
    sequence its own (one ``SamplingParams`` shared by several prompts, or the choices of ``n > 1``).
    Disallowed tokens are masked before temperature, top-k and top-p (greedy too); EOS and the stop
    tokens are allowed only where the grammar accepts; log probabilities stay the model's raw ones.
    See :mod:`deepseek_engine.core.constraint`.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    max_tokens: int | None = 16
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    logprobs: int | None = None
    speculative: SpeculativeConfig | bool | None = None
    constraint: TokenMatcher | MatcherSource | Any | None = None

    def __post_init__(self) -> None:
        if not self.temperature >= 0.0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 disables it), got {self.top_k}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.logprobs is not None and not 0 <= self.logprobs <= 20:
            raise ValueError(f"logprobs must be in [0, 20], got {self.logprobs}")
        if self.seed is not None and not 0 <= self.seed < 2**63:
            raise ValueError(f"seed must be in [0, 2^63), got {self.seed}")
        self.stop_token_ids = [int(t) for t in self.stop_token_ids]
        if self.constraint is not None:
            from deepseek_engine.core.constraint import check_constraint

            check_constraint(self.constraint)
        if self.speculative is not None and self.speculative is not False:
            from deepseek_engine.speculative.config import SpeculativeConfig

            if not isinstance(self.speculative, SpeculativeConfig):
                raise ValueError("speculative must be a SpeculativeConfig, False or None, "
                                 f"got {self.speculative!r}")
            if self.logprobs is not None:
                raise ValueError("logprobs are not reported with speculative decoding")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1
