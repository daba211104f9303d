"""SQL views against DuckDB: at every complete time, a view's accumulated rows equal DuckDB's answer on the accumulated tables."""
from __future__ import annotations

from collections import Counter

import duckdb
import pytest
import sqlglot
from oracle import sql_bag
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.errors import SchemaError

ORDERS = {"o_id": "bigint", "cust": "string", "amount": "bigint"}
CUSTOMERS = {"id": "string", "region": "string"}

#: Each query is run by ddflow (Spark SQL) and by DuckDB (transpiled by sqlglot: Spark's CAST is DuckDB's TRY_CAST).
QUERIES = [
    "SELECT cust, SUM(amount) AS total, COUNT(*) AS n, COUNT(amount) AS c, MIN(amount) AS lo, MAX(amount) AS hi "
    "FROM orders GROUP BY cust",
    "SELECT o.o_id, c.region FROM orders o JOIN customers c ON o.cust = c.id WHERE o.amount > 2",
    "SELECT DISTINCT cust FROM orders",
    "SELECT COUNT(*) AS n, SUM(amount) AS s, AVG(amount) AS a FROM orders",
    "SELECT COUNT(*) AS n FROM customers",
    "SELECT cust, amount * 2 + 1 AS x, CASE WHEN amount IS NULL THEN 'none' WHEN amount > 3 THEN 'big' "
    "ELSE 'small' END AS size FROM orders WHERE NOT (amount < 1) OR amount IS NULL",
    "SELECT c.region, AVG(o.amount) AS a, COUNT(DISTINCT o.cust) AS k FROM orders o JOIN customers c "
    "ON o.cust = c.id GROUP BY c.region HAVING COUNT(*) > 1",
    "SELECT cust FROM orders WHERE amount IN (1, 3) UNION ALL SELECT id FROM customers",
    "SELECT cust FROM orders UNION SELECT id FROM customers",
    "SELECT lower(cust) || '-' || region AS tag, length(region) AS n, coalesce(amount, 0) AS a, "
    "substring(region, 1, 1) AS r1 FROM orders JOIN customers ON cust = id WHERE region LIKE 'n%' OR cust IS NULL",
    "WITH big AS (SELECT cust, amount FROM orders WHERE amount BETWEEN 2 AND 4) "
    "SELECT b.cust, COUNT(*) AS n FROM big b JOIN customers c ON b.cust = c.id AND b.amount <> 3 GROUP BY b.cust",
    "SELECT o.o_id, o.cust, c.region FROM orders o LEFT JOIN customers c ON o.cust = c.id",
    "SELECT o.o_id, c.id, c.region FROM orders o RIGHT JOIN customers c ON o.cust = c.id AND o.amount > 1",
    "SELECT o.amount, c.id FROM orders o FULL OUTER JOIN customers c ON o.cust = c.id",
    "SELECT c.id, COUNT(o.o_id) AS n FROM customers c LEFT JOIN orders o ON c.id = o.cust AND o.amount <> 2 "
    "GROUP BY c.id",
    "SELECT cust FROM orders EXCEPT SELECT id FROM customers",
    "SELECT id FROM customers INTERSECT SELECT cust FROM orders WHERE amount > 0",
    "SELECT o_id, amount FROM orders WHERE cust IN (SELECT id FROM customers WHERE region <> 'nw')",
    "SELECT o_id FROM orders WHERE cust NOT IN (SELECT id FROM customers)",
    "SELECT o_id FROM orders WHERE amount NOT IN (SELECT amount FROM orders WHERE o_id = 1)",
    "SELECT o.o_id FROM orders o WHERE EXISTS (SELECT 1 FROM customers c WHERE c.id = o.cust AND c.region = 'north')",
    "SELECT c.id FROM customers c WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.cust = c.id) AND c.region <> 'x'",
    "SELECT o_id, cust, amount FROM orders ORDER BY amount DESC NULLS LAST, o_id, cust NULLS FIRST LIMIT 3",
    "SELECT cust, o_id, rn FROM (SELECT cust, o_id, ROW_NUMBER() OVER (PARTITION BY cust ORDER BY o_id DESC, "
    "amount NULLS FIRST) AS rn FROM orders) t WHERE rn <= 2",
    "SELECT * FROM (SELECT cust, amount, RANK() OVER (PARTITION BY cust ORDER BY amount NULLS LAST) AS r "
    "FROM orders) t WHERE r < 3",
    "SELECT cust, amount, DENSE_RANK() OVER (PARTITION BY cust ORDER BY amount DESC NULLS FIRST) AS d FROM orders",
    "SELECT amount / 2 AS half, amount % 3 AS m, -amount AS neg, CAST(amount AS double) AS d, "
    "TRY_CAST(cust AS bigint) AS parsed FROM orders",
]

cust = st.sampled_from(["a", "b", "C", None])
order_rows = st.tuples(st.integers(0, 3), cust, st.one_of(st.none(), st.integers(-1, 5)))
customer_rows = st.tuples(st.sampled_from(["a", "b", "C", "d"]), st.sampled_from(["north", "south", "nw"]))


bag = sql_bag  # rows as a bag; floats rounded as DuckDB's and ddflow's may differ in the last bits


class Duck:
    """DuckDB holding the accumulated tables; Spark SQL transpiled once per query."""

    def __init__(self):
        self.con = duckdb.connect()
        self.con.execute("CREATE TABLE orders (o_id BIGINT, cust VARCHAR, amount BIGINT)")
        self.con.execute("CREATE TABLE customers (id VARCHAR, region VARCHAR)")
        self.sql = {q: sqlglot.transpile(q, read="spark", write="duckdb")[0] for q in QUERIES}

    def load(self, orders: Counter, customers: Counter) -> None:
        self.con.execute("DELETE FROM orders")
        self.con.execute("DELETE FROM customers")
        if orders:
            self.con.executemany("INSERT INTO orders VALUES (?, ?, ?)", [r for r, m in orders.items() for _ in range(m)])
        if customers:
            self.con.executemany("INSERT INTO customers VALUES (?, ?)",
                                 [r for r, m in customers.items() for _ in range(m)])

    def answer(self, query: str) -> Counter:
        return bag(self.con.execute(self.sql[query]).fetchall())


def _change(draw, acc: Counter, new_rows, table: str, t: int, batch: list) -> None:
    """One update of ``table``: the removal of a present row, or an insert."""
    if acc and draw(st.booleans()):
        row = draw(st.sampled_from(sorted(acc, key=repr)))
        acc[row] -= 1
        batch.append((table, row, t, -1))
    else:
        row = draw(new_rows)
        acc[row] += 1
        batch.append((table, row, t, 1))
    for r in [r for r, m in acc.items() if m <= 0]:
        del acc[r]


@st.composite
def streams(draw):
    """Per advance, several data times; inserts, and removals of rows present at that time."""
    steps = []
    orders, customers = Counter(), Counter()
    t = 0
    for _ in range(draw(st.integers(1, 3))):
        batch: list = []
        for _ in range(draw(st.integers(1, 3))):  # data times in this advance
            for _ in range(draw(st.integers(0, 4))):
                _change(draw, orders, order_rows, "orders", t, batch)
            for _ in range(draw(st.integers(0, 2))):
                _change(draw, customers, customer_rows, "customers", t, batch)
            t += 1
        steps.append((batch, t))
    return steps


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=streams())
def test_views_equal_duckdb_at_every_complete_time(steps):
    flow = ddflow.Dataflow()
    handles = {"orders": flow.new_collection("orders", schema=ORDERS)[0],
               "customers": flow.new_collection("customers", schema=CUSTOMERS)[0]}
    caps = [flow.sql(q).capture() for q in QUERIES]
    acc = {"orders": Counter(), "customers": Counter()}
    history = []  # accumulated tables after each data time
    for batch, frontier in steps:
        for table, row, t, d in batch:
            handles[table].update([row], t, d)
        flow.advance_to(frontier)
        flow.run()
        by_time: dict[int, list] = {}
        for table, row, t, d in batch:
            by_time.setdefault(t, []).append((table, row, d))
        for t in sorted(by_time):
            for table, row, d in by_time[t]:
                acc[table][row] += d
            history.append((t, Counter(acc["orders"]), Counter(acc["customers"])))
    duck = Duck()
    for t, orders, customers in history:
        duck.load(+orders, +customers)
        for q, cap in zip(QUERIES, caps):
            contents = cap.contents(t)
            assert all(m > 0 for m in contents.values()), q
            assert bag(r for r, m in contents.items() for _ in range(m)) == duck.answer(q), f"time {t}: {q}"


def test_the_contract_example():
    flow = ddflow.Dataflow()
    orders_in, orders = flow.new_collection("orders", schema={"o_id": "bigint", "cust": "string", "amount": "bigint"})
    view = flow.sql("SELECT cust, SUM(amount) AS total FROM orders GROUP BY cust")
    assert view.columns == ["cust", "total"]
    cap = view.capture()
    orders_in.insert((1, "a", 5), time=0)
    flow.advance_to(1)
    flow.run()
    assert cap.contents(0) == {("a", 5): 1}
    table = cap.to_arrow()
    assert table.column_names == ["cust", "total", "time", "diff"]
    assert str(table.schema.field("total").type) == "int64" and table.to_pylist() == [
        {"cust": "a", "total": 5, "time": 0, "diff": 1}]


def test_a_global_aggregate_has_one_row_over_an_empty_table():
    flow = ddflow.Dataflow()
    t_in, _ = flow.new_collection("t", schema={"x": "bigint"})
    cap = flow.sql("SELECT COUNT(*) AS n, SUM(x) AS s FROM t").capture()
    flow.advance_to(1)
    flow.run()
    assert cap.contents(0) == {(0, None): 1}
    t_in.insert((4,), time=1)
    t_in.remove((4,), time=2)
    flow.advance_to(3)
    flow.run()
    assert cap.contents(1) == {(1, 4): 1} and cap.contents(2) == {(0, None): 1}


def test_nulls_group_together_never_join_and_never_equal_zero():
    flow = ddflow.Dataflow()
    a_in, _ = flow.new_collection("a", schema={"k": "bigint", "v": "bigint"})
    b_in, _ = flow.new_collection("b", schema={"k": "bigint"})
    groups = flow.sql("SELECT k, COUNT(*) AS n FROM a GROUP BY k").capture()
    joined = flow.sql("SELECT a.v FROM a JOIN b ON a.k = b.k").capture()
    a_in.update([(None, 1), (None, 2), (0, 3)], times=0)
    b_in.update([(None,), (0,)], times=0)
    flow.advance_to(1)
    flow.run()
    assert groups.contents(0) == {(None, 2): 1, (0, 1): 1}
    assert joined.contents(0) == {(3,): 1}


@pytest.mark.parametrize("query, message", [
    ("SELECT DISTINCT cust FROM orders ORDER BY amount LIMIT 3", "ORDER BY an expression not in the SELECT list of a "
                                                                "SELECT DISTINCT"),
    ("SELECT cust FROM orders LIMIT 3 OFFSET amount", "OFFSET other than a whole number"),
    ("SELECT cust FROM orders LATERAL VIEW explode(array(1)) x AS e", "LATERAL VIEW explode needs ARRAY columns, not "
                                                                      "supported"),
    ("SELECT cust FROM orders o WHERE amount > (SELECT amount FROM orders p WHERE p.cust = o.cust)",
     "a correlated scalar subquery without an aggregate"),
    ("SELECT cust FROM orders o WHERE EXISTS (SELECT 1 FROM customers c WHERE c.id = o.cust OR "
     "c.region IN (SELECT cust FROM orders))", "a correlated condition with a subquery"),
    ("SELECT nope FROM orders", "nope"),
    ("SELECT cust, amount FROM orders GROUP BY cust", "must appear in GROUP BY"),
    ("SELECT SUM(cust) FROM orders", "SUM needs a number"),
    ("SELECT cust FROM orders WHERE amount", "must be boolean"),
    ("WITH RECURSIVE r(n) AS (SELECT o_id FROM orders UNION ALL SELECT n FROM r) SELECT n FROM r",
     "UNION ALL in a recursive definition"),
    ("WITH RECURSIVE r(n) AS (SELECT n + 1 FROM r) SELECT n FROM r", "could not be resolved"),
    ("SELEC cust", "expected a query"),
    ("SELECT cust FROM", "cannot parse"),
])
def test_unsupported_or_wrong_queries_name_the_construct(query, message):
    flow = ddflow.Dataflow()
    flow.new_collection("orders", schema=ORDERS)
    flow.new_collection("customers", schema=CUSTOMERS)
    with pytest.raises(SchemaError, match=message):
        flow.sql(query)


def test_table_rows_are_checked_against_the_schema():
    flow = ddflow.Dataflow()
    t_in, _ = flow.new_collection("t", schema={"x": "bigint", "s": str})
    with pytest.raises(SchemaError, match="column 'x' is bigint, got str"):
        t_in.insert(("1", "a"))
    with pytest.raises(SchemaError, match="a row of 1 values for the 2 columns"):
        t_in.insert((1,))
    import pyarrow as pa
    t_in.update(pa.table({"x": [1, None], "s": ["a", None]}), times=0)
    cap = flow.sql("SELECT s, x FROM t").capture()
    flow.advance_to(1)
    flow.run()
    assert cap.contents(0) == {("a", 1): 1, (None, None): 1}


def _run_views(workers: int) -> list:
    with ddflow.Dataflow(workers=workers) as flow:
        o_in, _ = flow.new_collection("orders", schema=ORDERS)
        c_in, _ = flow.new_collection("customers", schema=CUSTOMERS)
        caps = [flow.sql(q).capture() for q in QUERIES]
        flow.advance_to(1)
        flow.run()
        o_in.update([(0, "a", 5), (1, "b", 0), (2, None, 1), (3, "a", 2), (3, "C", None)], times=1)
        c_in.update([("a", "north"), ("C", "nw")], times=1)
        o_in.update([(1, "b", 0)], times=2, diffs=-1)
        c_in.update([("b", "south")], times=2)
        flow.advance_to(3)
        flow.run()
        return [[c.contents(t) for t in range(3)] for c in caps]


@pytest.mark.parametrize("workers", [2, 3])
def test_views_with_several_workers_equal_one_worker(workers):
    assert _run_views(workers) == _run_views(1)


def test_an_exchange_is_skipped_where_rows_already_sit_on_their_keys_worker():
    """A GROUP BY on a join's key needs no reshuffle: explain says so, and one exchange fewer is built."""
    query = "SELECT o.cust, COUNT(*) AS n FROM orders o JOIN customers c ON o.cust = c.id GROUP BY o.cust"
    from ddflow.workers.exchange import ExchangeNode

    counts = []
    for share in (True, False):
        from ddflow.sql.frontend import SqlFrontend

        with ddflow.Dataflow(workers=2) as flow:
            flow.new_collection("orders", schema=ORDERS)
            flow.new_collection("customers", schema=CUSTOMERS)
            SqlFrontend(flow, share=share).sql(query)
            counts.append(sum(isinstance(n, ExchangeNode) for n in flow.top.all_nodes()))
            if share:
                assert "[exchange: none, partitioned by the group key]" in flow.explain(query)
    assert counts[0] == counts[1] - 1
