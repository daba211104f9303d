"""The build context: everything of a dataflow that its operator nodes may touch.

Nodes never see the :class:`~ddflow.dataflow.EngineDataflow`.  They get its
interner (to encode and decode object fields), fresh names, the graph
version (bumped by every new node or edge, so cached schedules know when
to recompute), the build state (no new operator after the first run: it
would miss the history already processed), and the completed frontier
(what captures and probes report).
"""
from __future__ import annotations

import itertools

import numpy as np

from ddflow.base.interner import Interner
from ddflow.base.kinds import NAMES
from ddflow.base.updates import Updates, encode_column
from ddflow.errors import DataflowError, SchemaError


class Context:
    """Shared state of one dataflow's graph.  ``workers > 1`` interns by content hash."""

    def __init__(self, workers: int = 1):
        self.workers = workers
        # Several processes must agree on the codes of values each of them may intern first.
        self.interner = Interner(hashed=workers > 1)
        self.graph_version = 0
        #: Every time before this is complete: its output is final.
        self.completed = 0
        self.ran = False
        self.failed: BaseException | None = None
        self._ids = itertools.count()
        #: Inline nodes applying a pushed batch now, nested (:meth:`ddflow.graph.node.BatchwiseNode.push`), and the
        #: batches they deferred past ``INLINE_DEPTH``, applied by the outermost one before it returns.
        self.inline_depth = 0
        self.inline_deferred: list = []

    def fresh(self, base: str) -> str:
        """A name no other node of this dataflow has: ``base#n``."""
        return f"{base}#{next(self._ids)}"

    def changed(self) -> None:
        """The graph gained a node or an edge."""
        self.graph_version += 1

    def check_building(self) -> None:
        """Raise unless operators may still be added."""
        if self.failed is not None:
            raise DataflowError(f"the dataflow failed earlier and cannot be extended: {self.failed}")
        if self.ran:
            raise DataflowError("the dataflow has already run: build every operator (and capture) before the first run()")

    def coerce(self, u: Updates, kinds: tuple[str, ...], where: str) -> Updates:
        """Bring a batch to the column kinds a node already emits (int -> float, anything -> object)."""
        if len(kinds) != u.arity:
            raise SchemaError(f"operator {where!r}: records have {u.arity} fields, earlier ones had {len(kinds)}")
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
                raise SchemaError(f"operator {where!r}: field {i} was {NAMES[want]} and is now {NAMES[have]}")
        return Updates(tuple(cols), u.times, u.diffs, tuple(kinds))
