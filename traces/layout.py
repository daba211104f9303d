"""A trace's batches as one int64 matrix of addresses: every batch readable by one compiled call.

Reading a trace from Python costs a few kernel and numpy calls per batch
(a seek, one gather per column, a concatenation): at one update per
step, with five or so small batches per trace, those calls, not the
work, are the step's cost.  :class:`BatchTable` describes all of a
spine's batches in one matrix, one row per batch (:data:`FIELDS`), which
a kernel takes as a single argument and reads through
:mod:`ddflow.base.address` views.  The spine keeps its table until its
list of batches changes, and the table keeps the batches (and any
contiguous copies made for it) alive, so the addresses stay valid for
as long as the table is referenced.

Only traces whose columns are all int64 have a table (float columns sort
by ``float_keys`` order, which the kernels here do not compare in).

Kernels in this module:

* :func:`seek_table_within`: every update of the given keys in every
  batch, in one call (what :meth:`traces.trace.Trace.seek` does per
  batch); :func:`seek_table` calls it, checking first that a large output
  fits in memory.

>>> from ddflow.base.interner import Interner
>>> from ddflow.base.updates import from_rows
>>> from ddflow.traces.batch import Batch
>>> b = Batch.from_updates(from_rows([(1, 10), (2, 20), (2, 21)], 0, 1, Interner()))
>>> t = BatchTable.of([b, b], depth=1, arity=2)
>>> q, cols, times, diffs = seek_table(t.matrix, np.array([2]), 2, 1)
>>> q.tolist(), cols.tolist(), diffs.tolist()
([0, 0, 0, 0], [[2, 2, 2, 2], [20, 21, 20, 21]], [1, 1, 1, 1])
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ddflow.base import memory
from ddflow.base.address import address, view_2d, view_i32, view_i64
from ddflow.base.kernels import _trie_starts, sort_small
from ddflow.base.native import kernel
from ddflow.errors import DataflowError

#: The columns of a table row: counts, then addresses (offsets in 32 or 64 bits: the other view is empty).
NKEYS, NVALS, NUPD, KEYS, KOFFS64, KOFFS32, VOFFS64, VOFFS32, TIMES, DIFFS, VAL0 = range(11)
FIELDS = ("nkeys", "nvals", "nupd", "keys", "key_offs64", "key_offs32", "val_offs64", "val_offs32",
          "times", "diffs", "val0")


def _contiguous(a: np.ndarray, keep: list) -> np.ndarray:
    if a.flags.c_contiguous:
        return a
    c = np.ascontiguousarray(a)
    keep.append(c)
    return c


def _offsets(a: np.ndarray, keep: list) -> tuple[int, int]:
    a = _contiguous(a, keep)
    return (address(a), 0) if a.dtype == np.int64 else (0, address(a))


def batch_row(b, keep: list) -> np.ndarray:
    """One batch's row of the table (``keep`` collects copies the row points into).  O(arity), O(n) if a copy is needed."""
    row = np.zeros(VAL0 + len(b.vals), dtype=np.int64)
    row[NKEYS], row[NVALS], row[NUPD] = len(b.keys), len(b.val_offs) - 1, len(b.diffs)
    row[KEYS] = address(_contiguous(b.keys, keep))
    row[KOFFS64], row[KOFFS32] = _offsets(b.key_offs, keep)
    row[VOFFS64], row[VOFFS32] = _offsets(b.val_offs, keep)
    row[TIMES] = address(_contiguous(b.times, keep))
    row[DIFFS] = address(_contiguous(b.diffs, keep))
    for j, v in enumerate(b.vals):
        row[VAL0 + j] = address(_contiguous(v, keep))
    return row


def build_trie(K, times, diffs):
    """The trie levels and table row of consolidated updates: see :func:`trie_with_row` (a kernel helper).

    The levels are where ``_trie_starts`` (the general build's grouping) finds them.

    ``K`` may be any ``(n, m)`` view (a transposed column-major matrix too).
    """
    n, m = K.shape
    kstarts, vstarts, koffs = _trie_starts(K)
    nk, nv = len(kstarts), len(vstarts)
    keys = np.empty(nk, dtype=np.int64)
    key_offs = np.empty(nk + 1, dtype=np.int32)
    V = np.empty((m - 1, nv), dtype=np.int64)
    val_offs = np.empty(nv + 1, dtype=np.int32)
    for g in range(nk):
        keys[g] = K[kstarts[g], 0]
    for g in range(nk + 1):
        key_offs[g] = koffs[g]
    for v in range(nv):
        val_offs[v] = vstarts[v]
        for j in range(1, m):
            V[j - 1, v] = K[vstarts[v], j]
    val_offs[nv] = n
    return keys, key_offs, V, val_offs, trie_row(keys, key_offs, V, val_offs, times, diffs)


def trie_row(keys, key_offs, V, val_offs, times, diffs):
    """:func:`batch_row`'s row for trie arrays a kernel just made (a kernel helper): offsets int32, arrays
    C-contiguous, the value columns the rows of ``V``.  O(arity)."""
    nv = V.shape[1]
    row = np.zeros(VAL0 + V.shape[0], dtype=np.int64)
    row[NKEYS] = len(keys)
    row[NVALS] = nv
    row[NUPD] = len(diffs)
    row[KEYS] = keys.ctypes.data
    row[KOFFS32] = key_offs.ctypes.data
    row[VOFFS32] = val_offs.ctypes.data
    row[TIMES] = times.ctypes.data
    row[DIFFS] = diffs.ctypes.data
    for j in range(V.shape[0]):
        row[VAL0 + j] = V.ctypes.data + 8 * j * nv
    return row




@kernel("traces")
def trie_with_row(K, times, diffs):
    """A batch's trie levels and its table row, from consolidated updates, in one compiled call.

    ``K`` is the ``(n, m)`` int64 matrix of the updates' record columns
    (key first), sorted and consolidated with their ``times`` and
    ``diffs`` (both C-contiguous; the batch keeps them as they are).
    Returns ``(keys, key_offs, V, val_offs, row)``: the distinct keys, for
    each key its first value row (plus the end), the value columns as the
    rows of ``V`` (``(m - 1, values)``), for each value row its first
    update (plus the end), and :func:`batch_row`'s row for these arrays
    (offsets in 32 bits, as ``offset_dtype`` gives below 2**31 updates).
    What building a batch from a small step costs in one call instead of
    a grouping kernel, a few numpy calls and one address per array.
    O(n m).
    """
    return build_trie(K, times, diffs)


def all_int(batch) -> bool:
    """Whether every column of ``batch`` is int64 (what a table can describe)."""
    return batch.keys.dtype == np.int64 and all(v.dtype == np.int64 for v in batch.vals)


def empty_table(arity: int) -> np.ndarray:
    """The table of no batches of records of ``arity`` fields.  O(1)."""
    return np.zeros((0, VAL0 + arity - 1), dtype=np.int64)


class BatchTable:
    """The table of some batches, and the references that keep its addresses valid.

    ``matrix`` has one row per non-empty batch, oldest first.  Cost:
    O(batches) to build, plus a one-off O(arity) row per batch (cached on
    the batch).  :meth:`appended` is O(1) amortized: the tables a spine
    makes by appending share one buffer with spare rows.
    """

    __slots__ = ("matrix", "_keep", "_room")

    def __init__(self, matrix: np.ndarray, keep: list, room: list | None = None):
        self.matrix = matrix
        self._keep = keep
        # [buffer, rows used]: ``matrix`` is the buffer's first rows while this table is the buffer's newest.
        self._room = room

    @property
    def batches(self) -> list:
        """The batches ``matrix`` describes, a row each, oldest first (what keeps its addresses valid).  O(1)."""
        return self._keep

    @classmethod
    def of(cls, batches: Sequence, depth: int, arity: int) -> "BatchTable":
        keep: list = []
        rows = []
        for b in batches:
            if not len(b.diffs):
                continue
            row = b.table_row()
            keep.append(b)
            rows.append(row)
        matrix = np.stack(rows) if rows else empty_table(arity)
        return cls(matrix, keep)

    def appended(self, batch) -> "BatchTable":
        """This table with ``batch`` after its batches (the table of a spine that just had it appended).

        O(1) amortized: the row goes into the spare rows of a buffer shared
        with this table, whose own rows stay as they are; appending to an
        older table of the same buffer copies.  O(batches) when the
        buffer grows.
        """
        if not len(batch.diffs):
            return self
        n = len(self.matrix)
        room = self._room
        if room is None or room[1] != n or n == len(room[0]):
            buf = np.empty((max(2 * n, 8), self.matrix.shape[1]), dtype=np.int64)
            buf[:n] = self.matrix
            room = [buf, n]
        room[0][n] = batch.table_row()
        room[1] = n + 1
        return BatchTable(room[0][: n + 1], self._keep + [batch], room)


    def replaced(self, olds: Sequence, new) -> "BatchTable | None":
        """This table with the rows of ``olds`` (consecutive batches of it, oldest first) replaced by ``new``'s.

        A merge's result takes its inputs' place; the other rows are kept.  Empty batches have no row.  None
        when ``olds`` are not consecutive rows here (the caller builds the table anew).  O(batches).
        """
        olds, keep = [b for b in olds if len(b.diffs)], self._keep
        p = len(keep) - len(olds)  # most often the newest rows (the spine's tail)
        if olds and (p < 0 or keep[p] is not olds[0]):
            p = next((i for i, b in enumerate(keep) if b is olds[0]), -1)
        q = p + len(olds)
        if not olds or p < 0 or len(keep) < q or any(a is not b for a, b in zip(keep[p:q], olds)):
            return None
        mid = [new] if len(new.diffs) else []
        n = len(keep) - len(olds) + len(mid)
        buf = np.empty((max(2 * n, 8), self.matrix.shape[1]), dtype=np.int64)
        buf[:p] = self.matrix[:p]
        if mid:
            buf[p] = new.table_row()
        buf[p + len(mid) : n] = self.matrix[q:]
        return BatchTable(buf[:n], keep[:p] + mid + keep[q:], [buf, n])


# -- kernels ------------------------------------------------------------------------------------------


def offset(o64, o32, i):
    """Offset ``i`` of a batch, whichever width its offsets have (the other view is empty)."""
    return o64[i] if len(o64) else np.int64(o32[i])


def key_offsets(T, b):
    """Batch ``b``'s key offsets as ``(64-bit view, 32-bit view)``, the one of the other width empty."""
    n = T[b, NKEYS] + 1
    return view_i64(T[b, KOFFS64], n if T[b, KOFFS64] else 0), view_i32(T[b, KOFFS32], n if T[b, KOFFS32] else 0)


def val_offsets(T, b):
    """Batch ``b``'s value offsets as ``(64-bit view, 32-bit view)``, the one of the other width empty."""
    n = T[b, NVALS] + 1
    return view_i64(T[b, VOFFS64], n if T[b, VOFFS64] else 0), view_i32(T[b, VOFFS32], n if T[b, VOFFS32] else 0)


def find_key(keys, x):
    """Position of ``x`` in the sorted ``keys``, or -1.  O(log n)."""
    a, b = 0, len(keys)
    while a < b:
        h = (a + b) >> 1
        if keys[h] < x:
            a = h + 1
        else:
            b = h
    return a if a < len(keys) and keys[a] == x else -1


#: Above this many updates, a seek asks whether its output fits in memory before it allocates.
CHECK_ABOVE = 1 << 22
#: What a seek's output costs, in copies of it, by the time its caller has used it (a join gathers,
#: multiplies, concatenates and consolidates): the memory a seek must find free.
COPIES = 5


def seek_table(T, keys, arity, depth, where: str = "seek"):
    """Every update of ``keys`` (int64, any order) in every batch of table ``T``.

    Returns ``(q, cols, times, diffs)``: per update the index of its query
    key, its columns (an ``(arity, n)`` matrix: each column contiguous),
    ``(n, depth)`` time and diff; grouped by batch, then by query.
    O(k log n) per batch for k keys, plus O(output), in one compiled call
    (:func:`seek_table_within`).  An output over ``CHECK_ABOVE`` updates
    whose ``COPIES`` would not fit in the memory available is an error
    naming ``where`` and the sizes, raised before the output is allocated
    (the alternative is the OOM killer); so is a table of key positions
    (batches x keys) that would not fit.
    """
    lookups = 8 * T.shape[0] * len(keys)  # the kernel's own table of where each key sits in each batch
    if lookups > 8 * CHECK_ABOVE:
        _check_fits(where, lookups, f"look up {len(keys):,} keys in {T.shape[0]:,} batches")
    q, cols, times, diffs, total = seek_table_within(T, keys, arity, depth, CHECK_ABOVE)
    if total > CHECK_ABOVE:
        _check_fits(where, lookups + COPIES * total * 8 * (arity + depth + 2),
                    f"read {total:,} updates for {len(keys):,} lookups")
        q, cols, times, diffs, total = seek_table_within(T, keys, arity, depth, total)  # searches again
    return q, cols, times, diffs


def _check_fits(where: str, need: int, what: str) -> None:
    """A DataflowError naming ``where`` and ``what`` the step would do when ``need`` bytes exceed the memory available.

    Memory unknown: no error.
    """
    free = memory.available_bytes()
    if free is not None and need > free:
        raise DataflowError(
            f"{where}: one step would {what} (about {need / 2**30:.1f} GiB "
            f"with what follows), more than the {free / 2**30:.1f} GiB of memory available. An output that grows "
            "with the square of the input per key and time (an aggregate joined back to every row of its group, "
            "at many distinct times) needs fewer distinct times per step, or another plan")


def key_positions(T, keys):
    """``(pos, total)``: where each of ``keys`` sits in each batch of table ``T``, and how many updates they hold.

    ``pos[b, i]`` is the position of ``keys[i]`` among batch ``b``'s keys,
    -1 if absent; ``total`` counts every update of every found key, once
    per query.  What a seek counts before it allocates its output.  A
    kernel helper.  O(k log n) per batch for k keys.
    """
    nb = T.shape[0]
    nk = len(keys)
    pos = np.empty((nb, nk), dtype=np.int64)
    total = 0
    for b in range(nb):
        bk = view_i64(T[b, KEYS], T[b, NKEYS])
        ko64, ko32 = key_offsets(T, b)
        vo64, vo32 = val_offsets(T, b)
        for i in range(nk):
            p = find_key(bk, keys[i])
            pos[b, i] = p
            if p >= 0:
                total += offset(vo64, vo32, offset(ko64, ko32, p + 1)) - offset(vo64, vo32, offset(ko64, ko32, p))
    return pos, total


def gather_found(T, pos, total, arity, depth):
    """Every update :func:`key_positions` found: ``(q, cols, times, diffs)``, grouped by batch, then by query.

    ``q`` the index of each update's query key, ``cols`` an ``(arity, total)``
    matrix.  A kernel helper.  O(total).
    """
    q = np.empty(total, dtype=np.int64)
    cols = np.empty((arity, total), dtype=np.int64)
    times = np.empty((total, depth), dtype=np.int64)
    diffs = np.empty(total, dtype=np.int64)
    k = 0
    for b in range(T.shape[0]):
        bk = view_i64(T[b, KEYS], T[b, NKEYS])
        ko64, ko32 = key_offsets(T, b)
        vo64, vo32 = val_offsets(T, b)
        bt = view_2d(T[b, TIMES], T[b, NUPD], depth)
        bd = view_i64(T[b, DIFFS], T[b, NUPD])
        for i in range(pos.shape[1]):
            p = pos[b, i]
            if p < 0:
                continue
            for v in range(offset(ko64, ko32, p), offset(ko64, ko32, p + 1)):
                for u in range(offset(vo64, vo32, v), offset(vo64, vo32, v + 1)):
                    q[k] = i
                    cols[0, k] = bk[p]
                    for j in range(1, arity):
                        cols[j, k] = view_i64(T[b, VAL0 + j - 1], T[b, NVALS])[v]
                    for c in range(depth):
                        times[k, c] = bt[u, c]
                    diffs[k] = bd[u]
                    k += 1
    return q, cols, times, diffs


@kernel("traces")
def seek_table_within(T, keys, arity, depth, limit):
    """:func:`seek_table`'s kernel, plus the number of updates found: ``(q, cols, times, diffs, total)``.

    When ``total`` exceeds ``limit`` it returns after counting, the arrays
    empty (no output is allocated; the count needs a batches x keys table
    of positions).  O(k log n) per batch, plus O(output).
    """
    pos, total = key_positions(T, keys)
    if total > limit:
        return (np.empty(0, dtype=np.int64), np.empty((arity, 0), dtype=np.int64), np.empty((0, depth), dtype=np.int64),
                np.empty(0, dtype=np.int64), total)
    q, cols, times, diffs = gather_found(T, pos, total, arity, depth)
    return q, cols, times, diffs, total


def lower_bound_from(keys, x, lo):
    """The first position at or after ``lo`` whose key is not below ``x`` (``keys`` sorted; ``x`` at least
    ``keys[lo - 1]``): a galloping search, O(log d) for a distance d, so sorted queries cost O(q log(n / q))."""
    n = len(keys)
    step = 1
    hi = lo
    while hi < n and keys[hi] < x:
        lo = hi + 1
        hi += step
        step *= 2
    if hi > n:
        hi = n
    while lo < hi:
        h = (lo + hi) >> 1
        if keys[h] < x:
            lo = h + 1
        else:
            hi = h
    return lo


def value_range(T, b, lo, hi, groups, g, ng):
    """Value rows ``[lo, hi)`` of one key in batch ``b`` narrowed to those whose first ``ng - 1`` values
    equal group ``g``'s: a binary search per value column (rows are sorted within a key).  O(ng log n)."""
    for j in range(1, ng):
        col = view_i64(T[b, VAL0 + j - 1], T[b, NVALS])
        x = groups[j, g]
        a, c = lo, hi
        while a < c:
            h = (a + c) >> 1
            if col[h] < x:
                a = h + 1
            else:
                c = h
        first = a
        c = hi
        while a < c:
            h = (a + c) >> 1
            if col[h] <= x:
                a = h + 1
            else:
                c = h
        lo, hi = first, a
    return lo, hi


#: A group's updates up to this many are put in time order by insertion, in place; more by a merge sort.
INSERTION_RUN = 64
#: A longer group with at most this many distinct first time coordinates is sorted by counting them
#: (a loop's groups hold many updates at few outer times); with more, a stable argsort.
COUNT_DISTINCT = 16


def order_by_time(cols, times, diffs, start, k, ng):
    """Rows ``[start, k)`` of ``cols``/``times``/``diffs`` stably sorted by first time coordinate, in place.

    The rows are one group's updates, so their first ``ng`` columns are
    equal and stay put.  They come as one time-ordered run per batch
    (and value), the batches oldest first, so they are often in order
    already.  Up to ``INSERTION_RUN`` rows an insertion sort: O(n) when
    in order, allocating nothing; more, a copy and a stable counting sort
    by first coordinate when they hold at most ``COUNT_DISTINCT``
    distinct ones, else a stable argsort.  O(n * runs) for the few,
    O(n * distinct) or O(n log n) for the many.
    """
    first = start + 1  # the first row out of order
    while first < k and times[first, 0] >= times[first - 1, 0]:
        first += 1
    if first >= k:
        return
    arity, depth = cols.shape[0], times.shape[1]
    if k - start <= INSERTION_RUN:
        for x in range(first, k):
            t0 = times[x, 0]
            if t0 >= times[x - 1, 0]:
                continue
            y = x - 1
            while y > start and times[y - 1, 0] > t0:
                y -= 1
            for j in range(ng, arity):  # row x moves to y, rows [y, x) one down
                c = cols[j, x]
                for z in range(x, y, -1):
                    cols[j, z] = cols[j, z - 1]
                cols[j, y] = c
            for j in range(depth):
                c = times[x, j]
                for z in range(x, y, -1):
                    times[z, j] = times[z - 1, j]
                times[y, j] = c
            d = diffs[x]
            for z in range(x, y, -1):
                diffs[z] = diffs[z - 1]
            diffs[y] = d
        return
    n = k - start
    tc = cols[ng:, start:k].copy()
    tt = times[start:k].copy()
    td = diffs[start:k].copy()
    seen = np.empty(COUNT_DISTINCT, dtype=np.int64)  # the distinct first coordinates, while few
    nd = 0
    for x in range(n):
        t0 = tt[x, 0]
        d = 0
        while d < nd and seen[d] != t0:
            d += 1
        if d == nd:
            if nd == COUNT_DISTINCT:
                nd = -1
                break
            seen[nd] = t0
            nd += 1
    if nd < 0:
        order = np.argsort(tt[:, 0], kind="mergesort")
    else:  # a stable counting sort by the few distinct coordinates
        sort_small(seen[:nd])
        pos = np.zeros(nd + 1, dtype=np.int64)
        bucket = np.empty(n, dtype=np.int64)
        for x in range(n):
            d = 0
            while seen[d] != tt[x, 0]:
                d += 1
            bucket[x] = d
            pos[d + 1] += 1
        for d in range(nd):
            pos[d + 1] += pos[d]
        order = np.empty(n, dtype=np.int64)
        for x in range(n):
            order[pos[bucket[x]]] = x
            pos[bucket[x]] += 1
    for x in range(n):
        o = order[x]
        for j in range(ng, arity):
            cols[j, start + x] = tc[j - ng, o]
        for c in range(depth):
            times[start + x, c] = tt[o, c]
        diffs[start + x] = td[o]


@kernel("traces")
def histories(T, groups, arity, depth):
    """Every update in table ``T`` of the records that start with one of ``groups``' rows.

    ``groups`` is an ``(ng, G)`` matrix of sorted unique rows of the
    trace's first ``ng`` columns (key, then values).  Returns ``(gid, cols,
    times, diffs)``: per update its group's index, its ``(arity, n)``
    columns, time and diff, sorted by (group, first time coordinate),
    stably.  Per batch of n keys, O(G log(n / G)) to find the keys (a
    galloping walk) and O(ng log v) per group for its v values; plus
    sorting each group's updates where the batches left them out of time
    order.
    """
    nb = T.shape[0]
    ng = groups.shape[0]
    G = groups.shape[1]
    vlo = np.zeros((nb, G), dtype=np.int64)
    vhi = np.zeros((nb, G), dtype=np.int64)
    total = 0
    for b in range(nb):
        bk = view_i64(T[b, KEYS], T[b, NKEYS])
        ko64, ko32 = key_offsets(T, b)
        vo64, vo32 = val_offsets(T, b)
        cursor = 0
        for g in range(G):  # groups are sorted: each batch's keys are walked once, galloping
            cursor = lower_bound_from(bk, groups[0, g], cursor)
            if cursor >= len(bk) or bk[cursor] != groups[0, g]:
                continue
            p = cursor
            lo, hi = value_range(T, b, offset(ko64, ko32, p), offset(ko64, ko32, p + 1), groups, g, ng)
            vlo[b, g] = lo
            vhi[b, g] = hi
            total += offset(vo64, vo32, hi) - offset(vo64, vo32, lo)
    gid = np.empty(total, dtype=np.int64)
    cols = np.empty((arity, total), dtype=np.int64)
    times = np.empty((total, depth), dtype=np.int64)
    diffs = np.empty(total, dtype=np.int64)
    k = 0
    for g in range(G):
        start = k
        for b in range(nb):
            if vhi[b, g] == vlo[b, g]:
                continue
            vo64, vo32 = val_offsets(T, b)
            bt = view_2d(T[b, TIMES], T[b, NUPD], depth)
            bd = view_i64(T[b, DIFFS], T[b, NUPD])
            for v in range(vlo[b, g], vhi[b, g]):
                for u in range(offset(vo64, vo32, v), offset(vo64, vo32, v + 1)):
                    gid[k] = g
                    for j in range(ng):  # value_range matched the group's columns
                        cols[j, k] = groups[j, g]
                    for j in range(ng, arity):
                        cols[j, k] = view_i64(T[b, VAL0 + j - 1], T[b, NVALS])[v]
                    for c in range(depth):
                        times[k, c] = bt[u, c]
                    diffs[k] = bd[u]
                    k += 1
        order_by_time(cols, times, diffs, start, k, ng)
    return gid, cols, times, diffs
