"""Token backends over an existing fleet: a vLLM 0.33 ``--tokens-only`` server or an SGLang 0.5.23
server, spoken to over HTTP (token IDs in, token IDs out; the front end does all protocol work)."""

from __future__ import annotations

from .http_backend import HttpTokenBackend
from .sglang import SglangBackend
from .vllm import VllmBackend

KINDS = {"vllm": VllmBackend, "sglang": SglangBackend}


def make_fleet_backend(spec: str, model_name: str | None = None) -> HttpTokenBackend:
    """``vllm=URL`` or ``sglang=URL`` -> the backend for that server."""
    kind, sep, url = spec.partition("=")
    if not sep or kind not in KINDS or not url:
        raise ValueError(f"--backend must be vllm=URL or sglang=URL, not {spec!r}")
    return KINDS[kind](url, model_name=model_name)


__all__ = ["HttpTokenBackend", "SglangBackend", "VllmBackend", "make_fleet_backend", "KINDS"]
