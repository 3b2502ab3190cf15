"""Inside the official side venv: run every case of a spec file and write the outcomes back.

    python _record_images.py CASES.json INPUTS_DIR OFFICIAL_DIR

Each case gains an `official` entry; the WebP outputs of `keep_webp` cases go to
OFFICIAL_DIR/NAME.webp (name made file-safe).
"""

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from image_case_runner import run_case  # noqa: E402
from image_http_server import serve  # noqa: E402


def webp_name(case_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", case_name) + ".webp"


def main() -> None:
    spec_path, inputs, official = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    cases = json.loads(spec_path.read_text())
    server = serve(inputs)
    for case in cases:
        keep: dict = {}
        case["official"] = run_case(case, inputs, server, keep)
        for name, data in keep.items():
            (official / webp_name(name)).write_bytes(data)
            case["official_webp"] = webp_name(name)
    spec_path.write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
