"""Enforcing a request's output constraint: the switch the serving entry points share.

A converted request says what its output must be (``inference_options.output_constraint``: tools with any
``tool_choice`` but ``none``, ``json_object``, ``json_schema``, a regex). An entry point whose backend can
enforce it (the in-process engine: protocol API, batch CLI, HTTP server) compiles the request's
``OutputGrammar`` by default and the backend gives each generated sequence a matcher of it. Two switches
turn it off: the body field ``enforce_output_constraint: false`` (any of the three APIs) for one request,
and an entry point's ``--no-grammar`` flag for all of them.

The grammar itself is the codec's (``OutputGrammar.compile``, Rust); this module only decides whether to
compile it.
Nothing here imports torch.
"""

from __future__ import annotations

from typing import Any

from . import _native

#: The per-request switch in a request body (``false``: generate without enforcing the constraint).
ENFORCE_FIELD = "enforce_output_constraint"


def take_enforce_field(body: dict[str, Any]) -> bool:
    """Remove ``ENFORCE_FIELD`` from ``body`` (the converters never see it); its value, ``True`` when absent or
    ``null``. ``ValueError`` when it is not a boolean."""
    value = body.pop(ENFORCE_FIELD, None)
    if value is None:
        return True
    if not isinstance(value, bool):
        raise ValueError(f"`{ENFORCE_FIELD}` must be a boolean, got {type(value).__name__}")
    return value


def compile_output_grammar(request: Any, tokenizer: Any, *, thinking_budget: int | None = None) -> Any:
    """The request's ``OutputGrammar`` (``None`` when it carries no constraint); the grammar's own
    ``ValueError`` when its schema or pattern is not supported."""
    if request.inference_options.output_constraint is None:
        return None
    return _native.OutputGrammar.compile(request, tokenizer, thinking_budget=thinking_budget)
