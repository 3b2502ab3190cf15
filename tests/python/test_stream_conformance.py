"""Every committed official stream fixture must come out identical through our package."""

import pytest
from stream_support import describe_difference, load, run_case


@pytest.mark.parametrize("fmt", ["chat", "responses", "messages"])
def test_fixtures_match_official(fmt):
    cases = load(fmt)
    assert len(cases) >= 150
    failures = []
    for case in cases:
        got = run_case(case)
        if any(got[k] != case["expected"].get(k) for k in got):
            failures.append(describe_difference(case, got))
    assert not failures, f"{len(failures)} of {len(cases)} streams differ:\n" + "\n\n".join(failures[:5])
