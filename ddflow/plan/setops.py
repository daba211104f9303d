"""Set operations lowered: UNION's parts concatenated (distinct unless ALL), INTERSECT and EXCEPT as a
semijoin or antijoin on the whole row, and their ALL forms as a threshold of multiplicities.

Costs, per batch of changes: UNION ALL is free (a ``concat``); the
distinct forms cost one arrangement of the whole rows per side; the ALL
forms one threshold (a count per changed row).  The whole-row key is one
tuple field (:func:`row_key`), so rows of any width compare by value.
"""
from __future__ import annotations

import numpy as np

from ddflow.collection import Collection
from ddflow.plan.ir import SetOp, Union


def row_key(*cols):
    """``(row, *cols)``: each stored row as one tuple field (a key for whole-row antijoins), then the row.

    >>> row_key(np.array([1, 2]), np.array([3, 4]))[0].tolist()
    [(1, 3), (2, 4)]
    """
    key = np.empty(len(cols[0]), dtype=object)
    key[:] = list(zip(*(np.asarray(c).tolist() for c in cols)))
    return (key, *cols)


def lower_union(rel: Union, parts: list[Collection]) -> Collection:
    """UNION [ALL] of the lowered parts."""
    out = parts[0].concat(*parts[1:]) if len(parts) > 1 else parts[0]
    return out if rel.all else out.distinct()


def lower_setop(rel: SetOp, left: Collection, right: Collection) -> Collection:
    """INTERSECT / EXCEPT [ALL] of the lowered sides.

    EXCEPT ALL keeps each row ``max(m - n, 0)`` times, a threshold of the
    count of ``left - right``; INTERSECT ALL ``min(m, n) = m - max(m - n,
    0)`` times.  The distinct forms keep the left's distinct rows with
    (INTERSECT) or without (EXCEPT) a match on the right.
    """
    if rel.all:
        rest = left.concat(right.negate()).threshold(_positive)
        return rest if rel.kind == "except" else left.concat(rest.negate())
    rows = left.distinct().map_columns(row_key)
    other = right.map_columns(row_key).project(0).distinct()
    kept = rows.semijoin(other) if rel.kind == "intersect" else rows.antijoin(other)
    return kept.project(*range(1, rel.schema.width + 1))


def _positive(count: int) -> int:
    return count if count > 0 else 0
