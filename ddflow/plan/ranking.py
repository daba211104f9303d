"""Lowering a ranking (:class:`~ddflow.plan.ir.TopK`) with a limit to the compiled walk.

``ORDER BY ... LIMIT k`` per partition (and ``ROW_NUMBER()``, ``RANK()``
or ``DENSE_RANK() ... <= k``) is :meth:`~ddflow.collection.Collection.top_k`
keyed by the partition: a partition of numbers by a hash of its columns,
which (null bits, then the columns) lead the value as top_k's
``partition`` fields, so colliding hashes never merge partitions; one
with strings by one field for the whole partition
(:func:`~ddflow.plan.aggregate.group_key`).  Each row carries,
before its stored fields, two int64 fields per sort key that order as
the per-partition reduce of :meth:`ddflow.plan.lower.Lowering._topk`
compares: a null rank (NULLs first or last) and the value (floats by
their order-keeping int64 key; descending as its bitwise complement,
which reverses the order of every int64; strings descending are fields
the walk compares reversed).  Ties then break by the stored
row, as there, so the rows kept are the same; RANK and DENSE_RANK number
the rows tying on the sort-key fields alike.  Cost: as ``top_k``, plus,
for a partition with strings, building its key per changed row.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ddflow.base import nullmask
from ddflow.base.kernels import float_keys, row_hashes
from ddflow.base.schema import KIND
from ddflow.collection import Collection
from ddflow.plan.expr import as_type, evaluate, filled
from ddflow.plan.ir import TopK

if TYPE_CHECKING:
    from ddflow.plan.lower import Lowering


def lower_top_k(low: "Lowering", rel: TopK) -> Collection:
    """The stored rows of ``rel`` (a limit; row numbers or none): the row, the number if any, the mask."""
    from ddflow.plan.aggregate import group_key
    from ddflow.plan.lower import columns_of, stored

    src = rel.input.schema
    ptypes = tuple(e.type if e.type != "null" else "bigint" for e in rel.partition)
    otypes = tuple(o.expr.type if o.expr.type != "null" else "bigint" for o in rel.order)
    # A partition of numbers (no strings) is keyed by a 64-bit hash of its columns, which lead the value as
    # top_k's ``partition`` fields (null bits, then each column's order key), so a hash collision only
    # shares a key and never merges partitions: int64 throughout, no Python per row.  With a string among
    # them, the key is one field per partition (group_key).
    numeric = bool(rel.partition) and all(KIND[t] != "o" for t in ptypes)
    lead = nullmask.width(len(rel.partition)) if numeric else 0  # the value fields that belong to the partition

    def order_key(vals: np.ndarray, null: np.ndarray, typ: str) -> np.ndarray:
        """Values as int64 in their order (floats by float_keys; NULL as the canonical value), or objects."""
        v = filled(as_type(vals, typ), null, typ)
        if KIND[typ] == "f":
            return float_keys(v)
        return v if KIND[typ] == "o" else np.asarray(v, dtype=np.int64)

    def keyed(*cols):
        ins = columns_of(cols, src)
        n = len(cols[0])
        parts: list[np.ndarray] = []
        if numeric:
            pv = [evaluate(e, ins) for e in rel.partition]
            keys = [order_key(vals, null, t) for (vals, null), t in zip(pv, ptypes)]
            parts = [*nullmask.encode([null for _, null in pv], n), *keys]
            key = row_hashes(parts)
        elif rel.partition:
            key = group_key(list(stored([evaluate(e, ins) for e in rel.partition], ptypes, n)), ptypes)
        else:
            key = np.zeros(n, dtype=np.int64)
        sort = []
        for o, typ in zip(rel.order, otypes):
            vals, null = evaluate(o.expr, ins)
            v = order_key(vals, null, typ)
            numeric_desc = o.desc and KIND[typ] != "o"  # strings descending: the walk's desc fields
            sort += [(~null if o.nulls_first else null).astype(np.int64), ~v if numeric_desc else v]
        return (key, *parts, *sort, *cols)

    # Value fields of the strings sorted descending (each sort key is two fields: its null rank, its value).
    desc = tuple(lead + 2 * j + 1 for j, (o, typ) in enumerate(zip(rel.order, otypes))
                 if o.desc and KIND[typ] == "o")

    rows = low.lower(rel.input).map_columns(keyed)
    rows.partitioned = low._placed_by(rel.input, rel.partition[0] if rel.partition else None)
    first, n, w = 1 + lead + 2 * len(rel.order), len(src), src.width
    if rel.rank is None:
        return rows.top_k(rel.limit, desc=desc, partition=lead).project(*range(first, first + w))
    # (key, partition, sort keys, row, mask, number) -> (row, number, mask); ties: equal sort keys (two each)
    ranked = rows.top_k(rel.limit, numbered=rel.rank, ties=lead + 2 * len(rel.order), desc=desc, partition=lead)
    out = ranked.project(*range(first, first + n), first + w, *range(first + n, first + w))
    return _widened(out, n + 1, w - n)


def _widened(coll: Collection, n: int, have: int) -> Collection:
    """Rows of ``n`` columns whose last column was added after ``have`` mask words: a zero word more if they need it.

    A row of 63 columns gains its second word with a 64th column; any
    other keeps its words (and costs nothing here).
    """
    if nullmask.words(n) == have:
        return coll
    return coll.map_columns(lambda *cols: (*cols[:n], *nullmask.widened(cols[n:], n - 1, 1)))
