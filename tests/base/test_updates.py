"""Columnar updates: consolidation, packing, interning and conversions."""
from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.base.consolidate import consolidate, group_starts, pack_keys
from ddflow.base.interner import Interner
from ddflow.base.kinds import infer_kind
from ddflow.base.updates import Updates, check_diffs, from_arrow, from_rows

# -- references --------------------------------------------------------------------------


def ref_consolidate(rows, times, diffs) -> dict:
    acc: dict = defaultdict(int)
    for r, t, d in zip(rows, times, diffs):
        acc[(tuple(r), tuple(t) if isinstance(t, (tuple, list)) else (t,))] += d
    return {k: v for k, v in acc.items() if v != 0}


def as_dict(u: Updates, interner: Interner) -> dict:
    out = {}
    for r, t, d in u.to_rows(interner):
        key = (r, t if isinstance(t, tuple) else (t,))
        assert key not in out, "consolidated output has a duplicate (data, time)"
        assert d != 0, "consolidated output has a zero diff"
        out[key] = d
    return out


def assert_sorted(u: Updates) -> None:
    """Rows in strictly increasing (cols, times) order."""
    keys = list(u.cols) + [u.times[:, j] for j in range(u.depth)]
    rows = list(zip(*(k.tolist() for k in keys)))
    assert all(a < b for a, b in zip(rows, rows[1:])), "consolidated output is not sorted"


# -- strategies ----------------------------------------------------------------------------

SMALL_INT = st.integers(-3, 3)
BIG_INT = st.sampled_from([-(1 << 63), -(1 << 62), -1, 0, 1, (1 << 62), (1 << 63) - 1])
FLOAT = st.sampled_from([-1.5, -0.0, 0.0, 0.25, 1.0, 3.5, math.inf, -math.inf, math.nan])
WORD = st.sampled_from(["", "a", "b", "ab", "ba", "é", "zz"])


@st.composite
def batches(draw, field=SMALL_INT, arity=None, depth=None, max_size=40):
    arity = draw(st.integers(1, 3)) if arity is None else arity
    depth = draw(st.integers(1, 3)) if depth is None else depth
    n = draw(st.integers(0, max_size))
    rows = [tuple(draw(field) for _ in range(arity)) for _ in range(n)]
    # Few distinct rows and times, so that consolidation has work to do.
    if n > 4:
        rows = [rows[draw(st.integers(0, 3))] if draw(st.booleans()) else r for r in rows]
    times = [tuple(draw(st.integers(0, 2)) for _ in range(depth)) for _ in range(n)]
    diffs = [draw(st.integers(-2, 2)) for _ in range(n)]
    return rows, times, diffs, depth


def build(rows, times, diffs, depth, interner, kinds=None):
    return from_rows(rows, times if rows else np.zeros((0, depth), dtype=np.int64), diffs, interner,
                     kinds=kinds, depth=depth)


def nan_safe(d: dict) -> dict:
    """Replace NaN by a sentinel so dict comparison treats all NaNs as one value."""
    def fix(x):
        return "NaN" if isinstance(x, float) and math.isnan(x) else x
    out = {}
    for (r, t), c in d.items():
        k = (tuple(fix(v) for v in r), t)
        assert k not in out, f"two entries for {k}: NaN or -0.0 rows were not consolidated"
        out[k] = c
    return out


# -- consolidation ---------------------------------------------------------------------------


@settings(max_examples=200)
@given(batches(), st.booleans())
def test_consolidate_int_matches_dict(b, runs):
    rows, times, diffs, depth = b
    interner = Interner()
    u = build(rows, times, diffs, depth, interner, kinds=("i",) * (len(rows[0]) if rows else 1))
    if not rows:
        return
    c = consolidate(u, runs=runs)
    assert as_dict(c, interner) == ref_consolidate(rows, times, diffs)
    assert_sorted(c)
    assert c.kinds == u.kinds and c.depth == depth


@settings(max_examples=150)
@given(batches(field=BIG_INT, max_size=30), st.booleans())
def test_consolidate_unpackable_uses_lexsort_fallback(b, runs):
    rows, times, diffs, depth = b
    if not rows:
        return
    interner = Interner()
    u = build(rows, times, diffs, depth, interner, kinds=("i",) * len(rows[0]))
    c = consolidate(u, runs=runs)
    assert as_dict(c, interner) == ref_consolidate(rows, times, diffs)
    assert_sorted(c)


def test_ranges_too_wide_to_pack_still_consolidate():
    big = np.array([-(1 << 62), 1 << 62, 0, 1 << 62], dtype=np.int64)
    small = np.array([5, 3, 5, 3], dtype=np.int64)
    u = Updates((big, small), np.array([[1], [0], [1], [0]]), np.array([1, 1, 1, -1]), ("i", "i"))
    assert pack_keys([big, small]) is None
    for runs in (False, True):
        c = consolidate(u, runs=runs)
        assert c.cols[0].tolist() == [-(1 << 62), 0]
        assert c.diffs.tolist() == [1, 1]


@settings(max_examples=150)
@given(st.lists(st.tuples(st.integers(-(1 << 20), 1 << 20), st.integers(0, 3), st.integers(-50, 50)), min_size=1, max_size=40))
def test_pack_keys_preserves_lexicographic_order(rows):
    cols = [np.array(c, dtype=np.int64) for c in zip(*rows)]
    packed = pack_keys(cols)
    assert packed is not None
    for i in range(len(rows)):
        for j in range(len(rows)):
            assert (rows[i] < rows[j]) == (packed[i] < packed[j])
            assert (rows[i] == rows[j]) == (packed[i] == packed[j])


def test_pack_keys_refuses_what_does_not_fit():
    assert pack_keys([np.array([0.5, 1.0])]) is None
    assert pack_keys([np.array([0, 1 << 40]), np.array([0, 1 << 30])]) is None
    assert pack_keys([np.array([0, 1 << 30]), np.array([0, 1 << 30])]) is not None
    full = np.array([-(1 << 63), (1 << 63) - 1], dtype=np.int64)
    assert pack_keys([full]).tolist() == full.tolist()  # one column is its own key
    assert pack_keys([np.zeros(0, dtype=np.int64)]) is None


@settings(max_examples=150)
@given(batches(field=FLOAT, depth=1, max_size=30), st.booleans())
def test_consolidate_float_column_matches_dict(b, runs):
    rows, times, diffs, depth = b
    if not rows:
        return
    interner = Interner()
    u = build(rows, times, diffs, depth, interner, kinds=("f",) * len(rows[0]))
    c = consolidate(u, runs=runs)
    # -0.0 == 0.0 and NaN is one value: normalise the reference the same way.
    norm = [tuple(0.0 if v == 0 else v for v in r) for r in rows]
    expect = nan_safe(ref_consolidate(norm, times, diffs))
    got = nan_safe({(tuple(0.0 if v == 0 else v for v in r), t): d for (r, t), d in as_dict(c, interner).items()})
    assert got == expect


@settings(max_examples=150)
@given(batches(field=WORD, max_size=30))
def test_consolidate_interned_strings_matches_dict(b):
    rows, times, diffs, depth = b
    if not rows:
        return
    interner = Interner(["zz", "a"])  # codes not in string order
    u = build(rows, times, diffs, depth, interner)
    assert set(u.kinds) == {"o"}
    c = consolidate(u)
    assert as_dict(c, interner) == ref_consolidate(rows, times, diffs)


@settings(max_examples=100)
@given(st.lists(st.tuples(st.integers(-2, 2), st.sampled_from([0.5, -1.0, 2.0]), WORD, st.booleans()), min_size=1, max_size=30),
       st.lists(st.integers(-1, 1), min_size=30, max_size=30))
def test_consolidate_mixed_kinds(rows, diffs):
    interner = Interner()
    times = [0] * len(rows)
    diffs = diffs[: len(rows)]
    u = from_rows(rows, times, diffs, interner)
    assert u.kinds == ("i", "f", "o", "b")
    c = consolidate(u)
    assert as_dict(c, interner) == ref_consolidate(rows, times, diffs)
    for r, _, _ in c.to_rows(interner):
        assert type(r[0]) is int and type(r[1]) is float and type(r[2]) is str and type(r[3]) is bool


def test_consolidate_cancels_to_empty_and_keeps_kinds():
    interner = Interner()
    u = from_rows([("x", 1.5), ("x", 1.5)], [3, 3], [1, -1], interner)
    c = consolidate(u)
    assert len(c) == 0 and c.kinds == ("o", "f") and c.depth == 1
    assert consolidate(Updates.empty(("i",), 2)).depth == 2


def test_group_starts():
    a = np.array([1, 1, 2, 2, 2, 5])
    b = np.array([0, 1, 1, 1, 2, 2])
    assert group_starts([a]).tolist() == [0, 2, 5]
    assert group_starts([a, b]).tolist() == [0, 1, 2, 4, 5]
    assert group_starts([], a).tolist() == [0, 2, 5]
    assert group_starts([np.zeros(0)]).tolist() == []
    assert group_starts([np.array([np.nan, np.nan, 1.0])]).tolist() == [0, 2]


# -- interner --------------------------------------------------------------------------------


def test_interner_round_trip_keeps_types_apart():
    values = ["a", b"a", ("a", 1), None, 1, 1.0, True, (1, 2), (), frozenset({1}), "a", 1]
    i = Interner()
    codes = i.encode(values)
    assert codes.dtype == np.int64
    assert codes[0] == codes[10] and codes[4] == codes[11]
    assert len({int(codes[k]) for k in (4, 5, 6)}) == 3  # 1, 1.0, True are different values
    decoded = i.decode(codes).tolist()
    assert decoded == values
    assert [type(v) for v in decoded] == [type(v) for v in values]
    assert i.values()[: len(i)] == i.values() and len(i) == 10
    assert i.value(int(codes[2])) == ("a", 1)
    # Codes are stable across a checkpoint of the value list.
    j = Interner(i.values())
    assert j.encode(values).tolist() == codes.tolist()


def test_interner_decode_tuples_of_equal_length():
    i = Interner([(1, 2)])
    assert i.decode(np.array([0, 0])).tolist() == [(1, 2), (1, 2)]
    i.encode([(3, 4), (5, 6)])
    assert i.decode(np.array([2, 0])).tolist() == [(5, 6), (1, 2)]


def test_interner_encode_arrow_with_nulls():
    i = Interner(["b"])
    arr = pa.chunked_array([pa.array(["a", None, "b"]), pa.array(["a", "c", None])])
    codes = i.encode_arrow(arr)
    assert i.decode(codes).tolist() == ["a", None, "b", "a", "c", None]
    assert codes[2] == 0
    assert i.encode_arrow(pa.array([], type=pa.string())).tolist() == []
    assert i.decode(i.encode_arrow(pa.array([None, None], type=pa.string()))).tolist() == [None, None]


def test_interner_rejects_unhashable_naming_where():
    with pytest.raises(TypeError, match=r"edges field 1: unsupported field value \[1, 2\] of type list"):
        Interner().encode(["ok", [1, 2]], where="edges field 1")


# -- conversions -------------------------------------------------------------------------------


def test_infer_kind():
    assert infer_kind([1, 2]) == "i"
    assert infer_kind([1, 2.5]) == "f"
    assert infer_kind([True, False]) == "b"
    assert infer_kind([True, 1]) == "o"
    assert infer_kind(["a"]) == "o"
    assert infer_kind([None, 1]) == "o"
    assert infer_kind([1 << 70]) == "o"
    assert infer_kind([np.int32(3), np.float32(1.0)]) == "f"
    assert infer_kind([]) == "i"


@settings(max_examples=100)
@given(
    st.lists(st.tuples(st.integers(-(1 << 63), (1 << 63) - 1), st.floats(allow_nan=False), st.booleans(),
                       st.one_of(st.none(), st.text(max_size=3), st.tuples(st.integers(0, 3)))),
             max_size=20),
    st.sampled_from([1, 2]),
)
def test_from_rows_to_rows_round_trip(rows, depth):
    interner = Interner()
    n = len(rows)
    times = [tuple(range(k, k + depth)) if depth > 1 else k for k in range(n)]
    diffs = [(-1) ** k * (k + 1) for k in range(n)]
    kinds = ("i", "f", "b", "o")
    u = from_rows(rows, times if n else np.zeros((0, depth), dtype=np.int64), diffs, interner, kinds=kinds, depth=depth)
    assert u.kinds == kinds and len(u) == n and u.depth == depth
    assert u.to_rows(interner) == list(zip(rows, times, diffs))
    # Arrow round trip: decode, then re-encode through the same interner.
    if all(isinstance(r[3], str) or r[3] is None for r in rows):
        names = ["i", "f", "b", "o"]
        table = u.to_arrow(interner, names)
        time_cols = ["time"] if depth == 1 else [f"time_{j}" for j in range(depth)]
        assert table.column_names == names + time_cols + ["diff"]
        t = np.stack([table.column(c).to_numpy() for c in time_cols], axis=1)
        v = from_arrow(table, interner, columns=names, time=t, diff="diff", kinds=kinds)
        assert v.to_rows(interner) == u.to_rows(interner)


def test_from_rows_times_broadcast_and_defaults():
    interner = Interner()
    u = from_rows([(1,), (2,)], 7, 1, interner)
    assert u.times.tolist() == [[7], [7]] and u.diffs.tolist() == [1, 1]
    v = from_rows([(1,), (2,)], (3, 4), [1, -1], interner, depth=2)
    assert v.times.tolist() == [[3, 4], [3, 4]]
    e = from_rows([], 0, [], interner, kinds=("i", "o"))
    assert len(e) == 0 and e.kinds == ("i", "o")


def test_from_arrow_types_and_time_arrays():
    interner = Interner()
    ts = pa.array([dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2)], type=pa.timestamp("us"))
    table = pa.table({"k": pa.array([1, 2], pa.int32()), "when": ts, "w": [0.5, 1.5], "ok": [True, False],
                      "s": ["x", "y"], "t": [10, 11], "d": [1, -2]})
    u = from_arrow(table, interner, time="t", diff="d")
    assert u.kinds == ("i", "i", "f", "b", "o")
    assert u.times.ravel().tolist() == [10, 11] and u.diffs.tolist() == [1, -2]
    assert u.cols[1].tolist() == [1704067200000000, 1704153600000000]
    assert u.to_rows(interner)[0] == ((1, 1704067200000000, 0.5, True, "x"), 10, 1)
    # Times as an array (no time column), columns inferred, one diff for all.
    u2 = from_arrow(table.select(["k", "s"]), interner, time=np.array([5, 6]))
    assert u2.kinds == ("i", "o") and u2.times.ravel().tolist() == [5, 6] and u2.diffs.tolist() == [1, 1]
    u3 = from_arrow(table.to_batches()[0], interner, columns=["s"], time=np.array([[0, 1], [2, 3]]), diff=np.array([3, 4]))
    assert u3.depth == 2 and u3.times.tolist() == [[0, 1], [2, 3]] and u3.diffs.tolist() == [3, 4]


def test_concat():
    a = Updates((np.array([1]),), np.array([[0]]), np.array([1]), ("i",))
    b = Updates((np.array([2, 3]),), np.array([[1], [2]]), np.array([1, 1]), ("i",))
    assert Updates.concat([a, b]).cols[0].tolist() == [1, 2, 3]
    assert Updates.concat([a]) is a
    assert len(Updates.concat([Updates.empty(("i",), 1), Updates.empty(("i",), 1)])) == 0
    with pytest.raises(ValueError, match="at least one batch"):
        Updates.concat([])
    with pytest.raises(TypeError, match="column kinds"):
        Updates.concat([a, Updates((np.array([1.0]),), np.array([[0]]), np.array([1]), ("f",))])
    with pytest.raises(ValueError, match="mixed time depths"):
        Updates.concat([a, Updates((np.array([1]),), np.array([[0, 0]]), np.array([1]), ("i",))])


# -- errors -------------------------------------------------------------------------------------


def test_unsupported_field_type_names_the_field():
    with pytest.raises(TypeError, match=r"edges field 1: unsupported field value \[2\] of type list"):
        from_rows([(1, [2])], 0, 1, Interner(), where="edges")
    with pytest.raises(TypeError, match="field 0: unsupported field value {} of type dict"):
        from_rows([({},)], 0, 1, Interner())


def test_values_that_do_not_fit_the_declared_kind():
    interner = Interner()
    with pytest.raises(TypeError, match=r"field 0: '5' .*int"):
        from_rows([("5",)], 0, 1, interner, kinds=("i",))
    with pytest.raises(TypeError, match=r"field 0: .*1\.5.* in an int column"):
        from_rows([(np.float64(1.5),)], 0, 1, interner, kinds=("i",))
    with pytest.raises(TypeError, match=r"field 0: 2\.5 .*int"):
        from_rows([(2.5,)], 0, 1, interner, kinds=("i",))
    with pytest.raises(TypeError, match=r"field 0: 'x' .*float"):
        from_rows([("x",)], 0, 1, interner, kinds=("f",))
    with pytest.raises(TypeError, match="field 0: .*bool"):
        from_rows([(2,)], 0, 1, interner, kinds=("b",))
    with pytest.raises(TypeError, match="column 'w' has Arrow type double, expected int64"):
        from_arrow(pa.table({"w": [0.5]}), interner, time=np.array([0]), kinds=("i",))
    with pytest.raises(TypeError, match="column 's' has Arrow type string"):
        from_arrow(pa.table({"s": ["a"]}), interner, time=np.array([0]), kinds=("i",))
    with pytest.raises(TypeError, match="column 'k' has nulls"):
        from_arrow(pa.table({"k": [1, None]}), interner, time=np.array([0, 0]))


def test_non_integer_diffs_are_rejected():
    interner = Interner()
    with pytest.raises(TypeError, match="edges: diffs must be integers, got dtype float64"):
        from_rows([(1,)], 0, 1.5, interner, where="edges")
    with pytest.raises(TypeError, match="diffs must be integers"):
        from_rows([(1,), (2,)], 0, [1, 0.5], interner)
    with pytest.raises(TypeError, match="diffs must be integers"):
        from_rows([(1,)], 0, ["1"], interner)
    with pytest.raises(TypeError, match="diffs must be integers"):
        from_rows([(1,)], 0, [True], interner)
    with pytest.raises(TypeError, match="diffs must be integers"):
        from_arrow(pa.table({"k": [1], "d": [1.0]}), interner, time=np.array([0]), diff="d")
    assert check_diffs([1, 2], 2, "x").dtype == np.int64
    assert check_diffs(np.array([1, 2], dtype=object), 2, "x").tolist() == [1, 2]


def test_shape_errors_name_what_is_wrong():
    interner = Interner()
    with pytest.raises(ValueError, match=r"row \(1, 2\) has 2 fields, expected 1"):
        from_rows([(1,), (1, 2)], 0, 1, interner)
    with pytest.raises(TypeError, match="records are tuples, got list"):
        from_rows([[1]], 0, 1, interner)
    with pytest.raises(ValueError, match="3 times for 2 records"):
        from_rows([(1,), (2,)], [1, 2, 3], 1, interner)
    with pytest.raises(ValueError, match="3 diffs for 2 records"):
        from_rows([(1,), (2,)], 0, [1, 1, 1], interner)
    with pytest.raises(ValueError, match="rows have 1 fields, the collection has 2"):
        from_rows([(1,)], 0, 1, interner, kinds=("i", "i"))
    with pytest.raises(ValueError, match="mixed time depths"):
        from_rows([(1,)], [(1, 2, 3)], 1, interner, depth=2)
    with pytest.raises(ValueError, match="no column 'nope'"):
        from_arrow(pa.table({"k": [1]}), interner, columns=["nope"], time=np.array([0]))
    with pytest.raises(ValueError, match="needs a time"):
        from_arrow(pa.table({"k": [1]}), interner)
    with pytest.raises(ValueError, match="times must have shape"):
        Updates((np.array([1]),), np.array([0]), np.array([1]), ("i",))
    with pytest.raises(ValueError, match="column of length 2 in a batch of 1"):
        Updates((np.array([1, 2]),), np.array([[0]]), np.array([1]), ("i",))


@given(st.integers(0, 4), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2**32))
def test_unchecked_is_the_constructor_without_its_checks(n, arity, depth, seed):
    """``Updates.unchecked`` (kernels' outputs) makes what the checked constructor makes: same fields, frozen."""
    import dataclasses

    rng = np.random.default_rng(seed)
    cols = tuple(rng.integers(-5, 5, n) for _ in range(arity))
    times, diffs = rng.integers(0, 9, (n, depth)), rng.integers(-3, 3, n)
    kinds = ("i",) * arity
    a, b = Updates(cols, times, diffs, kinds), Updates.unchecked(cols, times, diffs, kinds)
    assert type(a) is type(b) and (len(a), a.arity, a.depth) == (len(b), b.arity, b.depth)
    assert all(x is y for x, y in zip(a.cols, b.cols)) and a.times is b.times and a.diffs is b.diffs and a.kinds == b.kinds
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.diffs = diffs
