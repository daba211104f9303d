"""Histories compacted to the round: what a loop's min/max walk keeps of its keys from one round to the next.

In round ``r`` of a loop a reduce reads its keys' histories only at
times ``(a, i)`` with ``i >= r`` (:mod:`.walk`: accumulations at ``(a,
r)``, and later iterations for the pending times).  For those reads an
update at ``(t, i)`` with ``i < r`` counts exactly as one at ``(t, r)``:

    (t, i) <= (a, j)  <=>  (t, max(i, r)) <= (a, j)    for every j >= r

So a key's history may be *compacted to round r*: each time ``(t, i)``
replaced by ``(t, max(i, r))`` and equal (record, time) pairs added up.
Within one advance of the outer frontier the rounds only grow, so a
history compacted at round ``r0`` stays right for every later round
``r >= r0`` of that advance, once the updates the trace took since are
added (:func:`compacted_histories`).  A key seeded round after round is
then read from its compacted copy, not re-read from every batch of the
trace.  On ``bench.components`` at a thousand updates per advance, 98%
of what the walk read was such re-reading, 91% of it of keys the step
before had read, and compacted to the round it is 11 times smaller.

The trace itself cannot be compacted so: the next advance starts again
at iteration 0, where the iterations below ``r`` differ.  The loop
tactic (distinct, count) does not keep histories: on ``bench.reach`` its
groups' histories are short (18 updates a re-read group) and compacted
only 2.6 times smaller, and keeping them measured level at a thousand
updates per advance and 10% slower at one.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ddflow.base.columnar import frozen
from ddflow.base.native import kernel
from ddflow.traces.layout import histories
from ddflow.traces.merge import consolidate_segment, sort_segment, sum_overflows


@dataclass
class RoundHistory:
    """The groups a loop reduce's last step read, their histories compacted to its round, and what it emitted.

    ``groups``: ``(ng, G)`` sorted unique rows; ``inputs``/``outputs``:
    :func:`compacted_histories`' entries for the input and the output
    trace, as the step saw them (the output before its own emission);
    ``emitted``: the step's output as rows ``(n, arity)``, times and diffs,
    which the output trace took after.  Valid for a step of the same
    advance (outer bound ``b0``) at a round ``>= r``, given the updates
    the input trace took since.
    """

    b0: int
    r: int
    groups: np.ndarray
    inputs: np.ndarray
    outputs: np.ndarray
    emitted: tuple[np.ndarray, np.ndarray, np.ndarray]

    def usable(self, bound: np.ndarray) -> bool:
        """Whether a step under ``bound`` (outer bound, round + 1) may read from this.  O(1)."""
        return int(bound[0]) == self.b0 and int(bound[-1]) - 1 >= self.r


def history_arguments(h: RoundHistory | None, bound: np.ndarray, ng: int, arity: int) -> tuple:
    """``(groups, inputs, outputs, emitted rows, times, diffs)`` of ``h`` for a step under ``bound``; none if unusable.

    ``ng``: the group's fields; ``arity``: the input's and the output's.
    Read-only views (:func:`~ddflow.base.columnar.frozen`).  O(1).
    """
    if h is not None and h.usable(bound):
        return frozen(h.groups, h.inputs, h.outputs, *h.emitted)
    groups, entries, rows, times, diffs = no_history(ng, arity)
    return groups, entries, entries, rows, times, diffs


@functools.lru_cache(maxsize=None)
def no_history(ng: int, arity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The arguments :func:`compacted_histories` takes for no cached groups and nothing added (shared, read-only)."""
    return frozen(np.zeros((ng, 0), dtype=np.int64), np.zeros((0, arity - ng + 4), dtype=np.int64),
                  np.zeros((0, arity), dtype=np.int64), np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.int64))


def compare_rows(A, a, B, b, ng):
    """-1, 0 or 1 as column ``a`` of ``A`` is before, equal to or after column ``b`` of ``B`` (first ``ng`` rows).

    A kernel helper.  O(ng).
    """
    for c in range(ng):
        if A[c, a] != B[c, b]:
            return -1 if A[c, a] < B[c, b] else 1
    return 0


def find_group(groups, row, ng):
    """The column of the sorted ``(ng, G)`` matrix ``groups`` equal to the first ``ng`` fields of ``row``, or -1.

    A kernel helper.  O(ng log G).
    """
    lo, hi = 0, groups.shape[1]
    while lo < hi:
        mid = (lo + hi) // 2
        c = 0
        for j in range(ng):
            if groups[j, mid] != row[j]:
                c = -1 if groups[j, mid] < row[j] else 1
                break
        if c == 0:
            return mid
        if c < 0:
            lo = mid + 1
        else:
            hi = mid
    return -1


def compacted_entry(C, e, c, r):
    """Column ``c`` of entry ``e`` of ``C`` with its iteration (the last column but one) compacted to round ``r``.

    A kernel helper.  O(1).
    """
    return max(C[e, c], r) if c == C.shape[1] - 2 else C[e, c]


def run_in_order(C, lo, hi, r):
    """Whether entries ``lo:hi`` of ``C`` are in order by (outer time, values, iteration) compacted to ``r``.

    What a cached group's entries are once summed (compacting to a later
    round keeps that order, though it may make neighbours equal); entries
    left as read are in order by outer time only.  A kernel helper.  O(hi - lo).
    """
    w = C.shape[1]
    for e in range(lo + 1, hi):
        for c in range(1, w - 1):
            x, y = compacted_entry(C, e - 1, c, r), compacted_entry(C, e, c, r)
            if x != y:
                if x > y:
                    return False
                break
    return True


def merge_summed(out, no, g, C, lo, hi, r, M, D, s, k):
    """Merge entries ``lo:hi`` of ``C`` (in order; :func:`run_in_order`) with sorted ``M[s:k]``, ``D[s:k]`` into ``out``.

    Rows go to ``out`` from row ``no`` as group ``g``'s, iterations
    compacted to ``r``, equal ones added up and zeros dropped.  ``M`` rows
    are ``(group, outer time, values..., iteration)`` with diffs in ``D``;
    ``C`` and ``out`` rows end with the diff.  Returns ``(new no,
    overflow)``.  One pass, O((hi - lo + k - s) w): a cached group's
    history is copied once, not sorted and summed again.  A kernel helper.
    """
    w = out.shape[1]
    i, j = lo, s
    held = False  # out[no] is a row still being added to
    while i < hi or j < k:
        from_cache = j >= k
        if not from_cache and i < hi:
            from_cache = True  # on a tie the cached entry goes first; either order sums the same
            for c in range(1, w - 1):
                x = compacted_entry(C, i, c, r)
                if x != M[j, c]:
                    from_cache = x < M[j, c]
                    break
        if from_cache:
            d = C[i, w - 1]
        else:
            d = D[j]
        same = held
        for c in range(1, w - 1):
            if not same:
                break
            same = out[no, c] == (compacted_entry(C, i, c, r) if from_cache else M[j, c])
        if same:
            x = out[no, w - 1]
            if sum_overflows(x, d):
                return no, True
            out[no, w - 1] = x + d
        else:
            if held and out[no, w - 1] != 0:
                no += 1
            out[no, 0] = g
            for c in range(1, w - 1):
                out[no, c] = compacted_entry(C, i, c, r) if from_cache else M[j, c]
            out[no, w - 1] = d
            held = True
        if from_cache:
            i += 1
        else:
            j += 1
    if held and out[no, w - 1] != 0:
        no += 1
    return no, False


@kernel("operators.reduce")
def compacted_histories(T, groups, arity, r, c_groups, c_entries, a_rows, a_times, a_diffs):
    """Every update of the records starting with one of ``groups``' rows, compacted to round ``r``.

    ``T``: the trace's table (times of depth 2); ``groups``: ``(ng, G)``
    sorted unique rows.  ``c_groups``/``c_entries``: a cache, this
    function's earlier result for the groups ``c_groups``, compacted to a
    round ``<= r``; ``a_rows``/``a_times``/``a_diffs``: the updates (rows
    of ``arity`` fields) the trace took since.  A group in the cache is
    read from it and those updates; the others from ``T``
    (:func:`~ddflow.traces.layout.histories`).  Returns ``(entries,
    overflow)``: ``entries`` an ``(n, arity - ng + 4)`` matrix of rows
    ``(group index, outer time, value fields..., iteration, diff)`` with
    times ``(t, i)`` made ``(t, max(i, r))``, sorted by group and outer
    time.  A cached group's are also sorted by the rest, equal ones added
    up and zeros dropped; a group read from the trace is left as read
    (sorting it would cost a step that reads a key once, as most do at
    one update per advance, more than summing saves), and summed when the
    next step finds it cached.  ``overflow`` if a sum left int64 (the
    entries are then meaningless).  O(h) for the h updates of groups read
    from the trace, plus their read; O(h log h) for cached ones, O(h) in
    the common case (a cached part summed by the last step comes in order,
    and the few additions are merged into it: :func:`merge_summed`).
    """
    ng, G = groups.shape[0], groups.shape[1]
    nv = arity - ng
    w = nv + 4
    hit = np.full(G, -1, dtype=np.int64)
    Gc = c_groups.shape[1]
    h = 0
    nmiss = G
    for g in range(G):  # both sorted: one merge walk
        while h < Gc and compare_rows(c_groups, h, groups, g, ng) < 0:
            h += 1
        if h < Gc and compare_rows(c_groups, h, groups, g, ng) == 0:
            hit[g] = h
            nmiss -= 1
    miss = np.empty((ng, nmiss), dtype=np.int64)
    miss_g = np.empty(nmiss, dtype=np.int64)
    x = 0
    for g in range(G):
        if hit[g] < 0:
            for c in range(ng):
                miss[c, x] = groups[c, g]
            miss_g[x] = g
            x += 1
    m_gid, m_cols, m_times, m_diffs = histories(T, miss, arity, 2)
    # Each cached group's run of entries.
    nc = c_entries.shape[0]
    c_lo = np.zeros(Gc, dtype=np.int64)
    c_hi = np.zeros(Gc, dtype=np.int64)
    for e in range(nc):
        k = c_entries[e, 0]
        if e == 0 or c_entries[e - 1, 0] != k:
            c_lo[k] = e
        c_hi[k] = e + 1
    # The added updates of cached groups, grouped by group (a counting sort).
    na = a_rows.shape[0]
    a_g = np.full(na, -1, dtype=np.int64)
    a_start = np.zeros(G + 1, dtype=np.int64)
    for j in range(na):
        g = find_group(groups, a_rows[j], ng)
        if g >= 0 and hit[g] >= 0:
            a_g[j] = g
            a_start[g + 1] += 1
    for g in range(G):
        a_start[g + 1] += a_start[g]
    a_fill = a_start[:G].copy()
    a_order = np.empty(a_start[G], dtype=np.int64)
    for j in range(na):
        if a_g[j] >= 0:
            a_order[a_fill[a_g[j]]] = j
            a_fill[a_g[j]] += 1
    n = len(m_diffs) + a_start[G]
    for g in range(G):
        if hit[g] >= 0:
            n += c_hi[hit[g]] - c_lo[hit[g]]
    # Each group's entries in turn, times compacted.  A group read from the trace comes sorted by outer time and is
    # copied as it is; a cached one takes what the trace took since, merged in where the cached part is in order
    # (it was summed), else sorted and summed with it (the first time it is hit, when it is in outer-time order only).
    nh = n - len(m_diffs)
    M = np.empty((nh, w - 1), dtype=np.int64)
    D = np.empty(nh, dtype=np.int64)
    scratch_M = np.empty((nh, w - 1), dtype=np.int64)
    scratch_D = np.empty(nh, dtype=np.int64)
    out = np.empty((n, w), dtype=np.int64)
    k = 0
    m = 0
    no = 0
    overflow = False
    for g in range(G):
        if hit[g] < 0:
            while m < len(m_diffs) and miss_g[m_gid[m]] == g:
                out[no, 0] = g
                out[no, 1] = m_times[m, 0]
                for c in range(nv):
                    out[no, 2 + c] = m_cols[ng + c, m]
                out[no, w - 2] = max(m_times[m, 1], r)
                out[no, w - 1] = m_diffs[m]
                no += 1
                m += 1
            continue
        s = k
        lo, hi = c_lo[hit[g]], c_hi[hit[g]]
        summed_run = run_in_order(c_entries, lo, hi, r)
        for e in range(lo, hi if not summed_run else lo):
            M[k, 0] = g
            for c in range(1, w - 2):
                M[k, c] = c_entries[e, c]
            M[k, w - 2] = max(c_entries[e, w - 2], r)
            D[k] = c_entries[e, w - 1]
            k += 1
        for x in range(a_start[g], a_start[g + 1]):
            j = a_order[x]
            M[k, 0] = g
            M[k, 1] = a_times[j, 0]
            for c in range(nv):
                M[k, 2 + c] = a_rows[j, ng + c]
            M[k, w - 2] = max(a_times[j, 1], r)
            D[k] = a_diffs[j]
            k += 1
        sort_segment(M, D, s, k, scratch_M, scratch_D)
        if summed_run:  # the cached run is in order (it was summed): merge the few additions into it as it is copied
            no, bad = merge_summed(out, no, g, c_entries, lo, hi, r, M, D, s, k)
            overflow = overflow or bad
            continue
        end, bad = consolidate_segment(M, D, s, k)
        overflow = overflow or bad
        for x in range(s, end):
            for c in range(w - 1):
                out[no, c] = M[x, c]
            out[no, w - 1] = D[x]
            no += 1
    return out[:no], overflow


def entry_columns(E, groups):
    """:func:`compacted_histories`' entries as :func:`~ddflow.traces.layout.histories` returns updates.

    ``(gid, cols, times, diffs)``: ``cols`` an ``(arity, n)`` matrix (the
    group's fields, then the values), ``times`` ``(n, 2)``.  A kernel
    helper.  O(n arity).
    """
    n, w = E.shape[0], E.shape[1]
    ng = groups.shape[0]
    nv = w - 4
    gid = np.empty(n, dtype=np.int64)
    cols = np.empty((ng + nv, n), dtype=np.int64)
    times = np.empty((n, 2), dtype=np.int64)
    diffs = np.empty(n, dtype=np.int64)
    for x in range(n):
        g = E[x, 0]
        gid[x] = g
        for c in range(ng):
            cols[c, x] = groups[c, g]
        for c in range(nv):
            cols[ng + c, x] = E[x, 2 + c]
        times[x, 0] = E[x, 1]
        times[x, 1] = E[x, w - 2]
        diffs[x] = E[x, w - 1]
    return gid, cols, times, diffs
