"""Each plan rewrite gives the same output as the plan without it, on random update streams."""
from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.plan.lower import Lowering
from ddflow.plan.rewrite import push_filters
from ddflow.sql.planner import plan_sql

QUERIES = [
    "SELECT a.x, b.y FROM a JOIN b ON a.k = b.k WHERE a.x > 1 AND b.y < 3 AND a.x <> b.y",
    "SELECT a.x, b.y FROM a LEFT JOIN b ON a.k = b.k WHERE a.x > 0 AND b.y IS NULL",
    "SELECT a.x, b.y FROM a RIGHT JOIN b ON a.k = b.k WHERE b.y > 0 OR a.x > 2",
    "SELECT a.x, b.y FROM a RIGHT JOIN b ON a.k = b.k WHERE a.x IS NULL AND b.y >= 0",
    "SELECT b.k, COUNT(*) AS n FROM a JOIN b ON a.k = b.k WHERE b.y > 0 GROUP BY b.k",
]

rows = st.tuples(st.sampled_from([0, 1, None]), st.one_of(st.none(), st.integers(0, 3)))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from("ab"), rows, st.booleans()), max_size=16))
@example([("a", (1, 1), True), ("b", (1, 2), True), ("a", (0, 3), True), ("b", (None, None), True)])
def test_filter_pushdown_and_shared_arrangements_change_nothing(updates):
    flow = ddflow.Dataflow()
    handles = {"a": flow.new_collection("a", schema={"k": "bigint", "x": "bigint"})[0],
               "b": flow.new_collection("b", schema={"k": "bigint", "y": "bigint"})[0]}
    schemas = {n: c.schema for n, c in flow.tables.items()}
    plain, rewritten = Lowering(flow, flow.tables, share=False), Lowering(flow, flow.tables, share=True)
    pairs = []
    for q in QUERIES:
        rel = plan_sql(q, schemas)
        pairs.append((plain.lower(rel).capture(), rewritten.lower(push_filters(rel)).capture()))
        pairs[-1][0].schema = pairs[-1][1].schema = rel.schema
    present: dict = {"a": [], "b": []}
    for t, (table, row, insert) in enumerate(updates):
        if insert or row not in present[table]:
            present[table].append(row)
            handles[table].update([row], t, 1)
        else:
            present[table].remove(row)
            handles[table].update([row], t, -1)
    flow.advance_to(len(updates) + 1)
    flow.run()
    for q, (a, b) in zip(QUERIES, pairs):
        for t in range(len(updates) + 1):
            assert a.contents(t) == b.contents(t), (q, t)
