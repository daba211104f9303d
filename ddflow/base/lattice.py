"""Lattice times, antichains and frontiers.

A time is a fixed-length int64 vector ordered coordinate-wise (the product
order).  Depth 1 is the totally ordered top level; every nested ``iterate``
appends one coordinate, the iteration counter.  Everything here is
vectorized over ``(n, depth)`` arrays because operators handle thousands
of data times per message time.

The least upper bound is ``lub`` (elementwise max; differential
dataflow's ``join``) and the greatest lower bound ``glb`` (elementwise
min; its ``meet``): here ``join`` means only the relational operator.
This module is the bottom layer: of ddflow it imports only the errors.
"""
from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import numpy as np

from ddflow.errors import SchemaError, UsageError

TimeLike = int | Sequence[int] | np.ndarray


_I64 = 1 << 63  # a time coordinate is an int64: -_I64 <= x < _I64


def as_time(t: TimeLike, depth: int | None = None) -> np.ndarray:
    """One time as a 1-D int64 vector; ints are depth-1 times.

    >>> as_time(3).tolist(), as_time((1, 2)).tolist()
    ([3], [1, 2])
    """
    a = np.atleast_1d(np.asarray(t, dtype=np.int64))
    if a.ndim != 1:
        raise SchemaError(f"a time must be an int or a 1-D vector, got shape {a.shape}")
    if depth is not None and a.shape[0] != depth:
        raise SchemaError(f"time {tuple(a.tolist())} has depth {a.shape[0]}, expected depth {depth}")
    return a


def as_times(t: TimeLike | Iterable[TimeLike], depth: int | None = None) -> np.ndarray:
    """Many times as an ``(n, depth)`` int64 array; a 1-D array of ints is depth 1.

    >>> as_times([1, 2]).tolist(), as_times([(0, 1), (2, 0)], depth=2).tolist()
    ([[1], [2]], [[0, 1], [2, 0]])
    """
    a = np.asarray(t, dtype=np.int64)
    if a.ndim == 0:
        a = a.reshape(1, 1)
    elif a.ndim == 1:
        a = a.reshape(-1, 1) if depth in (None, 1) else a.reshape(-1, depth)
    if a.ndim != 2:
        raise SchemaError(f"times must have shape (n, depth), got {a.shape}")
    if depth is not None and a.shape[1] != depth:
        raise SchemaError(f"times have depth {a.shape[1]}, expected depth {depth} (mixed time depths)")
    return a


def lub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least upper bound, coordinate-wise max (broadcasts).

    >>> lub(np.array([1, 5]), np.array([3, 2])).tolist()
    [3, 5]
    """
    return np.maximum(a, b)


def glb(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Greatest lower bound, coordinate-wise min (broadcasts).

    >>> glb(np.array([1, 5]), np.array([3, 2])).tolist()
    [1, 2]
    """
    return np.minimum(a, b)


def less_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray | bool:
    """``a <= b`` in the product order, over the last axis (broadcasts).

    >>> bool(less_equal([1, 2], [1, 3])), bool(less_equal([1, 2], [0, 3]))
    (True, False)
    """
    return np.all(np.asarray(a) <= np.asarray(b), axis=-1)


def less_than(a: np.ndarray, b: np.ndarray) -> np.ndarray | bool:
    """``a < b``: ``a <= b`` and ``a != b``.

    >>> bool(less_than([1, 2], [1, 2])), bool(less_than([1, 2], [1, 3]))
    (False, True)
    """
    a = np.asarray(a)
    b = np.asarray(b)
    return np.all(a <= b, axis=-1) & np.any(a != b, axis=-1)


def lex_order(times: np.ndarray) -> np.ndarray:
    """Permutation sorting times lexicographically, a linear extension of the product order.

    O(n log n).

    >>> lex_order(np.array([[1, 0], [0, 5], [0, 2]])).tolist()
    [2, 1, 0]
    """
    times = np.asarray(times)
    if times.shape[1] == 1:
        return np.argsort(times[:, 0], kind="stable")
    return np.lexsort(times.T[::-1])


def minimal(times: np.ndarray) -> np.ndarray:
    """The antichain of minimal elements of a set of times, lexicographically sorted.

    O(n) at depth 1; O(n log n + n * m) otherwise, for m minimal elements.

    >>> minimal(np.array([[1, 0], [0, 5], [0, 2], [1, 1]])).tolist()
    [[0, 2], [1, 0]]
    """
    times = np.asarray(times, dtype=np.int64)
    if len(times) == 0:
        return times.reshape(0, times.shape[1] if times.ndim == 2 else 1)
    if len(times) == 1:
        return times.copy()
    if times.shape[1] == 1:
        return times[[int(np.argmin(times[:, 0]))]]
    uniq = np.unique(times, axis=0)  # lexicographic order
    keep: list[np.ndarray] = []
    for t in uniq:
        # In lexicographic order an element can only be dominated by an earlier one.
        if not any(np.all(k <= t) for k in keep):
            keep.append(t)
    return np.array(keep, dtype=np.int64)


_MINIMUM: dict[int, "Antichain"] = {}
_EMPTY: dict[int, "Antichain"] = {}


class Antichain:
    """A set of mutually incomparable times: a frontier.

    The frontier *contains* every time greater than or equal to one of its
    elements; those are the times that may still appear.  The empty
    antichain is the frontier of a finished input.  Immutable.

    >>> f = Antichain([(0, 2), (1, 0), (1, 3)])
    >>> f, len(f), f.depth
    (Antichain({(0, 2), (1, 0)}), 2, 2)
    """

    __slots__ = ("_elements", "depth")

    def __init__(self, elements: Iterable[TimeLike] | np.ndarray = (), depth: int | None = None):
        if isinstance(elements, np.ndarray):
            arr = np.asarray(elements, dtype=np.int64)
        else:
            elements = list(elements)
            try:
                arr = np.asarray(elements, dtype=np.int64)
            except ValueError:
                lens = sorted({len(np.atleast_1d(e)) for e in elements})
                raise SchemaError(f"mixed time depths in an Antichain: elements of depths {lens}") from None
        if arr.size == 0:
            if depth is None:
                raise UsageError("an empty Antichain needs an explicit depth")
            arr = arr.reshape(0, depth)
        else:
            arr = as_times(arr, depth)
        self.depth = arr.shape[1]
        self._elements = minimal(arr)
        self._elements.setflags(write=False)

    @classmethod
    def from_time(cls, t: TimeLike) -> "Antichain":
        """The frontier of the single time ``t``.

        >>> Antichain.from_time(3), Antichain.from_time((1, 2))
        (Antichain({3}), Antichain({(1, 2)}))
        """
        t = as_time(t)
        return cls(t.reshape(1, -1))

    @classmethod
    def minimum(cls, depth: int) -> "Antichain":
        """The frontier of all times: the single all-zeros time (shared: antichains are immutable).

        >>> Antichain.minimum(2)
        Antichain({(0, 0)})
        """
        a = _MINIMUM.get(depth)
        if a is None:
            a = _MINIMUM[depth] = cls(np.zeros((1, depth), dtype=np.int64))
        return a

    @classmethod
    def empty(cls, depth: int) -> "Antichain":
        """The empty frontier of ``depth``: no time may appear any more (shared, like ``minimum``).

        >>> bool(Antichain.empty(1))
        False
        """
        a = _EMPTY.get(depth)
        if a is None:
            a = _EMPTY[depth] = cls((), depth=depth)
        return a

    @property
    def elements(self) -> np.ndarray:
        """The minimal times as a read-only ``(n, depth)`` int64 array, lexicographically sorted.

        >>> Antichain([(1, 0), (0, 2)]).elements.tolist()
        [[0, 2], [1, 0]]
        """
        return self._elements

    def __len__(self) -> int:
        return len(self._elements)

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        return (tuple(e) for e in self._elements.tolist())

    def __bool__(self) -> bool:
        return len(self._elements) > 0

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Antichain):
            return NotImplemented
        return self.depth == other.depth and np.array_equal(self._elements, other._elements)

    def __hash__(self) -> int:
        return hash((self.depth, self._elements.tobytes()))

    def __repr__(self) -> str:
        return "Antichain({" + ", ".join(str(e if len(e) > 1 else e[0]) for e in self) + "})"

    def insert(self, t: TimeLike) -> "Antichain":
        """A new antichain with ``t`` added, keeping only minimal elements.

        >>> Antichain([(0, 2), (1, 0)]).insert((0, 1))
        Antichain({(0, 1), (1, 0)})
        """
        t = as_time(t, self.depth).reshape(1, -1)
        return Antichain(np.concatenate([self._elements, t]), depth=self.depth)

    def less_equal(self, t: TimeLike) -> bool:
        """Some element is ``<= t``: ``t`` is in (beyond) the frontier, not yet complete.

        >>> f = Antichain([(0, 2), (1, 0)])
        >>> f.less_equal((0, 3)), f.less_equal((0, 1))
        (True, False)
        """
        t = as_time(t, self.depth)
        return bool(np.any(np.all(self._elements <= t, axis=1)))

    def less_equal_many(self, times: np.ndarray) -> np.ndarray:
        """Vectorized ``less_equal`` over an ``(n, depth)`` array.

        O(n) at depth 1, O(n * len(self)) otherwise.

        >>> Antichain([(0, 2), (1, 0)]).less_equal_many(np.array([[0, 1], [1, 0]])).tolist()
        [False, True]
        """
        times = as_times(times, self.depth)
        if self.depth == 1 and len(self._elements):
            return times[:, 0] >= self._elements[0, 0]
        out = np.zeros(len(times), dtype=bool)
        for e in self._elements:
            out |= np.all(times >= e, axis=1)
        return out

    def complete(self, times: np.ndarray) -> np.ndarray:
        """Mask of times no longer in the frontier: nothing at or before them can still arrive.

        >>> Antichain.from_time(5).complete(np.array([[4], [5]])).tolist()
        [True, False]
        """
        return ~self.less_equal_many(times)

    def dominates(self, other: "Antichain") -> bool:
        """Every element of ``other`` is ``>=`` some element of ``self`` (self <= other as frontiers).

        >>> early, late = Antichain.from_time(1), Antichain.from_time(3)
        >>> early.dominates(late), late.dominates(early)
        (True, False)
        """
        if other.depth != self.depth:
            raise SchemaError(f"mixed time depths: {self.depth} and {other.depth}")
        return all(self.less_equal(e) for e in other._elements)

    def glb(self, other: "Antichain") -> "Antichain":
        """The lower envelope of two frontiers (the more conservative of the two).

        >>> Antichain([(0, 2), (1, 0)]).glb(Antichain([(0, 1)]))
        Antichain({(0, 1), (1, 0)})
        """
        if other.depth != self.depth:
            raise SchemaError(f"mixed time depths: {self.depth} and {other.depth}")
        return Antichain(np.concatenate([self._elements, other._elements]), depth=self.depth)


class MutableAntichain:
    """A multiset of times with a cached frontier of its minimal elements.

    Used where a frontier is the meet of many holders (readers of a trace,
    capabilities of operators): each holder adds +1 at its time and -1 when
    it moves on.

    >>> m = MutableAntichain(1); m.update(3, +1); m.update(5, +1); m.frontier()
    Antichain({3})
    >>> m.update(3, -1); m.frontier()
    Antichain({5})
    """

    __slots__ = ("depth", "_counts", "_frontier")

    def __init__(self, depth: int):
        self.depth = depth
        self._counts: dict[tuple[int, ...], int] = {}
        self._frontier: Antichain | None = Antichain.empty(depth)

    def update(self, t: TimeLike, delta: int) -> None:
        """Add ``delta`` to the count of time ``t``; a count may not go negative.

        O(1); the frontier is recomputed lazily.

        >>> m = MutableAntichain(1); m.update(3, 2); m.count(3)
        2
        """
        if type(t) is tuple and len(t) == self.depth and all(type(x) is int and -_I64 <= x < _I64 for x in t):
            key = t  # already the key (a frontier's element, as iterating an Antichain gives it)
        else:
            key = tuple(int(x) for x in as_time(t, self.depth))
        n = self._counts.get(key, 0) + delta
        if n < 0:
            raise UsageError(f"MutableAntichain count for time {key} would become negative ({n})")
        if n == 0:
            self._counts.pop(key, None)
        else:
            self._counts[key] = n
        self._frontier = None

    def update_iter(self, changes: Iterable[tuple[TimeLike, int]]) -> list[tuple[tuple[int, ...], int]]:
        """Apply changes; return the resulting changes to the frontier as (time, +1/-1).

        >>> m = MutableAntichain(1)
        >>> m.update_iter([(3, 1), (5, 1)]), m.update_iter([(3, -1)])
        ([((3,), 1)], [((3,), -1), ((5,), 1)])
        """
        before = set(self.frontier())
        for t, d in changes:
            self.update(t, d)
        after = set(self.frontier())
        return [(t, -1) for t in sorted(before - after)] + [(t, +1) for t in sorted(after - before)]

    def frontier(self) -> Antichain:
        """The minimal times with a positive count (cached until the next update).

        Recomputing costs as ``Antichain`` over the distinct times held.

        >>> m = MutableAntichain(2); m.update((0, 2), 1); m.update((1, 0), 1); m.update((1, 1), 1)
        >>> m.frontier()
        Antichain({(0, 2), (1, 0)})
        """
        if self._frontier is None:
            if self._counts:
                self._frontier = Antichain(np.array(list(self._counts), dtype=np.int64), depth=self.depth)
            else:
                self._frontier = Antichain.empty(self.depth)
        return self._frontier

    def sole(self) -> tuple[int, ...] | None:
        """The one time held, when exactly one is (any count); else None.  O(1).

        >>> m = MutableAntichain(1); m.update(3, 2); m.sole()
        (3,)
        >>> m.update(4, 1); m.sole() is None
        True
        """
        return next(iter(self._counts)) if len(self._counts) == 1 else None

    def count(self, t: TimeLike) -> int:
        """The count of time ``t`` (0 if absent).

        >>> MutableAntichain(1).count(7)
        0
        """
        return self._counts.get(tuple(int(x) for x in as_time(t, self.depth)), 0)

    def __bool__(self) -> bool:
        return bool(self._counts)


def advance_by(times: np.ndarray, frontier: Antichain) -> np.ndarray:
    """Advance every time to ``glb over f in frontier of lub(t, f)``.

    For every ``g`` beyond the frontier, ``t <= g`` iff ``advance(t) <= g``,
    and the result is the largest such time: two updates whose times no
    future time can tell apart land on the same time and consolidate.  An
    empty frontier leaves times as they are (no future time exists).
    O(n * len(frontier)), vectorized.

    >>> advance_by(as_times([1, 4, 7]), Antichain.from_time(5)).ravel().tolist()
    [5, 5, 7]
    """
    times = np.asarray(times, dtype=np.int64)
    if times.ndim != 2 or times.shape[1] != frontier.depth:
        raise SchemaError(f"mixed time depths: times of shape {times.shape}, frontier depth {frontier.depth}")
    if len(frontier) == 0 or len(times) == 0:
        return times
    elems = frontier.elements
    out = np.maximum(times, elems[0])
    for f in elems[1:]:
        np.minimum(out, np.maximum(times, f), out=out)
    return out
