"""Operator nodes and the scopes that schedule them.

Progress is tracked by structure, not by timely's general machinery.  A
scope is stepped with a *bound*: a time vector such that every time ``s``
with ``all(s < bound)`` is complete and may be retired.  At top level the
bound is ``(T,)`` for the frontier ``T`` of ``advance_to``; inside a loop
at round ``r`` it is ``(*outer_bound, r + 1)``.  Within one bound, nodes
are stepped in creation order, which is a topological order of the graph
once the loops' feedback edges (always one iteration later) are cut.  A
loop keeps running rounds while any node of its body holds work whose
outer part is complete, so no time is ever finalized early and every
time before the frontier is finished when ``run`` returns.

Stateless nodes process whatever reaches them (they preserve times);
stateful ones (reduce) retire only complete times and report the rest as
pending work so the loop comes back for them.
"""
from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Iterable

import numpy as np

from ddflow.errors import DataflowError, NonConvergence
from ddflow.updates import Updates

if TYPE_CHECKING:
    from ddflow.dataflow import Dataflow


def ready_mask(times: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Times that are complete under ``bound`` (strictly below it in every coordinate)."""
    return np.all(times < bound, axis=1)


class Node(ABC):
    """An operator: input queues, a step that retires ready work, and downstream edges."""

    #: The input port that closes a loop (its data is one iteration later), if any.
    feedback_port: int | None = None

    def __init__(self, scope: "Scope", name: str, n_inputs: int = 1):
        self.scope = scope
        self.flow: Dataflow = scope.flow
        self.name = name
        self.queues: list[list[Updates]] = [[] for _ in range(n_inputs)]
        self.targets: list[tuple[Node, int]] = []
        self.kinds: tuple[str, ...] | None = None
        scope.add(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    @property
    def depth(self) -> int:
        return self.scope.depth

    # -- wiring ---------------------------------------------------------------
    def connect(self, target: "Node", port: int = 0) -> None:
        self.targets.append((target, port))
        self.flow._graph_version += 1

    def push(self, port: int, u: Updates) -> None:
        if len(u):
            self.queues[port].append(u)

    def emit(self, u: Updates) -> None:
        """Send updates downstream, fixing this node's column kinds on first use."""
        if not len(u):
            return
        if self.kinds is None:
            self.kinds = u.kinds
        elif u.kinds != self.kinds:
            u = self.flow.coerce(u, self.kinds, self.name)
        for node, port in self.targets:
            node.push(port, u)

    def take(self, port: int = 0) -> Updates | None:
        """Everything queued on ``port``, as one batch (or None)."""
        q = self.queues[port]
        if not q:
            return None
        self.queues[port] = []
        return Updates.concat(q) if len(q) > 1 else q[0]

    # -- scheduling -------------------------------------------------------------
    @abstractmethod
    def step(self, bound: np.ndarray) -> None:
        """Retire the work that is complete under ``bound``; keep the rest."""

    def work_times(self) -> Iterable[np.ndarray]:
        """Times (in this node's scope) of work not yet retired: queued input and pending times."""
        for q in self.queues:
            for u in q:
                yield u.times

    def trace_handles(self) -> list:
        """Reader handles of the traces this node owns, advanced as the dataflow's frontier moves."""
        return []


class Scope:
    """The top-level scope: one sweep over its nodes retires everything below the bound."""

    def __init__(self, flow: "Dataflow", depth: int, parent: "Scope | None" = None, name: str = "top"):
        self.flow = flow
        self.depth = depth
        self.parent = parent
        self.name = name
        self.nodes: list[Node | IterativeScope] = []
        self._order: list[Node | IterativeScope] = []
        self._order_version = -1

    def add(self, node: "Node | IterativeScope") -> None:
        self.flow._check_building()
        self.nodes.append(node)
        self.flow._graph_version += 1

    def _item_of(self, node: Node) -> "Node | IterativeScope | None":
        """The member of this scope that is ``node`` or contains it."""
        item: Node | Scope = node
        s: Scope | None = node.scope
        while s is not self:
            if s is None:
                return None
            item, s = s, s.parent
        return item

    def ordered(self) -> list["Node | IterativeScope"]:
        """Members in topological order of the data edges (loop feedback cut), creation order on ties.

        Creation order alone is not enough: a body may create nodes in an
        enclosing scope after that scope already holds the loop.
        """
        if self._order_version == self.flow._graph_version:
            return self._order
        pos = {id(n): i for i, n in enumerate(self.nodes)}
        succ: dict[int, set[int]] = {i: set() for i in range(len(self.nodes))}
        indeg = [0] * len(self.nodes)
        for n in self.all_nodes():
            a = self._item_of(n)
            for t, port in n.targets:
                if port == t.feedback_port:
                    continue  # feedback: one iteration later
                b = self._item_of(t)
                if a is None or b is None or a is b:
                    continue
                ia, ib = pos[id(a)], pos[id(b)]
                if ib not in succ[ia]:
                    succ[ia].add(ib)
                    indeg[ib] += 1
        heap = [i for i, d in enumerate(indeg) if d == 0]
        heapq.heapify(heap)
        order = []
        while heap:
            i = heapq.heappop(heap)
            order.append(self.nodes[i])
            for j in succ[i]:
                indeg[j] -= 1
                if indeg[j] == 0:
                    heapq.heappush(heap, j)
        if len(order) != len(self.nodes):
            stuck = [self.nodes[i] for i, d in enumerate(indeg) if d > 0]
            raise DataflowError(f"scope {self.name!r} has a cycle outside any loop variable: {stuck[:4]}")
        self._order, self._order_version = order, self.flow._graph_version
        return order

    def is_within(self, other: "Scope") -> bool:
        s: Scope | None = self
        while s is not None:
            if s is other:
                return True
            s = s.parent
        return False

    def step(self, bound: np.ndarray) -> None:
        for n in self.ordered():
            n.step(bound)

    def all_nodes(self) -> Iterable[Node]:
        for n in self.nodes:
            if isinstance(n, IterativeScope):
                yield from n.all_nodes()
            else:
                yield n


class IterativeScope(Scope):
    """A loop: times gain an iteration coordinate; rounds run until no work is left."""

    DEFAULT_MAX_ITERATIONS = 100_000

    def __init__(self, parent: Scope, name: str, max_iterations: int | None = None):
        super().__init__(parent.flow, parent.depth + 1, parent, name)
        self.max_iterations = max_iterations if max_iterations is not None else self.DEFAULT_MAX_ITERATIONS
        self.variables: list = []
        self.rounds_run = 0
        parent.add(self)

    def __repr__(self) -> str:
        return f"<loop {self.name}>"

    def step(self, outer_bound: np.ndarray) -> None:
        for v in self.variables:
            if v.feedback_source is None:
                raise DataflowError(f"loop {self.name!r}: variable {v.name!r} was never set")
        while True:
            r = self.next_round(outer_bound)
            if r is None:
                return
            if r > self.max_iterations:
                raise NonConvergence(
                    f"loop {self.name!r} did not converge within max_iterations={self.max_iterations} "
                    f"(still changing at iteration {r})"
                )
            self.rounds_run = max(self.rounds_run, r + 1)
            bound = np.append(outer_bound, r + 1)
            for n in self.ordered():
                n.step(bound)

    def next_round(self, outer_bound: np.ndarray) -> int | None:
        """The least iteration with work whose outer time is complete."""
        best: int | None = None
        k = self.depth - 1
        for times in self.work_times():
            if not len(times):
                continue
            inner = times[:, : self.depth]
            ok = np.all(inner[:, :k] < outer_bound, axis=1)
            if ok.any():
                m = int(inner[ok, k].min())
                best = m if best is None else min(best, m)
        return best

    def work_times(self) -> Iterable[np.ndarray]:
        """Work of every node in the body, in this scope's depth or deeper."""
        for n in self.nodes:
            if isinstance(n, IterativeScope):
                for t in n.work_times():
                    yield t[:, : self.depth]
            else:
                for t in n.work_times():
                    if t.shape[1] < self.depth:  # an enter node's queue holds parent times
                        t = np.concatenate([t, np.zeros((len(t), self.depth - t.shape[1]), dtype=np.int64)], axis=1)
                    yield t
