"""The dataflow: inputs, the frontier, and running everything that is complete."""
from __future__ import annotations

import itertools
import weakref
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ddflow.arrange import compaction_frontier
from ddflow.collection import Collection
from ddflow.errors import DataflowError, FrontierError
from ddflow.interner import Interner
from ddflow.lattice import as_times
from ddflow.node import IterativeScope, Node, Scope
from ddflow.updates import Updates, check_diffs, encode_column, from_arrow, from_rows

INT64_MAX = np.iinfo(np.int64).max


class InputNode(Node):
    """Holds submitted updates until the frontier passes their times."""

    def __init__(self, scope: Scope, name: str):
        super().__init__(scope, name, n_inputs=1)

    def step(self, bound: np.ndarray) -> None:
        q = self.queues[0]
        if not q:
            return
        u = Updates.concat(q)
        ready = np.all(u.times < bound, axis=1)
        self.queues[0] = [u.take(np.flatnonzero(~ready))] if not ready.all() else []
        if ready.any():
            self.emit(u.take(np.flatnonzero(ready)))


class InputHandle:
    """Feeds updates into one input collection, each at its own data time."""

    def __init__(self, flow: "Dataflow", node: InputNode, kinds: Sequence[str] | None):
        self.flow = flow
        self.node = node
        self.name = node.name
        self.kinds: tuple[str, ...] | None = tuple(kinds) if kinds is not None else None
        self._upsert: dict[Any, tuple[tuple, int]] = {}

    def __repr__(self) -> str:
        return f"<InputHandle {self.name}>"

    def insert(self, row: tuple, time: int | None = None) -> None:
        self.update([row], self.flow.frontier if time is None else time, 1)

    def remove(self, row: tuple, time: int | None = None) -> None:
        self.update([row], self.flow.frontier if time is None else time, -1)

    def upsert(self, row: tuple, time: int | None = None) -> None:
        """Set the record for ``row[0]`` to ``row``, retracting the previous one for that key."""
        t = self.flow.frontier if time is None else time
        if not isinstance(row, tuple) or not row:
            raise TypeError(f"collection {self.name!r}: upsert needs a non-empty tuple, got {row!r}")
        prev = self._upsert.get(row[0])
        if prev is not None and t < prev[1]:
            raise FrontierError(f"collection {self.name!r}: upsert for key {row[0]!r} at time {t} is before its previous upsert at {prev[1]}")
        rows = ([prev[0]] if prev is not None else []) + [row]
        self.update(rows, t, [-1] * (len(rows) - 1) + [1])
        self._upsert[row[0]] = (row, t)

    def update(self, rows: Any, times: Any = None, diffs: Any = 1) -> None:
        """Many updates at once: rows as tuples, an Arrow table/record batch, or a dict of numpy columns.

        ``times``: one time for all, an array, or (Arrow/dict) a column name.
        ``diffs``: +1 by default, an int, an array, or a column name.
        Validated in full before anything is applied.
        """
        flow = self.flow
        where = f"collection {self.name!r}"
        if flow.closed:
            raise DataflowError(f"{where}: the dataflow is closed; no more updates")
        if times is None:
            times = flow.frontier
        if isinstance(rows, dict):
            rows = pa.table({str(k): v for k, v in rows.items()})
        if isinstance(rows, (pa.Table, pa.RecordBatch)):
            tcol = times if isinstance(times, str) else None
            dcol = diffs if isinstance(diffs, str) else None
            cols = [c for c in rows.schema.names if c not in (tcol, dcol)]
            n = rows.num_rows
            t = times if isinstance(times, str) else _times_for(times, n, where)
            d = diffs if isinstance(diffs, str) else check_diffs(diffs, n, where)
            u = from_arrow(rows, flow.interner, cols, t, d, kinds=self.kinds, where=where)
        else:
            rows = list(rows)
            u = from_rows(rows, _times_for(times, len(rows), where), diffs, flow.interner, kinds=self.kinds, where=where)
        if u.depth != 1:
            raise ValueError(f"{where}: input times are integers (depth 1), got depth {u.depth}")
        if len(u) and int(u.times.min()) < flow.frontier:
            bad = int(u.times.min())
            raise FrontierError(f"{where}: update at time {bad} is before the frontier {flow.frontier}; "
                                "times before the frontier are final")
        if self.kinds is None and len(u):  # an empty first batch of tuples says nothing about the arity
            self.kinds = u.kinds
        self.node.push(0, u)

    @property
    def frontier(self) -> int:
        return self.flow.frontier


def _times_for(times: Any, n: int, where: str = "collection") -> np.ndarray:
    t = np.asarray(times)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{where}: times must be integers, got {t.dtype}")
    return np.full(n, int(t), dtype=np.int64) if t.ndim == 0 else t.astype(np.int64)


class Dataflow:
    """A dataflow: build it with collections, then feed, advance and run.

    ``workers=W`` runs it in W worker processes, forked at the first
    ``run()`` (see :mod:`ddflow.workers`): the code that builds and feeds the
    dataflow is the same for every W, and so are the outputs.  ``W=1`` runs
    in this process with no exchange machinery at all.  Call
    :meth:`shutdown` (or use the dataflow as a context manager) to stop
    the workers before the dataflow is garbage collected.
    """

    def __init__(self, workers: int = 1):
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise ValueError(f"Dataflow(workers=W) needs an integer W >= 1, got {workers!r}")
        self.workers = workers
        # Several processes must agree on the codes of values each of them may intern first.
        self.interner = Interner(hashed=workers > 1)
        self._pool = None
        self.top = Scope(self, 1)
        self.inputs: list[InputHandle] = []
        self.frontier = 0
        self.completed = 0
        self.closed = False
        self._running = False
        self._failed: BaseException | None = None
        self._ids = itertools.count()
        self._graph_version = 0
        self._ran = False

    # -- building ----------------------------------------------------------------
    def _fresh(self, base: str) -> str:
        return f"{base}#{next(self._ids)}"

    def _check_building(self) -> None:
        if self._failed is not None:
            raise DataflowError(f"the dataflow failed earlier and cannot be extended: {self._failed}")
        if self._ran:
            # A new operator would see only later updates, not the history already processed.
            raise DataflowError("the dataflow has already run: build every operator (and capture) before the first run()")

    def new_collection(self, name: str | None = None, schema: Sequence[str] | None = None) -> tuple[InputHandle, Collection]:
        """An input: its handle for updates and the collection it feeds.

        ``schema``: optional column kinds (``"i"`` int, ``"f"`` float, ``"b"`` bool,
        ``"o"`` any hashable object); otherwise fixed by the first update.
        """
        node = InputNode(self.top, name or self._fresh("input"))
        handle = InputHandle(self, node, schema)
        self.inputs.append(handle)
        return handle, Collection(node)

    def iterative(self, name: str | None = None, max_iterations: int | None = None) -> IterativeScope:
        """A top-level loop scope for ``Variable``s (mutual recursion)."""
        return IterativeScope(self.top, name or self._fresh("iterative"), max_iterations)

    # -- running ------------------------------------------------------------------
    def advance_to(self, time: int) -> None:
        """No further updates at times before ``time`` on any input."""
        time = int(time)
        if time < self.frontier:
            raise FrontierError(f"advance_to({time}) would move the frontier backwards from {self.frontier}")
        self.frontier = time

    def run(self) -> None:
        """Process everything before the frontier; returns when all of it is final everywhere."""
        if self._failed is not None:
            raise DataflowError(f"the dataflow failed earlier: {self._failed}")
        bound = np.array([self.frontier], dtype=np.int64)
        self._ran = True
        try:
            if self.workers > 1:
                self._workers().run(self, self.frontier)
            else:
                self.top.step(bound)
        except BaseException as e:
            self._failed = e
            if self._pool is not None:
                self._pool.shutdown()
            raise
        self.completed = self.frontier
        if self.workers == 1:
            self._compact()

    def _compact(self) -> None:
        """Advance every trace to the frontier: all times before it are final."""
        for node in self.top.all_nodes():
            for h in node.trace_handles():
                h.set_logical_compaction(compaction_frontier(self.frontier, h.trace.depth))

    def _workers(self):
        if self._pool is None:
            from ddflow.workers import WorkerPool

            self._pool = WorkerPool(self)
            weakref.finalize(self, self._pool.shutdown)
        return self._pool

    def shutdown(self) -> None:
        """Stop the worker processes (W > 1); the dataflow accepts no more runs."""
        if self._pool is not None:
            self._pool.shutdown()
            self.closed = True

    def __enter__(self) -> "Dataflow":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def worker_stats(self) -> list[dict]:
        """Per worker: trace sizes, rounds run, time busy and waiting, coordination time per round, messages."""
        if self.workers == 1 or self._pool is None:
            return []
        return self._pool.stats()

    def close(self) -> None:
        """No more input: retire everything and refuse further updates."""
        self.advance_to(INT64_MAX)
        self.run()
        self.closed = True

    # -- state ------------------------------------------------------------------
    def trace_size(self) -> int:
        """Updates held in all traces (arrangements and reduce outputs), over all workers."""
        if self.workers > 1:
            return sum(s["trace_size"] for s in self.worker_stats())
        return self._local_trace_size()

    def trace_bytes(self) -> int:
        if self.workers > 1:
            return sum(s["trace_bytes"] for s in self.worker_stats())
        return self._local_trace_bytes()

    def _local_trace_size(self) -> int:
        return sum(len(h.trace) for n in self.top.all_nodes() for h in n.trace_handles())

    def _local_trace_bytes(self) -> int:
        return sum(h.trace.nbytes for n in self.top.all_nodes() for h in n.trace_handles())

    def coerce(self, u: Updates, kinds: tuple[str, ...], where: str) -> Updates:
        """Bring a batch to the column kinds a node already emits (int -> float, anything -> object)."""
        if len(kinds) != u.arity:
            raise ValueError(f"operator {where!r}: records have {u.arity} fields, earlier ones had {len(kinds)}")
        cols = []
        for i, (c, have, want) in enumerate(zip(u.cols, u.kinds, kinds)):
            if have == want:
                cols.append(c)
            elif want == "f" and have == "i":
                cols.append(c.astype(np.float64))
            elif want == "o":
                vals = Updates((c,), u.times, u.diffs, (have,)).decoded_columns(self.interner)[0].tolist()
                cols.append(encode_column(vals, "o", self.interner, f"operator {where!r} field {i}"))
            else:
                raise TypeError(f"operator {where!r}: field {i} was {_KIND[want]} and is now {_KIND[have]}")
        return Updates(tuple(cols), u.times, u.diffs, tuple(kinds))


_KIND = {"i": "int", "f": "float", "b": "bool", "o": "object"}
