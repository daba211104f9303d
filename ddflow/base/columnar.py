"""Columnar helpers: vectorized index arithmetic used by traces and operators alike."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ddflow.base.consolidate import group_starts, pack_keys
from ddflow.base.kernels import sort_rows
from ddflow.base.native import kernel

#: Below this many pairs ``np.lexsort`` beats packing and timsort.
_SMALL_SORT = 256


def ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, e)`` for each pair, without a Python loop.  O(total length).

    >>> ranges(np.array([0, 5]), np.array([2, 7])).tolist()
    [0, 1, 5, 6]
    """
    lens = ends - starts
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    csum = np.cumsum(lens)
    return np.repeat(starts - csum + lens, lens) + np.arange(total, dtype=np.int64)


def wrapping_products(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(x * y, wrapped)`` for int64 arrays: the products as numpy wraps them, and where one left int64.  O(n).

    >>> p, wrapped = wrapping_products(np.array([3, 2**62]), np.array([4, 2]))
    >>> int(p[0]), wrapped.tolist()
    (12, [False, True])
    """
    with np.errstate(over="ignore"):
        p = x * y
        nz = x != 0
        # p // x recovers y unless the product wrapped; MIN // -1 wraps itself, so that case is named.
        wrapped = nz & ((p // np.where(nz, x, 1) != y) | ((x == -1) & (y == np.iinfo(np.int64).min)))
    return p, wrapped


def group_by_index(idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Order and bounds grouping positions by ``idx`` in ``range(n)``.  O(len(idx) + n), one compiled pass.

    Group ``g`` is ``order[bounds[g]:bounds[g + 1]]``, positions in input
    order (a stable counting sort).  Positions with ``idx < 0`` come
    before ``bounds[0]``, those with ``idx >= n`` after ``bounds[n]``.

    >>> order, bounds = group_by_index(np.array([1, 0, 1]), 2)
    >>> order.tolist(), bounds.tolist()
    ([1, 0, 2], [0, 1, 3])
    """
    return _counting_order(np.asarray(idx, dtype=np.int64), n)


@kernel("base")
def _counting_order(idx, n):
    """Stable counting sort of positions by ``idx`` into buckets below 0, 0..n-1 and n or more."""
    counts = np.zeros(n + 2, dtype=np.int64)
    for x in idx:
        counts[0 if x < 0 else (n + 1 if x >= n else x + 1)] += 1
    starts = np.empty(n + 2, dtype=np.int64)
    total = 0
    for b in range(n + 2):
        starts[b] = total
        total += counts[b]
    bounds = starts[1:].copy()
    order = np.empty(len(idx), dtype=np.int64)
    for i in range(len(idx)):
        x = idx[i]
        b = 0 if x < 0 else (n + 1 if x >= n else x + 1)
        order[starts[b]] = i
        starts[b] += 1
    return order, bounds


def pair_order(g: np.ndarray, a: np.ndarray) -> np.ndarray:
    """The stable permutation sorting pairs ``(g[i], a[i])``.  O(n) on a few sorted runs, else O(n log n).

    Trace histories arrive as one sorted run per batch; packing each pair
    into one int64 and numpy's timsort merge the runs in linear time (on
    30,000 pairs in 8 runs, 4x faster than ``np.lexsort``).  Tiny inputs
    go to ``np.lexsort``, which has less fixed cost.

    >>> pair_order(np.array([1, 0, 1]), np.array([5, 7, 2])).tolist()
    [1, 2, 0]
    """
    if len(g) < _SMALL_SORT:
        return np.lexsort((a, g))
    return sort_rows(np.column_stack((g, a)))


def segmented_cumsum(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Running sums of ``x`` that restart at each of ``starts`` (sorted group starts).  O(n).

    >>> segmented_cumsum(np.array([1, 2, 3, 4]), np.array([0, 2])).tolist()
    [1, 3, 3, 7]
    """
    c = np.cumsum(x)
    before = np.concatenate(([0], c[starts[1:] - 1])) if len(starts) else np.zeros(0, dtype=x.dtype)
    return c - np.repeat(before, np.diff(np.append(starts, len(x))))


def lookup_rows(table: Sequence[np.ndarray], query: Sequence[np.ndarray]) -> np.ndarray:
    """For each query row, the index of the equal row in ``table`` (sorted, unique rows), or -1.

    O((t + q) log(t + q)) for t table and q query rows, vectorized.

    >>> lookup_rows([np.array([1, 3, 5])], [np.array([3, 4])]).tolist()
    [1, -1]
    """
    n_t = len(table[0])
    if not n_t:
        return np.full(len(query[0]), -1, dtype=np.int64)
    packed = pack_keys([np.concatenate([t, q]) for t, q in zip(table, query)])
    if packed is not None:
        tk, qk = packed[:n_t], packed[n_t:]
        pos = np.minimum(np.searchsorted(tk, qk), n_t - 1)
        return np.where(tk[pos] == qk, pos, -1)
    both = [np.concatenate([t, q]) for t, q in zip(table, query)]
    flag = np.concatenate([np.zeros(n_t, dtype=np.int64), np.ones(len(query[0]), dtype=np.int64)])
    order = np.lexsort([flag, *both[::-1]])
    starts = group_starts([c[order] for c in both])
    gid = np.cumsum(np.isin(np.arange(len(order)), starts)) - 1
    first = order[starts]  # table rows come first within a group
    res = np.full(len(query[0]), -1, dtype=np.int64)
    is_q = order >= n_t
    grp_first = first[gid[is_q]]
    res[order[is_q] - n_t] = np.where(grp_first < n_t, grp_first, -1)
    return res


def time_column(times: np.ndarray, c: int) -> np.ndarray:
    """Coordinate ``c`` of every time in ``times`` (``(n, depth)``), contiguous.  O(n) when depth > 1, else O(1).

    ``times[:, c]`` is a strided view when there are two rows or more and,
    numpy marking a one-row or empty array contiguous, a contiguous one
    below: a kernel handed it is compiled once per layout, the second time
    in the middle of a dataflow at the first step of the other size.

    >>> time_column(np.array([[1, 2]]), 1).flags.c_contiguous, time_column(np.array([[1, 2], [3, 4]]), 1).tolist()
    (True, [2, 4])
    """
    return np.ascontiguousarray(times[:, c])


def frozen(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """Read-only views of ``arrays`` (an array already read-only as it is).  O(1) each.

    What a kernel or a column function is given is often a batch other
    readers share (a queue's, a trace's): read-only, a write by mistake in
    Python raises instead of changing what the others read.

    >>> a, = frozen(np.arange(3)); a.flags.writeable
    False
    """
    out = []
    for a in arrays:
        if a.flags.writeable:
            a = a.view()
            a.flags.writeable = False
        out.append(a)
    return tuple(out)
