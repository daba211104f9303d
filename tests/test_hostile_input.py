"""Valid but hostile input through the Python API: each case is refused by name or gives the oracle's answer.

Issue 22's cases that do not need Spark: diffs past int64, NaN and -0.0
in object columns, retractions of absent records into loops, loops that
do not converge.
"""
from __future__ import annotations

import numpy as np
import pytest

import ddflow
from ddflow.errors import SchemaError


@pytest.mark.parametrize("diffs", [2 ** 63, -(2 ** 63) - 1, [2 ** 63], np.array([2 ** 64 - 1], dtype=np.uint64)])
def test_diffs_past_int64_are_refused_not_wrapped(diffs):
    flow = ddflow.Dataflow()
    a_in, a = flow.new_collection("a")
    cap = a.count().capture()
    with pytest.raises(SchemaError, match="does not fit in int64"):
        a_in.update([(1,)], times=0, diffs=diffs)
    flow.advance_to(1)
    flow.run()
    assert cap.contents(0) == {}  # nothing was applied


@pytest.mark.parametrize("workers", [1, 2])
def test_nan_and_negative_zero_in_object_columns_are_one_value(workers):
    """Inserting NaN then removing a NaN (another object) leaves nothing; -0.0 is 0.0, as in float columns."""
    with ddflow.Dataflow(workers=workers) as flow:
        o_in, o = flow.new_collection("o")
        cap = o.count().capture()
        o_in.update([(float("nan"),), ("x",), ((1, float("nan")),)], times=0)
        o_in.update([(float("nan"),), ((1, float("nan")),)], times=1, diffs=-1)
        o_in.update([(-0.0,), (0.0,)], times=1)
        flow.advance_to(2)
        flow.run()
        assert len(cap.contents(0)) == 3
        got = cap.contents(1)
        assert got == {("x", 1): 1, (0.0, 2): 1}
        assert all(not isinstance(r[0], float) or np.signbit(r[0]) == 0 for r in got)


def _reach(flow, policy, max_seconds=None):
    roots_in, roots = flow.new_collection("roots")
    edges_in, edges = flow.new_collection("edges", nonnegative=policy)
    start = roots.project(0, 0)
    reach = start.iterate(lambda r: r.join(edges).project(2, 1).concat(start).distinct(), max_seconds=max_seconds)
    out = reach.capture()
    roots_in.insert((0,), time=0)
    edges_in.update([(0, 2), (2, 1)], times=0)
    flow.advance_to(1)
    flow.run()
    return edges_in, out


@pytest.mark.parametrize("workers", [1, 2])
def test_a_removal_of_an_absent_edge_closing_a_cycle_is_a_dead_letter(workers):
    """The issue's one valid message that hung the reachability loop forever."""
    with ddflow.Dataflow(workers=workers) as flow:
        edges_in, out = _reach(flow, "dead-letter")
        edges_in.update([(1, 2)], times=2, diffs=-1)  # never inserted; closes the cycle 2 -> 1 -> 2
        edges_in.update([(2, 3)], times=2)
        flow.advance_to(3)
        flow.run()
        assert out.contents(2) == {(0, 0): 1, (1, 0): 1, (2, 0): 1, (3, 0): 1}
        rejected = edges_in.take_rejected()
        assert [(r["record"], r["time"], r["diff"]) for r in rejected] == [((1, 2), [2], -1)]
        assert "not there" in rejected[0]["error"] and edges_in.take_rejected() == []


def test_a_removal_of_an_absent_record_is_an_error_by_policy_and_nothing_is_applied():
    with ddflow.Dataflow() as flow:
        edges_in, out = _reach(flow, "error")
        edges_in.update([(1, 2)], times=2, diffs=-1)
        flow.advance_to(3)
        with pytest.raises(ddflow.DataflowError, match=r"input 'edges': the update \(1, 2\) at time 2 with diff -1"):
            flow.run()
        assert out.contents(2) == {(0, 0): 1, (1, 0): 1, (2, 0): 1}


def test_removals_are_checked_in_time_order_within_one_run():
    """A removal at t is covered by an insert at an earlier time of the same run, not by a later one."""
    flow = ddflow.Dataflow()
    a_in, a = flow.new_collection("a", nonnegative="dead-letter")
    cap = a.capture()
    a_in.update([(1,), (2,)], times=[1, 3])
    a_in.update([(1,), (2,), (1,)], times=[2, 2, 4], diffs=[-1, -1, -1])
    flow.advance_to(5)
    flow.run()
    assert sorted((r["record"], r["time"]) for r in a_in.take_rejected()) == [((1,), [4]), ((2,), [2])]
    assert cap.contents(4) == {(2,): 1}


def test_tables_are_nonnegative_by_default():
    flow = ddflow.Dataflow()
    t_in, _ = flow.new_collection("t", schema={"x": "bigint"})
    assert t_in.nonnegative == "error"
    t_in.update([(1,)], times=0, diffs=-1)
    flow.advance_to(1)
    with pytest.raises(ddflow.DataflowError, match="below zero"):
        flow.run()


def test_a_loop_that_does_not_converge_fails_within_its_bound_naming_loop_and_times():
    """The safety net: a signed input (policy None) with the diverging removal fails, it never spins."""
    with ddflow.Dataflow() as flow:
        edges_in, out = _reach(flow, None, max_seconds=3)
        edges_in.update([(1, 2)], times=2, diffs=-1)
        flow.advance_to(3)
        with pytest.raises(ddflow.NonConvergence, match=r"loop 'iterate.*max_seconds=3.*input times \[2\]"):
            flow.run()


@pytest.mark.parametrize("workers", [1, 2])
def test_diffs_adding_up_past_int64_drop_that_records_batch_as_dead_letters(workers):
    big = (1 << 62) + 1
    with ddflow.Dataflow(workers=workers) as flow:
        a_in, a = flow.new_collection("a", nonnegative="dead-letter")
        cap = a.count().capture()
        a_in.update([(1,), (2,)], times=0, diffs=[big, 5])
        flow.advance_to(1)
        flow.run()
        a_in.update([(1,), (1,), (2,)], times=[1, 2, 1], diffs=[big, 3, 1])  # (1,) would reach 2**63 + 4
        flow.advance_to(3)
        flow.run()
        rejected = a_in.take_rejected()
        assert sorted((r["record"], r["time"]) for r in rejected) == [((1,), [1]), ((1,), [2])]
        assert "past int64" in rejected[0]["error"]
        assert cap.contents(2) == {(1, big): 1, (2, 6): 1}  # the query goes on with the rest
        a_in.update([(1,)], times=3, diffs=-big)
        flow.advance_to(4)
        flow.run()
        assert cap.contents(3) == {(2, 6): 1}
