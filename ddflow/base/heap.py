"""Giving freed memory back to the operating system: what a process does after its state shrank a lot.

Freeing an array returns its memory to the C allocator, not always to the
system.  glibc keeps freed chunks of its heap for reuse, and after large
arrays were freed once it serves the next ones from that heap too (its
mmap threshold grows to their size).  A dataflow that held a million
updates and compacted them away kept its peak RSS: on this project's
GROUP BY of 200,000 keys, inserted and deleted, 405 MB after compaction
against 322 MB before the insertions, and 340 MB after :func:`trim`.
The scheduler trims once idle compaction has freed enough
(:func:`ddflow.graph.scope.compact`).  Elsewhere than glibc (macOS, musl)
there is nothing to call and the allocator is left to itself.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache


@lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none.  O(1) after the first call."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    fn = getattr(libc, "malloc_trim", None)
    if fn is not None:
        fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return fn


def trim() -> bool:
    """Return the allocator's free memory to the system where it can (glibc); whether it returned any.

    Cost: a walk over the heap's free chunks (about a millisecond for a
    heap of a few hundred MB); call it after large frees, not every step.

    >>> isinstance(trim(), bool)
    True
    """
    fn = _malloc_trim()
    return bool(fn(0)) if fn is not None else False
