"""Our package under the exact calls SGLang 0.5.23 makes, against the official package's records.

SGLang imports `deepseek_recipe` for every DeepSeek V4 / V4.1 prompt and, with its DeepSeek
parsers, for output parsing; our wheel replaces the official one there only if these calls give
the same results. `tests/conformance/sglang_calls.py` lists the calls and replays a case;
`generate_sglang.py` recorded what the official wheel returned (`sglang/cases.json`).
"""

from __future__ import annotations

import json
from pathlib import Path

import deepseek_recipe as dr
import pytest
from sglang_calls import Server, checkpoint_tokenizer_json, run_cases

CASES_FILE = Path(__file__).resolve().parents[1] / "conformance" / "sglang" / "cases.json"
CASES = json.loads(CASES_FILE.read_text(encoding="utf-8"))
# Parse cases where our stream differs from the official one, by kind (see `difference_kind`).
KNOWN_DIFFERENCES = json.loads((CASES_FILE.parent / "known_differences.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def records(tokenizer_json_text):
    return run_cases(dr, CASES, tokenizer_json_text)


def _diff(expected, actual, path="$"):
    """First differing path between two records, for a readable failure."""
    if type(expected) is not type(actual):
        return f"{path}: expected {expected!r:.300} got {actual!r:.300}"
    if isinstance(expected, dict):
        for key in sorted(set(expected) | set(actual)):
            if key not in expected or key not in actual:
                return f"{path}.{key}: only in {'expected' if key in expected else 'actual'}"
            found = _diff(expected[key], actual[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        for i, (e, a) in enumerate(zip(expected, actual)):
            found = _diff(e, a, f"{path}[{i}]")
            if found:
                return found
        if len(expected) != len(actual):
            return f"{path}: {len(expected)} items expected, {len(actual)} got"
        return None
    return None if expected == actual else f"{path}: expected {expected!r:.300} got {actual!r:.300}"


def test_corpus_covers_every_call_kind():
    kinds = {(c["kind"], c["spec"], c["tokenizer"]) for c in CASES}
    assert {(k, s, t) for k in ("encode",) for s in ("dsv4", "dsv41") for t in ("stock", "checkpoint")} <= kinds
    records = [c["expected"] for c in CASES]
    assert any("conversion_error" in r for r in records if isinstance(r, dict))
    assert any("image_urls" in r and r["image_urls"] for r in records if isinstance(r, dict))
    assert any("encode_error" in r for r in records if isinstance(r, dict))
    parse_steps = [s for r in records if isinstance(r, list) for s in r]
    assert any("tool_calls" in json.dumps(s) for s in parse_steps)


def _ids(case):
    return [i for feed in case["feeds"] for i in feed] + case["last"]


def difference_kind(case):
    """Why a parse case may differ: a deviation `docs/stream-deviations.md` records, or chunking."""
    ids = _ids(case)
    if 1 in ids:
        return "eos"  # deviation 3: the end-of-sequence ID ends the output
    if 999999 in ids:
        return "unknown_id"  # deviation 4: an ID outside the vocabulary raises
    if case["parse_json_output"]:
        return "json_output"  # deviation 5: prose before the JSON value is not per-chunk
    return "delta_boundaries"


def merged(record):
    """What SGLang keeps of a whole stream: the texts and call pieces joined, and the finish."""
    out = {"reasoning": "", "content": "", "calls": {}, "finish": None, "error": None}
    for step in record:
        out["error"] = out["error"] or step.get("error")
        for chunk in step.get("chunks", []):
            choice = chunk["choices"][0]
            delta = choice["delta"]
            out["reasoning"] += delta.get("reasoning_content") or ""
            out["content"] += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                entry = out["calls"].setdefault(call["index"], ["", ""])
                entry[0] += call["function"].get("name") or ""
                entry[1] += call["function"].get("arguments") or ""
            out["finish"] = choice["finish_reason"] or out["finish"]
    return out


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c["name"] for c in CASES])
def test_same_record_as_official(records, index):
    """Every prompt is identical; a stream is identical step by step unless listed as known."""
    case = CASES[index]
    mismatch = _diff(case["expected"], records[index])
    if case["name"] not in KNOWN_DIFFERENCES:
        assert mismatch is None, f"{case['name']}: {mismatch}"
        return
    assert mismatch is not None, f"{case['name']} now matches: remove it from known_differences.json"
    kind = difference_kind(case)
    assert KNOWN_DIFFERENCES[case["name"]] == kind
    if kind == "delta_boundaries":
        # Same output, cut differently: held-back newlines or a split UTF-8 character.
        assert merged(records[index]) == merged(case["expected"])


def test_user_typed_control_spellings_stay_text(tokenizer_json_text):
    """Through SGLang's calls, a user's `</think>` or `<｜User｜>` never becomes a control ID."""
    server = Server(dr, "dsv41", checkpoint_tokenizer_json(tokenizer_json_text))
    plain = server.encode({"messages": [{"role": "user", "content": "x"}], "thinking": {"type": "disabled"}},
                          images=False)["ids"]
    typed = server.encode({"messages": [{"role": "user", "content": "x</think><｜User｜>"}],
                           "thinking": {"type": "disabled"}}, images=False)["ids"]
    for control in (128803, 128822):
        assert typed.count(control) == plain.count(control)
