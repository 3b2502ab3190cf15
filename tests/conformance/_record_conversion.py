"""Inside the official venv: convert each input case and write the outcomes (used by
generate_conversion.py)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import deepseek_recipe as d  # noqa: E402  (the official package, in its side venv)
from conversion_case_runner import run_case  # noqa: E402

cases = json.loads(Path(sys.argv[1]).read_text())
out = []
for i, case in enumerate(cases):
    case = dict(case, id=f"{case['format']}-{i:04d}")
    case["expected"] = run_case(d, case)
    out.append(case)
Path(sys.argv[2]).write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
