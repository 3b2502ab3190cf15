"""The speculative-decoding setting: drafter method, drafts per step, adaptive verification.

Kept apart from the decoding loop (and from torch) so that ``SamplingParams`` can carry one per request.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SpeculativeConfig:
    """``method``: ``"dspark"`` (V4.1) or ``"mtp"`` (V4); ``num_speculative_tokens`` drafts per step.

    ``adaptive`` (DSpark only) verifies the confidence-chosen number of drafts;
    ``costs[b]`` is the relative cost of a step verifying ``b`` drafts (default:
    ``1 + verify_cost_per_token * b``).
    """

    method: str
    num_speculative_tokens: int = 3
    adaptive: bool = False
    costs: list[float] | None = None
    verify_cost_per_token: float = 0.1

    def __post_init__(self) -> None:
        if self.method not in ("dspark", "mtp"):
            raise ValueError(f"unknown speculative method {self.method!r} (expected 'dspark' or 'mtp')")
        if self.num_speculative_tokens < 1:
            raise ValueError("num_speculative_tokens must be at least 1")
        if self.adaptive and self.method != "dspark":
            raise ValueError("adaptive verification needs DSpark's confidence head")

    def step_costs(self) -> list[float]:
        n = self.num_speculative_tokens
        if self.costs is not None:
            if len(self.costs) != n + 1:
                raise ValueError(f"costs needs {n + 1} entries (verifying 0 .. {n} drafts)")
            return list(self.costs)
        return [1.0 + self.verify_cost_per_token * b for b in range(n + 1)]
