"""A step's queries laid out as ``[B, Tq, ...]``: one row per sequence, padded to the longest.

Attention kernels take the padded layout; everything else in a step works on the flat rows
``[T, ...]`` of the real tokens. A step layout that derives from ``PaddedQueries`` sets
``num_seqs``, ``t_max`` and ``uniform`` (every sequence has ``t_max`` tokens), and, when not
uniform, ``q_index`` (the flat row of each padded ``(b, t)``, a real row where it pads) and
``q_rows`` (the padded positions that hold real tokens).
"""

from __future__ import annotations

import torch


class PaddedQueries:
    """``pad`` / ``unpad`` between the flat token rows and the padded per-sequence layout."""

    num_seqs: int
    t_max: int
    uniform: bool
    q_index: torch.Tensor | None
    q_rows: torch.Tensor | None

    def pad(self, flat: torch.Tensor) -> torch.Tensor:
        """Flat per-token rows ``[T, ...]`` -> ``[B, Tq, ...]`` (padding repeats a real row)."""
        if self.uniform:
            return flat.view(self.num_seqs, self.t_max, *flat.shape[1:])
        return flat[self.q_index]

    def unpad(self, padded: torch.Tensor) -> torch.Tensor:
        """``[B, Tq, ...]`` -> the flat rows ``[T, ...]`` of the real tokens."""
        flat = padded.reshape(self.num_seqs * self.t_max, *padded.shape[2:])
        return flat if self.uniform else flat.index_select(0, self.q_rows)
