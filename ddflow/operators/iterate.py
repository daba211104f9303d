"""Loop plumbing: entering a loop, leaving it, and loop variables.

Entering appends an iteration coordinate 0 to every time; a variable
feeds the loop body's result back one iteration later; leaving drops the
coordinate, so the diffs of all iterations add up (telescope) to the
fixed point.  The loop's rounds are run by :class:`ddflow.graph.scope.Scheduler`.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from ddflow.base.columnar import frozen
from ddflow.base.consolidate import consolidate
from ddflow.base.kernels import SMALL_ROWS, key_matrix
from ddflow.base.updates import Updates
from ddflow.graph.node import Node, any_complete, object_columns, ready_split
from ddflow.graph.scope import Scope
from ddflow.operators.feedback import feedback_round, feedback_round_into
from ddflow.operators.round import round_of
from ddflow.operators.route import route_of


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
        u = self.dequeue()
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
        """Emit the initial input and the feedback due in this round, consolidated.

        The usual step (a few rows of last round's feedback, all due now,
        nothing held) is one compiled call (:func:`feedback_round`); where
        the variable's output is routed to an arrangement
        (:func:`~ddflow.operators.route.route_of`), the same call inserts
        it there (:func:`feedback_round_into`), and where the loop body
        has the shape of reach's, the round's join and reduce run in the
        same call (:mod:`ddflow.operators.round`).
        """
        init = self.dequeue(0)
        fb = self.dequeue(1)
        if fb is not None and init is None and not self.held and len(fb) <= SMALL_ROWS:
            fb = self._fit(fb)
            if all(c.dtype == np.int64 for c in fb.cols):
                diffs = fb.diffs
                if diffs.flags.writeable:  # from a join (from a trace it is read-only): one signature
                    diffs, = frozen(diffs)
                K = key_matrix(fb.cols, fb.times)
                route = route_of(self)
                if route is not None:
                    fused = round_of(self)
                    if fused is not None and fused.run(K, diffs, fb.kinds, bound):
                        return
                into = route.target(fb.kinds) if route is not None else None
                if into is not None:  # the arrangement reading this variable takes the round's input in the call
                    k, C, T, D, due, overflow, used = feedback_round_into(K, diffs, len(fb.cols), bound, *into)
                    if due and not overflow:
                        route.written(fb.kinds, k, C, T, D, used)
                        return
                else:
                    C, T, D, due, overflow = feedback_round(K, diffs, len(fb.cols), bound)
                    if due and not overflow:
                        if len(D):
                            self.emit(Updates.unchecked(tuple(C), T, D, fb.kinds))
                        return
        if init is not None:
            self.emit(init)
            self.held.append(_next_iteration(self._fit(init.with_diffs(-init.diffs))))
        if fb is not None:
            self.held.append(_next_iteration(self._fit(fb)))
        if not self.held:
            return
        u = Updates.concat(self.held) if len(self.held) > 1 else self.held[0]
        ready, due = ready_split(u.times, bound)
        if due == len(u):  # the usual case: last round's feedback, all of it due now (no copies)
            self.held = []
        elif not due:
            self.held = [u]
            return
        else:
            self.held = [u.take(np.flatnonzero(~ready))]
            u = u.take(np.flatnonzero(ready))
        self.emit(consolidate(u))

    def has_ready_work(self, bound: np.ndarray) -> bool:
        """Queued input, or held feedback due under ``bound``: a step with neither does nothing.  O(held) compiled."""
        return any(self.queues) or any(any_complete(u.times, bound) for u in self.held)

    def _fit(self, u: Updates) -> Updates:
        """Bring feedback to the variable's column kinds (as concat does), or fail naming the variable."""
        if self.kinds is None or u.kinds == self.kinds:
            return u
        return self.ctx.coerce(u, self.kinds, self.name)

    def work_times(self):
        """Initial input, and feedback at the iteration it enters: the body's round ``i`` feeds round ``i + 1``.

        Reporting queued feedback at its own iteration would make the loop
        rerun round ``i`` just to step this variable (every iteration twice,
        and with several workers twice the coordination).
        """
        yield from (u.times for u in self.queues[0])
        for u in self.queues[self.feedback_port]:
            t = u.times.copy()
            t[:, -1] += 1
            yield t
        for u in self.held:
            yield u.times

    def held_columns(self) -> Iterable[np.ndarray]:
        """Queued input and the feedback held for later rounds.  O(batches)."""
        yield from super().held_columns()
        for u in self.held:
            yield from object_columns(u)


def _next_iteration(u: Updates) -> Updates:
    t = u.times.copy()
    t[:, -1] += 1
    return u.with_times(t)
