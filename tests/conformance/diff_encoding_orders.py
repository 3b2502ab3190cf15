"""Differential check of tool-result ordering against the official package (not part of the suite).

    python tests/conformance/diff_encoding_orders.py [N] [SEED]

Builds N random "scrambled" message orders (users, reminders, systems, assistants with 0-4 calls
whose IDs are not in sorted order, tool results with known, unknown, duplicated or missing IDs),
renders them with the official package (side venv) and with ours, and prints the V4 / V4.1
prompt mismatches.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def specs(n: int, seed: int):
    rng = random.Random(seed)
    out = []
    for k in range(n):
        msgs = [{"role": "user", "content": "m0"}]
        for _ in range(rng.randint(2, 10)):
            kind = rng.choice("UUTTTAALS")
            c = f"m{len(msgs)}"
            if kind == "U":
                msgs.append({"role": "user", "content": c})
            elif kind == "T":
                msgs.append({"role": "tool", "content": c, "tool_call_id": rng.choice([None, "c0", "c1", "c2", "c3", "zz", "c1"])})
            elif kind == "A":
                ids = rng.sample(range(6), rng.choice([0, 1, 2, 2, 3, 4]))
                calls = [{"id": f"c{i}", "name": "f", "arguments": "{}"} for i in ids] or None
                msgs.append({"role": "assistant", "content": c, "tool_calls": calls})
            elif kind == "L":
                msgs.append({"role": "latest_reminder", "content": c})
            else:
                msgs.append({"role": "system", "content": c})
        out.append({"name": f"scrambled_{k}", "conversation": {"messages": msgs, "thinking_mode": rng.random() < 0.5},
                    "special_tokens": None})
    return out


def record(path: str) -> None:
    import deepseek_recipe as dr
    from encoding_spec import build_conversation, build_encodings

    res = []
    for spec in json.loads(Path(path).read_text(encoding="utf-8")):
        conv = build_conversation(dr, spec["conversation"])
        row = {}
        for name, enc in build_encodings(dr, None).items():
            try:
                row[name] = enc.render_conversation(conv).prompt
            except BaseException as e:  # noqa: BLE001
                row[name] = f"error: {type(e).__name__}"
        res.append(row)
    print(json.dumps(res, ensure_ascii=False))


def main(argv):
    if argv and argv[0] == "--record":
        record(argv[1])
        return 0
    n = int(argv[0]) if argv else 500
    seed = int(argv[1]) if len(argv) > 1 else 1
    from official_venv import run_in_official
    sp = specs(n, seed)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(sp, f)
    official = json.loads(run_in_official(__file__, "--record", f.name).stdout)
    res = run_ours(f.name)
    bad = {"v4": 0, "v41": 0}
    for spec, want, got in zip(sp, official, res):
        for enc in bad:
            if want[enc] != got[enc]:
                bad[enc] += 1
                if bad[enc] <= 3:
                    print(enc, spec["conversation"]["messages"], "\n  official", want[enc], "\n  ours    ", got[enc])
    print(f"{n} scrambled orders: V4 mismatches {bad['v4']}, V4.1 mismatches {bad['v41']}")
    return 1 if any(bad.values()) else 0


def run_ours(path):
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        record(path)
    return json.loads(buf.getvalue())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
