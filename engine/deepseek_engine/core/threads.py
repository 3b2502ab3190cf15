"""The machine's physical core count: the engine's and the benchmarks' default intra-op thread count.

Memory-bound decode gains nothing from a second hardware thread on a core (both share the core's load ports),
so one thread per physical core is the count that reaches the machine's bandwidth (``STREAM`` is run that way).
"""

from __future__ import annotations

import os
from pathlib import Path


def physical_cores() -> int:
    """Distinct (package, core) pairs of the CPUs this process may run on (Linux ``sysfs``); the number of usable
    CPUs where the topology is not readable."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = list(range(os.cpu_count() or 1))
    cores = set()
    for cpu in allowed:
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add((int((topo / "physical_package_id").read_text()), int((topo / "core_id").read_text())))
        except (OSError, ValueError):
            return max(1, len(allowed))
    return max(1, len(cores))


def intra_op_threads(requested: int | None = None) -> int:
    """The engine's torch intra-op thread count: ``requested`` when given (at least 1); otherwise the count already
    set (by ``torch.set_num_threads`` or ``OMP_NUM_THREADS``, the user's choice) but no more than one thread per
    physical core (torch's own default may count hardware threads, which only contend for a memory-bound decode)."""
    import torch

    if requested is not None:
        if requested < 1:
            raise ValueError(f"num_threads must be at least 1, got {requested}")
        return requested
    return max(1, min(torch.get_num_threads(), physical_cores()))
