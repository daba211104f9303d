"""Stateless operators: they change records, never times, and keep no state.

Each row transform comes in two forms: a row-at-a-time Python callback
(convenient) and a columnar one that works on whole numpy columns (the
fast path: projections without any Python per row, and vectorized
callbacks that receive and return arrays).
"""
from __future__ import annotations

import traceback
from typing import Any, Callable, Sequence

import numpy as np

from ddflow.base.columnar import frozen
from ddflow.base.consolidate import consolidate
from ddflow.base.kinds import OF_DTYPE
from ddflow.base.updates import Updates, from_rows
from ddflow.errors import SchemaError
from ddflow.graph.node import BatchwiseNode, Node
from ddflow.graph.scope import Scope


class RowNode(Node):
    """Applies a Python function to decoded rows (map, flat_map, filter).

    ``on_error`` says what a raising function does: ``"fail"`` (default)
    stops the run with the error, naming the operator; ``"dead-letter"``
    drops the update whose row made it raise and records it in
    :attr:`failed` (row, time, diff, traceback) for the caller to take, so a
    deterministic function drops the same updates on every replay (the
    streaming driver's ``onError`` policy).  A flat_map's outputs for a row
    that raises midway are all dropped, never half-applied.
    """

    def __init__(self, scope: Scope, name: str, fn: Callable, mode: str):
        super().__init__(scope, name)
        self.fn = fn
        self.mode = mode
        self.on_error = "fail"
        self.failed: list[dict] = []

    def step(self, bound: np.ndarray) -> None:
        u = self.dequeue()
        if u is None:
            return
        rows = [r for r, _, _ in u.to_rows(self.ctx.interner)] if u.arity else [()] * len(u)
        fn = self.fn
        where = f"operator {self.name!r}"
        if self.on_error == "dead-letter":
            self._step_guarded(u, rows, where)
            return
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
        self.emit(from_rows(out, u.times[idx], u.diffs[idx], self.ctx.interner,
                            kinds=self._out_kinds(out), depth=u.depth, where=where))

    def _step_guarded(self, u: Updates, rows: list[tuple], where: str) -> None:
        """One row at a time: a row whose function raises is recorded in ``failed`` and dropped."""
        fn, mode = self.fn, self.mode
        out: list[tuple] = []
        idx: list[int] = []
        for i, r in enumerate(rows):
            try:
                if mode == "filter":
                    if fn(r):
                        idx.append(i)
                    continue
                produced = [_as_row(fn(r), where)] if mode == "map" else [_as_row(o, where) for o in fn(r)]
            except Exception as e:  # noqa: BLE001 - the policy: any error of the user's function
                self.failed.append({"operator": self.name, "record": r, "time": u.times[i].tolist(),
                                    "diff": int(u.diffs[i]), "error": f"{type(e).__name__}: {e}",
                                    "traceback": traceback.format_exc()})
                continue
            out.extend(produced)
            idx.extend([i] * len(produced))
        take = np.asarray(idx, dtype=np.int64)
        if mode == "filter":
            self.emit(u.take(take))
        elif out:
            self.emit(from_rows(out, u.times[take], u.diffs[take], self.ctx.interner,
                                kinds=self._out_kinds(out), depth=u.depth, where=where))

    def _out_kinds(self, out: list[tuple]) -> tuple[str, ...] | None:
        if self.kinds is not None and len(out[0]) == len(self.kinds):
            return self.kinds
        return None


def _as_row(r: Any, where: str) -> tuple:
    if isinstance(r, tuple):
        return r
    raise SchemaError(f"{where}: records are tuples, the function returned {type(r).__name__} {r!r}")




class ColumnsNode(BatchwiseNode):
    """Vectorized transforms over whole columns: projection, map_columns, filter_columns.

    Each batch is transformed as it arrives (:attr:`Node.inline`): a user's
    function is called once per batch, as ``map_columns`` promises.
    """

    inline = True

    def __init__(self, scope: Scope, name: str, mode: str, fn: Callable | None = None,
                 indices: Sequence[int] | None = None):
        super().__init__(scope, name)
        self.mode = mode
        self.fn = fn
        self.indices = tuple(indices) if indices is not None else None

    def apply(self, u: Updates) -> None:
        where = f"operator {self.name!r}"
        if self.mode == "project":
            try:
                self.emit(Updates(tuple(u.cols[i] for i in self.indices), u.times, u.diffs,
                                  tuple(u.kinds[i] for i in self.indices)))
            except IndexError:
                raise SchemaError(f"{where}: projects fields {self.indices} of records with {u.arity} fields") from None
            return
        cols = frozen(*u.decoded_columns(self.ctx.interner))  # read-only: the batch other readers share
        if self.mode == "filter":
            mask = np.asarray(self.fn(*cols), dtype=bool)
            if mask.shape != (len(u),):
                raise SchemaError(f"{where}: filter returned shape {mask.shape} for {len(u)} records")
            self.emit(u.take(np.flatnonzero(mask)))
            return
        out = self.fn(*cols)
        if isinstance(out, np.ndarray):
            out = (out,)
        new_cols, kinds = [], []
        given = {id(c): j for j, c in enumerate(cols)}
        for i, c in enumerate(out):
            j = given.get(id(c))
            if j is not None:  # an input column returned as it came (inputs are read-only): stored as it came
                new_cols.append(u.cols[j])
                kinds.append(u.kinds[j])
                continue
            c = np.asarray(c)
            if c.shape != (len(u),):
                raise SchemaError(f"{where}: output column {i} has shape {c.shape}, expected ({len(u)},)")
            k = OF_DTYPE.get(c.dtype.kind, "o")
            if k == "o":
                c = self.ctx.interner.encode(c.tolist(), f"{where} output column {i}")
            elif k == "f":
                c = c.astype(np.float64, copy=False)
            else:
                c = c.astype(np.int64, copy=False)
            new_cols.append(c)
            kinds.append(k)
        self.emit(Updates(tuple(new_cols), u.times, u.diffs, tuple(kinds)))


class NegateNode(BatchwiseNode):
    """Every diff negated, batch by batch as it arrives (:attr:`Node.inline`)."""

    inline = True

    def apply(self, u: Updates) -> None:
        self.emit(u.with_diffs(-u.diffs))


class ConcatNode(BatchwiseNode):
    """The union of its inputs: each batch passes on as it arrives (:attr:`Node.inline`), in the first one's kinds."""

    inline = True

    def apply(self, u: Updates) -> None:
        self.emit(u)


class ConsolidateNode(Node):
    def step(self, bound: np.ndarray) -> None:
        u = self.dequeue()
        if u is not None:
            self.emit(consolidate(u))


class InspectNode(Node):
    """Calls ``fn((row, time, diff))`` for each update, or ``fn(batch)`` with an Arrow table."""

    def __init__(self, scope: Scope, name: str, fn: Callable, batch: bool):
        super().__init__(scope, name)
        self.fn = fn
        self.batch = batch

    def step(self, bound: np.ndarray) -> None:
        u = self.dequeue()
        if u is None:
            return
        if self.batch:
            self.fn(u.to_arrow(self.ctx.interner))
        else:
            for upd in u.to_rows(self.ctx.interner):
                self.fn(upd)
        self.emit(u)
