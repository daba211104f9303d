"""The reduction algebra: what a reduce computes for one key, separate from how times are retired.

A :class:`Logic` maps a key's accumulated input values ``[(value, mult)]``
to its output values.  ``scalar`` logics (count, distinct, threshold)
group by the whole record and their output follows from its count alone,
which the vectorized tactics use; the strategies that retire times live
in :mod:`ddflow.operators.reduce.tactic` and its neighbours.
"""
from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from typing import Any, Callable

import numpy as np

from ddflow.base.exactsum import exact_sum_reference
from ddflow.errors import SchemaError

ReduceFn = Callable[[Any, list[tuple[tuple, int]]], list[tuple[tuple, int]]]

#: :attr:`Logic.scalar_code` of count and of distinct: the scalar logics compiled steps evaluate themselves.
SCALAR_COUNT, SCALAR_DISTINCT = 0, 1


class Logic(ABC):
    """How a reduction turns a key's accumulated values into output values."""

    name = "reduce"
    #: Evaluate on internal column values (numbers, interned codes) rather than decoded Python values.
    raw = False
    #: Vectorized kernels apply: the group is the whole record and its output follows from its count.
    scalar = False
    #: Fields a record needs: the key, and for sum/min/max/top_k a value.
    min_arity = 1
    #: A scalar logic a compiled step can evaluate without calling back into Python
    #: (:data:`SCALAR_COUNT`, :data:`SCALAR_DISTINCT`); None for the rest (threshold calls a user function).
    scalar_code: int | None = None

    @abstractmethod
    def evaluate(self, key: Any, vals: list[tuple[tuple, int]]) -> list[tuple[tuple, int]]:
        """The output values for one key's accumulated input values."""

    def out_kinds(self, in_kinds: tuple[str, ...]) -> tuple[str, ...] | None:
        return None


class UserLogic(Logic):
    def __init__(self, fn: ReduceFn):
        self.fn = fn
        self.name = getattr(fn, "__name__", "reduce")

    def evaluate(self, key, vals):
        return self.fn(key, vals)


class CountLogic(Logic):
    name, raw, scalar, scalar_code = "count", True, True, SCALAR_COUNT

    def evaluate(self, key, vals):
        return [(v + (m,), 1) for v, m in vals]

    def out_kinds(self, in_kinds):
        return (*in_kinds, "i")

    def scalar_rows(self, cnt):
        return cnt, cnt != 0  # extra column value, multiplicity


class DistinctLogic(Logic):
    name, raw, scalar, scalar_code = "distinct", True, True, SCALAR_DISTINCT

    def evaluate(self, key, vals):
        return [(v, 1) for v, m in vals if m > 0]

    def out_kinds(self, in_kinds):
        return in_kinds

    def scalar_rows(self, cnt):
        return None, (cnt > 0).astype(np.int64)


class ThresholdLogic(Logic):
    name, raw, scalar = "threshold", True, True

    def __init__(self, fn: Callable[[int], int]):
        self.fn = fn
        self._vfn = np.frompyfunc(lambda c: int(fn(int(c))), 1, 1)

    def __getstate__(self) -> dict:
        """Picklable (workers on Spark executors get the graph pickled): the ufunc is rebuilt from ``fn``."""
        return {"fn": self.fn}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["fn"])

    def evaluate(self, key, vals):
        out = []
        for v, m in vals:
            k = int(self.fn(m))
            if k:
                out.append((v, k))
        return out

    def out_kinds(self, in_kinds):
        return in_kinds

    def scalar_rows(self, cnt):
        mult = self._vfn(cnt).astype(np.int64) if len(cnt) else np.zeros(0, dtype=np.int64)
        mult[cnt == 0] = 0
        return None, mult


class SumLogic(Logic):
    # Reduce semantics (a key is present while any record has nonzero multiplicity) need
    # per-record state, so sum takes the general path rather than the (count, sum) kernels.
    name, raw, scalar = "sum", True, False
    min_arity = 2

    def evaluate(self, key, vals):
        """Floats: the exact sum rounded once (:mod:`ddflow.base.exactsum`), whatever the order of ``vals``."""
        if not vals:
            return []
        if any(isinstance(v[0], (float, np.floating)) for v, _ in vals):
            return [((exact_sum_reference([v[0] for v, _ in vals], [m for _, m in vals]),), 1)]
        return [((sum(v[0] * m for v, m in vals),), 1)]

    def out_kinds(self, in_kinds):
        return (in_kinds[0], "f" if in_kinds[1] == "f" else "i")


class ExtremeLogic(Logic):
    """min / max / top_k of the values of each key, or the first ``k`` numbered.

    ``row_number``: top_k with each copy numbered 1..k.  ``rank`` and
    ``dense_rank``: every copy of each value numbered by SQL's RANK (1 +
    the copies before its tie group) or DENSE_RANK (1 + the tie groups
    before it), kept while the number is at most ``k``; values tie when
    their first ``ties`` fields are equal.  ``desc``: the value fields
    (0-based) compared in descending order.  ``partition`` (top_k and the
    numbered kinds): a key's values equal in their first ``partition``
    fields are ranked on their own, as if those fields were part of the key.
    """

    min_arity = 2

    def __init__(self, kind: str, k: int = 1, ties: int = 0, desc: tuple[int, ...] = (), partition: int = 0):
        self.kind, self.k = kind, k
        self.ties = ties if kind in ("rank", "dense_rank") else 0
        self.desc = tuple(sorted(set(desc)))
        self.partition = partition if kind not in ("min", "max") else 0
        self.name = kind

    def _key(self, item: tuple[tuple, int]):
        if not self.desc:
            return _sort_key(item)
        return tuple(_Descending(_orderable(x)) if i in self.desc else _orderable(x) for i, x in enumerate(item[0]))

    def evaluate(self, key, vals):
        """In :func:`_sort_key`'s order: None first, and values Python cannot compare (a str, an int) still ordered."""
        live = [(v, m) for v, m in vals if m > 0]
        if not live:
            return []
        if self.kind == "min":
            return [(min(live, key=self._key)[0], 1)]
        if self.kind == "max":
            return [(max(live, key=self._key)[0], 1)]
        ordered = sorted(live, key=self._key)
        if self.partition:  # each part (a run of values equal in the first fields) on its own
            runs = itertools.groupby(ordered, key=lambda item: _orderable(item[0][:self.partition]))
            return [row for _, run in runs for row in self._first_k(list(run))]
        return self._first_k(ordered)

    def _first_k(self, ordered: list[tuple[tuple, int]]) -> list[tuple[tuple, int]]:
        if self.kind in ("rank", "dense_rank"):
            return self._ranked(ordered)
        out, left = [], self.k
        for v, m in ordered:
            if left <= 0:
                break
            take = min(m, left)
            if self.kind == "row_number":
                first = self.k - left + 1
                out.extend((v + (n,), 1) for n in range(first, first + take))
            else:
                out.append((v, take))
            left -= take
        return out

    def _ranked(self, live: list[tuple[tuple, int]]) -> list[tuple[tuple, int]]:
        out, copies, groups, before, last = [], 0, 0, 0, None
        for v, m in live:
            lead = _orderable(v[:self.ties])
            if last is None or lead != last:
                last, before, groups = lead, copies, groups + 1
            number = before + 1 if self.kind == "rank" else groups
            if number > self.k:
                break
            out.append((v + (number,), m))
            copies += m
        return out

    def out_kinds(self, in_kinds):
        return in_kinds + ("i",) if self.kind in ("row_number", "rank", "dense_rank") else in_kinds


def _checked(out: Any, name: str) -> list[tuple[tuple, int]]:
    """A reduction's output as ``[(value_tuple, int)]``, or a TypeError naming the reduce."""
    res = []
    for item in out:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], tuple)
                and isinstance(item[1], (int, np.integer)) and not isinstance(item[1], (bool, np.bool_))):
            raise SchemaError(f"reduce {name!r}: the function must return [(value_tuple, int_multiplicity)], "
                            f"got the item {item!r}")
        res.append((item[0], int(item[1])))
    return res


def _sort_key(item: tuple[tuple, int]) -> tuple:
    """A total order on value tuples, so a reduce function sees its values in one deterministic order.

    None sorts first, then numbers, strings, nested tuples, and anything
    else by type name and ``repr`` (values of different types never meet
    Python's ``<``).
    """
    return _orderable(item[0])


class _Descending:
    """An orderable value compared the other way round (a descending field of :class:`ExtremeLogic`)."""

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __lt__(self, other):
        return other.x < self.x

    def __gt__(self, other):
        return other.x > self.x

    def __eq__(self, other):
        return self.x == other.x

    __hash__ = None


def _orderable(x) -> tuple:
    if x is None:
        return (0,)
    if isinstance(x, (bool, int, float, np.integer, np.floating)):
        return (1, x)
    if isinstance(x, str):
        return (2, x)
    if isinstance(x, tuple):
        return (3, tuple(_orderable(y) for y in x))
    return (4, type(x).__name__, repr(x))
