"""What bounds a fixpoint's loop, set by the user of a front end and carried by the plan to the loop it lowers to.

``flow.sql(..., max_iterations=, max_seconds=, max_records=)`` and
``flow.datalog(...)`` give a :class:`LoopLimits`; :func:`with_limits` sets
it on every :class:`~ddflow.plan.ir.Recursive` of the plan, and
:class:`~ddflow.plan.lower.Lowering` makes each fixpoint's
:class:`~ddflow.graph.scope.IterativeScope` with it.  A plan's limits are
part of the plan: two views of one fixpoint with other limits get a loop
each.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ddflow.plan.ir import Recursive, Rel


@dataclass(frozen=True)
class LoopLimits:
    """What bounds a fixpoint's loop (None: the engine's default, see :class:`ddflow.graph.scope.IterativeScope`).

    ``max_iterations`` rounds; ``max_seconds`` of one step of the loop (all
    its rounds for one frontier); ``max_records`` the records its variables
    hold together, checked after each step of rounds.  Past any of them the
    loop raises :class:`~ddflow.errors.NonConvergence` naming the bound.
    """

    max_iterations: int | None = None
    max_seconds: float | None = None
    max_records: int | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.max_iterations, self.max_seconds, self.max_records))


def with_limits(rel: Rel, limits: LoopLimits) -> Rel:
    """``rel`` with every fixpoint in it bounded by ``limits``.  O(plan size), shared subplans mapped once.

    >>> from ddflow.base.schema import Schema
    >>> from ddflow.plan.ir import RecRef, Recursive
    >>> r = RecRef("r", Schema(("x",), ("bigint",)), 0)
    >>> with_limits(Recursive(("r",), (r,), 0), LoopLimits(max_iterations=5)).limits.max_iterations
    5
    """
    done: dict[int, Rel] = {}

    def walk(x: Rel) -> Rel:
        got = done.get(id(x))
        if got is not None:
            return got
        changes = {}
        for f in dataclasses.fields(x):
            v = getattr(x, f.name)
            if isinstance(v, Rel):
                changes[f.name] = walk(v)
            elif isinstance(v, tuple) and v and all(isinstance(p, Rel) for p in v):
                changes[f.name] = tuple(walk(p) for p in v)
        if isinstance(x, Recursive):
            changes["limits"] = limits
        out = dataclasses.replace(x, **changes) if changes else x
        done[id(x)] = out
        return out

    return walk(rel) if limits else rel
