"""The walk's kernels (``reduce/keywalk.py``, ``reduce/walk.py``), plain and native, against references."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ddflow.base.consolidate import consolidate
from ddflow.base.native import reference
from ddflow.base.updates import Updates
from ddflow.operators.reduce.keywalk import rank_values, walk_rows
from ddflow.operators.reduce.walk import _dense_rank, _narrow_int_range
from kernel_modes import MODES, as_run
from tests.operators.test_loop_kernels import group_histories


@st.composite
def histories(draw):
    m = draw(st.integers(1, 3))
    values = st.integers(-3, 3) if draw(st.booleans()) else st.sampled_from([-(2**63), -(10**15), -1, 3, 2**62, 2**63 - 1])
    ni, no = draw(st.integers(0, 8)), draw(st.integers(0, 8))
    Ci = np.vstack([np.zeros((1, ni), dtype=np.int64), draw(hnp.arrays(np.int64, (m, ni), elements=values))])
    Co = np.vstack([np.zeros((1, no), dtype=np.int64), draw(hnp.arrays(np.int64, (m, no), elements=values))])
    return Ci, Co, m


@settings(max_examples=200, deadline=None)
@given(histories(), st.sampled_from(MODES), st.booleans(), st.booleans())
def test_rank_values_ranks_as_the_numpy_reference(h, impl, by_numpy, by_radix):
    """``by_numpy``: the order given; else sorted in the kernel, one value by radix (``by_radix``) or all by rows."""
    Ci, Co, m = h
    cols = [np.concatenate([Ci[1 + c], Co[1 + c]]) for c in range(m)]
    n = len(cols[0])
    ref_lo = _narrow_int_range(cols, ("i",) * m)
    given = np.zeros(0, dtype=np.int64)
    if ref_lo is None and n and by_numpy:  # the order numpy gives many rows (unstable for one column)
        given = np.argsort(cols[0]) if m == 1 else np.lexsort(cols[::-1])
    kernel = as_run(rank_values, impl)
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
@given(histories(), st.data(), st.booleans(), st.booleans(), st.sampled_from(MODES))
def test_walk_rows_lays_out_the_emitted_rows(h, data, numbered, loop, impl):
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
    kernel = as_run(walk_rows, impl)
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


def _walk_trace(draw, depth: int, r: int):
    """A random trace of (key, value) pairs at times of ``depth`` (iterations up to ``r`` in a loop)."""
    from ddflow.traces import Trace

    trace = Trace(("i", "i"), depth=depth)
    for _ in range(draw(st.integers(0, 3))):
        n = draw(st.integers(0, 6))
        cols = tuple(draw(hnp.arrays(np.int64, n, elements=st.integers(0, 3))) for _ in range(2))
        times = np.column_stack([draw(hnp.arrays(np.int64, n, elements=st.integers(0, 4))) for _ in range(depth)])
        if depth == 2:
            times[:, 1] = np.minimum(times[:, 1], r)
        diffs = draw(hnp.arrays(np.int64, n, elements=st.sampled_from([-1, 1, 1, 2])))
        trace.insert_updates(Updates(cols, times.reshape(n, depth).astype(np.int64), diffs, ("i", "i")))
    return trace


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from(["min", "max", "top_k"]), st.sampled_from([1, 2]), st.sampled_from(MODES))
def test_walk_step_writes_a_small_output_into_the_arena_as_its_trie(data, logic, depth, impl):
    """The one-call min/max/top_k step given an arena and given none: the same output and pending seeds, and
    the batch it writes into the arena (a few updates) is the trie it builds otherwise."""
    from ddflow.base.kernels import SMALL_ROWS
    from ddflow.operators.reduce.tactic import DONE
    from ddflow.operators.reduce.walk import MODES as WALK_MODES, walk_step
    from ddflow.traces.arena import Arena
    from ddflow.traces.layout import BatchTable, build_trie

    r = data.draw(st.integers(0, 2)) if depth == 2 else 0
    bound = np.array([data.draw(st.integers(1, 5))] + ([r + 1] if depth == 2 else []), dtype=np.int64)
    in_trace, out_trace = _walk_trace(data.draw, depth, r), _walk_trace(data.draw, depth, r)
    in_T, out_T = in_trace.spine.table().matrix, out_trace.spine.table().matrix
    nn, npd = data.draw(st.integers(0, 6)), data.draw(st.integers(0, 4))
    nk = data.draw(hnp.arrays(np.int64, nn, elements=st.integers(0, 3)))
    nt = np.column_stack([data.draw(hnp.arrays(np.int64, nn, elements=st.integers(0, 6)))]
                         + ([np.full(nn, r, dtype=np.int64)] if depth == 2 else [])).reshape(nn, depth).astype(np.int64)
    pk = np.unique(data.draw(hnp.arrays(np.int64, npd, elements=st.integers(0, 3))))
    pt = np.column_stack([data.draw(hnp.arrays(np.int64, len(pk), elements=st.integers(0, 6)))]
                         + ([np.full(len(pk), r, dtype=np.int64)] if depth == 2 else [])).reshape(len(pk), depth)
    pt = pt.astype(np.int64)
    nt.flags.writeable = False  # as the tactic passes it (the native binding takes it as a read-only view)
    kernel = as_run(walk_step, impl)
    args = (WALK_MODES[logic], 2, nk, nt, pk, pt, bound, in_T, out_T, 1 << 30)
    none = kernel(*args, np.empty(0, dtype=np.int64), 0, np.empty((0, 1), dtype=np.int64), 0, 0)
    arena = Arena(("i", "i"), depth, 8, BatchTable(out_T, []))
    buf, used, T, at = arena.target()
    got = kernel(*args, buf, used, T, at, SMALL_ROWS)
    cols, times, diffs, status = none[0], none[1], none[2], none[10]
    assert got[10] == status and none[11] == 0
    for a, b in zip(got[:3] + got[8:10], none[:3] + none[8:10]):
        assert a.tolist() == b.tolist()
    if status != DONE or not len(diffs):
        assert got[11] == used
        return
    keys, key_offs, V, val_offs = none[3:7]
    assert (keys.tolist(), key_offs.tolist(), V.tolist(), val_offs.tolist()) == \
        tuple(x.tolist() for x in build_trie(np.ascontiguousarray(cols.T), times, diffs)[:4])
    if len(diffs) > SMALL_ROWS:
        assert got[11] == used and len(got[3])
        return
    assert got[11] > used and not len(got[3])
    arena.written(got[11], len(diffs))
    b = arena.batches()[0]
    assert (b.keys.tolist(), b.key_offs.tolist(), [v.tolist() for v in b.vals], b.val_offs.tolist()) == \
        (keys.tolist(), key_offs.tolist(), V.tolist(), val_offs.tolist())
    assert b.times.tolist() == times.tolist() and b.diffs.tolist() == diffs.tolist()
    arena._check()


def _key_walk(kernel, mode, r, seeds, hin, hout):
    """``key_walk`` of group 0 at round ``r``, every time complete: ``(E rows (value, outer time, diff), P)``."""
    def cols(h, k):
        return np.array([x[k] for x in h], dtype=np.int64)
    none = np.zeros(0, dtype=np.int64)
    E, P = kernel(mode, 1, r, 1 << 40, 4, np.zeros(len(seeds), dtype=np.int64), np.array(seeds, dtype=np.int64),
                  np.zeros(len(hin), dtype=np.int64), cols(hin, 0), cols(hin, 1), cols(hin, 2), cols(hin, 3),
                  np.zeros(len(hout), dtype=np.int64), cols(hout, 0), cols(hout, 1), cols(hout, 2), cols(hout, 3),
                  np.zeros(len(hout), dtype=np.int64), none, none)
    return [(int(v), int(a), int(d)) for _, v, _, a, d in E.tolist()], P


@settings(max_examples=400, deadline=None)
@given(group_histories(st.integers(0, 3)), st.sampled_from([0, 1]), st.sampled_from(MODES))
def test_a_min_or_max_pends_the_first_round_whose_visit_emits(h, mode, impl):
    """A min's (max's) walk at round ``r`` pends the least later iteration whose visit would emit something.

    The reference makes every visit: round ``r``'s output joins the output
    history, then each later iteration of the group's history in order is
    walked, seeded at every candidate outer time (those a top_k of one
    pends, which is not pruned and equals a min), until one emits.  The
    pruned walk must pend that iteration at those outer times, or nothing
    when no visit emits.  Past ``EXTREME_CHANGE_WORK``, the least later
    iteration.
    """
    from ddflow.operators.reduce.keywalk import EXTREME_CHANGE_WORK, key_walk

    kernel = as_run(key_walk, impl)
    r, hin, hout, seeds = h
    if mode == 1:  # a max is a min of the values reversed: the same top_k of one, in reverse
        flip = lambda rows: sorted((a, i, 3 - v, d) for a, i, v, d in rows)  # noqa: E731
    else:
        flip = sorted
    emitted, P = _key_walk(kernel, mode, r, seeds, hin, hout)
    emitted_ref, P_all = _key_walk(kernel, 2, r, seeds, flip(hin), flip(hout))
    assert sorted(emitted) == sorted((3 - v if mode else v, a, d) for v, a, d in emitted_ref)
    candidates = sorted({int(a) for a in P_all[:, 1].tolist()})
    later = sorted({i for _, i, _, _ in hin + hout if i > r})
    values = {v for _, _, v, _ in hin + hout}
    want = None
    if len(hin + hout) * (len(hin + hout) + len(candidates) * len(values)) > EXTREME_CHANGE_WORK:
        want = later[0] if later else None
    else:
        hout = sorted(hout + [(a, r, v, d) for v, a, d in emitted])
        for L in later:
            if _key_walk(kernel, mode, L, candidates, hin, hout)[0]:
                want = L
                break
    assert [tuple(p) for p in P.tolist()] == ([(0, a, want) for a in candidates] if want is not None else [])


@st.composite
def key_walk_inputs(draw):
    """``key_walk``'s arguments: a few groups' seeds and histories sorted by (group, outer time), any mode, ties and
    parts as the tactic makes them (nondecreasing), numbers of a numbered output history in 1..k."""
    mode, k = draw(st.integers(0, 5)), draw(st.integers(0, 3))
    n_values, G, r = draw(st.integers(1, 5)), draw(st.integers(1, 3)), draw(st.integers(0, 3))
    bound_a = draw(st.sampled_from([1 << 40, 3, 5]))
    col = lambda h, c: np.array([x[c] for x in h], dtype=np.int64)  # noqa: E731
    key = st.integers(0, G - 1)
    seeds = sorted(set(draw(st.lists(st.tuples(key, st.integers(0, 6)), max_size=5))))
    row = st.tuples(key, st.integers(0, 6), st.integers(0, 5), st.integers(0, n_values - 1),
                    st.sampled_from([-1, 1, 1, 2]))
    hin = sorted(draw(st.lists(row, max_size=12)))
    hout = sorted(draw(st.lists(row, max_size=8)))
    out_n = (draw(hnp.arrays(np.int64, len(hout), elements=st.integers(1, max(k, 1)))) if mode >= 3 and k
             else np.zeros(len(hout), dtype=np.int64))
    if mode >= 3 and not k:  # no numbered output can exist: keep the output history unnumbered-free
        hout = []
        out_n = out_n[:0]

    def groups_of():  # nondecreasing from 0, one per value rank
        return np.cumsum([0] + draw(st.lists(st.integers(0, 1), min_size=n_values - 1, max_size=n_values - 1)))

    tie = groups_of().astype(np.int64) if mode >= 4 else np.zeros(0, dtype=np.int64)
    part = groups_of().astype(np.int64) if mode >= 2 and draw(st.booleans()) else np.zeros(0, dtype=np.int64)
    return (mode, k, r, bound_a, n_values, col(seeds, 0), col(seeds, 1),
            col(hin, 0), col(hin, 1), col(hin, 2), col(hin, 3), col(hin, 4),
            col(hout, 0), col(hout, 1), col(hout, 2), col(hout, 3), col(hout, 4), out_n, tie, part)


@settings(max_examples=600, deadline=None)
@given(key_walk_inputs())
def test_key_walk_native_is_the_reference(args):
    """The native walk's output rows and pending times equal the plain reference's, in every mode."""
    from ddflow.operators.reduce.keywalk import key_walk

    want = reference(key_walk)(*args)
    got = as_run(key_walk, "native")(*args)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist()


def test_key_walk_rejects_an_output_number_outside_1_to_k_as_the_reference_does():
    from ddflow.operators.reduce.keywalk import key_walk

    one, none = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    args = (3, 2, 0, 1 << 40, 1, one, one, none, none, none, none, none, one, one, one, one, one + 1, one + 3,
            none, none)
    for impl in MODES:
        with pytest.raises(ValueError, match="an output row number outside 1..k"):
            as_run(key_walk, impl)(*args)


def test_native_walk_kernels_check_their_arguments():
    """Value ranks index the walk's arrays: out of range, or parts out of order, is a ValueError, not a crash."""
    from ddflow.operators.reduce.keywalk import key_walk, rank_values, walk_rows

    one, none = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    walk = as_run(key_walk, "native")
    hist = (one, one, one, one, one)

    def call(mode=0, n_values=1, in_v=one, tie=none, part=none, out=(none,) * 6):
        return walk(mode, 1, 0, 1 << 40, n_values, one, one, *hist[:3], in_v, one, *out, tie, part)
    with pytest.raises(ValueError, match="key_walk: in_v holds a value rank"):
        call(in_v=one + 1)
    with pytest.raises(ValueError, match="key_walk: the input history"):
        call(in_v=none)
    with pytest.raises(ValueError, match="key_walk: tie needs"):
        call(mode=4)
    with pytest.raises(ValueError, match="key_walk: part is not nondecreasing"):
        call(mode=2, n_values=2, part=np.array([1, 0]))
    with pytest.raises(ValueError, match="rank_values: order holds an index"):
        as_run(rank_values, "native")(np.zeros((2, 2), dtype=np.int64), np.zeros((2, 0), dtype=np.int64), 1,
                                      np.array([0, 5]), 0)
    E = np.array([[3, 0, 0, 0, 1]], dtype=np.int64)
    with pytest.raises(ValueError, match="walk_rows: E holds a group outside keys"):
        as_run(walk_rows, "native")(E, one, one, 0, True, np.zeros((2, 1), dtype=np.int64),
                                    np.zeros((2, 0), dtype=np.int64), 1, False, 1, 0)


def same_step(got, want, row_at: int) -> None:
    """Two one-call steps' results alike: every array and number equal, but the table row at ``row_at``, whose
    counts must be equal and whose addresses each must point at its own step's arrays (its times and diffs)."""
    from ddflow.traces.layout import DIFFS, NKEYS, NUPD, NVALS, TIMES

    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        if i == row_at:
            continue
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist(), i
        else:
            assert a == b, i
    a, b = got[row_at], want[row_at]
    assert len(a) == len(b) and (not len(a) or a[[NKEYS, NVALS, NUPD]].tolist() == b[[NKEYS, NVALS, NUPD]].tolist())
    for row, res in ((a, got), (b, want)):
        if len(row):
            assert (row[TIMES], row[DIFFS]) == (res[1].ctypes.data, res[2].ctypes.data)


def _walk_seeds(draw, depth, r):
    """New seeds (read-only times, as a batch hands them) and pending ones (sorted unique keys) for a walk step."""
    nn, npd = draw(st.integers(0, 6)), draw(st.integers(0, 4))
    nk = draw(hnp.arrays(np.int64, nn, elements=st.integers(0, 3)))
    nt = np.column_stack([draw(hnp.arrays(np.int64, nn, elements=st.integers(0, 6)))]
                         + ([np.full(nn, r, dtype=np.int64)] if depth == 2 else [])).reshape(nn, depth).astype(np.int64)
    pk = np.unique(draw(hnp.arrays(np.int64, npd, elements=st.integers(0, 3))))
    pt = np.column_stack([draw(hnp.arrays(np.int64, len(pk), elements=st.integers(0, 6)))]
                         + ([np.full(len(pk), r, dtype=np.int64)] if depth == 2 else [])).reshape(len(pk), depth)
    nt.flags.writeable = False
    return nk, nt, pk, pt.astype(np.int64)


def _arena_written(run, out_T, depth, small):
    """``run(buf, used, T, at, small)`` into a fresh arena after ``out_T``: its result, and the batch it wrote
    (keys, key offsets, values, value offsets, times, diffs as lists), or None."""
    from ddflow.traces.arena import Arena
    from ddflow.traces.layout import BatchTable

    arena = Arena(("i", "i"), depth, 8, BatchTable(out_T, []))
    buf, used, T, at = arena.target()
    res = run(buf, used, T, at, small)
    if res[-1] == used:
        return res, None
    arena.written(res[-1], len(res[2]))
    b = arena.batches()[0]
    arena._check()
    return res, (b.keys.tolist(), b.key_offs.tolist(), [v.tolist() for v in b.vals], b.val_offs.tolist(),
                 b.times.tolist(), b.diffs.tolist())


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from(["min", "max", "top_k"]), st.sampled_from([1, 2]), st.booleans())
def test_walk_step_native_is_the_reference(data, logic, depth, to_arena):
    """The native one-call step against its plain reference on the same traces and seeds: the output, its trie, the
    pending set and the status, and (given an arena) the batch it writes there."""
    from ddflow.base.kernels import SMALL_ROWS
    from ddflow.operators.reduce.walk import MODES as WALK_MODES, walk_step

    r = data.draw(st.integers(0, 2)) if depth == 2 else 0
    bound = np.array([data.draw(st.integers(1, 5))] + ([r + 1] if depth == 2 else []), dtype=np.int64)
    in_trace, out_trace = _walk_trace(data.draw, depth, r), _walk_trace(data.draw, depth, r)
    in_T, out_T = in_trace.spine.table().matrix, out_trace.spine.table().matrix
    args = (WALK_MODES[logic], data.draw(st.integers(1, 3)), *_walk_seeds(data.draw, depth, r), bound, in_T, out_T,
            data.draw(st.sampled_from([0, 1 << 30])))
    small = SMALL_ROWS if to_arena else 0
    want, w_batch = _arena_written(lambda *a: reference(walk_step)(*args, *a), out_T, depth, small)
    got, g_batch = _arena_written(lambda *a: as_run(walk_step, "native")(*args, *a), out_T, depth, small)
    same_step(got, want, 7)
    assert g_batch == w_batch


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from(["min", "max", "top_k"]))
def test_walk_step_kept_is_walk_step_and_native_is_the_reference(data, logic):
    """Two steps of one advance in a loop: the second reads what the first kept (its keys' histories compacted to
    its round) and what the traces took since.  Each step emits what walk_step does on the whole traces (its pending
    set may be smaller: compacted, a later round can be seen to change nothing), and the native kernel's results
    equal the plain reference's at both."""
    from ddflow.base.updates import Updates
    from ddflow.operators.reduce.compacted import no_history
    from ddflow.operators.reduce.walk import MODES as WALK_MODES, walk_step, walk_step_kept

    r0 = data.draw(st.integers(0, 2))
    r = r0 + data.draw(st.integers(0, 1))
    b0 = data.draw(st.integers(1, 5))
    in_trace, out_trace = _walk_trace(data.draw, 2, r0), _walk_trace(data.draw, 2, r0)
    mode, k = WALK_MODES[logic], data.draw(st.integers(1, 3))
    nowhere = (np.empty(0, dtype=np.int64), 0, np.empty((0, 1), dtype=np.int64), 0, 0)

    def step(kernel, seeds, rnd, history):
        bound = np.array([b0, rnd + 1], dtype=np.int64)
        return kernel(mode, k, *seeds, bound, in_trace.spine.table().matrix, out_trace.spine.table().matrix, 1 << 30,
                      *nowhere, *history)

    h = no_history(1, 2)
    none = (h[0], h[1], h[1], *h[2:], *h[2:])  # no keys kept, nothing taken since
    seeds = _walk_seeds(data.draw, 2, r0)
    first = step(reference(walk_step_kept), seeds, r0, none)
    same_step(step(as_run(walk_step_kept, "native"), seeds, r0, none), first, 7)
    plain = step(reference(walk_step), seeds, r0, ())
    assert [a.tolist() for a in first[:3]] == [a.tolist() for a in plain[:3]] and first[13] == plain[10]
    if first[13] != 0:
        return
    cols, times, diffs = first[:3]
    if len(diffs):  # the first step's output joins the output trace, as the tactic inserts it
        out_trace.insert_updates(Updates(tuple(cols), times, diffs, ("i", "i")))
    # What the input trace takes since: updates at iterations up to the second step's round, outer times of any.
    n = data.draw(st.integers(0, 5))
    a_rows = data.draw(hnp.arrays(np.int64, (n, 2), elements=st.integers(0, 3)))
    a_times = np.column_stack([data.draw(hnp.arrays(np.int64, n, elements=st.integers(0, 4))),
                               data.draw(hnp.arrays(np.int64, n, elements=st.integers(0, r)))]).reshape(n, 2)
    a_times = a_times.astype(np.int64)
    a_diffs = data.draw(hnp.arrays(np.int64, n, elements=st.sampled_from([-1, 1, 2])))
    if n:
        in_trace.insert_updates(Updates((a_rows[:, 0].copy(), a_rows[:, 1].copy()), a_times, a_diffs, ("i", "i")))
    seeds = _walk_seeds(data.draw, 2, r)
    history = (first[10], first[11], first[12], a_rows, a_times, a_diffs, np.ascontiguousarray(cols.T), times, diffs)
    second = step(reference(walk_step_kept), seeds, r, history)
    same_step(step(as_run(walk_step_kept, "native"), seeds, r, history), second, 7)
    plain = step(reference(walk_step), seeds, r, ())
    assert [a.tolist() for a in second[:3]] == [a.tolist() for a in plain[:3]] and second[13] == plain[10]
