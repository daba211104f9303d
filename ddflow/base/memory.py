"""How much memory this process may still take: what a step that would outgrow it checks before it allocates.

A step that materializes more than the machine holds is killed by the
kernel's OOM killer, with no message and no chance to keep state whole.
Operators whose output can grow with the square of their input (a join)
count it first and, above a threshold, ask :func:`available_bytes` whether
it fits; if not, they fail with an error naming themselves and the sizes.
"""
from __future__ import annotations

import os


def _meminfo_available() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (Linux), else None."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room() -> int | None:
    """What the cgroup (v2) limit leaves: ``memory.max - memory.current``; None when unlimited or unreadable."""
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            limit = fh.read().strip()
        if limit == "max":
            return None
        with open("/sys/fs/cgroup/memory.current") as fh:
            return max(0, int(limit) - int(fh.read().strip()))
    except (OSError, ValueError):
        return None


def available_bytes() -> int | None:
    """Bytes this process can still allocate before the machine or its container runs out; None if unknown.

    The least of the kernel's ``MemAvailable`` and the room under a cgroup
    v2 limit (a container's).  Cost: reads two or three small files (tens
    of microseconds): for steps about to allocate a lot, not for every step.

    >>> n = available_bytes(); n is None or n >= 0
    True
    """
    known = [n for n in (_meminfo_available(), _cgroup_room()) if n is not None]
    if not known and hasattr(os, "sysconf"):
        try:
            known = [os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")]
        except (ValueError, OSError):
            pass
    return min(known) if known else None
