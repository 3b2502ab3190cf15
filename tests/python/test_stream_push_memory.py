"""Memory per push stays linear in the pushed size, in every parser state.

Each workload of stream_push_states.py (enter a parser state, then push about 1 MiB of a unit
that keeps the parser in that state) runs in a fresh interpreter, which reports the growth of its
peak RSS during the push. A parser that copies the rest of the input per unit, keeps one
allocation per unit alive or recurses per unit needs gigabytes here (one 2.6 MB push inside a
tool-call block needed more than 3.5 GB before); a linear one needs a small multiple of the
push, most of it for the protocol objects it returns.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from stream_push_states import STATES, child_code
from stream_support import tokenizer_path

SIZE = 1 << 20
# Peak RSS growth allowed for one push of SIZE bytes: the returned chunks and their JSON are a
# small multiple of the input; anything per-unit quadratic is orders of magnitude above this.
LIMIT = 48 * SIZE
# Token input can return one chunk per token: marker spellings that open no tool-call block are
# released as text token by token (the official package swallows them instead, deviation 1 in
# docs/stream-deviations.md), so each returned item may cost a protocol object of its own. Items
# never outnumber input bytes, so the bound stays linear in the push.
PER_ITEM = 512


@pytest.mark.parametrize("state", sorted(STATES))
def test_one_big_push_costs_memory_linear_in_its_size(state):
    out = subprocess.run([sys.executable, "-c", child_code(state, SIZE, tokenizer_path())],
                         check=True, capture_output=True, text=True, timeout=120).stdout.split()
    rss, items = int(out[1]), int(out[2])
    assert items >= 1
    limit = LIMIT + PER_ITEM * items
    assert items <= SIZE
    assert rss < limit, (f"{state}: one {SIZE >> 20} MiB push returning {items} items raised peak "
                         f"RSS by {rss / 2**20:.0f} MiB (limit {limit / 2**20:.0f} MiB)")
