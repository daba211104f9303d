"""The SQL front end reads the tree, never the text: units as written, literals that look like syntax, the language.

- ``trunc`` and ``date_trunc`` keep the unit the user wrote: ``'Q'`` is not
  one of Spark's units, so Spark gives NULL for it (sqlglot alone would
  read it as QUARTER).  Checked against Spark itself over random dates and
  timestamps, NULLs and dates before 1970 included.
- A string literal holding ``group by window(`` is a literal.
- ``explain`` of SQL holding ``:-`` is SQL's plan; the caller may say the
  language.
"""
from __future__ import annotations

import datetime
import random
from collections import Counter

import pytest

import ddflow
from ddflow.errors import SchemaError

UNITS = ("Q", "quarter", "YEAR", "yyyy", "yy", "MM", "mon", "month", "week", "W", "day", "DD", "D", "hour",
         "MINUTE", "second", "millisecond", "MICROSECOND", "xx", "")


def _rows(seed: int, count: int) -> list[tuple]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        d = datetime.date(1965, 1, 1) + datetime.timedelta(days=rng.randrange(0, 30000))
        ts = datetime.datetime(1965, 1, 1) + datetime.timedelta(microseconds=rng.randrange(0, 30000 * 86400 * 10**6))
        out.append((None if rng.random() < 0.15 else d, None if rng.random() < 0.15 else ts))
    return out + [(datetime.date(2024, 2, 29), datetime.datetime(2024, 2, 29, 23, 59, 59, 999999))]


def _query() -> str:
    trunc = [f"trunc(d, '{u}') AS t{i}" for i, u in enumerate(UNITS)]
    date_trunc = [f"date_trunc('{u}', ts) AS dt{i}" for i, u in enumerate(UNITS)]
    return f"SELECT {', '.join(trunc + date_trunc)}, trunc(d, NULL) AS tn, date_trunc('quarter', d) AS dq FROM t"


@pytest.fixture(scope="module")
def spark():
    from ddflow.streaming.spark import local_session

    session = local_session("ddflow-front-end-tests", "local[1]")
    yield session
    session.stop()


def test_trunc_units_as_spark_reads_them(spark):
    rows = _rows(7, 300)
    spark.createDataFrame(rows, "d date, ts timestamp").createOrReplaceTempView("t")
    want = Counter(tuple(r) for r in spark.sql(_query()).collect())
    flow = ddflow.Dataflow()
    t_in, _ = flow.new_collection("t", schema={"d": "date", "ts": "timestamp"})
    out = flow.sql(_query()).capture()
    t_in.update(rows, times=0)
    flow.advance_to(1)
    flow.run()
    assert Counter(out.contents(0)) == want


def test_a_unit_that_is_not_a_constant_is_refused_at_sql():
    flow = ddflow.Dataflow()
    flow.new_collection("t", schema={"d": "date", "u": "string"})
    with pytest.raises(SchemaError, match=r"trunc\(date, unit\).*`TRUNC\(t\.d, t\.u\)`"):
        flow.sql("SELECT trunc(d, u) AS x FROM t")


def test_literals_that_look_like_syntax_are_literals():
    flow = ddflow.Dataflow()
    t_in, _ = flow.new_collection("t", schema={"s": "string", "k": "bigint"})
    q = ("SELECT s, 'group by window(' AS g, COUNT(*) AS n FROM t /* group by window( */ "
         "WHERE s <> 'GROUP BY window(x' GROUP BY s")
    out = flow.sql(q).capture()
    t_in.update([("group by window(", 1), ("a", 2), ("a", 3), ("GROUP BY window(x", 4)], times=0)
    flow.advance_to(1)
    flow.run()
    assert out.contents(0) == {("group by window(", "group by window(", 1): 1, ("a", "group by window(", 2): 1}


def test_explain_reads_sql_with_datalog_punctuation_as_sql():
    flow = ddflow.Dataflow()
    flow.new_collection("t", schema={"s": "string"})
    q = "SELECT s, ':-)' AS face FROM t -- .decl"
    assert flow.explain(q) == flow.explain(q, language="sql")
    assert flow.explain(q).startswith("Project [s, ':-)' AS face]")
    assert flow.explain("/* hi */ (SELECT s FROM t)").startswith("Project [s]")


def test_explain_of_datalog_by_default_and_when_told():
    flow = ddflow.Dataflow()
    flow.new_collection("edge", schema={"x": "bigint", "y": "bigint"})
    prog = """// reachability
    .decl edge(x: number, y: number)
    .input edge
    .decl reach(x: number, y: number)
    .output reach
    reach(x, y) :- edge(x, y).
    reach(x, z) :- reach(x, y), edge(y, z)."""
    assert flow.explain(prog) == flow.explain(prog, language="datalog")
    assert "reach" in flow.explain(prog)
    with pytest.raises(ValueError, match="language is 'sql' or 'datalog'"):
        flow.explain(prog, language="prolog")


@pytest.mark.parametrize("expr, named", [
    ("a.b.c", "field access"), ("a[0]", "subscript"), ("array(1, 2)", "ARRAY"), ("named_struct('x', 1)", "STRUCT"),
    ("transform(a, x -> x + 1)", "transform()"), ("current_date()", "current_date()"),
    ("typeof(a)", "typeof()"), ("xxhash64(a)", "xxhash64()")])
def test_a_refusal_names_the_construct_in_the_users_words(expr, named):
    """Never sqlglot's class names (TimeToStr, Dot, Bracket): the construct as a Spark user writes it, quoted."""
    import sqlglot.expressions as sx

    flow = ddflow.Dataflow()
    flow.new_collection("t", schema={"a": "bigint", "d": "date"})
    with pytest.raises(SchemaError) as err:
        flow.sql(f"SELECT {expr} AS x FROM t")
    msg = str(err.value)
    assert named in msg and "(in `" in msg, msg
    classes = {n for n in dir(sx) if isinstance(getattr(sx, n), type) and n[0].isupper() and not n.isupper()}
    assert not any(f" {c} " in f" {msg} " for c in classes), msg
