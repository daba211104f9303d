"""Collection.accumulate against a plain-Python reference at every complete time, at one and two workers.

The reference sums each group's diffs and diff-weighted weights from
scratch; the engine keeps them from the changes alone (and, in a loop,
by the per-key reduce).  Also: overflow is an error naming the operator,
the state per group stays bounded, and the running-sum kernel (native,
and its plain-Python reference) equals its plain-integer reference.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.traces import spine as spine_mod
from ddflow.errors import SchemaError
from ddflow.operators.arrange import ArrangeNode
from ddflow.base.exactsum import exact_sum_reference
from ddflow.base.native import native_module
from ddflow.operators.reduce.accumulate import running_sums, running_sums_reference
from kernel_modes import MODES, as_run
from oracle import run_scenario, schedules

I64_MAX = (1 << 63) - 1


def reference(groups: int, floats: int = 0):
    """The accumulated output of ``accumulate(groups, ..., floats)`` over a multiset, from scratch.

    Float weights: the exact sum (fractions) rounded once.
    """

    def query(rows: dict) -> dict:
        acc: dict[tuple, list[int]] = {}
        xs: dict[tuple, list[list]] = {}
        for row, mult in rows.items():
            g, w = row[:groups], row[groups:len(row) - floats]
            a = acc.setdefault(g, [0] * (len(w) + 1))
            a[0] += mult
            for j, x in enumerate(w):
                a[j + 1] += mult * x
            for j, x in enumerate(row[len(row) - floats:]):
                xs.setdefault(g, [[] for _ in range(floats)])[j].append((x, mult))
        return {(*g, *a, *(exact_sum_reference([x for x, _ in v], [m for _, m in v]) for v in xs.get(g, []))): 1
                for g, a in acc.items() if a[0] != 0}

    return query


weights2 = st.tuples(st.integers(0, 4), st.integers(-50, 50), st.integers(-(1 << 40), 1 << 40))
strings2 = st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 2), st.integers(-9, 9))


@settings(max_examples=40, deadline=None)
@given(schedules({"x": weights2}, max_updates=30))
def test_one_group_field_two_weights_equals_the_reference(schedule):
    run_scenario(["x"], lambda x: x.accumulate(groups=1, weights=2), reference(1), schedule, workers=(1,))


@settings(max_examples=15, deadline=None)
@given(schedules({"x": strings2}, max_updates=30))
def test_two_group_fields_of_strings_and_ints_equal_the_reference_at_one_and_two_workers(schedule):
    run_scenario(["x"], lambda x: x.accumulate(groups=2, weights=1), reference(2), schedule, workers=(1, 2))


#: Doubles whose float running sums drift (0.1, 1e16 cancelling 1.0), subnormals, the largest, an infinity
#: (not both: their NaN would never equal the reference's; the kernel's tests cover it).
drifting = st.sampled_from([0.1, 0.2, 0.3, 1e16, -1e16, 1.0, -2.5, 5e-324, 1.7976931348623157e308, 0.0,
                            float("inf")])
floats2 = st.tuples(st.integers(0, 3), st.integers(-9, 9), drifting, drifting)


@settings(max_examples=40, deadline=None)
@given(schedules({"x": floats2}, max_updates=30))
def test_float_weights_are_exact_sums_rounded_once_at_one_and_two_workers(schedule):
    run_scenario(["x"], lambda x: x.accumulate(groups=1, weights=1, floats=2), reference(1, floats=2), schedule,
                 workers=(1, 2))


@settings(max_examples=10, deadline=None)
@given(schedules({"x": st.tuples(st.integers(0, 2), drifting)}, max_updates=20))
def test_float_weights_in_a_loop_take_the_reduce_path_and_equal_the_reference(schedule):
    def build(x):
        scope = x.iterative("loop", max_iterations=4)
        return x.enter(scope).accumulate(groups=1, weights=0, floats=1).leave()

    run_scenario(["x"], build, reference(1, floats=1), schedule, workers=(1,))


def test_float_weights_of_another_kind_or_a_limb_past_int64_are_errors():
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    x.accumulate(groups=1, weights=0, floats=1, name="fsum").capture()
    x_in.update([(1, 2)], times=0)
    flow.advance_to(1)
    with pytest.raises(SchemaError, match="fsum.*float64"):
        flow.run()
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    x.accumulate(groups=1, weights=0, floats=1, name="fsum").capture()
    x_in.update([(1, 1.0 - 2.0 ** -24)], times=0, diffs=(1 << 62))  # one limb of 2**24 - 1, times 2**62
    flow.advance_to(1)
    with pytest.raises(SchemaError, match="fsum.*int64"):
        flow.run()


@settings(max_examples=25, deadline=None)
@given(schedules({"x": st.tuples(st.sampled_from(["p", "q"]))}, max_updates=20))
def test_no_weights_is_a_count_of_every_record(schedule):
    run_scenario(["x"], lambda x: x.accumulate(groups=1, weights=0), reference(1), schedule, workers=(1,))


@settings(max_examples=15, deadline=None)
@given(schedules({"x": st.tuples(st.integers(0, 2), st.integers(-3, 3))}, max_updates=20))
def test_in_a_loop_the_reduce_path_equals_the_reference(schedule):
    def build(x):
        scope = x.iterative("loop", max_iterations=4)
        return x.enter(scope).accumulate(groups=1, weights=1).leave()

    run_scenario(["x"], build, reference(1), schedule, workers=(1,))


def test_a_single_update_and_then_its_removal():
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    cap = x.accumulate(groups=1, weights=1).capture()
    x_in.update([("k", 7)], times=0)
    flow.advance_to(1)
    flow.run()
    flow.advance_to(2)  # an empty step
    flow.run()
    x_in.update([("k", 7)], times=2, diffs=-1)
    flow.advance_to(3)
    flow.run()
    assert cap.contents(0) == cap.contents(1) == {("k", 1, 7): 1}
    assert cap.contents(2) == {}


def test_a_zero_count_hides_the_group_but_keeps_its_sums():
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    cap = x.accumulate(groups=1, weights=1).capture()
    x_in.update([(1, 5), (1, 3)], times=0, diffs=[1, -1])
    x_in.update([(1, 0)], times=1)
    flow.advance_to(2)
    flow.run()
    assert cap.contents(0) == {}
    assert cap.contents(1) == {(1, 1, 2): 1}


def test_an_overflowing_sum_or_product_is_an_error_naming_the_operator():
    for rows, diffs in (([(1, 1 << 62), (1, 1 << 62)], [1, 1]), ([(1, 1 << 62)], [4])):
        flow = ddflow.Dataflow()
        x_in, x = flow.new_collection("x")
        x.accumulate(groups=1, weights=1, name="totals").capture()
        x_in.update(rows, times=[0, 1][: len(rows)], diffs=diffs)
        flow.advance_to(2)
        with pytest.raises(SchemaError, match="totals.*int64|int64.*totals"):
            flow.run()


def test_a_wrong_record_shape_is_an_error():
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    x.accumulate(groups=1, weights=2, name="acc").capture()
    x_in.update([(1, 2)], times=0)
    flow.advance_to(1)
    with pytest.raises(SchemaError, match="acc.*1 group field"):
        flow.run()


def test_the_state_per_group_stays_bounded():
    """After many steps of updates to one group, its trace holds a bounded number of rows."""
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    cap = x.accumulate(groups=1, weights=2, name="acc").capture()
    sizes = []
    rng = np.random.default_rng(0)
    for step in range(300):
        t0 = 4 * step
        rows = [("g", int(rng.integers(-9, 9)), int(rng.integers(0, 100))) for _ in range(4)]
        x_in.update(rows, times=[t0, t0 + 1, t0 + 2, t0 + 3])
        flow.advance_to(t0 + 4)
        flow.run()
        cap.drain()
        trace = next(n for n in flow.top.all_nodes() if isinstance(n, ArrangeNode) and n.name == "acc.arrange").trace
        sizes.append(len(trace))
    # (m + 1) records x 4 times per step, for each step in the spine's unmerged tail of small batches;
    # merging the tail brings it back to one step's worth.
    assert max(sizes[100:]) <= 3 * 4 * (spine_mod.TAIL + 1), sizes[-20:]
    assert min(sizes[100:]) <= 3 * 4, sizes[-20:]


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from(MODES))
def test_the_running_sum_kernel_equals_its_reference(data, mode):
    """Native (ddflow._native) or plain, against plain integers; past int64, the group that overflowed."""
    big = st.one_of(st.integers(-5, 5), st.integers(-I64_MAX - 1, I64_MAX))
    G = data.draw(st.integers(1, 3))
    m1 = data.draw(st.integers(1, 3))
    E = data.draw(st.integers(0, 6))
    after = np.array(data.draw(st.lists(st.lists(big, min_size=m1, max_size=m1), min_size=G, max_size=G)),
                     dtype=np.int64).reshape(G, m1)
    ev_g = np.sort(np.array(data.draw(st.lists(st.integers(0, G - 1), min_size=E, max_size=E)), dtype=np.int64))
    delta = np.array(data.draw(st.lists(st.lists(big, min_size=m1, max_size=m1), min_size=E, max_size=E)),
                     dtype=np.int64).reshape(E, m1)
    prev, cur, bad = as_run(running_sums, mode)(after, ev_g, delta)
    rprev, rcur, rbad = running_sums_reference(after, ev_g, delta)
    assert bad == rbad
    if bad < 0:
        assert prev.tolist() == rprev and cur.tolist() == rcur


def test_the_native_running_sums_check_their_groups():
    """A group outside ``after``'s rows would be read out of bounds: a ValueError naming the argument."""
    kernel = native_module().operators.reduce.running_sums
    with pytest.raises(ValueError, match="running_sums: ev_g holds a group"):
        kernel(np.zeros((1, 1), dtype=np.int64), np.array([1]), np.zeros((1, 1), dtype=np.int64))
    with pytest.raises(ValueError, match="running_sums: ev_g needs"):
        kernel(np.zeros((1, 1), dtype=np.int64), np.array([0, 0]), np.zeros((1, 1), dtype=np.int64))
