"""PyTorch definition of ``decode_layout``: the gather indices of a decode step (one new token per sequence).

Sequence ``b`` holds ``positions[b]`` tokens in the paged cache and adds the token at that position; its
logical row ``p`` lives in pool row ``tables[b, p // block_size] * block_size + p % block_size``. The layout
names, for every sequence, the pool rows its new token reads:

* ``rank_ends [B]``: how far the reference model's rows reach (``ends = positions + 1``, or the prompt length
  while the token is still inside the prompt, since a prompt is prefilled in one call there);
* ``key_slots [B, K]`` and ``window_visible [B, 1, K]``: the sliding window, positions from
  ``max(0, p - window + 1)`` up to ``p`` (``K`` the longest window of the step; padding repeats the last row and
  is not visible);
* per compression ``rate``: ``entry_slots [B, N]`` (the row holding compressed entry ``e``, written by the token
  closing its window, ``(e + 1) * rate - 1``), ``entry_valid [B, N]`` (``e < ends // rate``) and
  ``threshold [B, 1]`` (entries strictly below it are complete for the token, ``ends // rate``);
* ``closing [len(rates)]``: how many compression windows this step's tokens close, per rate.

The same tensors as ``StepLayout`` / ``StepLayout.rate_info`` of the engine build for a step whose sequences
all add one token (the engine compares the two in its tests).
"""

from __future__ import annotations

import torch


def _slots(tables: torch.Tensor, rows: torch.Tensor, block_size: int) -> torch.Tensor:
    return torch.gather(tables, 1, rows // block_size) * block_size + rows % block_size


def decode_layout_reference(positions: torch.Tensor, tables: torch.Tensor, prompt_lens: torch.Tensor | None,
                            block_size: int, window: int, rates: list[int]) -> list[torch.Tensor]:
    """``[rank_ends, key_slots, window_visible, (entry_slots, entry_valid, threshold) per rate, closing]``."""
    dev = positions.device
    starts = positions.long()
    ends = starts + 1
    rank_ends = ends if prompt_lens is None else torch.where(ends <= prompt_lens, prompt_lens, ends)
    q_pos = starts[:, None]
    k_first = (starts - window + 1).clamp_min(0)
    k_count = ends - k_first
    k = torch.arange(int(k_count.max()) if starts.numel() else 1, device=dev)[None, :]
    key_pos = k_first[:, None] + k
    key_slots = _slots(tables, key_pos.clamp_max(ends[:, None] - 1), block_size)
    qp, kp = q_pos[:, :, None], key_pos[:, None, :]
    visible = (k < k_count[:, None])[:, None, :] & (kp <= qp) & (kp > qp - window)
    out = [rank_ends, key_slots, visible]
    closing = []
    for rate in rates:
        done, total = starts // rate, ends // rate
        n_max = int(total.max()) if starts.numel() else 0
        e = torch.arange(n_max, device=dev)[None, :]
        out += [_slots(tables, ((e + 1) * rate - 1).clamp_max(ends[:, None] - 1), block_size), e < total[:, None],
                (q_pos + 1) // rate]
        closing.append(int((total - done).sum()))
    out.append(torch.tensor(closing, dtype=torch.long, device=dev))
    return out


def closing_windows(starts: list[int], ends: list[int], tables: torch.Tensor, block_size: int,
                    rate: int) -> dict[str, torch.Tensor]:
    """Every compression window of ``rate`` that the new tokens ``starts[b] .. ends[b] - 1`` of sequence ``b``
    close (sequence order, then window order; a decode step closes at most one per sequence): the window
    indices ``w``, the pool slots of each window's own rows and of the previous window's (clamped at row 0),
    whether a previous window exists, and the slot of the row that closes the window (where its entry goes).

    The pairs are listed in Python: a few dozen integers, cheaper than a tensor formulation.
    """
    dev = tables.device
    pairs: list[list[int]] = [[], []]  # sequence, window index
    for b, (start, end) in enumerate(zip(starts, ends)):
        for w in range(start // rate, end // rate):
            pairs[0].append(b)
            pairs[1].append(w)
    win_seq, w = torch.tensor(pairs, dtype=torch.long, device=dev)
    rows = w[:, None] * rate + torch.arange(rate, device=dev)[None, :]
    own = tables.index_select(0, win_seq)
    window_slots = _slots(own, rows, block_size)
    return {
        "w": w,
        "window_slots": window_slots,
        "prior_slots": _slots(own, (rows - rate).clamp_min(0), block_size),
        "has_prior": w > 0,
        "entry_out_slots": window_slots[:, rate - 1].contiguous(),
    }
