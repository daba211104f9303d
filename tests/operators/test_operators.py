"""Every operator, alone, against a from-scratch oracle at every complete time.

Inputs are random signed updates (removals of absent records included) at
random data times 0..20 over small value domains, so keys collide and
multiplicities cancel, fed in a few frontier advances that each retire many
data times at once.  See ``tests/oracle.py``.
"""
from __future__ import annotations

from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow
import oracle as O
from ddflow.base.interner import Interner
from oracle import int_rows, run_scenario, schedules


def examples(n: int) -> settings:
    """``n`` examples under the default (ci) profile, proportionally fewer under ``dev``."""
    return settings(max_examples=max(5, n * settings.default.max_examples // 100), deadline=None)


EXAMPLES = examples(60)

PAIRS = {"a": int_rows(2)}
TWO = {"a": int_rows(2), "b": int_rows(2)}


def one(build, query, schedule, **kw):
    return run_scenario(["a"], build, query, schedule, **kw)


def two(build, query, schedule, **kw):
    return run_scenario(["a", "b"], build, query, schedule, **kw)


def in_loop(op, levels: int = 1):
    """``op`` evaluated inside ``levels`` nested loops (depth ``levels + 1`` times).

    Each body ignores its variable and computes ``op`` of the inputs entered
    into its scope, so every loop reaches its fixed point, ``op(input)``,
    after one round whatever the signs of the input.  Each variable starts
    as ``op`` one level further out, so it has the result's shape.
    Depth 2 exercises the loop kernels, depth 3 the general reduce path.
    """
    def build(*colls):
        def level(entered, remaining):
            res = op(*entered)
            if remaining == 0:
                return res
            return res.iterate(lambda v: level([c.enter(v.scope) for c in colls], remaining - 1))
        return level(list(colls), levels)
    return build


# -- stateless ------------------------------------------------------------------------------


@EXAMPLES
@given(schedules(PAIRS))
def test_map(schedule):
    fn = lambda r: (r[0] % 3, r[0] + r[1])
    one(lambda a: a.map(fn), lambda a: O.fmap(a, fn), schedule)


@EXAMPLES
@given(schedules(PAIRS))
def test_map_to_constant(schedule):
    # Many records collapse into one: their multiplicities must add up (and may cancel).
    one(lambda a: a.map(lambda r: (0,)), lambda a: O.fmap(a, lambda r: (0,)), schedule)


@EXAMPLES
@given(schedules(PAIRS))
def test_flat_map(schedule):
    fn = lambda r: [(r[0],)] * (r[1] % 3) + [(r[1] + 10,)]
    one(lambda a: a.flat_map(fn), lambda a: O.flat_map(a, fn), schedule)


@EXAMPLES
@given(schedules(PAIRS))
def test_filter(schedule):
    fn = lambda r: r[0] <= r[1]
    one(lambda a: a.filter(fn), lambda a: O.ffilter(a, fn), schedule)


@EXAMPLES
@given(schedules({"a": int_rows(3)}))
def test_project(schedule):
    one(lambda a: a.project(2, 0), lambda a: O.project(a, 2, 0), schedule)


@EXAMPLES
@given(schedules({"a": int_rows(3)}))
def test_project_single_field(schedule):
    one(lambda a: a.project(1), lambda a: O.project(a, 1), schedule)


@EXAMPLES
@given(schedules(PAIRS))
def test_map_columns(schedule):
    def cols(x, y):
        assert isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
        return x + y, x % 2
    one(lambda a: a.map_columns(cols), lambda a: O.fmap(a, lambda r: (r[0] + r[1], r[0] % 2)), schedule)


@EXAMPLES
@given(schedules(PAIRS))
def test_map_columns_single_array(schedule):
    one(lambda a: a.map_columns(lambda x, y: x * 10 + y), lambda a: O.fmap(a, lambda r: (r[0] * 10 + r[1],)), schedule)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", "c", ""]), st.booleans(),
                          st.sampled_from([-1, 1, 2])), max_size=12))
def test_map_columns_returns_inputs_as_they_came(rows):
    """An input column returned as it is keeps its codes (object values are not interned again); new ones are.

    Objects, bools and ints passed through beside a new object column and a
    new int column read as a row map would give them; only the new object
    column's values reach the interner.
    """
    flow = ddflow.Dataflow()
    a_in, a = flow.new_collection("a")
    out = a.map_columns(lambda n, s, b: (s, b, n, s + "!", n * 2)).capture()
    a_in.update([(n, s, b) for n, s, b, _ in rows], times=0, diffs=[d for *_, d in rows])
    encoded = []
    encode = Interner.encode
    with mock.patch.object(Interner, "encode", lambda it, vs, where="column": encoded.extend(vs) or encode(it, vs, where)):
        flow.advance_to(1)
        flow.run()
    expected: dict = {}
    for n, s, b, d in rows:
        r = (s, b, n, s + "!", n * 2)
        expected[r] = expected.get(r, 0) + d
    assert out.contents(0) == {r: d for r, d in expected.items() if d}
    assert sorted(encoded) == sorted(s + "!" for _, s, _, _ in rows)


def test_map_columns_inputs_are_read_only():
    """A column function cannot write into its input: a numeric column is the batch that other readers share."""
    flow = ddflow.Dataflow()
    a_in, a = flow.new_collection("a")

    def bump(x, y):
        x += 1
        return x, y

    bumped, plain = a.map_columns(bump).capture(), a.capture()
    a_in.update([(1, 2)], times=0)
    flow.advance_to(1)
    with pytest.raises(ValueError, match="read-only"):
        flow.run()
    assert plain.contents(0) in ({}, {(1, 2): 1}) and bumped.contents(0) == {}


@EXAMPLES
@given(schedules(PAIRS))
def test_filter_columns(schedule):
    one(lambda a: a.filter_columns(lambda x, y: x > y), lambda a: O.ffilter(a, lambda r: r[0] > r[1]), schedule)


@EXAMPLES
@given(schedules(PAIRS))
def test_negate(schedule):
    one(lambda a: a.negate(), O.negate, schedule)


@EXAMPLES
@given(schedules(TWO))
def test_concat(schedule):
    two(lambda a, b: a.concat(b), O.add, schedule)


@EXAMPLES
@given(schedules(TWO))
def test_concat_many_and_negate(schedule):
    # a + b - a = b, but with every update of a passing through.
    two(lambda a, b: a.concat(b, a.negate()), lambda a, b: b, schedule)


@EXAMPLES
@given(schedules(TWO))
def test_concat_same_collection_twice(schedule):
    two(lambda a, b: a.concat(a, b), lambda a, b: O.add(a, a, b), schedule)


@EXAMPLES
@given(schedules(PAIRS))
def test_consolidate(schedule):
    def check(flow, cap, frontier):
        ch = cap.changes()
        assert len({(r, t) for r, t, _ in ch}) == len(ch)
    one(lambda a: a.map(lambda r: (r[0] % 2,)).consolidate(), lambda a: O.fmap(a, lambda r: (r[0] % 2,)),
        schedule, check=check)


@EXAMPLES
@given(schedules(PAIRS))
def test_inspect(schedule):
    seen = []
    flow, cap = one(lambda a: a.inspect(seen.append), lambda a: a, schedule)
    # The inspected updates are exactly what passed through: they accumulate to the same thing.
    for t in range(flow.frontier):
        assert O.accumulate(seen, t) == cap.contents(t)
    for row, time, diff in seen:
        assert isinstance(row, tuple) and isinstance(time, int) and isinstance(diff, int)


@EXAMPLES
@given(schedules(PAIRS), st.booleans())
def test_per_row_insert_remove_equals_batched(schedule, per_row):
    one(lambda a: a.map(lambda r: (r[1], r[0])), lambda a: O.fmap(a, lambda r: (r[1], r[0])), schedule,
        per_row=per_row)


# -- arrangements and joins --------------------------------------------------------------------------


@EXAMPLES
@given(schedules(PAIRS))
def test_arrange_trace_holds_the_collection(schedule):
    """The shared trace accumulates, beyond its compaction frontier, to the input at frontier - 1."""
    arr = {}

    def build(a):
        arr["a"] = a.arrange()
        return arr["a"].as_collection()

    def check(flow, cap, frontier):
        if flow.workers > 1:
            return  # the traces live in the worker processes
        trace = arr["a"].trace
        got = trace.contents(frontier + 1000) if trace is not None else {}
        assert got == cap.contents(frontier - 1)

    one(build, lambda a: a, schedule, check=check)


@EXAMPLES
@given(schedules(TWO))
def test_join(schedule):
    two(lambda a, b: a.join(b), O.join, schedule)


@EXAMPLES
@given(schedules({"a": int_rows(2), "b": int_rows(3)}))
def test_join_wider_right(schedule):
    two(lambda a, b: a.join(b), O.join, schedule)


@EXAMPLES
@given(schedules({"a": int_rows(1), "b": int_rows(2)}))
def test_join_key_only_left(schedule):
    two(lambda a, b: a.join(b), O.join, schedule)


@EXAMPLES
@given(schedules(PAIRS))
def test_self_join(schedule):
    one(lambda a: a.join(a), lambda a: O.join(a, a), schedule)


@EXAMPLES
@given(schedules(TWO))
def test_join_shared_arrangements(schedule):
    """Two joins and a reduce read the same two arrangements."""
    def build(a, b):
        aa, bb = a.arrange(), b.arrange()
        j1 = aa.join(bb)
        j2 = bb.join(aa).map(lambda r: (r[0], r[2], r[1]))
        return j1.concat(j2.negate(), aa.reduce(lambda k, vals: [((len(vals),), 1)]).map(lambda r: (r[0], -1, r[1])))

    def query(a, b):
        lens = O.reduce(a, lambda k, vals: [((len(vals),), 1)])
        return O.add(O.join(a, b), O.negate(O.join(a, b)), O.fmap(lens, lambda r: (r[0], -1, r[1])))

    two(build, query, schedule)


@EXAMPLES
@given(schedules(TWO))
def test_semijoin(schedule):
    two(lambda a, b: a.semijoin(b), O.semijoin, schedule)


@EXAMPLES
@given(schedules(TWO))
def test_antijoin(schedule):
    two(lambda a, b: a.antijoin(b), O.antijoin, schedule)


@EXAMPLES
@given(schedules({"a": int_rows(2), "b": int_rows(1)}))
def test_semijoin_antijoin_by_key_collection(schedule):
    two(lambda a, b: a.semijoin(b).concat(a.antijoin(b).map(lambda r: (r[0] + 100, r[1]))),
        lambda a, b: O.add(O.semijoin(a, b), O.fmap(O.antijoin(a, b), lambda r: (r[0] + 100, r[1]))), schedule)


# -- the reduce family: at top level (vectorized / depth 1) and inside a loop (general path) ---------------

LOOP = pytest.mark.parametrize("looped", [0, 1, 2], ids=["top", "loop", "nested"])


def _maybe_loop(op, looped):
    return in_loop(op, looped)


def _sorted_repr(k, vals):
    # Depends on the order and the multiplicities: catches unsorted or zero-multiplicity input.
    assert vals == sorted(vals), vals
    assert all(m != 0 for _, m in vals), vals
    return [((repr(vals),), 1)]


def _spread(k, vals):
    # Several records, repeated values, multiplicities != 1 and a zero multiplicity (ignored).
    tot = sum(m for _, m in vals)
    return [((v[0] % 2,), m) for v, m in vals] + [((-1,), tot), ((-2,), 0)]


@LOOP
@EXAMPLES
@given(schedules(PAIRS))
def test_reduce_user_fn(looped, schedule):
    one(_maybe_loop(lambda a: a.reduce(_sorted_repr), looped), lambda a: O.reduce(a, _sorted_repr), schedule)


@LOOP
@EXAMPLES
@given(schedules(PAIRS))
def test_reduce_multi_output(looped, schedule):
    one(_maybe_loop(lambda a: a.reduce(_spread), looped), lambda a: O.reduce(a, _spread), schedule)


@LOOP
@EXAMPLES
@given(schedules(PAIRS))
def test_count(looped, schedule):
    one(_maybe_loop(lambda a: a.count(), looped), O.count, schedule)


@LOOP
@EXAMPLES
@given(schedules({"a": int_rows(1)}))
def test_count_key_only(looped, schedule):
    one(_maybe_loop(lambda a: a.count(), looped), O.count, schedule)


@LOOP
@EXAMPLES
@given(schedules(PAIRS))
def test_distinct(looped, schedule):
    one(_maybe_loop(lambda a: a.distinct(), looped), O.distinct, schedule)


@LOOP
@EXAMPLES
@given(schedules({"a": int_rows(1)}))
def test_distinct_key_only(looped, schedule):
    one(_maybe_loop(lambda a: a.distinct(), looped), O.distinct, schedule)


def _thr(c):
    return c * c if c > 1 else (-1 if c < 0 else 0)


@LOOP
@EXAMPLES
@given(schedules(PAIRS))
def test_threshold(looped, schedule):
    one(_maybe_loop(lambda a: a.threshold(_thr), looped), lambda a: O.threshold(a, _thr), schedule)


@LOOP
@EXAMPLES
@given(schedules(PAIRS))
def test_sum(looped, schedule):
    one(_maybe_loop(lambda a: a.sum(), looped), O.ssum, schedule)


@LOOP
@EXAMPLES
@given(schedules(PAIRS))
def test_min(looped, schedule):
    one(_maybe_loop(lambda a: a.min(), looped), O.smin, schedule)


@LOOP
@EXAMPLES
@given(schedules(PAIRS))
def test_max(looped, schedule):
    one(_maybe_loop(lambda a: a.max(), looped), O.smax, schedule)


@LOOP
@EXAMPLES
@given(schedules({"a": int_rows(3)}))
def test_min_max_multi_field_values(looped, schedule):
    one(_maybe_loop(lambda a: a.min().concat(a.max().map(lambda r: (r[0] + 100, r[1], r[2]))), looped),
        lambda a: O.add(O.smin(a), O.fmap(O.smax(a), lambda r: (r[0] + 100, r[1], r[2]))), schedule)


@LOOP
@pytest.mark.parametrize("k", [1, 2, 3])
@EXAMPLES
@given(schedules(PAIRS))
def test_top_k(looped, k, schedule):
    one(_maybe_loop(lambda a: a.top_k(k), looped), lambda a: O.top_k(a, k), schedule)


@EXAMPLES
@given(schedules(PAIRS))
def test_reduce_family_shares_one_arrangement(schedule):
    """count, min and a user reduce all read ``a``'s arrangement."""
    def build(a):
        return a.count().concat(a.min().map(lambda r: (r[0], r[1], -1)),
                                a.reduce(lambda k, vals: [((len(vals), -2), 1)]))

    def query(a):
        return O.add(O.count(a), O.fmap(O.smin(a), lambda r: (r[0], r[1], -1)),
                     O.reduce(a, lambda k, vals: [((len(vals), -2), 1)]))

    one(build, query, schedule)


# -- value kinds --------------------------------------------------------------------------------

WORDS = st.sampled_from(["ant", "bee", "cat", "dog"])


@LOOP
@EXAMPLES
@given(schedules({"a": st.tuples(WORDS, WORDS)}))
def test_string_min_max_use_string_order(looped, schedule):
    """Interned strings compare as strings, not by their codes (assigned in first-seen order)."""
    one(_maybe_loop(lambda a: a.min().concat(a.max()), looped), lambda a: O.add(O.smin(a), O.smax(a)), schedule)


@EXAMPLES
@given(schedules({"a": st.tuples(WORDS, st.integers(0, 3)), "b": st.tuples(WORDS, WORDS)}))
def test_strings_through_join_count_distinct(schedule):
    two(lambda a, b: a.join(b).count().concat(b.distinct().map(lambda r: (r[0], -1, r[1], 0))),
        lambda a, b: O.add(O.count(O.join(a, b)), O.fmap(O.distinct(b), lambda r: (r[0], -1, r[1], 0))), schedule)


@LOOP
@EXAMPLES
@given(schedules({"a": st.tuples(st.integers(0, 3), st.sampled_from([0.5, 1.25, -2.0]))}))
def test_float_sum(looped, schedule):
    one(_maybe_loop(lambda a: a.sum(), looped), O.ssum, schedule)


@LOOP
def test_sum_key_whose_record_counts_cancel(looped):
    """A key holding (k, 3) x1 and (k, 4) x-1 is a non-empty group (reduce semantics): its sum is -1.

    (Once a bug: the depth-1 and depth-2 (count, sum) kernels dropped such a key.)
    """
    flow = ddflow.Dataflow()
    h, a = flow.new_collection("a")
    cap = in_loop(lambda a: a.sum(), looped)(a).capture()
    h.update([(1, 3), (1, 4), (2, 5)], [0, 0, 0], [1, -1, 1])
    h.update([(1, 4)], [1], [1])  # now (1, 3) alone: the sum becomes 3
    flow.advance_to(2)
    flow.run()
    assert cap.contents(0) == {(1, -1): 1, (2, 5): 1}
    assert cap.contents(1) == {(1, 3): 1, (2, 5): 1}


BIG = st.sampled_from([-(2 ** 62), -1, 0, 1, 2 ** 62 - 1, 2 ** 63 - 1])


@LOOP
@EXAMPLES
@given(schedules({"a": st.tuples(BIG, BIG), "b": st.tuples(BIG, BIG)}))
def test_wide_int_ranges(looped, schedule):
    """Values whose ranges do not pack into one sort key take the lexsort paths."""
    two(_maybe_loop(lambda a, b: a.join(b).count().concat(a.min().map(lambda r: (r[0], r[1], 0, -1)),
                                                         a.distinct().map(lambda r: (r[0], r[1], 0, -2))), looped),
        lambda a, b: O.add(O.count(O.join(a, b)), O.fmap(O.smin(a), lambda r: (r[0], r[1], 0, -1)),
                           O.fmap(O.distinct(a), lambda r: (r[0], r[1], 0, -2))), schedule)


OBJ_KEYS = st.sampled_from([None, (1, 2), (1,), "x", b"x", ("x", None)])


@LOOP
@EXAMPLES
@given(schedules({"a": st.tuples(OBJ_KEYS, st.integers(0, 3)), "b": st.tuples(OBJ_KEYS, st.integers(0, 3))}))
def test_object_keys(looped, schedule):
    """None, tuples, bytes and str keys are interned: they join, count and reduce by equality."""
    two(_maybe_loop(lambda a, b: a.join(b).count().concat(a.max().map(lambda r: (r[0], r[1], -1, -1))), looped),
        lambda a, b: O.add(O.count(O.join(a, b)), O.fmap(O.smax(a), lambda r: (r[0], r[1], -1, -1))), schedule)


def test_bool_fields_round_trip():
    flow = ddflow.Dataflow()
    h, a = flow.new_collection("a")
    cap = a.count().capture()
    dcap = a.distinct().capture()
    h.update([(True, 1), (False, 2), (True, 1)], 0)
    flow.advance_to(1)
    flow.run()
    assert cap.contents(0) == {(True, 1, 2): 1, (False, 2, 1): 1}
    assert dcap.contents(0) == {(True, 1): 1, (False, 2): 1}


# -- input paths: tuples, Arrow tables, dicts of numpy columns ----------------------------------------

def feed_tuples(h, rows, times, diffs):
    h.update(rows, times, diffs)


def feed_arrow(h, rows, times, diffs):
    cols = list(zip(*rows))
    h.update(pa.table({f"f{i}": list(c) for i, c in enumerate(cols)}), times=np.array(times), diffs=np.array(diffs))


def feed_arrow_columns(h, rows, times, diffs):
    cols = list(zip(*rows))
    table = pa.table({"t": times, **{f"f{i}": list(c) for i, c in enumerate(cols)}, "d": diffs})
    h.update(table, times="t", diffs="d")


def feed_dict(h, rows, times, diffs):
    cols = list(zip(*rows))
    h.update({f"f{i}": np.array(c) for i, c in enumerate(cols)}, times=np.array(times), diffs=np.array(diffs))


FEEDS = {"tuples": feed_tuples, "arrow": feed_arrow, "arrow-columns": feed_arrow_columns, "dict": feed_dict}
MIXED = {"a": st.tuples(WORDS, st.integers(0, 3)), "b": st.tuples(WORDS, WORDS)}


def _words_pipeline(a, b):
    return a.join(b).count().concat(a.distinct().map(lambda r: (r[0], r[1], "-", 0)))


def _words_oracle(a, b):
    return O.add(O.count(O.join(a, b)), O.fmap(O.distinct(a), lambda r: (r[0], r[1], "-", 0)))


@pytest.mark.parametrize("fa,fb", [("arrow", "tuples"), ("dict", "arrow-columns"), ("arrow-columns", "dict"),
                                   ("dict", "dict")])
@examples(30)
@given(schedules(MIXED))
def test_arrow_and_dict_inputs(fa, fb, schedule):
    """Strings fed through Arrow or numpy columns are interned like tuples' strings: joins and counts match."""
    _, cap = two(_words_pipeline, _words_oracle, schedule, feed={"a": FEEDS[fa], "b": FEEDS[fb]})
    _, ref = two(_words_pipeline, _words_oracle, schedule)
    assert cap.changes() == ref.changes()


def test_arrow_strings_round_trip_through_join_and_count():
    flow = ddflow.Dataflow()
    hp, people = flow.new_collection("people")
    hc, cities = flow.new_collection("cities")
    joined = people.join(cities)  # (city, name, country)
    per_country = joined.project(2).count()
    jc, cc = joined.capture(), per_country.capture()
    hp.update(pa.table({"city": ["Oslo", "Lima", "Oslo", "Kyiv"], "name": ["ann", "bo", "cy", "di"],
                        "t": [0, 0, 1, 2]}), times="t")
    hc.update({"city": np.array(["Oslo", "Lima", "Kyiv"], dtype=object), "country": np.array(["NO", "PE", "UA"])},
              times=np.array([0, 0, 3]))
    hp.update([("Lima", "ed")], 2)
    hp.update(pa.table({"city": pa.array(["Oslo"]).dictionary_encode(), "name": pa.array(["ann"], pa.large_string())}),
              times=3, diffs=-1)
    flow.advance_to(4)
    flow.run()
    assert jc.contents(0) == {("Oslo", "ann", "NO"): 1, ("Lima", "bo", "PE"): 1}
    assert jc.contents(3) == {("Oslo", "cy", "NO"): 1, ("Lima", "bo", "PE"): 1, ("Lima", "ed", "PE"): 1,
                              ("Kyiv", "di", "UA"): 1}
    assert cc.contents(1) == {("NO", 2): 1, ("PE", 1): 1}
    assert cc.contents(3) == {("NO", 1): 1, ("PE", 2): 1, ("UA", 1): 1}
    out = cc.to_arrow(["country", "n"])
    assert out.column("country").type == pa.string()
    assert set(out.column("country").to_pylist()) == {"NO", "PE", "UA"}


# -- outputs and input conveniences -------------------------------------------------------------


def test_capture_frontier_probe_subscribe_drain():
    flow = ddflow.Dataflow()
    h, a = flow.new_collection("a")
    counted = a.count()
    cap = counted.capture()
    batches = []
    counted.subscribe(batches.append)
    probe = counted.probe()
    h.update([(1, 2), (1, 2), (3, 4)], [0, 1, 2])
    flow.advance_to(2)
    assert cap.frontier == 0 and not probe.done(0)  # advanced but not yet run: nothing is final
    flow.run()
    assert cap.frontier == 2 and probe.done(1) and not probe.done(2)
    assert cap.contents(1) == {(1, 2, 2): 1}
    flow.advance_to(3)
    flow.run()
    # The subscription saw exactly the captured changes, as Arrow tables.
    seen = [(r, t, d) for b in batches for r, t, d in zip(zip(b.column("c0").to_pylist(), b.column("c1").to_pylist(),
                                                              b.column("c2").to_pylist()),
                                                          b.column("time").to_pylist(), b.column("diff").to_pylist())]
    assert O.accumulate(seen, 2) == cap.contents(2) == {(1, 2, 2): 1, (3, 4, 1): 1}
    drained = cap.drain()
    assert sorted(drained, key=lambda c: (c[1], c[0])) == drained
    assert drained == [((1, 2, 1), 0, 1), ((1, 2, 1), 1, -1), ((1, 2, 2), 1, 1), ((3, 4, 1), 2, 1)]
    assert cap.changes() == []
    h.remove((3, 4), time=3)
    flow.advance_to(4)
    flow.run()
    assert cap.changes() == [((3, 4, 1), 3, -1)]
    assert cap.to_arrow(["k", "v", "n"]).column_names == ["k", "v", "n", "time", "diff"]


def test_upsert():
    flow = ddflow.Dataflow()
    h, a = flow.new_collection("kv")
    cap = a.capture()
    h.upsert((1, "a"), 0)
    h.upsert((2, "b"), 0)
    h.upsert((1, "c"), 3)
    h.upsert((1, "d"), 3)  # twice at one time: the last wins
    flow.advance_to(5)
    flow.run()
    assert cap.contents(2) == {(1, "a"): 1, (2, "b"): 1}
    assert cap.contents(4) == {(1, "d"): 1, (2, "b"): 1}
    with pytest.raises(ddflow.FrontierError, match="kv"):
        h.upsert((1, "e"), 2)
    h.upsert((1, "e"))  # no time: at the frontier
    flow.advance_to(6)
    flow.run()
    assert cap.contents(5) == {(1, "e"): 1, (2, "b"): 1}


def test_reduce_sees_values_of_mixed_types_and_none_in_one_order():
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    out = x.reduce(lambda key, vals: [((len(vals), vals[0][0][0]), 1)]).capture()
    x_in.update([(1, None), (1, "a"), (1, 2), (1, (3,))], times=0)
    flow.advance_to(1)
    flow.run()
    assert out.contents(0) == {(1, 4, None): 1}


@pytest.mark.parametrize("mode", ["map", "flat_map", "filter"])
def test_row_functions_dead_letter_what_raises(mode):
    """on_error="dead-letter": the updates whose function raised are dropped and recorded, the rest go on.

    A flat_map that yields before raising contributes nothing for that row.
    """
    from ddflow.operators.stateless import RowNode

    def fn(r):
        if r[1] == 0:
            if mode == "flat_map":
                return _yield_then_raise(r)
            raise ZeroDivisionError(f"no {r}")
        if mode == "filter":
            return r[0] % 2 == 0
        return (r[0], 10 // r[1]) if mode == "map" else [(r[0],), (10 // r[1],)]

    flow = ddflow.Dataflow()
    inp, coll = flow.new_collection("in")
    out = getattr(coll, mode)(fn).capture()
    node = next(n for n in flow.top.nodes if isinstance(n, RowNode))
    node.on_error = "dead-letter"
    data = [((i, i % 3), i % 4, 1 + i % 2) for i in range(30)]
    for r, t, d in data:
        inp.update([r], times=t, diffs=d)
    flow.advance_to(4)
    flow.run()
    want: dict = {}
    for r, t, d in data:
        if r[1] == 0:
            continue
        res = fn(r)
        rows = [r] if mode == "filter" and res else [] if mode == "filter" else [res] if mode == "map" else res
        for o in rows:
            want[o] = want.get(o, 0) + d
    assert out.contents(4) == {k: v for k, v in want.items() if v}
    failed = sorted((f["record"], f["time"], f["diff"]) for f in node.failed)
    assert failed == sorted((r, [t], d) for r, t, d in data if r[1] == 0)
    assert all("ZeroDivisionError" in f["traceback"] for f in node.failed)

    # The default policy stops the run and names the operator.
    flow2 = ddflow.Dataflow()
    inp2, coll2 = flow2.new_collection("in")
    getattr(coll2, mode)(fn).capture()
    inp2.update([(1, 0)], times=0)
    flow2.advance_to(1)
    with pytest.raises(ZeroDivisionError, match="operator"):
        flow2.run()


def _yield_then_raise(r):
    yield (r[0],)
    raise ZeroDivisionError(f"no {r}")
