"""Bad input and misuse: clear errors that name the culprit, and a dataflow that stays usable.

Every rejected ``update`` must leave no trace: nothing of the failed call is
applied, and later valid updates go through as if it never happened.
"""
from __future__ import annotations


import numpy as np
import pyarrow as pa
import pytest

import ddflow
from ddflow import DataflowError, FrontierError, NonConvergence


def counted(name="edges"):
    """A dataflow counting the records of one input, with its handle and capture."""
    flow = ddflow.Dataflow()
    h, c = flow.new_collection(name)
    cap = c.count().capture()
    return flow, h, cap


def assert_usable(flow, h, cap, before: dict):
    """The failed call applied nothing, and a later valid update works."""
    t = flow.frontier
    h.insert((7, 7), time=t + 1)
    flow.advance_to(t + 2)
    flow.run()
    assert cap.contents(t) == before
    assert cap.contents(t + 1) == {**before, (7, 7, 1): 1}


def started():
    flow, h, cap = counted()
    h.update([(1, 2), (2, 3)], [0, 1])
    flow.advance_to(5)
    flow.run()
    before = {(1, 2, 1): 1, (2, 3, 1): 1}
    assert cap.contents(4) == before
    return flow, h, cap, before


# -- times ------------------------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda h: h.insert((1, 2), time=4),
    lambda h: h.remove((1, 2), time=0),
    lambda h: h.update([(5, 5), (6, 6)], [9, 3]),  # one good time, one bad: neither applies
    lambda h: h.update(pa.table({"a": [5, 6], "b": [5, 6]}), times=np.array([9, 3])),
    lambda h: h.update({"a": np.array([5, 6]), "b": np.array([5, 6])}, times=np.array([3, 9])),
], ids=["insert", "remove", "tuples-batch", "arrow", "dict"])
def test_time_before_frontier(call):
    flow, h, cap, before = started()
    with pytest.raises(FrontierError, match="edges"):
        call(h)
    assert_usable(flow, h, cap, before)


def test_advance_to_backwards():
    flow, h, cap, before = started()
    with pytest.raises(FrontierError):
        flow.advance_to(4)
    assert flow.frontier == 5
    flow.advance_to(5)  # staying put is fine
    assert_usable(flow, h, cap, before)


def test_frontier_error_is_a_value_error():
    # Callers that catch ValueError for bad input also catch a time in the past.
    assert issubclass(FrontierError, ValueError)


def test_non_integer_times():
    flow, h, cap, before = started()
    with pytest.raises(TypeError, match="edges"):
        h.update([(5, 5)], [5.5])
    with pytest.raises(TypeError, match="edges"):
        h.insert((5, 5), time=6.0)
    assert_usable(flow, h, cap, before)


# -- records ------------------------------------------------------------------------------------


@pytest.mark.parametrize("rows", [
    [(1, 2, 3)],
    [(1,)],
    [(5, 5), (1, 2, 3)],  # the bad row last: the good one must not be applied either
], ids=["longer", "shorter", "mixed-batch"])
def test_wrong_arity(rows):
    flow, h, cap, before = started()
    with pytest.raises(ValueError, match="edges"):
        h.update(rows, 6)
    assert_usable(flow, h, cap, before)


def test_wrong_arity_arrow():
    flow, h, cap, before = started()
    with pytest.raises(ValueError, match="edges"):
        h.update(pa.table({"a": [1], "b": [2], "c": [3]}), times=6)
    assert_usable(flow, h, cap, before)


def test_wrong_arity_within_first_batch():
    flow, h, cap = counted()
    with pytest.raises(ValueError, match="edges"):
        h.update([(1, 2), (1, 2, 3)], 0)
    # Nothing was fixed by the failed first call: three-field records are fine now.
    h.update([(1, 2, 3)], 0)
    flow.advance_to(1)
    flow.run()
    assert cap.contents(0) == {(1, 2, 3, 1): 1}


def test_empty_first_update_does_not_fix_the_arity():
    flow, h, cap = counted()
    h.update([], 0)
    h.insert((1, 2), time=0)
    flow.advance_to(1)
    flow.run()
    assert cap.contents(0) == {(1, 2, 1): 1}


def test_not_a_tuple():
    flow, h, cap, before = started()
    with pytest.raises(TypeError, match="edges"):
        h.update([[5, 5]], 6)
    assert_usable(flow, h, cap, before)


@pytest.mark.parametrize("row", [(5, [1, 2]), ({1: 2}, 5), (5, {3})], ids=["list", "dict", "set"])
def test_unhashable_field(row):
    flow, h, cap, before = started()
    field = 1 if isinstance(row[1], (list, set)) else 0
    with pytest.raises(TypeError, match=rf"edges.*field {field}"):
        h.update([(5, 5), row], 6)
    assert_usable(flow, h, cap, before)


def test_unhashable_field_in_first_batch():
    flow, h, cap = counted()
    with pytest.raises(TypeError, match=r"edges.*field 1"):
        h.insert((1, [2]), time=0)
    h.insert((1, (2, 3)), time=0)  # a tuple field is hashable: interned
    flow.advance_to(1)
    flow.run()
    assert cap.contents(0) == {(1, (2, 3), 1): 1}


@pytest.mark.parametrize("row", [("x", 5), (1.5, 5), (5, True)], ids=["str-in-int", "float-in-int", "bool-in-int"])
def test_field_of_another_kind(row):
    flow, h, cap, before = started()
    with pytest.raises(TypeError, match=r"edges.*field"):
        h.update([(5, 5), row], 6)
    assert_usable(flow, h, cap, before)


# -- diffs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("diffs", [1.5, "1", [1, 1.0], np.array([1.0, 2.0]), True, None],
                         ids=["float", "str", "list-with-float", "float-array", "bool", "none"])
def test_non_integer_diff(diffs):
    flow, h, cap, before = started()
    with pytest.raises(TypeError, match="edges"):
        h.update([(5, 5), (6, 6)], 6, diffs)
    assert_usable(flow, h, cap, before)


def test_non_integer_diff_column():
    flow, h, cap, before = started()
    table = pa.table({"a": [5], "b": [5], "t": [6], "d": [1.5]})
    with pytest.raises(TypeError, match="edges"):
        h.update(table, times="t", diffs="d")
    assert_usable(flow, h, cap, before)


def test_numpy_integer_diffs_accepted():
    flow, h, cap = counted()
    h.update([(1, 2), (3, 4)], np.array([0, 1], dtype=np.int32), np.array([2, -1], dtype=np.int16))
    flow.advance_to(2)
    flow.run()
    assert cap.contents(1) == {(1, 2, 2): 1, (3, 4, -1): 1}


# -- lifecycle ---------------------------------------------------------------------------------


def test_update_after_finish():
    flow, h, cap, before = started()
    h.insert((3, 4), time=10)
    flow.finish()
    assert cap.contents(10) == {**before, (3, 4, 1): 1}
    for call in (lambda: h.insert((5, 5), time=20), lambda: h.remove((1, 2)), lambda: h.update([(5, 5)], 30),
                 lambda: h.update(pa.table({"a": [5], "b": [5]}), times=30)):
        with pytest.raises(DataflowError, match="edges"):
            call()
    # Still readable.
    assert cap.contents(10 ** 12) == {**before, (3, 4, 1): 1}


def test_non_converging_loop():
    flow = ddflow.Dataflow()
    h, c = flow.new_collection("seeds")
    grown = c.iterate(lambda x: x.map(lambda r: (r[0] + 1,)).concat(x).distinct(), name="grow", max_iterations=50)
    grown.capture()
    h.insert((0,), time=0)
    flow.advance_to(1)
    with pytest.raises(NonConvergence, match="grow") as info:
        flow.run()
    assert "50" in str(info.value)
    assert isinstance(info.value, DataflowError)
    # A failed dataflow says so instead of running on from a half-finished state.
    with pytest.raises(DataflowError):
        flow.run()


def test_non_converging_mutual_recursion():
    flow = ddflow.Dataflow()
    h, c = flow.new_collection("seeds")
    scope = flow.iterative("pingpong", max_iterations=30)
    a = ddflow.Variable(scope, c)
    b = ddflow.Variable(scope, c.filter(lambda r: False))
    a.set(b.map(lambda r: (r[0] + 1,)).concat(c).distinct())
    b.set(a.map(lambda r: (r[0] + 1,)).distinct())
    a.result.leave().capture()
    h.insert((0,), time=0)
    flow.advance_to(1)
    with pytest.raises(NonConvergence, match="pingpong"):
        flow.run()


def test_converging_loop_within_bound_is_fine():
    flow = ddflow.Dataflow()
    h, c = flow.new_collection("seeds")
    cap = c.iterate(lambda x: x.map(lambda r: (min(r[0] + 1, 10),)).concat(x).distinct(), name="bounded",
                    max_iterations=50).capture()
    h.insert((0,), time=0)
    flow.advance_to(1)
    flow.run()
    assert cap.contents(0) == {(i,): 1 for i in range(11)}


def test_error_in_user_function_names_the_operator():
    flow = ddflow.Dataflow()
    h, c = flow.new_collection("nums")
    c.map(lambda r: (1 // r[0],), name="invert").capture()
    h.insert((0,), time=0)
    flow.advance_to(1)
    with pytest.raises(ZeroDivisionError, match="invert"):
        flow.run()


def test_map_returning_non_tuple():
    flow = ddflow.Dataflow()
    h, c = flow.new_collection("nums")
    c.map(lambda r: r[0], name="bare").capture()
    h.insert((0,), time=0)
    flow.advance_to(1)
    with pytest.raises(TypeError, match="bare"):
        flow.run()


def test_capture_inside_loop_is_refused():
    flow = ddflow.Dataflow()
    h, c = flow.new_collection("nums")

    def body(x):
        with pytest.raises(DataflowError):
            x.capture()
        return x
    c.iterate(body)


def test_variable_set_twice():
    flow = ddflow.Dataflow()
    h, c = flow.new_collection("nums")
    scope = flow.iterative("twice")
    v = ddflow.Variable(scope, c)
    v.set(v.distinct())
    with pytest.raises(DataflowError):
        v.set(v)


def test_unset_variable_is_reported_at_run():
    flow = ddflow.Dataflow()
    h, c = flow.new_collection("nums")
    scope = flow.iterative("unset")
    v = ddflow.Variable(scope, c)
    v.leave().capture()
    h.insert((1,), time=0)
    flow.advance_to(1)
    with pytest.raises(DataflowError, match="unset"):
        flow.run()


def test_top_k_needs_positive_k():
    flow = ddflow.Dataflow()
    _, c = flow.new_collection("nums")
    with pytest.raises(ValueError):
        c.top_k(0)


def test_loop_feedback_of_another_kind_names_the_variable():
    """A body whose result has a string where the variable has an int: a TypeError naming the variable."""
    flow = ddflow.Dataflow()
    h, c = flow.new_collection("nums")
    out = c.iterate(lambda x: x.map(lambda r: (r[0], "s")).distinct(), name="retyped")
    out.capture()
    h.insert((1, 2), time=0)
    flow.advance_to(1)
    with pytest.raises(TypeError, match="retyped"):
        flow.run()


@pytest.mark.parametrize("ret", [
    lambda k, vals: [(5, 1)],        # a bare value, not a tuple
    lambda k, vals: [("ab", 1)],     # a bare string would otherwise split into ('a', 'b')
    lambda k, vals: [5],             # not a pair
    lambda k, vals: [((5,), 1.5)],   # a non-integer multiplicity
], ids=["bare-int", "bare-str", "not-a-pair", "float-mult"])
@pytest.mark.parametrize("looped", [False, True], ids=["top", "loop"])
def test_reduce_function_returning_malformed_output(ret, looped):
    flow = ddflow.Dataflow()
    h, c = flow.new_collection("nums")
    if looped:
        out = c.iterate(lambda v: c.enter(v.scope).reduce(ret, name="malformed").concat(v).distinct())
    else:
        out = c.reduce(ret, name="malformed")
    out.capture()
    h.insert((1, 2), time=0)
    flow.advance_to(1)
    with pytest.raises(TypeError, match="malformed"):
        flow.run()


def test_operator_attached_after_run():
    flow = ddflow.Dataflow()
    h, c = flow.new_collection("nums")
    c.count().capture()  # arranges c
    h.update([(1, 2), (3, 4)], 0)
    flow.advance_to(1)
    flow.run()
    # A late operator would see only later updates; it is refused, and the dataflow goes on.
    with pytest.raises(DataflowError, match="already run"):
        c.count().capture()
    h.update([(1, 2)], 1)
    flow.advance_to(2)
    flow.run()


def test_non_converging_inner_loop_names_the_inner_loop():
    flow = ddflow.Dataflow()
    h, c = flow.new_collection("seeds")

    def outer(x):
        return x.iterate(lambda y: y.map(lambda r: (r[0] + 1,)).concat(y).distinct(), name="inner_grow",
                         max_iterations=40).concat(x).distinct()
    c.iterate(outer, name="outer_loop").capture()
    h.insert((0,), time=0)
    flow.advance_to(1)
    with pytest.raises(NonConvergence, match="inner_grow"):
        flow.run()
    # A failed dataflow cannot be extended either.
    with pytest.raises(DataflowError):
        c.map(lambda r: r)
    with pytest.raises(DataflowError):
        flow.run()


def test_times_and_frontiers_past_int64_are_refused_and_the_dataflow_goes_on():
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    out = x.count().capture()
    for times in (2**63, 2**64, 2**63 - 1, [1, 2**63], np.array([2**63], dtype=np.uint64)):
        with pytest.raises(ddflow.FrontierError, match="time"):
            x_in.update([(1,)] if not isinstance(times, list) else [(1,), (2,)], times=times)
    with pytest.raises(ddflow.FrontierError, match="at most 9223372036854775807"):
        flow.advance_to(2**63)
    x_in.update([(1,)], times=2**63 - 2)  # the latest data time, and the largest frontier after it
    flow.advance_to(2**63 - 1)
    flow.run()
    assert out.contents(2**63 - 2) == {(1, 1): 1}


def test_an_empty_record_is_refused_at_update():
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    x.capture()
    with pytest.raises(ddflow.SchemaError, match="at least one field, got the empty tuple"):
        x_in.update([()], times=0)
    flow.advance_to(1)
    flow.run()


def test_nan_keys_are_one_key_and_minus_zero_is_zero():
    """NaN equals NaN and -0.0 equals 0.0 when counting, joining and deduplicating (Spark SQL's semantics)."""
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    counts, pairs, keys = x.count().capture(), x.join(x).capture(), x.distinct().capture()
    x_in.update([(float("nan"),), (-0.0,)], times=0)
    x_in.update([(float("nan"),), (float("nan"),), (0.0,)], times=1)
    flow.advance_to(2)
    flow.run()
    norm = lambda d: {tuple("nan" if v != v else v for v in r): m for r, m in d.items()}  # noqa: E731
    assert norm(counts.contents(1)) == {(0.0, 2): 1, ("nan", 3): 1}
    assert norm(pairs.contents(1)) == {(0.0,): 4, ("nan",): 9}
    assert norm(keys.contents(1)) == {(0.0,): 1, ("nan",): 1}


def test_diffs_adding_up_past_int64_name_the_operator_and_the_record():
    # The count's arrangement holds both batches unmerged (the spine's tail), so the first to add them
    # up may be the arrangement merging them or the count reading them: either names itself.
    for op, where in (("count", r"operator '(arrange\(x\)#0|count\(x\)#1)'"), ("capture", "capture")):
        flow = ddflow.Dataflow()
        x_in, x = flow.new_collection("x")
        out = x.capture() if op == "capture" else getattr(x, op)().capture()
        x_in.update([(1, 1)], times=0, diffs=2**62)
        flow.advance_to(1)
        flow.run()
        x_in.update([(1, 1)], times=1, diffs=2**62)
        flow.advance_to(2)
        with pytest.raises(ddflow.SchemaError, match=where) as err:
            flow.run()
            out.contents(1)
        assert "the diffs of record (1, 1) at time" in str(err.value)
    flow = ddflow.Dataflow()  # a sum of values past int64, over records that each fit
    x_in, x = flow.new_collection("x")
    x.sum(name="total").capture()
    x_in.update([(1, 2**62), (1, 2**62 + 1)], times=0)
    flow.advance_to(1)
    with pytest.raises(ddflow.SchemaError, match="operator 'total': a value does not fit in int64"):
        flow.run()
