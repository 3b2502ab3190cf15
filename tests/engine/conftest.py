"""Fixtures shared by the engine tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_v4_checkpoint(tmp_path_factory):
    """The tiny random V4 checkpoint with the real 129280-token vocabulary (``ensure_tiny_checkpoint``,
    needs ``transformers``), written once per test session."""
    from deepseek_engine.testing.tiny_checkpoint import ensure_tiny_checkpoint

    return ensure_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny-v4")
