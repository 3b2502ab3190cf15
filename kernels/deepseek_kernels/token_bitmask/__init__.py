"""``apply_token_bitmask_(logits, bitmask)``: in place, the logits of the tokens a grammar's bitmask forbids set to
``-inf`` (see ``reference.py`` for the bit layout).

CPU: ``cpu.cpp`` (all-ones words skipped, all-zero words filled, bits looked at only in mixed words); CUDA /
Ascend: the PyTorch reference (the bitmask is moved to the logits' device).
"""

from __future__ import annotations

from .._registry import device_impl, entry_point, fake
from .reference import apply_token_bitmask_reference, token_allowed


@fake("apply_token_bitmask_")
def _(logits, bitmask):
    return None


device_impl("apply_token_bitmask_", apply_token_bitmask_reference, "PyTorch reference")


apply_token_bitmask_ = entry_point("apply_token_bitmask_", apply_token_bitmask_reference)


__all__ = ["apply_token_bitmask_", "apply_token_bitmask_reference", "token_allowed"]
