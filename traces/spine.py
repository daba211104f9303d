"""The spine: a log-structured list of batches of geometrically decreasing size.

Merge work is *spread over insertions*.  When two neighbouring batches
come within a factor of two of each other they become a merge in
progress; every insertion of ``n`` updates then gives each merge in
progress ``max(FUEL * n, MIN_FUEL)`` units of work, and a merge advances through
its key range one slice at a time (slices of both inputs by key are cheap
views, so a partial merge is real progress).  A merge finishes within the
insertions that bring about its own size, before its level can be asked
to merge again, so each update is merged O(log n) times in all and no
single insertion pays for a large merge.  ``exert`` and ``compact`` let
an idle caller finish merges early.

Until a merge completes, readers see both of its inputs: cursors read
every batch of the spine, so a partial merge changes nothing they see.

Why this module is long: it is one structure, whose merge rules (the
fuel, the tail, the arena, settling) hold only together.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from ddflow.base.consolidate import consolidate, overflow_detail
from ddflow.base.lattice import Antichain, advance_by
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError, UsageError

from .arena import ARENA_ROWS, Arena, ArenaTable, arena_insert
from .batch import Batch, Description, offset_dtype, shrunk
from .layout import NUPD, BatchTable, all_int
from .merge import merge_table

#: Units of merge work (updates) granted per inserted update to each merge in progress.
FUEL = 8
#: Units granted to each merge in progress per insertion, at least: a slice of a merge costs about
#: 100 us of fixed work, so granting a few units per single-update insertion would spend the
#: insertions on overhead (a merge of n then takes n / FUEL calls instead of n / MIN_FUEL).
#: 4096 measured 3% faster than 1024 on single-update reach and 2% on sssp (fewer slices; one
#: slice of 4096 updates is about 0.1 ms more, well inside a single update's p99).
MIN_FUEL = 4096
#: Merges smaller than this finish at once: slicing them is not worth it.
EAGER_BELOW = 4096
#: Batches under this many updates at the end of the spine wait, unmerged, until there are ``TAIL`` of them.
#: 16 ran 2% faster on single-update reach but held twice the updates of a small sliding window
#: (a record and its retraction wait apart in the tail), so 8 it is.
TAIL_ROWS = 256
TAIL = 8
assert ARENA_ROWS < TAIL_ROWS, "an arena's batches are the tail's"
#: Units of merge work (about updates merged) that one step of a dataflow that wrote no trace spends, in all, on
#: its traces (:meth:`Spine.exert_idle`, handed out by :func:`ddflow.graph.scope.compact`; a step that wrote some
#: trace gives the others ``MIN_FUEL``, what one insertion gives).  An idle step costs at most about this much
#: merging, whatever the traces hold, so its latency stays flat; a trace of n updates reaches its idle shape within
#: about n / IDLE_FUEL idle steps (a merge slice of 2 * 65,536 updates measured 15-30 ms on this 2-core machine
#: loaded to 8x by other processes).
IDLE_FUEL = 1 << 16
#: An idle trace is merged for what merging could reclaim only when that is at least this many updates
#: (:meth:`Spine.reclaimable`): less is not worth a step's work, and a trace never keeps more than about twice it.
IDLE_FLOOR = 64
#: Batches at least this large are compacted once as soon as the frontier passes their step
#: (smaller ones merge eagerly, which advances their times anyway).
SETTLE_MIN = 1024
#: A merge in progress whose inputs span this many outer times is finished (advanced) as soon as
#: the frontier passes them; with fewer, fuel finishes it as usual.
SETTLE_SPAN = 64


def _concat_tries(parts: list[Batch], desc: Description, template: Batch) -> Batch:
    """Concatenate batches covering disjoint, increasing key ranges."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return Batch.empty(template.kinds, template.depth, desc, template.keys.dtype, [v.dtype for v in template.vals])
    if len(parts) == 1:
        return parts[0].described(desc)
    vbase = np.cumsum([0] + [len(p.val_offs) - 1 for p in parts])
    ubase = np.cumsum([0] + [len(p) for p in parts])
    key_offs = np.concatenate([p.key_offs[:-1] + vbase[i] for i, p in enumerate(parts)] + [[vbase[-1]]])
    val_offs = np.concatenate([p.val_offs[:-1] + ubase[i] for i, p in enumerate(parts)] + [[ubase[-1]]])
    return Batch(
        np.concatenate([p.keys for p in parts]),
        tuple(np.concatenate([p.vals[j] for p in parts]) for j in range(len(parts[0].vals))),
        key_offs.astype(offset_dtype(int(vbase[-1]))),
        val_offs.astype(offset_dtype(int(ubase[-1]))),
        np.concatenate([p.times for p in parts]),
        np.concatenate([p.diffs for p in parts]),
        desc,
        parts[0].kinds,
        check=False,
    )


class Merging:
    """A merge of two adjacent batches in progress, advanced key range by key range."""

    __slots__ = ("old", "new", "_i", "_j", "_parts", "_frontier", "_starts_old", "_starts_new")

    def __init__(self, old: Batch, new: Batch):
        self.old, self.new = old, new
        # First update of each key (plus the end), to cut slices of ~fuel updates.
        self._starts_old = old.val_offs[old.key_offs]
        self._starts_new = new.val_offs[new.key_offs]
        self._i = 0  # next key position in old
        self._j = 0  # next key position in new
        self._parts: list[Batch] = []
        self._frontier: Antichain | None = None

    def __len__(self) -> int:
        return len(self.old) + len(self.new)

    def batches(self) -> tuple[Batch, Batch]:
        """The two batches being merged (readers read both until the merge completes)."""
        return self.old, self.new

    def work(self, fuel: int, frontier: Antichain | None) -> tuple[int, Batch | None]:
        """Spend up to ``fuel`` units; return (fuel left, the result if finished).

        Cost: about ``fuel`` updates merged (linear merges of key slices).
        """
        # The frontier only moves forward, so the one in force when a slice
        # is merged is always valid; the result records the earliest used.
        if self._frontier is None:
            self._frontier = frontier
        old, new = self.old, self.new
        while fuel > 0 and (self._i < len(old.keys) or self._j < len(new.keys)):
            # Take about `fuel` updates from the input with more left, and the
            # matching key range of the other input.
            i, j = self._i, self._j
            if len(old.keys) - i >= len(new.keys) - j:
                hi_i = _advance_keys(self._starts_old, i, fuel)
                bound = old.keys[hi_i - 1] if hi_i > i else None
                hi_j = j if bound is None else int(np.searchsorted(new.keys, bound, side="right"))
            else:
                hi_j = _advance_keys(self._starts_new, j, fuel)
                bound = new.keys[hi_j - 1] if hi_j > j else None
                hi_i = i if bound is None else int(np.searchsorted(old.keys, bound, side="right"))
            part = old.merge(new, frontier, keys=((i, hi_i), (j, hi_j)))
            fuel -= int(self._starts_old[hi_i] - self._starts_old[i] + self._starts_new[hi_j] - self._starts_new[j]) + 1
            self._parts.append(part)
            self._i, self._j = hi_i, hi_j
        if self._i >= len(old.keys) and self._j >= len(new.keys):
            since = self._frontier if self._frontier is not None and len(self._frontier) else old.desc.since.glb(new.desc.since)
            desc = Description(old.desc.lower, new.desc.upper, since)
            return fuel, _concat_tries(self._parts, desc, old)
        return fuel, None


def _advance_keys(starts: np.ndarray, start: int, fuel: int) -> int:
    """Key position after ``start`` covering about ``fuel`` updates (at least one key)."""
    nkeys = len(starts) - 1
    target = min(int(starts[start]) + max(fuel, 1), int(starts[-1]) + 1)  # stays within the offsets' dtype
    hi = int(np.searchsorted(starts, target, side="left"))
    return min(max(hi, start + 1), nkeys)


Entry = Batch | Merging


def _advanced(b: Batch, frontier: Antichain) -> Batch:
    """``b`` with its times advanced by ``frontier`` and consolidated (a merge with nothing).  O(n)."""
    nothing = Batch.empty(b.kinds, b.depth, Description(b.desc.upper, b.desc.upper, b.desc.since),
                          b.keys.dtype, [v.dtype for v in b.vals])
    return b.merge(nothing, frontier)


def _merge_all(batches: list[Batch], frontier: Antichain, rows: np.ndarray | None = None) -> Batch:
    """Consecutive batches as one, times advanced by ``frontier``, consolidated: one pass.  O(n log n) for n updates.

    What :meth:`Batch.merge` does for two, for any number of small batches
    (the spine's tail): one compiled call (:func:`traces.merge.merge_table`)
    when every column is int64; otherwise their updates concatenated,
    advanced and consolidated once.  ``rows``, when given, is the table of
    ``batches`` (every column int64, each batch non-empty), as the spine
    already holds it.
    """
    first, last = batches[0], batches[-1]
    if len(frontier):
        since = frontier
    else:
        since = first.desc.since
        for b in batches[1:]:
            since = since if since == b.desc.since else since.glb(b.desc.since)
    desc = Description(first.desc.lower, last.desc.upper, since)
    if (rows is not None or all(all_int(b) for b in batches)) and sum(len(b) for b in batches) < 2**31:
        T = rows if rows is not None else BatchTable.of(batches, first.depth, len(first.kinds)).matrix
        merged = _rows_merged(T, desc, first.kinds, first.depth, frontier)
        if merged is not None:
            return merged
    u = Updates.concat([b.flatten() for b in batches])
    if len(frontier):
        u = u.with_times(advance_by(u.times, frontier))
    n = len(u)
    try:
        u = consolidate(u)
    except SchemaError as e:
        raise SchemaError(f"merging batches of {first.kinds}: {overflow_detail(u)}") from e
    if shrunk(len(u), n):  # consolidation's sums are the first rows of a buffer sized for its input
        u = u.with_diffs(u.diffs.copy())
    return Batch.from_updates(u, desc, consolidated=True, check=False)


def _rows_merged(rows: np.ndarray, desc: Description, kinds: tuple[str, ...], depth: int,
                 frontier: Antichain) -> Batch | None:
    """The batches of table ``rows`` as one batch described by ``desc``, times advanced by ``frontier``, consolidated,
    in one compiled call (:func:`traces.merge.merge_table`); None when a sum leaves int64.  O(n log n)."""
    # An empty frontier's elements too: a read-only (0, depth) array, the type the kernel compiles for.
    keys, vals, key_offs, val_offs, times, diffs, row, overflow = merge_table(rows, len(kinds), depth, frontier.elements)
    if overflow:
        return None
    if not len(diffs):
        return Batch.empty(kinds, depth, desc)
    if shrunk(len(diffs), int(rows[:, NUPD].sum())):
        # The sums are the first rows of a buffer sized for every input update: keep a copy, not the buffer.
        return Batch(keys, tuple(vals), key_offs, val_offs, times, diffs.copy(), desc, kinds, check=False)
    return Batch.with_row(keys, vals, key_offs, val_offs, times, diffs, desc, kinds, row, check=False)


def _span(b: Batch) -> int:
    """How many outer times (first coordinates) ``b`` spans: what advancing past them all could merge.  O(1)."""
    lo, hi = b.outer_range()
    return max(hi - lo, 0)


def _passed(b: Batch, passed: int) -> bool:
    """Every time of ``b`` has a first coordinate below ``passed``.  O(1)."""
    return b.outer_range()[1] < passed


class Spine:
    """Batches oldest (largest) first; neighbours within a factor of two are merged with fuel."""

    def __init__(self, kinds: tuple[str, ...], depth: int, frontier: Callable[[], Antichain]):
        self.kinds = kinds
        self.depth = depth
        self._frontier = frontier  # the trace's current logical compaction frontier
        self.entries: list[Entry] = []
        self.upper = Antichain.minimum(depth)
        self._table: BatchTable | None = None  # of batches(); dropped whenever `entries` changes
        self._minimum = Antichain.minimum(depth)
        self._tail = 0  # small batches at the end, as :meth:`_start_merges` last counted them (plus appends since)
        self._merging = 0  # merges in progress among `entries`: an insertion with none left to fuel skips the pass
        self._ints = "f" not in kinds  # every column int64: merges go through the spine's table
        self._covering = Description.covering(depth)
        #: The newest small batches, as rows written by one compiled call each (int64 columns only); after
        #: ``entries``, and counted in the tail.  None or empty when there are none.
        self._arena: Arena | None = None
        #: Batches written so far (inserts and arena writes): the scheduler tells idle steps by it.
        self.writes = 0
        self._asked = None  # the step that last asked :meth:`wants_effort`, and the writes seen then
        self._writes_seen = -1
        #: The spine is in its idle shape (:meth:`exert_idle` found nothing to do) and unchanged since.
        self._idle_shape = False

    # -- reading ------------------------------------------------------------
    def batches(self) -> Iterator[Batch]:
        """Every batch a reader must look at, including both sides of merges in progress, then the arena's."""
        yield from self._entry_batches()
        if self._arena is not None and self._arena.n:
            yield from self._arena.batches()

    def _entry_batches(self) -> Iterator[Batch]:
        for e in self.entries:
            if isinstance(e, Merging):
                yield e.old
                yield e.new
            else:
                yield e

    def table(self) -> BatchTable | ArenaTable:
        """Every batch of :meth:`batches` as one :class:`traces.layout.BatchTable` (int64 columns only).

        Kept until the list of batches changes.  Cost: O(batches) when rebuilt, O(1) after an arena insert.
        """
        t = self._entries_table()
        a = self._arena
        if a is None or not a.n:
            return t
        if a.src is not t:
            a.rebase(t)
        return a.table()

    def _entries_table(self) -> BatchTable:
        """The table of ``entries``' batches alone (kept until they change)."""
        if self._table is None:
            self._table = BatchTable.of(list(self._entry_batches()), self.depth, len(self.kinds))
        return self._table

    def __len__(self) -> int:
        return sum(len(e) for e in self.entries) + (self._arena.updates if self._arena is not None else 0)

    @property
    def nbytes(self) -> int:
        """Bytes held by every batch, both sides of merges in progress included (an arena: the words it used)."""
        return sum(b.nbytes for b in self._entry_batches()) + (self._arena.nbytes if self._arena is not None else 0)

    # -- writing ------------------------------------------------------------
    def insert(self, batch: Batch) -> None:
        """Append the newest batch, fuel merges in progress and start new ones.

        Cost: amortized O(log n) merge work per inserted update; a merge
        under ``EAGER_BELOW`` updates runs at once, a larger one is spread
        over later insertions (``FUEL`` per update).
        """
        self.check_shape(batch.kinds, batch.depth)
        self.writes += 1
        d = batch.desc
        untiled = d is self._covering or (not len(d.upper) and d.lower == self._minimum)
        if self._arena is not None and self._arena.n and (not untiled or len(batch) >= TAIL_ROWS):
            # A tiled batch continues the batches before it, the arena's among them; a large one ends the tail,
            # and the merge rules pair it with the batch before it, which would not be the arena's.
            self._flush_arena()
            self._start_merges()
        if not untiled:
            if not (self.upper == batch.desc.lower):
                raise UsageError(f"batch lower {batch.desc.lower} does not continue the trace, whose upper is {self.upper}")
            self.upper = batch.desc.upper
        finished = self._fuel(max(FUEL * len(batch), MIN_FUEL))
        if len(batch):
            self.entries.append(batch)
            if self._table is not None:
                self._table = self._table.appended(batch)
        elif self.entries and isinstance(self.entries[-1], Batch):
            # An empty batch only extends the previous one's time interval.
            last = self.entries[-1]
            longer = last.described(Description(last.desc.lower, batch.desc.upper, last.desc.since))
            self._replace(len(self.entries) - 1, len(self.entries), longer)
        else:
            self.entries.append(batch)
        self._tail += 1
        arena = self._arena.n if self._arena is not None else 0
        if finished or len(batch) >= TAIL_ROWS or not TAIL > self._tail + arena > 0:
            self._start_merges()
        # Otherwise a small batch joined a tail still short of TAIL: the spine is as _start_merges left it
        # plus one tail batch, which no merge rule pairs with anything (only a full tail merges).

    def check_shape(self, kinds: tuple[str, ...], depth: int) -> None:
        """A SchemaError unless updates of column ``kinds`` and time ``depth`` fit this spine.  O(arity)."""
        if kinds != self.kinds:
            raise SchemaError(f"batch column kinds {kinds} do not match the trace's {self.kinds}")
        if depth != self.depth:
            raise SchemaError(f"batch time depth {depth} does not match the trace's {self.depth} (mixed time depths)")

    def insert_small(self, K: np.ndarray, diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
        """Consolidate a few updates and insert them as the newest batch, untiled, in one compiled call.

        ``K``: the ``(n, arity + depth)`` int64 matrix of the updates'
        columns then times (any order, ``0 < n <= SMALL_ROWS``), with their
        ``diffs``; the spine's columns must all be int64.  Returns the
        consolidated updates, ``(C, T, D, overflow)`` as
        :func:`traces.arena.arena_insert` does; nothing is inserted when a
        sum leaves int64.  The batch goes to the arena
        (:mod:`traces.arena`) and counts in the tail: when the tail reaches
        ``TAIL`` batches, the arena's and the tail's are merged into one
        (one compiled call, as a full tail always is).  Cost: O(n^2) in
        the call, plus the spine's amortized merges; no Python object per
        batch.
        """
        buf, used, T_, at = self.arena_room(len(K)).target()
        C, T, D, now_used, overflow = arena_insert(K, diffs, len(self.kinds), buf, used, T_, at)
        if len(D) and not overflow:
            self.arena_written(now_used, len(D))
        return C, T, D, overflow

    def arena_room(self, n: int) -> Arena:
        """The arena, with room for a batch of up to ``n`` updates (``n <= SMALL_ROWS``; int64 columns only).

        A full arena is merged first (:meth:`_flush_arena`), and the arena's
        copy of the spine's rows brought up to date, so that reading the
        table after this call moves nothing.  A kernel that writes a batch
        there (:func:`traces.arena.write_trie`, at
        :meth:`traces.arena.Arena.target`) reports it with
        :meth:`arena_written`.  O(1), or a merge, or a copy of the rows.
        """
        a = self._arena
        if a is None or not a.fits(n):
            if a is not None and a.n:
                self._flush_arena()
                self._start_merges()
            a = self._arena = Arena(self.kinds, self.depth, TAIL, self._entries_table())
        elif a.src is not self._entries_table():
            a.rebase(self._table)
        return a

    def arena_free(self, n: int) -> Arena | None:
        """:meth:`arena_room` where that merges nothing, else None: for a fused loop round (``operators/round``).

        So that each spine sees the merges of the steps the round stands for.  O(1), or a copy of the rows.
        """
        a = self._arena
        return None if a is not None and a.n and not a.fits(n) else self.arena_room(n)

    def quiet_writes(self) -> int:
        """How many batches the arena may take in a row with no merge work but at the last (>= 1).  O(1).

        A fused chain of loop rounds writes that many at most before it records them (``ddflow/operators/round``).
        """
        return 1 if self._merging else max(1, TAIL - self._tail - (self._arena.n if self._arena is not None else 0))

    def arena_written(self, used: int, updates: int) -> None:
        """A kernel wrote a batch of ``updates`` updates at the arena's target, leaving ``used`` words used.

        Counts it, fuels merges in progress as an insert does, and merges a
        full tail.  O(1), or a merge.
        """
        self._arena.written(used, updates)
        self.writes += 1
        if self._merging and self._fuel(max(FUEL * updates, MIN_FUEL)):
            self._start_merges()
        if self._arena is not None and self._tail + self._arena.n >= TAIL:
            self._start_merges()  # a full tail: the arena's batches and the tail's become one

    def _flush_arena(self) -> None:
        """Merge the arena's batches, and the tail's, into one batch at the end of ``entries``.

        One compiled call over their rows (:func:`traces.merge.merge_table`),
        times advanced by the frontier, as :func:`_merge_all` merges a tail.
        The arena's batches are untiled, so which of them and the tail's
        came first does not matter.  The caller runs the merge rules after.
        O(n log n) for the n updates merged.
        """
        a = self._arena
        if a is None or not a.n:
            self._arena = None
            return
        t = self._entries_table()
        if a.src is not t:
            a.rebase(t)
        tail = self._tail_length()
        if tail and self._tail_rows(tail) is None:
            tail = 0  # an empty entry in the tail has no row: merge the arena alone
        frontier = self._frontier()
        # As _merge_all describes a merged tail; the arena's batches are untiled (since: the minimum).
        since = frontier if len(frontier) else self._minimum
        lower = self.entries[-tail].desc.lower if tail else self._minimum
        merged = _rows_merged(a.rows(tail), Description(lower, self._covering.upper, since), self.kinds, self.depth,
                              frontier)
        if merged is None:  # the general path names the record whose sum leaves int64
            merged = _merge_all(self.entries[len(self.entries) - tail:] + a.batches(), frontier)
        self._arena = None  # only now: a merge that raised leaves the spine as it was
        if tail:
            self._replace(len(self.entries) - tail, len(self.entries), merged)
        elif len(merged):
            self.entries.append(merged)
            if self._table is not None:
                self._table = self._table.appended(merged)

    def _fuel(self, fuel: int) -> bool:
        """Give ``fuel`` units to each merge in progress; whether one of them finished."""
        if not self._merging:
            return False
        frontier = self._frontier()
        finished = False
        for idx, e in enumerate(self.entries):
            if isinstance(e, Merging):
                _, done = e.work(fuel, frontier)
                if done is not None:
                    self._replace(idx, idx + 1, done)
                    self._merging -= 1
                    finished = True
        return finished

    def _start_merges(self) -> None:
        """Pair up the newest neighbours whose sizes are within a factor of two.

        Batches under ``TAIL_ROWS`` updates at the end of the spine (the
        *tail*: what steps of a few updates insert) are left unmerged until
        there are ``TAIL`` of them, then merged in one pass
        (:func:`_merge_all`).  Readers that read through the spine's table
        meet them all in one compiled call, so a longer tail costs them
        little, and merging a tail of small batches at once costs about what
        one pairwise merge does.
        """
        changed = True
        while changed:
            changed = False
            tail = self._tail = self._tail_length()
            if self._arena is not None and self._arena.n and tail + self._arena.n >= TAIL > 1:
                self._flush_arena()
                changed = True
                continue
            if tail >= TAIL > 1:
                merged = _merge_all(self.entries[-tail:], self._frontier(), self._tail_rows(tail))
                self._replace(len(self.entries) - tail, len(self.entries), merged)
                changed = True
                continue
            for idx in range(len(self.entries) - 1 - tail, 0, -1):
                a, b = self.entries[idx - 1], self.entries[idx]
                if isinstance(a, Merging) or isinstance(b, Merging):
                    continue
                if len(a) <= 2 * len(b):
                    if len(a) + len(b) < EAGER_BELOW:
                        self._replace(idx - 1, idx + 1, a.merge(b, self._frontier()))
                    else:
                        self._replace(idx - 1, idx + 1, Merging(a, b))
                        self._merging += 1
                    changed = True
                    break

    def _replace(self, lo: int, hi: int, new: Entry) -> None:
        """Put ``new`` where entries ``lo:hi`` were, and keep the table in step.  O(batches).

        A merge in progress over those entries reads the same batches, so
        the table stands; a batch made of them takes their rows' place
        (:meth:`traces.layout.BatchTable.replaced`), or, where that cannot
        be done, the table is built again when next read.
        """
        olds = [b for e in self.entries[lo:hi] for b in (e.batches() if isinstance(e, Merging) else (e,))]
        self.entries[lo:hi] = [new]
        if self._table is None:
            return
        if isinstance(new, Merging):
            if not (len(olds) == 2 and olds[0] is new.old and olds[1] is new.new):
                self._table = None
        else:
            self._table = self._table.replaced(olds, new)

    def _tail_rows(self, tail: int) -> np.ndarray | None:
        """The table rows of the last ``tail`` entries, when the kept table has them (int64 columns only).  O(tail).

        Saves a tail merge rebuilding a table the spine already holds.
        """
        table = self._table
        if not self._ints or table is None or len(table.batches) < tail:
            return None
        if not all(a is b for a, b in zip(table.batches[-tail:], self.entries[-tail:])):
            return None  # an empty entry has no row, or the table is not this spine's newest
        return table.matrix[-tail:]

    def _tail_length(self) -> int:
        """How many batches at the end are under ``TAIL_ROWS`` updates, none merging (0 when ``TAIL`` is 1)."""
        tail = 0
        for e in reversed(self.entries if TAIL > 1 else ()):
            if isinstance(e, Merging) or len(e) >= TAIL_ROWS:
                break
            tail += 1
        return tail

    def _check(self) -> None:
        """The merge rules have nothing left to do (what :meth:`insert` leaves): for stress tests.

        With ``t`` the tail's length (trailing batches under ``TAIL_ROWS``)
        and ``a`` the arena's batches: ``t + a < TAIL`` (when ``TAIL > 1``),
        and no two neighbouring batches before the tail, neither of them a
        merge in progress, have ``len(a) <= 2 * len(b)``.  O(entries).
        """
        tail = self._tail_length()
        if self._arena is not None:
            self._arena._check()
            assert tail + self._arena.n < TAIL, f"a full tail of {tail} batches and {self._arena.n} in the arena was left unmerged"
        if self._arena is not None and self._arena.n:
            assert np.array_equal(self.table().matrix[len(self._entries_table().matrix):],
                                  np.stack([b.table_row() for b in self._arena.batches()])), \
                "the arena's rows do not describe its batches"
        if self._table is not None:  # a kept table describes exactly the batches readers must read
            now = [b for b in self._entry_batches() if len(b.diffs)]
            assert len(now) == len(self._table.batches) and all(a is b for a, b in zip(now, self._table.batches)), \
                "the kept table's batches are not the spine's"
            want = np.stack([b.table_row() for b in now]) if now else self._table.matrix[:0]
            assert np.array_equal(self._table.matrix, want), "the kept table's rows do not describe its batches"
        assert not tail >= TAIL > 1, f"a full tail of {tail} batches was left unmerged"
        assert self._merging == sum(isinstance(e, Merging) for e in self.entries), "merges in progress miscounted"
        for idx in range(len(self.entries) - 1 - tail, 0, -1):
            a, b = self.entries[idx - 1], self.entries[idx]
            if not isinstance(a, Merging) and not isinstance(b, Merging):
                assert len(a) > 2 * len(b), f"batches {idx - 1} and {idx} ({len(a)}, {len(b)}) were left unmerged"

    def exert(self, fuel: int) -> None:
        """Give ``fuel`` units to each merge in progress, then apply the merge rules.  O(fuel) per merge."""
        self._idle_shape = False
        self._fuel(fuel)
        self._start_merges()

    # -- idle effort -----------------------------------------------------------------------------------------
    def wants_effort(self, step: object) -> bool:
        """Whether the scheduler should give this spine idle effort in ``step`` (:meth:`exert_idle`).  O(1).

        A spine written since the step before was fuelled by its writes
        (:meth:`insert`): no.  An unwritten one: unless it is known to be
        in its idle shape.  The first call of a ``step`` answers; a later
        one in the same step (a trace with several readers) says no, so a
        trace is counted once.  What a step that changes nothing pays per
        trace: this, for traces already in their idle shape.

        >>> sp = Spine(("i",), 1, lambda: Antichain.minimum(1))
        >>> sp.wants_effort(1), sp.wants_effort(2), sp.wants_effort(2)
        (False, True, False)
        """
        if step == self._asked:
            return False
        self._asked = step
        if self.writes != self._writes_seen:
            self._writes_seen = self.writes
            self._idle_shape = False
            return False
        return not self._idle_shape

    def exert_idle(self, fuel: int) -> int:
        """Spend about ``fuel`` units of merge work toward the spine's idle shape; return the units spent.

        The idle shape has no merge in progress and nothing worth reclaiming
        (:meth:`reclaimable`).  Merges in progress are fuelled as insertions
        fuel them: without insertions (a dataflow whose input stopped, or
        an input nobody writes any more) a merge the geometric rule started
        would otherwise wait forever, holding both of its inputs, such as a
        million insertions and the million deletions that cancel them.
        With none in progress and something to reclaim, the newest batches
        are merged (the arena's and the tail's first, then the last two),
        so an idle spine ends as few batches that hold what is live.
        Finished merges go through the merge rules as usual.  Once in its
        idle shape the spine says so (:meth:`wants_effort`) until it is
        written again: an idle dataflow stops paying for it.
        Cost: about ``fuel`` updates merged (a merge slice may take up to
        twice its share), plus O(batches) to weigh what merging could
        reclaim, once per change.
        """
        spent = 0
        while spent < fuel:
            if self._merging:
                spent += self._fuel_idle(fuel - spent)
            elif self.reclaimable():
                spent += self._merge_newest()
            else:
                self._idle_shape = True
                break
        return spent

    def reclaimable(self) -> bool:
        """Whether merging the spine's batches could reclaim enough to be worth an idle step's work.

        Merging shrinks a trace where updates of opposite signs meet and
        cancel.  A batch is consolidated, so only updates of different
        batches meet: each negative update of batch ``b`` cancels at most a
        positive update of another batch, so with ``P`` the sum over ``b``
        of ``min(negatives of b, positives outside b)`` merging reclaims
        at most ``2 P`` updates (times the frontier no longer tells apart
        also collapse: the geometric rule merges those in time).  Worth it
        when ``2 P`` is at least half of what the spine holds and
        ``P >= IDLE_FLOOR``: a spine in its idle shape holds at most about
        twice what merging everything would leave, plus O(``IDLE_FLOOR``).
        The arena's small batches count as one, all of whose updates may
        be negative or positive (an upper bound, not counted: they are
        few).  Cost: O(batches), no counting at all when the sizes alone
        rule it out; each batch counts its negatives once.

        >>> from ddflow.base.interner import Interner
        >>> from ddflow.base.updates import from_rows
        >>> it, sp = Interner(), Spine(("i",), 1, lambda: Antichain.minimum(1))
        >>> sp.insert(Batch.from_updates(from_rows([(k,) for k in range(100)], 0, 1, it)))
        >>> sp.reclaimable()
        False
        >>> sp.insert(Batch.from_updates(from_rows([(k,) for k in range(90)], 1, -1, it)))
        >>> sp.reclaimable()
        True
        """
        def worth(could: int) -> bool:
            return could >= IDLE_FLOOR and 4 * could >= total

        batches = [b for b in self._entry_batches() if len(b.diffs)]
        arena = self._arena.updates if self._arena is not None else 0
        sizes = [len(b.diffs) for b in batches] + ([arena] if arena else [])
        total = sum(sizes)
        if len(sizes) < 2 or not worth(sum(min(n, total - n) for n in sizes)):
            return False  # a batch meets only the others: the sizes alone rule it out
        neg = [b.negatives() for b in batches]
        pos = [len(b.diffs) - k for b, k in zip(batches, neg)]
        if arena:  # at most all negative, at most all positive
            neg.append(arena)
            pos.append(arena)
        positives = sum(pos)
        return worth(sum(min(k, positives - p) for k, p in zip(neg, pos)))

    def _fuel_idle(self, fuel: int) -> int:
        """Give ``fuel`` units to the merges in progress, oldest first, until spent; return the units spent."""
        frontier = self._frontier()
        spent = 0
        for idx, e in enumerate(self.entries):
            if spent >= fuel:
                break
            if isinstance(e, Merging):
                left, done = e.work(fuel - spent, frontier)
                spent += fuel - spent - left
                if done is not None:
                    self._replace(idx, idx + 1, done)
                    self._merging -= 1
        self._start_merges()
        return max(spent, 1)

    def _merge_newest(self) -> int:
        """Merge the arena's batches and the tail's, or else begin merging the last two batches; the units spent.

        A merge under ``EAGER_BELOW`` updates runs at once; a larger one is
        left in progress, for :meth:`_fuel_idle`.  O(n) for the n updates
        merged at once.
        """
        if self._arena is not None and self._arena.n:
            spent = self._arena.updates + sum(len(e) for e in self.entries[len(self.entries) - self._tail_length():])
            self._flush_arena()
        elif self._tail_length() >= 2:
            tail = self._tail_length()
            spent = sum(len(e) for e in self.entries[-tail:])
            self._replace(len(self.entries) - tail, len(self.entries),
                          _merge_all(self.entries[-tail:], self._frontier(), self._tail_rows(tail)))
        else:
            a, b = self.entries[-2], self.entries[-1]
            spent = len(a) + len(b)
            if spent < EAGER_BELOW:
                self._replace(len(self.entries) - 2, len(self.entries), a.merge(b, self._frontier()))
            else:
                self._replace(len(self.entries) - 2, len(self.entries), Merging(a, b))
                self._merging += 1
                spent = 0
        self._start_merges()
        return max(spent, 1)

    def settle(self) -> None:
        """Advance the times of every large batch the compaction frontier has passed, once.

        A batch built during a step holds every data time of that step, and
        merging advances times only when the batch next merges, which for a
        large batch may be many steps later.  Rewriting it when the frontier
        passes all of its times keeps a trace as small with K data times per
        step as with one: times no future reader can tell apart collapse at
        once.  A batch whose times already sit at its ``since`` (it was
        settled, or merged, after the frontier passed them) is left alone:
        advancing it again would collapse nothing.
        A merge in progress whose inputs the frontier has passed and that
        spans ``SETTLE_SPAN`` outer times or more is finished at once,
        advanced, for the same reason (with fewer, fuel finishes it, so no
        single step of a few updates pays for a large merge).
        Cost: O(n) once per batch (or merge) of n >= ``SETTLE_MIN`` updates,
        plus O(1) per large batch per call (its outer time range is kept on it).
        """
        f = self._frontier()
        if not len(f):
            return
        E = f.elements
        passed = int(E[0, 0]) if len(E) == 1 else int(E[:, 0].min())

        def unsettled(b: Batch) -> bool:  # the frontier passed every time, and some time is not at `since`
            latest = b.outer_range()[1]  # the O(1) tests first: a step asks this of every large batch
            return len(b) > 0 and passed > latest > b.since_outer() and not b.desc.since == f

        changed = False
        for idx, e in enumerate(self.entries):
            if len(e) < SETTLE_MIN:
                continue
            if isinstance(e, Merging):
                # A merge in progress keeps both inputs unadvanced until it ends; finish it now, advanced,
                # when they span many passed times (a step of many data times), else let fuel do it.
                if (_span(e.old) >= SETTLE_SPAN or _span(e.new) >= SETTLE_SPAN) \
                        and _passed(e.old, passed) and _passed(e.new, passed):
                    self._replace(idx, idx + 1, e.old.merge(e.new, f))
                    self._merging -= 1
                    changed = True
            elif unsettled(e):
                self._replace(idx, idx + 1, _advanced(e, f))
                changed = True
        if changed:
            self._idle_shape = False  # advancing may have made merging worth it again
            self._start_merges()

    def compact(self) -> None:
        """Finish every merge and merge everything into one batch, advancing all times."""
        self._flush_arena()
        self._start_merges()
        while len(self.entries) > 1 or any(isinstance(e, Merging) for e in self.entries):
            self.exert(1 << 62)
            if len(self.entries) > 1 and not any(isinstance(e, Merging) for e in self.entries):
                a, b = self.entries[-2], self.entries[-1]
                self._replace(len(self.entries) - 2, len(self.entries), Merging(a, b))
                self._merging += 1
        if len(self.entries) == 1 and isinstance(self.entries[0], Batch):
            b = self.entries[0]
            f = self._frontier()
            if len(f) and not (b.desc.since == f):
                self._replace(0, 1, _advanced(b, f))
