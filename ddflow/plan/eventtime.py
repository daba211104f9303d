"""Lowering the event-time plan nodes: windows, sessions, temporal filters and the close of per-window results.

Each is a stateless operator of :mod:`ddflow.operators.temporal` (or the
session operator of :mod:`ddflow.operators.session`) around column
evaluation; rows keep the stored layout (values, then the null mask's
words), the two window bounds inserted before the mask.

Why state stays bounded.  With an event-time input, a row's data time is
its timestamp, and nothing behind the frontier ever arrives.  A window's
copy of a row is a +1 at the row's time and (``expire``) a -1 at the
window's end, so every operator between :class:`~ddflow.plan.ir.Windowed`
and :class:`~ddflow.plan.ir.CloseAt` (the aggregate, its arrangement, a
join on the window's bounds) sees the window's rows vanish at its end and
retracts what it computed from them at that same time.  Once the frontier
``F`` passes the end, compaction advances every time ``t <= F`` of those
records to ``F``: the +1s and -1s meet at one time and add up to zero,
and a record whose accumulation is zero is not kept (see
:mod:`traces.spine`).  ``CloseAt`` drops each per-window row's changes at
and after its end, so the query's output keeps the value the window had
when it closed, and keeps it without any trace holding it.
"""
from __future__ import annotations

import numpy as np

from ddflow.base import nullmask
from ddflow.collection import Collection
from ddflow.operators.temporal import NO_LOWER, NO_UPPER
from ddflow.plan.expr import evaluate
from ddflow.plan.ir import CloseAt, Sessionized, TemporalFilter, Windowed
from ddflow.plan.lower import columns_of  # plan.lower imports this module only inside a function


def _ints(e, cols, schema) -> tuple[np.ndarray, np.ndarray]:
    """``e`` over stored columns ``cols`` as int64 values (0 where NULL) and its NULL mask."""
    vals, null = evaluate(e, columns_of(cols, schema))
    null = np.asarray(null, dtype=bool)
    return np.where(null, 0, vals).astype(np.int64), null


def _bounds_inserted(coll: Collection, n: int, extra: int) -> Collection:
    """``(*values, *mask, *bounds)`` laid out as stored rows: ``(*values, *bounds, *mask)``."""
    w = nullmask.width(n)
    out = coll.project(*range(n), *range(w, w + extra), *range(n, w))
    if nullmask.words(n + extra) == w - n:
        return out
    return out.map_columns(lambda *cols: (*cols[:n + extra], *nullmask.widened(cols[n + extra:], n, extra)))


def lower_windowed(lowering, rel: Windowed) -> Collection:
    schema, n = rel.input.schema, len(rel.input.schema)

    def time_of(*cols):
        ts, null = _ints(rel.time, cols, schema)
        return ts, ~null

    out = lowering.lower(rel.input).window(time_of, rel.width, rel.slide, rel.offset, rel.expire)
    return _bounds_inserted(out, n, 2)


def lower_sessionized(lowering, rel: Sessionized) -> Collection:
    schema, n = rel.input.schema, len(rel.input.schema)

    def keyed(*cols):
        ins = columns_of(cols, schema)
        ts, null = _ints(rel.time, cols, schema)
        parts = [evaluate(k, ins) for k in rel.keys]
        keys = np.empty(len(ts), dtype=object)
        keys[:] = list(zip(*[[None if z else v for v, z in zip(vals.tolist(), np.asarray(nul).tolist())]
                             for vals, nul in parts])) if parts else [()] * len(ts)
        return (keys, ts, *cols)

    def has_time(*cols):
        return ~_ints(rel.time, cols, schema)[1]

    rows = lowering.lower(rel.input).filter_columns(has_time).map_columns(keyed)
    tagged = rows.sessionize(1, rel.gap, rel.expire).project(*range(2, nullmask.width(n) + 4))
    return _bounds_inserted(tagged, n, 2)


def lower_temporal_filter(lowering, rel: TemporalFilter) -> Collection:
    schema = rel.input.schema

    def bounds(*cols):
        n = len(cols[0])
        never = np.zeros(n, dtype=bool)
        lower = np.full(n, NO_LOWER, dtype=np.int64)
        upper = np.full(n, NO_UPPER, dtype=np.int64)
        if rel.lower is not None:
            lower, null = _ints(rel.lower, cols, schema)
            lower = lower + rel.lower_plus
            never |= null
        if rel.upper is not None:
            upper, null = _ints(rel.upper, cols, schema)
            upper = upper + rel.upper_plus
            never |= null
        return np.where(never, NO_UPPER, lower), np.where(never, NO_LOWER, upper)

    return lowering.lower(rel.input).temporal_filter(bounds)


def lower_close_at(lowering, rel: CloseAt) -> Collection:
    schema = rel.input.schema

    def end_of(*cols):
        end, null = _ints(rel.end, cols, schema)
        return np.where(null, NO_UPPER, end + rel.after)

    return lowering.lower(rel.input).close_at(end_of, final=rel.final)
