"""Arrangements: a collection indexed by key in a trace shared by its readers.

The first field of each record is the key, the rest the value.  An
arrange node consolidates what reaches it, inserts it into its trace and
hands the same batch to every operator that reads the arrangement, so
several joins and reduces share one trace instead of each keeping a copy.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ddflow.lattice import Antichain
from ddflow.node import Node, Scope
from ddflow.traces import Trace, TraceHandle
from ddflow.updates import Updates, consolidate

if TYPE_CHECKING:
    from ddflow.collection import Collection


class ArrangeNode(Node):
    def __init__(self, scope: Scope, name: str):
        super().__init__(scope, name)
        self.trace: Trace | None = None
        self.handle: TraceHandle | None = None

    def step(self, bound: np.ndarray) -> None:
        u = self.take()
        if u is None:
            return
        if u.arity < 1:
            raise ValueError(f"arrangement {self.name!r}: keyed operators need records with at least one field (the key)")
        u = consolidate(u)
        if not len(u):
            return
        if self.trace is None:
            self.trace = Trace(u.kinds, u.depth, name=self.name)
            self.handle = self.trace.reader()
        elif u.kinds != self.trace.kinds:
            u = self.flow.coerce(u, self.trace.kinds, self.name)
        self.trace.insert_updates(u, consolidated=True)
        self.emit(u)

    def trace_handles(self) -> list[TraceHandle]:
        return [self.handle] if self.handle is not None else []


class Arrangement:
    """A shared, indexed collection: what ``Collection.arrange()`` returns."""

    def __init__(self, collection: "Collection", node: ArrangeNode):
        self.collection = collection
        self.node = node
        self.scope = node.scope

    @property
    def trace(self) -> Trace | None:
        return self.node.trace

    def __repr__(self) -> str:
        return f"<Arrangement {self.node.name}>"

    # The keyed operators accept arrangements wherever they accept collections.
    def join(self, other, **kw):
        return self.collection._join_arranged(self, other, **kw)

    def semijoin(self, other, **kw):
        return self.collection.semijoin(other, **kw)

    def antijoin(self, other, **kw):
        return self.collection.antijoin(other, **kw)

    def reduce(self, fn, **kw):
        return self.collection._reduce_arranged(self, fn, **kw)

    def as_collection(self) -> "Collection":
        return self.collection


def compaction_frontier(frontier: int, depth: int) -> Antichain:
    """Every future time in a scope of ``depth`` is beyond (frontier, 0, ..., 0)."""
    return Antichain(np.array([[frontier] + [0] * (depth - 1)], dtype=np.int64))
