"""DuckDB as the TPC-DS oracle, and ddflow holding the same tables: both changed by the same refreshes.

DuckDB answers each query's Spark text transpiled back to DuckDB
(:func:`bench.tpch.oracle.shape`: Spark's NULLS FIRST ascending order made
explicit, the LIMIT kept apart so a top k is checked as any valid top k,
ties at its boundary included), and answers are compared as bags with
:func:`bench.tpch.oracle.compare` (decimals exactly, DuckDB's doubles within
half the decimal's last place).
"""
from __future__ import annotations

import duckdb
import pyarrow as pa
import sqlglot
from sqlglot import exp

import ddflow
from bench.tpch.oracle import match, shape
from bench.tpcds import data
from bench.tpcds.stream import KEYS, Refresh


def tables_of(sql: str) -> set[str]:
    """The TPC-DS tables a query reads.

    >>> sorted(tables_of("SELECT 1 FROM store_sales, date_dim d WHERE 1 = 1"))
    ['date_dim', 'store_sales']
    """
    return {t.name.lower() for s in sqlglot.parse(sql, read="spark") if s is not None
            for t in s.find_all(exp.Table)} & set(data.TABLES)


class Duck:
    """DuckDB holding the accumulated tables the queries read; ``shapes[n]`` is query ``n``'s DuckDB form."""

    def __init__(self, tables: dict[str, pa.Table], queries: dict[int, str], threads: int = 1):
        self.con = duckdb.connect()
        self.con.execute(f"SET threads TO {threads}")
        self.names = set().union(*(tables_of(q) for q in queries.values())) if queries else set()
        for name, t in tables.items():
            if name not in self.names:
                continue
            self.con.register("_src", t)
            self.con.execute(f"CREATE TABLE {name} AS SELECT * FROM _src")
            self.con.unregister("_src")
        self.shapes = {n: shape(q) for n, q in queries.items()}

    def apply(self, r: Refresh) -> None:
        """Delete the refresh's rows by key, then insert its new rows (in the tables the queries read)."""
        for name, t in r.deletes.items():
            if name not in self.names:
                continue
            a, b = KEYS[name]
            self.con.register("_src", t.select([a, b]))
            self.con.execute(f"DELETE FROM {name} USING _src WHERE {name}.{a} = _src.{a} AND {name}.{b} = _src.{b}")
            self.con.unregister("_src")
        for name, t in r.inserts.items():
            if name not in self.names:
                continue
            self.con.register("_src", t)
            self.con.execute(f"INSERT INTO {name} SELECT * FROM _src")
            self.con.unregister("_src")

    def answer(self, n: int) -> list[tuple]:
        """The query as written (with its LIMIT), rows in order."""
        return [tuple(r) for r in self.con.execute(self.shapes[n].select).fetchall()]

    def full(self, n: int) -> list[tuple]:
        """The whole ordered answer (without LIMIT)."""
        return [tuple(r) for r in self.con.execute(self.shapes[n].full).fetchall()]

    def round_trip_differs(self, n: int, original: str) -> str | None:
        """None if DuckDB's own text and the Spark text transpiled back give the same rows (as bags, no LIMIT)."""
        tree = sqlglot.parse_one(original, read="duckdb")
        tree.set("limit", None)
        want = [tuple(r) for r in self.con.execute(tree.sql(dialect="duckdb")).fetchall()]
        extra, missing = match(self.full(n), want)
        if extra or missing:
            return f"{len(extra)} rows only in the Spark text's answer, {len(missing)} only in DuckDB's text's"
        return None


class Views:
    """ddflow maintaining queries as views over the tables they read, each refresh at its own data time.

    A query ddflow refuses is recorded in ``errors`` (the exception's type and message) and
    the others go on; ``caps`` holds the captured views that built.
    """

    def __init__(self, tables: dict[str, pa.Table], queries: dict[int, str], workers: int = 1):
        self.flow = ddflow.Dataflow(workers=workers)
        used = set().union(*(tables_of(q) for q in queries.values())) if queries else set()
        self.inputs = {name: self.flow.new_collection(name, schema=data.schema(t))[0]
                       for name, t in tables.items() if name in used}
        self.caps: dict[int, object] = {}
        self.errors: dict[int, str] = {}
        for n, q in queries.items():
            try:
                self.caps[n] = self.flow.sql(q).capture()
            except Exception as e:  # a refusal (SchemaError) or any other failure to build: reported per query
                self.errors[n] = f"{type(e).__name__}: {e}"

    def load(self, tables: dict[str, pa.Table], time: int = 0) -> None:
        for name, t in tables.items():
            if name in self.inputs:
                self.inputs[name].update(data.normalize(t), times=time)

    def apply(self, r: Refresh, time: int) -> None:
        for name, t in r.deletes.items():
            if name in self.inputs and t.num_rows:
                self.inputs[name].update(data.normalize(t), times=time, diffs=-1)
        for name, t in r.inserts.items():
            if name in self.inputs and t.num_rows:
                self.inputs[name].update(data.normalize(t), times=time)

    def advance(self, frontier: int) -> None:
        """Everything before ``frontier`` is final: run to it."""
        self.flow.advance_to(frontier)
        self.flow.run()

    def close(self) -> None:
        self.flow.close()
