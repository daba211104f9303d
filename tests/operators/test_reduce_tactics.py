"""Every specialised reduce tactic against the reference (the general tactic), on random update streams.

The tactic contract (``ddflow.operators.reduce.tactic``) fixes the output
at every complete time, so two tactics that keep it emit the same
consolidated output changes.  Each example runs one dataflow per tactic on
the same schedule (many data times per advance) and compares their
changes after every run.
"""
from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.errors import NonConvergence
from ddflow.operators.reduce import CountLogic, DistinctLogic, ExtremeLogic, ThresholdLogic, choose_tactic
from ddflow.operators.reduce.general import GeneralTactic
from ddflow.operators.reduce.iterate import LoopTactic
from ddflow.operators.reduce.total import TotalTactic
from ddflow.operators.reduce import walk
from ddflow.operators.reduce.walk import WalkTactic
from oracle import int_rows, schedules

LOGICS = {
    "count": CountLogic,
    "distinct": DistinctLogic,
    "threshold": lambda: ThresholdLogic(lambda c: c * c if c > 0 else -1),
    # Bounded, so that fed back in a loop it converges (squaring grows past int64 there).
    "capped": lambda: ThresholdLogic(lambda c: min(c, 2) if c > 0 else 0),
}


def _top_level(x, logic, tactic):
    return x._reduce_arranged(x.arrange(), logic, tactic=tactic)


def _in_loop(x, logic, tactic):
    """A loop whose body reduces at times (t, i): keys halve each round, so it converges."""
    if isinstance(logic, CountLogic):
        def body(v):
            halved = v.map(lambda r: (r[0] // 2,)).concat(x.project(0))
            return halved._reduce_arranged(halved.arrange(), CountLogic(), tactic=tactic).project(0)
        seed = x.project(0)
    else:
        def body(v):
            halved = v.map(lambda r: (r[0] // 2, *r[1:])).concat(x)
            return halved._reduce_arranged(halved.arrange(), logic, tactic=tactic)
        seed = x
    return seed.iterate(body, max_iterations=64)


#: Rows of one int field widened to the schema a test asks for: a second int field (records of two
#: fields: the kernels' table reads match values as well as keys), or a float one (the per-batch reads).
WIDEN = {("i",): lambda r: r, ("i", "i"): lambda r: (r[0], r[0] % 3), ("i", "f"): lambda r: (r[0], (r[0] % 3) / 2)}


def _changes(build, logic, tactic, schedule, schema):
    """The output changes after each step of ``schedule`` (or that the loop did not converge)."""
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x", schema=schema)
    cap = build(x, logic, tactic).capture()
    # Rows of fewer fields than the schema are widened (the loop tactic's tests); full rows are kept.
    widen = lambda r: r if len(r) == len(schema) else WIDEN[tuple(schema)](r)  # noqa: E731
    seen = []
    try:
        for ups, frontier in schedule:
            for _, row, t, d in ups:
                x_in.update([widen(row)], times=t, diffs=d)
            flow.advance_to(frontier)
            flow.run()
            seen.append(cap.changes())
    except NonConvergence:  # a negative count fed back can grow without end: both tactics must say so
        seen.append("did not converge")
    return seen


def _run(build, logic_name, tactic, schedule, schema=("i",)):
    return _changes(build, LOGICS[logic_name](), tactic, schedule, schema)


EXTREMES = {
    "min": lambda: ExtremeLogic("min"),
    "max": lambda: ExtremeLogic("max"),
    "top_k": lambda: ExtremeLogic("top_k", 2),
    "row_number": lambda: ExtremeLogic("row_number", 3),
    # Values tie on their first field: over several fields, rows differing after it share a number.
    "rank": lambda: ExtremeLogic("rank", 3, ties=1),
    "dense_rank": lambda: ExtremeLogic("dense_rank", 2, ties=1),
    # The first value field descending (strings by their decoded values, numbers complemented or negated).
    "min_desc": lambda: ExtremeLogic("min", desc=(0,)),
    "top_k_desc": lambda: ExtremeLogic("top_k", 2, desc=(0,)),
    "rank_desc": lambda: ExtremeLogic("rank", 3, ties=1, desc=(0,)),
    # The first value field with the key makes the partition: each part of a key's values ranked on its own.
    "top_k_part": lambda: ExtremeLogic("top_k", 1, partition=1),
    "row_number_part": lambda: ExtremeLogic("row_number", 2, partition=1),
    "rank_part": lambda: ExtremeLogic("rank", 2, ties=2, partition=1),
    "dense_rank_part": lambda: ExtremeLogic("dense_rank", 1, ties=2, partition=1),
}
#: Logics whose output is a value, so a loop can feed it back (the numbered ones add a field).
VALUED = sorted({"min", "max", "top_k"})


def test_the_reference_accepts_everything_and_each_tactic_only_its_cases():
    for name, make in LOGICS.items():
        logic = make()
        assert choose_tactic(logic, 1) is TotalTactic and choose_tactic(logic, 2) is LoopTactic
        assert choose_tactic(logic, 3) is GeneralTactic
        assert GeneralTactic.accepts(logic, 1) and not TotalTactic.accepts(logic, 2) and not LoopTactic.accepts(logic, 1)
        assert not WalkTactic.accepts(logic, 1)
    for name, make in EXTREMES.items():
        logic = make()
        assert choose_tactic(logic, 1) is WalkTactic and choose_tactic(logic, 2) is WalkTactic
        assert choose_tactic(logic, 3) is GeneralTactic


@settings(max_examples=60)
@given(logic=st.sampled_from(sorted(LOGICS)), schedule=schedules({"x": int_rows(1, 0, 7)}, max_updates=30))
def test_total_tactic_matches_the_reference(logic, schedule):
    assert _run(_top_level, logic, TotalTactic, schedule) == _run(_top_level, logic, GeneralTactic, schedule)


@settings(max_examples=40)
@given(logic=st.sampled_from(["count", "distinct", "capped"]),
       schedule=schedules({"x": int_rows(1, 0, 15)}, max_updates=20, diffs=(1, 1, 1, -1)))
def test_loop_tactic_matches_the_reference(logic, schedule):
    """Count and distinct take the one-call step (``loop_step``), a threshold its kernels one by one."""
    assert _run(_in_loop, logic, LoopTactic, schedule) == _run(_in_loop, logic, GeneralTactic, schedule)


@settings(max_examples=30)
@given(logic=st.just("distinct"), schema=st.sampled_from([("i", "i"), ("i", "f")]),
       schedule=schedules({"x": int_rows(1, 0, 15)}, max_updates=20, diffs=(1, 1, 1, -1)))
def test_loop_tactic_matches_the_reference_on_records_of_two_fields(logic, schema, schedule):
    """Two int fields: the kernels' reads find each group's value rows; an int and a float: the per-batch reads."""
    assert _run(_in_loop, logic, LoopTactic, schedule, schema) == _run(_in_loop, logic, GeneralTactic, schedule, schema)


def _walk_top(x, logic, tactic):
    return x._reduce_arranged(x.arrange(), logic, tactic=tactic)


def _walk_loop(x, logic, tactic):
    """Shortest-path-like: keys halve each round and values step away from the extreme, so it converges."""
    step = 1 if logic.kind != "max" else -1

    def body(v):
        moved = v.map(lambda r: (r[0] // 2, r[1] + step, *r[2:])).concat(x)
        return moved._reduce_arranged(moved.arrange(), logic, tactic=tactic)
    return x.iterate(body, max_iterations=64)


def _walk_join_loop(x, logic, tactic):
    """Shortest-path-shaped: each round joins the variable with ``x`` (edges), so a round's input can arrive early.

    Input not yet complete reaches the walk then, and waits with it.
    """
    step = 1 if logic.kind != "max" else -1
    start = x.filter(lambda r: r[0] == 0).map(lambda r: (0, 0))  # the root, once per edge out of it

    def body(v):
        moved = v.join(x).map(lambda r: (r[2], r[1] + step)).concat(start)
        return moved._reduce_arranged(moved.arrange(), logic, tactic=tactic)
    return start.iterate(body, max_iterations=64)


def _run_extreme(build, logic_name, tactic, schedule, schema):
    return _changes(build, EXTREMES[logic_name](), tactic, schedule, schema)


#: Values in a narrow range (ranked by their offset from the least) or spread over int64 (ranked by sorting).
VALUES = {"narrow": st.integers(0, 5), "wide": st.sampled_from([-(10**15), -1, 3, 10**15, 2**62])}


@settings(max_examples=120)
@given(logic=st.sampled_from(sorted(EXTREMES)), values=st.sampled_from(sorted(VALUES)), data=st.data(),
       sort_all=st.booleans())
def test_walk_tactic_matches_the_reference_at_the_top_level(logic, values, data, sort_all):
    """``sort_all``: every step's values are ranked after a sort, as a step of more than ``NUMPY_SORT_ABOVE`` rows."""
    schedule = data.draw(schedules({"x": st.tuples(st.integers(0, 5), VALUES[values])}, max_updates=30))
    with mock.patch.object(walk, "NUMPY_SORT_ABOVE", 0 if sort_all else walk.NUMPY_SORT_ABOVE):
        a = _run_extreme(_walk_top, logic, WalkTactic, schedule, ("i", "i"))
    assert a == _run_extreme(_walk_top, logic, GeneralTactic, schedule, ("i", "i"))


@settings(max_examples=80)
@given(logic=st.sampled_from(["rank", "dense_rank", "row_number", "top_k_part", "row_number_part", "rank_part",
                               "dense_rank_part"]), wide=st.booleans(), data=st.data())
def test_walk_tactic_ranks_rows_of_int_fields_tying_on_the_first(logic, wide, data):
    """The int-trace step: rows tie on their first value field and differ in the next (one tie group, many rows);
    or the first field partitions the key's values, and rows tie on the second."""
    v = st.sampled_from([-(10**15), 3, 2**62]) if wide else st.integers(0, 2)
    schedule = data.draw(schedules({"x": st.tuples(st.integers(0, 3), v, st.integers(0, 2), st.integers(0, 3))},
                                   max_updates=30))
    a = _run_extreme(_walk_top, logic, WalkTactic, schedule, ("i", "i", "i", "i"))
    assert a == _run_extreme(_walk_top, logic, GeneralTactic, schedule, ("i", "i", "i", "i"))


@settings(max_examples=40)
@given(logic=st.sampled_from(sorted(EXTREMES)),
       schedule=schedules({"x": st.tuples(st.integers(0, 6), st.sampled_from([-1.5, 0.0, 2.0, 2.5]),
                                          st.booleans())}, max_updates=25))
def test_walk_tactic_orders_float_and_several_value_fields_as_tuples(logic, schedule):
    a = _run_extreme(_walk_top, logic, WalkTactic, schedule, ("i", "f", "b"))
    assert a == _run_extreme(_walk_top, logic, GeneralTactic, schedule, ("i", "f", "b"))


@pytest.mark.parametrize("build, hi, max_updates", [(_walk_loop, 15, 20), (_walk_join_loop, 7, 40)])
@settings(max_examples=40)
@given(logic=st.sampled_from(VALUED), data=st.data())
def test_walk_tactic_matches_the_reference_in_a_loop(build, hi, max_updates, logic, data):
    """Keys halving each round; or joined with the edges each round, where input not yet complete reaches the walk."""
    schedule = data.draw(schedules({"x": int_rows(2, 0, hi)}, max_updates=max_updates, diffs=(1, 1, 1, -1)))
    a = _run_extreme(build, logic, WalkTactic, schedule, ("i", "i"))
    assert a == _run_extreme(build, logic, GeneralTactic, schedule, ("i", "i"))


@settings(max_examples=80)
@given(logic=st.sampled_from(sorted(EXTREMES)),
       schedule=schedules({"x": st.tuples(st.integers(0, 4), st.sampled_from(["b", "a", "ab", "", None]),
                                          st.integers(0, 2))}, max_updates=25))
def test_walk_tactic_orders_string_values_as_the_reference(logic, schedule):
    """Strings (None first) ranked by their decoded values; a second field breaks ties as tuples do."""
    a = _run_extreme(_walk_top, logic, WalkTactic, schedule, ("i", "o", "i"))
    assert a == _run_extreme(_walk_top, logic, GeneralTactic, schedule, ("i", "o", "i"))


def test_walk_tactic_hands_objects_python_cannot_order_to_the_reference():
    """A string and an int do not compare: the step goes to the general tactic, which puts numbers first."""
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x", schema=("i", "o"))
    cap = x._reduce_arranged(x.arrange(), ExtremeLogic("min"), tactic=WalkTactic).capture()
    x_in.update([(1, "b"), (1, "a"), (2, "c")], times=0)
    flow.advance_to(1)
    flow.run()
    x_in.update([(1, "a")], times=1, diffs=-1)
    flow.advance_to(2)
    flow.run()
    assert cap.contents(0) == {(1, "a"): 1, (2, "c"): 1}
    assert cap.contents(1) == {(1, "b"): 1, (2, "c"): 1}
    x_in.update([(1, 7)], times=2)
    flow.advance_to(3)
    flow.run()
    assert cap.contents(2) == {(1, 7): 1, (2, "c"): 1}


def test_numbered_top_k_past_its_pair_arrays_takes_the_reference(monkeypatch):
    """More (value, number) pairs than PAIRS_AT_MOST: the step goes to the general tactic, with the same output."""
    import ddflow.operators.reduce.walk as walk

    schedule = [([("x", (1, v), t, 1) for t, v in enumerate([5, 3, 9, 3, 1])], 6), ([("x", (1, 3), 6, -1)], 8)]
    want = _run_extreme(_walk_top, "row_number", GeneralTactic, schedule, ("i", "i"))
    general, went = GeneralTactic._retire, []

    def spied(self, *args):
        went.append(type(self).__name__)
        return general(self, *args)

    monkeypatch.setattr(GeneralTactic, "_retire", spied)
    assert _run_extreme(_walk_top, "row_number", WalkTactic, schedule, ("i", "i")) == want and not went
    monkeypatch.setattr(walk, "PAIRS_AT_MOST", 4)
    assert _run_extreme(_walk_top, "row_number", WalkTactic, schedule, ("i", "i")) == want and went


def _inner_updates(logic_name, tactic, schedule, schema):
    """The reduce's own output inside the loop, at loop times ``(t, i)``, consolidated per step."""
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x", schema=schema)
    logic, seen, out = EXTREMES[logic_name](), [], []
    step = 1 if logic.kind != "max" else -1

    def body(v):
        moved = v.map(lambda r: (r[0] // 2, r[1] + step, *r[2:])).concat(x)
        return moved._reduce_arranged(moved.arrange(), logic, tactic=tactic).inspect(seen.append)
    x.iterate(body, max_iterations=64).capture()
    for ups, frontier in schedule:
        for _, row, t, d in ups:
            x_in.update([row], times=t, diffs=d)
        flow.advance_to(frontier)
        flow.run()
        acc: dict = {}
        for row, t, d in seen:
            acc[(row, t)] = acc.get((row, t), 0) + d
        out.append(sorted((k, d) for k, d in acc.items() if d))
        seen.clear()
    return out


@settings(max_examples=40)
@given(logic=st.sampled_from(VALUED), schema=st.sampled_from([("i", "i"), ("i", "i", "b")]), data=st.data())
def test_walk_tactic_emits_the_references_updates_at_each_loop_time(logic, schema, data):
    """Inside the loop, not only after it: an update at the wrong iteration can still converge to the same fixed point."""
    row = st.tuples(st.integers(0, 15), st.integers(0, 15)) if len(schema) == 2 else \
        st.tuples(st.integers(0, 15), st.integers(0, 15), st.booleans())
    schedule = data.draw(schedules({"x": row}, max_updates=20, diffs=(1, 1, 1, -1)))
    try:
        want = _inner_updates(logic, GeneralTactic, schedule, schema)
    except NonConvergence:
        return
    assert _inner_updates(logic, WalkTactic, schedule, schema) == want



def test_walk_tactic_keeps_no_history_across_advances():
    """A key the last round of one advance read, seeded again in round 0 of the next.

    The history kept from that last round is compacted to its round, so it
    is wrong below it: the next advance reads the key from the trace.
    """
    schedule = [([("x", (1, 5), 0, 1)], 1), ([("x", (1, 5), 1, -1)], 2), ([("x", (1, 5), 2, 1)], 3)]
    for logic in VALUED:
        a = _run_extreme(_walk_loop, logic, WalkTactic, schedule, ("i", "i"))
        assert a == _run_extreme(_walk_loop, logic, GeneralTactic, schedule, ("i", "i"))
