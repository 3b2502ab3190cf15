"""Every committed official stream fixture must come out identical through our package."""

import json

import pytest
from stream_support import describe_difference, load, run_case


def first_key_order_difference(got: list, expected: list) -> str | None:
    """The first equal item whose keys come in another order (JSON text keeps the order)."""
    for ours, official in zip((i for p in got for i in p), (i for p in expected for i in p)):
        if ours == official and json.dumps(ours) != json.dumps(official):
            return f"  ours:     {json.dumps(ours)[:500]}\n  official: {json.dumps(official)[:500]}"
    return None


@pytest.mark.parametrize("fmt", ["chat", "responses", "messages"])
def test_fixtures_match_official(fmt):
    cases = load(fmt)
    assert len(cases) >= 150
    failures = []
    for case in cases:
        got = run_case(case)
        if any(got[k] != case["expected"].get(k) for k in got):
            failures.append(describe_difference(case, got))
            continue
        exp = case["expected"]
        order = first_key_order_difference(got["pushes"] + [[got["response"]]],
                                           exp["pushes"] + [[exp["response"]]])
        if order:
            failures.append(f"stream {case['name']} writes keys in another order:\n{order}")
    assert not failures, f"{len(failures)} of {len(cases)} streams differ:\n" + "\n\n".join(failures[:5])
