"""The merge kernels (``traces/merge.py``) on rows with many updates, plain and native, against a plain reference.

The batch tests elsewhere draw a few updates per row; here a handful of
(key, value) rows carry up to 80 updates each, in an order the frontier's
advance breaks, so a row's updates are re-sorted both ways the kernel
sorts them (in place up to 32, by merging above).  Both ways a batch
merges are checked: ``merge_pair`` (int64 columns, read through the
table, the result built in the same call) and ``merge_by_rows`` (the
reference, rows made in numpy), each over whole batches and key ranges.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow.traces.batch as batch_module
from ddflow.base.lattice import Antichain, advance_by
from ddflow.base.native import native_module
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError
from ddflow.traces.batch import Batch, Description
from ddflow.traces.layout import batch_row
from ddflow.traces.merge import merge_pair, merge_rows
from kernel_modes import MODES, as_run


def _batch(rng, n, depth, t_lo, t_hi, keys):
    cols = (rng.integers(0, keys, n), rng.integers(0, 2, n))
    times = rng.integers(0, 20, size=(n, depth))
    times[:, 0] = rng.integers(t_lo, t_hi, n)
    u = Updates(cols, times, rng.choice([-2, -1, 1, 1, 2], size=n), ("i", "i"))
    lower = Antichain(np.array([[t_lo] + [0] * (depth - 1)]))
    upper = Antichain(np.array([[t_hi] + [0] * (depth - 1)]))
    return u, Batch.from_updates(u, Description(lower, upper, Antichain.minimum(depth)))


def _reference(parts, frontier):
    acc: dict = defaultdict(int)
    for u in parts:
        times = advance_by(u.times, frontier) if frontier is not None else u.times
        for r, t, d in zip(zip(*(c.tolist() for c in u.cols)), map(tuple, times.tolist()), u.diffs.tolist()):
            acc[(r, t)] += d
    return sorted((r, t, d) for (r, t), d in acc.items() if d)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(0, 300), st.integers(0, 300), st.integers(1, 4), st.sampled_from(MODES),
       st.integers(0, 3), st.sampled_from(["pair", "rows"]), st.integers(0, 2**32 - 1))
def test_rows_with_many_updates_merge_as_the_reference(depth, na, nb, keys, mode, nf, path, seed):
    rng = np.random.default_rng(seed)
    a, ba = _batch(rng, na, depth, 0, 5, keys)
    b, bb = _batch(rng, nb, depth, 5, 9, keys)
    frontier = Antichain(rng.integers(0, 9, size=(nf, depth))) if nf else None
    _check_merge(a, ba, b, bb, frontier, mode, path)


def _merged(ba, bb, frontier, mode, path, keys=None):
    """``ba`` merged with ``bb`` by ``path``'s kernel ("pair": ``merge_pair``, "rows": ``merge_rows``), as ``mode`` runs it."""
    if path == "pair":
        name, kernel = "merge_pair", as_run(merge_pair, mode)
        merge = lambda: ba.merge(bb, frontier, keys)  # noqa: E731
    else:
        name, kernel = "merge_rows", as_run(merge_rows, mode)
        a, b = (ba, bb) if keys is None else (ba.slice_keys(*keys[0]), bb.slice_keys(*keys[1]))
        merge = lambda: a.merge_by_rows(b, frontier)  # noqa: E731
    saved = getattr(batch_module, name)
    setattr(batch_module, name, kernel)
    try:
        return merge()
    finally:
        setattr(batch_module, name, saved)


def _check_merge(a, ba, b, bb, frontier, mode, path):
    """Merge ``ba`` and ``bb`` (made of updates ``a`` and ``b``) by ``path``, as ``mode`` runs it; check it."""
    _check_trie(_merged(ba, bb, frontier, mode, path), [a, b], frontier)


def _check_trie(m, parts, frontier):
    """``m`` holds ``parts`` advanced by ``frontier`` and consolidated, as a well-formed trie with its table row."""
    f = m.flatten()
    got = sorted(zip(zip(*(c.tolist() for c in f.cols)), map(tuple, f.times.tolist()), f.diffs.tolist()))
    assert got == _reference(parts, frontier)
    # The trie's invariants: keys sorted and unique, rows sorted and unique, each row's times sorted and distinct.
    assert (np.diff(m.keys) > 0).all() and np.diff(m.key_offs).min(initial=1) > 0
    rows = list(zip(*(c.tolist() for c in m.row_columns())))
    assert rows == sorted(set(rows))
    for v in range(len(m.val_offs) - 1):
        t = [tuple(x) for x in m.times[m.val_offs[v]:m.val_offs[v + 1]].tolist()]
        assert t == sorted(set(t))
    if len(m) and m._row is not None:  # a row made by the kernel describes the batch as batch_row would
        assert m._row[0].tolist() == batch_row(m, []).tolist()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 2), st.integers(0, 200), st.integers(0, 200), st.integers(1, 12), st.sampled_from(MODES),
       st.sampled_from(["pair", "rows"]), st.data())
def test_key_ranges_merge_as_the_reference(depth, na, nb, keys, mode, path, data):
    """A merge of key ranges (what a merge in progress does a slice at a time) holds exactly those keys' updates."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a, ba = _batch(rng, na, depth, 0, 5, keys)
    b, bb = _batch(rng, nb, depth, 5, 9, keys)
    ra = sorted(data.draw(st.tuples(st.integers(0, len(ba.keys)), st.integers(0, len(ba.keys)))))
    rb = sorted(data.draw(st.tuples(st.integers(0, len(bb.keys)), st.integers(0, len(bb.keys)))))
    frontier = Antichain(rng.integers(0, 9, size=(1, depth))) if data.draw(st.booleans()) else None
    m = _merged(ba, bb, frontier, mode, path, (tuple(ra), tuple(rb)))

    def within(u, bt, r):
        kept = np.isin(u.cols[0], bt.keys[r[0]:r[1]])
        return Updates(tuple(c[kept] for c in u.cols), u.times[kept], u.diffs[kept], u.kinds)

    _check_trie(m, [within(a, ba, ra), within(b, bb, rb)], frontier)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 300), st.integers(0, 300), st.integers(1, 4), st.sampled_from(MODES), st.integers(0, 10),
       st.integers(0, 21), st.sampled_from(["pair", "rows"]), st.integers(0, 2**32 - 1))
def test_loop_times_under_one_frontier_element_merge_as_the_reference(na, nb, keys, mode, f0, f1, path, seed):
    """Times of two coordinates and a frontier of one element: the path that sorts only the advanced prefix.

    The frontier's outer coordinate falls before, inside and after both
    batches' outer times, so the prefix that advancing moves is empty, part
    or all of each row's updates.
    """
    rng = np.random.default_rng(seed)
    a, ba = _batch(rng, na, 2, 0, 5, keys)
    b, bb = _batch(rng, nb, 2, 3, 9, keys)
    _check_merge(a, ba, b, bb, Antichain(np.array([[f0, f1]], dtype=np.int64)), mode, path)


def test_the_longest_rows_need_both_sorts():
    """The strategy above reaches rows past the in-place sort's 32 updates (else the merge sort goes untested)."""
    rng = np.random.default_rng(0)
    _, b = _batch(rng, 300, 2, 0, 5, 1)
    assert np.diff(b.val_offs).max() > 32


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", ["pair", "rows"])
def test_a_sum_past_int64_names_the_record_and_time(path, mode):
    """Two diffs of 2**62 on one record and time, merged: an error naming them, never a wrapped sum."""
    one = lambda t: Updates((np.array([7]), np.array([1])), np.array([[t]]), np.array([2**62]), ("i", "i"))  # noqa: E731
    ba = Batch.from_updates(one(0), Description(Antichain.from_time(0), Antichain.from_time(1), Antichain.minimum(1)))
    bb = Batch.from_updates(one(1), Description(Antichain.from_time(1), Antichain.from_time(2), Antichain.minimum(1)))
    with pytest.raises(SchemaError, match=r"merging batches of \('i', 'i'\).*\(7, 1\)"):
        _merged(ba, bb, Antichain.from_time(1), mode, path)
    assert len(_merged(ba, bb, None, mode, path)) == 2  # apart, nothing to add


def test_merges_hand_the_kernels_a_read_only_frontier_with_or_without_one(monkeypatch):
    """Without a frontier a merge passes the empty frontier's elements, read-only as every frontier's are.

    The kernels then meet one array type for the frontier, with or without
    one: an int64 matrix of the times' depth, read-only, which the native
    bindings take as a read-only view (another dtype or shape would be
    their TypeError or ValueError, not a conversion).
    """
    import ddflow.traces.spine as spine_module

    seen = []
    real_pair, real_table = batch_module.merge_pair, spine_module.merge_table
    monkeypatch.setattr(batch_module, "merge_pair", lambda *a: (seen.append(a[-1]), real_pair(*a))[1])
    monkeypatch.setattr(spine_module, "merge_table", lambda *a: (seen.append(a[-1]), real_table(*a))[1])
    rng = np.random.default_rng(7)
    _, a = _batch(rng, 20, 2, 0, 5, 4)
    _, b = _batch(rng, 20, 2, 5, 9, 4)
    a.merge(b)
    a.merge(b, Antichain(np.array([[6, 0]])))
    spine_module._merge_all([a, b], Antichain.empty(2))
    spine_module._merge_all([a, b], Antichain(np.array([[6, 0]])))
    assert len(seen) == 4
    assert all(f.dtype == np.int64 and f.ndim == 2 and f.shape[1] == 2 and not f.flags.writeable for f in seen)


I64 = np.iinfo(np.int64)
#: Values at int64's edges (and next to them), for sort keys, times and diffs.
EXTREMES = [I64.min, I64.min + 1, -1, 0, 1, I64.max - 1, I64.max]


@st.composite
def merge_inputs(draw):
    """Two sides of ``merge_rows``: sorted unique rows, each with its updates sorted by time; offsets of either width.

    Values small (many equal rows and times) or at int64's edges; diffs small or huge (sums past int64); a frontier
    of 0-3 elements, often the one element of two coordinates that takes the split path.
    """
    m, d = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    extreme = draw(st.booleans())
    vals = st.sampled_from(EXTREMES) if extreme else st.integers(0, 3)
    big = draw(st.booleans())
    dl = st.sampled_from([I64.max, I64.min, 1, -1]) if big else st.sampled_from([-2, -1, 1, 2])
    long_rows = draw(st.booleans())  # past SORT_IN_PLACE: the merge sort through scratch

    def side():
        rows = sorted(set(draw(st.lists(st.tuples(*[vals] * m), max_size=6))))
        K = np.array(rows, dtype=np.int64).reshape(len(rows), m)
        counts = [draw(st.integers(0, 45 if long_rows else 4)) for _ in rows]
        times = [sorted(draw(st.lists(st.tuples(*[vals] * d), min_size=c, max_size=c))) for c in counts]
        t = np.array([x for ts in times for x in ts], dtype=np.int64).reshape(-1, d)
        diffs = np.array(draw(st.lists(dl, min_size=len(t), max_size=len(t))), dtype=np.int64)
        off = np.concatenate([[0], np.cumsum(counts)]).astype(draw(st.sampled_from([np.int32, np.int64])))
        return K, off, t, diffs

    split = d == 2 and draw(st.booleans())
    nf = 1 if split else draw(st.integers(0, 3))
    F = np.array(draw(st.lists(st.tuples(*[vals] * d), min_size=nf, max_size=nf)), dtype=np.int64).reshape(nf, d)
    F.flags.writeable = False  # as the merges hand it
    return (*side(), *side(), F)


@settings(max_examples=400, deadline=None)
@given(merge_inputs())
def test_native_merge_rows_is_the_reference(args):
    """``merge_rows``, native and plain, on the same inputs: every result equal, dtypes and shapes too."""
    ref = as_run(merge_rows, "plain")(*args)
    got = as_run(merge_rows, "native")(*args)
    assert len(got) == len(ref) == 6 and got[5] == ref[5]
    for a, b in zip(got[:5], ref[:5]):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist()


def test_native_merge_rows_refuses_offsets_it_cannot_follow():
    """Offsets the merge would follow out of its arrays are a ValueError naming them, never a read past the end."""
    merge = native_module().traces.merge_rows
    K = np.array([[1], [2]], dtype=np.int64)
    t, d = np.array([[0], [0], [1]], dtype=np.int64), np.ones(3, dtype=np.int64)
    F = np.zeros((0, 1), dtype=np.int64)
    none = (np.zeros((0, 1), dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros((0, 1), dtype=np.int64),
            np.zeros(0, dtype=np.int64))
    assert merge(K, np.array([0, 1, 3]), t, d, *none, F)[1].tolist() == [0, 1, 3]
    for off, match in (([0, 1, 4], "points past"), ([0, 2, 1], "rise"), ([-1, 1, 3], "rise"), ([0, 3], "one offset")):
        with pytest.raises(ValueError, match=match):
            merge(K, np.array(off, dtype=np.int64), t, d, *none, F)
    with pytest.raises(ValueError, match="depth"):
        merge(K, np.array([0, 1, 3]), t, d, *none, np.zeros((0, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="same columns"):
        merge(K, np.array([0, 1, 3]), t, d, np.zeros((0, 2), dtype=np.int64), *none[1:], F)
    with pytest.raises(ValueError, match="rows of KA must be sorted and unique"):
        merge(K[::-1].copy(), np.array([0, 1, 3]), t, d, *none, F)
    with pytest.raises(ValueError, match="rows of KB must be sorted and unique"):
        merge(*none, np.array([[1], [1]], dtype=np.int64), np.array([0, 1, 3]), t, d, F)
    with pytest.raises(ValueError, match="times of each row of A must be sorted"):
        merge(K, np.array([0, 1, 3]), np.array([[0], [1], [0]], dtype=np.int64), d, *none, F)
    with pytest.raises(TypeError):  # a float matrix is no int64 view: nothing is converted behind the caller's back
        merge(K.astype(np.float64), np.array([0, 1, 3]), t, d, *none, F)


def test_native_merge_pair_refuses_key_ranges_outside_the_batches():
    rng = np.random.default_rng(3)
    _, a = _batch(rng, 5, 1, 0, 5, 3)
    _, b = _batch(rng, 5, 1, 5, 9, 3)
    T = np.stack([a.table_row(), b.table_row()])
    F = np.zeros((0, 1), dtype=np.int64)
    pair = native_module().traces.merge_pair
    assert not pair(T, 0, len(a.keys), 0, len(b.keys), F)[-1]
    for a0, a1, b0, b1 in ((0, len(a.keys) + 1, 0, 0), (1, 0, 0, 0), (-1, 0, 0, 0), (0, 0, 0, len(b.keys) + 1)):
        with pytest.raises(ValueError, match="key ranges"):
            pair(T, a0, a1, b0, b1, F)
    with pytest.raises(ValueError, match="two batches"):
        pair(T[:1], 0, 0, 0, 0, F)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 80), st.integers(1, 3), st.booleans(), st.data())
def test_native_sort_segment_sorts_as_the_reference(n, d, extreme, data):
    """In place and stably (diffs number the rows), by insertion up to SORT_IN_PLACE rows and by merging past it."""
    from ddflow.traces.merge import sort_segment

    vals = st.sampled_from(EXTREMES) if extreme else st.integers(0, 3)
    T = np.array(data.draw(st.lists(st.tuples(*[vals] * d), min_size=n, max_size=n)), dtype=np.int64).reshape(n, d)
    lo = data.draw(st.integers(0, n))
    hi = data.draw(st.integers(lo, n))
    D = np.arange(n, dtype=np.int64)
    runs = []
    for _ in range(2):
        t, dd = T.copy(), D.copy()
        runs.append((t, dd, np.full((max(hi - lo, 1), d), -7, dtype=np.int64), np.full(max(hi - lo, 1), -7)))
    sort_segment(*runs[0][:2], lo, hi, *runs[0][2:])
    native_module().traces.sort_segment(*runs[1][:2], lo, hi, *runs[1][2:])
    assert runs[0][0].tolist() == runs[1][0].tolist() and runs[0][1].tolist() == runs[1][1].tolist()
    order = sorted(range(lo, hi), key=lambda i: (tuple(T[i].tolist()), i))  # and both are the stable sort
    assert runs[1][1][lo:hi].tolist() == order and runs[1][0][:lo].tolist() == T[:lo].tolist()


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 40), st.integers(1, 3), st.booleans(), st.booleans(), st.data())
def test_native_consolidate_segment_sums_as_the_reference(n, d, extreme, big, data):
    """Equal adjacent rows summed and zeros dropped, in place; an overflow reported where the reference reports it."""
    from ddflow.traces.merge import consolidate_segment

    vals = st.sampled_from(EXTREMES) if extreme else st.integers(0, 2)
    T = np.array(sorted(data.draw(st.lists(st.tuples(*[vals] * d), min_size=n, max_size=n))),
                 dtype=np.int64).reshape(n, d)
    dl = st.sampled_from([I64.max, I64.min, 1, -1]) if big else st.integers(-2, 2)
    D = np.array(data.draw(st.lists(dl, min_size=n, max_size=n)), dtype=np.int64)
    lo = data.draw(st.integers(0, n))
    hi = data.draw(st.integers(lo, n))
    a, b = (T.copy(), D.copy()), (T.copy(), D.copy())
    ref = consolidate_segment(*a, lo, hi)
    got = native_module().traces.consolidate_segment(*b, lo, hi)
    assert tuple(got) == (int(ref[0]), bool(ref[1]))
    assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()


@given(st.integers(I64.min, I64.max) | st.sampled_from(EXTREMES), st.integers(I64.min, I64.max) | st.sampled_from(EXTREMES))
def test_native_sum_overflows_is_the_reference(s, d):
    from ddflow.traces.merge import sum_overflows

    assert native_module().traces.sum_overflows(s, d) == sum_overflows(s, d) == (not I64.min <= s + d <= I64.max)
