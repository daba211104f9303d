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


def _cgroup_dirs() -> list[tuple[str, str, str, str, str]]:
    """Where this process's memory limits may sit, innermost first, with each version's file names.

    ``(folder, limit, usage, stat, inactive-file field)``: cgroup v2
    (``memory.max``) and v1 (``memory.limit_in_bytes``), the process's own
    group and its ancestors (a limit may sit on any: a container's, a
    systemd slice's).
    """
    try:
        with open("/proc/self/cgroup") as fh:
            lines = [line.strip().split(":", 2) for line in fh if line.count(":") >= 2]
    except OSError:
        return []
    out = []
    for _, controllers, rel in lines:
        if controllers == "":
            root, names = "/sys/fs/cgroup", ("memory.max", "memory.current", "memory.stat", "inactive_file")
        elif "memory" in controllers.split(","):
            root, names = "/sys/fs/cgroup/memory", ("memory.limit_in_bytes", "memory.usage_in_bytes", "memory.stat",
                                                    "total_inactive_file")
        else:
            continue
        parts = [p for p in rel.split("/") if p]
        out += [(os.path.join(root, *parts[:i]), *names) for i in range(len(parts), -1, -1)]
    return out


def _cgroup_room() -> int | None:
    """The least room any cgroup memory limit of this process leaves; None when none is set or readable.

    Room is the limit less what the group uses, not counting the inactive
    file cache the kernel reclaims before it kills anything.
    """
    rooms = [r for r in (room_under(*where) for where in _cgroup_dirs()) if r is not None]
    return min(rooms) if rooms else None


def room_under(folder: str, limit_file: str, usage_file: str, stat_file: str, inactive: str) -> int | None:
    """The room one cgroup folder's memory limit leaves (see :func:`_cgroup_room`); None if unlimited or unreadable."""
    try:
        with open(os.path.join(folder, limit_file)) as fh:
            limit = fh.read().strip()
        if limit == "max" or int(limit) >= 1 << 62:  # v1 writes "no limit" as a huge number
            return None
        with open(os.path.join(folder, usage_file)) as fh:
            used = int(fh.read().strip())
        with open(os.path.join(folder, stat_file)) as fh:
            stat = dict(line.split() for line in fh if line.count(" ") == 1)
        return max(0, int(limit) - used + int(stat.get(inactive, 0)))
    except (OSError, ValueError):
        return None


def available_bytes() -> int | None:
    """Bytes this process can still allocate before the machine or its container runs out; None if unknown.

    The least of the kernel's ``MemAvailable`` and the room under any
    cgroup memory limit on this process (v1 or v2; a container's, a
    systemd slice's).
    Several workers on one machine each see the same free memory.  Cost:
    reads a few small files (tens of microseconds): for steps about to
    allocate a lot, not for every step.

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
