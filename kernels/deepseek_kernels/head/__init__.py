"""Greedy decoding head: the arg-max token of ``x @ weight.T`` without materialising the logits.

Ops (``cpu.cpp``):

* ``head_argmax(h, blocked, tail)``: a running maximum per row over ``weight`` laid out in blocks of 8
  vocabulary rows; each logit is an ordinary float32 dot product accumulated in order with FMA.
* ``head_argmax_q8(h, wq, rowsum, s_w, ew, aw, wmax, w, candidates)``: an exact 8-bit integer pass bounds
  every logit from the rounding errors of both operands and keeps only the rows that can still win; those get
  the float32 dot of ``head_argmax``. Rows of 32 columns (padded) are laid out in pairs of blocks, 16 vocabulary
  rows per k-group; the scan runs on AMX tiles where the CPU and the OS offer them, else AVX-512 VNNI / AVX2
  (the same exact integers either way). Index ``-1`` marks a row it could not decide (an all-zero row, too many
  near-equal logits); :class:`GreedyHead` sends those rows through ``head_argmax``.

On CUDA / Ascend the head is one GEMM and ``torch.argmax`` (``head_argmax_reference``): the logits GEMM is
memory-bound on the weight there and the arg-max is a cheap reduction.
"""

from __future__ import annotations

import torch

from .._mode import reference_mode
from .._registry import fake, op
from .reference import head_argmax_reference

_plain, _q8 = op("head_argmax"), op("head_argmax_q8")


@fake("head_argmax")
def _(h, blocked, tail):
    return h.new_empty(h.shape[0], dtype=torch.long), h.new_empty(h.shape[0])


@fake("head_argmax_q8")
def _(h, wq, rowsum, s_w, ew, aw, wmax, w, candidates):
    return h.new_empty(h.shape[0], dtype=torch.long), h.new_empty(h.shape[0])


class GreedyHead:
    """Arg-max of ``x @ weight.T`` per row, the same IDs ``torch.argmax`` of the float32 logits gives.

    Holds a blocked float32 copy of ``weight`` and an 8-bit rounded copy, both made here from ``weight`` as it is
    now: after changing the weight, make a new head (the engine does when told that weights changed). NaN anywhere in ``x`` or ``weight`` (where the running maximum and ``torch.argmax`` disagree), non-CPU
    tensors, other dtypes and heads over ``MAX_BYTES`` use the reference: one product and ``torch.argmax``.
    """

    #: Largest head (in bytes) for which the blocked copy is made.
    MAX_BYTES = 1 << 30
    #: Candidate buffer per row of the integer pass.
    CANDIDATES = 2048

    def __init__(self, weight: torch.Tensor, quantized: bool = True) -> None:
        self.weight = weight
        self.quantized = quantized
        self._blocked: tuple[torch.Tensor, torch.Tensor] | None = None
        self._q8: tuple | None = None
        self._finite = False
        w = weight
        if w.dim() == 2 and w.dtype == torch.float32 and w.is_cpu and w.numel() * 4 <= self.MAX_BYTES:
            v, k = w.shape
            n = v // 8
            with torch.no_grad():
                plain = w.detach()
                self._blocked = (plain[: n * 8].reshape(n, 8, k).transpose(1, 2).contiguous(),
                                 plain[n * 8:].contiguous())
                self._finite = bool(torch.isfinite(plain).all())
                self._q8 = self._quantize(plain.contiguous()) if self._finite and 0 < k <= 256 else None

    @staticmethod
    def _quantize(w: torch.Tensor) -> tuple | None:
        """int8 blocks, row sums and the error bounds ``head_argmax_q8`` needs (float64 arithmetic)."""
        v, k = w.shape
        n = v // 8
        w64 = w.double()
        wmax = float(w64.abs().max()) if w.numel() else 0.0
        if n == 0 or not wmax > 0.0:
            return None
        k4 = max(-(-k // 4) * 4, 32)  # the register paths take exactly 32 (zero-padded) columns
        qmax = 127
        s_w = wmax / qmax
        q = torch.round(w64 / s_w).clamp_(-qmax, qmax)
        ew = float((w64 - q * s_w).abs().max()) * (1 + 1e-9)
        aw = float(w64.abs().sum(dim=1).max()) * (1 + 1e-9)
        if k4 == 32:  # blocks in pairs: k-group g of 16 vocabulary rows in 64 bytes (a 512-bit register, a tile row)
            n = v // 16 * 2
            if n == 0:
                return None
        q8 = torch.zeros(n * 8, k4, dtype=torch.int8)
        q8[:, :k] = q[: n * 8].to(torch.int8)
        rowsum = q8.to(torch.int32).sum(dim=1).to(torch.int32).contiguous()
        width = 16 if k4 == 32 else 8
        blocks = q8.view(n * 8 // width, width, k4 // 4, 4).permute(0, 2, 1, 3).contiguous()
        return blocks, rowsum, s_w, ew, aw, wmax, w

    def _usable(self, x: torch.Tensor) -> bool:
        return (not reference_mode() and self._blocked is not None and x.dim() == 2
                and x.shape[1] == self.weight.shape[1] and x.shape[0] > 0 and x.dtype == torch.float32 and x.is_cpu)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if not self._usable(x):
            return head_argmax_reference(x, self.weight)
        blocked, tail = self._blocked
        if not self._finite:
            return head_argmax_reference(x, self.weight)
        x = x.contiguous()
        if self.quantized and self._q8 is not None:
            blocks, rowsum, s_w, ew, aw, wmax, plain = self._q8
            out, _ = _q8(x, blocks, rowsum, s_w, ew, aw, wmax, plain, self.CANDIDATES)
            # A row with NaN or an infinity is one the integer pass cannot decide (-1), so the finiteness check
            # runs only on the rare step that has undecided rows.
            if int(out.min()) < 0:
                undecided = torch.nonzero(out < 0).flatten()
                rows = x[undecided]
                out[undecided] = self._plain(rows, blocked, tail) if bool(torch.isfinite(rows).all()) \
                    else head_argmax_reference(rows, self.weight)
            return out
        if not bool(torch.isfinite(x).all()):
            return head_argmax_reference(x, self.weight)
        return self._plain(x, blocked, tail)

    @staticmethod
    def _plain(x: torch.Tensor, blocked: torch.Tensor, tail: torch.Tensor) -> torch.Tensor:
        m = x.shape[0]
        m8 = -(-m // 8) * 8
        h = x if m8 == m else torch.cat([x, x.new_zeros(m8 - m, x.shape[1])])
        out, _ = _plain(h, blocked, tail)
        out = out[:m]
        lost = torch.nonzero(out < 0).flatten()  # every logit overflowed to -inf: let torch.argmax decide
        if lost.numel():
            out[lost] = head_argmax_reference(x[lost], torch.cat([blocked.transpose(1, 2).flatten(0, 1), tail]))
        return out


__all__ = ["GreedyHead", "head_argmax_reference"]
