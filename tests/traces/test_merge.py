"""The merge kernel (``traces/merge.py``) on rows with many updates, compiled and plain, against a plain reference.

The batch tests elsewhere draw a few updates per row; here a handful of
(key, value) rows carry up to 80 updates each, in an order the frontier's
advance breaks, so a row's updates are re-sorted both ways the kernel
sorts them (in place up to 32, by merging above).
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
from ddflow.traces.batch import Batch, Description
from ddflow.traces.merge import merge_rows


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
       st.integers(0, 3), st.integers(0, 2**32 - 1))
def test_rows_with_many_updates_merge_as_the_reference(depth, na, nb, keys, plain, nf, seed):
    rng = np.random.default_rng(seed)
    a, ba = _batch(rng, na, depth, 0, 5, keys)
    b, bb = _batch(rng, nb, depth, 5, 9, keys)
    frontier = Antichain(rng.integers(0, 9, size=(nf, depth))) if nf else None
    _check_merge(a, ba, b, bb, frontier, plain)


def _check_merge(a, ba, b, bb, frontier, plain):
    """Merge ``ba`` and ``bb`` (made of updates ``a`` and ``b``) with the kernel, compiled or plain; check it."""
    kernel = merge_rows.plain if plain else merge_rows
    saved = batch_module.merge_rows
    batch_module.merge_rows = kernel
    try:
        m = ba.merge(bb, frontier)
    finally:
        batch_module.merge_rows = saved
    f = m.flatten()
    got = sorted(zip(zip(*(c.tolist() for c in f.cols)), map(tuple, f.times.tolist()), f.diffs.tolist()))
    assert got == _reference([a, b], frontier)
    # The trie's invariants: rows sorted and unique, each row's times sorted and distinct.
    for v in range(len(m.val_offs) - 1):
        t = [tuple(x) for x in m.times[m.val_offs[v]:m.val_offs[v + 1]].tolist()]
        assert t == sorted(set(t))


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 300), st.integers(0, 300), st.integers(1, 4), st.booleans(), st.integers(0, 10),
       st.integers(0, 21), st.integers(0, 2**32 - 1))
def test_loop_times_under_one_frontier_element_merge_as_the_reference(na, nb, keys, plain, f0, f1, seed):
    """Times of two coordinates and a frontier of one element: the path that sorts only the advanced prefix.

    The frontier's outer coordinate falls before, inside and after both
    batches' outer times, so the prefix that advancing moves is empty, part
    or all of each row's updates.
    """
    rng = np.random.default_rng(seed)
    a, ba = _batch(rng, na, 2, 0, 5, keys)
    b, bb = _batch(rng, nb, 2, 3, 9, keys)
    _check_merge(a, ba, b, bb, Antichain(np.array([[f0, f1]], dtype=np.int64)), plain)


def test_the_longest_rows_need_both_sorts():
    """The strategy above reaches rows past the in-place sort's 32 updates (else the merge sort goes untested)."""
    rng = np.random.default_rng(0)
    _, b = _batch(rng, 300, 2, 0, 5, 1)
    assert np.diff(b.val_offs).max() > 32
