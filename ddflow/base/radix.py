"""A stable radix sort of int64 values, for kernels that sort many of them.

numba compiles ``np.argsort`` into a comparison sort five times slower
than numpy's own on 14,000 int64 values (numpy's uses SIMD), so a kernel
that ranks many values sorts them here instead: an LSD radix sort that
skips the digits in which no two values differ.
"""
from __future__ import annotations

import numpy as np

#: Bits a :func:`radix_order` pass sorts by: 2,048 buckets, so a pass costs about as much as the data.
RADIX_BITS = 11


def radix_order(v):
    """The stable order sorting the int64 values ``v``: an LSD radix sort.  A kernel helper.

    Passes of ``RADIX_BITS`` bits, skipping those in which no two values
    differ (values within a range of 2**22 take two), so O(n) a pass.
    What a kernel sorts many values with: numba's own ``np.argsort`` ran
    five times slower than numpy's on 14,000 int64 values.

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
