"""DuckDB as the TPC-H oracle: the same accumulated tables, each query transpiled from Spark SQL, bags compared.

sqlglot's Spark-to-DuckDB transpilation keeps every query's meaning (checked
by hand, query by query): ``date 'x' - interval '90' day`` becomes
``CAST('x' AS DATE) - INTERVAL '90' DAY`` (a DuckDB timestamp at midnight,
so comparing a date with it is comparing with the day), ``extract(year
from d)`` stays, ``substring`` is 1-based in both, comma joins become CROSS
JOINs filtered by WHERE, and ``a / b`` becomes ``a / NULLIF(b, 0)`` (legacy
Spark's NULL on a zero divisor; in Q8, Q14 and Q17 the divisor is a sum
over rows that exist, or a constant, so NULLIF never fires).  No query
needed a hand fix.

Values differ in type where the dialects do: DuckDB's AVG and decimal
division give doubles where Spark (and ddflow) give decimals rounded
HALF_UP to Spark's result scale.  So numbers compare exactly when both are
exact (Decimal, int) and otherwise within half a unit of the decimal's last
place plus 1e-9 relative.
"""
from __future__ import annotations

import decimal
import math
from collections import Counter
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import sqlglot
from sqlglot import exp

import ddflow
from bench.tpch.gen import MONEY, Refresh, retype, schemas


@dataclass
class Shape:
    """What a query's answer is: its DuckDB text, its LIMIT (a top-k view in ddflow) and ORDER BY columns."""

    setup: list[str]  # statements run once (Q15's CREATE VIEW)
    select: str  # the DuckDB query, with its LIMIT
    full: str  # the same without LIMIT, ordered: the whole answer a top k is taken from
    limit: int | None
    order_cols: list[int]  # output columns the ORDER BY sorts on


def shape(spark_sql: str) -> Shape:
    """Transpile a Spark SQL script (statements split on ``;``) for DuckDB."""
    stmts = [s for s in sqlglot.parse(spark_sql, read="spark") if s is not None]
    *setup, last = stmts
    limit = None
    order_cols: list[int] = []
    if last.args.get("limit") is not None:
        limit = int(last.args["limit"].expression.name)
    names = [p.alias_or_name for p in last.expressions]
    if last.args.get("order") is not None:
        for o in last.args["order"].expressions:
            e = o.this
            name = e.alias_or_name if isinstance(e, (exp.Column, exp.Alias)) else None
            if name in names:
                order_cols.append(names.index(name))
    full = last.copy()
    full.set("limit", None)
    return Shape([s.sql(dialect="duckdb") for s in setup], last.sql(dialect="duckdb"), full.sql(dialect="duckdb"),
                 limit, order_cols)


class Duck:
    """DuckDB holding the accumulated tables."""

    def __init__(self, tables: dict[str, pa.Table], queries: dict[int, str]):
        self.con = duckdb.connect()
        self.con.execute("SET threads TO 1")
        for name, t in tables.items():
            self.con.register("_src", t)
            self.con.execute(f"CREATE TABLE {name} AS SELECT * FROM _src")
            self.con.unregister("_src")
        self.shapes = {n: shape(q) for n, q in queries.items()}
        for s in self.shapes.values():
            for stmt in s.setup:
                self.con.execute(stmt)

    def apply(self, r: Refresh) -> None:
        """RF1 inserts its orders and lines; RF2 deletes them (order keys are unique)."""
        for name, t in r.tables().items():
            self.con.register("_src", t)
            if r.diff > 0:
                self.con.execute(f"INSERT INTO {name} SELECT * FROM _src")
            else:
                key = "o_orderkey" if name == "orders" else "l_orderkey"
                self.con.execute(f"DELETE FROM {name} WHERE {key} IN (SELECT {key} FROM _src)")
            self.con.unregister("_src")

    def answer(self, n: int) -> list[tuple]:
        """The query as written (with its LIMIT), rows in order."""
        return [tuple(r) for r in self.con.execute(self.shapes[n].select).fetchall()]

    def full(self, n: int) -> list[tuple]:
        """The whole ordered answer (without LIMIT)."""
        return [tuple(r) for r in self.con.execute(self.shapes[n].full).fetchall()]


class Views:
    """ddflow maintaining TPC-H queries as views over the eight tables, each refresh at its own data time.

    A query ddflow refuses (or fails to build) is recorded in ``errors``
    and the others go on: ``caps`` holds the captured views that built.
    """

    def __init__(self, queries: dict[int, str], workers: int = 1, money: str = MONEY):
        self.flow = ddflow.Dataflow(workers=workers)
        self.money = money
        self.inputs = {name: self.flow.new_collection(name, schema=cols)[0] for name, cols in schemas(money).items()}
        self.caps: dict[int, object] = {}
        self.errors: dict[int, str] = {}
        for n, q in queries.items():
            try:
                self.caps[n] = self.flow.sql(q).capture()
            except Exception as e:  # a refusal (SchemaError) or any other failure to build: reported per query
                self.errors[n] = f"{type(e).__name__}: {e}"

    def load(self, tables: dict[str, pa.Table], time: int = 0) -> None:
        for name, t in tables.items():
            self.inputs[name].update(retype(t, self.money), times=time)

    def apply(self, r: Refresh, time: int) -> None:
        for name, t in r.tables().items():
            self.inputs[name].update(retype(t, self.money), times=time, diffs=r.diff)

    def advance(self, frontier: int) -> None:
        """Everything before ``frontier`` is final: run to it."""
        self.flow.advance_to(frontier)
        self.flow.run()

    def close(self) -> None:
        self.flow.close()


# -- comparing answers ----------------------------------------------------------------------


def _approx(v) -> bool:
    return isinstance(v, float)


def close(a, b) -> bool:
    """Equal, or for a double on either side within half the decimal's last place plus 1e-9 relative."""
    if a is None or b is None:
        return a is None and b is None
    if not (_approx(a) or _approx(b)):
        return a == b
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    tol = 1e-9 * max(abs(x), abs(y))
    for v in (a, b):
        if isinstance(v, decimal.Decimal):
            tol += 0.5 * 10.0 ** v.as_tuple().exponent
    return abs(x - y) <= tol


def _sort_key(row: tuple, cols: list[int]) -> tuple:
    return tuple((v is not None, float(v) if v is not None else 0.0) for v in (row[j] for j in cols))


def match(got: list[tuple], want: list[tuple]) -> tuple[list[tuple], list[tuple]]:
    """Pair up rows equal by :func:`close`; the rows of each side left unpaired."""
    rows = got + want
    if not rows:
        return [], []
    width = len(rows[0])
    fuzzy = [j for j in range(width) if any(_approx(r[j]) for r in rows)]
    exact = [j for j in range(width) if j not in fuzzy]
    groups: dict[tuple, tuple[list, list]] = {}
    for side, rs in ((0, got), (1, want)):
        for r in rs:
            groups.setdefault(tuple(r[j] for j in exact), ([], []))[side].append(r)
    left: list[tuple] = []
    right: list[tuple] = []
    for g, w in groups.values():
        g.sort(key=lambda r: _sort_key(r, fuzzy))
        w.sort(key=lambda r: _sort_key(r, fuzzy))
        i = j = 0
        while i < len(g) and j < len(w):
            if all(close(g[i][c], w[j][c]) for c in fuzzy):
                i, j = i + 1, j + 1
            elif _sort_key(g[i], fuzzy) < _sort_key(w[j], fuzzy):
                left.append(g[i])
                i += 1
            else:
                right.append(w[j])
                j += 1
        left.extend(g[i:])
        right.extend(w[j:])
    return left, right


def _show(rows: list[tuple], n: int = 3) -> str:
    more = f" (+{len(rows) - n} more)" if len(rows) > n else ""
    return ", ".join(repr(r) for r in rows[:n]) + more


def compare(got: Counter | dict, duck: Duck, n: int) -> str | None:
    """None if ddflow's rows ``got`` (row -> multiplicity) are query ``n``'s answer in ``duck``; else why not."""
    bad = [r for r, m in got.items() if m <= 0]
    if bad:
        return f"rows with multiplicity <= 0: {_show(bad)}"
    rows = [r for r, m in got.items() for _ in range(m)]
    s = duck.shapes[n]
    if s.limit is None:
        extra, missing = match(rows, duck.answer(n))
        if extra or missing:
            return f"ddflow has {len(extra)} rows DuckDB has not: {_show(extra)}; " \
                   f"DuckDB has {len(missing)} rows ddflow has not: {_show(missing)}"
        return None
    return check_top_k(rows, duck.full(n), s.limit, s.order_cols)


def check_top_k(rows: list[tuple], full: list[tuple], k: int, order_cols: list[int]) -> str | None:
    """``rows`` is a top ``k`` of the ordered answer ``full``: any of the rows tied with the k-th may be in it."""
    want = min(k, len(full))
    if len(rows) != want:
        return f"a top {k} of {len(full)} rows has {want} rows, ddflow has {len(rows)}: {_show(rows)}"
    if want == 0:
        return None
    if want == len(full):  # the limit keeps every row: the whole answer, whatever the order (and its keys)
        extra, missing = match(rows, full)
        if extra or missing:
            return f"a top {k} of all {len(full)} rows: ddflow has {len(extra)} rows DuckDB has not: " \
                   f"{_show(extra)}; DuckDB has {len(missing)} rows ddflow has not: {_show(missing)}"
        return None

    def key(r):
        return tuple(r[j] for j in order_cols)

    edge = key(full[want - 1])
    first_tie = next(i for i in range(want) if key(full[i]) == edge)
    ties = [r for r in full[first_tie:] if key(r) == edge]
    rest, missing = match(rows, full[:first_tie])
    if missing:
        return f"rows of the top {k} missing in ddflow: {_show(missing)}; ddflow instead has {_show(rest)}"
    extra, _ = match(rest, ties)
    if extra:
        return f"ddflow's rows past the top {k} (ties at the boundary are {_show(ties)}): {_show(extra)}"
    return None
