"""Lower every Triton kernel that does not use NVIDIA TMA to Linalg with triton-ascend, without an NPU.

Run in a separate environment where the `triton-ascend` wheel provides the `triton` package (it ships the
`triton-adapter-opt` lowering); `torch` may come from another environment on the path. Each kernel goes
through triton-ascend's own pipeline (TTIR, then its `ttadapter` stage: Linalg on tensors/memrefs); the
next stage (`bishengir-compile` to an NPU binary) needs CANN (`ASCEND_HOME_PATH`) and is expected to stop
there. The script checks that each kernel's Linalg module was written and holds `linalg` operations.

    TRITON_CACHE_DIR=/tmp/ascend-cache python kernels/tools/ascend_linalg.py [--arch Ascend910B3]
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="Ascend910B3")
    args = ap.parse_args()
    cache = Path(os.environ.setdefault("TRITON_CACHE_DIR", str(Path.cwd() / ".ascend-cache")))
    import triton
    from deepseek_kernels import aot
    from triton.backends.compiler import GPUTarget

    failed = 0
    for spec in aot.SPECS:
        if spec.tma:
            print(f"skip {spec.name:40s} NVIDIA TMA descriptors (CUDA only)")
            continue
        signature = {k: v for k, v in spec.signature.items()}
        src = triton.compiler.ASTSource(fn=spec.fn(), signature=signature, constants=dict(spec.constexprs))
        before = set(glob.glob(str(cache / "**" / "*.ttadapter"), recursive=True))
        stopped = ""
        try:
            triton.compile(src, target=GPUTarget("npu", args.arch, 0))
            stopped = "compiled to an NPU binary"
        except Exception as err:  # the binary stage needs CANN
            message = str(err)
            stopped = ("stops: needs CANN (ASCEND_HOME_PATH is not set)" if "ASCEND_HOME_PATH" in message
                       else f"failed: {type(err).__name__}: {message.strip()[:120]}")
        new = sorted(set(glob.glob(str(cache / "**" / "*.ttadapter"), recursive=True)) - before)
        found = [p for p in glob.glob(str(cache / "**" / f"{spec.fn().__name__}.ttadapter"), recursive=True)]
        text = Path((new or found)[0]).read_text() if (new or found) else ""
        ok = "linalg." in text or "memref." in text
        failed += not ok
        ops = sorted({w.split("(")[0] for w in text.split() if w.startswith(("linalg.", "hivm.", "memref."))})[:6]
        print(f"{'ok  ' if ok else 'FAIL'} {spec.name:40s} linalg module {'written' if ok else 'missing'} "
              f"({' '.join(ops)}); binary stage {stopped}")
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
