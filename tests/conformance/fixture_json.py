"""How recorded fixtures are written: pretty JSON with one value per line, so a re-recorded
fixture shows as a readable line diff in review (`ensure_ascii=False` keeps control-token
spellings such as `<｜User｜>` readable instead of escaped).

Keys keep their recorded order rather than being sorted: inputs such as tool schemas are rendered
in their key order, so sorting would change what the fixture asks for. Recording is
deterministic, so the order is stable between re-recordings."""

from __future__ import annotations

import json
from pathlib import Path


def dumps(value) -> str:
    """The fixture text of `value`."""
    return json.dumps(value, ensure_ascii=False, indent=1) + "\n"


def write(path: str | Path, value) -> None:
    """Write `value` to `path` as a fixture."""
    Path(path).write_text(dumps(value), encoding="utf-8")


if __name__ == "__main__":
    # Rewrite existing fixture files in this layout (their content is unchanged).
    import sys

    for name in sys.argv[1:]:
        write(name, json.loads(Path(name).read_text(encoding="utf-8")))
