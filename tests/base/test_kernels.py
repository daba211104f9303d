"""The base layer's kernels, native and plain, against plain numpy/Python references, on random inputs (empty and
single rows too)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ddflow.base import kernels as K
from ddflow.base.kernels import float_keys, key_matrix
from ddflow.base.native import native_module

I64 = np.iinfo(np.int64)


@st.composite
def key_matrices(draw, max_rows=40):
    n = draw(st.integers(0, max_rows))
    m = draw(st.integers(1, 4))
    # Small ranges (packed sort), or the full int64 range (the row merge sort).
    wide = draw(st.booleans())
    lo, hi = (I64.min, I64.max) if wide else (-3, 3)
    elems = st.integers(lo, hi) if not wide else st.sampled_from([I64.min, -1, 0, 1, I64.max, 7, -7])
    return draw(hnp.arrays(np.int64, (n, m), elements=elems))


def reference_consolidate(rows: np.ndarray, diffs: np.ndarray):
    """Stable lexicographic order, groups summed with Python ints in input order; overflow if a prefix leaves int64."""
    n, m = rows.shape
    order = np.lexsort(rows.T[::-1]) if n else np.zeros(0, dtype=np.int64)
    sel, sums, overflow = [], [], False
    i = 0
    while i < n:
        r = order[i]
        s = int(diffs[r])
        j = i + 1
        while j < n and (rows[order[j]] == rows[r]).all():
            s += int(diffs[order[j]])
            if not (I64.min <= s <= I64.max):
                overflow = True
            j += 1
        if s:
            sel.append(r)
            sums.append(s)
        i = j
    return sel, sums, overflow


@settings(max_examples=300)
@given(rows=key_matrices(), data=st.data())
def test_consolidate_matches_the_reference(rows, data):
    big = data.draw(st.booleans())
    dl = st.sampled_from([I64.max, I64.min, 1, -1]) if big else st.integers(-2, 2)
    diffs = data.draw(hnp.arrays(np.int64, len(rows), elements=dl))
    ref_sel, ref_sums, ref_overflow = reference_consolidate(rows, diffs)
    N, order = native_module().base, K.sort_rows(rows)
    for sel, sums, overflow in (N.group_sums(rows, order, diffs), K._PLAIN.consolidate(rows, order, diffs),
                                N.consolidate_small(rows, diffs), K._PLAIN.consolidate_small(rows, diffs)):
        assert overflow == ref_overflow
        if not overflow:
            assert sel.tolist() == ref_sel and sums.tolist() == ref_sums


@settings(max_examples=200)
@given(rows=key_matrices())
def test_sort_rows_is_a_stable_lexicographic_sort(rows):
    order = K.sort_rows(rows)
    ref = np.lexsort(rows.T[::-1]) if len(rows) else np.zeros(0, dtype=np.int64)
    assert order.tolist() == ref.tolist()


@settings(max_examples=200)
@given(rows=key_matrices(), runs=st.integers(0, 4), native=st.booleans())
def test_lex_order_is_a_stable_lexicographic_sort(rows, runs, native):
    if runs:  # a few sorted runs (what kernels hand it most often)
        cuts = np.linspace(0, len(rows), runs + 1).astype(int)
        rows = np.concatenate([rows[lo:hi][np.lexsort(rows[lo:hi].T[::-1])] for lo, hi in zip(cuts, cuts[1:])]
                              + [rows[:0]])
    order = (native_module().base.lex_order if native else K.lex_order)(rows)
    ref = np.lexsort(rows.T[::-1]) if len(rows) else np.zeros(0, dtype=np.int64)
    assert order.tolist() == ref.tolist()


@settings(max_examples=200)
@given(rows=key_matrices(), native=st.booleans())
def test_pack_preserves_row_order_when_it_fits(rows, native):
    packed, fits = (native_module().base.pack if native else K._PLAIN.pack)(rows)
    ref = [tuple(r) for r in rows.tolist()]
    wide = rows.shape[1] > 1 and any(int(c.max()) - int(c.min()) >= 1 << 40 for c in rows.T) if len(rows) else False
    if wide:
        assert not fits
    if fits:
        for i in range(len(rows)):
            for j in range(len(rows)):
                assert (packed[i] < packed[j]) == (ref[i] < ref[j]) and (packed[i] == packed[j]) == (ref[i] == ref[j])


@st.composite
def batches(draw):
    """A trie's key level: sorted unique keys, key -> value rows -> update rows."""
    bkeys = np.array(sorted(draw(st.sets(st.integers(-20, 20), max_size=12))), dtype=np.int64)
    vals_per_key = [draw(st.integers(1, 3)) for _ in bkeys]
    key_offs = np.concatenate([[0], np.cumsum(vals_per_key)]).astype(np.int64)
    ups_per_val = [draw(st.integers(1, 3)) for _ in range(int(key_offs[-1]))]
    val_offs = np.concatenate([[0], np.cumsum(ups_per_val)]).astype(np.int64)
    keys = np.array(sorted(draw(st.sets(st.integers(-22, 22), max_size=10))), dtype=np.int64)
    return bkeys, key_offs, val_offs, keys


def reference_seek(bkeys, key_offs, val_offs, keys):
    q, vrow, urow = [], [], []
    where = {k: i for i, k in enumerate(bkeys.tolist())}
    for i, k in enumerate(keys.tolist()):
        p = where.get(k)
        if p is None:
            continue
        for v in range(key_offs[p], key_offs[p + 1]):
            for u in range(val_offs[v], val_offs[v + 1]):
                q.append(i)
                vrow.append(v)
                urow.append(u)
    return q, vrow, urow


@settings(max_examples=300)
@given(batches(), st.booleans())
def test_seek_matches_the_reference(b, native):
    got = (native_module().base.seek if native else K._PLAIN.seek)(*b)
    assert tuple(a.tolist() for a in got) == reference_seek(*b)


@given(hnp.arrays(np.float64, st.integers(0, 30), elements=st.floats(allow_nan=True, width=64)))
def test_float_keys_order_numbers_and_join_nans_and_zeros(col):
    keys = float_keys(col)
    vals = [float("nan") if np.isnan(x) else (0.0 if x == 0 else float(x)) for x in col.tolist()]
    for i in range(len(vals)):
        for j in range(len(vals)):
            a, b = vals[i], vals[j]
            an, bn = a != a, b != b
            expect_lt = (not an and bn) or (not an and not bn and a < b)
            assert (keys[i] < keys[j]) == expect_lt
            assert (keys[i] == keys[j]) == ((an and bn) or a == b)


def test_key_matrix_puts_times_after_columns():
    km = key_matrix((np.array([2, 1]), np.array([0.5, -0.0])), np.array([[7], [8]]))
    assert km[:, 0].tolist() == [2, 1] and km[:, 2].tolist() == [7, 8] and km[1, 1] == float_keys(np.array([0.0]))[0]


@settings(max_examples=200)
@given(rows=key_matrices(), native=st.booleans())
def test_trie_starts_match_the_reference(rows, native):
    rows = rows[np.lexsort(rows.T[::-1])] if len(rows) else rows
    kstarts, vstarts, key_offs = (native_module().base.trie_starts if native else K._PLAIN.trie_starts)(rows)
    n = len(rows)
    ref_k = [i for i in range(n) if i == 0 or rows[i, 0] != rows[i - 1, 0]]
    ref_v = [i for i in range(n) if i == 0 or (rows[i] != rows[i - 1]).any()]
    assert kstarts.tolist() == ref_k and vstarts.tolist() == ref_v
    assert key_offs.tolist() == [ref_v.index(k) for k in ref_k] + [len(ref_v)]


@settings(max_examples=200)
@given(idx=st.lists(st.integers(-2, 6) | st.sampled_from([I64.min, I64.max]), max_size=30), n=st.integers(0, 5),
       native=st.booleans())
def test_group_by_index_matches_a_stable_sort(idx, n, native):
    from ddflow.base.columnar import group_by_index

    a = np.array(idx, dtype=np.int64)
    order, bounds = native_module().base.counting_order(a, n) if native else group_by_index(a, n)
    ref_order = np.argsort(a, kind="stable")
    assert bounds.tolist() == np.searchsorted(a[ref_order], np.arange(n + 1)).tolist()
    # Each group in input order; what is out of range lies outside the bounds.
    assert order[bounds[0]:bounds[n]].tolist() == ref_order[bounds[0]:bounds[n]].tolist()
    assert sorted(order[: bounds[0]].tolist()) == [i for i, x in enumerate(idx) if x < 0]
    assert sorted(order[bounds[n]:].tolist()) == [i for i, x in enumerate(idx) if x >= n]


def test_seek_finds_nan_keys_and_treats_minus_zero_as_zero():
    from ddflow.base.interner import Interner
    from ddflow.base.updates import from_rows
    from ddflow.traces import Batch

    b = Batch.from_updates(from_rows([(float("nan"), 1), (0.0, 2), (1.5, 3)], 0, 1, Interner()))
    for seek in (native_module().base.seek, K._PLAIN.seek):
        q, vrow, _ = seek(b.keys, b.key_offs, b.val_offs, np.array([np.nan, -0.0, 2.0, np.nan]))
        assert sorted(zip(q.tolist(), b.vals[0][vrow].tolist())) == [(0, 1), (1, 2), (3, 1)]


@settings(max_examples=200)
@given(values=hnp.arrays(np.int64, st.integers(0, 60), elements=st.integers(-2**63, 2**63 - 1) | st.integers(-3, 3)),
       native=st.booleans())
def test_sorted_unique_matches_numpy_by_insertion_and_by_sort(values, native):
    """Both of ``sort_small``'s paths (the insertion sort up to SORT_BY_INSERTION values, a library sort past it)."""
    ref = np.unique(values)
    if native:
        a = values.copy()
        got = a[:native_module().base.sorted_unique(a)]
    else:
        got = K.sorted_unique(values.copy())
    assert got.tolist() == ref.tolist()


@settings(max_examples=200)
@given(rows=key_matrices(max_rows=120), data=st.data(), native=st.booleans())
def test_consolidated_split_matches_the_reference_by_insertion_and_by_merge_sort(rows, data, native):
    """Both paths (an insertion sort up to SMALL_ROWS rows, :func:`lex_order` past it): groups, sums and overflow."""
    m = data.draw(st.integers(1, rows.shape[1]))
    big = data.draw(st.booleans())
    diffs = data.draw(hnp.arrays(np.int64, len(rows), elements=st.sampled_from([I64.max, I64.min, 1, -1]) if big
                                 else st.integers(-2, 2)))
    ref_sel, ref_sums, ref_overflow = reference_consolidate(rows, diffs)
    C, T, D, overflow = (native_module().base.consolidated_split if native else K.consolidated_split)(rows, diffs, m)
    assert overflow == ref_overflow
    if not overflow:
        assert D.tolist() == ref_sums
        assert C.T.tolist() == rows[ref_sel, :m].tolist() and T.tolist() == rows[ref_sel, m:].tolist()


def test_native_counting_order_refuses_a_negative_bucket_count():
    with pytest.raises(ValueError, match="n must not be negative"):
        native_module().base.counting_order(np.zeros(3, dtype=np.int64), -1)
