"""Consolidation: sort by (data, time), add up the diffs of equal pairs, drop zeros.

The workhorse of the whole system: one compiled kernel
(:mod:`ddflow.base.kernels`) for every size.  The vectorized group helpers
here (``pack_keys``, ``group_starts``, ``row_changes``) serve operators
that group sorted columns themselves.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ddflow.base.kernels import consolidate_rows, key_matrix
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError

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


def overflow_detail(u: Updates) -> str:
    """Which record and time of ``u`` has diffs adding up past int64 (for an error message).

    O(n log n) with Python per update: only for the error path.
    """
    order = np.lexsort([u.diffs] + [u.times[:, j] for j in reversed(range(u.depth))]
                       + [c for c in reversed(u.cols)]) if len(u) else []
    prev, acc = None, 0
    for i in order:
        key = (tuple(c[i].item() for c in u.cols), tuple(u.times[i].tolist()))
        if key != prev:
            prev, acc = key, 0
        acc += int(u.diffs[i])
        if not -(1 << 63) <= acc < (1 << 63):
            rec, t = key
            return f"the diffs of record {rec} at time {t[0] if len(t) == 1 else t} add up past int64"
    return "a sum of diffs does not fit in int64"


def consolidate(u: Updates, runs: bool = False, where: str = "consolidate") -> Updates:
    """Sort by (data, time), add up diffs of equal (data, time), drop zeros.

    One path for every size past one update (:func:`ddflow.base.kernels.consolidate_rows`:
    one kernel for a few rows; a packing kernel, numpy's stable sort and a
    grouping kernel for more); ``runs`` is
    accepted for callers that know their input is a few sorted runs, which
    that timsort merges in linear time by itself.
    A sum of diffs past int64 is a :class:`~ddflow.errors.SchemaError`
    naming ``where`` and the record and time.
    Cost: O(n log n) for n updates, O(n) for a few sorted runs; no numpy
    call per group.

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
    if n == 1:  # a single update is consolidated unless its diff is zero (the common case at one update per step)
        return u if u.diffs[0] else u.take(np.zeros(0, dtype=np.int64))
    try:
        sel, sums = consolidate_rows(key_matrix(u.cols, u.times), u.diffs, where)
    except SchemaError:
        raise SchemaError(f"{where}: {overflow_detail(u)}") from None
    return Updates.unchecked(tuple(c[sel] for c in u.cols), u.times[sel], sums, u.kinds)
