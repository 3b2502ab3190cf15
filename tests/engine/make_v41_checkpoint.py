"""Write the committed tiny DeepSeek V4.1 checkpoint ``tests/engine/data/tiny_v41``.

    .venv/bin/python tests/engine/make_v41_checkpoint.py

Seeded (``seed=0``): rerunning writes the same files. The checkpoint is built by
``deepseek_engine.testing.tiny_checkpoint_v41`` (vocabulary 1024, a word-level
``tokenizer.json``); the tests build its quantised twin and the 129280-token
variant in temporary folders from the same code.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from deepseek_engine.testing.tiny_checkpoint_v41 import write_tiny_v41

DATA = Path(__file__).resolve().parent / "data"

if __name__ == "__main__":
    target = DATA / "tiny_v41"
    shutil.rmtree(target, ignore_errors=True)
    write_tiny_v41(target, vocab_size=1024, seed=0)
    print("wrote", target)
