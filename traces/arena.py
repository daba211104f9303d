"""The spine's newest small batches, written by one compiled call each into one buffer, read through the table.

A step of a few updates inserts a batch of a few updates into each trace
it touches: at one update an advance, reach inserts about 19 an update.
Built as a :class:`traces.batch.Batch` each (its arrays, its read-only
flags, its description, its table row, the spine's bookkeeping), an
insert cost some 85 Python calls, most of them about the batch as an
object, while readers only ever look at its table row.  An arena keeps
those batches as rows alone: :func:`arena_insert` consolidates the
updates, writes the batch's trie levels into the arena's buffer and its
row into the arena's copy of the spine's table, in one call.  The spine
merges an arena's batches into one :class:`~traces.batch.Batch` when
they would have been merged as its tail (:data:`traces.spine.TAIL`), and
hands out :class:`~traces.batch.Batch` views of them only to the rare
readers that want batches (cursors, the interner's marks).

Invariants, with ``n`` batches written and ``base`` the rows of the
spine's own batches copied in front of them:

* ``T[base + i]`` is batch ``i``'s row (:data:`traces.layout.FIELDS`),
  its offsets in 64 bits; every address points into ``buf[:used]``.
* ``buf`` is written only past ``used``, and never reused: a flushed
  arena is replaced by a new one, so views of it stay valid.
* Each batch is consolidated: its updates sorted by (record, time) with
  distinct (record, time) and no zero diff.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.kernels import SMALL_ROWS, _trie_starts, consolidated_split
from ddflow.base.native import kernel

from .batch import Batch, Description
from .layout import DIFFS, KEYS, KOFFS32, KOFFS64, NKEYS, NUPD, NVALS, TIMES, VAL0, VOFFS32, VOFFS64, BatchTable


#: The most updates a batch written into an arena may have: fewer than the spine's ``TAIL_ROWS``, so it is
#: a tail batch (:mod:`traces.spine`).  A step asks for room for ``SMALL_ROWS``; a kernel whose output turns
#: out larger writes it when the arena has the words left (:func:`has_room`), else leaves it to Python.
ARENA_ROWS = 255


def words_for(n: int, arity: int, depth: int) -> int:
    """Buffer words a batch of at most ``n`` updates may take (keys, offsets, values, times, diffs).  O(1).

    Keys and their offsets ``n + (n + 1)``, values ``(arity - 1) n`` and
    their offsets ``n + 1``, times ``depth n``, diffs ``n``.
    """
    return n * (3 + arity + depth) + 2


def has_room(buf, used, n, arity, depth):
    """Whether a batch of ``n`` updates fits in ``buf`` past ``used`` (:func:`words_for`).  A kernel helper.  O(1)."""
    return n <= ARENA_ROWS and used + words_for(n, arity, depth) <= len(buf)




def write_trie(C, Tm, D, buf, used, T, at):
    """Write consolidated updates as a batch at ``buf[used:]`` and its row at ``T[at]``; the words now used.

    ``C``: the ``(m, k)`` matrix of the updates' columns (its rows),
    ``Tm`` their ``(k, depth)`` times and ``D`` their diffs, sorted by
    (record, time), distinct, no zero (``k > 0``).  ``buf`` must have
    :func:`words_for` ``(k, m, depth)`` words free past ``used``.  A
    kernel helper.  O(k (m + depth)).
    """
    m, k = C.shape
    depth = Tm.shape[1]
    kstarts, vstarts, koffs = _trie_starts(C.T)
    nk, nv = len(kstarts), len(vstarts)
    base = buf.ctypes.data
    o = used
    keys_at = o
    for g in range(nk):
        buf[o + g] = C[0, kstarts[g]]
    o += nk
    koffs_at = o
    for g in range(nk + 1):
        buf[o + g] = koffs[g]
    o += nk + 1
    vals_at = o
    for j in range(1, m):
        for v in range(nv):
            buf[o + (j - 1) * nv + v] = C[j, vstarts[v]]
    o += (m - 1) * nv
    voffs_at = o
    for v in range(nv):
        buf[o + v] = vstarts[v]
    buf[o + nv] = k
    o += nv + 1
    times_at = o
    for i in range(k):
        for c in range(depth):
            buf[o + i * depth + c] = Tm[i, c]
    o += k * depth
    diffs_at = o
    for i in range(k):
        buf[o + i] = D[i]
    o += k
    for f in range(T.shape[1]):
        T[at, f] = 0
    T[at, NKEYS], T[at, NVALS], T[at, NUPD] = nk, nv, k
    T[at, KEYS] = base + 8 * keys_at
    T[at, KOFFS64] = base + 8 * koffs_at
    T[at, VOFFS64] = base + 8 * voffs_at
    T[at, TIMES] = base + 8 * times_at
    T[at, DIFFS] = base + 8 * diffs_at
    for j in range(1, m):
        T[at, VAL0 + j - 1] = base + 8 * (vals_at + (j - 1) * nv)
    return o




@kernel("traces")
def arena_insert(K, diffs, m, buf, used, T, at):
    """Consolidate rows ``K`` and write them as a batch at ``buf[used:]``, its table row at ``T[at]``.

    ``K`` is the ``(n, m + depth)`` int64 matrix of the updates' ``m``
    record columns then time coordinates, in any order, with ``diffs``
    (what ``consolidate`` takes, at most ``SMALL_ROWS`` rows: it is
    consolidated in place, O(n^2)).  ``buf`` must have
    :func:`words_for` ``(n, m, depth)`` words free past ``used``.
    Returns ``(C, T, D, used, overflow)``: the consolidated updates
    (columns as the rows of ``C``, times, diffs), as ``consolidate``
    orders them, and the words now used; nothing is written when they
    cancel out (``len(D) == 0``) or a sum leaves int64 (``overflow``).
    O(n^2 (m + depth)).
    """
    C, Tm, D, overflow = consolidated_split(K, diffs, m)
    if overflow or len(D) == 0:
        return C, Tm, D, used, overflow
    return C, Tm, D, write_trie(C, Tm, D, buf, used, T, at), overflow


def insert_fields(C, Tm, D, idx, buf, used, T, at):
    """Fields ``idx`` of updates (columns as the rows of ``C``, times ``Tm``, diffs ``D``), consolidated and
    written as :func:`arena_insert` writes a batch.

    What a kernel whose output an arrangement takes through projections
    does with it (:mod:`ddflow.operators.route`).  Returns
    :func:`arena_insert`'s ``(C, T, D, used, overflow)``.  A kernel
    helper.  O(k^2 (m + depth)) for k updates.
    """
    k, m, depth = len(D), len(idx), Tm.shape[1]
    K = np.empty((k, m + depth), dtype=np.int64)
    for x in range(k):
        for j in range(m):
            K[x, j] = C[idx[j], x]
        for c in range(depth):
            K[x, m + c] = Tm[x, c]
    return arena_insert(K, D, m, buf, used, T, at)




class Arena:
    """A spine's newest small batches: their trie levels in ``buf``, their rows after the spine's in ``T``.

    ``base`` rows of ``T`` are the spine's own table as of ``src`` (the
    :class:`traces.layout.BatchTable` they were copied from); the ``n``
    rows after them are this arena's batches.  Room for ``capacity``
    batches of up to ``SMALL_ROWS`` updates, and one of ``ARENA_ROWS``
    besides (a join's output in a round of a label flood is often a
    hundred).  O(1) to make but for the copy of the spine's rows.
    """

    __slots__ = ("kinds", "arity", "depth", "capacity", "buf", "used", "T", "base", "n", "updates", "src", "_view",
                 "_batches", "_target")

    def __init__(self, kinds: tuple[str, ...], depth: int, capacity: int, src: BatchTable):
        self.kinds, self.arity, self.depth, self.capacity = kinds, len(kinds), depth, capacity
        words = capacity * words_for(SMALL_ROWS, self.arity, depth) + words_for(ARENA_ROWS, self.arity, depth)
        self.buf = np.empty(words, dtype=np.int64)
        self.used = 0
        self.n = 0
        self.updates = 0
        self.T = np.empty((0, VAL0 + self.arity - 1), dtype=np.int64)
        self.base = 0
        self.src = None
        self._view = None
        self._batches: list[Batch] = []
        self._target = None
        self.rebase(src)

    def rebase(self, src) -> None:
        """Put the rows of ``src`` (the spine's table now) in front of this arena's rows.  O(batches).

        A new matrix each time: one handed out before stays as it was.
        """
        rows = src.matrix
        T = np.empty((len(rows) + self.capacity, rows.shape[1]), dtype=np.int64)
        T[: len(rows)] = rows
        T[len(rows): len(rows) + self.n] = self.T[self.base: self.base + self.n]
        self.T, self.base, self.src, self._view = T, len(rows), src, None

    def fits(self, n: int) -> bool:
        """Whether a batch of ``n`` updates has room.  O(1)."""
        return self.n < self.capacity and self.used + words_for(n, self.arity, self.depth) <= len(self.buf)

    def target(self) -> tuple[np.ndarray, int, np.ndarray, int]:
        """``(buf, used, T, at)``: where a kernel that calls :func:`write_trie` writes the next batch.  O(1).

        Valid until :meth:`rebase`: ask :meth:`traces.spine.Spine.arena_room`
        for the arena first, which rebases it if the spine's rows moved.
        """
        self._target = self.T
        return self.buf, self.used, self.T, self.base + self.n

    def written(self, used: int, updates: int) -> None:
        """A kernel wrote a batch of ``updates`` updates at :meth:`target`, leaving ``used`` words used.  O(1)."""
        if self._target is not self.T:  # the row went into a matrix readers no longer read: a caller's bug
            raise RuntimeError("internal error: an arena's table was rebased between target() and written()")
        self._target = None
        self.used = used
        self.n += 1
        self.updates += updates
        self._view = None

    def table(self) -> "ArenaTable":
        """The spine's rows then this arena's, as the table readers read (it keeps both alive).  O(1)."""
        if self._view is None:
            self._view = ArenaTable(self.T[: self.base + self.n], self)
        return self._view

    @property
    def nbytes(self) -> int:
        """Bytes of the buffer's words in use."""
        return 8 * self.used

    def rows(self, first: int = 0) -> np.ndarray:
        """This arena's rows, and the ``first`` spine rows before them.  O(1)."""
        return self.T[self.base - first: self.base + self.n]

    def batches(self) -> list[Batch]:
        """This arena's batches as :class:`~traces.batch.Batch` views of its buffer (made once each).  O(batches)."""
        start = self.buf.ctypes.data
        for i in range(len(self._batches), self.n):
            r = self.T[self.base + i]

            def at(field, count):
                o = (int(r[field]) - start) // 8
                return self.buf[o: o + count]

            nk, nv, k = int(r[NKEYS]), int(r[NVALS]), int(r[NUPD])
            # Its table row is made from these views when asked for: the spine's checks compare it with ``r``.
            self._batches.append(Batch(at(KEYS, nk), tuple(at(VAL0 + j, nv) for j in range(self.arity - 1)),
                                       at(KOFFS64, nk + 1), at(VOFFS64, nv + 1),
                                       at(TIMES, k * self.depth).reshape(k, self.depth), at(DIFFS, k),
                                       Description.covering(self.depth), self.kinds, check=False))
        return self._batches[: self.n]

    def _check(self) -> None:
        """The rows describe exactly the batches in the buffer, in order, each consolidated: for stress tests."""
        assert 0 <= self.n <= self.capacity and self.used <= len(self.buf)
        assert np.array_equal(self.T[: self.base], self.src.matrix), "the arena's copy of the spine's rows is stale"
        assert not self.T[self.base: self.base + self.n, [KOFFS32, VOFFS32]].any()
        assert self.updates == int(self.T[self.base: self.base + self.n, NUPD].sum())


class ArenaTable:
    """A spine's table with its arena's rows after its own (what :meth:`traces.spine.Spine.table` gives then).

    Readers read ``matrix``; ``batches`` (a row each, as
    :attr:`traces.layout.BatchTable.batches`) makes the arena's batches as
    views, for checks.  Keeps the arena, and the spine's table, alive.
    """

    __slots__ = ("matrix", "_arena", "_src")

    def __init__(self, matrix: np.ndarray, arena: Arena):
        self.matrix, self._arena, self._src = matrix, arena, arena.src

    @property
    def batches(self) -> list[Batch]:
        """The batches ``matrix`` describes, oldest first.  O(batches), views made once."""
        return self._src.batches + self._arena.batches()
