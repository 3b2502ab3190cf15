"""Compile every Triton kernel of ``deepseek_kernels`` and every autotune configuration for ``sm_100a`` and
``sm_90a`` without a GPU, check the artifacts (``deepseek_kernels.aot.problems``) and print one line per
compilation; exit status 1 when any check fails.

    python kernels/tools/aot_sweep.py [--arch sm_100a] [--keep DIR]

``--keep DIR`` writes each kernel's PTX there for inspection.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from deepseek_kernels import aot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", action="append", choices=sorted(aot.ARCHES), help="target (repeatable)")
    parser.add_argument("--keep", type=Path, help="folder for the PTX files")
    args = parser.parse_args(argv)
    arches = args.arch or ["sm_100a", "sm_90a"]
    failed = 0
    for arch in arches:
        for spec in aot.SPECS:
            start = time.perf_counter()
            try:
                compiled = aot.compile_spec(spec, arch)
                found = aot.problems(spec, compiled, arch)
            except Exception as err:  # a compile error is a failed check, reported with the rest
                compiled, found = None, [f"compile error: {type(err).__name__}: {err}".splitlines()[0]]
            took = time.perf_counter() - start
            if compiled is not None and args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / f"{spec.name}.{arch}.ptx").write_text(compiled.asm["ptx"])
            instr = []
            if compiled is not None:
                ptx = compiled.asm["ptx"]
                instr = [i for i in ("tcgen05.mma", "wgmma.mma_async", "cp.async.bulk.tensor", "mma.sync") if i in ptx]
            status = "ok  " if not found else "FAIL"
            failed += bool(found)
            print(f"{status} {arch} {spec.name:40s} {took:6.1f}s  {' '.join(instr)}  {'; '.join(found)}")
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
