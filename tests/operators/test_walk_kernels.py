"""The walk's value ranking and row assembly (``reduce/keywalk.py``), compiled and plain, against references."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ddflow.base.consolidate import consolidate
from ddflow.base.updates import Updates
from ddflow.operators.reduce.keywalk import rank_values, walk_rows
from ddflow.operators.reduce.walk import _dense_rank, _narrow_int_range

#: Calls kernels with argument types of its own: they compile in the test process, so it runs last (conftest.py).
pytestmark = pytest.mark.compiles


@st.composite
def histories(draw):
    m = draw(st.integers(1, 3))
    values = st.integers(-3, 3) if draw(st.booleans()) else st.sampled_from([-(2**63), -(10**15), -1, 3, 2**62, 2**63 - 1])
    ni, no = draw(st.integers(0, 8)), draw(st.integers(0, 8))
    Ci = np.vstack([np.zeros((1, ni), dtype=np.int64), draw(hnp.arrays(np.int64, (m, ni), elements=values))])
    Co = np.vstack([np.zeros((1, no), dtype=np.int64), draw(hnp.arrays(np.int64, (m, no), elements=values))])
    return Ci, Co, m


@settings(max_examples=200, deadline=None)
@given(histories(), st.booleans(), st.booleans(), st.booleans())
def test_rank_values_ranks_as_the_numpy_reference(h, plain, by_numpy, by_radix):
    """``by_numpy``: the order given; else sorted in the kernel, one value by radix (``by_radix``) or all by rows."""
    Ci, Co, m = h
    cols = [np.concatenate([Ci[1 + c], Co[1 + c]]) for c in range(m)]
    n = len(cols[0])
    ref_lo = _narrow_int_range(cols, ("i",) * m)
    given = np.zeros(0, dtype=np.int64)
    if ref_lo is None and n and by_numpy:  # the order numpy gives many rows (unstable for one column)
        given = np.argsort(cols[0]) if m == 1 else np.lexsort(cols[::-1])
    kernel = rank_values.plain if plain else rank_values
    rank, first, n_values, lo, narrow = kernel(Ci, Co, m, given, 0 if by_radix else 1 << 30)
    assert bool(narrow) == (ref_lo is not None)
    if narrow:
        assert lo == ref_lo and rank.tolist() == (cols[0] - lo).tolist() and n_values == int(cols[0].max()) - lo + 1
    else:
        ref_rank, ref_first = _dense_rank(cols, n)
        assert rank.tolist() == ref_rank.tolist() and n_values == len(ref_first)
        # one row of each rank: any row with that rank's values
        assert [[c[i] for c in cols] for i in first.tolist()] == [[c[i] for c in cols] for i in ref_first.tolist()]


@settings(max_examples=200, deadline=None)
@given(histories(), st.data(), st.booleans(), st.booleans(), st.booleans())
def test_walk_rows_lays_out_the_emitted_rows(h, data, numbered, loop, plain):
    Ci, Co, m = h
    rank, first, n_values, lo, narrow = rank_values(Ci, Co, m, np.zeros(0, dtype=np.int64), 1 << 30)
    if not n_values:
        return
    keys = np.array([4, 7, 9], dtype=np.int64)
    ne = data.draw(st.integers(0, 6))
    E = np.column_stack([data.draw(hnp.arrays(np.int64, ne, elements=st.integers(0, 2))),
                         data.draw(hnp.arrays(np.int64, ne, elements=st.integers(0, n_values - 1))),
                         data.draw(hnp.arrays(np.int64, ne, elements=st.integers(1, 3))),
                         data.draw(hnp.arrays(np.int64, ne, elements=st.integers(0, 9))),
                         data.draw(hnp.arrays(np.int64, ne, elements=st.sampled_from([-1, 2])))]).astype(np.int64)
    if not numbered:
        E[:, 2] = 0  # as key_walk leaves it: the number is 0 but in mode 3
    depth, r = (2, 5) if loop else (1, 0)
    kernel = walk_rows.plain if plain else walk_rows
    C, T, D, overflow = kernel(E, keys, first, lo, narrow, Ci, Co, m, numbered, depth, r)
    assert not overflow
    vals = [np.concatenate([Ci[1 + c], Co[1 + c]]) for c in range(m)]
    rows, times = [], []
    for e in range(ne):
        value = [E[e, 1] + lo] if narrow else [v[first[E[e, 1]]] for v in vals]
        rows.append([keys[E[e, 0]], *value] + ([E[e, 2]] if numbered else []))
        times.append([E[e, 3]] + ([r] if loop else []))
    width = 1 + m + numbered
    ref = Updates(tuple(np.array([row[c] for row in rows], dtype=np.int64) for c in range(width)),
                  np.array(times, dtype=np.int64).reshape(ne, depth), E[:, 4].copy(), ("i",) * width)
    want = consolidate(ref)  # the reference: every row as laid out, then consolidated
    assert C.shape == (width, len(want)) and [c.tolist() for c in C] == [c.tolist() for c in want.cols]
    assert T.tolist() == want.times.tolist() and D.tolist() == want.diffs.tolist()
