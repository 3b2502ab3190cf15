"""Request conversion must match the outcomes recorded from the official package.

The fixtures (`tests/conformance/conversion/cases.json`) come from
`tests/conformance/generate_conversion.py`; both sides are described by the same
`conversion_case_runner.run_case`, here applied to our `deepseek_recipe`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import deepseek_recipe as d
import fixture_json
import pytest
from conversion_case_runner import run_case

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"

CASES = json.loads((CONFORMANCE / "conversion" / "cases.json").read_text())


def _diff(expected, actual, path="$"):
    """First differences between two JSON values, as readable lines."""
    out = []
    if isinstance(expected, dict) and isinstance(actual, dict):
        for k in sorted(set(expected) | set(actual)):
            if k not in actual:
                out.append(f"{path}.{k}: missing (expected {expected[k]!r:.200})")
            elif k not in expected:
                out.append(f"{path}.{k}: unexpected {actual[k]!r:.200}")
            else:
                out += _diff(expected[k], actual[k], f"{path}.{k}")
    elif isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for i, (a, b) in enumerate(zip(expected, actual)):
            out += _diff(a, b, f"{path}[{i}]")
    elif expected != actual:
        out.append(f"{path}: expected {expected!r:.300} got {actual!r:.300}")
    return out


def test_fixture_counts():
    assert len(CASES) >= 200
    assert sum(c["expected"]["outcome"] != "ok" for c in CASES) >= 80
    assert {c["format"] for c in CASES} == {"chat", "responses", "messages"}


_UNANSWERED = re.compile(r"No tool output found for tool call [^.\"]*\.")


def _normalised(outcome):
    """With several unanswered calls the official package names a random one of them
    (docs/conversion-deviations.md), so that message is compared without the call ID. The
    fixture's `prompt_marked` is a review aid derived from the prompt and its ranges
    (fixture_json.py, checked by test_fixture_layout.py), not a result, so it is left out."""
    text = json.dumps(fixture_json.recorded(outcome), ensure_ascii=False)
    return json.loads(_UNANSWERED.sub("No tool output found for tool call <id>.", text))


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_conversion_matches_official(case):
    actual = run_case(d, case)
    differences = _diff(_normalised(case["expected"]), _normalised(actual))
    assert not differences, "\n".join(differences[:20])
