"""Serving glue for DeepSeek V4.1: the model-runner contract over a V4.1 cache pool.

The scheduler and model runner call ``model(input_ids, positions, ctx)`` with a
step context (:mod:`deepseek_engine.core.model_runner`). The V4.1 model runs each
scheduled sequence on its own (so a row never depends on the other rows of its
step), and this wrapper returns only the logits rows the runner asks for.

Sliding-window KV and prefix caching (``swa_replay``):

* ``None``: window KV lives in the pool's blocks like every other piece of state,
  so a prefix-cache hit shares it too (exact; every position holds window KV).
* ``"exact"`` (the default): the pool holds no window KV; each sequence keeps its
  last ``window + step`` positions in a private :class:`WindowRing`. A sequence
  whose step starts where its ring holds nothing (a prefix-cache hit, or a
  recompute after preemption) first replays the last ``num_layers * (window - 1)``
  tokens before its start (:meth:`DeepseekV41ForCausalLM.replay_prefix`): enough
  for every later row to equal a full forward, and bounded by the window and the
  depth, not by the hit's length.
* ``"window"``: the same, replaying only the last ``window`` tokens (vLLM's
  ``swa_bounded_replay``): cheaper, but rows after a hit longer than the window
  differ from a full forward unless the model was trained for it.

Each sequence's ``model_state`` (see :class:`~deepseek_engine.core.sequence.Sequence`)
holds its ring and ``replayed_tokens``, the number of tokens it replayed.
"""

from __future__ import annotations

from typing import Any

import deepseek_kernels as ops
import torch
from torch import nn

from deepseek_engine.core.int_tensors import long_tensor, padded_rows
from deepseek_engine.core.padded_queries import PaddedQueries
from deepseek_engine.layers.hyper_connection import hyper_merge
from deepseek_engine.layers.packed_linear import matrix
from deepseek_engine.layers.rotary_embedding import rotary_tables
from deepseek_engine.layers.row_invariant import linear, rotary
from deepseek_engine.models.deepseek_v4.kv_cache import SequenceCache, read_rows, write_rows
from deepseek_engine.models.deepseek_v41.engram import DEAD_ID, image_token_mask, ngram_hashes
from deepseek_engine.models.deepseek_v41.hyper_connection import collapse, mhc_pre_delayed
from deepseek_engine.models.deepseek_v41.indexer import index_keys_with_tables, select_entries
from deepseek_engine.models.deepseek_v41.kv_cache import V41CachePool, WindowRing
from deepseek_engine.models.deepseek_v41.step_plan import V41AttentionPlan, V41StepPlan
from deepseek_engine.models.loader import process_weights_after_loading as prepare_layers

SWA_REPLAY_MODES = (None, "exact", "window")


class ServedDeepseekV41(nn.Module):
    def __init__(self, model: nn.Module, swa_replay: str | None = "exact") -> None:
        super().__init__()
        if swa_replay not in SWA_REPLAY_MODES:
            raise ValueError(f"swa_replay must be one of {SWA_REPLAY_MODES}, got {swa_replay!r}")
        self.model = model
        self.config = model.config
        self.swa_replay = swa_replay
        self.window_store = WindowStore()  # the running sequences' rings side by side (rebuilt when they change)
        self.position_tables = PositionTables()  # rotary rows of every position so far, per rope
        self.replay_depth = 0
        if swa_replay is not None:
            self.replay_depth = model.exact_replay_depth() if swa_replay == "exact" else self.config.sliding_window
        self.process_weights_after_loading()

    def process_weights_after_loading(self) -> None:
        """Build the layers' derived tensors from the weights as they are now (when wrapped, and again from
        ``LLM.reload_weights``)."""
        prepare_layers(self.model)
        self.plan = V41StepPlan(self.model)
        self.head_matrix = matrix(self.model.head)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, ctx) -> torch.Tensor:
        rings = self._rings(positions, ctx) if self.swa_replay is not None else None
        h = batched_hidden(self.model, input_ids, positions, ctx, rings, self.window_store,
                           tables=self.position_tables, plan=self.plan)
        if h is None:  # unfinished prefill chunks only: the caches advanced, no row is wanted
            return torch.empty(0, self.config.vocab_size, device=input_ids.device)
        return linear(h, self.head_matrix).float()

    def _rings(self, positions: torch.Tensor, ctx) -> list[WindowRing]:
        """Each sequence's window ring, made ready for this step (replaying where it holds nothing)."""
        states = getattr(ctx, "seq_states", None)
        if states is None:
            raise ValueError("bounded SWA replay needs per-sequence state in the step context (seq_states)")
        starts = ctx.query_start_loc
        lens = getattr(ctx, "context_lens", None)  # start = context length after the step - its tokens
        firsts = positions[starts[:-1]].tolist() if lens is None else None
        rings = []
        for i, state in enumerate(states):
            steps = starts[i + 1] - starts[i]
            start = lens[i] - steps if firsts is None else firsts[i]
            ring = state.get("window_ring")
            if ring is None:
                ring = state["window_ring"] = WindowRing(self.config, steps, self.model.dtype, self.model.device)
            ring.fit(steps, start)
            if start == 0:
                ring.lo = ring.end = ring.floor = 0
            elif not ring.holds_window_of(start):
                ring.grow(min(self.replay_depth, start), start)  # replay in as few chunks as the bound allows
                cache = SequenceCache(ctx.kv, ctx.block_tables[i], num_tokens=start)
                r0 = self.model.replay_prefix(None, cache, ring, self.replay_depth)
                state["replayed_tokens"] = state.get("replayed_tokens", 0) + start - r0
            rings.append(ring)
        return rings


def wrap_v41(model: nn.Module, max_model_len: int, swa_replay: str | None = "exact") -> tuple[nn.Module, Any, dict]:
    config = model.config
    served = ServedDeepseekV41(model, swa_replay)

    def make_kv(num_blocks: int, block_size: int) -> V41CachePool:
        return V41CachePool(config, num_blocks, block_size, model.dtype, model.device, window_kv=swa_replay is None)

    info = {"vocab_size": config.vocab_size, "eos_token_id": config.eos_token_id, "max_model_len": max_model_len}
    return served, make_kv, info


# ---------------------------------------------------------------------------------------------------------------
# The batched step: every scheduled sequence of a step in one pass per layer, over the paged pool.
# ---------------------------------------------------------------------------------------------------------------


class WindowStore:
    """Where a step reads and writes window KV: the pool's ``kv`` blocks, or the sequences' rings side by side.

    Rings: each layer's rows of all the step's rings live in one ``[B * width, D]`` tensor (``width``: the
    largest ring), ring ``b`` being a contiguous view of rows ``b * width ..`` of it (its own tensors are
    rebound to those views, so the per-sequence path and replay keep working on them); position ``p`` of
    sequence ``b`` is row ``b * width + p % size_b``. The stack is rebuilt only when the rings change (a
    sequence joins, leaves or resizes).
    """

    def __init__(self) -> None:
        self._key: tuple | None = None
        self.layers: list[torch.Tensor] = []
        self.width = 0

    def stack(self, rings: list[WindowRing]) -> None:
        key = self._ring_key(rings)
        if key == self._key:
            return
        width = max(r.size for r in rings)
        self.width = width
        self.layers = []
        for i in range(len(rings[0].layers)):
            d = rings[0].layers[i].shape[-1]
            big = rings[0].layers[i].new_zeros(len(rings) * width, d)
            for b, r in enumerate(rings):
                view = big[b * width:b * width + r.size].view(1, r.size, d)
                view.copy_(r.layers[i])
                r.layers[i] = view
            self.layers.append(big)
        self._key = self._ring_key(rings)

    @staticmethod
    def _ring_key(rings: list[WindowRing]) -> tuple:
        """What identifies the stack: each ring and where its tensors live (a ring's resize, like ``stack``,
        replaces all its layers' tensors at once, so its first layer's address stands for all)."""
        return tuple((id(r), r.size, r.layers[0].data_ptr()) for r in rings)


#: Positions up to which whole tables are kept (beyond, a step evaluates its own rows: the same bits).
MAX_TABLE_POSITIONS = 1 << 16


class PositionTables:
    """The rotary tables ``(c, s, -s)`` of positions ``0 .. n - 1`` per rope and dtype, stacked ``[3, n, R]``
    (extended by doubling): a step gathers its rows with one ``index_select`` instead of evaluating them. Each
    position's rows are :func:`rotary`'s (its cosines and sines do not depend on the other positions), so they
    are the bits a per-step evaluation gives."""

    def __init__(self) -> None:
        self._tables: dict[tuple, torch.Tensor] = {}

    def rows(self, rope, dtype: torch.dtype, positions: torch.Tensor, top: int):
        """``(c, s, -s)`` of ``positions`` (``top``: their maximum)."""
        key = (id(rope), dtype)
        table = self._tables.get(key)
        if table is None or table.shape[1] <= top:
            size = max(top + 1, 1024, 2 * table.shape[1] if table is not None else 0)
            c, s = rotary_tables(*rotary(rope, torch.arange(size, device=positions.device), dtype))
            table = self._tables[key] = torch.stack((c, s, -s))
        return table.index_select(1, positions).unbind(0)


class V41StepLayout(PaddedQueries):
    """Gather indices of one step, shared by every layer: ``B`` sequences adding ``counts[b]`` tokens after
    ``starts[b]``; queries padded to ``[B, Tq]``; the window keys each sequence reads; per compression ratio
    the entry rows and the groups this step closes."""

    def __init__(self, positions: torch.Tensor, ctx, window: int, rings: list[WindowRing] | None,
                 store: WindowStore | None, tables: PositionTables | None = None) -> None:
        self.position_tables = tables
        self._top: int | None = None
        dev = positions.device
        self.positions, self.window, self.bs = positions, window, ctx.kv.block_size
        loc_list = list(ctx.query_start_loc)
        counts = [b - a for a, b in zip(loc_list[:-1], loc_list[1:])]
        if any(n <= 0 for n in counts):
            raise ValueError("every sequence of a step needs at least one token")
        self.num_seqs, self.t_max = len(counts), max(counts)
        self.tables = padded_rows(ctx.block_tables, dev)
        loc = long_tensor(loc_list[:-1], dev)
        self.counts = long_tensor(counts, dev)
        self.starts = positions if self.t_max == 1 else positions[loc]  # a decode step: one token each
        self.ends = self.starts + self.counts
        seq_ids = torch.arange(self.num_seqs, device=dev)
        self.token_seq = seq_ids if self.t_max == 1 else torch.repeat_interleave(seq_ids, self.counts)
        given = getattr(ctx, "slot_mapping", None)  # the runner's (the same rows: table[p // bs] * bs + p % bs)
        if given is not None and given.numel() == positions.numel():
            self.slot_mapping = given.reshape(-1).to(dev, torch.long)
        else:
            self.slot_mapping = self.rows_to_slots(positions, self.token_seq)
        t = torch.arange(self.t_max, device=dev)[None, :]
        self.uniform = all(n == self.t_max for n in counts)
        self.q_index = self.q_rows = None  # gather indices of padded queries (equal counts: plain views)
        if not self.uniform:
            self.q_index = (loc[:, None] + t).clamp_max(positions.numel() - 1)
            self.q_rows = torch.nonzero((t < self.counts[:, None]).flatten()).squeeze(1)
        self.q_pos = self.starts[:, None] + t
        floors = torch.zeros_like(self.starts) if rings is None else long_tensor([r.lo for r in rings], dev)
        k_first = torch.maximum((self.starts - window + 1).clamp_min(0), floors)
        k_count = self.ends - k_first
        k = torch.arange(int(k_count.max()), device=dev)[None, :]
        key_pos = (k_first[:, None] + k).clamp_max(self.ends[:, None] - 1)
        qp, kp = self.q_pos[:, :, None], key_pos[:, None, :]
        self.window_visible = (k < k_count[:, None])[:, None, :] & (kp <= qp) & (kp > qp - window)
        if rings is None:  # window KV in the pool's blocks
            self.key_rows = self.rows_to_slots(key_pos)
            self.token_rows = self.slot_mapping
        else:
            sizes = long_tensor([r.size for r in rings], dev)
            base = torch.arange(self.num_seqs, device=dev) * store.width
            self.key_rows = base[:, None] + key_pos % sizes[:, None]
            self.token_rows = base[self.token_seq] + positions % sizes[self.token_seq]
        self._rates: dict[int, dict] = {}
        self._tables: dict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def rope_tables(self, rope, dtype: torch.dtype, positions: torch.Tensor | None = None, key: str = "tokens"):
        """``(c, s, -s)``: the ``rotary_tables`` that ``apply_rotary(x, *rotary(rope, positions, dtype))`` builds
        (the step's token positions by default), once per step for every layer on that rope."""
        k = (id(rope), dtype, key)
        found = self._tables.get(k)
        if found is None:
            pos = self.positions if positions is None else positions
            if self._top is None and self.position_tables is not None:  # once per step: bounds every table row
                self._top = int(self.positions.max())
            if self.position_tables is not None and pos.numel() and self._top < MAX_TABLE_POSITIONS:
                found = self._tables[k] = self.position_tables.rows(rope, dtype, pos, self._top)
            else:
                c, s = rotary_tables(*rotary(rope, pos, dtype))
                found = self._tables[k] = (c, s, -s)
        return found

    def rows_to_slots(self, rows: torch.Tensor, seq: torch.Tensor | None = None) -> torch.Tensor:
        """Flat pool rows of logical rows ``rows``: ``[B, K]`` per sequence, or flat with ``seq`` their sequences."""
        bs = self.bs
        if seq is None:
            return torch.gather(self.tables, 1, rows // bs) * bs + rows % bs
        return self.tables[seq, rows // bs] * bs + rows % bs



    def rate(self, r: int) -> dict:
        """Entry rows, visibility thresholds and the groups closed in this step, for compression ratio ``r``."""
        found = self._rates.get(r)
        if found is not None:
            return found
        dev = self.positions.device
        total = self.ends // r
        e = torch.arange(int(total.max()), device=dev)[None, :]
        closing = torch.nonzero((self.positions + 1) % r == 0).squeeze(1)
        pos = self.positions[closing]
        found = {
            "entry_slots": self.rows_to_slots(((e + 1) * r - 1).clamp_max(self.ends[:, None] - 1)),
            "threshold": (self.q_pos + 1) // r,
            "closing": closing,
            "group_pos": pos - pos % r,
            "closing_slots": self.slot_mapping[closing],
        }
        if r == 2:  # the open row of each closed pair
            found["first_slots"] = self.rows_to_slots(pos - 1, self.token_seq[closing])
        self._rates[r] = found
        return found


def _step_attention(p: V41AttentionPlan, x: torch.Tensor, layout: V41StepLayout, pool: V41CachePool,
                    store: torch.Tensor, topk: dict) -> torch.Tensor:
    """One layer's attention for the whole step: the arithmetic of ``DeepseekV41Attention.forward`` row by row."""
    n = x.shape[0]
    lp = pool.layers[p.layer_idx]
    c, s, neg = layout.rope_tables(p.rope, x.dtype)
    outs = p.x_products(x)  # wq_a, wkv[, indexer head weights][, compressor rows]
    q_latent = ops.rms_norm(outs[0], *p.q_norm)
    latents = p.latent_products(q_latent)  # wq_b[, indexer queries]
    q = ops.rope(latents[0].view(n, p.n_heads, p.head_dim), c, s)
    kv = ops.rope(ops.rms_norm(outs[1], *p.kv_norm), c, s)
    store.index_copy_(0, layout.token_rows, kv.to(store.dtype))
    entry_pool = entry_slots = entry_visible = None
    if p.ratio > 0:
        info = layout.rate(p.ratio)
        if p.compressor is not None:
            _step_compress(p, p.compressor_rows(x, outs), x.dtype, layout, lp, info)
        entry_pool, entry_slots = pool.layers[p.kv_source].entries, info["entry_slots"]
        if p.indexer is not None:
            topk[p.layer_idx] = _step_select(p, latents[1], outs[p.weights_index], layout, pool, info, (c, s), topk)
        entry_visible = topk[p.index_source]
    out = ops.sink_attention_paged(layout.pad(q), store, layout.key_rows, layout.window_visible, p.attn_sink,
                                   p.scale, entry_pool, entry_slots, entry_visible)
    out = ops.rope(layout.unpad(out), c, neg).reshape(n, p.o_groups, -1)
    # ``grouped_output``: each group row by row, then ``wo_b``
    return linear(torch.cat([linear(out[:, g], w) for g, w in enumerate(p.wo_a)], dim=-1), p.wo_b)


def _step_compress(p: V41AttentionPlan, rows: torch.Tensor, dtype: torch.dtype, layout: V41StepLayout, lp,
                   info: dict) -> None:
    """Pool every group this step closes (``DeepseekV41Attention._compress`` for all sequences at once) from the
    step's compressor rows."""
    comp = p.compressor
    if p.ratio == 2:
        write_rows(lp.raw, layout.slot_mapping, rows)
    closing = info["closing"]
    if closing.numel() == 0:
        return
    if p.ratio == 2:
        first = read_rows(lp.raw, info["first_slots"])
        used = torch.stack([first, rows[closing]], dim=1).view(-1, rows.shape[-1])
    else:
        used = rows[closing]
    latents = comp.pool(used).to(dtype)
    c, s, _ = layout.rope_tables(p.rope, dtype, info["group_pos"], f"groups of {p.ratio}")
    write_rows(lp.entries, info["closing_slots"], ops.rope(latents, c, s))
    if lp.index_keys is not None:  # ``index_keys`` with the group tables (it rotates in float32: the same tables)
        idx = p.indexer
        keys = index_keys_with_tables(latents, matrix(idx.wk), idx.k_norm.weight, idx.eps, c, s)
        write_rows(lp.index_keys, info["closing_slots"], keys)


def _step_select(p: V41AttentionPlan, qi_rows: torch.Tensor, w: torch.Tensor, layout: V41StepLayout, pool,
                 info: dict, tables, topk: dict) -> torch.Tensor:
    """An index source's choice of entries per query ``[B, Tq, E]`` (``DeepseekV41Attention._select``) from its
    query rows and head weights (``V41Indexer.queries`` with the step's tables)."""
    qi = ops.rope(qi_rows.view(qi_rows.shape[0], p.index_heads, p.index_dim), *tables)
    threshold = info["threshold"]
    logits = ops.indexer_scores(layout.pad(qi).float(), layout.pad(w).float(),
                                pool.layers[p.kv_source].index_keys, info["entry_slots"], threshold, 1.0,
                                p.index_wscale)
    b, tq, e = logits.shape
    reading = topk.get("candidates") if p.candidate_read and not p.candidate_write else None
    mask, chosen = select_entries(logits.view(b * tq, e), threshold.reshape(-1), p.index_topk, reading,
                                  p.candidate_block_size, p.candidate_blocks if p.candidate_write else 0)
    if chosen is not None:
        topk["candidates"] = chosen
    return mask.view(b, tq, e)


def _step_engram_inputs(model, input_ids: torch.Tensor, layout: V41StepLayout, pool: V41CachePool):
    """Per-token engram rows of every engram layer and which tokens get an update, for all sequences in one
    ``engram_hash`` call: sequence ``b``'s lookback and tokens form block ``b`` of the id row, and ``L`` unused
    positions separate the blocks' tokens (their hashes are dropped)."""
    layout_e = model.engram_layout
    if layout_e is None:
        return None, None
    if model.engram_token_map is None:
        raise RuntimeError("this model has engram layers but no token map; load it with a tokenizer.json")
    lb = layout_e.max_ngram - 1
    dev = input_ids.device
    if layout.t_max == 1:  # a decode step: every block is the lookback and one token, the same rows as below
        width = lb + 1
        pos = (layout.starts[:, None] + torch.arange(-lb, 1, device=dev)[None, :]).clamp_min(0)
        seq = torch.arange(layout.num_seqs, device=dev)[:, None].expand(-1, width)
        ids = pool.token_ids.view(-1)[layout.rows_to_slots(pos.reshape(-1), seq.reshape(-1))]
        compressed = model.engram_token_map[ids]
        compressed = torch.where(image_token_mask(ids), torch.full_like(compressed, DEAD_ID), compressed)
        real = torch.arange(layout.num_seqs, device=dev) * width  # hash row j ends at id j + lb: the block's token
        spread = torch.zeros(compressed.numel() - lb, dtype=torch.long, device=dev)
        spread[real] = layout.positions
        rows = ngram_hashes(compressed, spread, layout_e, model.engram_pad_id)[real]
        return rows, ~image_token_mask(input_ids)
    lengths = layout.counts + lb
    block_start = torch.cumsum(lengths, 0) - lengths
    seq = torch.repeat_interleave(torch.arange(layout.num_seqs, device=dev), lengths)
    offset = torch.arange(int(lengths.sum()), device=dev) - block_start[seq]
    pos = (layout.starts[seq] - lb + offset).clamp_min(0)
    ids = pool.token_ids.view(-1)[layout.rows_to_slots(pos, seq)]
    compressed = model.engram_token_map[ids]
    compressed = torch.where(image_token_mask(ids), torch.full_like(compressed, DEAD_ID), compressed)
    within = torch.arange(input_ids.numel(), device=dev) - (torch.cumsum(layout.counts, 0) - layout.counts)[layout.token_seq]
    real = block_start[layout.token_seq] + within
    spread = torch.zeros(compressed.numel() - lb, dtype=torch.long, device=dev)
    spread[real] = layout.positions
    rows = ngram_hashes(compressed, spread, layout_e, model.engram_pad_id)[real]
    return rows, ~image_token_mask(input_ids)


@torch.no_grad()
def batched_hidden(model, input_ids: torch.Tensor, positions: torch.Tensor, ctx, rings: list[WindowRing] | None = None,
                   store: WindowStore | None = None, rows: torch.Tensor | None = None,
                   tables: PositionTables | None = None, plan: V41StepPlan | None = None,
                   aux_layers: tuple[int, ...] = (), aux: list | None = None) -> torch.Tensor | None:
    """The normed final hidden state of the step's rows ``rows`` (default: ``ctx.logits_indices``, every row when
    that is ``None``), running every sequence of the step together; ``None`` when no row is wanted.

    Every operation is the per-sequence forward's (``DeepseekV41ForCausalLM.hidden_streams``) on the flat
    batch or, for attention, on the padded ``[B, Tq]`` queries over the paged pool (window keys from the pool
    or the sequences' rings), so each row gets the same bits as the sequence run alone. ``plan``: the layers'
    :class:`~deepseek_engine.models.deepseek_v41.step_plan.V41StepPlan` (``None``: built for this call).
    ``aux_layers``: for each ``L``, the mean over streams after ``L`` layers of every row ``[T, D]`` is appended
    to ``aux`` (``DeepseekV41ForCausalLM.forward_with_aux``'s capture, for DSpark)."""
    pool: V41CachePool = ctx.kv
    c = model.config
    if not isinstance(pool, V41CachePool):
        raise ValueError("a V4.1 model needs a V41CachePool")
    input_ids = input_ids.reshape(-1).to(model.device, torch.long)
    positions = positions.reshape(-1).to(model.device, torch.long)
    if input_ids.shape != positions.shape or input_ids.numel() == 0:
        raise ValueError("input_ids and positions must be non-empty and of the same length")
    if int(input_ids.min()) < 0 or int(input_ids.max()) >= c.vocab_size:
        raise ValueError(f"token ids must lie in [0, {c.vocab_size})")
    starts = list(ctx.query_start_loc)
    if len(starts) != len(ctx.block_tables) + 1 or starts[-1] != input_ids.numel():
        raise ValueError("query_start_loc must have one entry per sequence plus the total token count")
    if rings is not None:
        store = store or WindowStore()
        store.stack(rings)
    elif not pool.window_kv:
        raise ValueError("this pool holds no window KV: pass the sequences' window rings")
    if plan is None:
        plan = V41StepPlan(model)
    layout = V41StepLayout(positions, ctx, c.sliding_window, rings, store, tables)
    pool.token_ids.view(-1).index_copy_(0, layout.slot_mapping, input_ids)
    engram_rows, keep = _step_engram_inputs(model, input_ids, layout, pool)
    streams = model.embed(input_ids).unsqueeze(1).expand(-1, c.hc_mult, -1).contiguous()
    pre = None
    topk: dict = {}
    captured: dict[int, torch.Tensor] = {}
    for i, lp in enumerate(plan.layers):
        if i in aux_layers:
            captured[i] = streams.mean(dim=1)
        if lp.engram is not None:
            streams = lp.engram_forward(streams, engram_rows[:, lp.engram.index], keep)
        post, comb, x, attn_pre = mhc_pre_delayed(streams, *lp.hc["attn"], *lp.hc_settings, pre)
        window = store.layers[i] if rings is not None else pool.layers[i].kv.view(-1, c.head_dim)
        out = _step_attention(lp.attn, ops.rms_norm(x, *lp.attn_norm), layout, pool, window, topk)
        streams = hyper_merge(streams, out, post, comb)
        post, comb, x, pre = mhc_pre_delayed(streams, *lp.hc["ffn"], *lp.hc_settings, attn_pre)
        streams = hyper_merge(streams, lp.ffn_forward(ops.rms_norm(x, *lp.ffn_norm), input_ids), post, comb)
    if len(plan.layers) in aux_layers:
        captured[len(plan.layers)] = streams.mean(dim=1)
    if aux is not None:
        aux.extend(captured[i] for i in aux_layers)
    if rings is not None:
        for ring, end in zip(rings, layout.ends.tolist()):
            ring.end = end
    wanted = ctx.logits_indices if rows is None else rows
    if wanted is not None:
        if wanted.numel() == 0:
            return None
        streams, pre = streams[wanted], pre[wanted]
    return model.norm(collapse(streams, pre))
