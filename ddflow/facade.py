"""The user's ``ddflow.Dataflow``: the engine's dataflow plus the query front ends.

The engine (:mod:`ddflow.dataflow`) sits below the front ends and never
imports them; this class sits above them and adds what needs them:
:meth:`Dataflow.sql` and :meth:`Dataflow.explain` (a Datalog front end
joins them here).  Both go through the one front end of the dataflow
(:class:`ddflow.sql.frontend.SqlFrontend`), made on first use, which
keeps its views.  Everything else (building, feeding, running, workers,
``spark=``) is the engine's, unchanged.  :meth:`Dataflow.datalog` plans
through :class:`ddflow.datalog.frontend.DatalogFrontend` and lowers through
that same front end, so SQL views and Datalog relations share operators.
"""
from __future__ import annotations

import re
import weakref
from typing import TYPE_CHECKING, Literal

from ddflow.collection import Collection
from ddflow.dataflow import EngineDataflow

if TYPE_CHECKING:
    from ddflow.sql.frontend import SqlFrontend

#: A SQL query's start, past comments: a query's first word, or a parenthesis.
_SQL_START = re.compile(r"(?is)\A(?:\s+|--[^\n]*|/\*.*?\*/)*(?:\(|(?:select|with|from|values|table|create)\b)")


class Dataflow(EngineDataflow):
    """A dataflow with SQL: everything of the engine's :class:`ddflow.dataflow.EngineDataflow` (its arguments, inputs,
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

    def sql(self, query: str, mode: str = "changelog", *, max_iterations: int | None = None,
            max_seconds: float | None = None, max_records: int | None = None) -> Collection:
        """A view: the rows of a Spark SQL query over this dataflow's tables, maintained incrementally.

        ``query`` may be a script of ``;``-separated statements, among them
        ``CREATE [OR REPLACE] [TEMP] VIEW v AS ...``, which keeps ``v`` for
        later calls; the last statement's collection is returned.  A
        construct ddflow does not support is refused here, never at run.
        ``mode="final"``: each row once, when its window or session closes
        (the frontier passes its end), never retracted, as Spark's append
        mode; refused for a query whose rows never close.

        ``max_iterations``, ``max_seconds`` and ``max_records`` bound each
        ``WITH RECURSIVE`` fixpoint: its rounds, the seconds of one step of
        its loop, and the records its relations hold together (checked
        after each step of rounds).  Past one, running raises
        :class:`~ddflow.errors.NonConvergence` naming the loop, the bound,
        and whether it still grew (a rule deriving new values forever) or
        oscillated.  None: the engine's defaults (100,000 rounds, 600 s, no
        record bound).

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
        return self._frontend().sql(query, mode, max_iterations=max_iterations, max_seconds=max_seconds,
                                    max_records=max_records)

    def datalog(self, program: str, hints: bool = True, *, max_iterations: int | None = None,
                max_seconds: float | None = None, max_records: int | None = None) -> dict[str, Collection]:
        """A Datalog program (Soufflé's dialect) over this dataflow's tables, maintained incrementally.

        Returns ``{relation name: collection}`` for every relation the
        program derives (by rules or facts).  Each ``.input`` relation is
        the table of the same name (positional columns, any names; a row
        holding a NULL is not a fact).  Strata run in order, each
        recursive one as one loop; a program that cannot be stratified, or
        a construct outside the supported subset, is refused here with its
        line and column.  ``hints=False`` ignores the program's
        coordination hints (they never change results; see
        :mod:`ddflow.datalog.hints`).  ``max_iterations``, ``max_seconds``
        and ``max_records`` bound each recursive stratum's loop, as for
        :meth:`sql`.  Cost: O(program size) to build; at run time each rule
        costs its joins on the changes only (:meth:`explain` shows the plans).

        >>> flow = ddflow.Dataflow()
        >>> edge_in, _ = flow.new_collection("edge", schema={"c0": "bigint", "c1": "bigint"})
        >>> rels = flow.datalog('''
        ...     .decl edge(x: number, y: number)
        ...     .input edge
        ...     .decl reach(x: number, y: number)
        ...     reach(x, y) :- edge(x, y).
        ...     reach(x, z) :- reach(x, y), edge(y, z).
        ...     .decl cnt(x: number, n: number)
        ...     cnt(x, n) :- edge(x, _), n = count : { reach(x, _) }.
        ... ''')
        >>> reach, cnt = rels["reach"].capture(), rels["cnt"].capture()
        >>> edge_in.update([(1, 2), (2, 3)], times=0); flow.advance_to(1); flow.run()
        >>> sorted(reach.contents(0)), sorted(cnt.contents(0))
        ([(1, 2), (1, 3), (2, 3)], [(1, 2), (2, 1)])
        """
        from ddflow.datalog.frontend import DatalogFrontend

        return DatalogFrontend(self._frontend()).datalog(program, hints, max_iterations=max_iterations,
                                                         max_seconds=max_seconds, max_records=max_records)

    def explain(self, query: str | None = None, language: Literal["sql", "datalog"] | None = None,
                format: Literal["text", "dot", "svg"] = "text") -> str:  # noqa: A002 - Spark's EXPLAIN FORMAT
        """The plan of a SQL query or a Datalog program: as text, or drawn as the operator graph.

        ``format="text"``: the plan as an indented tree, arrangements
        marked.  ``language`` says which the text is; without it, a text
        whose first word (past comments) is a query's (SELECT, WITH, FROM,
        VALUES, TABLE, CREATE, or a parenthesis) is SQL, anything else
        Datalog: a Datalog program shows its strata, then each ``.output``
        relation's plan.

        ``format="dot"`` (Graphviz) or ``"svg"``: the operators the query
        lowers to, built in a scratch dataflow over the same tables and
        views (this one is not changed); with no ``query``, this whole
        dataflow as it is, each operator labelled with the rows and bytes
        it holds (a running flow's state).  Arrangements have a double
        outline, loops are boxes.  SVG comes from Graphviz where ``dot``
        is installed, else from ddflow's own layout; :meth:`draw` writes a
        file (PNG too, with Graphviz).  Cost: O(size of the query), or
        O(operators + trace batches) for the whole dataflow.

        >>> flow = ddflow.Dataflow()
        >>> _ = flow.new_collection("orders", schema={"cust": "string", "amount": "bigint"})
        >>> print(flow.explain("SELECT cust, ':-)' AS face FROM orders WHERE amount > 1"))
        Project [cust, ':-)' AS face]
          Filter (amount > 1)
            Scan orders [cust, amount]
        >>> dot = flow.explain("SELECT cust, SUM(amount) AS total FROM orders GROUP BY cust", format="dot")
        >>> dot.startswith("digraph") and "peripheries=2" in dot
        True
        """
        from ddflow.datalog.frontend import DatalogFrontend
        from ddflow.errors import UsageError

        if language not in (None, "sql", "datalog"):
            raise ValueError(f"explain: language is 'sql' or 'datalog', not {language!r}")
        if format not in ("text", "dot", "svg"):
            raise ValueError(f"explain: format is 'text', 'dot' or 'svg', not {format!r}")
        if format != "text":
            from ddflow.graph.drawing import drawing, graphviz, render, to_dot, to_svg

            scope, title = self._graph_of(query, language)
            d = drawing(scope, sizes=query is None)
            if format == "dot":
                return to_dot(d, title)
            return render(to_dot(d, title), "svg").decode() if graphviz() else to_svg(d, title)
        if query is None:
            raise UsageError("explain(format='text') needs a query; format='dot' or 'svg' draws the whole dataflow")
        if (language or ("sql" if _SQL_START.match(query) else "datalog")) == "datalog":
            return DatalogFrontend(self._frontend()).explain(query)
        return self._frontend().explain(query)

    def draw(self, path: str, query: str | None = None, language: Literal["sql", "datalog"] | None = None) -> str:
        """Write the operator graph of ``query`` (or, without one, of this whole dataflow) to ``path``.

        The file's suffix says how: ``.dot`` (Graphviz text), ``.svg``
        (Graphviz's layout where ``dot`` is installed, else ddflow's own),
        ``.png`` or ``.pdf`` (Graphviz only: a UsageError naming it
        otherwise).  Returns ``path``.  See :meth:`explain` for what is
        drawn.  Cost: as ``explain``, plus one ``dot`` process with Graphviz.

        >>> import os, tempfile
        >>> flow = ddflow.Dataflow()
        >>> _ = flow.new_collection("orders", schema={"cust": "string", "amount": "bigint"})
        >>> path = flow.draw(os.path.join(tempfile.mkdtemp(), "plan.svg"), "SELECT cust FROM orders")
        >>> open(path).read().lstrip().startswith(("<svg", "<?xml"))
        True
        """
        from ddflow.errors import UsageError
        from ddflow.graph.drawing import render

        suffix = path.rsplit(".", 1)[-1].lower() if "." in path else ""
        if suffix not in ("dot", "svg", "png", "pdf"):
            raise UsageError(f"draw: {path!r} should end in .dot, .svg, .png or .pdf")
        if suffix in ("dot", "svg"):
            data = self.explain(query, language, format=suffix).encode()
        else:
            data = render(self.explain(query, language, format="dot"), suffix)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def _graph_of(self, query: str | None, language: str | None):
        """The scope to draw and its title: this dataflow's, or a scratch one's that holds only ``query``."""
        if query is None:
            return self.top, self.name or "dataflow"
        scratch = Dataflow(name="explain")
        for coll in self.tables.values():
            t = coll.schema
            scratch.new_collection(coll.node.name, schema=dict(zip(t.names, t.types)), event_time=t.event_time)
        scratch._frontend().views = dict(self._frontend().views)
        if (language or ("sql" if _SQL_START.match(query) else "datalog")) == "datalog":
            scratch.datalog(query)
        else:
            scratch.sql(query)
        return scratch.top, query.strip().splitlines()[0][:80]
