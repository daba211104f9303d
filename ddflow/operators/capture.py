"""Outputs: capture (a drainable record of output changes), probes and subscriptions."""
from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np
import pyarrow as pa

from ddflow.base import nullmask
from ddflow.base.consolidate import consolidate
from ddflow.base.lattice import as_time
from ddflow.base.metrics import Histogram
from ddflow.base.schema import ARROW, Schema, decimal_array, decimal_ps
from ddflow.base.updates import Updates
from ddflow.graph.context import Context
from ddflow.graph.node import Node, object_columns
from ddflow.graph.scope import Scope


class CaptureNode(Node):
    """Keeps what reaches it for a :class:`Capture`; calls a subscription's callback per batch."""

    is_output = True

    def __init__(self, scope: Scope, name: str, callback: Callable[[Updates], None] | None = None):
        super().__init__(scope, name)
        self.parts: list[Updates] = []
        self.callback = callback
        #: Changes delivered so far, and how many of them had a negative diff (``Dataflow.metrics``).
        self.delivered = 0
        self.retractions = 0
        #: Seconds from a run's oldest input arriving to the run delivering changes here (``Dataflow.run``).
        self.freshness = Histogram()

    def step(self, bound: np.ndarray) -> None:
        """Keep what arrived (O(1) per batch) and call the subscription's callback with it."""
        u = self.dequeue()
        if u is not None:
            self.keep(u)

    def keep(self, u: Updates) -> None:
        """Keep a batch of output, count it, and call the subscription's callback (where it is called).

        The one way output reaches a capture: this worker's steps, or (with
        several workers) the merged batch the driver received.  Cost: O(1)
        plus one vectorized count of the negative diffs.
        """
        self.parts.append(u)
        self.delivered += len(u.diffs)
        self.retractions += int(np.count_nonzero(u.diffs < 0))
        if self.callback is not None:
            self.callback(u)

    def held_columns(self) -> Iterable[np.ndarray]:
        """Queued input and every kept, undrained batch: the user may still decode them.  O(batches)."""
        yield from super().held_columns()
        for u in self.parts:
            yield from object_columns(u)

    def start_worker(self, me: int) -> None:
        """In a worker process: keep batches but call no callback (the driver does)."""
        super().start_worker(me)
        self.callback = None  # subscriptions are called in the driver, with the merged output


class Capture:
    """The output changes of a collection, as they are produced.

    ``contents(t)`` is the collection accumulated at ``t``, meaningful for
    complete times (``t < frontier``); ``changes()`` the consolidated
    ``(row, time, diff)`` updates; ``drain()`` returns and forgets them.
    Keeping a batch costs O(1); reading consolidates what is kept, O(n log n).

    >>> flow = ddflow.Dataflow()
    >>> edges_in, edges = flow.new_collection("edges")
    >>> out = edges.capture()
    >>> edges_in.update([(1, 2), (2, 3)], times=0); edges_in.remove((1, 2), time=1)
    >>> flow.advance_to(2); flow.run()
    >>> out.contents(0), out.contents(1)
    ({(1, 2): 1, (2, 3): 1}, {(2, 3): 1})
    """

    def __init__(self, node: CaptureNode, schema: Schema | None = None):
        self._node = node
        self.name = node.name
        #: Named, typed columns (a table or SQL view): rows read back as SQL rows, NULL as None.
        self.schema = schema

    def _rows(self, u: Updates) -> list[tuple[tuple, Any, int]]:
        rows = u.to_rows(self._node.ctx.interner)
        if self.schema is not None:
            decode = self.schema.decode_row
            rows = [(decode(r), t, d) for r, t, d in rows]
        return rows

    @property
    def frontier(self) -> int:
        """Every time before this is complete: its output is final.

        Cost: O(1).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.capture()
        >>> flow.advance_to(4); flow.run(); out.frontier
        4
        """
        return self._node.ctx.completed

    @property
    def kinds(self) -> tuple[str, ...] | None:
        """The column kinds of the captured records (``"i"``, ``"f"``, ``"b"``, ``"o"``), or None while unknown.

        Known once output arrived, or when the captured collection's kinds
        are fixed before any (a typed input, a SQL view); with several
        workers the driver learns them from the first output.  Cost: O(1)
        once output arrived, otherwise O(operators in the scope) to find the
        captured one.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.capture()
        >>> before = out.kinds; edges_in.insert((1, "a")); flow.advance_to(1); flow.run(); before, out.kinds
        (None, ('i', 'o'))
        """
        node = self._node
        if node.kinds is not None:
            return node.kinds
        for n in node.scope.nodes:  # the captured collection's operator: the one that feeds this capture
            if any(t is node for t, _ in getattr(n, "targets", ())):  # a loop scope is no operator
                return n.kinds
        return None

    def updates(self) -> Updates:
        """All output updates kept so far, consolidated, as columnar :class:`ddflow.Updates`.

        Object fields are interner codes: decode with ``Dataflow.interner``
        (they stay valid while the capture keeps them, i.e. until drained).
        Cost: O(n log n) for the n updates kept (a sort), no Python per
        update; the consolidated result replaces what was kept.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.capture()
        >>> edges_in.update([(1, 2), (1, 2)], times=0); flow.advance_to(1); flow.run()
        >>> u = out.updates(); u.cols[0], u.diffs
        (array([1]), array([2]))
        """
        node = self._node
        kinds = node.kinds
        if not node.parts:
            return Updates.empty(kinds or (), node.depth)
        u = consolidate(Updates.concat(node.parts), where=f"capture {self.name!r}")
        node.parts = [u]
        return u

    def changes(self) -> list[tuple[tuple, Any, int]]:
        """Consolidated output updates ``(row, time, diff)`` sorted by time, then row.

        Kept: a later call returns them again, with any newer ones.
        Cost: O(n log n) for the n updates kept, with Python per update
        to decode and sort the rows.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.capture()
        >>> edges_in.update([(2, 3)], times=1); edges_in.update([(1, 2)], times=0)
        >>> flow.advance_to(2); flow.run()
        >>> out.changes()
        [((1, 2), 0, 1), ((2, 3), 1, 1)]
        """
        rows = self._rows(self.updates())
        rows.sort(key=lambda r: (r[1], _orderable(r[0])))
        return rows

    def to_arrow(self, names: list[str] | None = None) -> pa.Table:
        """The consolidated updates kept so far as an Arrow table: fields, ``time``, ``diff``.

        ``names`` names the fields (default ``c0, c1, ...``).  Cost: O(n log n)
        to consolidate, then O(n) vectorized conversion (object fields: one
        Python value each).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.capture()
        >>> edges_in.update([(1, 2)], times=0); flow.advance_to(1); flow.run()
        >>> out.to_arrow(["src", "dst"]).to_pylist()
        [{'src': 1, 'dst': 2, 'time': 0, 'diff': 1}]
        """
        if self.schema is not None:
            return sql_table(self.updates(), self.schema, self._node.ctx.interner)
        return self.updates().to_arrow(self._node.ctx.interner, names)

    def to_pandas(self, names: list[str] | None = None):
        """``to_arrow(names)`` as a pandas DataFrame (needs pandas installed).

        Cost: as ``to_arrow``, plus Arrow's conversion to pandas.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.capture()
        >>> edges_in.update([(1, 2)], times=0); flow.advance_to(1); flow.run()
        >>> out.to_pandas(["src", "dst"]).columns.tolist()
        ['src', 'dst', 'time', 'diff']
        """
        return self.to_arrow(names).to_pandas()

    def drain_updates(self) -> Updates:
        """The raw columnar output updates since the last drain, and forget them (cheap).

        Like ``updates`` but forgets them: the columnar ``drain``.  Decode
        object fields before the next ``run()``: it may reuse codes nothing
        in the dataflow holds any more.  Cost:
        O(n log n) to consolidate, no Python per update.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.capture()
        >>> edges_in.update([(1, 2), (2, 3)], times=0); flow.advance_to(1); flow.run()
        >>> len(out.drain_updates()), len(out.drain_updates())
        (2, 0)
        """
        u = self.updates()
        self._node.parts = []
        return u

    def drain(self) -> list[tuple[tuple, Any, int]]:
        """``changes()``, then forget them: each update is returned once.

        Cost: O(n log n) for the n updates kept (sort), with Python per
        update to decode; afterwards the capture holds nothing.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.capture()
        >>> edges_in.update([(1, 2)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain(), out.drain()
        ([((1, 2), 0, 1)], [])
        """
        out = self.changes()
        self._node.parts = []
        return out

    def contents(self, time: Any) -> dict[tuple, int]:
        """Row -> multiplicity accumulated at ``time`` (updates at times ``<= time``, added up).

        Only updates not yet drained count.  Cost: O(n log n) for the n
        updates kept, with Python per resulting row.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.capture()
        >>> edges_in.update([(1, 2), (1, 2)], times=0); edges_in.remove((1, 2), time=3)
        >>> flow.advance_to(4); flow.run()
        >>> out.contents(2), out.contents(3)
        ({(1, 2): 2}, {(1, 2): 1})
        """
        u = self.updates()
        t = as_time(time, u.depth)
        sel = u.take(np.flatnonzero(np.all(u.times <= t, axis=1)))
        acc = consolidate(sel.with_times(np.zeros_like(sel.times)), where=f"capture {self.name!r} at time {time}")
        return {row: d for row, _, d in self._rows(acc)}


def sql_table(u: Updates, schema: Schema, interner) -> pa.Table:
    """Updates of a table or view as named, typed columns with NULLs, then ``time`` and ``diff``.

    O(n), vectorized (object columns: per value).
    """
    if not len(u):  # possibly before any output, when the capture knows no column kinds yet
        return pa.table({**{n: pa.array([], ARROW[t]) for n, t in zip(schema.names, schema.types)},
                         "time": pa.array([], pa.int64()), "diff": pa.array([], pa.int64())})
    cols = u.decoded_columns(interner)
    nulls = nullmask.null_columns(cols[len(schema):], len(schema))
    arrays = {}
    for j, (name, typ) in enumerate(zip(schema.names, schema.types)):
        null = nulls[j]
        vals = cols[j]
        ps = decimal_ps(typ)
        if ps is not None:
            arrays[name] = decimal_array(vals, null, *ps)
        elif typ in ("date", "timestamp"):
            raw = np.where(null, 0, np.asarray(vals, dtype=np.int64))
            raw = raw.astype(np.int32) if typ == "date" else raw
            arrays[name] = pa.array(raw, type=pa.int32() if typ == "date" else pa.int64(), mask=null).cast(ARROW[typ])
        else:
            arrays[name] = pa.array(vals.tolist() if vals.dtype == object else vals, type=ARROW[typ], mask=null)
    arrays["time"] = pa.array(u.times[:, 0] if u.depth == 1 else u.times.tolist())
    arrays["diff"] = pa.array(u.diffs)
    return pa.table(arrays)


def _orderable(row: tuple) -> tuple:
    return tuple((0, v) if isinstance(v, (int, float)) else (1, repr(v)) for v in row)


class Probe:
    """Tells whether a time's output is final.

    Follows the whole dataflow's completed frontier; get one from
    :meth:`ddflow.Collection.probe`.
    """

    def __init__(self, ctx: "Context"):
        self._ctx = ctx

    @property
    def frontier(self) -> int:
        """Every time before this is complete (the dataflow's ``completed``).

        Cost: O(1).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> p = edges.probe(); flow.advance_to(2); flow.run(); p.frontier
        2
        """
        return self._ctx.completed

    def done(self, time: int) -> bool:
        """Whether ``time`` is complete: every output at ``time`` is final.

        Cost: O(1).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> p = edges.probe(); flow.advance_to(2); flow.run()
        >>> p.done(1), p.done(2)
        (True, False)
        """
        return time < self._ctx.completed
