"""Prometheus metrics of one server (text exposition format 0.0.4; no global registry).

Counters: requests by API and status, prompt / generated / cached tokens, aborted requests,
restored reasoning, session-cache reuse. Histograms: time to first token and time per output
token. Gauges (read when scraped): queue depth and queued prompt tokens (front end), running
sequences and free KV blocks (the backend's ``stats()``).
"""

from __future__ import annotations

import bisect

from .backend import BackendStats

PREFIX = "deepseek_server_"
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0)
TPOT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
                1.0, 2.5, 5.0)


class Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str) -> list[str]:
        out, total = [], 0
        for bound, n in zip(self.buckets, self.counts):
            total += n
            out.append(f'{name}_bucket{{le="{bound}"}} {total}')
        out.append(f'{name}_bucket{{le="+Inf"}} {self.count}')
        out.append(f"{name}_sum {self.sum}")
        out.append(f"{name}_count {self.count}")
        return out


class Metrics:
    """The server's counters and histograms; ``render`` adds the gauges."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.cached_tokens = 0
        self.aborted = 0
        self.restored_reasoning = 0
        self.session_reused_tokens = 0
        self.session_encoded_tokens = 0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.tpot = Histogram(TPOT_BUCKETS)

    def count_request(self, api: str, status: int) -> None:
        key = (api, status)
        self.requests[key] = self.requests.get(key, 0) + 1

    def render(self, queued_requests: int, queued_tokens: int, running: int, rejected: int,
               stats: BackendStats, healthy: bool) -> str:
        p = PREFIX
        lines: list[str] = []

        def metric(name: str, kind: str, help_: str, samples: list[str]) -> None:
            lines.append(f"# HELP {p}{name} {help_}")
            lines.append(f"# TYPE {p}{name} {kind}")
            lines.extend(samples)

        metric("requests_total", "counter", "HTTP requests by API and status.",
               [f'{p}requests_total{{api="{api}",status="{status}"}} {n}'
                for (api, status), n in sorted(self.requests.items())])
        for name, value, help_ in (
            ("prompt_tokens_total", self.prompt_tokens, "Prompt tokens of served requests."),
            ("generation_tokens_total", self.generation_tokens, "Generated tokens."),
            ("cached_tokens_total", self.cached_tokens, "Prompt tokens served from the prefix cache."),
            ("aborted_requests_total", self.aborted, "Requests aborted (client gone, stop sequence, error)."),
            ("rejected_requests_total", rejected, "Requests refused because the queue was full."),
            ("restored_reasoning_total", self.restored_reasoning,
             "Assistant turns whose dropped reasoning the server put back."),
            ("session_reused_tokens_total", self.session_reused_tokens,
             "Prompt tokens copied from a cached encoding session instead of tokenized again."),
            ("session_encoded_tokens_total", self.session_encoded_tokens, "Prompt tokens encoded."),
        ):
            metric(name, "counter", help_, [f"{p}{name} {value}"])
        metric("time_to_first_token_seconds", "histogram", "Time from arrival to the first generated token.",
               self.ttft.lines(f"{p}time_to_first_token_seconds"))
        metric("time_per_output_token_seconds", "histogram", "Time per generated token after the first.",
               self.tpot.lines(f"{p}time_per_output_token_seconds"))
        metric("queued_requests", "gauge", "Requests admitted and waiting for their first token.",
               [f"{p}queued_requests {queued_requests}"])
        metric("queued_prompt_tokens", "gauge", "Prompt tokens of the queued requests.",
               [f"{p}queued_prompt_tokens {queued_tokens}"])
        backend_running = stats.running_requests if stats.running_requests is not None else running
        metric("running_sequences", "gauge", "Sequences being generated.", [f"{p}running_sequences {backend_running}"])
        if stats.queued_requests is not None:
            metric("backend_queued_requests", "gauge", "Requests waiting in the backend's own queue.",
                   [f"{p}backend_queued_requests {stats.queued_requests}"])
        if stats.queued_prompt_tokens is not None:
            metric("backend_queued_prompt_tokens", "gauge", "Prompt tokens the backend has still to compute.",
                   [f"{p}backend_queued_prompt_tokens {stats.queued_prompt_tokens}"])
        if stats.free_kv_blocks is not None:
            metric("free_kv_blocks", "gauge", "Free KV-cache blocks.", [f"{p}free_kv_blocks {stats.free_kv_blocks}"])
        if stats.total_kv_blocks is not None:
            metric("total_kv_blocks", "gauge", "KV-cache blocks in all.",
                   [f"{p}total_kv_blocks {stats.total_kv_blocks}"])
        metric("healthy", "gauge", "1 while the backend can serve.", [f"{p}healthy {int(healthy)}"])
        for gauge, amount in sorted(stats.extra.items()):
            safe = "".join(c if c.isalnum() or c == "_" else "_" for c in gauge)
            metric(f"backend_{safe}", "gauge", f"Backend gauge {gauge}.", [f"{p}backend_{safe} {amount}"])
        return "\n".join(lines) + "\n"
