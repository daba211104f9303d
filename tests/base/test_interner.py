"""The interner frees codes nothing holds, reuses them, and never frees one still read.

A string-keyed sliding window (keys ever new, or coming back after they
were freed) runs through the engine against a plain-Python oracle at every
step, with the interner's size bounded by a small multiple of the window
(without collection it grows with every key ever seen, so the bound
fails).  A capture that is never drained keeps its codes.
"""
from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.base.interner import Interner
from ddflow.graph.scope import collect_codes


# -- the interner alone ----------------------------------------------------------------

def test_collect_frees_unheld_codes_and_reuses_the_smallest_first():
    it = Interner(collect_after=None)
    vals = ["a", "b", ("t", 1), "d", "e", 1, 1.0, True]
    codes = it.encode(vals)
    assert codes.tolist() == list(range(8))
    assert it.decode(codes).tolist() == vals  # fills the decode cache
    it._check()
    freed = it.collect([np.array([1, 3, 3]), np.array([6])])  # keep "b", "d", 1.0
    it._check()
    assert freed == 5 and len(it) == 3 and it.capacity == 7  # code 7 (True) was trailing: cut off
    assert "a" not in it and "b" in it and 1 not in it and 1.0 in it
    with pytest.raises(KeyError):
        it.value(0)
    # New values take the freed codes, smallest first; the cache decodes the new values.
    new = it.encode([("u", 2), "f", "b", "g", "h", "i"])
    assert new.tolist() == [0, 2, 1, 4, 5, 7]
    it._check()
    assert it.decode(np.array([0, 1, 2, 3, 4, 5, 6, 7])).tolist() == [("u", 2), "b", "f", "d", "g", "h", 1.0, "i"]
    assert it.value(0) == ("u", 2) and it.code("a") == 8  # a freed value comes back with a fresh code
    it._check()


def test_collect_of_nothing_held_empties_and_shrinks():
    it = Interner(collect_after=None)
    it.encode([f"s{i}" for i in range(1000)])
    it.decode(np.arange(1000))
    assert it.collect([]) == 1000
    it._check()
    assert len(it) == 0 and it.capacity == 0 and len(it._decoded) <= 32
    assert it.encode(["x"]).tolist() == [0]
    it._check()


def test_a_freed_code_still_held_is_an_internal_error():
    it = Interner(collect_after=None)
    it.encode(["a", "b"])
    it.collect([np.array([1])])
    with pytest.raises(ddflow.DataflowError, match="freed earlier"):
        it.collect([np.array([0, 1])])


def test_due_waits_for_the_live_count_to_double():
    it = Interner(collect_after=4)
    it.encode(["a", "b", "c"])
    assert not it.due()
    it.code("d")
    assert it.due()
    it.collect([np.array([0, 1, 2, 3])])  # all four live: the next one waits for four more
    it.encode(["e", "f", "g"])
    assert not it.due()
    it.code("h")
    assert it.due()
    it.collect_after = None
    assert not it.due()


def test_hashed_mode_forgets_unheld_values_and_keeps_codes():
    """Hashed codes are content-derived: a collection forgets unheld values, and a value met again gets its code back."""
    it = Interner(hashed=True, collect_after=1)
    codes = it.encode(["a", "b", "c"])
    assert it.due()
    assert it.collect([codes[[0, 2]]]) == 1
    it._check()
    assert len(it) == 2 and "b" not in it and it.decode(codes[[0, 2]]).tolist() == ["a", "c"]
    with pytest.raises(KeyError, match="no value for code"):
        it.decode(codes[[1]])
    assert it.code("b") == codes[1] and it.decode(codes).tolist() == ["a", "b", "c"]
    assert it.collect([]) == 3 and len(it) == 0
    it._check()


# -- through the engine ------------------------------------------------------------------

K, W, STEPS = 8, 5, 120  # keys per step, window (steps), steps


def window_rows(t: int, period: int | None) -> list[tuple[str, str]]:
    """The K records inserted at step ``t``: new keys, or keys that come back every ``period`` steps."""
    s = t if period is None else t % period
    return [(f"key-{s}-{j}", f"v{s}-{j % 2}") for j in range(K)]


def expected(live: Counter) -> dict[str, dict]:
    """Every output of :func:`build`, from scratch."""
    rows = [r for r, m in live.items() for _ in range(m)]
    by_val: dict[str, list[str]] = {}
    for k, v in rows:
        by_val.setdefault(v, []).append(k)
    return {
        "count": dict(Counter((k, n) for k, n in Counter(k.upper() for k, _ in rows).items())),
        "join": dict(Counter((v, k1, k2) for v, ks in by_val.items() for k1 in ks for k2 in ks)),
        "minkey": {(v, min(ks) + "!"): 1 for v, ks in by_val.items()},
        "distinct": {(v,): 1 for v in by_val},
    }


def build(flow: ddflow.Dataflow):
    ev_in, ev = flow.new_collection("events")
    by_val = ev.map(lambda r: (r[1], r[0]))
    outs = {
        # Keys made inside the dataflow: their codes are held by the count's arrangement alone.
        "count": ev.map(lambda r: (r[0].upper(),)).count().capture(),
        "join": by_val.join(by_val).capture(),
        # A user reduce (the general tactic) over object keys, making new strings of its own.
        "minkey": by_val.reduce(lambda v, keys: [((min(k for (k,), _ in keys) + "!",), 1)]).capture(),
        "distinct": ev.project(1).distinct().capture(),
    }
    return ev_in, outs


def accumulate(acc: dict, drained: list) -> None:
    for row, _, d in drained:
        acc[row] = acc.get(row, 0) + d
        if not acc[row]:
            del acc[row]


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("period", [None, 3 * W], ids=["new-keys", "keys-come-back"])
def test_string_keyed_sliding_window_holds_a_bounded_interner(period, workers):
    """With two workers every process collects at once (hashed codes): the driver's and each worker's interner."""
    flow = ddflow.Dataflow(workers=workers)
    flow.interner.collect_after = 64  # before the fork: the workers' interners take it too
    ev_in, outs = build(flow)
    live: Counter = Counter()
    got = {name: {} for name in outs}
    came_back = 0
    for t in range(STEPS):
        rows = window_rows(t, period)
        if t == 0:
            ev_in.update(rows, times=0)
        # The next step's records wait in the input's queue (they are in no trace yet), and so do
        # the retractions: both keep their codes.
        ahead = window_rows(t + 1, period)
        came_back += sum(1 for k, _ in ahead if t + 1 >= (period or STEPS) and k not in flow.interner)
        ev_in.update(ahead, times=t + 1)
        ev_in.update(rows, times=t + W, diffs=-1)
        live.update(rows)
        if t >= W:
            live.subtract(window_rows(t - W, period))
            live = +live
        flow.advance_to(t + 1)
        flow.run()
        want = expected(live)
        for name, cap in outs.items():
            accumulate(got[name], cap.drain())
            assert got[name] == want[name], (name, t)
        # Live: K*W keys, a few values, derived strings; plus what awaits the next collection.
        assert len(flow.interner) <= 12 * K * W, t
        assert flow.interner.capacity <= 12 * K * W, t
        if workers > 1 and t % 30 == 29:
            for st in flow.worker_stats():
                assert st["interner_values"] <= 12 * K * W and st["interner_collections"] >= 1, (t, st)
    flow.interner._check()
    assert flow.interner.collections >= 3
    flow.close()
    if period is not None:
        assert came_back > K  # freed values were interned again, and decoded right above


def test_a_capture_never_drained_keeps_its_codes():
    flow = ddflow.Dataflow()
    flow.interner.collect_after = 32
    ev_in, ev = flow.new_collection("events")
    kept = ev.capture()  # never drained: every value it saw must still decode
    counts = ev.project(0).count().capture()
    history = []
    for t in range(60):
        rows = window_rows(t, None)
        ev_in.update(rows, times=t)
        if t >= W:
            ev_in.update(window_rows(t - W, None), times=t, diffs=-1)
        history.append(rows)
        flow.advance_to(t + 1)
        flow.run()
        counts.drain()  # output decoded at once: the count's codes may go
        # Force a collection now and then: only the undrained capture holds the old keys.
        if t % 7 == 0:
            collect_codes(flow.top, force=True)
            flow.interner._check()
    assert flow.interner.collections >= 8
    for t in (0, 10, 33, 59):
        want = Counter(r for s in range(max(0, t - W + 1), t + 1) for r in history[s])
        assert kept.contents(t) == dict(want)
    assert kept.changes()[0] == (window_rows(0, None)[0], 0, 1)


def test_string_reachability_in_a_loop_over_a_sliding_window():
    """Strings through a loop (enter, variable, join, distinct at loop times, leave), old edges retracted."""
    flow = ddflow.Dataflow()
    flow.interner.collect_after = 16
    edges_in, edges = flow.new_collection("edges")
    roots_in, roots = flow.new_collection("roots")
    reach = roots.iterate(lambda r: r.join(edges).project(1).concat(roots).distinct()).capture()
    roots_in.insert(("root",), time=0)
    live: Counter = Counter()
    got: dict = {}

    def chain(t: int) -> list[tuple[str, str]]:
        names = ["root"] + [f"n{t}-{i}" for i in range(3)]
        return list(zip(names, names[1:]))

    for t in range(50):
        edges_in.update(chain(t), times=t)
        edges_in.update(chain(t), times=t + 4, diffs=-1)
        live.update(chain(t))
        if t >= 4:
            live.subtract(chain(t - 4))
            live = +live
        flow.advance_to(t + 1)
        flow.run()
        accumulate(got, reach.drain())
        seen, todo = {"root"}, ["root"]
        while todo:
            a = todo.pop()
            for (x, y) in live:
                if x == a and y not in seen:
                    seen.add(y)
                    todo.append(y)
        assert got == {(n,): 1 for n in seen}, t
        assert len(flow.interner) <= 20 * 3 * 4, t
    flow.interner._check()
    assert flow.interner.collections >= 3


_SCALARS = st.one_of(st.integers(-2, 2), st.booleans(), st.sampled_from([0.0, -0.0, 1.0]),
                     st.builds(float, st.just("nan")), st.sampled_from(["", "a", "b"]))  # each NaN a new object


def _same(v):
    """What makes two values one in an object column: the type, then the value with one NaN and 0.0 for -0.0."""
    def norm(x):
        if isinstance(x, float):
            return ("nan",) if x != x else x + 0.0
        return tuple(norm(y) for y in x) if isinstance(x, tuple) else x  # inside a tuple, 1 == True == 1.0
    return type(v).__name__, norm(v)


def _negative_zero_or_unshared_nan(v, nan):
    if isinstance(v, float):
        return (v == 0.0 and math.copysign(1.0, v) < 0) or (v != v and v is not nan)
    return isinstance(v, tuple) and any(_negative_zero_or_unshared_nan(x, nan) for x in v)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["str", "tuple", "mixed"]), st.data(), st.booleans())
def test_encode_gives_equal_values_one_code_whichever_path(shape, data, hashed):
    """Codes are equal exactly when values are one in an object column, deduplicated in C or value by value.

    Strings are looked up in C; a column of only tuples that repeats is
    deduplicated in C first; tuples equal in Python (1 and True, 0.0 and -0.0 inside) share
    a code, every NaN is one NaN, the values decoded are the canonical ones,
    and codes come in first-seen order as value by value.  A column of
    mixed types takes the value-by-value path (1, True and 1.0 differ).
    """
    if shape == "str":
        values = data.draw(st.lists(st.sampled_from(["", "a", "b", "é"]), max_size=20))
    elif shape == "tuple":
        values = data.draw(st.lists(st.tuples(_SCALARS, _SCALARS), max_size=20))
    else:
        values = data.draw(st.lists(st.one_of(_SCALARS, st.tuples(_SCALARS)), max_size=20))
        values = [("a",), ("a",), ("a",)] + values  # a tuple first, repeated: the C dedupe is considered
    seen = data.draw(st.lists(st.sampled_from(values), max_size=3)) if values else []
    fast, slow = Interner(hashed=hashed), Interner(hashed=hashed)
    free = not hashed and data.draw(st.booleans(), label="free all codes but 0")  # new values reuse them
    for it in (fast, slow):
        it._encode_each(list(seen), "column")
        if free and len(it):
            live = len(it)
            assert it.collect([np.zeros(1, dtype=np.int64)]) == live - 1
    codes = fast.encode(values).tolist()
    assert codes == slow._encode_each(list(values), "column").tolist()
    keys = [_same(v) for v in values]
    assert all((codes[i] == codes[j]) == (keys[i] == keys[j]) for i in range(len(values)) for j in range(i))
    decoded = fast.decode(np.array(codes, dtype=np.int64)).tolist()
    nan = fast.decode(fast.encode([float("nan")]))[0]
    assert [_same(v) for v in decoded] == keys and not any(_negative_zero_or_unshared_nan(v, nan) for v in decoded)


def test_encode_names_an_unhashable_value_inside_a_tuple():
    with pytest.raises(ddflow.SchemaError, match=r"where: unsupported field value \(1, \[2\]\)"):
        Interner().encode([(1, 2), (1, [2])], "where")
