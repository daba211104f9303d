"""Histories compacted to the round (plain and native) against a Python reference; from a cache or the trace."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddflow.base.updates import Updates
from ddflow.operators.reduce.compacted import compacted_histories, entry_columns, no_history
from ddflow.traces import Trace
from kernel_modes import MODES, as_run


def reference(updates, groups, ng, r):
    """Rows ``(group index, t, values..., max(i, r), diff)`` of the updates of ``groups``, summed, zeros dropped."""
    index = {g: k for k, g in enumerate(groups)}
    sums: dict = {}
    for row, (t, i), d in updates:
        k = index.get(row[:ng])
        if k is not None:
            key = (k, t, *row[ng:], max(i, r))
            sums[key] = sums.get(key, 0) + d
    return sorted([*key, d] for key, d in sums.items() if d)


def _rows(draw, n, arity):
    return [tuple(draw(st.integers(0, 3)) for _ in range(arity)) for _ in range(n)]


def _insert(trace, draw, arity, log):
    n = draw(st.integers(0, 6))
    rows = _rows(draw, n, arity)
    times = [(draw(st.integers(0, 4)), draw(st.integers(0, 4))) for _ in range(n)]
    diffs = [draw(st.sampled_from([-1, 1, 1, 2])) for _ in range(n)]
    cols = tuple(np.array([r[c] for r in rows], dtype=np.int64) for c in range(arity))
    u = Updates(cols, np.array(times, dtype=np.int64).reshape(n, 2), np.array(diffs, dtype=np.int64), ("i",) * arity)
    trace.insert_updates(u)
    log.extend(zip(rows, times, diffs))
    return rows, times, diffs


def summed(E):
    """Entries with equal (group, time, values, iteration) added up, zeros dropped, sorted: what they sum to."""
    sums: dict = {}
    for e in E.tolist():
        sums[tuple(e[:-1])] = sums.get(tuple(e[:-1]), 0) + e[-1]
    return sorted([*k, d] for k, d in sums.items() if d)


def check_entries(E, groups, ng, log, r, cached):
    """``E`` sums to the reference, comes sorted by (group, outer time), and cached groups' entries come summed."""
    assert summed(E) == reference(log, groups, ng, r)
    assert [e[:2] for e in E.tolist()] == sorted(e[:2] for e in E.tolist())
    hits = [e for e in E.tolist() if groups[e[0]] in set(cached)]
    assert hits == [e for e in reference(log, groups, ng, r) if groups[e[0]] in set(cached)]


def _matrix(groups, ng):
    return np.array(groups, dtype=np.int64).reshape(len(groups), ng).T.copy()


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from(MODES))
def test_compacted_histories_read_from_cache_and_trace_as_the_reference(data, impl):
    """A cache made at round ``r0`` plus the updates taken since reads as the whole trace compacted to ``r >= r0``.

    Groups in the cache, out of it, and cached groups not asked for; empty
    and single-row batches and additions; a cache as the function makes it
    (groups read from the trace, not summed) or summed.
    """
    draw = data.draw
    ng, nv = draw(st.integers(1, 2)), draw(st.integers(0, 1))
    arity = ng + nv
    kernel = as_run(compacted_histories, impl)
    trace, log = Trace(("i",) * arity, depth=2), []
    for _ in range(draw(st.integers(0, 3))):
        _insert(trace, draw, arity, log)
    r0 = draw(st.integers(0, 3))
    r = r0 + draw(st.integers(0, 2))
    cached = sorted(set(_rows(draw, draw(st.integers(0, 4)), ng)))
    c_groups = _matrix(cached, ng)
    if draw(st.booleans()):  # the cache as this function made it (from the trace alone)
        c_entries, overflow = kernel(trace.spine.table().matrix, c_groups, arity, r0, *no_history(ng, arity))
        assert not overflow
    else:
        c_entries = np.array(reference(log, cached, ng, r0), dtype=np.int64).reshape(-1, nv + 4)
    assert summed(c_entries) == reference(log, cached, ng, r0)
    rows, times, diffs = _insert(trace, draw, arity, log) if draw(st.booleans()) else ([], [], [])
    groups = sorted(set(_rows(draw, draw(st.integers(0, 4)), ng)) | set(draw(st.sampled_from([[], cached]))))
    g = _matrix(groups, ng)
    E, overflow = kernel(trace.spine.table().matrix, g, arity, r, c_groups, c_entries,
                         np.array(rows, dtype=np.int64).reshape(len(rows), arity),
                         np.array(times, dtype=np.int64).reshape(len(rows), 2), np.array(diffs, dtype=np.int64))
    assert not overflow
    check_entries(E, groups, ng, log, r, cached)
    gid, cols, t, d = entry_columns(E, g)
    assert [(int(gid[x]), *cols[:, x].tolist(), *t[x].tolist(), int(d[x])) for x in range(len(d))] == \
        [(e[0], *groups[e[0]], *e[2:2 + nv], e[1], e[-2], e[-1]) for e in E.tolist()]


def test_compacted_histories_report_a_sum_past_int64():
    """Read from the trace a group is left as read; once cached, its entries are summed, and a sum past int64 says so."""
    big = np.iinfo(np.int64).max
    trace = Trace(("i",), depth=2)
    for i in range(2):  # (7, (0, 0)) and (7, (0, 1)): one entry once compacted to round 1
        trace.insert_updates(Updates((np.array([7]),), np.array([[0, i]]), np.array([big]), ("i",)))
    for kernel in (as_run(compacted_histories, impl) for impl in MODES):
        T, g = trace.spine.table().matrix, np.array([[7]])
        E, overflow = kernel(T, g, 1, 1, *no_history(1, 1))
        assert not overflow and E.tolist() == [[0, 0, 1, big]] * 2
        assert not kernel(T, g, 1, 0, g, E[:1], *no_history(1, 1)[2:])[1]
        assert kernel(T, g, 1, 1, g, E, *no_history(1, 1)[2:])[1]


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 3), st.sampled_from(MODES))
def test_compacted_histories_sort_long_groups_as_the_reference(seed, r, impl):
    """Groups of hundreds of updates at few outer times: past the in-place insertion sort, a merge sort takes over."""
    rng = np.random.default_rng(seed)
    kernel = as_run(compacted_histories, impl)
    trace, log = Trace(("i", "i"), depth=2), []
    for _ in range(3):
        n = 150
        rows = rng.integers(0, 2, size=(n, 2))
        times = np.column_stack([rng.integers(0, 3, n), rng.integers(0, 6, n)])
        diffs = rng.choice([-1, 1, 2], n)
        trace.insert_updates(Updates((rows[:, 0].copy(), rows[:, 1].copy()), times, diffs, ("i", "i")))
        log.extend(zip(map(tuple, rows.tolist()), map(tuple, times.tolist()), diffs.tolist()))
    groups = [(0,), (1,)]
    E, overflow = kernel(trace.spine.table().matrix, _matrix(groups, 1), 2, r, *no_history(1, 2))
    assert not overflow and summed(E) == reference(log, groups, 1, r)
    # Cached, the same groups' entries (by outer time only) come sorted and summed, past the in-place insertion sort.
    E2, overflow = kernel(trace.spine.table().matrix, _matrix(groups, 1), 2, r, _matrix(groups, 1), E,
                          *no_history(1, 2)[2:])
    assert not overflow and E2.tolist() == reference(log, groups, 1, r)


def test_native_compacted_histories_check_their_cache():
    """A cache entry naming a group the cache lacks, or entries of another width: ValueErrors, not a crash."""
    trace = Trace(("i",), depth=2)
    kernel = as_run(compacted_histories, "native")
    T, g = trace.spine.table().matrix, np.array([[7]])
    rest = no_history(1, 1)[2:]
    with pytest.raises(ValueError, match="compacted_histories: c_entries holds a group outside c_groups"):
        kernel(T, g, 1, 0, g, np.array([[1, 0, 0, 1]]), *rest)
    with pytest.raises(ValueError, match="compacted_histories: c_entries' rows"):
        kernel(T, g, 1, 0, g, np.array([[0, 0, 0, 0, 1]]), *rest)
    with pytest.raises(ValueError, match="compacted_histories: a_rows, a_times and a_diffs"):
        kernel(T, g, 1, 0, g, np.zeros((0, 4), dtype=np.int64), np.zeros((1, 1), dtype=np.int64),
               np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64))
