"""The table kernels (one native call over every batch of a trace) against plain references.

Random traces of several batches (empty and single-row ones included),
int32 and int64 offsets, times of depth 1, 2 and 3; each kernel runs
native (``ddflow._native.traces``) and as its plain-Python reference
(through ctypes views), and each must equal a reference computed from
the batches' flattened updates.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.base.native import native_module
from ddflow.base.updates import Updates
from ddflow.traces.batch import Batch
from ddflow.traces.layout import COUNT_DISTINCT, INSERTION_RUN, VAL0, BatchTable, histories, seek_table_within
from ddflow.traces.trace import Trace, seek
from kernel_modes import MODES, as_run


I64 = np.iinfo(np.int64)
#: Values at int64's edges (and next to them).
EXTREMES = np.array([I64.min, I64.min + 1, -1, 0, 1, I64.max - 1, I64.max], dtype=np.int64)
#: Keys to look for: small ones (most present), and the edges.
QUERY_KEYS = st.integers(-4, 4) | st.sampled_from(EXTREMES.tolist())


@st.composite
def traces(draw):
    depth = draw(st.integers(1, 3))
    arity = draw(st.integers(1, 3))
    nbatches = draw(st.integers(0, 5))
    sizes = [0, 1, 2, 7, 20] if draw(st.booleans()) else [120]  # 120s: groups past INSERTION_RUN updates
    extreme = draw(st.integers(0, 3)) == 0  # values at int64's edges, in columns and times
    batches = []
    for _ in range(nbatches):
        n = draw(st.sampled_from(sizes))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        if extreme:
            cols = tuple(rng.choice(EXTREMES, size=n) for _ in range(arity))
            times = rng.choice(EXTREMES[EXTREMES >= 0], size=(n, depth))  # times start at 0
        else:
            cols = tuple(rng.integers(-3, 4, size=n) for _ in range(arity))
            times = rng.integers(0, 4, size=(n, depth))
        diffs = rng.choice([-2, -1, 1, 3], size=n)
        b = Batch.from_updates(Updates(cols, times, diffs, ("i",) * arity))
        if draw(st.booleans()):  # the other offset width
            wide = np.int64 if b.key_offs.dtype == np.int32 else np.int32
            b = Batch(b.keys, b.vals, b.key_offs.astype(wide), b.val_offs.astype(wide), b.times, b.diffs,
                      b.desc, b.kinds)
        batches.append(b)
    return batches, depth, arity


def _row_list(cols, times, diffs):
    """The updates as ``(record, time, diff)`` tuples, in the order given."""
    return list(zip(zip(*(c.tolist() for c in cols)), map(tuple, times.tolist()), diffs.tolist()))


def _rows(cols, times, diffs):
    return sorted(_row_list(cols, times, diffs))


@settings(max_examples=150, deadline=None)
@given(traces(), st.lists(QUERY_KEYS, max_size=6), st.sampled_from(MODES))
def test_seek_table_matches_the_per_batch_seek(tr, keys, mode):
    batches, depth, arity = tr
    keys = np.array(keys, dtype=np.int64)
    table = BatchTable.of(batches, depth, arity)
    kernel = as_run(seek_table_within, mode)
    q, cols, times, diffs, total = kernel(table.matrix, keys, arity, depth, 1 << 40)
    assert total == len(q)
    over = kernel(table.matrix, keys, arity, depth, total - 1)  # over the limit: counted, nothing read
    assert over[4] == total and (total == 0 or len(over[0]) == 0)
    got = _rows([keys[q], *cols], times, diffs)
    # Reference: every update of every batch whose key is queried, once per query key equal to it.
    ref = []
    for b in batches:
        u = b.flatten()
        for k in keys.tolist():
            sel = np.flatnonzero(u.cols[0] == k)
            ref.extend(_rows([np.full(len(sel), k), *(c[sel] for c in u.cols)], u.times[sel], u.diffs[sel]))
    assert got == sorted(ref)
    assert (cols[0] == keys[q]).all()
    if np.all(keys[1:] > keys[:-1]):  # sorted unique (no np.diff: it wraps at the int64 edges)
        _, u = seek(batches, keys, ("i",) * arity, depth)  # the per-batch seek
        assert got == _rows([u.cols[0], *u.cols], u.times, u.diffs)


@settings(max_examples=150, deadline=None)
@given(traces(), st.data(), st.sampled_from(MODES))
def test_histories_match_a_filter_of_the_flattened_updates(tr, data, mode):
    batches, depth, arity = tr
    ng = data.draw(st.integers(1, arity))
    rows = data.draw(st.sets(st.tuples(*[QUERY_KEYS] * ng), max_size=5))
    groups = np.array(sorted(rows), dtype=np.int64).reshape(-1, ng).T.copy()
    table = BatchTable.of(batches, depth, arity)
    kernel = as_run(histories, mode)
    gid, cols, times, diffs = kernel(table.matrix, groups, arity, depth)
    _check_histories(batches, groups, gid, cols, times, diffs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("outer_times", [3, 50])
def test_histories_orders_long_groups_stably(mode, outer_times):
    """Groups far past ``INSERTION_RUN`` updates, at few outer times (counted) or many (past ``COUNT_DISTINCT``)."""
    rng = np.random.default_rng(outer_times)
    batches = []
    for _ in range(4):
        n = 300
        cols = (rng.integers(0, 2, size=n), rng.integers(-500, 500, size=n))
        times = np.stack([rng.integers(0, outer_times, size=n), rng.integers(0, 50, size=n)], axis=1)
        batches.append(Batch.from_updates(Updates(cols, times, rng.choice([-1, 1, 2], size=n), ("i", "i"))))
    groups = np.array([[0, 1]], dtype=np.int64)
    kernel = as_run(histories, mode)
    gid, cols, times, diffs = kernel(BatchTable.of(batches, 2, 2).matrix, groups, 2, 2)
    for g in range(2):
        outer = times[gid == g, 0]
        assert len(outer) > 4 * INSERTION_RUN
        assert (len(np.unique(outer)) <= COUNT_DISTINCT) == (outer_times <= COUNT_DISTINCT)
    _check_histories(batches, groups, gid, cols, times, diffs)


def _check_histories(batches, groups, gid, cols, times, diffs) -> None:
    """``histories``' output against the batches' updates of each group, stably sorted by first time coordinate."""
    ng = groups.shape[0]
    assert len(gid) == len(diffs) == len(times) == cols.shape[1]
    # Sorted by group, then stably by first time coordinate: each group's updates in the order of a stable sort
    # by time of the batches' updates, oldest batch first, each batch in its trie's order.
    assert (np.diff(gid) >= 0).all()
    for g in range(groups.shape[1]):
        mine = gid == g
        assert (cols[:ng, mine] == groups[:, g:g + 1]).all()
        ref = []
        for b in batches:
            u = b.flatten()
            sel = np.flatnonzero(np.all([u.cols[j] == groups[j, g] for j in range(ng)], axis=0)) if len(u) \
                else np.zeros(0, dtype=np.int64)
            ref.extend(_row_list([c[sel] for c in u.cols], u.times[sel], u.diffs[sel]))
        assert _row_list(cols[:, mine], times[mine], diffs[mine]) == sorted(ref, key=lambda row: row[1][0])


def test_a_trace_keeps_its_table_until_its_batches_change():
    tr = Trace(("i", "i"), depth=1)
    tr.insert_updates(Updates((np.array([1]), np.array([2])), np.zeros((1, 1), dtype=np.int64),
                              np.ones(1, dtype=np.int64), ("i", "i")))
    t1 = tr.spine.table()
    assert tr.spine.table() is t1
    tr.insert_updates(Updates((np.array([3]), np.array([4])), np.zeros((1, 1), dtype=np.int64),
                              np.ones(1, dtype=np.int64), ("i", "i")))
    t2 = tr.spine.table()
    assert t2 is not t1 and len(t2.matrix) == len(list(tr.spine.batches())) == 2
    _, u = tr.seek(np.array([1, 3]))
    assert sorted(zip(u.cols[0].tolist(), u.cols[1].tolist())) == [(1, 2), (3, 4)]


@settings(max_examples=150, deadline=None)
@given(traces(), st.data(), st.sampled_from(MODES))
def test_merge_table_is_the_consolidated_advanced_union(tr, data, mode):
    """The spine's tail merge: every batch's updates, advanced by a frontier (or none), consolidated, as one trie."""
    from ddflow.base.consolidate import consolidate
    from ddflow.base.lattice import Antichain, advance_by
    from ddflow.traces.layout import batch_row
    from ddflow.traces.merge import merge_table

    batches, depth, arity = tr
    F = np.array(data.draw(st.lists(st.lists(st.integers(0, 4), min_size=depth, max_size=depth), max_size=2)),
                 dtype=np.int64).reshape(-1, depth)
    kernel = as_run(merge_table, mode)
    keys, vals, key_offs, val_offs, times, diffs, row, overflow = kernel(BatchTable.of(batches, depth, arity).matrix,
                                                                         arity, depth, F)
    assert not overflow
    got = Batch(keys, tuple(vals), key_offs, val_offs, times, diffs, batches[0].desc if batches else None,
                ("i",) * arity, check=False) if batches else None
    flat = Updates.concat([b.flatten() for b in batches]) if batches else Updates.empty(("i",) * arity, depth)
    if len(F):
        flat = flat.with_times(advance_by(flat.times, Antichain(F)))
    want = consolidate(flat)
    if got is None:
        assert not len(diffs)
        return
    g = got.flatten()
    assert [c.tolist() for c in g.cols] == [c.tolist() for c in want.cols]
    assert g.times.tolist() == want.times.tolist() and g.diffs.tolist() == want.diffs.tolist()
    # a trie: keys strictly increasing, each key's value rows strictly increasing
    assert (keys[1:] > keys[:-1]).all() and len(key_offs) == len(keys) + 1 and key_offs[-1] == len(val_offs) - 1
    assert row.tolist() == batch_row(got, []).tolist()  # the row describes the result as batch_row would


def test_merge_table_reports_an_overflow():
    from ddflow.traces.merge import merge_table

    big = np.iinfo(np.int64).max
    b = [Batch.from_updates(Updates((np.array([1]),), np.zeros((1, 1), dtype=np.int64), np.array([big]), ("i",)))] * 2
    with np.errstate(over="ignore"):  # the plain kernel's int64 sum wraps (and says so) before it is reported
        for mode in MODES:
            out = as_run(merge_table, mode)(BatchTable.of(b, 1, 1).matrix, 1, 1, np.zeros((0, 1), dtype=np.int64))
            assert out[-1] and all(len(a) == 0 for a in out[:2] + out[4:7]) and out[2].tolist() == out[3].tolist() == [0]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.sampled_from([1, 2, 7, 40]), st.integers(0, 2**32 - 1),
       st.sampled_from(MODES))
def test_trie_with_row_builds_the_batch_and_row_of_the_reference(depth, arity, n, seed, mode):
    """A batch built in one call (``Batch._from_ints``) is the reference's trie, and its row is ``batch_row``'s."""
    from ddflow.base.consolidate import consolidate
    from ddflow.traces.batch import Description
    from ddflow.traces.layout import batch_row, trie_with_row

    rng = np.random.default_rng(seed)
    cols = tuple(rng.integers(-3, 4, size=n) for _ in range(arity))
    u = consolidate(Updates(cols, rng.integers(0, 3, size=(n, depth)), rng.choice([-1, 1, 2], size=n), ("i",) * arity))
    if not len(u):
        return
    desc = Description.covering(depth)
    got = Batch._from_ints(u, desc, True, as_run(trie_with_row, mode))
    ref = Batch._from_any(u, desc, True)
    for a, b in [(got.keys, ref.keys), (got.key_offs, ref.key_offs), (got.val_offs, ref.val_offs),
                 (got.times, ref.times), (got.diffs, ref.diffs), *zip(got.vals, ref.vals)]:
        assert a.dtype == b.dtype and a.tolist() == b.tolist()
    assert len(got.vals) == len(ref.vals) == arity - 1
    assert got.table_row().tolist() == batch_row(got, []).tolist()
    # the row reads back: a seek through the table finds every update of the batch
    keys = np.unique(u.cols[0])
    q, rcols, times, diffs = seek_table_within(BatchTable.of([got], depth, arity).matrix, keys, arity, depth, 1 << 40)[:4]
    assert _rows([keys[q], *rcols], times, diffs) == _rows([u.cols[0], *u.cols], u.times, u.diffs)


def test_insert_consolidating_is_consolidate_then_insert():
    """Small and large batches, int and float columns: the same trace and the same returned updates; an overflow inserts nothing."""
    from ddflow.base.consolidate import consolidate
    from ddflow.errors import SchemaError

    rng = np.random.default_rng(0)
    for kinds in (("i", "i"), ("i", "f")):
        a, b = Trace(kinds, depth=2), Trace(kinds, depth=2)
        for n in [0, 1, 2, 5, 32, 33, 200, 3, 3, 3, 3, 3, 3, 3, 3]:
            cols = (rng.integers(0, 9, size=n), rng.integers(0, 4, size=n).astype(np.float64 if kinds[1] == "f" else np.int64))
            u = Updates(cols, rng.integers(0, 3, size=(n, 2)), rng.choice([-1, 1], size=n), kinds)
            got = a.insert_consolidating(u)
            want = consolidate(u)
            if len(want):
                b.insert_updates(want, consolidated=True)
            assert [c.tolist() for c in got.cols] == [c.tolist() for c in want.cols]
            assert got.times.tolist() == want.times.tolist() and got.diffs.tolist() == want.diffs.tolist()
            a.spine._check()
        for t in [(0, 0), (1, 1), (2, 2)]:
            assert a.contents(t) == b.contents(t)
    big = np.iinfo(np.int64).max
    u = Updates((np.array([1, 1]), np.array([2, 2])), np.zeros((2, 1), dtype=np.int64), np.array([big, big]), ("i", "i"))
    t = Trace(("i", "i"), depth=1)
    with pytest.raises(SchemaError, match="add up past int64"):
        t.insert_consolidating(u)
    assert len(t) == 0


def _table_of(tr):
    batches, depth, arity = tr
    return BatchTable.of(batches, depth, arity), depth, arity


@settings(max_examples=150, deadline=None)
@given(traces(), st.lists(QUERY_KEYS, max_size=6))
def test_native_key_positions_and_gather_found_are_the_references(tr, keys):
    """The seek's two helpers (what the joins call inside their kernels), native against the plain functions."""
    from ddflow.traces.layout import gather_found, key_positions

    table, depth, arity = _table_of(tr)
    keys = np.array(keys, dtype=np.int64)
    N = native_module().traces
    pos, total = key_positions(table.matrix, keys)
    npos, ntotal = N.key_positions(table.matrix, keys)
    assert ntotal == total and npos.shape == pos.shape and npos.tolist() == pos.tolist()
    for a, b in zip(N.gather_found(table.matrix, npos, ntotal, arity, depth),
                    gather_found(table.matrix, pos, total, arity, depth)):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-5, 5) | st.sampled_from(EXTREMES.tolist()), max_size=40), QUERY_KEYS, st.data())
def test_native_find_key_and_lower_bound_from_are_the_references(keys, x, data):
    """On sorted keys (duplicates too): the position of a key or -1, and the galloping lower bound from any start
    whose key is not above ``x`` (its precondition)."""
    from ddflow.traces.layout import find_key, lower_bound_from

    keys = np.array(sorted(keys), dtype=np.int64)
    N = native_module().traces
    assert N.find_key(keys, x) == find_key(keys, x)
    starts = [lo for lo in range(len(keys) + 1) if lo == 0 or keys[lo - 1] <= x]
    lo = data.draw(st.sampled_from(starts))
    assert N.lower_bound_from(keys, x, lo) == lower_bound_from(keys, x, lo) == max(lo, int(np.searchsorted(keys, x)))


@settings(max_examples=150, deadline=None)
@given(traces(), st.data())
def test_native_value_range_is_the_reference(tr, data):
    """A key's value rows narrowed to a group's leading values, in each batch, against the plain helper."""
    from ddflow.traces.layout import key_offsets, offset, value_range

    table, depth, arity = _table_of(tr)
    T = table.matrix
    if not len(T):
        return
    b = data.draw(st.integers(0, len(T) - 1))
    p = data.draw(st.integers(0, int(T[b, 0]) - 1))
    ng = data.draw(st.integers(1, arity))
    groups = np.array(data.draw(st.lists(QUERY_KEYS, min_size=ng, max_size=ng)), dtype=np.int64).reshape(ng, 1)
    ko64, ko32 = key_offsets(T, b)
    lo, hi = int(offset(ko64, ko32, p)), int(offset(ko64, ko32, p + 1))
    assert tuple(native_module().traces.value_range(T, b, lo, hi, groups, 0, ng)) == \
        tuple(int(v) for v in value_range(T, b, lo, hi, groups, 0, ng))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 200), st.integers(1, 3), st.integers(1, 3), st.sampled_from([2, 10, 40, 10**6]), st.data())
def test_native_order_by_time_is_the_reference(n, arity, depth, spread, data):
    """Rows put in first-time order in place, stably: by insertion up to INSERTION_RUN rows, past it by counting
    (at most COUNT_DISTINCT first times) or by a stable sort."""
    from ddflow.traces.layout import order_by_time

    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    ng = data.draw(st.integers(1, arity))
    cols = rng.integers(-9, 9, size=(arity, n))
    times = rng.integers(0, spread, size=(n, depth))
    if data.draw(st.booleans()):
        times[:, 0] = np.where(rng.random(n) < 0.5, I64.min, I64.max)
    diffs = np.arange(n, dtype=np.int64)
    start = data.draw(st.integers(0, n))
    k = data.draw(st.integers(start, n))
    a, b = (cols.copy(), times.copy(), diffs.copy()), (cols.copy(), times.copy(), diffs.copy())
    order_by_time(*a, start, k, ng)
    native_module().traces.order_by_time(*b, start, k, ng)
    assert all(x.tolist() == y.tolist() for x, y in zip(a, b))
    assert b[2][start:k].tolist() == sorted(range(start, k), key=lambda i: (times[i, 0], i))


def test_native_table_kernels_refuse_arities_and_groups_they_cannot_read():
    """A table has VAL0 + arity - 1 columns; groups sorted, unique, at most arity rows: else a ValueError, not a read
    past a row."""
    b = Batch.from_updates(Updates((np.array([1, 2]), np.array([3, 4])), np.zeros((2, 1), dtype=np.int64),
                                   np.ones(2, dtype=np.int64), ("i", "i")))
    T = BatchTable.of([b], 1, 2).matrix
    N = native_module().traces
    keys = np.array([1], dtype=np.int64)
    assert N.seek_table_within(T, keys, 2, 1, 100)[4] == 1
    with pytest.raises(ValueError, match="arity 3"):
        N.seek_table_within(T, keys, 3, 1, 100)
    with pytest.raises(ValueError, match="arity 3"):
        N.histories(T, keys.reshape(1, 1), 3, 1)
    with pytest.raises(ValueError, match="arity 3"):
        N.merge_table(T, 3, 1, np.zeros((0, 1), dtype=np.int64))
    with pytest.raises(ValueError, match="between 1 and arity"):
        N.histories(T, np.zeros((3, 1), dtype=np.int64), 2, 1)
    for groups in ([[2, 1]], [[1, 1]], [[1, 1], [4, 3]]):
        with pytest.raises(ValueError, match="sorted and unique"):
            N.histories(T, np.array(groups, dtype=np.int64), 2, 1)
    assert N.histories(T, np.array([[1, 1], [3, 4]], dtype=np.int64), 2, 1)[0].tolist() == [0]
    with pytest.raises(ValueError, match="one row per update"):
        N.trie_with_row(np.zeros((2, 2), dtype=np.int64), np.zeros((1, 1), dtype=np.int64), np.ones(2, dtype=np.int64))


@pytest.mark.parametrize("mode", MODES)
def test_an_empty_merge_puts_its_value_columns_where_its_row_says(mode):
    """No values: each value column is an empty row of ``vals``, at the address the kernel's row gives it (found by
    ``make asan``: a native (2, 0) matrix once had numpy's default strides, its second row 8 bytes on)."""
    from ddflow.traces.layout import empty_table
    from ddflow.traces.merge import merge_table

    T = empty_table(3)
    keys, vals, key_offs, val_offs, times, diffs, row, overflow = as_run(merge_table, mode)(
        T, 3, 1, np.zeros((0, 1), dtype=np.int64))
    assert not overflow and vals.shape == (2, 0)
    assert [v.ctypes.data for v in vals] == row[VAL0:].tolist()
