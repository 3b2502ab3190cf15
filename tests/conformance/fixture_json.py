"""How recorded fixtures are written, so a re-recorded fixture reads as a line diff in review.

* One member or element per line, indented by one space per level; lists of plain numbers (token
  IDs, ranges, logprobs) stay on one line, wrapped at about 100 characters, instead of one
  number per line.
* `ensure_ascii=False`, so control-token spellings such as `<｜User｜>` stay readable.
* Every object that records a rendered `prompt` with its `special_ranges` also gets
  `prompt_marked`: the same prompt with each special range (a real control token) between
  `⟦` and `⟧`, so a reviewer sees which `<｜User｜>` is a control token and which is text a user
  typed. It is derived from the other two when the file is written and never read by a test
  (`test_fixture_layout.py` checks that it agrees with them).

Keys keep their recorded order rather than being sorted: inputs such as tool schemas are rendered
in their key order, so sorting would change what the fixture asks for. Recording is
deterministic, so the order is stable between re-recordings."""

from __future__ import annotations

import json
from pathlib import Path

#: Wrap width of inline number lists.
WIDTH = 100
OPEN, CLOSE = "⟦", "⟧"


def mark_prompt(prompt: str, ranges: list) -> str:
    """`prompt` with each `[start, end)` character range of `ranges` between ⟦ and ⟧."""
    out, pos = [], 0
    for start, end in sorted(ranges):
        out += [prompt[pos:start], OPEN, prompt[start:end], CLOSE]
        pos = end
    out.append(prompt[pos:])
    return "".join(out)


def _with_marked_prompts(value):
    if isinstance(value, list):
        return [_with_marked_prompts(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for k, v in value.items():
        if k == "prompt_marked":
            continue
        out[k] = _with_marked_prompts(v)
        if k == "special_ranges" and isinstance(value.get("prompt"), str) and isinstance(v, list):
            out["prompt_marked"] = mark_prompt(value["prompt"], v)
    return out


def recorded(value):
    """`value` without the review-only `prompt_marked` members: what was actually recorded."""
    if isinstance(value, list):
        return [recorded(v) for v in value]
    if isinstance(value, dict):
        return {k: recorded(v) for k, v in value.items() if k != "prompt_marked"}
    return value


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _dump(value, depth: int) -> str:
    pad, inner = " " * depth, " " * (depth + 1)
    if isinstance(value, dict) and value:
        members = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {_dump(v, depth + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(members) + "\n" + pad + "}"
    if isinstance(value, list) and value:
        if all(_is_number(v) for v in value):
            items = [json.dumps(v) for v in value]
            one_line = "[" + ", ".join(items) + "]"
            if len(one_line) + depth <= WIDTH:
                return one_line
            rows, row = [], []
            for item in items:
                if row and len(inner) + len(", ".join([*row, item])) > WIDTH:
                    rows.append(", ".join(row))
                    row = []
                row.append(item)
            rows.append(", ".join(row))
            return "[\n" + ",\n".join(inner + r for r in rows) + "\n" + pad + "]"
        return "[\n" + ",\n".join(inner + _dump(v, depth + 1) for v in value) + "\n" + pad + "]"
    return json.dumps(value, ensure_ascii=False)


def dumps(value) -> str:
    """The fixture text of `value`."""
    return _dump(_with_marked_prompts(value), 0) + "\n"


def write(path: str | Path, value) -> None:
    """Write `value` to `path` as a fixture."""
    Path(path).write_text(dumps(value), encoding="utf-8")


if __name__ == "__main__":
    # Rewrite existing fixture files in this layout (their recorded content is unchanged).
    import sys

    for name in sys.argv[1:]:
        write(name, json.loads(Path(name).read_text(encoding="utf-8")))
