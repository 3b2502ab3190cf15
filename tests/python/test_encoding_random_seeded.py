"""A short seeded run of the random encoding differential (`diff_encoding_random.py`), replayed
from the official results recorded in `tests/conformance/encoding/random_seeded.json`: random
conversations (every added-token spelling of the real tokenizer typed into their text fields,
images, tools, overrides, broken call trees) give the same construction errors, read-back
values, prompts, special ranges, image sources and token IDs as the official package."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"
sys.path.insert(0, str(CONFORMANCE))
import diff_encoding_random as harness  # noqa: E402
import fixture_json  # noqa: E402

FIXTURE = json.loads((CONFORMANCE / "encoding" / "random_seeded.json").read_text(encoding="utf-8"))


def test_the_draw_is_the_recorded_one():
    # The generator is deterministic: the recorded cases are what it draws today.
    assert harness.draw(FIXTURE["n"], FIXTURE["seed"]) == FIXTURE["cases"]


def test_seeded_cases_match_the_official_package(tmp_path):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(FIXTURE["cases"]), encoding="utf-8")
    ours = harness.run_ours(str(path))
    bad = []
    for case, want, got in zip(FIXTURE["cases"], fixture_json.recorded(FIXTURE["official"]), ours):
        if want == got or (harness.has_panic(want) and not harness.has_panic(got)):
            continue  # official panics are a documented deviation (docs/encoding-deviations.md)
        bad.append(f"{case['name']}: {harness.classify(want, got)}")
    if bad:
        pytest.fail(f"{len(bad)} of {len(ours)} differ: " + "; ".join(bad[:10]))
