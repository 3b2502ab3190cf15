"""DeepSeek V4 attention for a whole scheduled batch at once, over the paged pool.

``attention.DeepseekV4Attention`` handles one sequence per call, so a step
with ``B`` sequences would cost ``B`` Python-level attention calls per layer.
``attention`` here does the same computation for every sequence of the step in
one call: sequence ``b`` adds ``T_b`` tokens (a prefill chunk, or one token when
decoding) after the ``start_b`` tokens already in its cache. Per-token work
(projections, norms, RoPE) runs on the flat token batch; the cache rows each
sequence reads (its sliding window, its compressed entries, the windows its
compressors close in this step) are gathered through padded block tables, and
padded positions are masked out.

It reuses the attention module's weights and follows its arithmetic step by step
(tested against the per-sequence path and the transformers references in
``tests/engine/test_serving_model.py``): query and shared key/value projections
with RoPE, compressors that pool every window closed by this step's tokens (CSA
windows overlap the previous window), the lightning indexer's top-k choice of
compressed entries per query, a softmax with the learned sink logit, and the
grouped output projection.

Projections kept in the checkpoint's format (:mod:`deepseek_engine.layers.packed_linear`) go through
``wo_linear`` instead: the fused input product stacks them by format (``stack_rows``), and a layer with packed
projections runs ``attn_front`` / ``attn_back``'s steps as kernel ops around its packed products
(:func:`_front_packed`, :func:`_back_packed`); ``decode_stack`` does not take such layers.

Every product over the step's token rows is ``row_linear`` or ``wo_linear`` (:func:`product`), never BLAS, whose
blocking (and so a row's bits) depends on how many rows share the call: a sequence gives the same bits alone
and in a batch, in prefill, decode and mixed steps alike.
"""

from __future__ import annotations

import deepseek_kernels as ops
import torch
from deepseek_kernels.step_layout import closing_windows

from deepseek_engine.core.int_tensors import long_tensor, padded_rows
from deepseek_engine.core.padded_queries import PaddedQueries
from deepseek_engine.layers.packed_linear import group_matrices, is_packed, matrix
from deepseek_engine.layers.rotary_embedding import apply_rotary_tables, rotary_tables
from deepseek_engine.layers.row_invariant import linear, rotary
from deepseek_engine.models.deepseek_v4.kv_cache import read_rows, write_rows

#: Positions up to which the rotary tables are kept whole (beyond, each step evaluates its own rows).
MAX_TABLE_POSITIONS = 1 << 16


class PositionTables:
    """The rotary tables ``c``, ``s`` and ``-s`` of rope modules for positions ``0 .. n - 1``, stacked as
    ``[3, n, R]`` (one gather along dimension 1 takes a step's rows of all three), grown by doubling as later
    positions come. The served model owns one (made with its other plans); nothing is kept on the rope modules."""

    def __init__(self) -> None:
        self._tables: dict[int, tuple[object, int, torch.dtype, torch.Tensor]] = {}

    def get(self, module, dtype: torch.dtype, needed: int, device: torch.device) -> torch.Tensor:
        """``module``'s table for at least ``needed`` positions."""
        kept = self._tables.get(id(module))
        if kept is not None and (kept[0] is not module or kept[2] != dtype or kept[3].device != device):
            kept = None
        if kept is None or kept[1] < needed:
            size = max(needed, 1024, 2 * kept[1] if kept is not None else 0)
            cos, sin = rotary(module, torch.arange(size, device=device), dtype)
            c, s = rotary_tables(cos, sin)
            kept = self._tables[id(module)] = (module, size, dtype, torch.stack((c, s, -s)))
        return kept[3]


class StepLayout(PaddedQueries):
    """Gather indices for one step, shared by all layers.

    ``starts[b]`` tokens of sequence ``b`` are cached; its ``counts[b]`` new tokens
    sit at ``query_start_loc[b]`` in the flat batch and at ``slots`` in the pool.
    A decode step (one new token per sequence) gets all its indices, and those of
    every compression rate in ``rates``, from one ``ops.decode_layout`` call; other
    steps (and decode steps with ``one_call=False``, which the tests compare with it)
    build them from tensor operations here (``rate_info`` on first use).
    """

    def __init__(self, positions: torch.Tensor, slots: torch.Tensor, query_start_loc: list[int],
                 block_tables: list[list[int]], block_size: int, window: int,
                 prompt_lens: list[int] | None = None, rates: tuple[int, ...] = (), one_call: bool = True,
                 position_tables: PositionTables | None = None) -> None:
        dev = positions.device
        #: Whole-position rotary tables (the served model's, kept across steps; a new one per layout otherwise).
        self.position_tables = position_tables if position_tables is not None else PositionTables()
        self.positions, self.slots, self.block_size, self.window = positions, slots, block_size, window
        self._per_rate: dict[int, dict[str, torch.Tensor]] = {}
        self._rope: dict[tuple[int, torch.dtype], tuple[torch.Tensor, torch.Tensor]] = {}
        self._tables: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        self._max_position: int | None = None  # ``int(positions.max())``, read once per step
        self._rank_lists: dict[int, list[int]] = {}
        self.tables = padded_rows(block_tables, dev)
        self.q_index = self.q_rows = None
        if one_call and query_start_loc[-1] == len(block_tables):  # every sequence adds one token: a decode step
            self._decode(prompt_lens, rates)
            return
        counts = [b - a for a, b in zip(query_start_loc[:-1], query_start_loc[1:])]
        self.num_seqs, self.t_max = len(counts), max(counts)
        loc = torch.tensor(query_start_loc[:-1], dtype=torch.long, device=dev)
        self.counts = torch.tensor(counts, dtype=torch.long, device=dev)
        self.starts = positions[loc]
        self.ends = self.starts + self.counts
        # How far the reference's rows reach for this step's queries: a prompt is prefilled in one
        # call there, so every prompt row (also in a chunk of it) spans the whole prompt.
        self.rank_ends = self.ends
        if prompt_lens is not None:
            prompt = torch.tensor(prompt_lens, dtype=torch.long, device=dev)
            self.rank_ends = torch.where(self.ends <= prompt, prompt, self.ends)
        t = torch.arange(self.t_max, device=dev)[None, :]
        # Every sequence adds the same number of tokens: padding is a plain view, and the gather indices below
        # are not needed.
        self.uniform = all(n == self.t_max for n in counts)
        if not self.uniform:
            q_valid = t < self.counts[:, None]  # [B, Tq]
            self.q_index = (loc[:, None] + t).clamp_max(positions.numel() - 1)  # flat index of (b, t)
            self.q_rows = torch.nonzero(q_valid.flatten()).squeeze(1)
        self.q_pos = self.starts[:, None] + t
        # Sliding-window keys: positions from max(0, start - window + 1) up to the last new token.
        k_first = (self.starts - window + 1).clamp_min(0)
        k_count = self.ends - k_first
        k = torch.arange(int(k_count.max()), device=dev)[None, :]
        key_pos = k_first[:, None] + k
        self.key_slots = self.rows_to_slots(key_pos.clamp_max(self.ends[:, None] - 1))
        qp, kp = self.q_pos[:, :, None], key_pos[:, None, :]
        self.window_visible = (k < k_count[:, None])[:, None, :] & (kp <= qp) & (kp > qp - window)  # [B, Tq, K]

    def _decode(self, prompt_lens: list[int] | None, rates: tuple[int, ...]) -> None:
        """A decode step's layout from one ``decode_layout`` call (the same tensors as the general path), with
        each rate of ``rates``' entry indices computed up front."""
        positions = self.positions
        self.num_seqs, self.t_max, self.uniform = positions.numel(), 1, True
        self.starts, self.ends, self.q_pos = positions, positions + 1, positions[:, None]
        prompt = None if prompt_lens is None else long_tensor(prompt_lens, positions.device)
        found = ops.decode_layout(positions, self.tables, prompt, self.block_size, self.window, list(rates))
        self.rank_ends, self.key_slots, self.window_visible = found[:3]
        closing = found[-1].tolist()
        for j, rate in enumerate(rates):
            entry_slots, entry_valid, threshold = found[3 + 3 * j: 6 + 3 * j]
            info = {"entry_slots": entry_slots, "entry_valid": entry_valid, "threshold": threshold}
            if closing[j]:
                info.update(self._windows(rate))
            else:
                info["w"] = torch.empty(0, dtype=torch.long, device=positions.device)
            self._per_rate[rate] = info

    def window_tables(self, module, rate: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``rotary_tables(module(w * rate, dtype))`` for the windows of ``rate`` this step closes (entry ``w`` is
        rotated at its window's first position), once per step: the compressor and the indexer's compressor of
        every layer with that rate share them."""
        key = (id(module), rate, dtype, "windows")
        found = self._tables.get(key)
        if found is None:
            found = self._tables[key] = rotary_tables(*rotary(module, self.rate_info(rate)["w"] * rate, dtype))
        return found

    def rank_ends_list(self, rate: int) -> list[int]:
        """``(rank_ends // rate).tolist()``, once per step and rate."""
        found = self._rank_lists.get(rate)
        if found is None:
            found = self._rank_lists[rate] = (self.rank_ends // rate).tolist()
        return found

    def rope(self, module, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``module(positions, dtype)`` for the step's tokens, computed once per step (``row_invariant.rotary``:
        a position's values never depend on which other positions share the step)."""
        key = (id(module), dtype)
        if key not in self._rope:
            self._rope[key] = rotary(module, self.positions, dtype)
        return self._rope[key]

    def rope_tables(self, module, dtype: torch.dtype, inverse: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``rotary_tables`` of ``rope`` (of ``(cos, -sin)`` when ``inverse``), once per step.

        Rows come from tables over all positions up to the largest seen so far (``position_tables``,
        computed once, extended by doubling): a step looks its
        positions up instead of evaluating cos/sin again, and a position's values no
        longer depend on which other positions share its step.
        """
        key = (id(module), dtype, inverse)
        found = self._tables.get(key)
        if found is not None:
            return found
        if self._max_position is None:  # once per step
            self._max_position = int(self.positions.max()) if self.positions.numel() else 0
        if self._max_position >= MAX_TABLE_POSITIONS:
            cos, sin = self.rope(module, dtype)  # far positions: evaluate this step's rows only
            c, s = rotary_tables(cos, sin)
            found = self._tables[key] = (c, -s if inverse else s)
            return found
        # One gather gives the rows of both directions; the other one is kept for the step's later call.
        table = self.position_tables.get(module, dtype, self._max_position + 1, self.positions.device)
        c, s, neg = table.index_select(1, self.positions)
        self._tables[(id(module), dtype, False)] = (c, s)
        self._tables[(id(module), dtype, True)] = (c, neg)
        return self._tables[key]

    def rows_to_slots(self, rows: torch.Tensor, tables: torch.Tensor | None = None) -> torch.Tensor:
        """Flat pool rows of each sequence's logical rows ``rows`` ``[B, K]``."""
        bs = self.block_size
        tables = self.tables if tables is None else tables
        return torch.gather(tables, 1, rows // bs) * bs + rows % bs



    def rate_info(self, rate: int) -> dict[str, torch.Tensor]:
        """Gather indices for compressors of rate ``rate``."""
        info = self._per_rate.get(rate)
        if info is not None:
            return info
        dev = self.positions.device
        done, total = self.starts // rate, self.ends // rate  # entries complete before / after the step
        n_new = total - done
        n_max = int(total.max())
        e = torch.arange(n_max, device=dev)[None, :]
        info = {
            "entry_slots": self.rows_to_slots(((e + 1) * rate - 1).clamp_max(self.ends[:, None] - 1)),
            "entry_valid": e < total[:, None],
            "threshold": (self.q_pos + 1) // rate,  # entries strictly below are complete for the query
        }
        if int(n_new.sum()) == 0:  # no window closes in this step (most decode steps)
            info["w"] = torch.empty(0, dtype=torch.long, device=dev)
        else:
            info.update(self._windows(rate))
        self._per_rate[rate] = info
        return info

    def _windows(self, rate: int) -> dict[str, torch.Tensor]:
        """The windows of ``rate`` this step's tokens close (``deepseek_kernels.step_layout.closing_windows``)."""
        return closing_windows(self.starts.tolist(), self.ends.tolist(), self.tables, self.block_size, rate)


class FusedLinears:
    """Several bias-free linear maps of the same input as one product.

    The attention block applies up to seven projections to the same normed hidden
    state (query down-projection, shared KV, the compressors' KV and gate, the
    indexer's compressor and head weights); one product over the stacked weights
    replaces seven small ones. The stacked copy ``weight`` is a derived tensor: built here, from the weights as
    they are now (the prepare step after loading builds a new ``FusedLinears`` when weights change).
    """

    def __init__(self, linears: list) -> None:
        mats = [matrix(lin) for lin in linears]
        self.splits = [m.out_features if is_packed(m) else m.shape[0] for m in mats]
        self.offsets = [0]  # column where each projection starts, then the total width
        for width in self.splits:
            self.offsets.append(self.offsets[-1] + width)
        #: Whether some projection is kept packed (then ``parts`` holds runs of one kind, each stacked).
        self.packed = any(is_packed(m) for m in mats)
        self.weight: torch.Tensor | None = None
        self.parts: list = []
        with torch.no_grad():
            if not self.packed:
                #: The stacked weights ``[sum(splits), in]``.
                self.weight = torch.cat([m.detach() for m in mats], dim=0)
            else:
                self.parts = _stacked_runs(mats)

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.full(x).split(self.splits, dim=-1)

    def full(self, x: torch.Tensor) -> torch.Tensor:
        """All projections side by side, ``[T, sum(splits)]``."""
        if self.weight is not None:
            return linear(x, self.weight)
        return torch.cat([product(x, m) for m in self.parts], dim=-1)


def product(x: torch.Tensor, m) -> torch.Tensor:
    """``x @ m.T`` for a float matrix (``row_linear``) or a packed one (``wo_linear``): every row on its own
    (:mod:`deepseek_engine.layers.row_invariant`)."""
    return linear(x, m)


def _stacked_runs(mats: list) -> list:
    """Consecutive matrices of one kind stacked along their rows: float ones by ``cat``, packed ones of one format
    and column blocks by ``stack_rows`` (every output row keeps its weights and scales)."""
    from deepseek_kernels.weight_only import stack_rows

    runs: list[list] = []
    for m in mats:
        last = runs[-1][-1] if runs else None
        same = last is not None and is_packed(m) == is_packed(last) and (
            not is_packed(m) or (m.fmt, m.block_cols) == (last.fmt, last.block_cols))
        if same:
            runs[-1].append(m)
        else:
            runs.append([m])
    return [(stack_rows(r) if is_packed(r[0]) else torch.cat([m.detach() for m in r], dim=0)) if len(r) > 1
            else (r[0] if is_packed(r[0]) else r[0].detach()) for r in runs]


def _input_projections(attn) -> FusedLinears:
    linears = [attn.wq_a, attn.wkv]
    if attn.compressor is not None:
        linears += [attn.compressor.wkv, attn.compressor.wgate]
    if attn.indexer is not None:
        linears += [attn.indexer.compressor.wkv, attn.indexer.compressor.wgate, attn.indexer.weights_proj]
    return FusedLinears(linears)


def _compress(comp, kv_proj: torch.Tensor, gate_proj: torch.Tensor, layout: StepLayout,
              pools, read: bool = True) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Record the new tokens' projections (``comp.wkv(x)``, ``comp.wgate(x)``) and pool the windows they close.

    Returns every sequence's entries ``[B, N, d]`` (``None`` unless ``read``: the attention and indexer ops
    read them from the pool through ``rate_info(rate)["entry_slots"]``) and which of them exist.
    """
    kv_pool, gate_pool, entry_pool = pools
    if kv_proj is not None:  # (None: ops.attn_front has stored them)
        write_rows(kv_pool, layout.slots, kv_proj)
        write_rows(gate_pool, layout.slots, gate_proj)
    info = layout.rate_info(comp.rate)
    if info["w"].numel():
        # Pool, norm and rotate every window the step closes; entry w sits in the row of the token closing it.
        c, s = layout.window_tables(comp.rope, comp.rate, kv_pool.dtype)
        ops.compress_windows(entry_pool, kv_pool, gate_pool, comp.ape, info["window_slots"], info["prior_slots"],
                             info["has_prior"], comp.overlap, comp.norm.weight, comp.norm.eps, c, s, info["entry_out_slots"])
    valid = info["entry_valid"]
    if not read:
        return None, valid
    b, n_max = valid.shape
    entries = read_rows(entry_pool, info["entry_slots"].flatten()).view(b, n_max, entry_pool.shape[-1])
    return entries, valid


def _index(indexer, projections: tuple, q_latent: torch.Tensor, layout: StepLayout,
           pools, q_rotated: torch.Tensor | None = None) -> torch.Tensor:
    """The lightning indexer's choice: ``[B, Tq, N]``, the entries each query attends to.

    ``projections``: the indexer compressor's KV and gate projections (``None`` when ``ops.attn_front`` has
    stored them) and ``weights_proj`` of ``x``; ``q_rotated``: the indexer queries when already computed.
    """
    kv_proj, gate_proj, head_weights = projections
    dev = q_latent.device
    _, valid = _compress(indexer.compressor, kv_proj, gate_proj, layout, pools, read=False)
    b, n = valid.shape
    if n == 0:
        return torch.zeros((b, layout.t_max, 0), dtype=torch.bool, device=dev)
    if q_rotated is not None:
        q = q_rotated
    else:
        c, s = layout.rope_tables(indexer.rope, q_latent.dtype)
        q = apply_rotary_tables(product(q_latent, matrix(indexer.wq_b)).view(-1, indexer.n_heads, indexer.head_dim),
                                c, s)
    info = layout.rate_info(indexer.rate)
    # scores, top-k over rows of the reference's length, below the threshold: one call
    return ops.indexer_select(layout.pad(q), layout.pad(head_weights), pools[2], info["entry_slots"], info["threshold"],
                              indexer.head_dim**-0.5, indexer.n_heads**-0.5, indexer.topk,
                              layout.rank_ends_list(indexer.rate))


#: Kept for callers of the old name; the ranking lives in ``deepseek_kernels.indexer``.
_top_entries = ops.top_entries


class AttentionPlan:
    """What ``attention`` reads from one ``DeepseekV4Attention`` module, looked up once after loading.

    A decode step calls ``attention`` once per layer; resolving some thirty module attributes
    (``nn.Module.__getattr__``) and the argument lists of ``ops.attn_front`` / ``ops.attn_back`` on every call
    cost as much as the attention kernel on small models. The plan holds the module's parameter objects and the
    stacked input projections (:class:`FusedLinears`), built when the served model prepares its weights
    (``BatchedDeepseekV4.process_weights_after_loading``) and again only when told that weights changed.
    """

    def __init__(self, attn) -> None:
        self.layer_idx = attn.layer_idx
        self.rope = attn.rope
        self.fused = _input_projections(attn)
        offs = self.fused.offsets
        comp, indexer = attn.compressor, attn.indexer
        self.comp, self.indexer = comp, indexer
        self.comp_rate = comp.rate if comp is not None else 0
        self.shared_rope = indexer is not None and indexer.rope is attn.rope
        #: Column ranges of the fused product copied into the compressor / indexer pools by ``attn_front``.
        self.copy_offsets = (offs[2:4] if comp is not None else []) + (offs[4:6] if indexer is not None else [])
        self.head_weights = (offs[6], offs[7]) if indexer is not None else None
        self.front = (attn.q_norm.weight, attn.q_norm.eps, matrix(attn.wq_b), attn.n_heads, attn.head_dim, attn.eps,
                      attn.norm.weight, attn.norm.eps)
        self.front_indexer = (matrix(indexer.wq_b), indexer.n_heads, indexer.head_dim) if self.shared_rope \
            else (None, 0, 0)
        self.sink, self.scale = attn.attn_sink, attn.scale
        #: Some projection is kept packed: the kernel-op steps of :func:`_front_packed` / :func:`_back_packed` run
        #: instead of ``attn_front`` / ``attn_back`` (which take float32 matrices).
        self.packed = self.fused.packed or any(is_packed(matrix(m)) for m in (attn.wq_b, attn.wo_a, attn.wo_b)) or (
            indexer is not None and is_packed(matrix(indexer.wq_b)))
        self.back = (attn.wo_a.weight, attn.o_groups, attn.wo_b.weight) if not self.packed else None
        self.back_packed = (group_matrices(attn.wo_a), matrix(attn.wo_b)) if self.packed else None


def attention(attn, x: torch.Tensor, layout: StepLayout, pool, plan: AttentionPlan) -> torch.Tensor:
    """``DeepseekV4Attention`` for all new tokens of a step: ``x`` ``[T, hidden]`` -> ``[T, hidden]``.

    One fused product for every input projection; ``ops.attn_front`` (norms, query projection, RoPE, the
    stores into the paged pools); the compressors and the indexer; ``ops.sink_attention_paged`` reading
    the keys in place; ``ops.attn_back`` (inverse RoPE, grouped output projection). ``plan``: the module's
    :class:`AttentionPlan`.
    """
    p = plan
    lp = pool.layers[p.layer_idx]
    c, s = layout.rope_tables(p.rope, x.dtype)
    y = p.fused.full(x)
    comp, indexer = p.comp, p.indexer
    copy_pools = []
    if comp is not None:
        copy_pools += [lp.comp_kv, lp.comp_gate]
    if indexer is not None:
        copy_pools += [lp.idx_kv, lp.idx_gate]
    front = _front_packed if p.packed else ops.attn_front
    q_latent, q, qi = front(y, *p.front, c, s, layout.slots, lp.kv, p.copy_offsets, copy_pools, *p.front_indexer)
    entry_pool = entry_slots = entry_visible = threshold = None
    if comp is not None:
        _compress(comp, None, None, layout, (lp.comp_kv, lp.comp_gate, lp.entries), read=False)
        info = layout.rate_info(p.comp_rate)
        entry_pool, entry_slots = lp.entries, info["entry_slots"]
        if indexer is not None:
            a, b = p.head_weights
            entry_visible = _index(indexer, (None, None, y[:, a:b]), q_latent, layout,
                                   (lp.idx_kv, lp.idx_gate, lp.idx_entries), q_rotated=qi if p.shared_rope else None)
        else:
            threshold = info["threshold"]
    core = ops.sink_attention_paged(layout.pad(q), lp.kv, layout.key_slots, layout.window_visible, p.sink,
                                    p.scale, entry_pool, entry_slots, entry_visible, threshold)
    ci, si = layout.rope_tables(p.rope, x.dtype, inverse=True)
    if p.packed:
        return _back_packed(layout.unpad(core).contiguous(), ci, si, *p.back_packed)
    return ops.attn_back(layout.unpad(core).contiguous(), ci, si, *p.back)


def _front_packed(proj, q_norm_w, q_eps, wq_b, n_heads, head_dim, head_eps, kv_norm_w, kv_eps, c, s, slots, kv_pool,
                  copy_offsets, copy_pools, idx_wq_b, idx_heads, idx_dim):
    """``ops.attn_front``'s steps (its reference, ``attn_front_reference``) as kernel ops, with the query
    up-projections ``wq_b`` / ``idx_wq_b`` float or packed."""
    t, qa = proj.shape[0], q_norm_w.shape[0]
    q_latent = ops.rms_norm(proj[:, :qa], q_norm_w, q_eps)
    q = ops.rope(ops.rms_norm(product(q_latent, wq_b).view(t, n_heads, head_dim), None, head_eps), c, s)
    kv = ops.rope(ops.rms_norm(proj[:, qa:qa + head_dim], kv_norm_w, kv_eps), c, s)
    write_rows(kv_pool, slots, kv)
    for off, pool in zip(copy_offsets, copy_pools):
        write_rows(pool, slots, proj[:, off:off + pool.shape[-1]])
    qi = proj.new_empty(0) if idx_wq_b is None else ops.rope(product(q_latent, idx_wq_b).view(t, idx_heads, idx_dim),
                                                             c, s)
    return q_latent, q, qi


def _back_packed(x: torch.Tensor, c: torch.Tensor, s: torch.Tensor, wo_a_groups: list, wo_b) -> torch.Tensor:
    """``ops.attn_back``'s steps with the grouped output projection's groups and ``wo_b`` float or packed."""
    out = ops.rope(x, c, s).reshape(x.shape[0], len(wo_a_groups), -1)
    return product(torch.cat([product(out[:, g], w) for g, w in enumerate(wo_a_groups)], dim=-1), wo_b)
