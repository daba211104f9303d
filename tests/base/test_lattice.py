"""Lattice times, antichains, frontiers and the roadmap's advance_by claims."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.base.lattice import (
    Antichain,
    MutableAntichain,
    advance_by,
    as_time,
    as_times,
    glb,
    less_equal,
    less_than,
    lex_order,
    lub,
    minimal,
)

# -- Python references ---------------------------------------------------------------


def ref_le(a, b) -> bool:
    return all(x <= y for x, y in zip(a, b))


def ref_minimal(ts) -> set:
    ts = {tuple(t) for t in ts}
    return {t for t in ts if not any(s != t and ref_le(s, t) for s in ts)}


def ref_advance(t, frontier) -> tuple:
    joins = [tuple(max(x, y) for x, y in zip(t, f)) for f in frontier]
    return tuple(min(col) for col in zip(*joins))


def grid(depth: int, hi: int) -> np.ndarray:
    """Every time with coordinates in [0, hi]."""
    return np.array(list(itertools.product(range(hi + 1), repeat=depth)), dtype=np.int64).reshape(-1, depth)


# -- strategies ----------------------------------------------------------------------

COORD = st.integers(0, 6)


def times_of(depth: int, min_size: int = 0, max_size: int = 12):
    return st.lists(st.tuples(*[COORD] * depth), min_size=min_size, max_size=max_size)


@st.composite
def depth_and_times(draw, depths=(1, 2, 3), min_size=0, max_size=12):
    d = draw(st.sampled_from(depths))
    return d, draw(times_of(d, min_size, max_size))


@st.composite
def frontier_and_times(draw, depths=(2, 3)):
    d = draw(st.sampled_from(depths))
    f = draw(times_of(d, 1, 4))
    s = draw(times_of(d, 1, 10))
    return d, f, s


# -- join / meet / order --------------------------------------------------------------


@given(depth_and_times(min_size=1), st.data())
def test_join_meet_le_match_reference(dt, data):
    d, ts = dt
    other = data.draw(times_of(d, len(ts), len(ts)))
    a = np.array(ts, dtype=np.int64)
    b = np.array(other, dtype=np.int64)
    j, m, le, lt = lub(a, b), glb(a, b), less_equal(a, b), less_than(a, b)
    for i, (x, y) in enumerate(zip(ts, other)):
        assert tuple(j[i]) == tuple(max(p, q) for p, q in zip(x, y))
        assert tuple(m[i]) == tuple(min(p, q) for p, q in zip(x, y))
        assert bool(le[i]) == ref_le(x, y)
        assert bool(lt[i]) == (ref_le(x, y) and x != y)
        # join is the least upper bound, meet the greatest lower bound.
        assert ref_le(x, tuple(j[i])) and ref_le(y, tuple(j[i]))
        assert ref_le(tuple(m[i]), x) and ref_le(tuple(m[i]), y)
    # Broadcasting: one time against many.
    assert less_equal(a[0], b).tolist() == [ref_le(ts[0], y) for y in other]


def test_less_equal_is_product_order_not_lexicographic():
    assert not less_equal(np.array([0, 5]), np.array([1, 0]))
    assert not less_equal(np.array([1, 0]), np.array([0, 5]))
    assert less_equal(np.array([0, 5]), np.array([1, 5]))
    assert not less_than(np.array([2, 2]), np.array([2, 2]))
    assert less_than(np.array([2, 1]), np.array([2, 2]))


@given(depth_and_times(min_size=1, max_size=30))
def test_lex_order_is_linear_extension(dt):
    d, ts = dt
    a = np.array(ts, dtype=np.int64)
    order = lex_order(a)
    assert sorted(order.tolist()) == list(range(len(ts)))
    s = a[order]
    # Lexicographic...
    assert [tuple(t) for t in s.tolist()] == sorted(ts)
    # ...and so never a time after one strictly below it.
    for i in range(len(s)):
        for k in range(i + 1, len(s)):
            assert not less_than(s[k], s[i])


def test_as_time_and_as_times_shapes():
    assert as_time(5).tolist() == [5]
    assert as_time((1, 2), depth=2).tolist() == [1, 2]
    assert as_times([1, 2, 3]).shape == (3, 1)
    assert as_times([1, 2], depth=2).shape == (1, 2)
    assert as_times(7).shape == (1, 1)
    with pytest.raises(ValueError, match="depth 2, expected depth 3"):
        as_time((1, 2), depth=3)
    with pytest.raises(ValueError, match="mixed time depths"):
        as_times([(1, 2)], depth=3)


# -- antichains -------------------------------------------------------------------------


@given(depth_and_times(min_size=1, max_size=15))
def test_antichain_keeps_only_minimal_elements(dt):
    d, ts = dt
    a = Antichain(ts, depth=d)
    elems = {tuple(e) for e in a}
    assert elems == ref_minimal(ts)
    assert len(elems) == len(a)  # no duplicates
    for x, y in itertools.permutations(a.elements, 2):
        assert not less_equal(x, y)
    assert tuple(map(tuple, minimal(np.array(ts)).tolist())) == tuple(sorted(ref_minimal(ts)))
    # The antichain describes the same upward-closed set as the input.
    g = grid(d, 7)
    expect = [any(ref_le(t, x) for t in ts) for x in g.tolist()]
    assert a.less_equal_many(g).tolist() == expect
    assert (~a.complete(g)).tolist() == expect
    assert [a.less_equal(x) for x in g] == expect


@given(depth_and_times(depths=(1, 2), min_size=1, max_size=6), st.data())
def test_antichain_insert_meet_dominates(dt, data):
    d, ts = dt
    other = data.draw(times_of(d, 1, 6))
    a, b = Antichain(ts, depth=d), Antichain(other, depth=d)
    assert {tuple(e) for e in a.glb(b)} == ref_minimal(ts + other)
    assert {tuple(e) for e in a.insert(other[0])} == ref_minimal(ts + [other[0]])
    # a <= b as frontiers iff every element of b is beyond some element of a.
    assert a.dominates(b) == all(any(ref_le(x, y) for x in ts) for y in other)
    assert a.glb(b).dominates(a) and a.glb(b).dominates(b)
    assert a == Antichain(list(reversed(ts)), depth=d)
    assert hash(a) == hash(Antichain(list(reversed(ts)), depth=d))


def test_antichain_constructors_and_repr():
    assert Antichain.minimum(2).elements.tolist() == [[0, 0]]
    e = Antichain.empty(3)
    assert len(e) == 0 and not e and e.depth == 3
    assert not e.less_equal((0, 0, 0))
    assert Antichain.from_time(4) == Antichain([4])
    assert Antichain.from_time((1, 2)) == Antichain([(1, 2)])
    assert Antichain([3, 1, 2]).elements.tolist() == [[1]]
    assert repr(Antichain([(0, 3), (1, 2), (2, 0)])) == "Antichain({(0, 3), (1, 2), (2, 0)})"
    assert repr(Antichain([5])) == "Antichain({5})"
    assert Antichain([(1, 2)]) != Antichain([(2, 1)])
    assert Antichain.empty(1) != Antichain.empty(2)
    with pytest.raises(ValueError, match="elements are read-only|read-only"):
        Antichain([1]).elements[0, 0] = 5


def test_antichain_errors_name_the_problem():
    with pytest.raises(ValueError, match="empty Antichain needs an explicit depth"):
        Antichain([])
    with pytest.raises(ValueError, match="mixed time depths"):
        Antichain([(1, 2), (1, 2, 3)])
    with pytest.raises(ValueError, match="mixed time depths"):
        Antichain([(1, 2)], depth=3)
    with pytest.raises(ValueError, match="mixed time depths"):
        Antichain([1]).glb(Antichain([(1, 2)]))
    with pytest.raises(ValueError, match="mixed time depths"):
        Antichain([1]).dominates(Antichain([(1, 2)]))
    with pytest.raises(ValueError, match="expected depth 2"):
        Antichain([(1, 2)]).insert(3)


# -- mutable antichains ---------------------------------------------------------------------


@given(
    st.sampled_from([1, 2]).flatmap(
        lambda d: st.tuples(st.just(d), st.lists(st.tuples(st.tuples(*[st.integers(0, 4)] * d), st.sampled_from([1, 1, 2, -1])), max_size=40))
    )
)
def test_mutable_antichain_counts_and_frontier_changes(args):
    d, changes = args
    m = MutableAntichain(d)
    counts: dict = {}
    for t, delta in changes:
        if counts.get(t, 0) + delta < 0:
            with pytest.raises(ValueError, match="negative"):
                m.update(t, delta)
            continue
        before = {tuple(e) for e in m.frontier()}
        reported = m.update_iter([(t, delta)])
        counts[t] = counts.get(t, 0) + delta
        support = [k for k, v in counts.items() if v > 0]
        after = ref_minimal(support)
        assert {tuple(e) for e in m.frontier()} == after
        assert sorted(reported) == sorted([(x, -1) for x in before - after] + [(x, +1) for x in after - before])
        assert m.count(t) == counts[t]
        assert bool(m) == bool(support)


def test_mutable_antichain_batched_update_iter():
    m = MutableAntichain(2)
    assert m.update_iter([((1, 0), 1), ((0, 1), 1), ((2, 2), 1)]) == [((0, 1), 1), ((1, 0), 1)]
    # Moving a hold from (1,0) to (3,0); (2,2) stays hidden behind (0,1).
    assert m.update_iter([((3, 0), 1), ((1, 0), -1)]) == [((1, 0), -1), ((3, 0), 1)]
    assert m.update_iter([((0, 1), -1)]) == [((0, 1), -1), ((2, 2), 1)]
    assert m.update_iter([((0, 1), 1)]) == [((2, 2), -1), ((0, 1), 1)]
    assert m.update_iter([((0, 1), 1)]) == []  # a second hold at the same time
    assert m.count((0, 1)) == 2
    with pytest.raises(ValueError, match="depth"):
        m.update(5, 1)


# -- advance_by ---------------------------------------------------------------------------


def test_advance_by_depth_one_is_max():
    t = np.array([[0], [3], [5], [9]])
    assert advance_by(t, Antichain([5])).ravel().tolist() == [5, 5, 5, 9]
    assert advance_by(t, Antichain.empty(1)).ravel().tolist() == [0, 3, 5, 9]


def test_advance_by_rejects_mixed_depths():
    with pytest.raises(ValueError, match="mixed time depths"):
        advance_by(np.zeros((3, 2), dtype=np.int64), Antichain([5]))
    with pytest.raises(ValueError, match="mixed time depths"):
        advance_by(np.zeros((3, 2), dtype=np.int64), Antichain.empty(3))


# The roadmap's worked example ("An example (redux)"): four updates and four frontiers.
ROADMAP_TIMES = np.array([(0, 0), (0, 1), (1, 0), (1, 1)], dtype=np.int64)
ROADMAP_CASES = [
    ([(0, 3), (1, 2), (2, 0)], [(0, 0), (0, 1), (1, 0), (1, 1)]),
    ([(1, 2), (2, 0)], [(1, 0), (1, 1), (1, 0), (1, 1)]),
    ([(0, 3), (1, 1)], [(0, 1), (0, 1), (1, 1), (1, 1)]),
    ([(1, 1)], [(1, 1), (1, 1), (1, 1), (1, 1)]),
]


@pytest.mark.parametrize("frontier,expected", ROADMAP_CASES)
def test_roadmap_example_advances(frontier, expected):
    out = advance_by(ROADMAP_TIMES, Antichain(frontier))
    assert [tuple(t) for t in out.tolist()] == expected
    assert [ref_advance(t, frontier) for t in ROADMAP_TIMES.tolist()] == expected


def _future_le(s: np.ndarray, g: np.ndarray) -> np.ndarray:
    """(len s, len g) matrix of s_i <= g_j."""
    return np.all(s[:, None, :] <= g[None, :, :], axis=2)


@settings(max_examples=200)
@given(frontier_and_times())
def test_advance_by_correct_optimal_maximal(args):
    d, f, s = args
    F = Antichain(f)
    S = np.array(s, dtype=np.int64)
    A = advance_by(S, F)
    assert [tuple(t) for t in A.tolist()] == [ref_advance(t, list(F)) for t in s]
    hi = int(max(S.max(), F.elements.max()))
    # Clamping a distinguishing g to [0, hi] keeps it distinguishing (every s and f lies
    # below hi), so this finite grid stands for "all g >= F".
    G = grid(d, hi + 2)
    G = G[F.less_equal_many(G)]
    assert len(G)
    sig_s = _future_le(S, G)
    sig_a = _future_le(A, G)
    # Correctness: for every g >= F, s <= g iff advance(s, F) <= g.
    assert np.array_equal(sig_s, sig_a)
    # Advancing only moves times up.
    assert less_equal(S, A).all()
    # Optimality: indistinguishable times advance to the same time.
    for i in range(len(S)):
        for k in range(len(S)):
            if np.array_equal(sig_s[i], sig_s[k]):
                assert tuple(A[i]) == tuple(A[k])
    # Maximality: every t' indistinguishable from s is <= advance(s, F).
    T = grid(d, hi + 1)
    sig_t = _future_le(T, G)
    for i in range(len(S)):
        same = np.all(sig_t == sig_s[i], axis=1)
        assert same.any()  # advance(s, F) itself is one
        assert less_equal(T[same], A[i]).all()
        # ... so advance(s, F) is the greatest element of its class.
        assert tuple(A[i]) in {tuple(x) for x in T[same].tolist()}


@given(frontier_and_times(depths=(1, 2, 3)), st.data())
def test_advance_by_is_idempotent_and_monotone_in_frontier(args, data):
    d, f, s = args
    F = Antichain(f)
    S = np.array(s, dtype=np.int64)
    A = advance_by(S, F)
    assert np.array_equal(advance_by(A, F), A)
    # A later frontier (every element beyond some element of F) advances at least as far.
    later = [tuple(np.maximum(np.array(x), np.array(f[i % len(f)])).tolist())
             for i, x in enumerate(data.draw(times_of(d, 1, 4)))]
    F2 = Antichain(later)
    assert F.dominates(F2)
    A2 = advance_by(S, F2)
    assert less_equal(A, A2).all()
    # Advancing in two steps is advancing once by the later frontier.
    assert np.array_equal(advance_by(A, F2), A2)
