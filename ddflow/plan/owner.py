"""The owner of a dataflow's plans: every front end's plan is rewritten and lowered here, into one Lowering.

SQL (:class:`ddflow.sql.frontend.SqlFrontend`, which is a
:class:`PlanOwner`) and Datalog (:mod:`ddflow.datalog.frontend`) build
plan IR and hand it here; one :class:`~ddflow.plan.lower.Lowering` per
dataflow means a relation planned by both (or by two rules, or two
views) is lowered once and its arrangements are shared.  It knows no
query syntax.

>>> import ddflow
>>> from ddflow.plan.ir import Scan
>>> flow = ddflow.Dataflow()
>>> _ = flow.new_collection("t", schema={"k": "bigint"})
>>> owner = PlanOwner(flow)
>>> owner.lower(Scan("t", flow.tables["t"].schema)).columns
['k']
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ddflow.collection import Collection
from ddflow.plan.ir import Rel
from ddflow.plan.limits import LoopLimits, with_limits
from ddflow.plan.lower import Lowering
from ddflow.plan.rewrite import equate_extremes, lift_closes, prune_columns, push_filters

if TYPE_CHECKING:
    from ddflow.dataflow import EngineDataflow


class PlanOwner:
    """Rewrites and lowers plans over one dataflow's tables.

    ``rewrite``: push filters down and prune columns (off only to test the
    rewrites); ``share``: share keyed forms and arrangements and skip
    exchanges that move nothing (see :class:`~ddflow.plan.lower.Lowering`).
    """

    def __init__(self, flow: "EngineDataflow", rewrite: bool = True, share: bool = True):
        self.flow = flow
        self.rewrite = rewrite
        self.lowering = Lowering(flow.tables, flow.top, share=share)

    def rewritten(self, rel: Rel) -> Rel:
        """``rel`` after the rewrites that never change a result (none with ``rewrite=False``).  O(plan size)."""
        return prune_columns(equate_extremes(push_filters(lift_closes(rel)))) if self.rewrite else rel

    def lower(self, rel: Rel, limits: LoopLimits | None = None) -> Collection:
        """The collection of a plan from any front end, rewritten, with its named columns.  Cost: O(plan size).

        ``limits`` bound every fixpoint of the plan (see :class:`~ddflow.plan.ir.LoopLimits`).
        """
        if limits:
            rel = with_limits(rel, limits)
        rel = self.rewritten(rel)
        view = Collection(self.lowering.lower(rel).node)
        view.schema = rel.schema
        return view
