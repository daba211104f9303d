"""Constant and empty collections: fixed rows from the scope's first time, emitted once at any worker count.

Every scenario runs at W = 1, 2, 3 (``run_scenario``), against the oracle
at every complete time, and every count must give W = 1's changes: a
constant emitted by every worker would show up W times.
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings

import ddflow
import oracle as O
from oracle import int_rows, nonneg_schedules, run_scenario, schedules

PAIRS = {"a": int_rows(2, 0, 4)}
ROWS = [(0, 9), (1, 9), (1, 9)]
SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(schedules(PAIRS))
def test_a_constant_beside_a_changing_input(schedule):
    def build(a):
        c = ddflow.Collection.constant(a.scope, ROWS)
        return a.concat(c).project(0).count().concat(a.antijoin(c.project(0).distinct()))

    def query(a):
        c = O.clean({(0, 9): 1, (1, 9): 2})
        return O.add(O.count(O.project(O.add(a, c), 0)), O.antijoin(a, O.distinct(O.project(c, 0))))

    run_scenario(["a"], build, query, schedule)


@SETTINGS
@given(nonneg_schedules(PAIRS))
def test_constants_and_an_empty_start_inside_a_loop(schedule):
    """Reachability from node 0 over edges ``a``: the loop variable starts empty, the root is a constant of the loop."""

    def build(a):
        loop = a.iterative("reach")
        v = ddflow.Variable(loop, ddflow.Collection.empty(loop))
        root = ddflow.Collection.constant(loop, [(0,)])
        v.set(root.concat(v.join(a).project(1)).distinct())
        return v.result.leave()

    def query(a):
        root = {(0,): 1}
        return O.fixpoint({}, lambda x: O.distinct(O.add(root, O.project(O.join(x, a), 1))))

    run_scenario(["a"], build, query, schedule)


def test_a_global_aggregate_adds_no_input_and_counts_zero_at_every_worker_count():
    outs = []
    for w in (1, 2, 3):
        with ddflow.Dataflow(workers=w) as flow:
            t_in, _ = flow.new_collection("t", schema={"k": "bigint"})
            cap = flow.sql("SELECT COUNT(*) AS n, SUM(k) AS s FROM t").capture()
            assert [h.name for h in flow.inputs] == ["t"]
            flow.advance_to(3)  # before the first run: the default row is at time 0 all the same
            t_in.update([(5,)], times=3)
            t_in.update([(5,)], times=4, diffs=-1)
            flow.advance_to(5)
            flow.run()
            outs.append([cap.contents(t) for t in range(5)])
    assert outs[0] == [{(0, None): 1}] * 3 + [{(1, 5): 1}, {(0, None): 1}]
    assert outs[0] == outs[1] == outs[2]
