"""The reduce node: a keyed reduction kept exactly up to date, by the fastest tactic that applies."""
from __future__ import annotations

from typing import Iterable

import numpy as np

from ddflow.base.updates import Updates
from ddflow.errors import SchemaError, UsageError
from ddflow.graph.node import Node, any_complete, ready_split
from ddflow.graph.scope import Scope
from ddflow.operators.arrange import ArrangeNode
from ddflow.operators.reduce.general import GeneralTactic
from ddflow.operators.reduce.iterate import LoopTactic
from ddflow.operators.reduce.logic import Logic
from ddflow.operators.reduce.tactic import ReduceTactic
from ddflow.operators.reduce.total import TotalTactic
from ddflow.operators.reduce.walk import WalkTactic
from ddflow.traces import TraceHandle

#: Tried in order; the general tactic accepts everything.
TACTICS: tuple[type[ReduceTactic], ...] = (TotalTactic, LoopTactic, WalkTactic, GeneralTactic)


def choose_tactic(logic: Logic, depth: int) -> type[ReduceTactic]:
    """The first tactic of :data:`TACTICS` that keeps the contract for ``logic`` at ``depth``."""
    return next(t for t in TACTICS if t.accepts(logic, depth))


class ReduceNode(Node):
    """Reads an arrangement's batches; retires complete times with its tactic."""

    needs_complete_input = True

    def __init__(self, scope: Scope, name: str, source: ArrangeNode, logic: Logic,
                 tactic: type[ReduceTactic] | None = None):
        super().__init__(scope, name)
        self.source = source
        self.logic = logic
        tactic = tactic or choose_tactic(logic, scope.depth)
        if not tactic.accepts(logic, scope.depth):
            raise UsageError(f"reduce {name!r}: {tactic.__name__} does not apply to {logic.name} at depth {scope.depth}")
        self.tactic = tactic(self)
        source.connect(self, 0)

    def trace_handles(self) -> list[TraceHandle]:
        return self.tactic.trace_handles()

    def work_times(self) -> Iterable[np.ndarray]:
        yield from super().work_times()
        yield from self.tactic.work_times()

    def has_ready_work(self, bound: np.ndarray) -> bool:
        """Whether some work is complete under ``bound``: by the tactics' contract, a step retires nothing else.

        One compiled pass per array of work (:func:`any_complete`): a loop's
        reduce holding seeds for later rounds only is not stepped.
        """
        return any(len(t) and any_complete(t, bound) for t in self.work_times())

    def held_columns(self) -> Iterable[np.ndarray]:
        """Queued input (not yet complete) and the tactic's output trace and pending work.  O(batches)."""
        yield from super().held_columns()
        yield from self.tactic.held_columns()

    def step(self, bound: np.ndarray) -> None:
        new = self.dequeue()
        if new is not None and new.arity < self.logic.min_arity:
            raise SchemaError(f"{self.logic.name} {self.name!r}: records need a key and a value field, "
                             f"got {new.arity} field(s)")
        if not self.tactic.takes_unready:
            new = self.ready_part(new, bound)
        self.tactic.step(new, bound)

    def ready_part(self, new: Updates | None, bound: np.ndarray) -> Updates | None:
        """The updates of ``new`` complete under ``bound`` (None if none); the rest go back on the queue.

        In a loop, the next round's input often arrives early.  O(n).
        """
        if new is None:
            return None
        ok, due = ready_split(new.times, bound)
        if not due:
            self.queues[0] = [new, *self.queues[0]]
            return None
        if due < len(new):
            self.queues[0] = [new.take(np.flatnonzero(~ok)), *self.queues[0]]
            return new.take(np.flatnonzero(ok))
        return new
