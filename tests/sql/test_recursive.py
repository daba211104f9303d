"""WITH RECURSIVE views against a plain Python fixpoint on random edge streams (linear, non-linear, mutual)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddflow

REACH = ("WITH RECURSIVE reach(node) AS (SELECT src FROM edges WHERE src = 0 UNION "
         "SELECT e.dst FROM reach r JOIN edges e ON r.node = e.src) SELECT node FROM reach")
CLOSURE = ("WITH RECURSIVE tc(a, b) AS (SELECT src, dst FROM edges UNION "
           "SELECT x.a, y.b FROM tc x JOIN tc y ON x.b = y.a) SELECT a, b FROM tc")
ODD = ("WITH RECURSIVE even(n) AS (SELECT src FROM edges WHERE src = 0 UNION "
       "SELECT e.dst FROM odd o JOIN edges e ON o.n = e.src), "
       "odd(n) AS (SELECT dst FROM edges WHERE src = 0 UNION SELECT e.dst FROM even v JOIN edges e ON v.n = e.src) "
       "SELECT n FROM odd")


def closure(edges: set) -> set:
    tc = set(edges)
    while True:
        more = {(a, d) for a, b in tc for c, d in tc if b == c} - tc
        if not more:
            return tc
        tc |= more


def walks(edges: set, parity: int) -> set:
    """Nodes reachable from 0 by a walk of length with this parity (0 itself at length 0 if it has an edge)."""
    even = {0} if any(s == 0 for s, _ in edges) else set()
    odd: set = set()
    while True:
        new_odd = odd | {d for s, d in edges if s in even} | {d for s, d in edges if s == 0}
        new_even = even | {d for s, d in edges if s in new_odd}
        if (new_even, new_odd) == (even, odd):
            return odd if parity else even
        even, odd = new_even, new_odd


def reach(edges: set) -> set:
    seen = {0} if any(s == 0 for s, _ in edges) else set()
    while True:
        more = {d for s, d in edges if s in seen} - seen
        if not more:
            return seen
        seen |= more


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.booleans()), max_size=5),
                min_size=1, max_size=4))
def test_recursive_views_equal_the_fixpoint_at_every_time(steps):
    flow = ddflow.Dataflow()
    edges_in, _ = flow.new_collection("edges", schema={"src": "bigint", "dst": "bigint"})
    views = {name: flow.sql(q).capture() for name, q in (("reach", REACH), ("tc", CLOSURE), ("odd", ODD))}
    edges: set = set()
    history = []
    for t, step in enumerate(steps):
        for s, d, insert in step:
            if insert and (s, d) not in edges:
                edges.add((s, d))
                edges_in.update([(s, d)], t, 1)
            elif not insert and (s, d) in edges:
                edges.discard((s, d))
                edges_in.update([(s, d)], t, -1)
        history.append((t, set(edges)))
    flow.advance_to(len(steps))
    flow.run()
    for t, es in history:
        assert views["reach"].contents(t) == {(n,): 1 for n in reach(es)}, t
        assert views["tc"].contents(t) == {p: 1 for p in closure(es)}, t
        assert views["odd"].contents(t) == {(n,): 1 for n in walks(es, 1)}, t
