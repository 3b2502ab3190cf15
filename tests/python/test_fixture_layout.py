"""Recorded fixtures stay in the reviewable layout of `fixture_json` (one member per line, number
lists inline, `prompt_marked` next to every rendered prompt), so a re-recording that bypassed
the writer, or a hand edit that made `prompt_marked` disagree with the prompt, fails here."""

from __future__ import annotations

import json
from pathlib import Path

import fixture_json
import pytest

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"
# encoding/random_seeded.json keeps one ASCII-escaped case per line: its random texts hold lone
# surrogates, which UTF-8 text cannot carry.
FILES = sorted([*CONFORMANCE.glob("encoding/cases_*.json"), CONFORMANCE / "conversion" / "cases.json",
                *CONFORMANCE.glob("stream/*.json")])


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(CONFORMANCE)) for p in FILES])
def test_fixture_is_written_in_the_review_layout(path):
    text = path.read_text(encoding="utf-8")
    assert text == fixture_json.dumps(json.loads(text)), (
        f"{path.name} is not in the fixture layout; rewrite it with "
        f"`python tests/conformance/fixture_json.py {path.relative_to(CONFORMANCE.parents[1])}`")


def test_marked_prompt_shows_which_spelling_is_a_control_token():
    prompt = "<｜User｜>say <｜User｜><｜Assistant｜>"
    assert fixture_json.mark_prompt(prompt, [[0, 8], [20, 33]]) == "⟦<｜User｜>⟧say <｜User｜>⟦<｜Assistant｜>⟧"
