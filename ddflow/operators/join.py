"""Join of two arrangements by key, by the delta rule.

For new batches dA and dB with traces A and B that already contain them,
``d(A join B) = dA join B + A join dB - dA join dB``: every pair of
updates is counted exactly once, at the join of its two times with the
product of its diffs.  A step where one side changed, over int64
columns, is one compiled call (:func:`join_table`: the seek into every
batch of the other side's trace, the pairs, their times and products,
and a small output's consolidation).  Otherwise a batch meets a trace in
one compiled pass per trie batch of the trace (the trace seek kernel over
the batch's keys as they are: a binary search per run of equal keys, then
every pair), and two batches meet by ``searchsorted`` ranges.  A product
of diffs past int64 is an error, never a wrapped count.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.columnar import frozen, ranges, wrapping_products
from ddflow.base.consolidate import consolidate
from ddflow.base.kernels import SMALL_ROWS, _consolidate_small, consolidate_rows, consolidated_split, kernels
from ddflow.base.native import kernel
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError
from ddflow.graph.node import Node
from ddflow.graph.scope import Scope
from ddflow.operators.arrange import ArrangeNode
from ddflow.operators.route import route_of
from ddflow.traces import Trace
from ddflow.traces import layout
from ddflow.traces.arena import has_room, insert_fields
from ddflow.traces.layout import gather_found, key_positions, seek_table


def match_pairs(a_keys: np.ndarray, b_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) with ``a_keys[i] == b_keys[j]``, all of them."""
    if not len(a_keys) or not len(b_keys):
        z = np.zeros(0, dtype=np.int64)
        return z, z
    order = np.argsort(b_keys, kind="stable")
    bs = b_keys[order]
    lo = np.searchsorted(bs, a_keys, side="left")
    hi = np.searchsorted(bs, a_keys, side="right")
    counts = hi - lo
    ia = np.repeat(np.arange(len(a_keys), dtype=np.int64), counts)
    ib = order[ranges(lo, hi)]
    return ia, ib


def join_updates(a: Updates, b: Updates, where: str = "join") -> Updates:
    """All matching pairs of ``a`` and ``b`` as ``(key, *a_vals, *b_vals)`` updates."""
    ia, ib = match_pairs(a.cols[0], b.cols[0])
    cols = (a.cols[0][ia], *(c[ia] for c in a.cols[1:]), *(c[ib] for c in b.cols[1:]))
    return Updates(cols, np.maximum(a.times[ia], b.times[ib]), _products(a.diffs[ia], b.diffs[ib], where),
                   (a.kinds[0], *a.kinds[1:], *b.kinds[1:]))


def _products(x: np.ndarray, y: np.ndarray, where: str) -> np.ndarray:
    """``x * y`` elementwise; a product past int64 is a SchemaError naming ``where``.  O(n)."""
    root = 3037000499  # floor(sqrt(2**63 - 1)): smaller factors cannot overflow
    if not len(x) or not (((x > root) | (x < -root)).any() or ((y > root) | (y < -root)).any()):
        return x * y
    p, wrapped = wrapping_products(x, y)
    if wrapped.any():
        raise SchemaError(f"{where}: a product of diffs does not fit in int64")
    return p


def join_trace(delta: Updates, trace: Trace, delta_left: bool, where: str = "join") -> Updates:
    """Every pair of an update of ``delta`` and an update in ``trace`` with the same key.

    Records are ``(key, *left_vals, *right_vals)``, the delta on the left
    if ``delta_left``; times are joined (coordinatewise max), diffs
    multiplied.  Cost: per trie batch of the trace, one compiled seek of
    the batch's keys as they are (``kernels().seek``: a binary search per
    run of equal keys, then the pairs) and one gather per column,
    O(d log n + output).  A trace of int64 columns is met in one compiled
    call over all its batches (:func:`traces.layout.seek_table`).
    """
    if trace.ints and delta.cols[0].dtype == np.int64:
        q, tcols, ttimes, tdiffs = seek_table(trace.spine.table().matrix, np.ascontiguousarray(delta.cols[0]),
                                              len(trace.kinds), trace.depth, where)
        if not len(q):
            return None
        mine = tuple(c[q] for c in delta.cols[1:])
        theirs = tuple(tcols[1:])
        vals = mine + theirs if delta_left else theirs + mine
        kinds = delta.kinds + trace.kinds[1:] if delta_left else trace.kinds + delta.kinds[1:]
        return Updates((tcols[0], *vals), np.maximum(delta.times[q], ttimes),
                       _products(delta.diffs[q], tdiffs, where), kinds)
    parts = []
    seek = kernels().seek
    probe, = frozen(delta.cols[0])  # one compiled seek, whether the delta's keys are writable or not
    for b in trace.spine.batches():
        if not len(b.keys):
            continue
        ia, vrow, urow = seek(b.keys, b.key_offs, b.val_offs, probe)
        if not len(ia):
            continue
        mine = tuple(c[ia] for c in delta.cols[1:])
        theirs = tuple(v[vrow] for v in b.vals)
        vals = mine + theirs if delta_left else theirs + mine
        kinds = delta.kinds + b.kinds[1:] if delta_left else b.kinds + delta.kinds[1:]
        parts.append(Updates((delta.cols[0][ia], *vals), np.maximum(delta.times[ia], b.times[urow]),
                             _products(delta.diffs[ia], b.diffs[urow], where), kinds))
    return Updates.concat(parts) if len(parts) > 1 else (parts[0] if parts else None)


def checked_product(a, b):
    """``(a * b, True)``, or ``(0, False)`` when the product leaves int64.  A kernel helper.

    Decided on the magnitudes as uint64 before multiplying (a compiled
    signed product that wraps is undefined, so a check after it can be
    optimized away): ``|a| * |b|`` fits under ``2**63 - 1``, or ``2**63``
    when the product is negative.
    """
    ua = np.uint64(-(a + 1)) + np.uint64(1) if a < 0 else np.uint64(a)
    ub = np.uint64(-(b + 1)) + np.uint64(1) if b < 0 else np.uint64(b)
    limit = np.uint64(0x8000000000000000) if (a < 0) != (b < 0) else np.uint64(0x7FFFFFFFFFFFFFFF)
    if ua != np.uint64(0) and ub > limit // ua:
        return 0, False
    return a * b, True


@kernel("operators")
def join_table(T, C, dtimes, ddiffs, arity, depth, delta_left, limit):
    """One side of a join step in one call: a delta's updates against every batch of table ``T``.

    ``C``: the delta's columns, an ``(m, n)`` int64 matrix (row 0 the
    key); ``dtimes, ddiffs`` its times and diffs; ``arity``, ``depth``:
    the trace's.  Every pair of a delta update and a trace update of the
    same key becomes a row of ``M``, the output's sort key: the key, the
    delta's values then the trace's (``delta_left``) or the other way
    round, then the join of the two times; its diff is the product.

    Returns ``(M, diffs, sel, sums, status, total, cols, times)``.
    ``status`` 0: up to ``SMALL_ROWS`` rows are also consolidated (``sel``
    the first row of each group with a nonzero ``sums``, in order), and
    ``cols`` (``(width, k)``) and ``times`` are those rows of ``M``, split,
    the step's output; 1: ``M`` is not consolidated
    (more rows); 2: a product or a sum left int64 (after a product, ``M``
    and ``diffs`` hold the rows before it); 3: more than ``limit``
    updates would be read, and only ``total`` was counted.
    O(k log n) per batch for k delta updates, plus O(output), O(output^2)
    consolidating a small one.
    """
    m = C.shape[0]
    width = m + arity - 1
    pos, total = key_positions(T, C[0])
    none = np.empty(0, dtype=np.int64)
    M = np.empty((0 if total > limit else total, width + depth), dtype=np.int64)
    D = np.empty(M.shape[0], dtype=np.int64)
    OC, OT = np.empty((width, 0), dtype=np.int64), np.empty((0, depth), dtype=np.int64)
    if total > limit:
        return M, D, none, none, 3, total, OC, OT
    q, cols, times, diffs = gather_found(T, pos, total, arity, depth)
    mine = 1 if delta_left else arity  # where the delta's values start in a row
    theirs = m if delta_left else 1
    for k in range(total):
        i = q[k]
        M[k, 0] = cols[0, k]
        for j in range(1, m):
            M[k, mine + j - 1] = C[j, i]
        for j in range(1, arity):
            M[k, theirs + j - 1] = cols[j, k]
        for c in range(depth):
            M[k, width + c] = max(dtimes[i, c], times[k, c])
        d, ok = checked_product(ddiffs[i], diffs[k])
        if not ok:  # the rows before this one (the rest of M and D is unwritten: not returned)
            return M[:k], D[:k], none, none, 2, total, OC, OT
        D[k] = d
    if total > SMALL_ROWS:  # the caller sorts with numpy
        return M, D, none, none, 1, total, OC, OT
    sel, sums, overflow = _consolidate_small(M, D)
    if overflow:
        return M, D, sel, sums, 2, total, OC, OT
    OC, OT = np.empty((width, len(sel)), dtype=np.int64), np.empty((len(sel), depth), dtype=np.int64)
    for x in range(len(sel)):
        for j in range(width):
            OC[j, x] = M[sel[x], j]
        for c in range(depth):
            OT[x, c] = M[sel[x], width + c]
    return M, D, sel, sums, 0, total, OC, OT


@kernel("operators")
def join_table_into(T, C, dtimes, ddiffs, arity, depth, delta_left, limit, idx, buf, used, At, at):
    """:func:`join_table`, its output's fields ``idx`` then written into an arrangement's arena, in one call.

    What a join step whose output is routed to an arrangement
    (:mod:`ddflow.operators.route`) does: the step's consolidated output,
    projected to fields ``idx``, is consolidated again and written as a
    batch at ``buf[used:]``, its table row at ``At[at]``
    (:func:`traces.arena.insert_fields`).  An output of more than
    ``SMALL_ROWS`` updates (status 1 from :func:`join_table`) is
    consolidated here too (:func:`~ddflow.base.kernels.consolidated_split`,
    a merge sort past ``SMALL_ROWS``), and written where it has at
    most ``ARENA_ROWS`` rows and the arena the words left for them all
    (:func:`traces.arena.has_room`; asked before consolidating, so no
    sort is wasted): at one update an advance, a join in a loop round of
    a label flood makes a hundred.  Returns ``(M, diffs,
    status, k, cols, times, diffs_in, used)``: :func:`join_table`'s ``M``,
    diffs and status (``M`` meaningful only at status 1, when nothing was
    written); ``k`` the number of updates in the join's consolidated
    output (status 0); what the arrangement took and the words now used.
    A sum past int64 while inserting is status 2, with nothing written.
    Cost: as :func:`join_table`, plus O(k^2) for the insert of k up to
    ``SMALL_ROWS``, O(n log n) for n rows beyond.
    """
    M, D, sel, sums, status, total, OC, OT = join_table(T, C, dtimes, ddiffs, arity, depth, delta_left, limit)
    if status == 1 and has_room(buf, used, total, len(idx), depth):  # room for the rows before consolidation
        OC, OT, sums, overflow = consolidated_split(M, D, M.shape[1] - depth)
        status = 2 if overflow else 0
    k = len(sums)
    if status == 0 and k:
        cols, times, diffs, now_used, overflow = insert_fields(OC, OT, sums, idx, buf, used, At, at)
        if not overflow:
            return M, D, 0, k, cols, times, diffs, now_used
        status = 2
    none1, noC, noT = np.empty(0, dtype=np.int64), np.empty((len(idx), 0), dtype=np.int64), np.empty((0, depth), dtype=np.int64)
    return M, D, status, k, noC, noT, none1, used


#: What :meth:`JoinNode._join_one` returns when the step's output went straight into an arrangement (nothing to emit).
ROUTED = Updates.empty(("i",), 1)


class JoinNode(Node):
    """Joins two arrangements; port 0 gets the left batches, port 1 the right."""

    def __init__(self, scope: Scope, name: str, left: ArrangeNode, right: ArrangeNode):
        super().__init__(scope, name, n_inputs=2)
        self.left, self.right = left, right
        left.connect(self, 0)
        right.connect(self, 1)

    def step(self, bound: np.ndarray) -> None:
        da, db = self.dequeue(0), self.dequeue(1)
        if da is None and db is None:
            return
        ta, tb = self.left.trace, self.right.trace
        if ta is not None and tb is not None and ta.kinds[0] != tb.kinds[0]:
            raise SchemaError(f"join {self.name!r}: key kinds differ, {ta.kinds[0]!r} on the left and {tb.kinds[0]!r} on the right")
        where = f"join {self.name!r}"
        if (da is None) != (db is None):  # the usual step: one side changed
            d, t, left = (da, tb, True) if da is not None else (db, ta, False)
            if t is None:
                return
            u = self._join_one(d, t, left, where)
            if u is not None:
                if len(u):  # ROUTED is empty: the arrangement took the output
                    self.emit(u)
                return
        parts = []
        if da is not None and tb is not None:
            parts.append(join_trace(da, tb, True, where))
        if db is not None and ta is not None:
            parts.append(join_trace(db, ta, False, where))
        if da is not None and db is not None:
            both = join_updates(da, db, where)
            parts.append(both.with_diffs(-both.diffs))
        parts = [p for p in parts if p is not None and len(p)]
        if parts:
            self.emit(consolidate(Updates.concat(parts)))

    def _join_one(self, delta: Updates, trace: Trace, delta_left: bool, where: str) -> Updates | None:
        """``consolidate(join_trace(delta, trace, delta_left))`` in one compiled call, where it applies.

        Applies to int64 columns on both sides and outputs of up to
        ``CHECK_ABOVE`` updates; None otherwise, and wherever a product or a
        sum leaves int64 (the general path then raises, naming the record).
        Where the output is routed to an arrangement (:func:`~ddflow.operators.route.route_of`), an
        output of up to ``SMALL_ROWS`` updates goes into it in the same
        call (:func:`join_table_into`), and the result is :data:`ROUTED`;
        so does one of up to ``ARENA_ROWS`` where the arena has the room.
        """
        if not trace.ints or any(c.dtype != np.int64 for c in delta.cols):
            return None
        # Read-only, however the delta was made: one compiled join_table (see `frozen`).  C is this step's own
        # array or view, so its flag is set in place; the delta's arrays are frozen only when writable.
        C = np.array(delta.cols) if len(delta.cols) > 1 else delta.cols[0].reshape(1, -1)
        C.flags.writeable = False
        times, diffs = delta.times, delta.diffs
        if times.flags.writeable or diffs.flags.writeable:
            times, diffs = frozen(times, diffs)
        kinds = delta.kinds + trace.kinds[1:] if delta_left else trace.kinds + delta.kinds[1:]
        route = route_of(self)
        into = route.target(kinds, (self.left.trace, self.right.trace)) if route is not None else None
        if into is not None:  # asked before the table is read: making room may merge
            M, D, status, k, cols, ts, ds, used = join_table_into(
                trace.spine.table().matrix, C, times, diffs, len(trace.kinds), trace.depth, delta_left,
                layout.CHECK_ABOVE, *into)
            if status == 0:
                route.written(kinds, k, cols, ts, ds, used)
                return ROUTED
        else:
            M, D, sel, sums, status, _, OC, OT = join_table(trace.spine.table().matrix, C, times, diffs,
                                                            len(trace.kinds), trace.depth, delta_left,
                                                            layout.CHECK_ABOVE)
            if status == 0:
                return Updates.unchecked(tuple(OC), OT, sums, kinds)
        if status >= 2:
            return None
        try:
            sel, sums = consolidate_rows(M, D, where)
        except SchemaError:
            return None
        width = M.shape[1] - trace.depth
        K = M[sel]
        return Updates(tuple(np.ascontiguousarray(K[:, j]) for j in range(width)), np.ascontiguousarray(K[:, width:]),
                       sums, kinds)
