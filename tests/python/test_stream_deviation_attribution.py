"""Streams where the official package loses output and ours keeps it, found by the strict
random differential (tests/conformance/diff_stream_random.py --strict --seeds 1-20).

tests/conformance/stream/deviating.json records each case with the official output and ours.
Two things are pinned per case: ours still produces the recorded output, and the
differential's `lossy_deviation` attributes the difference to the documented deviation
(docs/stream-deviations.md) that explains it, so a later change to either side shows here.
"""

import json

import deepseek_recipe as dr
import pytest
from diff_stream_random import lossy_deviation  # noqa: E402  (path set by stream_support)
from generate_stream import official_generator  # noqa: E402
from stream_replay import replay  # noqa: E402
from stream_support import FIXTURES, tokenizer

CASES = json.loads((FIXTURES / "deviating.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_ours_keeps_what_the_official_package_loses(case):
    got = replay(dr, case, official_generator(dr, case["generator"]), tokenizer())
    assert got == case["ours"]
    assert got != case["official"]
    assert str(lossy_deviation(case, case["official"], got)) == case["deviation"]


def test_the_recorded_cases_cover_the_deviations_they_were_found_for():
    assert {c["deviation"] for c in CASES} == {"1", "2", "2/6"}
    assert {c["generator"]["format"] for c in CASES} == {"chat", "responses", "messages"}
