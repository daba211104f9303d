"""GROUPING SETS, ROLLUP and CUBE against DuckDB at every complete time; the plan's shape; refusals at ``flow.sql``.

Random inserts and deletes at several data times per advance, NULLs in the
grouping columns (a NULL of the data and the NULL of a rolled-up column are
told apart by ``grouping``).  Spark gives no row for an empty set ``()`` over
no rows (its grouping sets group by the set's id, never globally), DuckDB
one: the DuckDB forms keep only groups of at least one row.  Spark's own answers (``grouping_id()``'s bit
order, repeated sets, WITH ROLLUP, result types) are checked in
:func:`test_windows.test_windows_and_grouping_sets_equal_spark`.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from test_windows import TABLE, check_against_duckdb, streams

import ddflow
from ddflow.errors import SchemaError

QUERIES = [
    ("SELECT p, o, SUM(v) s, COUNT(*) n, grouping(p) gp, grouping(o) go, grouping_id() g FROM t "
     "GROUP BY GROUPING SETS ((p, o), (p), ())",
     "SELECT p, o, SUM(v) s, COUNT(*) n, grouping(p) gp, grouping(o) go, grouping_id(p, o) g FROM t "
     "GROUP BY GROUPING SETS ((p, o), (p), ()) HAVING COUNT(*) > 0"),
    ("SELECT p, o, AVG(d) a, MIN(v) mn, grouping_id() g FROM t GROUP BY ROLLUP(p, o) HAVING COUNT(*) > 1",
     "SELECT p, o, AVG(d) a, MIN(v) mn, grouping_id(p, o) g FROM t GROUP BY ROLLUP(p, o) HAVING COUNT(*) > 1"),
    ("SELECT p, o, MAX(d) mx, COUNT(v) c, grouping_id() g FROM t GROUP BY CUBE(p, o)",
     "SELECT p, o, MAX(d) mx, COUNT(v) c, grouping_id(p, o) g FROM t GROUP BY CUBE(p, o) HAVING COUNT(*) > 0"),
    ("SELECT p, o, v, COUNT(*) n FROM t GROUP BY p, ROLLUP(o, v)", None),
    ("SELECT o + 1 AS o1, SUM(v) s FROM t GROUP BY GROUPING SETS ((o + 1), ()) HAVING SUM(v) > 0 OR grouping(o + 1) = 1",
     "SELECT o + 1 AS o1, SUM(v) s FROM t GROUP BY GROUPING SETS ((o + 1), ()) "
     "HAVING (SUM(v) > 0 OR grouping(o + 1) = 1) AND COUNT(*) > 0"),
    ("SELECT p, o, SUM(v) s, grouping_id() g FROM t GROUP BY ROLLUP(p, o) "
     "ORDER BY g, p, o LIMIT 4",
     "SELECT p, o, SUM(v) s, grouping_id(p, o) g FROM t GROUP BY ROLLUP(p, o) HAVING COUNT(*) > 0 "
     "ORDER BY g NULLS FIRST, p NULLS FIRST, o NULLS FIRST LIMIT 4"),
    # TPC-DS Q36/Q70/Q86's ORDER BY: grouping() and a SELECT alias inside the keys' expressions
    ("SELECT p, o, SUM(v) s, grouping(p) + grouping(o) lh FROM t GROUP BY ROLLUP(p, o) "
     "ORDER BY lh DESC, CASE WHEN lh = 0 THEN p END, CASE WHEN grouping(o) = 0 THEN o END, s LIMIT 4",
     "SELECT p, o, SUM(v) s, grouping(p) + grouping(o) lh FROM t GROUP BY ROLLUP(p, o) HAVING COUNT(*) > 0 "
     "ORDER BY lh DESC, CASE WHEN grouping(p) + grouping(o) = 0 THEN p END NULLS FIRST, "
     "CASE WHEN grouping(o) = 0 THEN o END NULLS FIRST, s NULLS FIRST LIMIT 4"),
    ("SELECT p, SUM(v) s, SUM(SUM(v)) OVER (PARTITION BY grouping(p)) tot FROM t GROUP BY ROLLUP(p)",
     "SELECT p, SUM(v) s, SUM(SUM(v)) OVER (PARTITION BY grouping(p)) tot FROM t GROUP BY ROLLUP(p) HAVING COUNT(*) > 0"),
]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=streams())
def test_grouping_sets_equal_duckdb_at_every_complete_time(steps):
    check_against_duckdb(QUERIES, steps)


def test_grouping_sets_share_one_aggregate_over_one_union():
    flow = ddflow.Dataflow()
    flow.new_collection("t", schema=TABLE)
    plan = flow.explain("SELECT p, o, SUM(v) FROM t GROUP BY CUBE(p, o)")
    assert plan.count("Aggregate") == 1 and plan.count("Union all") == 1, plan
    from ddflow.base.schema import Schema
    from ddflow.plan.ir import Union
    from ddflow.sql.planner import plan_sql

    rel = plan_sql("SELECT p, o, SUM(v) FROM t GROUP BY CUBE(p, o)", {"t": Schema.of(TABLE)})
    while not isinstance(rel, Union):
        rel = rel.input
    assert len(rel.parts) == 4 and len({id(part.input) for part in rel.parts}) == 1  # one input, re-keyed per set


@pytest.mark.parametrize("query, message", [
    ("SELECT p, grouping(v) FROM t GROUP BY ROLLUP(p)", "grouping() takes one of the grouping columns"),
    ("SELECT p, o, grouping_id(o, p) FROM t GROUP BY CUBE(p, o)", "grouping_id() of columns other than"),
    ("SELECT p, v FROM t GROUP BY ROLLUP(p)", "must appear in GROUP BY"),
])
def test_unsupported_grouping_forms_are_refused_at_sql(query, message):
    flow = ddflow.Dataflow()
    flow.new_collection("t", schema=TABLE)
    with pytest.raises(SchemaError) as err:
        flow.sql(query)
    assert message in str(err.value), str(err.value)


def test_grouping_without_grouping_sets_is_refused_naming_it():
    flow = ddflow.Dataflow()
    flow.new_collection("t", schema=TABLE)
    with pytest.raises(SchemaError, match=r"grouping\(\) without GROUPING SETS, ROLLUP or CUBE .*`GROUPING\(t.p\)`"):
        flow.sql("SELECT p, grouping(p) FROM t GROUP BY p")
