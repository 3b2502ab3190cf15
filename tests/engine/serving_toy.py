"""A tiny seeded causal LM with a paged cache, for testing the serving layer.

It follows the engine's model contract (``model(input_ids, positions, cache)``) and
also computes the same logits without any cache (``reference_logits``), so tests can
check that paging, prefix caching, chunked prefill and preemption feed the model the
right keys and values.
"""

from __future__ import annotations

import math

import torch
from deepseek_engine.llm import LLM
from torch import nn

# These models are tiny: one thread is fastest and avoids thrashing a shared 2-core box.
torch.set_num_threads(1)


class ToyKV:
    """Paged key/value storage: ``[layers, num_blocks * block_size, dim]``."""

    def __init__(self, num_layers: int, num_blocks: int, block_size: int, dim: int) -> None:
        self.k = torch.zeros(num_layers, num_blocks * block_size, dim)
        self.v = torch.zeros(num_layers, num_blocks * block_size, dim)


def row_matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w`` one row at a time, so a row's result never depends on which rows share the step (a
    batched BLAS call blocks its sum by the batch's shape): the server's tests compare log probabilities
    bit for bit between a request alone and the same request in a batch."""
    if len(x) == 0:
        return x @ w
    wt = w.T
    return torch.stack([torch.mv(wt, row) for row in x])


class ToyCausalLM(nn.Module):
    def __init__(self, vocab_size: int = 97, dim: int = 32, num_layers: int = 2, max_pos: int = 512, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.vocab_size, self.dim, self.num_layers = vocab_size, dim, num_layers

        def p(*shape, scale=1.0):
            return nn.Parameter(torch.randn(*shape, generator=g) * scale, requires_grad=False)

        self.embed = p(vocab_size, dim)
        self.pos = p(max_pos, dim, scale=0.5)
        s = 1 / math.sqrt(dim)
        self.wq = nn.ParameterList([p(dim, dim, scale=s) for _ in range(num_layers)])
        self.wk = nn.ParameterList([p(dim, dim, scale=s) for _ in range(num_layers)])
        self.wv = nn.ParameterList([p(dim, dim, scale=s) for _ in range(num_layers)])
        self.head = p(dim, vocab_size, scale=3 * s)

    def make_kv(self, num_blocks: int, block_size: int) -> ToyKV:
        return ToyKV(self.num_layers, num_blocks, block_size, self.dim)

    def _attend(self, q, k, v, q_pos, k_pos):
        scores = row_matmul(q, k.T) / math.sqrt(self.dim)
        scores = scores.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
        return row_matmul(torch.softmax(scores, dim=-1), v)

    def forward(self, input_ids, positions, cache):
        h = self.embed[input_ids] + self.pos[positions]
        for layer in range(self.num_layers):
            q, k, v = (row_matmul(h, w[layer]) for w in (self.wq, self.wk, self.wv))
            cache.kv.k[layer, cache.slot_mapping] = k
            cache.kv.v[layer, cache.slot_mapping] = v
            out = torch.empty_like(h)
            bs = cache.block_size
            for i in range(cache.num_seqs):
                a, b = cache.query_start_loc[i], cache.query_start_loc[i + 1]
                n_ctx = cache.context_lens[i]
                table = torch.tensor(cache.block_tables[i], dtype=torch.long)
                ctx_pos = torch.arange(n_ctx)
                slots = table[ctx_pos // bs] * bs + ctx_pos % bs
                out[a:b] = self._attend(q[a:b], cache.kv.k[layer, slots], cache.kv.v[layer, slots],
                                        positions[a:b], ctx_pos)
            h = h + torch.tanh(out)
        if cache.logits_indices is not None:
            h = h[cache.logits_indices]
        return row_matmul(h, self.head)

    @torch.inference_mode()
    def reference_logits(self, token_ids: list[int]) -> torch.Tensor:
        ids = torch.tensor(token_ids)
        pos = torch.arange(len(token_ids))
        h = self.embed[ids] + self.pos[pos]
        for layer in range(self.num_layers):
            q, k, v = (row_matmul(h, w[layer]) for w in (self.wq, self.wk, self.wv))
            h = h + torch.tanh(self._attend(q, k, v, pos, pos))
        return row_matmul(h, self.head)

    def reference_greedy(self, prompt: list[int], n: int) -> list[int]:
        ids = list(prompt)
        for _ in range(n):
            ids.append(int(torch.argmax(self.reference_logits(ids)[-1])))
        return ids[len(prompt):]


def toy_llm(model: ToyCausalLM | None = None, **kw) -> LLM:
    model = model or ToyCausalLM()
    kw.setdefault("max_model_len", 256)
    kw.setdefault("eos_token_id", None)
    return LLM.from_model(model, model.make_kv, vocab_size=model.vocab_size, **kw)


#: The real tokenizer's vocabulary size, and the ordinary-text token IDs a ``text_model`` prefers.
REAL_VOCAB = 129280
TEXT_IDS = (1000, 2000)


def text_model(seed: int = 0) -> ToyCausalLM:
    """A toy model with the real vocabulary whose head is zero outside ``TEXT_IDS``: its greedy answers are
    ordinary text tokens, which the real codec parses into plain answer text."""
    model = ToyCausalLM(vocab_size=REAL_VOCAB, dim=32, seed=seed)
    with torch.no_grad():
        model.head[:, : TEXT_IDS[0]] = 0
        model.head[:, TEXT_IDS[1]:] = 0
    return model

