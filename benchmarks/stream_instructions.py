"""Stream processing in instructions: ours against the official `deepseek-recipe==0.2.0`.

The same workload as benchmarks/stream.py (reasoning, content, a tool call; one token ID per
`StreamProcessor.push`), counted in executed instructions with valgrind's callgrind instead of
timed, so the ratio does not move with the load of the machine. Per protocol (Chat, Responses,
Messages) it counts three loops over the whole stream:

* `push`: `push(chunk)` of prebuilt `InferenceChunk.tokens([id])` chunks;
* `push+to_json`: the same, and `to_json()` of every returned chunk or event (what a gateway
  pays before writing the SSE line);
* `tokens+push+to_json`: the chunk built in the loop as well (`InferenceChunk.tokens([id])`).

Only the loop is counted: it runs inside `collections.deque(..., maxlen=0)` and callgrind
collects only while CPython's `deque_extend` runs (`--toggle-collect`), dumping once per loop,
so importing, loading the tokenizer and building the processor are left out. Both packages run
on the same interpreter (the side venv of tests/conformance/official_venv.py for the official
one), so the interpreter's own share of a loop is the same on both sides.

    python benchmarks/stream_instructions.py [--tokens 2000] [--keep DIR]

`--keep DIR` keeps the callgrind files (`ours.N`, `official.N`, one per loop in the order
printed) for `callgrind_annotate --inclusive=yes DIR/ours.1`. Needs valgrind; build ours
optimised first (`maturin develop --release`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "conformance"))

from stream import WORKLOAD  # noqa: E402

FORMATS = ("chat", "responses", "messages")
MODES = ("push", "push+to_json", "tokens+push+to_json")

# Runs under callgrind in either interpreter: one counted deque_extend per (format, mode).
COUNT = WORKLOAD + r'''
import collections

def loops(n_tokens):
    tok = dr.Tokenizer.from_file(tokenizer_path())
    ids = workload(tok, n_tokens)
    tokens = dr.InferenceChunk.tokens
    print(json.dumps({"package": dr.__file__, "tokens": len(ids)}))
    for fmt in ("chat", "responses", "messages"):
        for mode in ("push", "push+to_json", "tokens+push+to_json"):
            push = processor(fmt, tok).push
            chunks = [tokens([i]) for i in ids]
            if mode == "push":
                work = map(push, chunks)
            elif mode == "push+to_json":
                def step(c):
                    for item in push(c):
                        item.to_json()
                work = map(step, chunks)
            else:
                def step(i):
                    for item in push(tokens([i])):
                        item.to_json()
                work = map(step, ids)
            collections.deque(work, maxlen=0)  # the counted region

loops(int(sys.argv[1]))
'''


def count(python: str, n_tokens: int, out_prefix: Path, env: dict[str, str]) -> tuple[dict, list[int]]:
    """Run COUNT under callgrind; its printed header and the instructions of each loop."""
    # --trace-children: the side venv's python may be a wrapper script that execs the interpreter.
    cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes", "--collect-atstart=no", "--toggle-collect=deque_extend",
           "--dump-after=deque_extend", f"--callgrind-out-file={out_prefix}", python, "-c", COUNT, str(n_tokens)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:7])} ... failed:\n{done.stderr[-2000:]}")
    header = json.loads(done.stdout.splitlines()[0])
    dumps = sorted(out_prefix.parent.glob(out_prefix.name + ".*"), key=lambda p: int(p.suffix[1:]))
    costs = []
    for p in dumps:
        m = re.search(r"^summary: (\d+)", p.read_text(), re.M)
        costs.append(int(m.group(1)) if m else 0)
    if len(costs) != len(FORMATS) * len(MODES):
        raise SystemExit(f"expected {len(FORMATS) * len(MODES)} callgrind dumps, got {len(costs)}")
    return header, costs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--keep", help="directory to keep the callgrind files in")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is not installed", file=sys.stderr)
        return 2

    from official_venv import ensure_official_venv
    official = str(ensure_official_venv())
    work = Path(args.keep or tempfile.mkdtemp(prefix="stream-instructions-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONHASHSEED="0")
    # The official package has our import name: nothing of ours may be on its path.
    official_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    try:
        ours_head, ours = count(sys.executable, args.tokens, work / "ours", env)
        off_head, off = count(official, args.tokens, work / "official", official_env)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"ours:     {ours_head['package']}\nofficial: {off_head['package']}")
    print(f"{ours_head['tokens']} tokens, one ID per push; instructions per token and ours/official")
    print(f"{'format':<10} {'loop':<20} {'ours':>8} {'official':>9} {'ratio':>6}")
    i = 0
    for fmt in FORMATS:
        for mode in MODES:
            n = ours_head["tokens"]
            print(f"{fmt:<10} {mode:<20} {ours[i] / n:>8.0f} {off[i] / n:>9.0f} {ours[i] / off[i]:>6.2f}")
            i += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
