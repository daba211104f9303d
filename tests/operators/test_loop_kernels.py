"""The loop tactic's kernels (``reduce/iterate.py``, ``reduce/chain.py``), plain and native, against references."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ddflow.base.native import reference
from ddflow.operators.reduce.iterate import loop_pending, loop_seeds
from kernel_modes import MODES, as_run

I64 = np.iinfo(np.int64)


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
@given(seeds(), st.sampled_from(MODES))
def test_loop_seeds_matches_the_reference(s, impl):
    kernel = as_run(loop_seeds, impl)
    groups, gid, t, waiting, bad = kernel(*s)
    ref = reference_seeds(*s)
    assert [tuple(c) for c in groups.T.tolist()] == ref[0]
    assert (gid.tolist(), t.tolist(), waiting.tolist(), bool(bad)) == ref[1:]


@settings(max_examples=300)
@given(seeds(), st.data(), st.sampled_from(MODES), st.booleans())
def test_loop_pending_is_the_sorted_distinct_union(s, data, impl, in_order):
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
    kernel = as_run(loop_pending, impl)
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
    groups = np.ascontiguousarray(np.array(rows, dtype=np.int64).T.reshape(ng, len(rows)))
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
@given(chains(), st.sampled_from(MODES))
def test_chain_output_is_the_consolidated_assembly(ch, impl):
    """The consolidating writer, plain and native, against ``_assemble`` (vectorized numpy, then a consolidation)."""
    from ddflow.base.updates import Updates
    from ddflow.operators.reduce.chain import _assemble, chain_output

    c_gid, c_a, mult, val, has_val, groups, ocols, odiffs, out_pos = ch
    r = 3
    kinds = ("i",) * len(ocols)
    kernel = as_run(chain_output, impl)
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
        for impl in MODES:
            assert as_run(chain_output, impl)(*args)[-1]
    with_val = (0, one, one, np.array([big]), one.copy(), True, np.zeros((1, 1), dtype=np.int64),
                np.zeros((2, 1), dtype=np.int64), np.array([-5]), one)
    with np.errstate(over="ignore"):
        for impl in MODES:
            cols, times, diffs, overflow = as_run(chain_output, impl)(*with_val)
            assert overflow and cols.shape == (2, 0) and times.shape == (0, 2)


def test_native_chain_kernels_check_their_arguments():
    """What the native code would read out of bounds is a ValueError naming the kernel and the argument."""
    from ddflow.operators.reduce.chain import chain_output, chain_walk

    one, none = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    g = np.zeros((1, 1), dtype=np.int64)
    walk, output = as_run(chain_walk, "native"), as_run(chain_output, "native")
    with pytest.raises(ValueError, match="chain_walk: seed_g and seed_a"):
        walk(0, one, none, none, none, none, none, none, none, none, none, False)
    with pytest.raises(ValueError, match="chain_walk: in_g, in_a"):
        walk(0, one, one, one, one, none, one, none, none, none, none, False)
    with pytest.raises(ValueError, match="chain_output: c_gid holds a group"):
        output(0, np.array([1]), one, one, none, False, g, g, none, none)
    with pytest.raises(ValueError, match="chain_output: out_pos holds a chain row"):
        output(0, one, one, one, none, False, g, g, one, np.array([1]))
    with pytest.raises(ValueError, match="chain_output: ocols"):
        output(0, one, one, one, one, True, g, g, one, one)
    with pytest.raises(TypeError):  # not int64, not contiguous: no silent copy
        walk(0, one.astype(np.int32), one, none, none, none, none, none, none, none, none, False)


@st.composite
def walk_inputs(draw):
    """``chain_walk``'s arguments for a few groups: seeds, input and output histories sorted by (group, time)."""
    r = draw(st.integers(0, 3))
    groups = draw(st.integers(1, 4))
    wide = draw(st.booleans())  # diffs at int64's extremes: counts that overflow
    diff = st.sampled_from([I64.max, I64.min, 1, -1]) if wide else st.sampled_from([-1, 1, 1, 2])

    def rows(n, with_diff=True):
        cols = [st.integers(0, groups - 1), st.integers(0, 6)] + ([st.integers(0, 6), diff] if with_diff else [])
        return sorted(draw(st.lists(st.tuples(*cols), max_size=n)))

    seeds = sorted(set(rows(6, False)))
    hin, hout = rows(12), rows(8)
    col = lambda h, k: np.array([x[k] for x in h], dtype=np.int64)  # noqa: E731
    return (r, col(seeds, 0), col(seeds, 1), col(hin, 0), col(hin, 1), col(hin, 2), col(hin, 3),
            col(hout, 0), col(hout, 1), col(hout, 2), col(hout, 3), draw(st.booleans()))


@settings(max_examples=400, deadline=None)
@given(walk_inputs())
def test_chain_walk_native_is_the_reference(args):
    """Every result of the native walk equals the plain reference's: chains, counts, out_pos, pending, overflow."""
    from ddflow.operators.reduce.chain import chain_walk

    want = reference(chain_walk)(*args)
    got = as_run(chain_walk, "native")(*args)
    assert got[5] == want[5]
    for a, b in zip(got[:5], want[:5]):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist()


def _random_trace(draw, arity: int, values):
    """A trace of depth 2 of up to three batches (empty and single-row ones too) of int rows."""
    from ddflow.base.updates import Updates
    from ddflow.traces import Trace

    trace = Trace(("i",) * arity, depth=2)
    for _ in range(draw(st.integers(0, 3))):
        n = draw(st.integers(0, 6))
        cols = tuple(draw(hnp.arrays(np.int64, n, elements=values)) for _ in range(arity))
        times = draw(hnp.arrays(np.int64, (n, 2), elements=st.integers(0, 4)))
        diffs = draw(hnp.arrays(np.int64, n, elements=st.sampled_from([-1, 1, 1, 2])))
        trace.insert_updates(Updates(cols, times, diffs, ("i",) * arity))
    return trace


@st.composite
def loop_steps(draw):
    """A loop step's arguments: traces, new seeds (some not yet complete), pending seeds, the bound, the logic."""
    from ddflow.operators.reduce import CountLogic, DistinctLogic
    from ddflow.traces.layout import VAL0

    logic = draw(st.sampled_from([CountLogic(), DistinctLogic()]))
    ng = draw(st.integers(1, 2))
    values = st.integers(0, 3)
    r = draw(st.integers(0, 3))
    bound = np.array([draw(st.integers(1, 5)), r + 1], dtype=np.int64)
    in_trace = _random_trace(draw, ng, values)
    out_arity = ng + 1 if logic.scalar_code == 0 else ng
    # The traces go with the arguments: their tables hold the addresses of the traces' arrays.
    out_trace = _random_trace(draw, out_arity, values) if draw(st.booleans()) else None
    out_T = out_trace.spine.table().matrix if out_trace is not None else np.zeros((0, VAL0 + out_arity - 1), dtype=np.int64)
    nn, npd = draw(st.integers(0, 6)), draw(st.integers(0, 6))
    nk = draw(hnp.arrays(np.int64, (nn, ng), elements=values))
    # New seeds at the round, or later (a later outer time or iteration: they wait); rarely an earlier iteration.
    outer = draw(hnp.arrays(np.int64, nn, elements=st.integers(0, 6)))
    it = draw(hnp.arrays(np.int64, nn, elements=st.sampled_from([r, r, r, r + 1, r + 2] + ([r - 1] if r else []))))
    nt = np.column_stack([outer, it]).reshape(nn, 2).astype(np.int64)
    pk = draw(hnp.arrays(np.int64, (npd, ng), elements=values))
    pt = np.column_stack([draw(hnp.arrays(np.int64, npd, elements=st.integers(0, 6))),
                          draw(hnp.arrays(np.int64, npd, elements=st.integers(r, r + 2)))]).reshape(npd, 2)
    return nk, nt, pk, pt.astype(np.int64), bound, in_trace.spine.table().matrix, out_T, logic, (in_trace, out_trace)


@settings(max_examples=300, deadline=None)
@given(loop_steps(), st.sampled_from(MODES), st.booleans())
def test_loop_step_is_the_step_by_parts(s, impl, to_arena):
    """The one-call step (plain and native) against its kernels called one by one, the logic in Python
    between.

    Also: the batch it makes for the output trace is ``build_trie``'s,
    either built as a trie whose table row points at the output arrays it
    returns, or (given an arena, and a few updates) written into the arena.
    """
    from ddflow.base.kernels import SMALL_ROWS
    from ddflow.operators.reduce.iterate import BAD_ROUND, DONE, loop_step, loop_step_by_parts
    from ddflow.traces.arena import Arena
    from ddflow.traces.layout import DIFFS, NUPD, TIMES, BatchTable, build_trie

    nk, nt, pk, pt, bound, in_T, out_T, logic, _ = s
    kinds = logic.out_kinds(("i",) * nk.shape[1])
    kernel = as_run(loop_step, impl)
    arena = Arena(kinds, 2, 8, BatchTable(out_T, [])) if to_arena else None
    buf, used, T, at = arena.target() if to_arena else (np.empty(0, dtype=np.int64), 0, np.empty((0, 1), dtype=np.int64), 0)
    cols, times, diffs, keys, key_offs, V, val_offs, row, later, later_t, status, now_used = kernel(
        nk, nt, pk, pt, bound, in_T, out_T, len(kinds), logic.scalar_code, buf, used, T, at,
        SMALL_ROWS if to_arena else 0)
    want, w_later, w_later_t, w_status = loop_step_by_parts(nk, nt, pk, pt, bound, in_T, out_T, logic, kinds)
    assert status == w_status
    if status != DONE:
        assert status == BAD_ROUND and len(diffs) == 0 and now_used == used
        return
    assert [c.tolist() for c in cols] == [c.tolist() for c in want.cols]
    assert times.tolist() == want.times.tolist() and diffs.tolist() == want.diffs.tolist()
    assert later.tolist() == w_later.tolist() and later_t.tolist() == w_later_t.tolist()
    if not len(diffs):
        assert now_used == used
        return
    k2, ko2, V2, vo2, _ = build_trie(np.ascontiguousarray(cols.T), times, diffs)
    if to_arena and len(diffs) <= SMALL_ROWS:
        assert now_used > used and not len(keys)
        arena.written(now_used, len(diffs))
        got = arena.batches()[0]
        assert (got.keys.tolist(), got.key_offs.tolist(), [v.tolist() for v in got.vals], got.val_offs.tolist()) == \
            (k2.tolist(), ko2.tolist(), V2.tolist(), vo2.tolist())
        assert got.times.tolist() == times.tolist() and got.diffs.tolist() == diffs.tolist()
        arena._check()
    else:
        assert now_used == used
        assert (keys.tolist(), key_offs.tolist(), V.tolist(), val_offs.tolist()) == \
            (k2.tolist(), ko2.tolist(), V2.tolist(), vo2.tolist())
        assert (row[NUPD], row[TIMES], row[DIFFS]) == (len(diffs), times.ctypes.data, diffs.ctypes.data)


def test_loop_step_reports_a_count_past_int64():
    from ddflow.base.updates import Updates
    from ddflow.operators.reduce import CountLogic
    from ddflow.operators.reduce.iterate import OVERFLOW, loop_step, loop_step_by_parts
    from ddflow.traces import Trace
    from ddflow.traces.layout import VAL0

    big = np.iinfo(np.int64).max
    trace = Trace(("i",), depth=2)
    for _ in range(2):
        trace.insert_updates(Updates((np.array([7]),), np.array([[0, 0]]), np.array([big]), ("i",)))
    args = (np.array([[7]]), np.array([[0, 0]]), np.zeros((0, 1), dtype=np.int64), np.zeros((0, 2), dtype=np.int64),
            np.array([1, 1]), trace.spine.table().matrix, np.zeros((0, VAL0 + 1), dtype=np.int64))
    with np.errstate(over="ignore"):
        for kernel in (as_run(loop_step, impl) for impl in MODES):
            nowhere = (np.empty(0, dtype=np.int64), 0, np.empty((0, 1), dtype=np.int64), 0, 0)
            assert kernel(*args, 2, CountLogic.scalar_code, *nowhere)[-2] == OVERFLOW
        assert loop_step_by_parts(*args, CountLogic(), ("i", "i"))[-1] == OVERFLOW


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from(MODES))
def test_feedback_round_is_the_next_iteration_consolidated(data, mode):
    """The variable's one-call step against moving the times on and ``consolidate``, due or not."""
    from ddflow.base.consolidate import consolidate
    from ddflow.base.kernels import key_matrix
    from ddflow.base.updates import Updates
    from ddflow.operators.iterate import feedback_round

    m, n = data.draw(st.integers(1, 3)), data.draw(st.integers(0, 12))
    cols = tuple(data.draw(hnp.arrays(np.int64, n, elements=st.integers(0, 2))) for _ in range(m))
    times = data.draw(hnp.arrays(np.int64, (n, 2), elements=st.integers(0, 3)))
    diffs = data.draw(hnp.arrays(np.int64, n, elements=st.sampled_from([-1, 1, 2])))
    bound = np.array([data.draw(st.integers(1, 4)), data.draw(st.integers(1, 5))], dtype=np.int64)
    kernel = as_run(feedback_round, mode)
    C, T, D, due, overflow = kernel(key_matrix(cols, times), diffs, m, bound)
    moved = times.copy()
    moved[:, -1] += 1
    assert bool(due) == bool((moved < bound).all(axis=1).all())
    if due:
        want = consolidate(Updates(cols, moved, diffs, ("i",) * m))
        assert not overflow
        assert [c.tolist() for c in C] == [c.tolist() for c in want.cols]
        assert T.tolist() == want.times.tolist() and D.tolist() == want.diffs.tolist()


def test_feedback_round_reports_a_sum_past_int64():
    from ddflow.operators.iterate import feedback_round

    big = np.iinfo(np.int64).max
    K = np.array([[1, 0, 0], [1, 0, 0]], dtype=np.int64)
    with np.errstate(over="ignore"):
        for kernel in (as_run(feedback_round, mode) for mode in MODES):
            assert kernel(K, np.array([big, big]), 1, np.array([1, 2]))[-1]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 4), st.lists(st.integers(0, 6), max_size=4), st.integers(0, 6),
       st.lists(st.tuples(st.integers(0, 6), st.integers(0, 8)), max_size=12),
       st.lists(st.tuples(st.integers(0, 6), st.integers(0, 8)), max_size=12))
def test_later_rounds_pends_the_least_later_iteration_at_every_candidate_time(r, chain, ms, hin, hout):
    """``(g, a, i)`` for every candidate outer time ``a`` (the chain's and the later history's from ``ms`` on),
    ``i`` the least iteration past ``r`` in the group's history: round ``i`` makes the next one pending.

    Run as plain Python: the native copy is not bound on its own, and runs inside ``chain_walk`` and ``key_walk``,
    whose native results are compared with their references (above, and in test_walk_kernels.py)."""
    from ddflow.operators.reduce.chain import later_rounds

    hin, hout = sorted(hin), sorted(hout)
    in_a = np.array([a for a, _ in hin], dtype=np.int64)
    in_i = np.array([i for _, i in hin], dtype=np.int64)
    out_a = np.array([a for a, _ in hout], dtype=np.int64)
    out_i = np.array([i for _, i in hout], dtype=np.int64)
    later = sum(i > r for _, i in hin + hout)
    if not later:
        return
    chain_arr = np.array(sorted(set(chain)), dtype=np.int64)
    scratch = np.empty(len(chain_arr) + len(in_a) + len(out_a), dtype=np.int64)
    P, npd = later_rounds(np.empty((2, 3), dtype=np.int64), 0, 5, r, ms, chain_arr, 0, len(chain_arr), later,
                          in_a, in_i, 0, len(in_a), out_a, out_i, 0, len(out_a), scratch, False, chain_arr,
                          np.ones(len(in_a), dtype=np.int64), np.ones(len(out_a), dtype=np.int64))
    least = min(i for _, i in hin + hout if i > r)
    outer = set(chain_arr.tolist()) | {a for a, i in hin + hout if i > r and a >= ms}
    assert [tuple(p) for p in P[:npd].tolist()] == [(5, a, least) for a in sorted(outer)]


@st.composite
def group_histories(draw, *values):
    """One group's input and output histories ``(outer time, iteration, *values, diff)``, its seeds, a round.

    ``values``: a strategy for each value field (none for a distinct's).
    """
    r = draw(st.integers(0, 3))
    row = st.tuples(st.integers(0, 5), st.integers(0, 7), *values, st.sampled_from([-1, 1, 1, 2]))
    hin = sorted(draw(st.lists(row, max_size=6)))
    hout = sorted(draw(st.lists(row, max_size=4)))
    seeds = sorted(set(draw(st.lists(st.integers(0, 5), min_size=1, max_size=2))))
    return r, hin, hout, seeds


def _walk(kernel, r, seeds, hin, hout, distinct):
    """``chain_walk`` for group 0 at round ``r``; then what a distinct emits there: ``(P, emitted (time, diff))``."""
    def cols(h, k):
        return np.array([x[k] for x in h], dtype=np.int64)
    seed_a = np.array(seeds, dtype=np.int64)
    cg, ca, acc, out_pos, P, overflow = kernel(r, np.zeros(len(seeds), dtype=np.int64), seed_a,
                                               np.zeros(len(hin), dtype=np.int64), cols(hin, 0), cols(hin, 1),
                                               cols(hin, 2), np.zeros(len(hout), dtype=np.int64), cols(hout, 0),
                                               cols(hout, 1), cols(hout, 2), distinct)
    assert not overflow
    net = [int(acc[i] > 0) - (int(acc[i - 1] > 0) if i else 0) for i in range(len(ca))]
    for q, i in enumerate(out_pos.tolist()):
        if i >= 0:
            net[i] -= hout[q][2]
    return P, [(int(a), d) for a, d in zip(ca.tolist(), net) if d]


@settings(max_examples=400, deadline=None)
@given(group_histories(), st.sampled_from(MODES))
def test_a_distinct_pends_the_first_round_whose_visit_emits(h, impl):
    """A distinct's walk at round ``r`` pends the least later iteration whose visit would emit something.

    The reference makes every visit: round ``r``'s output joins the
    output history, then each later iteration of the group's history in
    order is walked, seeded at every candidate outer time (the pending
    times the walk without pruning gives), until one emits.  The pruned
    walk must pend that iteration at the same outer times, or nothing
    when no visit emits.  Past ``FIRST_CHANGE_WORK``, the least later
    iteration, as for the other logics.
    """
    from ddflow.operators.reduce.chain import FIRST_CHANGE_WORK, chain_walk

    kernel = as_run(chain_walk, impl)
    r, hin, hout, seeds = h
    P_all, emitted = _walk(kernel, r, seeds, hin, hout, False)
    P, _ = _walk(kernel, r, seeds, hin, hout, True)
    candidates = sorted({int(a) for a in P_all[:, 1].tolist()})
    later = sorted({i for _, i, _ in hin + hout if i > r})
    want = None
    if len(hin + hout) * (len(hin + hout) + 2 * len(candidates)) > FIRST_CHANGE_WORK:
        want = later[0] if later else None
    else:
        hout = sorted(hout + [(a, r, d) for a, d in emitted])
        for L in later:
            if _walk(kernel, L, candidates, hin, hout, False)[1]:
                want = L
                break
    assert [tuple(p) for p in P.tolist()] == ([(0, a, want) for a in candidates] if want is not None else [])
