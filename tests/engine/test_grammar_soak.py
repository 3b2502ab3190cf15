"""A small run of the structured-output soak (``soak_grammar.py``) in CI: constrained generation from the tiny
random V4 and V4.1 checkpoints, every tool-choice mode and JSON answers, thinking on and off, with and without
speculation, max_tokens tight enough that the closing planner must end most outputs. Every output must come out
in its required shape and re-parse identically under other chunkings."""

from __future__ import annotations

import soak_grammar


def test_soak_smoke(tmp_path, capsys, tiny_v4_checkpoint):
    # the session's tiny V4 checkpoint is the soak's V4 base (the same seed and sizes), so it is not written twice
    (tmp_path / "tiny-deepseek-v4").symlink_to(tiny_v4_checkpoint, target_is_directory=True)
    status = soak_grammar.main(["--requests", "20", "--seed", "11", "--max-tokens", "120", "--cuts", "1",
                                "--cache", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "20 / 20 requests in the required shape" in out
