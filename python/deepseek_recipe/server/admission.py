"""Admission control: a bounded queue of requests and of their prompt tokens.

A request is *queued* from the moment it is admitted until its first chunk arrives from the
backend (or it fails); a streaming request is *running* after that and no longer counts. The
request bound is checked when a request arrives, before its body is converted and encoded; the
token bound once its prompt is encoded, before it reaches the backend. A request that finds the
queue empty is admitted whatever its prompt size (the context length bounds it then), so a long
prompt is never refused forever. Everything runs on the event loop: no locks.
"""

from __future__ import annotations

from .errors import overloaded


class AdmissionQueue:
    """Counts queued requests and prompt tokens against their bounds."""

    def __init__(self, max_requests: int, max_tokens: int, retry_after_s: int) -> None:
        self.max_requests = max_requests
        self.max_tokens = max_tokens
        self.retry_after_s = retry_after_s
        self.requests = 0
        self.tokens = 0
        self.rejected = 0

    def admit(self) -> Ticket:
        """Take one queue place; ``APIError`` (overloaded) when none is free."""
        if self.requests >= self.max_requests:
            self.rejected += 1
            raise overloaded(f"the server's queue is full ({self.max_requests} requests waiting); retry later",
                             self.retry_after_s)
        self.requests += 1
        return Ticket(self)


class Ticket:
    """One request's places in the queue; ``release`` (idempotent) gives them back."""

    def __init__(self, queue: AdmissionQueue) -> None:
        self.queue = queue
        self.requests = 1
        self.tokens = 0

    def add(self, prompt_tokens: int, choices: int = 1) -> None:
        """Count the encoded prompt (and the extra choices of ``n > 1``) before submission."""
        q = self.queue
        extra = max(choices - 1, 0)
        alone = q.requests == self.requests and q.tokens == self.tokens
        if not alone and (q.tokens + prompt_tokens > q.max_tokens or q.requests + extra > q.max_requests):
            q.rejected += 1
            self.release()
            raise overloaded(f"the server's queue is full ({q.tokens} prompt tokens waiting, at most "
                             f"{q.max_tokens}); retry later", q.retry_after_s)
        q.requests += extra
        q.tokens += prompt_tokens
        self.requests += extra
        self.tokens += prompt_tokens

    def release(self) -> None:
        self.queue.requests -= self.requests
        self.queue.tokens -= self.tokens
        self.requests = self.tokens = 0
