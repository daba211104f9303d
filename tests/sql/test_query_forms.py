"""Query forms beyond the plain SELECT ... FROM tables, against DuckDB at every complete time; refusals at ``flow.sql``.

Constant relations (SELECT without FROM, VALUES, Spark's ``range``) alone
and beside tables, ORDER BY ... LIMIT / OFFSET on qualified columns,
unselected expressions and aggregates, LEFT SEMI / ANTI, NATURAL and
USING joins, EXISTS and IN (subquery) under OR, correlated IN, QUALIFY,
LIMIT ALL, INTERSECT ALL and
EXCEPT ALL, NULL columns of a UNION and duplicate names, on random
streams with NULLs, several data times per advance, inserts and removals.
Where Spark and DuckDB differ (``range``'s column, VALUES' default
names), the DuckDB text is written out.  Every LIMIT orders by keys that
decide the output rows, so the answer is one bag.
"""
from __future__ import annotations

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

TABLES = {"t": {"a": "bigint", "b": "string", "c": "bigint"}, "u": {"a": "bigint", "d": "string"}}
DUCK = {"bigint": "BIGINT", "string": "VARCHAR"}

#: (Spark SQL, DuckDB SQL or None: the Spark text transpiled)
QUERIES: list[tuple[str, str | None]] = [
    # constants, alone and beside tables
    ("SELECT 1 AS a, 'x' AS b", None),
    ("SELECT 1 + 2 AS s, NULL AS n, CAST(NULL AS STRING) AS m", None),
    ("SELECT * FROM VALUES (1, 'a'), (2, 'b'), (2, NULL) AS v(x, y)", None),
    ("SELECT col1 + 1 AS k, col2 FROM VALUES (1, 'a'), (2.5, NULL)",
     "SELECT col0 + 1 AS k, col1 FROM (VALUES (1, 'a'), (2.5, NULL))"),
    ("SELECT id FROM range(4)", "SELECT range AS id FROM range(4)"),
    ("SELECT id * 2 AS x FROM range(7, 1, -2) WHERE id > 2", "SELECT range * 2 AS x FROM range(7, 1, -2) WHERE range > 2"),
    ("SELECT t.a, r.id FROM t JOIN range(3) r ON t.a = r.id", "SELECT t.a, r.range FROM t JOIN range(3) r ON t.a = r.range"),
    ("SELECT t.b, v.y FROM t LEFT JOIN VALUES (1, 'one'), (2, 'two') AS v(x, y) ON t.a = v.x", None),
    ("SELECT a FROM t UNION ALL SELECT id FROM range(2)", "SELECT a FROM t UNION ALL SELECT range FROM range(2)"),
    ("SELECT a FROM t WHERE a IN (SELECT x FROM VALUES (1), (3), (NULL) AS v(x))", None),
    ("SELECT a FROM t WHERE a NOT IN (SELECT x FROM VALUES (1), (NULL) AS v(x))", None),
    ("WITH k AS (SELECT 2 AS x) SELECT t.a, t.b FROM t, k WHERE t.a = k.x", None),
    ("SELECT a FROM t WHERE a > 2 OR a IN (VALUES (1), (NULL))",
     "SELECT a FROM t WHERE a > 2 OR a IN (SELECT * FROM (VALUES (1), (NULL)))"),
    ("SELECT a FROM t UNION ALL VALUES (5)", "SELECT a FROM t UNION ALL SELECT * FROM (VALUES (5))"),
    ("SELECT a, (SELECT 10) AS ten FROM t", None),
    ("SELECT 1 AS one WHERE EXISTS (SELECT * FROM t WHERE a > 2)", None),
    ("SELECT 1 AS x UNION SELECT a FROM t", None),
    ("SELECT COUNT(*) AS n, SUM(x) AS s FROM VALUES (1), (2), (NULL) AS v(x)", None),
    # ORDER BY ... LIMIT / OFFSET
    ("SELECT t.a, t.b FROM t ORDER BY t.a DESC, t.b LIMIT 3", None),
    ("SELECT a AS x, b FROM t ORDER BY x NULLS LAST, b LIMIT 2", None),
    ("SELECT a FROM t ORDER BY a + c, a LIMIT 3", None),
    ("SELECT b FROM t ORDER BY length(b) DESC NULLS LAST, b LIMIT 2", None),
    ("SELECT a, COUNT(*) AS n FROM t GROUP BY a ORDER BY SUM(c) DESC NULLS LAST, a LIMIT 2", None),
    ("SELECT a, b FROM t ORDER BY a NULLS FIRST, b NULLS FIRST LIMIT 2 OFFSET 1", None),
    ("SELECT a FROM t ORDER BY a NULLS FIRST OFFSET 2", None),
    ("SELECT a FROM t UNION SELECT a FROM u ORDER BY a NULLS FIRST LIMIT 2 OFFSET 1", None),
    ("SELECT id FROM range(10) ORDER BY id DESC LIMIT 3", "SELECT range AS id FROM range(10) ORDER BY range DESC LIMIT 3"),
    ("SELECT a, b FROM t ORDER BY 2 DESC NULLS LAST, 1 NULLS LAST LIMIT 2", None),
    ("SELECT a, COUNT(*) AS n FROM t GROUP BY a ORDER BY n DESC, a NULLS FIRST LIMIT 2", None),
    ("SELECT a FROM t UNION ALL SELECT a FROM u ORDER BY a + 1 NULLS FIRST, a LIMIT 3", None),
    ("SELECT a, b, c FROM t ORDER BY a LIMIT 0", None),
    # joins
    ("SELECT * FROM t LEFT SEMI JOIN u ON t.a = u.a", "SELECT * FROM t SEMI JOIN u ON t.a = u.a"),
    ("SELECT t.b FROM t LEFT ANTI JOIN u ON t.a = u.a AND u.d <> t.b",
     "SELECT t.b FROM t ANTI JOIN u ON t.a = u.a AND u.d <> t.b"),
    ("SELECT * FROM t LEFT SEMI JOIN u USING (a)", "SELECT * FROM t SEMI JOIN u USING (a)"),
    ("SELECT t.c, u2.d FROM t LEFT ANTI JOIN u ON t.a = u.a JOIN u u2 ON u2.a = t.c",
     "SELECT t.c, u2.d FROM t ANTI JOIN u ON t.a = u.a JOIN u u2 ON u2.a = t.c"),
    ("SELECT * FROM t NATURAL JOIN u", None),
    ("SELECT t.a, v.zz FROM t NATURAL JOIN (SELECT 1 AS zz) v", "SELECT t.a, v.zz FROM t CROSS JOIN (SELECT 1 AS zz) v"),
    ("SELECT * FROM t FULL OUTER JOIN u USING (a)", None),
    ("SELECT a, b, d FROM t LEFT JOIN u USING (a) WHERE a > 0 OR a IS NULL", None),
    # a qualified star beside USING keeps the key (Spark 3.2+: SPARK-34527)
    ("SELECT t.*, u.* FROM t FULL JOIN u USING (a)", "SELECT t.*, u.* FROM t FULL JOIN u ON t.a = u.a"),
    ("SELECT * FROM t JOIN u USING (a) JOIN u u2 USING (a)",
     "SELECT t.a, t.b, t.c, u.d, u2.d FROM t JOIN u ON t.a = u.a JOIN u u2 ON t.a = u2.a"),
    ("SELECT a, b FROM t WHERE a > 2 OR EXISTS (SELECT * FROM u WHERE u.a = t.a)", None),
    ("SELECT a, b FROM t WHERE b = 'x' OR NOT EXISTS (SELECT * FROM u WHERE u.a = t.a AND u.d = t.b)", None),
    ("SELECT a, b FROM t WHERE b = 'x' OR a IN (SELECT a FROM u)", None),
    ("SELECT a, b FROM t WHERE b = 'x' OR a NOT IN (SELECT a FROM u WHERE d <> 'q')", None),
    ("SELECT a, (a IN (SELECT a FROM u)) IS NULL AS unknown FROM t", None),
    ("SELECT a FROM t GROUP BY a HAVING a > 1 OR a IN (SELECT a FROM u)", None),
    ("SELECT a, COUNT(*) AS n FROM t GROUP BY a HAVING COUNT(*) > 1 OR EXISTS (SELECT 1 FROM u WHERE d = 'x')", None),
    ("SELECT a, SUM(c) AS s FROM t GROUP BY a HAVING SUM(c) NOT IN (SELECT a FROM u)", None),
    ("SELECT a, b FROM t WHERE a IN (SELECT u.a FROM u WHERE u.d = t.b)", None),
    ("SELECT a, c FROM t WHERE c >= 0 AND a + 1 IN (SELECT u.a + 1 FROM u WHERE u.d <> t.b OR u.d IS NULL)", None),
    ("SELECT t.b FROM t WHERE t.c IN (SELECT u2.a FROM u u2 WHERE u2.a = t.a AND u2.d > 'a')", None),
    # QUALIFY, LIMIT ALL
    ("SELECT a, b, c FROM t QUALIFY row_number() OVER (PARTITION BY a ORDER BY c DESC NULLS LAST, b NULLS LAST) = 1",
     None),
    ("SELECT DISTINCT a AS x FROM t QUALIFY rank() OVER (PARTITION BY a ORDER BY c) = 1", None),
    ("SELECT * FROM t QUALIFY COUNT(*) OVER (PARTITION BY a) > 1 ORDER BY a NULLS FIRST, b NULLS FIRST, c NULLS FIRST "
     "LIMIT 3", None),
    ("WITH w AS (SELECT a, c FROM t QUALIFY rank() OVER (PARTITION BY a ORDER BY c DESC NULLS LAST) = 1) "
     "SELECT a, c FROM w QUALIFY dense_rank() OVER (ORDER BY a NULLS FIRST) <= 2", None),
    ("SELECT a FROM t QUALIFY rank() OVER (PARTITION BY a ORDER BY c NULLS FIRST) = 1 "
     "ORDER BY c + 1 DESC NULLS LAST, a NULLS FIRST LIMIT 2", None),
    ("SELECT a, b FROM t LIMIT ALL", "SELECT a, b FROM t"),
    ("SELECT a, c FROM t ORDER BY a NULLS FIRST, c NULLS FIRST LIMIT ALL OFFSET 2",
     "SELECT a, c FROM t ORDER BY a NULLS FIRST, c NULLS FIRST OFFSET 2"),
    # set operations ALL
    ("SELECT a FROM t INTERSECT ALL SELECT a FROM u", None),
    ("SELECT a FROM t EXCEPT ALL SELECT a FROM u", None),
    ("SELECT a, b FROM t EXCEPT ALL SELECT a, d FROM u", None),
    ("SELECT a FROM t INTERSECT SELECT a FROM u", None),
    ("SELECT a FROM t EXCEPT SELECT a FROM u", None),
    # NULL columns and duplicate names in a UNION
    ("SELECT NULL AS x FROM t UNION ALL SELECT b FROM t", None),
    ("SELECT a, b FROM t UNION ALL SELECT a, NULL FROM u", None),
    ("SELECT a, c FROM t UNION ALL SELECT c, c FROM t", None),
    ("SELECT b FROM (SELECT NULL AS b FROM t) UNION ALL SELECT b FROM t", None),
    ("SELECT x, y FROM VALUES (1, NULL), (NULL, 'x'), (1, NULL) AS v(x, y) EXCEPT ALL SELECT a, NULL FROM t", None),
    ("SELECT * FROM (SELECT a, a, b FROM t) s WHERE s.b <> 'x'", "SELECT s.* FROM (SELECT a, a AS a2, b FROM t) s "
                                                                 "WHERE s.b <> 'x'"),
    ("SELECT x.a FROM (SELECT a, a AS a2, b FROM t) x WHERE x.a2 > 1", None),
]

t_rows = st.tuples(st.one_of(st.none(), st.integers(0, 3)), st.sampled_from(["a", "x", "bb", None]),
                   st.one_of(st.none(), st.integers(-1, 3)))
u_rows = st.tuples(st.one_of(st.none(), st.integers(0, 3)), st.sampled_from(["a", "x", "q", None]))
ROWS = {"t": (t_rows, 4), "u": (u_rows, 3)}


@st.composite
def streams(draw):
    """Per advance, several data times; inserts, and removals of rows present at that time."""
    steps, acc, t = [], {name: Counter() for name in TABLES}, 0
    for _ in range(draw(st.integers(1, 3))):
        batch: list = []
        for _ in range(draw(st.integers(1, 3))):
            for name, (rows, most) in ROWS.items():
                for _ in range(draw(st.integers(0, most))):
                    _change(draw, acc[name], rows, name, t, batch)
            t += 1
        steps.append((batch, t))
    return steps


class Duck:
    def __init__(self):
        self.con = duckdb.connect()
        for name, cols in TABLES.items():
            self.con.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {DUCK[t]}' for c, t in cols.items())})")

    def load(self, tables: dict[str, Counter]) -> None:
        for name, rows in tables.items():
            self.con.execute(f"DELETE FROM {name}")
            if rows:
                marks = ", ".join("?" * len(TABLES[name]))
                self.con.executemany(f"INSERT INTO {name} VALUES ({marks})",
                                     [r for r, m in rows.items() for _ in range(m)])

    def answer(self, sql: str) -> Counter:
        return sql_bag(self.con.execute(sql).fetchall())


def _duck_sql(spark: str, duck: str | None) -> str:
    return duck if duck is not None else sqlglot.transpile(spark, read="spark", write="duckdb")[0]


def _tables(flow: ddflow.Dataflow) -> dict:
    return {name: flow.new_collection(name, schema=cols)[0] for name, cols in TABLES.items()}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=streams(), workers=st.sampled_from([1, 2, 3]))
def test_query_forms_equal_duckdb_at_every_complete_time(steps, workers):
    flow = ddflow.Dataflow(workers=workers)
    handles = _tables(flow)
    caps = [flow.sql(q).capture() for q, _ in QUERIES]
    duck = Duck()
    texts = [_duck_sql(q, d) for q, d in QUERIES]
    for t, tables in replay(flow, handles, steps):
        duck.load(tables)
        for (q, _), text, cap in zip(QUERIES, texts, caps):
            contents = cap.contents(t)
            assert all(m > 0 for m in contents.values()), q
            got = sql_bag(r for r, m in contents.items() for _ in range(m))
            assert got == duck.answer(text), f"time {t}: {q}"


def test_constant_queries_hold_from_time_zero_and_never_change():
    flow = ddflow.Dataflow()
    h = _tables(flow)
    one = flow.sql("SELECT 1 AS a, 'x' AS b").capture()
    r = flow.sql("SELECT * FROM range(2, 5)").capture()
    v = flow.sql("VALUES (1, 'a'), (NULL, 'b')").capture()
    w = flow.sql("CREATE TEMPORARY VIEW w (p, q) AS VALUES (1, 2); SELECT q FROM w").capture()
    rec = flow.sql("WITH RECURSIVE r(n, s) AS (SELECT id, 'a' FROM range(2) UNION SELECT n + 2, NULL FROM r "
                   "WHERE n < 3) SELECT * FROM r").capture()
    lim = flow.sql("SELECT id FROM range(10) ORDER BY id DESC LIMIT 2 + 1 OFFSET CAST(1 AS INT)").capture()
    h["t"].update([(1, "a", 1)], times=0)
    flow.advance_to(3)
    flow.run()
    for t in range(3):
        assert one.contents(t) == {(1, "x"): 1}
        assert r.contents(t) == {(2,): 1, (3,): 1, (4,): 1}
        assert v.contents(t) == {(1, "a"): 1, (None, "b"): 1}
        assert w.contents(t) == {(2,): 1}
        assert lim.contents(t) == {(8,): 1, (7,): 1, (6,): 1}
        assert rec.contents(t) == {(0, "a"): 1, (1, "a"): 1, (2, None): 1, (3, None): 1, (4, None): 1}


def test_spark_names_and_types_of_constant_relations():
    flow = ddflow.Dataflow()
    _tables(flow)
    assert flow.sql("SELECT * FROM range(3)").columns == ["id"]
    assert flow.sql("SELECT * FROM range(3)").schema.types == ("bigint",)
    assert flow.sql("SELECT * FROM VALUES (1, 'a')").columns == ["col1", "col2"]
    # each column at its rows' common type (ddflow reads the literal 1 as a bigint, Spark as an int)
    assert flow.sql("SELECT * FROM VALUES (1, 'a'), (2.5, NULL) AS v(x, y)").schema.types == ("decimal(21,1)", "string")
    assert flow.sql("SELECT NULL AS x UNION ALL SELECT b FROM t").schema.types == ("string",)
    assert flow.sql("SELECT * FROM range(2) JOIN range(3)").columns == ["id", "id_2"]  # two `id`s, made unique
    with pytest.raises(SchemaError, match="column `s.a` is ambiguous"):  # as in Spark, when read
        flow.sql("SELECT s.a FROM (SELECT a, c AS a FROM t) s")


@pytest.mark.parametrize("sql, message", [
    ("SELECT * FROM explode(array(1, 2))", "explode needs ARRAY columns, not supported"),
    ("SELECT * FROM range(1, 2, 0)", "range\\(\\) needs a step other than 0"),
    ("SELECT * FROM range(a)", "range\\(\\) takes whole-number constants, not `a`"),
    ("SELECT * FROM VALUES (1, 2), (3) AS v(x, y)", "a VALUES row of 1 values where 2 columns are named"),
    ("SELECT * FROM VALUES (a) AS v(x)", "Column 'a' could not be resolved"),
    ("SELECT DISTINCT a FROM t ORDER BY c LIMIT 1", "ORDER BY an expression not in the SELECT list of a SELECT "
                                                    "DISTINCT is not supported"),
    ("SELECT a FROM t LIMIT 1 OFFSET b", "OFFSET other than a whole number is not supported"),
    ("SELECT a FROM t LIMIT -1", r"LIMIT must be at least 0, not -1 \(in `LIMIT -1`\)"),
    ("SELECT a FROM t LIMIT 'a'", "LIMIT other than a whole number is not supported"),
    ("SELECT a FROM t LATERAL VIEW explode(array(1, 2)) x AS e",
     r"LATERAL VIEW explode needs ARRAY columns, not supported .*\(in `LATERAL VIEW EXPLODE"),
    ("SELECT posexplode(array(1, 2))", "posexplode needs ARRAY columns, not supported"),
    ("SELECT xxhash64(b) FROM t", r"the function xxhash64\(\) is not supported .*XXHASH64\(t.b"),
    ("SELECT b.x FROM t", r"a struct field access \(`.`\) is not supported"),
    ("SELECT b[0] FROM t", r"a subscript \(`\[...\]`\) is not supported"),
    ("SELECT x FROM (SELECT a AS x FROM t) WHERE x > 1 OR EXISTS (SELECT 1 FROM u WHERE u.a > x)",
     r"EXISTS with a correlated condition other than inner = outer, beside OR or NOT is not supported .*"
     r"WHERE u.a > x\)`"),
    ("SELECT a FROM t WHERE a = ANY (SELECT a FROM u)", r"ANY \(subquery\) is not supported"),
    ("SELECT a FROM t GROUP BY a HAVING a > 1 OR EXISTS (SELECT 1 FROM u WHERE u.a = t.a)",
     "a correlated EXISTS in HAVING is not supported"),
    ("SELECT * FROM t JOIN u USING (a) JOIN u u2 ON u2.d = t.b", r"SELECT \* over a JOIN ... USING \(a\) and then a "
                                                                r"join of u2, which has a column a too"),
])
def test_refusals_name_the_construct_and_quote_the_sql(sql, message):
    flow = ddflow.Dataflow()
    _tables(flow)
    with pytest.raises(SchemaError, match=message) as err:
        flow.sql(sql)
    assert "_0." not in str(err.value) and "_col_" not in str(err.value)
