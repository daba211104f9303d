"""Window functions against DuckDB at every complete time, against Spark where the two differ; refusals at ``flow.sql``.

Random inserts and deletes at several data times per advance, NULLs in the
partition, order and value columns, and ties.  Functions whose result
depends on the order of tied rows (ROW_NUMBER, LAG, LEAD, NTILE, ROWS frames,
a frame's first or last row) order by every column, so ties are identical
rows and any order of them gives the same bag.  DuckDB's own syntax is given
where sqlglot does not write it (IGNORE NULLS inside the call).  The Spark
batch compares the semantics where DuckDB and Spark may differ: NULL order
defaults, NTILE, RANGE frames over NULL keys, result types, decimals, and
grouping sets (:mod:`test_grouping_sets`'s forms, one Spark session for both).
"""
from __future__ import annotations

import decimal
import random
from collections import Counter

import duckdb
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import replay, sql_bag
from test_views import _change

import ddflow
from ddflow.errors import SchemaError

TABLE = {"p": "string", "o": "bigint", "v": "bigint", "d": "double"}
DUCK_TYPES = {"string": "VARCHAR", "bigint": "BIGINT", "double": "DOUBLE"}
FULL = "ORDER BY o, v, d"  # every column but the partition's: ties are identical rows
DUCK_FULL = "ORDER BY o NULLS FIRST, v NULLS FIRST, d NULLS FIRST"  # FULL as Spark orders it

#: (Spark SQL, DuckDB SQL or None for sqlglot's transpilation)
QUERIES = [
    ("SELECT p, o, RANK() OVER (PARTITION BY p ORDER BY o) r, DENSE_RANK() OVER (PARTITION BY p ORDER BY o) dr, "
     "PERCENT_RANK() OVER (PARTITION BY p ORDER BY o) pr, CUME_DIST() OVER (PARTITION BY p ORDER BY o DESC) cd, "
     "RANK() OVER (ORDER BY v DESC) rv FROM t", None),
    (f"SELECT p, o, v, d, ROW_NUMBER() OVER w rn, LAG(v) OVER w l1, LEAD(v, 2, -9) OVER w l2, NTILE(3) OVER w nt, "
     f"LAG(d, 1, 0) OVER (PARTITION BY p ORDER BY o DESC, v, d) l3 FROM t WINDOW w AS (PARTITION BY p {FULL})", None),
    ("SELECT p, o, v, SUM(v) OVER (PARTITION BY p ORDER BY o) s, COUNT(v) OVER (PARTITION BY p ORDER BY o DESC) c, "
     "AVG(d) OVER (PARTITION BY p ORDER BY o) a, MIN(v) OVER (PARTITION BY p ORDER BY o DESC NULLS FIRST) mn, "
     "MAX(d) OVER (PARTITION BY p) mx, COUNT(*) OVER () n, SUM(d) OVER (ORDER BY o NULLS LAST) sd FROM t", None),
    (f"SELECT p, o, v, d, "
     f"SUM(v) OVER (PARTITION BY p {FULL} ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) s, "
     f"MIN(v) OVER (PARTITION BY p {FULL} ROWS BETWEEN 2 PRECEDING AND 1 PRECEDING) mn, "
     f"MAX(v) OVER (PARTITION BY p {FULL} ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) mx, "
     f"AVG(v) OVER (PARTITION BY p {FULL} ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING) a, "
     f"FIRST_VALUE(v) OVER (PARTITION BY p {FULL} ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) f, "
     f"LAST_VALUE(v) OVER (PARTITION BY p {FULL} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 FOLLOWING) lv, "
     f"NTH_VALUE(v, 2) OVER (PARTITION BY p {FULL} ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) nv, "
     f"COUNT(*) OVER (PARTITION BY p {FULL} ROWS 2 PRECEDING) c FROM t", None),
    ("SELECT p, o, v, SUM(v) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING) s, "
     "COUNT(*) OVER (PARTITION BY p ORDER BY o DESC RANGE BETWEEN 2 PRECEDING AND CURRENT ROW) c, "
     "MAX(v) OVER (ORDER BY o RANGE BETWEEN CURRENT ROW AND 2 FOLLOWING) m, "
     "COUNT(v) OVER (ORDER BY o RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) cp, "
     "MIN(o) OVER (PARTITION BY p ORDER BY d RANGE BETWEEN 0.5 PRECEDING AND UNBOUNDED FOLLOWING) md FROM t "
     "WHERE o IS NOT NULL AND d IS NOT NULL", None),
    (f"SELECT p, o, v, d, FIRST_VALUE(v) IGNORE NULLS OVER (PARTITION BY p {FULL}) f, "
     f"LAST_VALUE(v) IGNORE NULLS OVER (PARTITION BY p {FULL} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) l, "
     f"NTH_VALUE(v, 2) IGNORE NULLS OVER (PARTITION BY p {FULL} ROWS BETWEEN 1 PRECEDING AND 2 FOLLOWING) n, "
     f"FIRST_VALUE(v) OVER (PARTITION BY p {FULL}) fr, LAG(v) IGNORE NULLS OVER (PARTITION BY p {FULL}) lg, "
     f"LEAD(v, 2, -1) IGNORE NULLS OVER (PARTITION BY p {FULL}) ld FROM t",
     f"SELECT p, o, v, d, FIRST_VALUE(v IGNORE NULLS) OVER (PARTITION BY p {DUCK_FULL}) f, "
     f"LAST_VALUE(v IGNORE NULLS) OVER (PARTITION BY p {DUCK_FULL} ROWS BETWEEN UNBOUNDED PRECEDING AND "
     f"1 PRECEDING) l, NTH_VALUE(v, 2 IGNORE NULLS) OVER (PARTITION BY p {DUCK_FULL} ROWS BETWEEN 1 PRECEDING "
     f"AND 2 FOLLOWING) n, FIRST_VALUE(v) OVER (PARTITION BY p {DUCK_FULL}) fr, "
     f"LAG(v IGNORE NULLS) OVER (PARTITION BY p {DUCK_FULL}) lg, "
     f"LEAD(v, 2, -1 IGNORE NULLS) OVER (PARTITION BY p {DUCK_FULL}) ld FROM t"),
    ("SELECT p, SUM(v) s, SUM(SUM(v)) OVER () tot, RANK() OVER (ORDER BY SUM(v) DESC) r, "
     "AVG(COUNT(*)) OVER (ORDER BY p) a, MAX(MIN(o)) OVER (ORDER BY COUNT(*) ROWS BETWEEN 1 PRECEDING AND "
     "CURRENT ROW) m FROM t GROUP BY p", None),
    ("SELECT p, o, v FROM (SELECT p, o, v, SUM(v) OVER (PARTITION BY p) s, "
     "ROW_NUMBER() OVER (PARTITION BY p ORDER BY o, v, d) rn FROM t) x WHERE v * 2 > s OR rn = 1", None),
    ("SELECT p, o, r FROM (SELECT p, o, DENSE_RANK() OVER (PARTITION BY p ORDER BY o DESC) r FROM t) x WHERE r <= 2",
     None),
    (f"SELECT p, v - LAG(v) OVER (PARTITION BY p {FULL}) dv, o + SUM(o) OVER (PARTITION BY p) so FROM t", None),
    # RANGE frames bounded both ways over a bigint key (keyed by bands of the key), the current row outside some
    ("SELECT p, o, v, SUM(v) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN 1 FOLLOWING AND 3 FOLLOWING) s, "
     "COUNT(v) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN 3 PRECEDING AND 2 PRECEDING) c, "
     "MIN(v) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN CURRENT ROW AND CURRENT ROW) m FROM t", None),
    ("SELECT p, o, v, d, AVG(v) OVER (ORDER BY o DESC RANGE BETWEEN 2 PRECEDING AND 1 PRECEDING) a, "
     f"COUNT(*) OVER (ORDER BY o DESC RANGE BETWEEN 1 FOLLOWING AND 1 FOLLOWING) c FROM t", None),
    # COUNT of a string over an ordered frame counts it (the fuzzer's seed 2: it was added to the count)
    ("SELECT p, o, COUNT(p) OVER (PARTITION BY v ORDER BY o) c, COUNT(lower(p)) OVER (ORDER BY o DESC) c2 FROM t",
     "SELECT p, o, COUNT(p) OVER (PARTITION BY v ORDER BY o NULLS FIRST) c, "
     "COUNT(lower(p)) OVER (ORDER BY o DESC NULLS LAST) c2 FROM t"),
]

rows = st.tuples(st.sampled_from(["a", "b", None]), st.one_of(st.none(), st.integers(0, 4)),
                 st.one_of(st.none(), st.integers(-2, 3)), st.sampled_from([None, 0.5, -1.0, 2.25, 3.0]))


@st.composite
def streams(draw):
    """Per advance, several data times; inserts, and removals of rows present at that time."""
    steps, acc, t = [], Counter(), 0
    for _ in range(draw(st.integers(1, 3))):
        batch: list = []
        for _ in range(draw(st.integers(1, 3))):
            for _ in range(draw(st.integers(0, 6))):
                _change(draw, acc, rows, "t", t, batch)
            t += 1
        steps.append((batch, t))
    return steps


def _duck_con(table: dict[str, str]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t ({', '.join(f'{c} {DUCK_TYPES[t]}' for c, t in table.items())})")
    return con


def check_against_duckdb(queries, steps, table=TABLE, workers: int = 1) -> None:
    """Each query's view at every complete time of ``steps`` equals DuckDB's answer over the rows then."""
    flow = ddflow.Dataflow(workers=workers) if workers > 1 else ddflow.Dataflow()
    handle = flow.new_collection("t", schema=table)[0]
    caps = [flow.sql(q).capture() for q, _ in queries]
    con = _duck_con(table)
    duck = [d or sqlglot.transpile(q, read="spark", write="duckdb")[0] for q, d in queries]
    marks = ", ".join("?" * len(table))
    for t, tables in replay(flow, {"t": handle}, steps):
        con.execute("DELETE FROM t")
        live = [r for r, m in tables["t"].items() for _ in range(m)]
        if live:
            con.executemany(f"INSERT INTO t VALUES ({marks})", live)
        for (q, _), d, cap in zip(queries, duck, caps):
            got = cap.contents(t)
            assert all(m > 0 for m in got.values()), q
            want = sql_bag(con.execute(d).fetchall())
            assert sql_bag(r for r, m in got.items() for _ in range(m)) == want, f"time {t}: {q}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=streams())
def test_window_functions_equal_duckdb_at_every_complete_time(steps):
    check_against_duckdb(QUERIES, steps)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=streams())
def test_window_functions_on_two_workers_equal_duckdb(steps):
    check_against_duckdb(QUERIES[1:5], steps, workers=2)


def test_a_change_recomputes_only_its_partition():
    """A row added to one partition changes that partition's rows only (the others' results are not retracted)."""
    flow = ddflow.Dataflow()
    handle = flow.new_collection("t", schema=TABLE)[0]
    cap = flow.sql("SELECT p, o, SUM(o) OVER (PARTITION BY p ORDER BY o) s FROM t").capture()
    handle.update([("a", 1, 0, 0.5), ("a", 2, 0, 0.5), ("b", 5, 0, 0.5)], times=[0] * 3, diffs=[1] * 3)
    flow.advance_to(1)
    flow.run()
    handle.update([("a", 0, 0, 0.5)], times=[1], diffs=[1])
    flow.advance_to(2)
    flow.run()
    changed = {r for r, t, d in cap.drain() if t == 1}
    assert changed and all(r[0] == "a" for r in changed), changed


def test_a_bounded_range_frame_recomputes_only_the_bands_a_change_falls_in(monkeypatch):
    """RANGE 1 PRECEDING .. 1 FOLLOWING over a bigint key: one row added to a partition of 40 makes the reduce
    re-read the rows of its band and the bands beside it, a handful, never the partition."""
    from ddflow.plan import window

    seen = []
    plain = window.window_logic

    def counted(*args, **kw):
        fn = plain(*args, **kw)

        def wrapped(key, vals):
            seen.append(sum(m for _, m in vals if m > 0))
            return fn(key, vals)

        return wrapped

    monkeypatch.setattr(window, "window_logic", counted)
    flow = ddflow.Dataflow()
    handle = flow.new_collection("t", schema=TABLE)[0]
    cap = flow.sql("SELECT o, SUM(v) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING) s "
                   "FROM t").capture()
    rows = [("a", o, 1, 0.5) for o in range(40)]
    handle.update(rows, times=[0] * 40, diffs=[1] * 40)
    flow.advance_to(1)
    flow.run()
    seen.clear()
    handle.update([("a", 20, 5, 0.5)], times=[1], diffs=[1])
    flow.advance_to(2)
    flow.run()
    assert seen and max(seen) <= 8, seen
    assert {r for r, t, d in cap.drain() if t == 1} == {(19, 3), (19, 8), (20, 3), (20, 8), (21, 3), (21, 8)}


@pytest.mark.parametrize("query, message", [
    ("SELECT SUM(v) OVER (ORDER BY p RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t",
     "a RANGE frame with an offset over a string column"),
    ("SELECT SUM(v) OVER (ORDER BY o, v RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t",
     "a RANGE frame with an offset needs exactly one ORDER BY key"),
    ("SELECT ROW_NUMBER() OVER (PARTITION BY p) FROM t", "ROW_NUMBER without ORDER BY"),
    ("SELECT LAG(v) OVER () FROM t", "LAG without ORDER BY"),
    ("SELECT RANK() OVER (ORDER BY o ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t", "a window frame for RANK"),
    ("SELECT COUNT(DISTINCT v) OVER (PARTITION BY p) FROM t", "COUNT(DISTINCT ...) over a window"),
    ("SELECT SUM(v) OVER (ORDER BY o ROWS BETWEEN 1 FOLLOWING AND 1 PRECEDING) FROM t", "starts after it ends"),
    ("SELECT NTILE(0) OVER (ORDER BY o) FROM t", "NTILE's bucket count must be at least 1"),
    ("SELECT NTILE(v) OVER (ORDER BY o) FROM t", "NTILE's bucket count other than a whole number"),
    ("SELECT LAG(v, 0) IGNORE NULLS OVER (ORDER BY o) FROM t", "IGNORE NULLS in LAG with an offset under 1"),
    ("SELECT RANK() IGNORE NULLS OVER (ORDER BY o) FROM t", "IGNORE NULLS in RANK"),
    ("SELECT SUM(v) OVER (ORDER BY o ROWS BETWEEN 1.5 PRECEDING AND CURRENT ROW) FROM t",
     "a ROWS frame offset other than a whole number"),
    ("SELECT SUM(v) OVER (ORDER BY o RANGE BETWEEN 0.5 PRECEDING AND CURRENT ROW) FROM t",
     "a RANGE frame offset with a fraction over a bigint key"),
    ("SELECT SUM(v) OVER w FROM t", "no window named 'w'"),
    ("SELECT SUM(SUM(v) OVER (ORDER BY o)) OVER (ORDER BY o) FROM t", "a window function inside another window"),
    ("SELECT SUM(p) OVER () FROM t", "SUM needs a number"),
    ("SELECT stddev(v) OVER () FROM t", "the window function STDDEV"),
    ("SELECT collect_list(v) OVER () FROM t", "the window function COLLECT_LIST"),
    ("SELECT p FROM t WHERE ROW_NUMBER() OVER (ORDER BY o) = 1", "a window function in WHERE"),
    ("SELECT p FROM t GROUP BY p HAVING RANK() OVER (ORDER BY p) > 1", "a window function in HAVING"),
    ("SELECT p, SUM(LAG(v) OVER (ORDER BY o)) FROM t GROUP BY p", "a window function inside an aggregate"),
    ("SELECT COUNT(v) FILTER (WHERE v > 1) OVER () FROM t", "an aggregate with FILTER over a window"),
    ("SELECT SUM(v) OVER (ORDER BY o RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW) FROM t",
     "EXCLUDE in a window frame"),
])
def test_unsupported_windows_are_refused_at_sql_quoting_it(query, message):
    flow = ddflow.Dataflow()
    flow.new_collection("t", schema=TABLE)
    with pytest.raises(SchemaError) as err:
        flow.sql(query)
    text = str(err.value)
    assert message in text, text
    assert "`" in text and "exp." not in text and "Traceback" not in text


def test_explain_shows_one_window_node_per_partition_and_order():
    flow = ddflow.Dataflow()
    flow.new_collection("t", schema=TABLE)
    plan = flow.explain("SELECT SUM(v) OVER (PARTITION BY p ORDER BY o) a, LAG(v) OVER (PARTITION BY p ORDER BY o) b, "
                        "MAX(v) OVER (PARTITION BY p) c FROM t")
    assert plan.count("Window partition=[p]") == 2, plan
    assert "lag(v)" in plan and "RANGE UNBOUNDED PRECEDING..CURRENT ROW" in plan, plan


# -- against Spark ------------------------------------------------------------------------------------

SPARK_TABLE = {"p": "string", "o": "bigint", "v": "bigint", "d": "double", "m": "decimal(10,2)"}
SPARK_SCHEMA = "p string, o bigint, v bigint, d double, m decimal(10,2)"

SPARK_QUERIES = [
    # NULL order defaults (first ascending, last descending), NTILE's buckets, ranks over NULL keys
    f"SELECT p, o, v, d, NTILE(4) OVER (PARTITION BY p {FULL}) nt, NTILE(2) OVER ({FULL} DESC) nt2, "
    "RANK() OVER (ORDER BY o DESC) r, PERCENT_RANK() OVER (PARTITION BY p ORDER BY v) pr, "
    "CUME_DIST() OVER (ORDER BY v DESC) cd, ROW_NUMBER() OVER (ORDER BY o, v, d, p) rn, "
    "LAG(v, 2) IGNORE NULLS OVER (ORDER BY o, v, d, p) lg, LEAD(v, 1, 0) IGNORE NULLS OVER (ORDER BY o, v, d, p) ld, "
    "FIRST(v) OVER (PARTITION BY p ORDER BY o, v, d) f, LAST(v, true) OVER (PARTITION BY p ORDER BY o, v, d) l "
    "FROM t",
    # RANGE frames with offsets over NULL keys, ascending and descending, and the default frame's peers
    "SELECT p, o, v, SUM(v) OVER (PARTITION BY p ORDER BY o RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING) s, "
    "COUNT(*) OVER (ORDER BY o DESC RANGE BETWEEN 2 PRECEDING AND CURRENT ROW) c, "
    "COUNT(*) OVER (ORDER BY o NULLS LAST RANGE BETWEEN CURRENT ROW AND 1 FOLLOWING) c2, "
    "COUNT(*) OVER (ORDER BY d RANGE BETWEEN 1 PRECEDING AND UNBOUNDED FOLLOWING) c3, "
    "SUM(v) OVER (ORDER BY o) run, LAST_VALUE(v) OVER (PARTITION BY p ORDER BY o, v, d) lv FROM t",
    # result types: decimals (SUM widens, AVG adds four places), AVG double, COUNT and SUM bigint
    "SELECT p, o, m, SUM(m) OVER (PARTITION BY p) sm, AVG(m) OVER (PARTITION BY p ORDER BY o) am, "
    "AVG(v) OVER (PARTITION BY p) av, MIN(m) OVER (ORDER BY o, v, d, m, p ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) mm, "
    "COUNT(m) OVER () cm, SUM(m) OVER (ORDER BY m RANGE BETWEEN 0.5 PRECEDING AND CURRENT ROW) rm, "
    "LAG(m, 1, 0) OVER (ORDER BY o, v, d, m, p) lm FROM t",
    # aggregates of aggregates, after GROUP BY
    "SELECT p, SUM(v) s, SUM(SUM(v)) OVER () tot, RANK() OVER (ORDER BY SUM(v)) r FROM t GROUP BY p",
    # grouping sets: grouping() and grouping_id()'s bit order, repeated sets, a mixed GROUP BY, HAVING
    "SELECT p, o, SUM(v) s, COUNT(*) n, grouping(p) gp, grouping(o) go, grouping_id() g FROM t "
    "GROUP BY GROUPING SETS ((p, o), (p), (o), ())",
    "SELECT p, o, SUM(v) s, grouping_id() g FROM t GROUP BY CUBE(p, o) HAVING COUNT(*) > 1",
    "SELECT p, o, v, COUNT(*) n, grouping_id() g, grouping_id(p, o, v) g2 FROM t GROUP BY p, ROLLUP(o, v)",
    "SELECT p, o, MAX(d) mx FROM t GROUP BY p, o WITH ROLLUP",
    "SELECT p, COUNT(*) n FROM t GROUP BY GROUPING SETS ((p), (p), ())",
    "SELECT p, o, SUM(v) s, SUM(SUM(v)) OVER (PARTITION BY grouping_id()) share FROM t GROUP BY ROLLUP(p, o)",
]


def _spark_rows(seed: int, count: int) -> list[tuple]:
    rng = random.Random(seed)
    ms = [None, decimal.Decimal("1.25"), decimal.Decimal("-0.50"), decimal.Decimal("2.00"), decimal.Decimal("0.75")]
    return [(rng.choice(["a", "b", None]), rng.choice([None, 0, 1, 2, 4]), rng.choice([None, -2, 1, 3]),
             rng.choice([None, 0.5, -1.0, 2.25]), rng.choice(ms)) for _ in range(count)]


def _norm(v):
    if isinstance(v, decimal.Decimal):
        return v.normalize()
    if isinstance(v, float):
        return round(v, 9)
    return v


@pytest.fixture(scope="module")
def spark():
    from ddflow.streaming.spark import local_session

    session = local_session("ddflow-window-tests", "local[1]")
    yield session
    session.stop()


@pytest.mark.spark
def test_windows_and_grouping_sets_equal_spark(spark):
    data = _spark_rows(7, 40)
    spark.createDataFrame(data, SPARK_SCHEMA).createOrReplaceTempView("t")
    flow = ddflow.Dataflow()
    handle = flow.new_collection("t", schema=SPARK_TABLE)[0]
    views = [flow.sql(q) for q in SPARK_QUERIES]
    caps = [v.capture() for v in views]
    handle.update(data, times=[0] * len(data), diffs=[1] * len(data))
    flow.advance_to(1)
    flow.run()
    wrong = []
    for q, view, cap in zip(SPARK_QUERIES, views, caps):
        df = spark.sql(q)
        want = Counter(tuple(_norm(x) for x in r) for r in df.collect())
        got = Counter(tuple(_norm(x) for x in r) for r, m in cap.contents(0).items() for _ in range(m))
        spark_types = [f.dataType.simpleString() for f in df.schema.fields]
        ours = [{"int": "bigint", "tinyint": "bigint"}.get(t, t) for t in spark_types]
        if got != want or list(view.schema.types) != ours:
            wrong.append((q, sorted(got - want, key=repr), sorted(want - got, key=repr), view.schema.types, ours))
    empty = ["SELECT p, COUNT(*) n FROM e GROUP BY GROUPING SETS ((p), ())", "SELECT COUNT(*) n FROM e GROUP BY ROLLUP(p)",
             "SELECT COUNT(*) n FROM e"]
    spark.createDataFrame([], SPARK_SCHEMA).createOrReplaceTempView("e")
    flow = ddflow.Dataflow()
    flow.new_collection("e", schema=SPARK_TABLE)
    caps = [flow.sql(q).capture() for q in empty]
    flow.advance_to(1)
    flow.run()
    for q, cap in zip(empty, caps):  # Spark: no row for () over no rows, one for a global aggregate
        want = Counter(tuple(r) for r in spark.sql(q).collect())
        if Counter(cap.contents(0)) != want:
            wrong.append((q, cap.contents(0), want))
    assert not wrong, "\n".join(map(repr, wrong))
