"""The ``deepseek-engine`` command: ``deepseek-engine serve MODEL_DIR ...`` runs the HTTP server
(``serve``); anything else is a batch file run (``batch_cli``: ``deepseek-engine MODEL_DIR INPUT.jsonl
OUTPUT.jsonl``)."""

from __future__ import annotations

import sys

USAGE = """usage: deepseek-engine MODEL_DIR INPUT.jsonl OUTPUT.jsonl [options]   run a batch file
       deepseek-engine serve MODEL_DIR [options]                     serve HTTP (OpenAI / Anthropic APIs)
"""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["serve"]:
        from deepseek_engine.entrypoints.serve import main as serve

        return serve(argv[1:])
    if argv[:1] in (["-h"], ["--help"]):
        print(USAGE)
    from deepseek_engine.entrypoints.batch_cli import main as batch

    return batch(argv)


if __name__ == "__main__":
    sys.exit(main())
