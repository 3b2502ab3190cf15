"""Peak resident memory of the current process, for memory tests that run their workload in a
child interpreter.

`ru_maxrss` is not enough there: Linux carries the peak of the process that forked the child
(pytest, often hundreds of MB) into the child's `ru_maxrss`, which hides the child's own peak.
`reset_peak()` clears the kernel's high-water mark (`/proc/self/clear_refs`), after which
`peak_rss_bytes()` (`VmHWM`) reports only what this process reached since.
"""

from __future__ import annotations

import resource


def reset_peak() -> bool:
    """Clear the peak-RSS mark; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    """The peak resident set size since the last `reset_peak()` (or since the process started)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
