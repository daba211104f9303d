"""Routes: an operator's output reaching one arrangement through inline projections and unions only.

A join or a loop variable whose output passes through ``project`` and
``concat`` nodes into an arrangement, and nowhere else, can write a batch
of a few updates straight into that arrangement's trace (its arena,
:mod:`traces.arena`) from the kernel that made them: one compiled call
instead of the kernel, the nodes in between and the arrangement's own
insert.  What the nodes in between would have done is a composition of
projections, so the route keeps it as one tuple of field indices; their
counters and column kinds are kept as the nodes would keep them.

For every batch ``u`` the source would emit, routing it means

    arrangement receives project(u, indices), consolidated, and emits it,

exactly what ``emit`` through the chain does; a route applies only when
nothing else could happen on the way (every node on it has one target,
the arrangement has nothing queued ahead of the batch and takes it
without coercion).
"""
from __future__ import annotations

import numpy as np

from ddflow.base.kernels import SMALL_ROWS
from ddflow.base.updates import Updates
from ddflow.graph.node import Node
from ddflow.operators.arrange import ArrangeNode
from ddflow.operators.stateless import ColumnsNode, ConcatNode


class Route:
    """The inline chain from a node's output to an arrangement; see the module docstring.

    ``passes``: the nodes in between, in order; ``hops``: the field
    indices each one keeps (None: all of them); ``arrangement``: where
    the chain ends.
    """

    __slots__ = ("source", "passes", "hops", "arrangement", "_idx", "_kinds")

    def __init__(self, source: Node, passes: tuple[Node, ...], hops: tuple, arrangement: ArrangeNode):
        self.source, self.passes, self.hops, self.arrangement = source, passes, hops, arrangement
        self._idx: dict[int, np.ndarray | None] = {}
        self._kinds: dict[tuple[str, ...], tuple[tuple[str, ...], ...]] = {}

    def fields(self, width: int) -> np.ndarray | None:
        """The source fields the arrangement receives, of a record of ``width`` fields, as int64 indices.

        The projections composed; None when one names a field that is not
        there (or counts from the end): the project node's own step says
        what is wrong.  O(route length), cached per width.

        >>> from ddflow.dataflow import EngineDataflow
        >>> flow = EngineDataflow(); _, x = flow.new_collection("x"); _, z = flow.new_collection("z")
        >>> a = x.project(2, 0).concat(z).project(1).arrange()
        >>> route_of(x.node).fields(3).tolist(), route_of(x.node).fields(2)
        ([0], None)
        """
        if width not in self._idx:
            idx = list(range(width))
            for h in self.hops:
                if h is not None:
                    if not all(0 <= i < len(idx) for i in h):
                        idx = None
                        break
                    idx = [idx[i] for i in h]
            self._idx[width] = np.array(idx, dtype=np.int64) if idx is not None else None
        return self._idx[width]

    def kinds_along(self, kinds: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
        """The column kinds each node on the way emits, for source records of ``kinds`` (valid :meth:`fields`).

        O(route length), cached per ``kinds``.
        """
        along = self._kinds.get(kinds)
        if along is None:
            out, k = [], kinds
            for h in self.hops:
                k = k if h is None else tuple(k[i] for i in h)
                out.append(k)
            along = self._kinds[kinds] = tuple(out)
        return along

    def target(self, kinds: tuple[str, ...], avoid: tuple = (), merge: bool = True) -> tuple | None:
        """Where a kernel writes a few routed updates of source records of column ``kinds``, or None where it may not.

        ``(idx, buf, used, T, at)``: the fields to keep and the
        arrangement's arena (:meth:`traces.spine.Spine.arena_room`, room
        for ``SMALL_ROWS`` updates; a kernel checks for more with
        :func:`traces.arena.has_room`).  None when the arrangement has no
        trace yet, holds queued batches, is one of the traces in
        ``avoid`` (those the kernel reads), or would coerce the routed
        kinds; or when a node on the way has other kinds; or, with
        ``merge`` False, when the arena has no room without a merge
        (:meth:`traces.spine.Spine.arena_free`).  Ask before reading any
        table: making room may merge.  O(route length).
        """
        arr = self.arrangement
        trace = arr.trace
        if trace is None or arr.queues[0] or not trace.ints or trace in avoid:  # a Trace equals itself alone
            return None
        idx = self.fields(len(kinds))
        if idx is None:
            return None
        along = self.kinds_along(kinds)
        if (along[-1] if along else kinds) != trace.kinds or self.source.kinds not in (None, kinds):
            return None
        for node, k in zip(self.passes, along):
            if node.kinds not in (None, k):
                return None
        arena = trace.spine.arena_room(SMALL_ROWS) if merge else trace.spine.arena_free(SMALL_ROWS)
        return (idx, *arena.target()) if arena is not None else None

    def written(self, kinds: tuple[str, ...], k: int, C: np.ndarray, T: np.ndarray, D: np.ndarray, used: int) -> None:
        """A kernel routed ``k`` consolidated source updates of column ``kinds``: the arrangement took ``C, T, D``.

        Counts and fixes kinds as ``emit`` along the chain would (nothing,
        for no updates), records the arena's batch and has the arrangement
        emit it to its readers.  O(route length).
        """
        if k:
            self.counted(kinds, k, len(D), used)
            if len(D):
                arr = self.arrangement
                arr.emit(Updates.unchecked(tuple(C), T, D, arr.trace.kinds))

    def counted(self, kinds: tuple[str, ...], k: int, n: int, used: int) -> None:
        """:meth:`written` but for the arrangement's emit: ``k`` source updates routed, ``n`` taken (``k > 0``).

        For a caller that hands the arrangement's batch to its reader
        itself (a fused loop round).  O(route length).
        """
        src = self.source
        src.updates_out += k
        if src.kinds is None:
            src.kinds = kinds
        for node, along in zip(self.passes, self.kinds_along(kinds)):
            node.updates_in += k
            node.updates_out += k
            if node.kinds is None:
                node.kinds = along
        arr = self.arrangement
        arr.updates_in += k
        if n:
            arr.trace.spine.arena_written(used, n)


def route_of(node: Node) -> Route | None:
    """The route from ``node``'s output to an arrangement, or None when its output goes anywhere else.

    Follows single targets through ``project`` and ``concat`` nodes to an
    :class:`~ddflow.operators.arrange.ArrangeNode`.  Kept on the node
    until the graph changes: O(1), O(chain length) when found again.
    """
    return node.graph_cached("_route", _find)


def _find(node: Node) -> Route | None:
    passes, hops = [], []
    at = node
    while len(at.targets) == 1:
        nxt, _ = at.targets[0]
        if type(nxt) is ArrangeNode:
            return Route(node, tuple(passes), tuple(hops), nxt)
        if type(nxt) is ColumnsNode and nxt.mode == "project":
            hops.append(nxt.indices)
        elif type(nxt) is ConcatNode:
            hops.append(None)
        else:
            return None
        passes.append(nxt)
        at = nxt
    return None
