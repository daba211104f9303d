"""A trace: a spine shared through reader handles, compacted to the readers' meet.

Each :class:`TraceHandle` holds its own logical compaction frontier: a
promise that its owner will only ask about accumulations at times beyond
it.  The trace advances times during merges only to the meet of all live
handles' frontiers, so a lagging reader holds compaction back and a
dropped reader releases its hold.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ddflow.base.columnar import frozen
from ddflow.base.kernels import SMALL_ROWS, kernels, key_matrix
from ddflow.base.consolidate import consolidate
from ddflow.base.lattice import Antichain, MutableAntichain, as_time
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError, UsageError

from .batch import Batch, Description, shrunk
from .layout import BatchTable, seek_table
from .spine import Spine


class Trace:
    """The updates of an arranged collection: keys (first column), values, times, diffs.

    >>> from ddflow.base.interner import Interner
    >>> from ddflow.base.updates import from_rows
    >>> it = Interner(); t = Trace(("i", "i"), depth=1)
    >>> _ = t.insert_updates(from_rows([(1, 10), (2, 20)], 0, 1, it))
    >>> _ = t.insert_updates(from_rows([(1, 10)], 1, -1, it))
    >>> len(t), t.contents(0), t.contents(1)
    (3, {(1, 10): 1, (2, 20): 1}, {(2, 20): 1})
    """

    def __init__(self, kinds: tuple[str, ...], depth: int, name: str = "trace"):
        self.name = name
        self.kinds = tuple(kinds)
        self.depth = depth
        self._holds = MutableAntichain(depth)
        self._since = Antichain.minimum(depth)
        self.spine = Spine(self.kinds, depth, self.compaction_frontier)
        #: Every column int64: the trace is read by compiled kernels through its spine's table.
        self.ints = "f" not in self.kinds

    # -- compaction ------------------------------------------------------------
    def compaction_frontier(self) -> Antichain:
        """The meet of live readers' frontiers; with no reader, the last one known.  O(1)."""
        return self._since

    def _holds_changed(self, sole: Antichain | None = None) -> None:
        """Recompute the meet after readers' holds moved (kept when the last hold went).

        ``sole``: a frontier of one time that a reader just moved to; when it
        is the only time held, it is the meet, with nothing to recompute.
        """
        if self._holds:
            if sole is not None and self._holds.sole() == next(iter(sole)):
                self._since = sole
            else:
                self._since = self._holds.frontier()

    def reader(self, frontier: Antichain | None = None) -> "TraceHandle":
        """A new handle, at ``frontier`` or at the trace's current compaction frontier.

        Times may already be advanced to the compaction frontier, so a reader
        cannot start behind it: that is a ValueError.
        """
        since = self.compaction_frontier()
        if frontier is None:
            return TraceHandle(self, since)
        if frontier.depth != self.depth:
            raise SchemaError(f"{self.name}: reader frontier depth {frontier.depth}, trace depth {self.depth} (mixed time depths)")
        if not since.dominates(frontier):
            raise UsageError(f"{self.name}: reader frontier {frontier} is behind the trace's compaction frontier {since}")
        return TraceHandle(self, frontier)

    # -- writing ------------------------------------------------------------
    @property
    def upper(self) -> Antichain:
        """The frontier of the times sealed so far by tiled inserts (unchanged by untiled ones)."""
        return self.spine.upper

    def insert(self, batch: Batch) -> None:
        """Insert a sealed batch; cost as :meth:`Spine.insert`, amortized O(log n) merges per update."""
        self.spine.insert(batch)

    def insert_updates(self, u: Updates, upper: Antichain | None = None, consolidated: bool = False) -> Batch:
        """Seal updates into a batch from the trace's upper to ``upper`` and insert it.

        Cost: building the batch (O(n log n), O(n) if ``consolidated``) plus
        the spine's amortized O(log n) merges per update.
        """
        if upper is None:
            # Untiled: the batch may hold any times (a dataflow inserts updates as they arrive), so there
            # is nothing to check them against (the inputs refuse negative times).
            desc, check = Description.covering(self.depth), False
        else:
            desc, check = Description(self.spine.upper, upper, Antichain.minimum(self.depth)), True
        b = Batch.from_updates(u, desc, consolidated=consolidated, check=check)
        self.spine.insert(b)
        return b

    def insert_consolidating(self, u: Updates) -> Updates:
        """Consolidate ``u``, insert it untiled (as :meth:`insert_updates`) and return it consolidated.

        What an arrangement does with every batch it receives.  From one to
        ``SMALL_ROWS`` updates of int64 columns, consolidating and writing
        the batch are one compiled call into the spine's arena
        (:meth:`Spine.insert_small`, :mod:`traces.arena`), with no Python
        object for the batch; otherwise ``consolidate`` then
        :meth:`insert_updates`.  A sum of
        diffs past int64 is the ``SchemaError`` that ``consolidate`` raises,
        and nothing is inserted.  Cost: O(n^2) for the few, else O(n log n),
        plus the spine's amortized merges.

        >>> from ddflow.base.interner import Interner
        >>> from ddflow.base.updates import from_rows
        >>> it = Interner(); t = Trace(("i", "i"), depth=1)
        >>> t.insert_consolidating(from_rows([(2, 5), (1, 4), (2, 5)], 0, 1, it)).to_rows(it)
        [((1, 4), 0, 1), ((2, 5), 0, 2)]
        >>> t.contents(0)
        {(1, 4): 1, (2, 5): 2}
        """
        if not 0 < len(u) <= SMALL_ROWS or not all(c.dtype == np.int64 for c in u.cols):
            n = len(u)
            u = consolidate(u)
            if shrunk(len(u), n):  # consolidation's sums are the first rows of a buffer sized for its input
                u = u.with_diffs(u.diffs.copy())
            if len(u):
                self.insert_updates(u, consolidated=True)
            return u
        self.spine.check_shape(u.kinds, u.depth)
        diffs = u.diffs
        if diffs.flags.writeable:  # one argument type for the kernel, however the batch was made
            diffs, = frozen(diffs)
        C, T, D, overflow = self.spine.insert_small(key_matrix(u.cols, u.times), diffs)
        if overflow:
            consolidate(u)  # raises, naming the record and time
        return Updates.unchecked(tuple(C), T, D, u.kinds)

    def insert_trie(self, u: Updates, keys: np.ndarray, V: np.ndarray, key_offs: np.ndarray, val_offs: np.ndarray,
                    row: np.ndarray) -> None:
        """Insert consolidated int64 updates ``u`` untiled, given the trie a kernel built of them.

        ``keys``, ``V``, ``key_offs``, ``val_offs`` and ``row`` are what
        :func:`traces.layout.build_trie` returns for ``u``'s columns, times
        and diffs (its row points at ``u.times`` and ``u.diffs``): a kernel
        that made ``u`` builds them in the same call.  O(arity) plus the
        spine's amortized merges.
        """
        self.spine.insert(Batch.with_row(keys, V, key_offs, val_offs, u.times, u.diffs, Description.covering(self.depth),
                                         u.kinds, row, check=False))

    def compact(self) -> None:
        """Merge all batches into one, advancing times to the compaction frontier."""
        self.spine.compact()

    def exert(self, fuel: int = 1 << 16) -> None:
        """Spend up to ``fuel`` units of idle merge work (about that many updates merged)."""
        self.spine.exert(fuel)

    # -- reading ------------------------------------------------------------
    def __len__(self) -> int:
        """Updates held, across all batches (the measure of state size)."""
        return len(self.spine)

    @property
    def nbytes(self) -> int:
        """Bytes held by the trace's batches."""
        return self.spine.nbytes

    def object_columns(self) -> list[np.ndarray]:
        """Every column of object kind (interner codes) in every batch, keys included.

        What the trace holds for the interner's mark phase; merges in
        progress count both inputs (their merged parts are drawn from
        them).  O(batches), no copies.
        """
        obj = [j for j, k in enumerate(self.kinds) if k == "o"]
        if not obj:
            return []
        cols = []
        for b in self.spine.batches():
            cols.extend(b.keys if j == 0 else b.vals[j - 1] for j in obj)
        return cols

    def seek(self, keys: np.ndarray) -> tuple[np.ndarray, Updates]:
        """Every update of the sorted unique ``keys``, with each one's key index: see :func:`seek`.

        Cost: O(k log n) per batch for k keys, plus O(output).

        >>> from ddflow.base.interner import Interner
        >>> from ddflow.base.updates import from_rows
        >>> it = Interner(); t = Trace(("i", "i"), depth=1)
        >>> _ = t.insert_updates(from_rows([(1, 10), (2, 20), (3, 30)], 0, 1, it))
        >>> idx, u = t.seek(np.array([2, 3])); idx.tolist(), u.to_rows(it)
        ([0, 1], [((2, 20), 0, 1), ((3, 30), 0, 1)])
        """
        if self.ints:
            return seek_ints(self.spine.table(), keys, self.kinds, self.depth, f"trace {self.name!r}")
        return seek(list(self.spine.batches()), keys, self.kinds, self.depth)

    def view(self, keys: np.ndarray | None = None) -> "TraceView":
        """A consolidated copy of ``keys`` (all keys if None) to read values and histories from."""
        return TraceView(self, keys)

    def contents(self, time: Any) -> dict[tuple, int]:
        """Every (key, *val) accumulated at ``time`` (all of it: for tests and small traces)."""
        return self.view().accumulate(time)


class TraceHandle:
    """A reader of a shared trace with its own logical compaction frontier."""

    def __init__(self, trace: Trace, frontier: Antichain):
        self.trace = trace
        self._frontier = frontier
        self._live = True
        for t in frontier:
            trace._holds.update(t, +1)
        trace._holds_changed()

    @property
    def frontier(self) -> Antichain:
        """This reader's logical compaction frontier."""
        return self._frontier

    def set_logical_compaction(self, frontier: Antichain) -> None:
        """Promise to read only at times beyond ``frontier``; it may only advance."""
        self._check_live()
        if frontier.depth != self.trace.depth:
            raise SchemaError(f"{self.trace.name}: frontier depth {frontier.depth}, trace depth {self.trace.depth} (mixed time depths)")
        old = self._frontier
        if len(old) == 1 and len(frontier) == 1:
            # One time moving on, what a dataflow's compaction does at every step: compared as Python ints (a
            # fifth of the Antichain comparisons' cost, which a single-update step pays once per trace).
            gone, come = (next(iter(old)),), (next(iter(frontier)),)
            backwards = any(x > y for x, y in zip(gone[0], come[0]))
            same = gone == come
        else:
            gone, come = tuple(old), tuple(frontier)
            backwards, same = not old.dominates(frontier), frontier == old
        if backwards:
            raise UsageError(f"{self.trace.name}: compaction frontier may not go backwards, from {old} to {frontier}")
        if same:
            return
        for t in come:
            self.trace._holds.update(t, +1)
        for t in gone:
            self.trace._holds.update(t, -1)
        self._frontier = frontier
        # The meet is kept should the holds become empty (an empty frontier): compaction never regresses.
        self.trace._holds_changed(sole=frontier if len(frontier) == 1 else None)
        self.trace.spine.settle()

    def drop(self) -> None:
        """Release this reader's hold on compaction."""
        if self._live:
            for t in self._frontier:
                self.trace._holds.update(t, -1)
            self._live = False
            self.trace._holds_changed()  # the last hold going keeps the meet: compaction never regresses

    close = drop

    def __enter__(self) -> "TraceHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.drop()

    def _check_live(self) -> None:
        if not self._live:
            raise UsageError(f"{self.trace.name}: this reader handle was dropped")

    def view(self, keys: np.ndarray | None = None) -> "TraceView":
        """:meth:`Trace.view`, through a live handle."""
        self._check_live()
        return self.trace.view(keys)

    def seek(self, keys: np.ndarray) -> tuple[np.ndarray, Updates]:
        """:meth:`Trace.seek`, through a live handle: O(k log n) per batch for k keys."""
        self._check_live()
        return self.trace.seek(keys)


def seek(batches: list[Batch], keys: np.ndarray, kinds: tuple[str, ...], depth: int) -> tuple[np.ndarray, Updates]:
    """Every update of the sorted unique ``keys`` in ``batches``, and for each the index of its key.

    One compiled kernel call per batch (:func:`ddflow.base.kernels._seek`)
    and one gather per column; the result is grouped by batch, not sorted
    (callers consolidate when they need order).
    Cost: O(k log n) per batch of n keys for k query keys, plus O(output).
    """
    qparts: list[np.ndarray] = []
    uparts: list[Updates] = []
    seek_batch = kernels().seek
    keys, = frozen(keys)  # one compiled seek, whether the caller's keys are writable or not
    for b in batches:
        if not len(b.keys) or not len(keys):
            continue
        q, vrow, urow = seek_batch(b.keys, b.key_offs, b.val_offs, keys)
        if not len(q):
            continue
        qparts.append(q)
        uparts.append(Updates((keys[q], *(v[vrow] for v in b.vals)), b.times[urow], b.diffs[urow], b.kinds))
    if not uparts:
        return np.zeros(0, dtype=np.int64), Updates.empty(kinds, depth)
    return np.concatenate(qparts), Updates.concat(uparts)


def seek_ints(table: BatchTable, keys: np.ndarray, kinds: tuple[str, ...], depth: int,
              where: str = "seek") -> tuple[np.ndarray, Updates]:
    """:func:`seek` for a trace of int64 columns: one compiled call over every batch (:func:`traces.layout.seek_table`).

    Cost: O(k log n) per batch for k keys, plus O(output), in one call; an
    output too large for the memory available is an error naming ``where``.
    """
    q, cols, times, diffs = seek_table(table.matrix, np.ascontiguousarray(keys, dtype=np.int64), len(kinds), depth,
                                       where)
    return q, Updates.unchecked(tuple(cols), times, diffs, kinds)


class TraceView:
    """A consolidated copy of some keys of a trace: keys, their values and (time, diff) histories.

    It materialises one batch (O(n log n) for n updates of those keys); for
    reading a trace in the hot path, operators use :meth:`Trace.seek`.
    """

    def __init__(self, trace: Trace, keys: np.ndarray | None = None):
        batches = list(trace.spine.batches())
        if keys is None:
            parts = [b.flatten() for b in batches]
            u = Updates.concat(parts) if parts else Updates.empty(trace.kinds, trace.depth)
        else:
            keys = np.unique(np.asarray(keys))
            _, u = seek(batches, keys, trace.kinds, trace.depth)
        self.batch = Batch.from_updates(consolidate(u), Description.covering(trace.depth), consolidated=True)

    def keys(self) -> np.ndarray:
        """The view's keys, sorted and unique."""
        return self.batch.keys

    def _key_pos(self, key: Any) -> int | None:
        b = self.batch
        p = int(np.searchsorted(b.keys, key))
        return p if p < len(b.keys) and b.keys[p] == key else None

    def values(self, key: Any) -> list[tuple]:
        """The value tuples of ``key`` with any update in the view (their sum may be zero), sorted."""
        p = self._key_pos(key)
        if p is None:
            return []
        b = self.batch
        lo, hi = b.key_offs[p], b.key_offs[p + 1]
        return [tuple(v[i].item() for v in b.vals) for i in range(lo, hi)]

    def history(self, key: Any, val: tuple = ()) -> list[tuple[tuple[int, ...], int]]:
        """The (time, diff) list of one key and value, in time order."""
        p = self._key_pos(key)
        if p is None:
            return []
        b = self.batch
        for i in range(b.key_offs[p], b.key_offs[p + 1]):
            if tuple(v[i].item() for v in b.vals) == tuple(val):
                lo, hi = b.val_offs[i], b.val_offs[i + 1]
                return [(tuple(b.times[j].tolist()), int(b.diffs[j])) for j in range(lo, hi)]
        return []

    def accumulate(self, time: Any, key: Any = None) -> dict[tuple, int]:
        """(key, *val) -> multiplicity accumulated at ``time`` (optionally for one key)."""
        b = self.batch
        t = as_time(time, b.depth)
        u = b.flatten()
        mask = np.all(u.times <= t, axis=1)
        if key is not None:
            mask &= u.cols[0] == key
        sel = u.take(np.flatnonzero(mask)).with_times(np.zeros((int(mask.sum()), b.depth), dtype=np.int64))
        acc = consolidate(sel)
        rows = zip(*(c.tolist() for c in acc.cols))
        return {tuple(r): d for r, d in zip(rows, acc.diffs.tolist())}
