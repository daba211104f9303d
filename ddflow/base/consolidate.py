"""Consolidation: sort by (data, time), add up the diffs of equal pairs, drop zeros.

The workhorse of the whole system, so it packs all sort columns into a
single int64 key whenever their value ranges allow and falls back to
``lexsort`` otherwise.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ddflow.base.updates import Updates

#: Below this many rows sorting skips key packing (fixed per-call costs dominate).
SMALL_SORT = 64


def sort_order(
    cols: Sequence[np.ndarray], times: np.ndarray | None = None, runs: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """Permutation sorting lexicographically by ``cols`` then ``times``.

    Returns the permutation and, when every column packs into one int64
    key, that packed key in sorted order (callers use it to find groups
    without comparing columns one by one).  ``runs`` says the input is a
    concatenation of a few sorted runs (a merge): a stable sort then
    merges the runs in linear time instead of sorting from scratch.
    Cost: O(n log n) (O(n) for ``runs``) plus O(n) per column to pack.

    >>> order, packed = sort_order([np.array([3, 1, 2])])
    >>> order.tolist(), packed.tolist()
    ([1, 2, 0], [1, 2, 3])
    """
    keys = list(cols)
    if times is not None:
        keys.extend(times[:, j] for j in range(times.shape[1]))
    if not keys:
        return np.zeros(0, dtype=np.int64), None
    n = len(keys[0])
    if n <= SMALL_SORT and len(keys) > 1:
        # Packing costs a dozen numpy calls; on a few rows lexsort is cheaper, runs or not.
        return np.lexsort(keys[::-1]), None
    packed = pack_keys(keys)
    kind = "stable" if runs else None
    if packed is not None:
        order = np.argsort(packed, kind=kind)
        return order, packed[order]
    if len(keys) == 1:
        return np.argsort(keys[0], kind=kind), None
    if runs:
        # A structured view compares field by field; timsort merges the runs.
        rec = np.empty(n, dtype=[(f"k{i}", k.dtype) for i, k in enumerate(keys)])
        for i, k in enumerate(keys):
            rec[f"k{i}"] = k
        return np.argsort(rec, kind="stable"), None
    return np.lexsort(keys[::-1]), None


def pack_keys(keys: Sequence[np.ndarray]) -> np.ndarray | None:
    """One order-preserving int64 per row if the integer columns' ranges fit in 63 bits.

    O(n) per column; None for float columns or ranges too wide.

    >>> pack_keys([np.array([1, 2]), np.array([0, 1])]).tolist()
    [0, 3]
    """
    if not keys or len(keys[0]) == 0:
        return None
    if any(k.dtype.kind not in "iub" for k in keys):
        return None
    if len(keys) == 1:
        return keys[0].astype(np.int64, copy=False)
    los, spans = [], []
    bits = 0
    for k in keys:
        lo, hi = int(k.min()), int(k.max())
        span = hi - lo + 1
        bits += max(span - 1, 1).bit_length()
        if bits > 62:
            return None
        los.append(lo)
        spans.append(span)
    # In place, without temporaries; intermediate wrap-around cancels out because
    # the final value fits.
    packed = keys[0].astype(np.int64, copy=True)
    packed -= los[0]
    for k, lo, span in zip(keys[1:], los[1:], spans[1:]):
        packed *= span
        packed += k.astype(np.int64, copy=False)
        packed -= lo
    return packed


def group_starts(sorted_cols: Sequence[np.ndarray], packed: np.ndarray | None = None) -> np.ndarray:
    """Start indices of runs of equal rows in sorted columns.  O(n) per column.

    >>> group_starts([np.array([1, 1, 2, 2, 2])]).tolist()
    [0, 2]
    """
    if packed is not None:
        n = len(packed)
        change = packed[1:] != packed[:-1]
    else:
        n = len(sorted_cols[0]) if sorted_cols else 0
        change = row_changes(sorted_cols)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    return starts_of(change)


def row_changes(sorted_cols: Sequence[np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
    """``change[i]``: row ``i + 1`` differs from row ``i`` in some column (NaN equals NaN).

    ``out``: changes already known (for a prefix of the columns), updated in place.
    O(n) per column.

    >>> row_changes([np.array([1, 1, 2])]).tolist()
    [False, True]
    """
    n = len(sorted_cols[0]) if sorted_cols else (len(out) + 1 if out is not None else 0)
    change = out if out is not None else np.zeros(max(n - 1, 0), dtype=bool)
    for c in sorted_cols:
        ne = c[1:] != c[:-1]
        if c.dtype.kind == "f":
            # NaN != NaN, but the sort puts all NaNs together: they are one value.
            nan = np.isnan(c)
            ne &= ~(nan[1:] & nan[:-1])
        change |= ne
    return change


def starts_of(change: np.ndarray) -> np.ndarray:
    """Group start indices from a :func:`row_changes` mask.  O(n).

    >>> starts_of(np.array([False, True])).tolist()
    [0, 2]
    """
    starts = np.empty(int(np.count_nonzero(change)) + 1, dtype=np.int64)
    starts[0] = 0
    starts[1:] = np.flatnonzero(change)
    starts[1:] += 1
    return starts


def consolidate(u: Updates, runs: bool = False) -> Updates:
    """Sort by (data, time), add up diffs of equal (data, time), drop zeros.

    ``runs``: the input is a few sorted runs (see :func:`sort_order`).
    Cost: O(n log n) for n updates (one sort, O(n) for ``runs``), vectorized.

    >>> from ddflow.base.interner import Interner
    >>> from ddflow.base.updates import from_rows
    >>> it = Interner()
    >>> u = from_rows([(2,), (1,), (2,), (3,)], times=0, diffs=[1, 1, 1, 0], interner=it)
    >>> consolidate(u).to_rows(it)
    [((1,), 0, 1), ((2,), 0, 2)]
    """
    n = len(u)
    if n == 0:
        return u
    order, packed = sort_order(u.cols, u.times, runs)
    if packed is not None:
        # Groups come from the packed key alone: gather the columns once, at the end.
        starts = group_starts((), packed)
        diffs = u.diffs[order]
        if len(starts) == n:
            sel, sums = order, diffs
        else:
            sums = np.add.reduceat(diffs, starts)
            sel = order[starts]
        keep = sums != 0
        if not keep.all():
            sel, sums = sel[keep], sums[keep]
        return Updates(tuple(c[sel] for c in u.cols), u.times[sel], sums, u.kinds)
    cols = tuple(c[order] for c in u.cols)
    times = u.times[order]
    diffs = u.diffs[order]
    starts = group_starts(list(cols) + [times[:, j] for j in range(times.shape[1])])
    if len(starts) == n:
        keep = diffs != 0
        if keep.all():
            return Updates(cols, times, diffs, u.kinds)
        return Updates(tuple(c[keep] for c in cols), times[keep], diffs[keep], u.kinds)
    sums = np.add.reduceat(diffs, starts)
    keep = sums != 0
    idx = starts[keep]
    return Updates(tuple(c[idx] for c in cols), times[idx], sums[keep], u.kinds)
