"""The merge kernels (``traces/merge.py``) on rows with many updates, compiled and plain, against a plain reference.

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
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError
from ddflow.traces.batch import Batch, Description
from ddflow.traces.layout import batch_row
from ddflow.traces.merge import merge_pair, merge_rows


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
@given(st.integers(1, 3), st.integers(0, 300), st.integers(0, 300), st.integers(1, 4), st.booleans(),
       st.integers(0, 3), st.sampled_from(["pair", "rows"]), st.integers(0, 2**32 - 1))
def test_rows_with_many_updates_merge_as_the_reference(depth, na, nb, keys, plain, nf, path, seed):
    rng = np.random.default_rng(seed)
    a, ba = _batch(rng, na, depth, 0, 5, keys)
    b, bb = _batch(rng, nb, depth, 5, 9, keys)
    frontier = Antichain(rng.integers(0, 9, size=(nf, depth))) if nf else None
    _check_merge(a, ba, b, bb, frontier, plain, path)


def _merged(ba, bb, frontier, plain, path, keys=None):
    """``ba`` merged with ``bb`` by ``path``'s kernel ("pair": ``merge_pair``, "rows": ``merge_rows``), compiled or plain."""
    if path == "pair":
        name, kernel = "merge_pair", merge_pair.plain if plain else merge_pair
        merge = lambda: ba.merge(bb, frontier, keys)  # noqa: E731
    else:
        name, kernel = "merge_rows", merge_rows.plain if plain else merge_rows
        a, b = (ba, bb) if keys is None else (ba.slice_keys(*keys[0]), bb.slice_keys(*keys[1]))
        merge = lambda: a.merge_by_rows(b, frontier)  # noqa: E731
    saved = getattr(batch_module, name)
    setattr(batch_module, name, kernel)
    try:
        return merge()
    finally:
        setattr(batch_module, name, saved)


def _check_merge(a, ba, b, bb, frontier, plain, path):
    """Merge ``ba`` and ``bb`` (made of updates ``a`` and ``b``) by ``path``, compiled or plain; check it."""
    _check_trie(_merged(ba, bb, frontier, plain, path), [a, b], frontier)


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
@given(st.integers(1, 2), st.integers(0, 200), st.integers(0, 200), st.integers(1, 12), st.booleans(),
       st.sampled_from(["pair", "rows"]), st.data())
def test_key_ranges_merge_as_the_reference(depth, na, nb, keys, plain, path, data):
    """A merge of key ranges (what a merge in progress does a slice at a time) holds exactly those keys' updates."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a, ba = _batch(rng, na, depth, 0, 5, keys)
    b, bb = _batch(rng, nb, depth, 5, 9, keys)
    ra = sorted(data.draw(st.tuples(st.integers(0, len(ba.keys)), st.integers(0, len(ba.keys)))))
    rb = sorted(data.draw(st.tuples(st.integers(0, len(bb.keys)), st.integers(0, len(bb.keys)))))
    frontier = Antichain(rng.integers(0, 9, size=(1, depth))) if data.draw(st.booleans()) else None
    m = _merged(ba, bb, frontier, plain, path, (tuple(ra), tuple(rb)))

    def within(u, bt, r):
        kept = np.isin(u.cols[0], bt.keys[r[0]:r[1]])
        return Updates(tuple(c[kept] for c in u.cols), u.times[kept], u.diffs[kept], u.kinds)

    _check_trie(m, [within(a, ba, ra), within(b, bb, rb)], frontier)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 300), st.integers(0, 300), st.integers(1, 4), st.booleans(), st.integers(0, 10),
       st.integers(0, 21), st.sampled_from(["pair", "rows"]), st.integers(0, 2**32 - 1))
def test_loop_times_under_one_frontier_element_merge_as_the_reference(na, nb, keys, plain, f0, f1, path, seed):
    """Times of two coordinates and a frontier of one element: the path that sorts only the advanced prefix.

    The frontier's outer coordinate falls before, inside and after both
    batches' outer times, so the prefix that advancing moves is empty, part
    or all of each row's updates.
    """
    rng = np.random.default_rng(seed)
    a, ba = _batch(rng, na, 2, 0, 5, keys)
    b, bb = _batch(rng, nb, 2, 3, 9, keys)
    _check_merge(a, ba, b, bb, Antichain(np.array([[f0, f1]], dtype=np.int64)), plain, path)


def test_the_longest_rows_need_both_sorts():
    """The strategy above reaches rows past the in-place sort's 32 updates (else the merge sort goes untested)."""
    rng = np.random.default_rng(0)
    _, b = _batch(rng, 300, 2, 0, 5, 1)
    assert np.diff(b.val_offs).max() > 32


@pytest.mark.parametrize("path", ["pair", "rows"])
def test_a_sum_past_int64_names_the_record_and_time(path):
    """Two diffs of 2**62 on one record and time, merged: an error naming them, never a wrapped sum."""
    one = lambda t: Updates((np.array([7]), np.array([1])), np.array([[t]]), np.array([2**62]), ("i", "i"))  # noqa: E731
    ba = Batch.from_updates(one(0), Description(Antichain.from_time(0), Antichain.from_time(1), Antichain.minimum(1)))
    bb = Batch.from_updates(one(1), Description(Antichain.from_time(1), Antichain.from_time(2), Antichain.minimum(1)))
    with pytest.raises(SchemaError, match=r"merging batches of \('i', 'i'\).*\(7, 1\)"):
        _merged(ba, bb, Antichain.from_time(1), False, path)
    assert len(_merged(ba, bb, None, False, path)) == 2  # apart, nothing to add


def test_merges_hand_the_kernels_a_read_only_frontier_with_or_without_one(monkeypatch):
    """Without a frontier a merge passes the empty frontier's elements, read-only as every frontier's are.

    The kernels then meet one array type for the frontier, so one compiled
    specialization serves both; a writable ``np.zeros`` for "no frontier"
    made numba compile ``merge_pair`` again on first use (13 s, found by
    ``make test``'s slowest tests).
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
