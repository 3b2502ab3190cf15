"""Record what the official package returns for the calls SGLang 0.5.23 makes.

Run with any Python 3.9+: the script re-runs itself inside the side venv that holds the official
`deepseek-recipe==0.2.0` (see `official_venv.py`), builds the cases of `sglang_cases.py` (the
hand-written corpus plus `RANDOM_CASES` seeded ones), runs them through `sglang_calls.py` and
writes `tests/conformance/sglang/cases.json`: every case with its `expected` record.
`tests/python/test_sglang_conformance.py` replays them through our package.

`--known` (run with our package's interpreter, no side venv) rewrites
`sglang/known_differences.json`, the streams where ours differs, after a deliberate change to the
stream processor; the test then checks every listed stream differs only as its kind allows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

OUT = HERE / "sglang" / "cases.json"
RANDOM_SEED = 13
RANDOM_CASES = 240


def build_and_run(dr, stock_json):
    from sglang_calls import run_cases
    from sglang_cases import fixed_cases, id_maps, random_cases

    full, plain = id_maps(dr, stock_json)
    cases = fixed_cases(full, plain) + random_cases(RANDOM_SEED, RANDOM_CASES, full, plain)
    for case, record in zip(cases, run_cases(dr, cases, stock_json)):
        case["expected"] = record
    return cases


def write_known_differences():
    import deepseek_recipe as dr
    from encoding_spec import tokenizer_path
    from sglang_calls import run_cases

    sys.path.insert(0, str(HERE.parent / "python"))
    from test_sglang_conformance import _diff, difference_kind

    cases = json.loads(OUT.read_text(encoding="utf-8"))
    records = run_cases(dr, cases, Path(tokenizer_path()).read_text(encoding="utf-8"))
    known = {c["name"]: difference_kind(c) for c, r in zip(cases, records) if _diff(c["expected"], r)}
    (OUT.parent / "known_differences.json").write_text(json.dumps(known, indent=1, sort_keys=True) + "\n",
                                                       encoding="utf-8")
    print(f"known_differences.json: {len(known)} streams")


def main():
    if "--known" in sys.argv:
        write_known_differences()
        return
    if "--inside" not in sys.argv:
        from official_venv import run_in_official
        run_in_official(__file__, "--inside", capture=False)
        return
    import deepseek_recipe as dr
    from encoding_spec import tokenizer_path

    stock = Path(tokenizer_path()).read_text(encoding="utf-8")
    cases = build_and_run(dr, stock)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")) for c in cases))
        f.write("\n]\n")
    print(f"{OUT.name}: {len(cases)} cases")


if __name__ == "__main__":
    main()
