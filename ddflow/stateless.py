"""Stateless operators: they change records, never times, and keep no state.

Each row transform comes in two forms: a row-at-a-time Python callback
(convenient) and a columnar one that works on whole numpy columns (the
fast path: projections without any Python per row, and vectorized
callbacks that receive and return arrays).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ddflow.node import Node, Scope
from ddflow.updates import Updates, consolidate, from_rows


class RowNode(Node):
    """Applies a Python function to decoded rows (map, flat_map, filter)."""

    def __init__(self, scope: Scope, name: str, fn: Callable, mode: str):
        super().__init__(scope, name)
        self.fn = fn
        self.mode = mode

    def step(self, bound: np.ndarray) -> None:
        u = self.take()
        if u is None:
            return
        rows = [r for r, _, _ in u.to_rows(self.flow.interner)] if u.arity else [()] * len(u)
        fn = self.fn
        where = f"operator {self.name!r}"
        try:
            if self.mode == "filter":
                keep = np.fromiter((bool(fn(r)) for r in rows), dtype=bool, count=len(rows))
                self.emit(u.take(np.flatnonzero(keep)))
                return
            if self.mode == "map":
                out = [_as_row(fn(r), where) for r in rows]
                idx = np.arange(len(rows))
            else:  # flat_map
                out, idx_l = [], []
                for i, r in enumerate(rows):
                    for o in fn(r):
                        out.append(_as_row(o, where))
                        idx_l.append(i)
                idx = np.asarray(idx_l, dtype=np.int64)
        except Exception as e:
            if isinstance(e, (TypeError, ValueError)) and where in str(e):
                raise
            raise type(e)(f"{where}: {e}") from e
        if not out:
            return
        self.emit(from_rows(out, u.times[idx], u.diffs[idx], self.flow.interner,
                            kinds=self._out_kinds(out), depth=u.depth, where=where))

    def _out_kinds(self, out: list[tuple]) -> tuple[str, ...] | None:
        if self.kinds is not None and len(out[0]) == len(self.kinds):
            return self.kinds
        return None


def _as_row(r: Any, where: str) -> tuple:
    if isinstance(r, tuple):
        return r
    raise TypeError(f"{where}: records are tuples, the function returned {type(r).__name__} {r!r}")


_KIND_OF_DTYPE = {"i": "i", "u": "i", "f": "f", "b": "b"}


class ColumnsNode(Node):
    """Vectorized transforms over whole columns: projection, map_columns, filter_columns."""

    def __init__(self, scope: Scope, name: str, mode: str, fn: Callable | None = None,
                 indices: Sequence[int] | None = None):
        super().__init__(scope, name)
        self.mode = mode
        self.fn = fn
        self.indices = tuple(indices) if indices is not None else None

    def step(self, bound: np.ndarray) -> None:
        u = self.take()
        if u is None:
            return
        where = f"operator {self.name!r}"
        if self.mode == "project":
            try:
                self.emit(Updates(tuple(u.cols[i] for i in self.indices), u.times, u.diffs,
                                  tuple(u.kinds[i] for i in self.indices)))
            except IndexError:
                raise ValueError(f"{where}: projects fields {self.indices} of records with {u.arity} fields") from None
            return
        cols = u.decoded_columns(self.flow.interner)
        if self.mode == "filter":
            mask = np.asarray(self.fn(*cols), dtype=bool)
            if mask.shape != (len(u),):
                raise ValueError(f"{where}: filter returned shape {mask.shape} for {len(u)} records")
            self.emit(u.take(np.flatnonzero(mask)))
            return
        out = self.fn(*cols)
        if isinstance(out, np.ndarray):
            out = (out,)
        new_cols, kinds = [], []
        for i, c in enumerate(out):
            c = np.asarray(c)
            if c.shape != (len(u),):
                raise ValueError(f"{where}: output column {i} has shape {c.shape}, expected ({len(u)},)")
            k = _KIND_OF_DTYPE.get(c.dtype.kind, "o")
            if k == "o":
                c = self.flow.interner.encode(c.tolist(), f"{where} output column {i}")
            elif k == "f":
                c = c.astype(np.float64, copy=False)
            else:
                c = c.astype(np.int64, copy=False)
            new_cols.append(c)
            kinds.append(k)
        self.emit(Updates(tuple(new_cols), u.times, u.diffs, tuple(kinds)))


class NegateNode(Node):
    def step(self, bound: np.ndarray) -> None:
        u = self.take()
        if u is not None:
            self.emit(u.with_diffs(-u.diffs))


class ConcatNode(Node):
    def step(self, bound: np.ndarray) -> None:
        parts = [u for u in (self.take(p) for p in range(len(self.queues))) if u is not None]
        if parts:
            kinds = parts[0].kinds
            parts = [p if p.kinds == kinds else self.flow.coerce(p, kinds, self.name) for p in parts]
            self.emit(Updates.concat(parts))


class ConsolidateNode(Node):
    def step(self, bound: np.ndarray) -> None:
        u = self.take()
        if u is not None:
            self.emit(consolidate(u))


class InspectNode(Node):
    """Calls ``fn((row, time, diff))`` for each update, or ``fn(batch)`` with an Arrow table."""

    def __init__(self, scope: Scope, name: str, fn: Callable, batch: bool):
        super().__init__(scope, name)
        self.fn = fn
        self.batch = batch

    def step(self, bound: np.ndarray) -> None:
        u = self.take()
        if u is None:
            return
        if self.batch:
            self.fn(u.to_arrow(self.flow.interner))
        else:
            for upd in u.to_rows(self.flow.interner):
                self.fn(upd)
        self.emit(u)


class EnterNode(Node):
    """Brings a collection into a loop: times gain iteration coordinate 0."""

    def step(self, bound: np.ndarray) -> None:
        q = self.queues[0]
        if not q:
            return
        u = Updates.concat(q)
        # Only outer-complete times enter; later ones wait for their outer round.
        ready = np.all(u.times < bound[:-1], axis=1)
        if not ready.all():
            self.queues[0] = [u.take(np.flatnonzero(~ready))]
            u = u.take(np.flatnonzero(ready))
        else:
            self.queues[0] = []
        if len(u):
            self.emit(u.with_times(np.concatenate([u.times, np.zeros((len(u), 1), dtype=np.int64)], axis=1)))


class LeaveNode(Node):
    """Takes a collection out of a loop: the iteration coordinate is dropped and diffs telescope."""

    def step(self, bound: np.ndarray) -> None:
        u = self.take()
        if u is not None:
            self.emit(consolidate(u.with_times(np.ascontiguousarray(u.times[:, :-1]))))


class VariableNode(Node):
    """A loop variable: the entered initial collection plus feedback one iteration later.

    Port 0 carries the initial collection (at iteration 0), port 1 the
    loop body's result; the variable feeds back ``result - initial``
    advanced by one iteration, so at round ``i + 1`` it equals the result
    of round ``i`` and only differences circulate.  Feedback is held until
    its round so that the result and the retraction of the initial
    collection consolidate before they re-enter the body.
    """

    feedback_port = 1

    def __init__(self, scope: Scope, name: str):
        super().__init__(scope, name, n_inputs=2)
        self.feedback_source: Node | None = None
        self.held: list[Updates] = []

    def step(self, bound: np.ndarray) -> None:
        init = self.take(0)
        fb = self.take(1)
        if init is not None:
            self.emit(init)
            self.held.append(_next_iteration(self._fit(init.with_diffs(-init.diffs))))
        if fb is not None:
            self.held.append(_next_iteration(self._fit(fb)))
        if not self.held:
            return
        u = Updates.concat(self.held) if len(self.held) > 1 else self.held[0]
        ready = np.all(u.times < bound, axis=1)
        self.held = [u.take(np.flatnonzero(~ready))] if not ready.all() else []
        if ready.any():
            self.emit(consolidate(u.take(np.flatnonzero(ready))))

    def _fit(self, u: Updates) -> Updates:
        """Bring feedback to the variable's column kinds (as concat does), or fail naming the variable."""
        if self.kinds is None or u.kinds == self.kinds:
            return u
        return self.flow.coerce(u, self.kinds, self.name)

    def work_times(self):
        yield from super().work_times()
        for u in self.held:
            yield u.times


def _next_iteration(u: Updates) -> Updates:
    t = u.times.copy()
    t[:, -1] += 1
    return u.with_times(t)
