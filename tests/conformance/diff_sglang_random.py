"""Live differential of the SGLang call list: our package against the official one, random cases.

    python tests/conformance/diff_sglang_random.py N [SEED]

Draws N cases with `sglang_cases.random_cases` (output IDs built with our tokenizer), runs
`sglang_calls.py` on them inside the official venv and in this interpreter, and prints every
case whose records differ, by kind: prompt cases must never differ; stream cases may differ only
as `test_sglang_conformance.difference_kind` allows (documented deviations, or delta boundaries
with the same joined output).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "python"))


def main(argv):
    import deepseek_recipe as dr
    from encoding_spec import tokenizer_path
    from official_venv import ensure_official_venv
    from sglang_calls import run_cases
    from sglang_cases import id_maps, random_cases
    from test_sglang_conformance import _diff, difference_kind, merged

    n = int(argv[0]) if argv else 200
    seed = int(argv[1]) if len(argv) > 1 else 1
    stock_path = tokenizer_path()
    stock = Path(stock_path).read_text(encoding="utf-8")
    full, plain = id_maps(dr, stock)
    cases = random_cases(seed, n, full, plain)
    python = ensure_official_venv()
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "cases.json", Path(tmp) / "out.json"
        inp.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
        subprocess.run([str(python), str(HERE / "sglang_calls.py"), str(inp), stock_path, str(out)], check=True)
        expected = json.loads(out.read_text(encoding="utf-8"))
    ours = run_cases(dr, cases, stock)
    kinds, bad = Counter(), 0
    for case, want, got in zip(cases, expected, ours):
        mismatch = _diff(want, got)
        if mismatch is None:
            kinds["same"] += 1
            continue
        kind = "prompt" if case["kind"] == "encode" else difference_kind(case)
        if kind == "delta_boundaries" and merged(want) != merged(got):
            kind = "delta_boundaries_changed_output"
        kinds[kind] += 1
        if kind in ("prompt", "delta_boundaries_changed_output"):
            bad += 1
            print(case["name"], kind, mismatch)
            print("   ", json.dumps(case.get("body") or case.get("feeds"), ensure_ascii=False)[:600])
    print(dict(kinds))
    print(f"{bad} unexplained difference(s) in {n} cases (seed {seed})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
