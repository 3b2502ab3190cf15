"""Shared set-up for the integration tests: this folder's helpers and the real tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def sys_tokenizer():
    """The stock tokenizer plus `<｜System｜>` as id 129280 (as in the conformance tests)."""
    import deepseek_recipe as dr
    from encoding_spec import system_tokenizer_json, tokenizer_path

    return dr.Tokenizer.from_str(system_tokenizer_json(Path(tokenizer_path()).read_text(encoding="utf-8")))
