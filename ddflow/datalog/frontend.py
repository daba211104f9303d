"""The Datalog front end of one dataflow: program text -> checked program -> plan IR -> collections.

The plans are rewritten and lowered by the dataflow's one plan owner
(:class:`~ddflow.plan.owner.PlanOwner`, which the SQL front end is too),
so a program's relations share operators and arrangements with each
other, with SQL views and with later programs over the same tables.

>>> import ddflow
>>> from ddflow.plan.owner import PlanOwner
>>> flow = ddflow.Dataflow()
>>> e_in, _ = flow.new_collection("e", schema={"a": "bigint", "b": "bigint"})
>>> rels = DatalogFrontend(PlanOwner(flow)).datalog(
...     ".decl e(x: number, y: number)\\n.input e\\n.decl r(x: number, y: number)\\n"
...     "r(x, y) :- e(x, y).\\nr(x, z) :- r(x, y), e(y, z).")
>>> cap = rels["r"].capture()
>>> e_in.update([(1, 2), (2, 3)], times=0); flow.advance_to(1); flow.run()
>>> sorted(cap.contents(0))
[(1, 2), (1, 3), (2, 3)]
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ddflow.collection import Collection
from ddflow.datalog.hints import Hints, hints_of
from ddflow.datalog.planner import Planned, Planner
from ddflow.datalog.program import Program, load
from ddflow.plan.deep import on_deep_stack
from ddflow.plan.ir import explain
from ddflow.plan.limits import LoopLimits
from ddflow.plan.partition import exchange_note

if TYPE_CHECKING:
    from ddflow.plan.owner import PlanOwner


class DatalogFrontend:
    """Plans Datalog programs over the tables of ``owner``'s dataflow and lowers them through ``owner``."""

    def __init__(self, owner: "PlanOwner"):
        self.owner = owner

    def program(self, text: str | Program) -> Program:
        """The checked program of a text.  Cost: O(size of the text)."""
        return text if isinstance(text, Program) else on_deep_stack(load, text, what="the Datalog program")

    def plan(self, text: str | Program, hints: bool = True) -> Planned:
        """Every derived relation's plan (declared column order) and the strata order.  O(program size)."""
        return on_deep_stack(self._plan, text, hints, what="the Datalog program")

    def _plan(self, text: str | Program, hints: bool) -> Planned:
        p = self.program(text)
        tables = {n: c.schema for n, c in self.owner.flow.tables.items()}
        return Planner(p, tables, hints_of(p) if hints else Hints()).plan()

    def datalog(self, text: str | Program, hints: bool = True, *, max_iterations: int | None = None,
                max_seconds: float | None = None, max_records: int | None = None) -> dict[str, Collection]:
        """``{relation: collection}`` for every relation the program derives (see :meth:`ddflow.Dataflow.datalog`).

        Relations are lowered stratum by stratum (a priority hint's order):
        operators are made, and so stepped where the data allows either
        order, in that order.  ``max_iterations``, ``max_seconds`` and
        ``max_records`` bound each recursive stratum's loop
        (:class:`~ddflow.plan.ir.LoopLimits`).  Cost: O(program size) to build,
        on a deep stack (:mod:`ddflow.plan.deep`).
        """
        limits = LoopLimits(max_iterations, max_seconds, max_records)
        return on_deep_stack(self._datalog, text, hints, limits, what="the Datalog program")

    def _datalog(self, text: str | Program, hints: bool, limits: LoopLimits) -> dict[str, Collection]:
        planned = self._plan(text, hints)
        order = [n for s in planned.strata for n in s.relations if n in planned.relations]
        return {n: self.owner.lower(planned.relations[n], limits) for n in order}

    def explain(self, text: str | Program, hints: bool = True) -> str:
        """Each output relation's plan (every derived one if the program has no ``.output``), rewritten, as a tree."""
        return on_deep_stack(self._explain, text, hints, what="the Datalog program")

    def _explain(self, text: str | Program, hints: bool) -> str:
        p = self.program(text)
        planned = self._plan(p, hints)
        names = [n for n in planned.relations if n in p.outputs] or list(planned.relations)
        note = exchange_note if self.owner.flow.workers > 1 else None
        strata = " ; ".join(("loop " if s.recursive else "") + ", ".join(s.relations) for s in planned.strata)
        out = [f"Strata: {strata}"]
        for n in names:
            out.append(f"{n}:\n" + explain(self.owner.rewritten(planned.relations[n]), 1, note))
        return "\n".join(out)
