"""A short seeded run of the random stream differential, recorded from the official package.

tests/conformance/stream/random.json holds random cases (stream_random.py) with the official
output, written by `diff_stream_random.py --fixture`. Each is replayed here the way the
differential does it: generators built from converted requests, then the same pushes.
"""

import json

import deepseek_recipe as dr
import pytest
from generate_stream import official_generator  # noqa: E402  (path set by stream_support)
from stream_replay import replay  # noqa: E402
from stream_support import FIXTURES, describe_difference, tokenizer


def cases():
    return json.loads((FIXTURES / "random.json").read_text())


def test_random_streams_match_official():
    all_cases = cases()
    assert len(all_cases) >= 200
    failures = []
    for case in all_cases:
        got = replay(dr, case, official_generator(dr, case["generator"]), tokenizer())
        if any(got[k] != case["expected"].get(k) for k in got):
            failures.append(describe_difference(case, got))
    assert not failures, f"{len(failures)} of {len(all_cases)} streams differ:\n" + "\n\n".join(failures[:5])


@pytest.mark.parametrize("fmt", ["chat", "responses", "messages"])
def test_random_fixture_covers_every_generator_and_input(fmt):
    mine = [c for c in cases() if c["generator"]["format"] == fmt]
    assert any(c["tokenizer"] for c in mine) and any(not c["tokenizer"] for c in mine)
    assert any(len(c["input"]) > 5 for c in mine)
