"""DuckDB as the Nexmark oracle: a query evaluated from scratch on the accumulated events, Spark's windows translated.

sqlglot transpiles Spark SQL to DuckDB's (``date_format`` to ``strftime``,
``CAST`` to ``TRY_CAST``, ``FILTER`` and ``split_part`` as they are);
what it cannot know is Spark's ``window`` and ``session_window`` in GROUP
BY, rewritten here on epoch microseconds (``epoch_us``), exactly as
Spark defines them:

* ``window(ts, size[, slide[, start]])``: each row joins the windows
  ``[s, s + size)`` that hold it, ``s = ts - ((ts - start) % slide + slide)
  % slide - i * slide`` for ``i`` in ``0 .. ceil(size / slide) - 1``
  (Spark's ``TimeWindowing``: over-generate, then keep ``s <= ts < s + size``).
* ``session_window(ts, gap)``: per value of the other GROUP BY
  expressions, rows sorted by ``ts``; a row more than ``gap`` after the
  previous one starts a new session (gaps and islands with ``LAG``; a row
  exactly ``gap`` after extends it, as Spark's ``MergingSessionsIterator``
  merges ``start <= end``); the session is ``[first ts, last ts + gap)``.

The SELECT holding the window must read one table or subquery (no join):
its FROM becomes a subquery adding ``__window_start``/``__window_end``
(or ``__session_window_*``) with the WHERE moved inside (rows are
filtered before they are windowed), ``window.start`` and the GROUP BY
read those columns.

Answers are bags of tuples sorted, timestamps as int microseconds, so
ddflow's rows (``normalize``) compare with them (:func:`compare`: exact,
doubles within 1e-9 relative).

>>> t = {"bid": pa.table({"bidder": [1, 1, 1], "date_time": pa.array([0, 4, 15], pa.timestamp("us"))})}
>>> q = "SELECT bidder, count(*) AS n, window.start FROM bid GROUP BY bidder, window(date_time, '10 microseconds')"
>>> evaluate(q, t)
[(1, 1, 10), (1, 2, 0)]
>>> evaluate(q.replace("window", "session_window"), t)
[(1, 1, 15), (1, 2, 0)]
"""
from __future__ import annotations

import datetime
import math
import re
from collections import Counter
from typing import Any, Iterable

import duckdb
import pyarrow as pa
import sqlglot
from sqlglot import exp

from bench.nexmark.generator import SCHEMAS
from bench.tpch.oracle import match
from ddflow.errors import SchemaError
from ddflow.sql.eventtime import duration
from ddflow.sql.dialect import transpilable  # Spark's SQL, ``GROUP BY window(...)`` read as a call

_EPOCH = datetime.datetime(1970, 1, 1)


def duration_us(node: exp.Expression) -> int:
    """A window argument in microseconds: ``'10 seconds'``, ``'1 minute 30 seconds'`` or ``INTERVAL 10 SECONDS``.

    Parsing a duration is not what the oracle checks (window and session
    semantics are), so it reads them as ddflow's planner does.

    >>> duration_us(exp.Literal.string("1 minute 30 seconds")), duration_us(sqlglot.parse_one("INTERVAL 2 SECONDS"))
    (90000000, 2000000)
    """
    try:
        return duration(node, "a window duration")
    except SchemaError as e:
        raise ValueError(str(e)) from None


def _window_call(select: exp.Select) -> exp.Anonymous | None:
    group = select.args.get("group")
    calls = [e for e in (group.expressions if group else [])
             for e in ([e.this] if isinstance(e, exp.Paren) else [e])
             if isinstance(e, exp.Anonymous) and e.name.lower() in ("window", "session_window")]
    if len(calls) > 1:
        raise ValueError("more than one window in one GROUP BY (Spark refuses it too)")
    return calls[0] if calls else None


def _windowed_source(select: exp.Select, call: exp.Anonymous) -> tuple[str, str, list[exp.Expression]]:
    """The DuckDB subquery replacing ``select``'s FROM, its alias, and the GROUP BY that replaces the window."""
    source = select.args["from_"].this if "from_" in select.args else select.args["from"].this
    if select.args.get("joins"):
        raise ValueError("a window over a join: the oracle windows one table or subquery")
    alias = source.alias_or_name
    src = source.sql("duckdb")
    where = select.args.get("where")
    cond = f"({where.this.sql('duckdb')})" if where else "TRUE"
    select.set("where", None)
    ts = f"epoch_us({call.expressions[0].sql('duckdb')})"
    kind = call.name.lower()
    others = [e for e in select.args["group"].expressions
              if e is not call and not (isinstance(e, exp.Paren) and e.this is call)]
    if kind == "window":
        size = duration_us(call.expressions[1])
        slide = duration_us(call.expressions[2]) if len(call.expressions) > 2 else size
        offset = duration_us(call.expressions[3]) if len(call.expressions) > 3 else 0
        if size <= 0 or slide <= 0:
            raise ValueError("window size and slide must be positive")
        ws = f"({ts} - ((({ts} - {offset}) % {slide}) + {slide}) % {slide} - __r.__i * {slide})"
        sub = (f"(SELECT {alias}.*, make_timestamp({ws}) AS __window_start, "
               f"make_timestamp({ws} + {size}) AS __window_end "
               f"FROM {src} CROSS JOIN range({math.ceil(size / slide)}) AS __r(__i) "
               f"WHERE {cond} AND {ws} <= {ts} AND {ts} < {ws} + {size}) AS {alias}")
    else:
        gap = duration_us(call.expressions[1])
        keys = ", ".join(e.sql("duckdb") for e in others)
        part = f"PARTITION BY {keys} " if keys else ""
        both = f"PARTITION BY {keys + ', ' if keys else ''}__sid"
        sub = (f"(SELECT *, make_timestamp(min(__t) OVER ({both})) AS __session_window_start, "
               f"make_timestamp(max(__t) OVER ({both}) + {gap}) AS __session_window_end FROM "
               f"(SELECT *, sum(__new) OVER ({part}ORDER BY __t) AS __sid FROM "
               f"(SELECT {alias}.*, {ts} AS __t, CASE WHEN {ts} - lag({ts}) OVER ({part}ORDER BY {ts}) <= {gap} "
               f"THEN 0 ELSE 1 END AS __new FROM {src} WHERE {cond}) AS {alias}) AS {alias}) AS {alias}")
    bounds = [exp.column(f"__{kind}_start", alias), exp.column(f"__{kind}_end", alias)]
    return sub, alias, others + bounds


def to_duckdb(spark_sql: str) -> str:
    """A Spark SQL query as DuckDB SQL, its ``window``/``session_window`` groupings rewritten.  O(query size).

    >>> print(to_duckdb("SELECT auction, price FROM bid WHERE price > 10"))
    SELECT auction, price FROM bid WHERE price > 10
    """
    tree = transpilable(spark_sql)[0]
    subs: dict[str, str] = {}
    for sel in sorted(tree.find_all(exp.Select), key=lambda s: -s.depth):  # innermost first
        call = _window_call(sel)
        if call is None:
            continue
        kind = call.name.lower()
        sub, alias, group = _windowed_source(sel, call)
        for col in list(sel.find_all(exp.Column)):
            if col.table.lower() == kind and col.name.lower() in ("start", "end"):
                col.replace(exp.column(f"__{kind}_{col.name.lower()}", alias))
        name = f"__windowed_source_{len(subs)}"
        subs[name] = sub
        sel.set("from_" if "from_" in sel.args else "from", exp.From(this=exp.Table(this=exp.to_identifier(name))))
        sel.set("group", exp.Group(expressions=group))
    text = tree.sql("duckdb")
    for name in reversed(subs):  # outer sources hold the placeholders of inner ones: replace them first
        text = re.sub(rf"\bFROM {name}\b", lambda _: f"FROM {subs[name]}", text)
    if "__windowed_source_" in text:
        raise ValueError(f"a windowed source was not placed: {text}")
    return text


def normalize(value: Any) -> Any:
    """A value as the oracle compares it: timestamps as int microseconds since the epoch (naive is UTC)."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return (value - _EPOCH) // datetime.timedelta(microseconds=1)
    return value


def _key(row: tuple) -> tuple:
    return tuple((v is None, type(v).__name__, v if v is not None else 0) for v in row)


def bag(rows: Iterable[tuple]) -> list[tuple]:
    """Rows normalized and sorted (a bag: repeats kept)."""
    return sorted((tuple(normalize(v) for v in r) for r in rows), key=_key)


class Duck:
    """DuckDB holding the events loaded so far (``append``), answering Spark SQL queries from scratch."""

    def __init__(self, threads: int = 1):
        self.con = duckdb.connect()
        self.con.execute(f"SET threads TO {threads}")
        self.con.execute("SET TimeZone = 'UTC'")
        for name, cols in SCHEMAS.items():
            decl = ", ".join(f"{c} {'VARCHAR' if t == 'string' else t.upper()}" for c, t in cols.items())
            self.con.execute(f"CREATE TABLE __{name} ({decl})")
        self.cutoff(None)
        self._sql: dict[str, str] = {}

    def append(self, tables: dict[str, pa.Table]) -> None:
        """Add a batch of events (Arrow tables by name).  O(rows)."""
        for name, t in tables.items():
            if t.num_rows:
                self.con.register("__src", t)
                self.con.execute(f"INSERT INTO __{name} SELECT * FROM __src")
                self.con.unregister("__src")

    def cutoff(self, before_us: int | None) -> None:
        """Queries see only the events with ``date_time`` before ``before_us`` (None: all of them)."""
        cond = "TRUE" if before_us is None else f"date_time < make_timestamp({int(before_us)})"
        for name in SCHEMAS:
            self.con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM __{name} WHERE {cond}")

    def query(self, spark_sql: str) -> list[tuple]:
        """The query's answer on the visible events, as a sorted bag.  A full evaluation (the from-scratch baseline)."""
        if spark_sql not in self._sql:
            self._sql[spark_sql] = to_duckdb(spark_sql)
        return bag(self.con.execute(self._sql[spark_sql]).fetchall())


def evaluate(spark_sql: str, tables: dict[str, pa.Table], before_us: int | None = None) -> list[tuple]:
    """``spark_sql`` on ``tables`` (a subset of person/auction/bid, other columns may be missing) from scratch.

    Cost: DuckDB's for the query, plus loading the tables.
    """
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name, t in tables.items():
        con.register(f"__{name}", t)
        cond = "TRUE" if before_us is None else f"date_time < make_timestamp({int(before_us)})"
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM __{name} WHERE {cond}")
    return bag(con.execute(to_duckdb(spark_sql)).fetchall())


def compare(got: Counter | dict | Iterable[tuple], want: list[tuple]) -> str | None:
    """None if ddflow's rows ``got`` (row -> multiplicity, or rows) are the bag ``want``; else why not.

    >>> compare(Counter({(1, 2.0): 1}), [(1, 2.0 + 1e-12)]) is None
    True
    >>> compare([(1,)], [(2,)])
    'ddflow has 1 rows DuckDB has not: (1,); DuckDB has 1 rows ddflow has not: (2,)'
    """
    if isinstance(got, (Counter, dict)):
        bad = [r for r, m in got.items() if m <= 0]
        if bad:
            return f"rows with multiplicity <= 0: {bad[:3]}"
        got = [r for r, m in got.items() for _ in range(m)]
    extra, missing = match(bag(got), list(want))
    if extra or missing:
        def show(rows):
            return ", ".join(repr(r) for r in rows[:3]) + (f" (+{len(rows) - 3} more)" if len(rows) > 3 else "")
        return (f"ddflow has {len(extra)} rows DuckDB has not: {show(extra)}; "
                f"DuckDB has {len(missing)} rows ddflow has not: {show(missing)}")
    return None
