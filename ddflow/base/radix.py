"""A stable radix sort of int64 values, and of int64 rows that pack into one, for kernels that sort many.

A kernel that ranks many values sorts them here (the native kernels'
twin is ``radix_order`` in ``native/base``): an LSD radix sort that
skips the digits in which no two values differ.  Rows whose columns'
ranges fit in 62 bits together (a key and a time, as a reduce's seeds
are) are packed into one value each and sorted the same way.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.kernels import _pack, lex_order

#: Bits a :func:`radix_order` pass sorts by: 2,048 buckets, so a pass costs about as much as the data.
RADIX_BITS = 11
#: :func:`row_order` radix-sorts more rows than this (fewer: the natural merge sort, whose passes are cheaper
#: than a radix pass's 2,048 buckets, and O(n) on rows already in order).
RADIX_ROWS_ABOVE = 512
#: ... and in more than this many sorted runs (fewer: the merge sort's log2(runs) passes cost less).
RADIX_RUNS_ABOVE = 8


def radix_order(v):
    """The stable order sorting the int64 values ``v``: an LSD radix sort.  A kernel helper.

    Passes of ``RADIX_BITS`` bits, skipping those in which no two values
    differ (values within a range of 2**22 take two), so O(n) a pass.
    What a kernel sorts many values with: linear where a comparison sort is not.

    >>> radix_order(np.array([3, -1, 3, 0])).tolist()
    [1, 3, 0, 2]
    """
    n = len(v)
    sign = np.uint64(1) << np.uint64(63)
    u = np.empty(n, dtype=np.uint64)
    ones, zeros = np.uint64(0), ~np.uint64(0)
    for i in range(n):
        u[i] = np.uint64(v[i]) ^ sign  # signed order as unsigned
        ones |= u[i]
        zeros &= u[i]
    varying = ones ^ zeros
    order = np.arange(n)
    other = np.empty(n, dtype=np.int64)
    size = 1 << RADIX_BITS
    mask = np.uint64(size - 1)
    count = np.empty(size + 1, dtype=np.int64)
    shift = 0
    while shift < 64:
        sh = np.uint64(shift)
        if (varying >> sh) & mask:
            count[:] = 0
            for i in range(n):
                count[((u[i] >> sh) & mask) + 1] += 1
            for b in range(size):
                count[b + 1] += count[b]
            for x in range(n):
                i = order[x]
                d = (u[i] >> sh) & mask
                other[count[d]] = i
                count[d] += 1
            order, other = other, order
        shift += RADIX_BITS
    return order


def row_order(M, radix_above):
    """The stable permutation sorting the rows of ``M`` lexicographically: :func:`lex_order`'s, found faster for many rows.

    More than ``radix_above`` rows in more than ``RADIX_RUNS_ABOVE``
    sorted runs, whose columns' ranges fit in 62 bits together, are
    packed into one int64 each, in their order
    (:func:`~ddflow.base.kernels._pack`), and radix-sorted
    (:func:`radix_order`); others are merge-sorted
    (:func:`~ddflow.base.kernels.lex_order`: O(n) a pass over runs, so a
    few sorted parts put together cost less than one radix pass).  Both
    sorts are stable and the packing keeps order, so the permutation is
    the same either way.  A kernel helper.  O(n m) a radix pass, else
    O(n m log r) for r runs.

    >>> row_order(np.array([[2, 7], [1, 9], [2, 5]]), 0).tolist()
    [1, 2, 0]
    """
    n, m = M.shape
    if n > radix_above:
        runs = 1
        for i in range(1, n):
            for c in range(m):
                if M[i, c] != M[i - 1, c]:
                    if M[i, c] < M[i - 1, c]:
                        runs += 1
                    break
            if runs > RADIX_RUNS_ABOVE:
                packed, fits = _pack(M)
                if fits:
                    return radix_order(packed)
                break
    return lex_order(M)
