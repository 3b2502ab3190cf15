"""Recent conversations' ``EncodingSession``s, so that an agent's next turn re-encodes only what is new.

A session is found by the conversation's opening (its messages up to and including the first user
message), which is a prefix of every later turn's prompt. A session is taken out of the cache while
a request encodes with it and put back afterwards, so two requests never share one at the same
time (the second starts a fresh session). Sharing a key between unrelated conversations costs
reuse only: ``EncodingSession.encode`` returns exactly what a cold encode would. Bounded by
``entries`` sessions, each keeping at most ``max_cached_tokens`` tokens of its last prompt, and
by ``max_bytes`` for all of them together (``EncodingSession.memory_bytes``), oldest dropped first.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

import deepseek_recipe as dr


def opening_key(conversation: Any) -> bytes:
    """A digest of the conversation's messages up to its first user message."""
    h = hashlib.blake2b(digest_size=16)
    for message in conversation.messages:
        role = str(message.role)
        h.update(role.encode())
        h.update(b"\0")
        h.update(message.content.encode())
        h.update(b"\1")
        if role == "user":
            break
    return h.digest()


class SessionCache:
    """An LRU of ``EncodingSession``s keyed by ``opening_key`` (thread-safe)."""

    def __init__(self, encoding: Any, entries: int, max_cached_tokens: int, max_bytes: int = 256 << 20) -> None:
        self.encoding = encoding
        self.entries = entries
        self.max_cached_tokens = max_cached_tokens
        self.max_bytes = max_bytes
        self.bytes = 0
        self._sessions: OrderedDict[bytes, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def encode(self, conversation: Any) -> tuple[list[int], int]:
        """The conversation's token IDs and how many of them were reused from its previous turn."""
        if self.entries <= 0:
            return list(self.encoding.encode(conversation)), 0
        key = opening_key(conversation)
        with self._lock:
            held = self._sessions.pop(key, None)
            if held is not None:
                self.bytes -= held[1]
        session = held[0] if held is not None else dr.EncodingSession(self.encoding, self.max_cached_tokens)
        ids = session.encode(conversation)
        reused = session.last_turn.reused_tokens
        size = session.memory_bytes
        with self._lock:
            if size <= self.max_bytes:
                old = self._sessions.pop(key, None)  # another request's session for the same opening
                if old is not None:
                    self.bytes -= old[1]
                self._sessions[key] = (session, size)
                self.bytes += size
            while self._sessions and (len(self._sessions) > self.entries or self.bytes > self.max_bytes):
                _, (_, dropped) = self._sessions.popitem(last=False)
                self.bytes -= dropped
        return ids, reused
