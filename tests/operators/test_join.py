"""The seek kernel as join uses it (unsorted keys with repeats) and the one-call join step (native and its plain
reference) against plain references, and products of diffs that do not fit."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.base.interner import Interner
from ddflow.base.updates import Updates, from_rows
from ddflow.errors import DataflowError, SchemaError
from ddflow.base.kernels import kernels
from ddflow.base.native import native_module, reference
from ddflow.operators.join import _products, checked_product, join_table
from ddflow.traces import Batch
from ddflow.traces.layout import BatchTable
from kernel_modes import MODES, as_run
from tests.traces.test_layout import traces

I64 = np.iinfo(np.int64)


@settings(max_examples=200)
@given(rows=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3)), max_size=30),
       times=st.lists(st.integers(0, 3), min_size=30, max_size=30),
       dkeys=st.lists(st.integers(-1, 7), max_size=20))
def test_seek_of_unsorted_repeated_keys_matches_the_reference(rows, times, dkeys):
    it = Interner()
    b = Batch.from_updates(from_rows(rows, times[: len(rows)], 1, it, kinds=("i", "i")))
    flat = b.flatten()
    dk = np.array(dkeys, dtype=np.int64)
    ia, vrow, urow = kernels().seek(b.keys, b.key_offs, b.val_offs, dk)
    got = sorted(zip(ia.tolist(), urow.tolist()))
    want = sorted((i, u) for i, k in enumerate(dkeys) for u in range(len(flat)) if flat.cols[0][u] == k)
    assert got == want
    # The value row of each pair holds its update.
    assert all(b.val_offs[v] <= u < b.val_offs[v + 1] for v, u in zip(vrow.tolist(), urow.tolist()))


def _reference_join(batches, depth, arity, C, times, diffs, delta_left):
    """Every pair of a delta update and a trace update with its key, consolidated: plain Python."""
    out: dict = {}
    for b in batches:
        f = b.flatten()
        for u in range(len(f)):
            theirs = [int(c[u]) for c in f.cols]
            for i in range(C.shape[1]):
                if int(C[0, i]) != theirs[0]:
                    continue
                mine = C[1:, i].tolist()
                row = (theirs[0], *(mine + theirs[1:] if delta_left else theirs[1:] + mine))
                t = tuple(max(a, b) for a, b in zip(times[i].tolist(), f.times[u].tolist()))
                out[row + t] = out.get(row + t, 0) + int(diffs[i]) * int(f.diffs[u])
    return sorted((k, d) for k, d in out.items() if d)


@settings(max_examples=150, deadline=None)
@given(traces(), st.integers(0, 2), st.lists(st.integers(-4, 4), max_size=8), st.booleans(), st.sampled_from(MODES),
       st.integers(0, 2**32 - 1))
def test_join_table_is_the_consolidated_pairs_of_the_reference(tr, m, keys, delta_left, impl, seed):
    """The join's one-call step, plain and native: both small (consolidated in the kernel) and larger
    outputs."""
    batches, depth, arity = tr
    rng = np.random.default_rng(seed)
    n = len(keys)
    C = np.vstack([np.array(keys, dtype=np.int64).reshape(1, n), rng.integers(-2, 3, size=(m, n))])
    times = rng.integers(0, 4, size=(n, depth))
    diffs = rng.choice([-2, -1, 1, 2], size=n)
    kernel = as_run(join_table, impl)
    M, D, sel, sums, status, total, OC, OT = kernel(BatchTable.of(batches, depth, arity).matrix, C, times, diffs,
                                                    arity, depth, delta_left, 1 << 40)
    assert status in (0, 1) and total == len(M) == len(D)
    if status == 0:  # the output, split into columns and times
        assert np.vstack([OC, OT.T]).T.tolist() == M[sel].tolist()
    if status == 1:
        sel, sums = kernels().consolidate(M, np.lexsort(M.T[::-1]), D)[:2]
    got = [(tuple(M[s].tolist()), d) for s, d in zip(sel.tolist(), sums.tolist())]
    assert got == _reference_join(batches, depth, arity, C, times, diffs, delta_left)  # sorted, as consolidated
    if total:  # over the limit: counted, nothing read
        assert kernel(BatchTable.of(batches, depth, arity).matrix, C, times, diffs, arity, depth, delta_left,
                      total - 1)[4:6] == (3, total)


def test_join_table_reports_products_and_sums_past_int64():
    b = Batch.from_updates(from_rows([(1, 5), (1, 6)], 0, [2**62, 2**62], Interner(), kinds=("i", "i")))
    T = BatchTable.of([b], 1, 2).matrix
    times = np.zeros((1, 1), dtype=np.int64)
    for kernel in (as_run(join_table, impl) for impl in MODES):
        with np.errstate(over="ignore"):
            M, D, _, _, status, total = kernel(T, np.array([[1]]), times, np.array([4]), 2, 1, True, 1 << 40)[:6]
            assert status == 2 and total == 2 and len(M) == len(D) == 0  # a product, at the first pair
            b2 = Batch.from_updates(from_rows([(1, 5), (1, 5)], [0, 1], [2**62, 2**62], Interner(), kinds=("i", "i")))
            # (1, 5) at times 0 and 1 joined at time 1: two products of 2**62 * 1 that sum past int64
            assert kernel(BatchTable.of([b2], 1, 2).matrix, np.array([[1]]), np.ones((1, 1), dtype=np.int64),
                          np.array([1]), 2, 1, True, 1 << 40)[4] == 2


_ENDS = np.array([I64.min, I64.min + 1, -1, 0, 1, 2, I64.max - 1, I64.max], dtype=np.int64)


def _edge_batch(rng, arity, depth, n, small):
    """A batch of ``n`` updates whose keys, values, later times and diffs (unless ``small``) lie at int64's ends (each at
    its own first time coordinate: nothing consolidates, so no sum leaves int64), its offsets in either width."""
    cols = tuple(rng.choice(_ENDS, n) for _ in range(arity))
    late = _ENDS[_ENDS >= 0]  # a batch's times lie beyond its lower frontier, zero
    times = np.column_stack([np.arange(n)] + [rng.choice(late, n) for _ in range(depth - 1)]).reshape(n, depth)
    diffs = rng.choice(np.array([-1, 1, 2]) if small else _ENDS[_ENDS != 0], n)
    b = Batch.from_updates(Updates(cols, times.astype(np.int64), diffs, ("i",) * arity))
    if rng.integers(2):
        wide = np.int64 if b.key_offs.dtype == np.int32 else np.int32
        b = Batch(b.keys, b.vals, b.key_offs.astype(wide), b.val_offs.astype(wide), b.times, b.diffs, b.desc, b.kinds)
    return b


def _same(got, ref):
    assert len(got) == len(ref)
    for i, (g, r) in enumerate(zip(got, ref)):
        if isinstance(r, np.ndarray):
            assert g.dtype == r.dtype and g.shape == r.shape and np.array_equal(g, r), f"result {i}: {g!r} != {r!r}"
        else:
            assert g == r, f"result {i}: {g!r} != {r!r}"


@settings(max_examples=300)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(0, 3), st.lists(st.sampled_from([0, 1, 2, 9, 40, 120]), max_size=4),
       st.integers(0, 16), st.booleans(), st.sampled_from([0, 3, 40, 1 << 40]), st.integers(0, 2**32 - 1))
def test_the_native_join_table_is_the_reference_at_the_edges(arity, depth, m, sizes, n, delta_left, limit, seed):
    """Keys, values, times and diffs at int64's ends (products past int64, sums past it when consolidating), the
    delta's keys unsorted with repeats, outputs over the limit: every result as the reference's, shapes too."""
    rng = np.random.default_rng(seed)
    small = rng.integers(2)  # small diffs: outputs that do not overflow, past SMALL_ROWS too
    batches = [_edge_batch(rng, arity, depth, k, small) for k in sizes]
    T = BatchTable.of(batches, depth, arity).matrix
    found = batches[0].keys[: rng.integers(0, 3)] if batches else _ENDS[:0]
    keys = np.concatenate([rng.choice(_ENDS, n), found])
    rng.shuffle(keys)
    C = np.vstack([keys.reshape(1, -1), rng.choice(_ENDS, size=(m, len(keys)))])
    times = rng.choice(_ENDS, size=(len(keys), depth))
    diffs = rng.choice(np.array([-1, 1, 2]) if small else _ENDS[_ENDS != 0], len(keys))
    with np.errstate(over="ignore"):
        ref = reference(join_table)(T, C, times, diffs, arity, depth, delta_left, limit)
    _same(native_module().operators.join_table(T, C, times, diffs, arity, depth, delta_left, limit), ref)


@given(st.integers(I64.min, I64.max) | st.sampled_from(_ENDS.tolist()),
       st.integers(I64.min, I64.max) | st.sampled_from(_ENDS.tolist()))
def test_checked_product_is_the_exact_product_where_it_fits(a, b):
    p = a * b
    want = (p, True) if I64.min <= p <= I64.max else (0, False)
    assert native_module().operators.checked_product(a, b) == want
    got = checked_product(np.int64(a), np.int64(b))
    assert (int(got[0]), bool(got[1])) == want


def test_the_native_join_table_refuses_arrays_that_do_not_fit_together():
    b = Batch.from_updates(from_rows([(1, 5)], 0, 1, Interner(), kinds=("i", "i")))
    T = BatchTable.of([b], 1, 2).matrix
    C, times, diffs = np.array([[1, 2]]), np.zeros((2, 1), dtype=np.int64), np.ones(2, dtype=np.int64)
    join = native_module().operators.join_table
    assert join(T, C, times, diffs, 2, 1, True, 10)[4] == 0
    for args, what in (((T, C, times[:1], diffs, 2, 1), "one row per column of C"),
                       ((T, C, times, diffs[:1], 2, 1), "one row per column of C"),
                       ((T, C[:0], times[:0], diffs[:0], 2, 1), "a key row"),
                       ((T, C, times, diffs, 2, 2), "the trace's depth"),
                       ((T, C, times, diffs, 3, 1), "cannot hold arity"),
                       ((T, C, times, diffs, 0, 1), "cannot hold arity"),
                       ((T[:, :5].copy(), C, times, diffs, 2, 1), "not a batch table")):
        with pytest.raises(ValueError, match=what):
            join(*args, True, 10)


def test_products_of_diffs_past_int64_are_errors():
    x = np.array([2, I64.max, -1, 3037000499], dtype=np.int64)
    assert _products(x, np.array([3, 1, I64.max, 3037000499]), "j").tolist() == [6, I64.max, -I64.max, 3037000499 ** 2]
    for a, b in ((I64.max, 2), (-1, I64.min), (I64.min, -1), (3037000500, 3037000500), (1 << 32, -(1 << 31) - 1)):
        with pytest.raises(SchemaError, match="j: a product of diffs"):
            _products(np.array([1, a], dtype=np.int64), np.array([1, b], dtype=np.int64), "j")
    assert _products(np.array([1 << 32], dtype=np.int64), np.array([-(1 << 31)], dtype=np.int64), "j").tolist() == [I64.min]


def test_a_join_whose_diffs_multiply_past_int64_names_the_join():
    flow = ddflow.Dataflow()
    a_in, a = flow.new_collection("a")
    b_in, b = flow.new_collection("b")
    a.join(b, name="big").capture()
    a_in.update([(1, 10)], 0, 2**62)
    b_in.update([(1, 3)], 0, 4)
    flow.advance_to(1)
    with pytest.raises(SchemaError, match="join 'big': a product of diffs does not fit in int64"):
        flow.run()


def test_a_one_sided_join_step_whose_diffs_multiply_past_int64_names_the_join():
    """The same when only one side changes in the step (the one-call path), on either side."""
    for left in (True, False):
        flow = ddflow.Dataflow()
        a_in, a = flow.new_collection("a")
        b_in, b = flow.new_collection("b")
        a.join(b, name="big").capture()
        (b_in if left else a_in).update([(1, 3)], 0, 4)
        flow.advance_to(1)
        flow.run()
        (a_in if left else b_in).update([(1, 10)], 1, 2**62)
        flow.advance_to(2)
        with pytest.raises(SchemaError, match="join 'big': a product of diffs does not fit in int64"):
            flow.run()


def _square_join(flow, n):
    """A join of n rows against n rows on one key, each row at its own time: n * n pairs."""
    a_in, a = flow.new_collection("a")
    b_in, b = flow.new_collection("b")
    out = a.join(b, name="square").capture()
    a_in.update([(1, i) for i in range(n)], times=list(range(n)))
    flow.advance_to(n)
    flow.run()
    b_in.update([(1, i) for i in range(n)], times=list(range(n, 2 * n)))
    flow.advance_to(2 * n)
    return out


def test_a_join_step_larger_than_memory_fails_naming_the_join_before_allocating(monkeypatch):
    """A join that would pair more updates than memory holds is an error, not the OOM killer.

    The machine's memory is set small here (the real check reads the kernel's
    MemAvailable); with the memory really there, the same join runs and is exact.
    """
    from ddflow.traces import layout

    monkeypatch.setattr(layout, "CHECK_ABOVE", 1000)
    with ddflow.Dataflow() as flow:
        out = _square_join(flow, 40)
        flow.run()
        assert len(out.drain()) == 40 * 40
    monkeypatch.setattr(layout.memory, "available_bytes", lambda: 1 << 16)
    with ddflow.Dataflow() as flow:
        _square_join(flow, 40)
        with pytest.raises(DataflowError, match=r"join 'square': one step would read 1,600 updates for 40 lookups .* "
                                                r"more than the 0\.0 GiB of memory available"):
            flow.run()
        with pytest.raises(DataflowError, match="failed earlier"):
            flow.run()
