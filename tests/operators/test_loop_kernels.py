"""The loop tactic's seed kernels, compiled and plain, against Python references on random seeds (empty ones too)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ddflow.operators.reduce.iterate import loop_pending, loop_seeds


@st.composite
def seeds(draw):
    m = draw(st.integers(1, 3))
    r = draw(st.integers(0, 3))
    nn, npend = draw(st.integers(0, 12)), draw(st.integers(0, 12))
    small = st.integers(-2, 2)
    nk = draw(hnp.arrays(np.int64, (nn, m), elements=small))
    nt = np.column_stack([draw(hnp.arrays(np.int64, nn, elements=st.integers(0, 4))), np.full(nn, r, dtype=np.int64)])
    pk = draw(hnp.arrays(np.int64, (npend, m), elements=small))
    pt = draw(hnp.arrays(np.int64, (npend, 2), elements=st.integers(0, 5)))
    if draw(st.booleans()):  # an internal error to flag: a new seed at another iteration
        nt[:, 1] = draw(st.integers(0, 4))
    bound = np.array([draw(st.integers(0, 6)), r + 1], dtype=np.int64)
    return nk, nt.astype(np.int64), pk, pt, bound


def reference_seeds(nk, nt, pk, pt, bound):
    ready = [bool((pt[i] < bound).all()) for i in range(len(pt))]
    rows = [(tuple(nk[i]), nt[i]) for i in range(len(nk))] + [(tuple(pk[i]), pt[i]) for i in range(len(pk)) if ready[i]]
    bad = any(int(t[1]) != int(bound[-1]) - 1 for _, t in rows)
    order = sorted(range(len(rows)), key=lambda i: (rows[i][0], int(rows[i][1][0])))
    groups = sorted({g for g, _ in rows})
    gid = [groups.index(rows[i][0]) for i in order]
    t = [int(rows[i][1][0]) for i in order]
    return groups, gid, t, [not x for x in ready], bad


@settings(max_examples=200)
@given(seeds(), st.booleans())
def test_loop_seeds_matches_the_reference(s, plain):
    kernel = loop_seeds.plain if plain else loop_seeds
    groups, gid, t, waiting, bad = kernel(*s)
    ref = reference_seeds(*s)
    assert [tuple(c) for c in groups.T.tolist()] == ref[0]
    assert (gid.tolist(), t.tolist(), waiting.tolist(), bool(bad)) == ref[1:]


@settings(max_examples=300)
@given(seeds(), st.data(), st.booleans(), st.booleans())
def test_loop_pending_is_the_sorted_distinct_union(s, data, plain, in_order):
    """In order (as the tactic hands them: merged) or not (sorted first)."""
    _, _, pk, pt, _ = s
    m = pk.shape[1]
    waiting = np.array(data.draw(st.lists(st.booleans(), min_size=len(pk), max_size=len(pk))), dtype=bool)
    G = data.draw(st.integers(1, 4))
    groups = data.draw(hnp.arrays(np.int64, (m, G), elements=st.integers(-2, 2)))
    np_ = data.draw(st.integers(0, 10))
    P = np.column_stack([data.draw(hnp.arrays(np.int64, np_, elements=st.integers(0, G - 1))),
                         data.draw(hnp.arrays(np.int64, (np_, 2), elements=st.integers(0, 3)))]).astype(np.int64)
    P = P.reshape(np_, 3)
    if in_order:
        o = sorted(range(len(pk)), key=lambda i: (tuple(pk[i]), tuple(pt[i])))
        pk, pt, waiting = pk[o].reshape(-1, m), pt[o].reshape(-1, 2), waiting[o]
        P = P[sorted(range(np_), key=lambda j: (tuple(groups[:, P[j, 0]]), P[j, 1], P[j, 2]))].reshape(-1, 3)
    kernel = loop_pending.plain if plain else loop_pending
    cols, times = kernel(pk, pt, waiting, groups, P)
    want = sorted({tuple(pk[i]) + tuple(pt[i]) for i in range(len(pk)) if waiting[i]}
                  | {tuple(groups[:, p[0]]) + (p[1], p[2]) for p in P.tolist()})
    got = [tuple(cols[:, i]) + tuple(times[i]) for i in range(len(times))]
    assert got == [tuple(int(x) for x in w) for w in want]


@st.composite
def chains(draw):
    """Chain rows by (group, time) and output history first visible at some of them, as ``chain_walk`` leaves them."""
    ng = draw(st.integers(1, 2))
    has_val = draw(st.booleans())
    rows = sorted(set(map(tuple, draw(hnp.arrays(np.int64, (draw(st.integers(1, 4)), ng), elements=st.integers(-2, 2))).tolist())))
    groups = np.array(rows, dtype=np.int64).T.reshape(ng, len(rows))
    c_gid, c_a = [], []
    for g in range(len(rows)):
        for a in sorted(set(draw(st.lists(st.integers(0, 6), min_size=1, max_size=4)))):
            c_gid.append(g)
            c_a.append(a)
    n = len(c_gid)
    values = st.integers(-2, 2) if draw(st.booleans()) else st.sampled_from([-(2**62), 0, 2**62])
    mult = draw(hnp.arrays(np.int64, n, elements=st.sampled_from([0, 0, 1, 2, -1])))
    val = draw(hnp.arrays(np.int64, n if has_val else 0, elements=values))
    nh = draw(st.integers(0, 8))
    out_pos = draw(hnp.arrays(np.int64, nh, elements=st.integers(-1, n - 1)))
    ocols = np.zeros((ng + has_val, nh), dtype=np.int64)
    for q, i in enumerate(out_pos.tolist()):
        ocols[:ng, q] = groups[:, c_gid[max(i, 0)]]
        if has_val:
            ocols[ng, q] = draw(values)
    odiffs = draw(hnp.arrays(np.int64, nh, elements=st.sampled_from([-1, 1, 2])))
    return (np.array(c_gid, dtype=np.int64), np.array(c_a, dtype=np.int64), mult, val, has_val, groups, ocols,
            odiffs, out_pos)


@settings(max_examples=300, deadline=None)
@given(chains(), st.booleans())
def test_chain_output_is_the_consolidated_assembly(ch, plain):
    """The compiled, consolidating writer against ``_assemble`` (vectorized numpy, then a consolidation)."""
    from ddflow.base.updates import Updates
    from ddflow.operators.reduce.chain import _assemble, chain_output

    c_gid, c_a, mult, val, has_val, groups, ocols, odiffs, out_pos = ch
    r = 3
    kinds = ("i",) * len(ocols)
    kernel = chain_output.plain if plain else chain_output
    cols, times, diffs, overflow = kernel(r, c_gid, c_a, mult, val, has_val, groups, ocols, odiffs, out_pos)
    assert not overflow
    out = Updates(tuple(ocols), np.zeros((len(odiffs), 2), dtype=np.int64), odiffs, kinds)
    want = _assemble(list(groups), c_gid, c_a, mult, val if has_val else None, out, out_pos, None, kinds, r)
    assert [c.tolist() for c in cols] == [c.tolist() for c in want.cols]
    assert times.tolist() == want.times.tolist() and diffs.tolist() == want.diffs.tolist()


def test_chain_output_reports_an_overflow():
    from ddflow.operators.reduce.chain import chain_output

    big = np.iinfo(np.int64).max
    one = np.zeros(1, dtype=np.int64)
    args = (0, one, one, np.array([big]), one[:0], False, np.zeros((1, 1), dtype=np.int64),
            np.zeros((1, 1), dtype=np.int64), np.array([-5]), one)
    with np.errstate(over="ignore"):
        for kernel in (chain_output, chain_output.plain):
            assert kernel(*args)[-1]
