"""The walk's seed and pending kernels (``reduce/pending.py``), plain and native, against references."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ddflow.base.radix import RADIX_ROWS_ABOVE
from ddflow.operators.reduce.pending import due_seeds, merge_pending
from kernel_modes import MODES, as_run


def _check(keys: np.ndarray, times: np.ndarray) -> None:
    """The module's invariant: pending rows (key, *time) strictly increasing."""
    rows = [(k, *t) for k, t in zip(keys.tolist(), times.tolist())]
    assert all(a < b for a, b in zip(rows, rows[1:])), rows


@st.composite
def seeds(draw):
    depth = draw(st.integers(1, 2))
    r = draw(st.integers(0, 3))
    nn, npend = draw(st.integers(0, 10)), draw(st.integers(0, 10))
    nk = draw(hnp.arrays(np.int64, nn, elements=st.integers(-2, 3)))
    nt = draw(hnp.arrays(np.int64, (nn, depth), elements=st.integers(0, 4)))
    if depth == 2 and draw(st.booleans()):
        nt[:, 1] = r  # as the walk's contract has them (else: flagged bad)
    pend = sorted({(k, *t) for k, t in zip(draw(hnp.arrays(np.int64, npend, elements=st.integers(-2, 3))).tolist(),
                                            draw(hnp.arrays(np.int64, (npend, depth), elements=st.integers(0, 5))).tolist())})
    pk = np.array([p[0] for p in pend], dtype=np.int64)
    pt = np.array([p[1:] for p in pend], dtype=np.int64).reshape(-1, depth)
    bound = np.array([draw(st.integers(0, 6))] + ([r + 1] if depth == 2 else []), dtype=np.int64)
    return nk, nt, pk, pt, bound


@st.composite
def many_seeds(draw):
    """Past ``RADIX_ROWS_ABOVE`` seeds in all, so that they are radix-sorted packed (keys or times may be wide)."""
    depth = draw(st.integers(1, 2))
    r = draw(st.integers(0, 3))
    n = draw(st.integers(RADIX_ROWS_ABOVE - 20, RADIX_ROWS_ABOVE + 200))
    wide = draw(st.sampled_from([10, 2**40, 2**62]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    nk = rng.integers(-wide, wide, n, dtype=np.int64)
    nt = rng.integers(0, 50, (n, depth), dtype=np.int64)
    if depth == 2:
        nt[:, 1] = r
    pend = sorted({(int(k), *t) for k, t in zip(rng.integers(-wide, wide, 100), rng.integers(0, 60, (100, depth)).tolist())})
    pk = np.array([p[0] for p in pend], dtype=np.int64)
    pt = np.array([p[1:] for p in pend], dtype=np.int64).reshape(-1, depth)
    bound = np.array([draw(st.integers(0, 60))] + ([r + 1] if depth == 2 else []), dtype=np.int64)
    return nk, nt, pk, pt, bound


@settings(max_examples=200, deadline=None)
@given(seeds() | many_seeds(), st.sampled_from(MODES))
def test_due_seeds_are_the_new_and_the_complete_pending_sorted(s, impl):
    nk, nt, pk, pt, bound = s
    kernel = as_run(due_seeds, impl)
    keys, g, a, waiting, bad = kernel(nk, nt, pk, pt, bound)
    ready = [bool((t < bound).all()) for t in pt]
    rows = sorted([(k, *t) for k, t in zip(nk.tolist(), nt.tolist())] +
                  [(k, *t) for k, t, ok in zip(pk.tolist(), pt.tolist(), ready) if ok])
    assert keys.tolist() == sorted({r[0] for r in rows})
    assert [(keys[i], x) for i, x in zip(g.tolist(), a.tolist())] == [(r[0], r[1]) for r in rows]
    assert waiting.tolist() == [not ok for ok in ready]
    assert bool(bad) == (len(bound) == 2 and any(r[2] != bound[1] - 1 for r in rows))


@settings(max_examples=200, deadline=None)
@given(seeds() | many_seeds(), st.data(), st.sampled_from(MODES))
def test_merge_pending_is_the_sorted_distinct_union(s, data, impl):
    _, _, pk, pt, _ = s
    depth = pt.shape[1]
    waiting = np.array(data.draw(st.lists(st.booleans(), min_size=len(pk), max_size=len(pk))), dtype=bool)
    keys = np.array(sorted(set(data.draw(st.lists(st.integers(-3, 3), min_size=1, max_size=4)))), dtype=np.int64)
    n = data.draw(st.sampled_from([0, 1, 10, RADIX_ROWS_ABOVE + 50]))
    P = np.column_stack([data.draw(hnp.arrays(np.int64, n, elements=st.integers(0, len(keys) - 1))),
                         data.draw(hnp.arrays(np.int64, (n, 2), elements=st.integers(0, 3)))]).astype(np.int64)
    kernel = as_run(merge_pending, impl)
    ok, ot = kernel(pk, pt, waiting, keys, P)
    _check(ok, ot)
    want = sorted({(k, *t) for k, t, w in zip(pk.tolist(), pt.tolist(), waiting.tolist()) if w} |
                  {(int(keys[p[0]]), *p[1:1 + depth]) for p in P.tolist()})
    assert [(k, *t) for k, t in zip(ok.tolist(), ot.tolist())] == want
    assert ot.shape[1] == depth


def test_native_seed_kernels_check_their_arguments():
    """Times narrower than the bound, or groups outside the keys, would be read out of bounds: ValueErrors."""
    one, none = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    with pytest.raises(ValueError, match="due_seeds: times have fewer coordinates"):
        as_run(due_seeds, "native")(one, np.zeros((1, 1), dtype=np.int64), none, np.zeros((0, 2), dtype=np.int64),
                                    np.array([1, 1]))
    with pytest.raises(ValueError, match="due_seeds: nk and nt"):
        as_run(due_seeds, "native")(one, np.zeros((2, 1), dtype=np.int64), none, np.zeros((0, 1), dtype=np.int64),
                                    np.array([1]))
    with pytest.raises(ValueError, match="merge_pending: P holds a group outside keys"):
        as_run(merge_pending, "native")(none, np.zeros((0, 1), dtype=np.int64), np.zeros(0, dtype=bool), one,
                                        np.array([[1, 0, 0]]))
