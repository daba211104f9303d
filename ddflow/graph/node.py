"""Operator nodes: input queues, a step that retires ready work, and downstream edges.

A node is stepped with a *bound*: a time vector such that every time
``s`` with ``all(s < bound)`` is complete and may be retired (see
:mod:`ddflow.graph.scope`).  Stateless nodes process whatever reaches them
(they preserve times); stateful ones retire only complete times and
report the rest through :meth:`Node.work_times` so the schedule comes
back for them.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np

from ddflow.base.native import kernel
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError

if TYPE_CHECKING:
    from ddflow.graph.context import Context
    from ddflow.graph.scope import Scope


def object_columns(u: Updates) -> Iterable[np.ndarray]:
    """The object-kind (interner code) columns of ``u``.  O(arity)."""
    return (c for c, k in zip(u.cols, u.kinds) if k == "o")


def ready_mask(times: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Times that are complete under ``bound`` (strictly below it in every coordinate)."""
    return np.all(times < bound, axis=1)


def complete_row(times, i, bound):
    """Whether row ``i`` of ``times`` is complete under ``bound``: its first ``len(bound)`` coordinates below it.

    A kernel helper (compiled with the kernels that call it).  O(len(bound)).
    """
    for j in range(len(bound)):
        if times[i, j] >= bound[j]:
            return False
    return True


@kernel("graph")
def ready_split(times, bound):
    """``(ready_mask(times, bound), how many are complete)`` in one compiled pass.  O(n depth).

    What a step that retires only complete times asks first: with the
    count, "all of it" and "none of it" cost nothing more.
    """
    n = times.shape[0]
    mask = np.empty(n, dtype=np.bool_)
    count = 0
    for i in range(n):
        mask[i] = complete_row(times, i, bound)
        count += mask[i]
    return mask, count


@kernel("graph")
def any_complete(times, bound):
    """Whether some row of ``times`` is complete under ``bound`` (``ready_mask(times, bound).any()``).

    O(n depth), stopping at the first complete row: one compiled call.
    """
    for i in range(times.shape[0]):
        if complete_row(times, i, bound):
            return True
    return False


class Node(ABC):
    """An operator in a scope.  Subclasses implement :meth:`step`."""

    #: The input port that closes a loop (its data is one iteration later), if any.
    feedback_port: int | None = None
    #: The step must see *all* its input under the bound, including what other workers send
    #: (the reduce family).  The worker runtime waits for in-flight exchanges before stepping it.
    needs_complete_input: bool = False
    #: Part of what the step produces goes to other workers (an exchange).
    sends_to_workers: bool = False
    #: An output (capture, subscription): with several workers, its batches are merged and sent to the driver.
    is_output: bool = False
    #: Handles each batch when it is pushed, not when stepped: a stateless operator whose output is a
    #: function of each batch alone, whatever its time and whoever sent it (a :class:`BatchwiseNode`).
    #: The scheduler leaves it out of its steps, so it costs a round nothing beyond its own work.
    inline: bool = False
    #: Updates received and emitted so far (``Dataflow.stats``).
    updates_in: int = 0
    updates_out: int = 0
    #: Seconds spent in this operator's steps, as one worker's scheduler times them (``Dataflow.metrics``).
    busy_s: float = 0.0
    #: The operator keeps an arrangement (an indexed trace of its input) from its first batch on: what a drawn
    #: plan marks before any trace exists (``ddflow.graph.drawing``).
    arranges: bool = False

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        # Whether the only work is what the queues hold (has_work's O(1) path).
        cls._queues_only = cls.work_times is Node.work_times

    def __init__(self, scope: "Scope", name: str, n_inputs: int = 1):
        self.scope = scope
        self.ctx: Context = scope.ctx
        self.name = name
        #: Per input port, batches not yet retired; never an empty one (push drops them, steps requeue only rows).
        self.queues: list[list[Updates]] = [[] for _ in range(n_inputs)]
        self.targets: list[tuple[Node, int]] = []
        self.kinds: tuple[str, ...] | None = None
        scope.add(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    @property
    def depth(self) -> int:
        """Length of this node's times: 1 at top level, +1 per enclosing loop."""
        return self.scope.depth

    # -- wiring ---------------------------------------------------------------
    def connect(self, target: "Node", port: int = 0) -> None:
        """Send this node's output to ``target``'s input ``port``."""
        self.targets.append((target, port))
        self.ctx.changed()

    def push(self, port: int, u: Updates) -> None:
        """Queue a batch on input ``port`` (empty batches are dropped)."""
        n = len(u.diffs)  # not len(u): a Python call fewer, on the path of every batch
        if n:
            self.updates_in += n
            self.queues[port].append(u)

    def emit(self, u: Updates) -> None:
        """Send updates downstream, fixing this node's column kinds on first use."""
        n = len(u.diffs)
        if not n:
            return
        self.updates_out += n
        if self.kinds is None:
            self.kinds = u.kinds
        elif u.kinds != self.kinds:
            u = self.ctx.coerce(u, self.kinds, self.name)
        for node, port in self.targets:
            node.push(port, u)

    def dequeue(self, port: int = 0) -> Updates | None:
        """Everything queued on ``port``, as one batch (or None), leaving the queue empty."""
        q = self.queues[port]
        if not q:
            return None
        self.queues[port] = []
        return Updates.concat(q) if len(q) > 1 else q[0]

    # -- scheduling -------------------------------------------------------------
    @abstractmethod
    def step(self, bound: np.ndarray) -> None:
        """Retire the work that is complete under ``bound``; keep the rest."""

    def run_step(self, bound: np.ndarray) -> None:
        """:meth:`step`, with a schema or overflow error that does not name this operator renamed to name it.

        Errors like "a sum of diffs does not fit in int64" come from shared
        code (consolidation, merges, a user's reduce); the scheduler calls
        this so the user learns which operator met them.
        """
        self._named(self.step, bound)

    def _named(self, fn, arg) -> None:
        """``fn(arg)``, a schema or overflow error renamed to name this operator (see :meth:`run_step`)."""
        try:
            fn(arg)
        except SchemaError as e:
            if repr(self.name) in str(e) or str(e).startswith("operator "):  # named already (by the one that met it)
                raise
            raise SchemaError(f"operator {self.brief_name!r}: {e}") from e
        except OverflowError as e:
            raise SchemaError(f"operator {self.brief_name!r}: a value does not fit in int64 ({e})") from e

    @property
    def brief_name(self) -> str:
        """The name for messages: an operator's own name and number, not the nest of those it reads
        (``join(map(t)#0, u)#3`` is ``join#3``)."""
        name = self.name
        if "(" not in name or len(name) <= 60:
            return name
        tail = name.rpartition(")")[2]
        return f"{name.split('(')[0]}{tail}" if tail.startswith("#") else name[:57] + "..."


    def work_times(self) -> Iterable[np.ndarray]:
        """Times (in this node's scope) of work not yet retired: queued input and pending times."""
        for q in self.queues:
            for u in q:
                yield u.times

    def graph_cached(self, key: str, find: Callable[["Node"], Any]) -> Any:
        """``find(self)``, kept on the node under ``key`` until the graph changes.  O(1) when kept.

        For what a step asks of the graph around it (where its output is
        routed, whether its loop round is fused): answers that change only
        when a node or an edge is added.
        """
        version = self.ctx.graph_version
        cached = self.__dict__.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        found = find(self)
        self.__dict__[key] = (version, found)
        return found

    def has_work(self) -> bool:
        """Whether :meth:`work_times` holds anything: a node without work is not stepped.

        Every step with no queued input and no pending times does nothing,
        so the scheduler skips it (nodes that send to other workers are
        always stepped: their peers count on a message per step).  O(1)
        per array of work; O(ports) for a node whose only work is its
        queues, since a queued batch is never empty.
        """
        if self._queues_only:
            return any(self.queues)
        return any(len(t) for t in self.work_times())

    def has_ready_work(self, bound: np.ndarray) -> bool:
        """Whether a step under ``bound`` can do anything: the scheduler steps only nodes for which it holds.

        Here, any work at all (a stateless node handles whatever reaches it,
        whatever its time); a node that retires only times complete under
        the bound says so by overriding this (a reduce inside a loop often
        holds work for later rounds only).
        """
        return self.has_work()

    def held_columns(self) -> Iterable[np.ndarray]:
        """Every column of interner codes this node still holds: what the interner must not free.

        The mark phase of :func:`ddflow.graph.scope.collect_codes`.  The
        default covers queued input; nodes that keep state (traces, pending
        work, held feedback, captured output) add it.  A code left out here
        may be reused for another value, so a node that keeps updates
        anywhere else must override this.  O(batches held), no copies.
        """
        for q in self.queues:
            for u in q:
                yield from object_columns(u)

    def trace_handles(self) -> list:
        """Reader handles of the traces this node owns, advanced as the dataflow's frontier moves."""
        return []

    def records_held(self) -> int:
        """Updates this node keeps as state: its traces (a node with state of its own adds it).  O(batches)."""
        return sum(len(h.trace) for h in self.trace_handles())

    def bytes_held(self) -> int:
        """Bytes of numpy arrays in this node's traces.  O(batches)."""
        return sum(h.trace.nbytes for h in self.trace_handles())

    def queued(self) -> int:
        """Updates waiting in this node's input queues (not yet complete, or not yet stepped).  O(batches)."""
        return sum(len(u) for q in self.queues for u in q)

    def start_worker(self, me: int) -> None:
        """Called in worker ``me`` just after the fork.

        Queued input belongs to the driver, which sends each worker its
        share, so it is dropped here; subclasses add what else differs in a
        worker (an exchange learns its own index, captures stop calling
        back: subscriptions run in the driver, on merged output).
        """
        self.queues = [[] for _ in self.queues]


#: Inline nodes applying pushed batches within one another past this depth defer them (:meth:`BatchwiseNode.push`):
#: each level is a few Python frames, and a chain of a few hundred stateless operators (deep SQL subqueries, or
#: ``project`` called in a loop) would otherwise reach Python's recursion limit.
INLINE_DEPTH = 48


class BatchwiseNode(Node):
    """A node whose work is a function of each batch it is given (:meth:`apply`), whatever its time.

    Its step applies what is queued, each port's batches as one.  Such a
    node may do that work when a batch is pushed instead: all of it
    (:attr:`Node.inline`), or the batches it chooses (an arrangement takes
    small ones at once, :meth:`apply_now`).
    """

    @abstractmethod
    def apply(self, u: Updates) -> None:
        """The work on one batch (emitting what it makes)."""

    def push(self, port: int, u: Updates) -> None:
        """An :attr:`inline` node applies the batch at once; others queue it.

        Inline nodes call one another (each one's emit is the next one's
        push), so a long chain of them would recurse as deep as it is long:
        past :data:`INLINE_DEPTH` nested applications a batch is deferred,
        and the outermost inline node applies the deferred ones, in order,
        before it returns.  So a push still returns with all of its
        downstream inline work done, at a bounded depth whatever the
        chain's length.  O(1) besides the work.
        """
        if not (self.inline and len(u.diffs)):
            super().push(port, u)
            return
        ctx = self.ctx
        if ctx.inline_depth >= INLINE_DEPTH:
            ctx.inline_deferred.append((self, u))
            return
        ctx.inline_depth += 1
        try:
            self.apply_now(u)
            if ctx.inline_depth == 1:
                deferred = ctx.inline_deferred
                while deferred:
                    node, v = deferred.pop(0)
                    node.apply_now(v)
        finally:
            ctx.inline_depth -= 1
            if not ctx.inline_depth:
                ctx.inline_deferred.clear()  # an error stops the step: nothing of it is applied later

    def apply_now(self, u: Updates) -> None:
        """Apply a pushed batch at once instead of queueing it (counted as received, errors named)."""
        self.updates_in += len(u.diffs)
        self._named(self.apply, u)

    def step(self, bound: np.ndarray) -> None:
        for port in range(len(self.queues)):
            u = self.dequeue(port)
            if u is not None:
                self.apply(u)
