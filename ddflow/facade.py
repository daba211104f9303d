"""The user's ``ddflow.Dataflow``: the engine's dataflow plus the query front ends.

The engine (:mod:`ddflow.dataflow`) sits below the front ends and never
imports them; this class sits above them and adds what needs them:
:meth:`Dataflow.sql` and :meth:`Dataflow.explain` (a Datalog front end
joins them here).  Both go through the one front end of the dataflow
(:class:`ddflow.sql.frontend.SqlFrontend`), made on first use, which
keeps its views.  Everything else (building, feeding, running, workers,
``spark=``) is the engine's, unchanged.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from ddflow.collection import Collection
from ddflow.dataflow import Dataflow as EngineDataflow

if TYPE_CHECKING:
    from ddflow.sql.frontend import SqlFrontend


class Dataflow(EngineDataflow):
    """A dataflow with SQL: everything of the engine's :class:`ddflow.dataflow.Dataflow` (its arguments, inputs,
    ``advance_to``, ``run``, workers), plus views written in Spark SQL over its tables.

    >>> with ddflow.Dataflow() as flow:
    ...     edges_in, edges = flow.new_collection("edges", schema={"src": "bigint", "dst": "bigint"})
    ...     out = flow.sql("SELECT src, COUNT(*) AS n FROM edges GROUP BY src").capture()
    ...     edges_in.update([(1, 2), (1, 3)], times=0); flow.advance_to(1); flow.run()
    >>> out.contents(0)
    {(1, 2): 1}
    """

    def _frontend(self) -> "SqlFrontend":
        """The one front end of this dataflow (made on first use: sqlglot loads only for SQL)."""
        fe = self.__dict__.get("_sql_frontend")
        if fe is None:
            from ddflow.sql.frontend import SqlFrontend

            # A proxy: the front end must not refer back to the dataflow, or dropping the dataflow would wait
            # for the cyclic collector to release its workers (see ``close``).
            fe = self._sql_frontend = SqlFrontend(weakref.proxy(self))
        return fe

    def sql(self, query: str, mode: str = "changelog") -> Collection:
        """A view: the rows of a Spark SQL query over this dataflow's tables, maintained incrementally.

        ``query`` may be a script of ``;``-separated statements, among them
        ``CREATE [OR REPLACE] [TEMP] VIEW v AS ...``, which keeps ``v`` for
        later calls; the last statement's collection is returned.  A
        construct ddflow does not support is refused here, never at run.
        ``mode="final"``: each row once, when its window or session closes
        (the frontier passes its end), never retracted, as Spark's append
        mode; refused for a query whose rows never close.

        The result is a collection with named columns (``.columns``); its
        capture reads rows in SELECT-list order with NULL as None, as bags
        (multiplicities).  Views built over the same tables share
        operators where their plans share nodes.  Cost: building is O(size
        of the query); at run time each operator costs as documented on
        it (see :meth:`explain`).

        >>> flow = ddflow.Dataflow()
        >>> orders_in, orders = flow.new_collection("orders", schema={"cust": "string", "amount": "bigint"})
        >>> totals = flow.sql("SELECT cust, SUM(amount) AS total FROM orders GROUP BY cust")
        >>> cap = totals.capture()
        >>> orders_in.update([("a", 5), ("a", 2), (None, 1)], times=0); flow.advance_to(1); flow.run()
        >>> cap.contents(0)
        {('a', 7): 1, (None, 1): 1}
        """
        return self._frontend().sql(query, mode)

    def explain(self, query: str) -> str:
        """The plan of a SQL query as an indented tree, arrangements marked.  Cost: O(size of the query).

        >>> flow = ddflow.Dataflow()
        >>> _ = flow.new_collection("orders", schema={"cust": "string", "amount": "bigint"})
        >>> print(flow.explain("SELECT cust FROM orders WHERE amount > 1"))
        Project [cust]
          Filter (amount > 1)
            Scan orders [cust, amount]
        """
        return self._frontend().explain(query)
