"""The SQL front end of one dataflow: text -> plan -> rewritten plan -> operators, assembled here and nowhere else.

A text is a script of ``;``-separated statements: queries and ``CREATE
[OR REPLACE] [TEMP[ORARY]] VIEW name [(columns)] AS query``.  A view is
kept by name (its plan, before rewrites) and read inline by the
statements and later texts that name it, so the rewrites see the whole
query.  :meth:`SqlFrontend.sql` returns the last statement's collection
(a view's own rows for a CREATE VIEW); :meth:`SqlFrontend.explain` its
plan.  Everything is checked before anything is kept: a script that
fails registers none of its views.

Every user of a plan goes through here: ``ddflow.Dataflow.sql`` and
``explain`` (:mod:`ddflow.facade`), the streaming driver's views, and the
tests (``rewrite=False`` and ``share=False`` switch the rewrites and the
shared arrangements off, to check that neither changes a result).
:meth:`SqlFrontend.lower` takes a plan with no SQL text, for a front end
that builds the IR itself (Datalog).

>>> import ddflow
>>> flow = ddflow.Dataflow()
>>> _ = flow.new_collection("t", schema={"k": "bigint"})
>>> view = flow.sql("CREATE VIEW big AS SELECT k FROM t WHERE k > 1; SELECT COUNT(*) AS n FROM big")
>>> view.columns
['n']
>>> SqlFrontend(flow).explain("SELECT k FROM t WHERE k > 1")
'Project [k]\\n  Filter (k > 1)\\n    Scan t [k]'
"""
from __future__ import annotations

from sqlglot import exp

from ddflow.collection import Collection
from ddflow.dataflow import EngineDataflow
from ddflow.errors import SchemaError
from ddflow.plan.expr import Col
from ddflow.plan.deep import on_deep_stack
from ddflow.plan.ir import Project, Rel, explain
from ddflow.plan.limits import LoopLimits
from ddflow.plan.owner import PlanOwner
from ddflow.plan.partition import exchange_note
from ddflow.plan.rewrite import finalized, lift_closes
from ddflow.sql.nesting import parsed
from ddflow.sql.planner import plan_query


class SqlFrontend(PlanOwner):
    """Plans, rewrites and lowers SQL over one dataflow's tables and views.

    ``rewrite``: push filters down and prune columns (off only to test the
    rewrites); ``share``: share keyed forms and arrangements and skip
    exchanges that move nothing (see :class:`~ddflow.plan.lower.Lowering`).
    The rewriting and lowering are :class:`~ddflow.plan.owner.PlanOwner`'s,
    shared with the Datalog front end.
    """

    def __init__(self, flow: EngineDataflow, rewrite: bool = True, share: bool = True):
        super().__init__(flow, rewrite, share)
        self.views: dict[str, Rel] = {}

    def plan(self, text: str, views: dict[str, Rel] | None = None) -> Rel:
        """The rewritten plan of the last statement of ``text``; CREATE VIEWs go into ``views`` (self's if None)."""
        return on_deep_stack(lambda: self.rewritten(self._planned(text, self.views if views is None else views)))

    def sql(self, text: str, mode: str = "changelog", *, max_iterations: int | None = None,
            max_seconds: float | None = None, max_records: int | None = None) -> Collection:
        """The collection of the last statement of ``text`` (see :meth:`ddflow.Dataflow.sql`).  Cost: O(size of the text).

        ``mode="final"``: each row once, when its window (or session)
        closes, never retracted; refused for a query whose rows do not
        close (no window over an event-time table, or something stateful
        above the windowed aggregate).  ``max_iterations``, ``max_seconds``
        and ``max_records`` bound each WITH RECURSIVE fixpoint's loop
        (:class:`~ddflow.plan.ir.LoopLimits`; None: the engine's defaults).
        Planned on a deep stack (:mod:`ddflow.plan.deep`).
        """
        if mode not in ("changelog", "final"):
            raise SchemaError(f"SQL: mode is 'changelog' or 'final', not {mode!r}")
        limits = LoopLimits(max_iterations, max_seconds, max_records)
        return on_deep_stack(self._sql, text, mode, limits)

    def _sql(self, text: str, mode: str, limits: LoopLimits) -> Collection:
        views = dict(self.views)
        rel = self._planned(text, views)
        if mode == "final":
            rel = finalized(lift_closes(rel))
            if rel is None:
                raise SchemaError("SQL: mode='final' needs a query whose rows close: a GROUP BY window(...) or "
                                  "session_window(...) over an event-time table, with only filters and projections "
                                  f"above it; this one does not close (`{' '.join(text.split())[:100]}`)")
        view = self.lower(rel, limits)
        self.views = views  # kept only once every statement planned and lowered
        return view

    def explain(self, text: str) -> str:
        """The plan of the last statement of ``text``; its CREATE VIEWs are seen by it but not kept."""
        note = exchange_note if self.flow.workers > 1 else None
        return on_deep_stack(lambda: explain(self.plan(text, dict(self.views)), note=note))

    def _planned(self, text: str, views: dict[str, Rel]) -> Rel:
        """The plan (before rewrites) of the last statement of ``text``; its CREATE VIEWs go into ``views``."""
        rel = None
        for stmt in _statements(text):
            rel = self._statement(stmt, views)
        return rel

    def _statement(self, stmt: exp.Expression, views: dict[str, Rel]) -> Rel:
        tables = {n: c.schema for n, c in self.flow.tables.items()}
        if isinstance(stmt, exp.Create):
            return self._create(stmt, tables, views)
        if not isinstance(stmt, (exp.Query, exp.Values)):  # a bare VALUES list is a query of its rows
            raise SchemaError(f"SQL: expected a query (SELECT, WITH, a set operation) or CREATE VIEW, got "
                              f"`{stmt.sql(dialect='spark')[:80]}`")
        return plan_query(stmt, tables, views)

    def _create(self, stmt: exp.Create, tables: dict, views: dict[str, Rel]) -> Rel:
        kind = (stmt.args.get("kind") or "").upper()
        if kind != "VIEW" or not isinstance(stmt.expression, (exp.Query, exp.Values)):
            raise SchemaError(f"SQL: CREATE {kind or '?'} is not supported (only CREATE VIEW name AS query), in "
                              f"`{stmt.sql(dialect='spark')[:80]}`")
        target = stmt.this
        columns = []
        if isinstance(target, exp.Schema):
            columns = [c.name for c in target.expressions]
            target = target.this
        name = target.name.lower()
        if target.args.get("db") is not None:
            raise SchemaError(f"SQL: a view name with a database ({target.sql(dialect='spark')}) is not supported")
        if name in {t.lower() for t in tables}:
            raise SchemaError(f"SQL: cannot create view {name!r}: a table has that name")
        if name in views and not stmt.args.get("replace"):
            if stmt.args.get("exists"):  # CREATE VIEW IF NOT EXISTS: the view already there stays
                return views[name]
            raise SchemaError(f"SQL: view {name!r} already exists (CREATE OR REPLACE VIEW replaces it)")
        rel = plan_query(stmt.expression, tables, views)
        if columns:
            s = rel.schema
            if len(columns) != len(s):
                raise SchemaError(f"SQL: view {name!r} names {len(columns)} columns, its query has {len(s)}")
            rel = Project(rel, tuple(Col(i, t, n) for i, (n, t) in enumerate(zip(s.names, s.types))), tuple(columns))
        views[name] = rel
        return rel


def _statements(text: str) -> list[exp.Expression]:
    stmts = parsed(text)  # nesting bounded before sqlglot's recursive parser runs
    if not stmts:
        raise SchemaError("SQL: no statement in the text")
    return stmts

