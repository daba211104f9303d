"""Arrangements: a collection indexed by key in a trace shared by its readers.

The first field of each record is the key, the rest the value.  An
arrange node consolidates what reaches it, inserts it into its trace and
hands the same batch to every operator that reads the arrangement, so
several joins and reduces share one trace instead of each keeping a copy.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

import numpy as np

from ddflow.base.consolidate import consolidate
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError
from ddflow.graph.node import BatchwiseNode
from ddflow.graph.scope import Scope
from ddflow.traces import Trace, TraceHandle

if TYPE_CHECKING:
    from ddflow.collection import Collection


#: A batch of up to this many updates is inserted when it is pushed (nothing queued before it); a larger one
#: waits for the step, with the rest of the step's.  Reach at one update a step pushes batches of 1 to 64
#: updates 90% of the time (fewer than 1% above 256); an arrangement after a concat of large inputs
#: (Nexmark q17, 1,000 events a step) sorted each on its own when all were inserted at once, and lost a third.
EAGER_ROWS = 256


class ArrangeNode(BatchwiseNode):
    """Consolidates each batch, inserts it into its trace and passes it on to its readers."""

    arranges = True

    def __init__(self, scope: Scope, name: str):
        super().__init__(scope, name)
        self.trace: Trace | None = None
        self.handle: TraceHandle | None = None

    def push(self, port: int, u: Updates) -> None:
        """A batch of a few updates, with nothing queued before it, is inserted at once; others wait for the step.

        An arrangement inserts whatever arrives, whatever its time (the
        trace's batches are untiled), so it may insert when a batch is
        pushed: its readers find it in the trace and in their queues before
        they are stepped, and a round of a loop at one update (a batch of a
        few rows a round) steps it no more.  Larger batches are queued, so
        that all of a step's arrive as one batch, consolidated (sorted) once
        (see :data:`EAGER_ROWS`).  Nothing is inserted ahead of a batch
        already queued.
        """
        if 0 < len(u) <= EAGER_ROWS and not self.queues[0]:
            self.apply_now(u)
        else:
            super().push(port, u)

    def apply(self, u: Updates) -> None:
        """Consolidate a batch (O(n log n)), insert it into the trace and emit it to the readers.

        A few updates are consolidated and built into the trace's batch in
        one compiled call (:meth:`ddflow.traces.Trace.insert_consolidating`).
        """
        if u.arity < 1:
            raise SchemaError(f"arrangement {self.name!r}: keyed operators need records with at least one field (the key)")
        if self.trace is None:  # the first batch fixes the trace's kinds (a batch that cancels out makes none)
            u = consolidate(u)
            if not len(u):
                return
            self.trace = Trace(u.kinds, u.depth, name=self.name)
            self.handle = self.trace.reader()
            self.trace.insert_updates(u, consolidated=True)
        else:
            if u.kinds != self.trace.kinds:
                u = self.ctx.coerce(u, self.trace.kinds, self.name)
            u = self.trace.insert_consolidating(u)
            if not len(u):
                return
        self.emit(u)

    def held_columns(self) -> Iterable[np.ndarray]:
        """Queued input and the trace's object columns (keys and values).  O(batches)."""
        yield from super().held_columns()
        if self.trace is not None:
            yield from self.trace.object_columns()

    def trace_handles(self) -> list[TraceHandle]:
        """The trace's reader handle (none before the first batch)."""
        return [self.handle] if self.handle is not None else []


class Arrangement:
    """A shared, indexed collection: what ``Collection.arrange()`` returns.

    Keyed operators called on it (or given it as ``other``) read its trace
    instead of building their own, so the index is paid for once.
    """

    def __init__(self, collection: "Collection", node: ArrangeNode):
        self.collection = collection
        self.node = node
        self.scope = node.scope

    @property
    def trace(self) -> Trace | None:
        """The :class:`ddflow.traces.Trace` holding the indexed updates (None until data arrives).

        Cost: O(1).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> arr = edges.arrange(); arr.trace is None
        True
        >>> edges_in.update([(1, 2), (1, 3)], times=0); flow.advance_to(1); flow.run()
        >>> arr.trace.contents(0)
        {(1, 2): 1, (1, 3): 1}
        """
        return self.node.trace

    def __repr__(self) -> str:
        return f"<Arrangement {self.node.name}>"

    # The keyed operators accept arrangements wherever they accept collections.
    def join(self, other, **kw):
        """``Collection.join`` reading this arrangement's trace for the left side.

        Cost: as ``Collection.join``: per new batch of either input, one seek
        of its distinct keys into the other trace plus O(p log p) for its p
        output pairs; no second index of this collection.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> arr = edges.arrange()
        >>> out = arr.join(edges.project(1, 0)).capture()
        >>> edges_in.update([(1, 2), (2, 3)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((2, 3, 1), 0, 1)]
        """
        return self.collection._join_arranged(self, other, **kw)

    def semijoin(self, other, **kw):
        """``Collection.semijoin`` of the arranged collection (shares this trace).

        Cost: as ``Collection.semijoin``, a join with the keys.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.arrange().semijoin(edges.project(1)).capture()
        >>> edges_in.update([(1, 2), (2, 3)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((2, 3), 0, 1)]
        """
        return self.collection.semijoin(other, **kw)

    def antijoin(self, other, **kw):
        """``Collection.antijoin`` of the arranged collection (shares this trace).

        Cost: as ``Collection.antijoin``: a semijoin plus O(n) negate and concat.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.arrange().antijoin(edges.project(1)).capture()
        >>> edges_in.update([(1, 2), (2, 3)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((1, 2), 0, 1)]
        """
        return self.collection.antijoin(other, **kw)

    def reduce(self, fn, **kw):
        """``Collection.reduce`` reading this arrangement's trace.

        Cost: as ``Collection.reduce``: per changed key, Python work
        proportional to its history, one call of ``fn`` per interesting time.

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> out = edges.arrange().reduce(lambda key, vals: [((len(vals),), 1)]).capture()
        >>> edges_in.update([(1, 2), (1, 3)], times=0); flow.advance_to(1); flow.run()
        >>> out.drain()
        [((1, 2), 0, 1)]
        """
        return self.collection._reduce_arranged(self, fn, **kw)

    def as_collection(self) -> "Collection":
        """The collection that was arranged (its updates, unindexed).

        Cost: O(1).

        >>> flow = ddflow.Dataflow()
        >>> edges_in, edges = flow.new_collection("edges")
        >>> edges.arrange().as_collection() is edges
        True
        """
        return self.collection

