"""One-off: rewrite the expected `conversation` of `conversion/cases.json` from the former
hand-written dump layout into the canonical conversation JSON (docs/conversation-json.md), as
`conversion_case_runner.dump_conversation` now records it. Nothing else in the file changes;
the file keeps its member order (request bodies are inputs whose member order matters) and is
written by `fixture_json.write`.

Run once from the repository root: `python tests/conformance/canonicalize_conversion_fixture.py`.
Running it again on an already converted file changes nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixture_json import write  # noqa: E402

FIXTURE = Path(__file__).resolve().parent / "conversion" / "cases.json"


def _image(old):
    if isinstance(old, dict):
        return old
    kind, detail, data_url, url, path = old
    if kind == "bytes":
        raise SystemExit("a bytes image was recorded without its bytes; re-record with generate_conversion.py")
    return {"kind": kind, "value": data_url if kind == "data_url" else url, "detail": detail, "path": path}


def _message(old):
    m = dict(old)
    role = m["role"]
    if "images" in m:
        m["image_sources"] = [_image(i) for i in m.pop("images")]
    if role == "assistant" and m.get("tool_calls") is not None:
        m["tool_calls"] = [c if isinstance(c, dict) else {"id": c[0], "name": c[1], "arguments": c[2]}
                           for c in m["tool_calls"]]
    order = {"system": ["role", "content", "image_sources", "tools"],
             "user": ["role", "content", "image_sources"],
             "assistant": ["role", "content", "reasoning_content", "tool_calls", "prefix"],
             "tool": ["role", "content", "tool_call_id", "image_sources"]}.get(role, ["role", "content"])
    assert set(order) == set(m), (role, sorted(m))
    return {k: m[k] for k in order}


def canonical(old):
    order = ["messages", "thinking_mode", "tools", "tool_choice", "reasoning_effort", "response_format",
             "response_schema", "response_regex"]
    c = dict(old, messages=[_message(m) for m in old["messages"]])
    assert set(order) == set(c), sorted(c)
    return {k: c[k] for k in order}


def main() -> int:
    cases = json.loads(FIXTURE.read_text(encoding="utf-8"))
    n = 0
    for case in cases:
        exp = case["expected"]
        if "conversation" in exp:
            exp["conversation"] = canonical(exp["conversation"])
            n += 1
    write(FIXTURE, cases)
    print(f"{n} conversations in canonical layout -> {FIXTURE.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
