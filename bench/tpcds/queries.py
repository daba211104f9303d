"""The 99 TPC-DS queries in Spark SQL: DuckDB's TPC-DS extension's texts, written in Spark's dialect by sqlglot.

The texts come from the extension's ``tpcds_queries()`` (dsqgen's output
with the spec's qualification parameters, 99 queries: of the two-part
queries 14, 23, 24 and 39 it has the first part only), cached by
:func:`bench.tpcds.data.duckdb_queries`; none is kept in this repository.
sqlglot rewrites each for Spark (``"order count"`` becomes a backquoted
name, ``INTERVAL 60 DAY`` Spark's interval); ORDER BY keeps Spark's
default NULL order (first ascending, last descending) as Spark's own
copies of the queries do, where sqlglot would spell out DuckDB's.  The oracle
(:mod:`bench.tpcds.oracle`) transpiles that Spark text back to DuckDB, so
both engines answer the same text.  :func:`round_trip_differs` checks on
data that the round trip keeps each query's answer.

>>> spark(1).startswith("WITH customer_total_return AS")  # doctest: +SKIP
True
"""
from __future__ import annotations

import functools
import re

import sqlglot
from sqlglot import exp

from bench.tpcds import data


def name(n: int) -> str:
    """A query's name, as the benchmark reports it.

    >>> name(7)
    'q7'
    """
    return f"q{n}"


def number(q: str | int) -> int:
    """The number of ``q7``, ``Q7`` or ``7``.

    >>> number("Q14"), number(3)
    (14, 3)
    """
    if isinstance(q, int):
        return q
    m = re.fullmatch(r"[qQ]?(\d+)", q.strip())
    if not m:
        raise ValueError(f"not a TPC-DS query name: {q!r}")
    return int(m.group(1))


@functools.lru_cache(maxsize=1)
def duckdb_texts() -> dict[int, str]:
    """Query number -> DuckDB's text (trailing ``;`` removed)."""
    return {n: q.strip().rstrip(";").strip() for n, q in data.duckdb_queries().items()}


@functools.lru_cache(maxsize=None)
def spark(n: int) -> str:
    """Query ``n`` in Spark SQL."""
    tree = sqlglot.parse_one(duckdb_texts()[n], read="duckdb")
    for o in tree.find_all(exp.Ordered):  # Spark's default NULL order, as Spark's own copies of the queries run
        o.set("nulls_first", not o.args.get("desc"))
    return tree.sql(dialect="spark", pretty=True)


def all_queries() -> dict[int, str]:
    """Query number -> Spark SQL text, for the 99 queries."""
    return {n: spark(n) for n in sorted(duckdb_texts())}
