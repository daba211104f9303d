"""SQL view bugs the random differential tester (tests/sql/fuzz.py) found, each minimised to a named example.

A test marked ``xfail(strict=True)`` is a bug still open: the suite stays
green until it is fixed, then the strict mark fails and whoever fixed it
removes the mark.  Each expected answer is DuckDB's (checked in the test
where the data allows) and Spark 4's.
"""
from __future__ import annotations

import duckdb
import pytest
import sqlglot

import ddflow


def _view(schemas: dict[str, dict[str, str]], rows: dict[str, list[tuple]], query: str) -> dict[tuple, int]:
    """The view's rows at time 0 over ``rows`` inserted at time 0."""
    flow = ddflow.Dataflow()
    handles = {name: flow.new_collection(name, schema=schema)[0] for name, schema in schemas.items()}
    cap = flow.sql(query).capture()
    for name, rs in rows.items():
        if rs:
            handles[name].update(rs, times=[0] * len(rs), diffs=[1] * len(rs))
    flow.advance_to(1)
    flow.run()
    return cap.contents(0)


_DUCK = {"bigint": "BIGINT", "string": "VARCHAR", "double": "DOUBLE", "boolean": "BOOLEAN", "date": "DATE"}


def _duck(schemas: dict[str, dict[str, str]], rows: dict[str, list[tuple]], query: str) -> dict[tuple, int]:
    """DuckDB's answer as a bag, the query transpiled from Spark."""
    con = duckdb.connect()
    for name, schema in schemas.items():
        con.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {_DUCK.get(t, t)}' for c, t in schema.items())})")
        if rows.get(name):
            con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(schema))})", rows[name])
    out: dict[tuple, int] = {}
    for r in con.execute(sqlglot.transpile(query, read="spark", write="duckdb")[0]).fetchall():
        out[tuple(r)] = out.get(tuple(r), 0) + 1
    return out


T = {"t": {"k": "bigint", "s": "bigint"}}


@pytest.mark.xfail(strict=True, reason="bug: EXISTS ignores a correlated non-equality (Q21's l2.s <> l1.s)")
@pytest.mark.parametrize("negated", [False, True])
def test_exists_with_a_correlated_non_equality_applies_it(negated):
    """``[NOT] EXISTS (... WHERE x3.k = x1.k AND x3.s <> x1.s)`` over one row: the row has no other
    row of its key with another ``s``, so EXISTS is false and NOT EXISTS true.  ddflow answered the
    opposite (found by fuzz seed 4): the correlated ``<>`` residual did not filter the matches."""
    rows = {"t": [(1, 2)]}
    q = (f"SELECT x1.s FROM t x1 WHERE {'NOT ' if negated else ''}EXISTS "
         "(SELECT 1 FROM t x3 WHERE x3.k = x1.k AND x3.s <> x1.s)")
    expected = {(2,): 1} if negated else {}
    assert _duck(T, rows, q) == expected
    assert _view(T, rows, q) == expected


@pytest.mark.xfail(strict=True, reason="bug: EXISTS correlated only by a non-equality ignores it")
def test_exists_correlated_only_by_a_non_equality_applies_it():
    """With no correlated equality at all, ``EXISTS (SELECT 1 FROM t x2 WHERE x2.s <> x1.s)`` over a
    single row is false; ddflow kept the row, as if every outer row saw every inner row unfiltered
    (found by fuzz seeds 3, 4, 7)."""
    rows = {"t": [(1, 2)]}
    q = "SELECT x1.s FROM t x1 WHERE EXISTS (SELECT 1 FROM t x2 WHERE x2.s <> x1.s)"
    assert _duck(T, rows, q) == {}
    assert _view(T, rows, q) == {}
