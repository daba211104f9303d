"""The walk's compiled kernels: each key's history walked once along its chain of times.

:func:`rank_values` ranks the history's values, :func:`key_walk` walks
every seeded key (min, max, top_k and its numbered forms; the contract is
:mod:`ddflow.operators.reduce.walk`'s), and :func:`walk_rows` lays out
and consolidates what it emits.  Native kernels (:func:`~ddflow.base.native.kernel`),
each tested against the plain function it replaces.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.kernels import group_sums, grown, lex_order, rows_differ, run_of, sort_small
from ddflow.base.native import kernel
from ddflow.base.radix import radix_order
from ddflow.operators.reduce.chain import (later_rounds, later_times, n_later,
                                           next_chain_time, next_later, pend_at)
from ddflow.traces.merge import sum_overflows


@kernel("operators.reduce")
def rank_values(Ci, Co, m, order, sort_above):
    """Each history row's value rank, the values being rows ``1..m`` of ``Ci`` (input) then ``Co`` (output).

    Returns ``(rank, first, n_values, lo, narrow)``.  One integer value
    whose range is under twice the rows (``narrow``): its offset from the
    least, ``lo``, ranks it in order, no sort.  Otherwise the dense rank
    in tuple order and ``first``, one row of each rank (the first in
    ``order``: the rows sorted by value, given or, when empty, sorted
    here: more than ``sort_above`` rows of one value by
    :func:`~ddflow.base.radix.radix_order`, others by :func:`lex_order`).
    What the walk's ``_narrow_int_range`` and ``_dense_rank`` give, in one
    call.  O(n), or O(n m log n) sorted.
    """
    ni = Ci.shape[1]
    n = ni + Co.shape[1]
    if m == 1 and n > 0 and len(order) == 0:
        lo = Ci[1, 0] if ni else Co[1, 0]
        hi = lo
        for i in range(n):
            v = Ci[1, i] if i < ni else Co[1, i - ni]
            lo = min(lo, v)
            hi = max(hi, v)
        if not (lo < 0 and hi > lo + np.iinfo(np.int64).max) and hi - lo < 2 * n:  # the span fits in int64
            rank = np.empty(n, dtype=np.int64)
            for i in range(n):
                rank[i] = (Ci[1, i] if i < ni else Co[1, i - ni]) - lo
            return rank, np.zeros(0, dtype=np.int64), hi - lo + 1, lo, True
    V = np.empty((n, m), dtype=np.int64)
    for i in range(n):
        for c in range(m):
            V[i, c] = Ci[1 + c, i] if i < ni else Co[1 + c, i - ni]
    if len(order) != n:
        order = radix_order(V[:, 0]) if m == 1 and n > sort_above else lex_order(V)
    rank = np.empty(n, dtype=np.int64)
    first = np.empty(n, dtype=np.int64)
    nv = 0
    for x in range(n):
        i = order[x]
        if x == 0 or rows_differ(V, i, order[x - 1], m):
            first[nv] = i
            nv += 1
        rank[i] = nv - 1
    return rank, first[:nv], nv, 0, False


@kernel("operators.reduce")
def walk_rows(E, keys, first, lo, narrow, Ci, Co, m, numbered, depth, r):
    """The output rows of :func:`key_walk`'s ``E``, consolidated: ``(C, T, D, overflow)``.

    ``C`` is ``(1 + m (+ 1 numbered), n)``: the key, the value (``rank +
    lo`` when ``narrow``, else the columns of the rank's representative
    row, see :func:`rank_values`) and the row number; ``T`` the ``(n,
    depth)`` times, at iteration ``r`` in a loop; ``D`` the diffs.  Rows
    of ``E`` equal in (group, rank, number, outer time) are added up and
    zeros dropped; as keys are sorted and ranks follow the values' order,
    sorting by those is sorting by (record, time), so the result is what
    ``consolidate`` gives, in its order.  ``overflow`` when a sum leaves
    int64 (the rest is then meaningless).  O(n log n + n m).
    """
    K = E[:, :4]
    sel, D, overflow = group_sums(K, lex_order(K), E[:, 4])
    n = len(sel)
    ni = Ci.shape[1]
    C = np.empty((1 + m + (1 if numbered else 0), n), dtype=np.int64)
    T = np.empty((n, depth), dtype=np.int64)
    for x in range(n):
        e = sel[x]
        C[0, x] = keys[E[e, 0]]
        if narrow:
            C[1, x] = E[e, 1] + lo
        else:
            i = first[E[e, 1]]
            for c in range(m):
                C[1 + c, x] = Ci[1 + c, i] if i < ni else Co[1 + c, i - ni]
        if numbered:
            C[1 + m, x] = E[e, 2]
        T[x, 0] = E[e, 3]
        if depth == 2:
            T[x, 1] = r
    return C, T, D, overflow


def add_changed(delta, mark, st, n, x, d):
    """``delta[x] += d``, listing ``x`` in ``st[:n]`` the first time it changes; returns the list's new length."""
    delta[x] += d
    if not mark[x]:
        mark[x] = True
        st[n] = x
        n += 1
    return n


#: The most work (history rows times (history rows plus candidate times times values)) a min's or max's search
#: for its first later change (:func:`first_extreme_change`) may take; past it the least later round is pended.
EXTREME_CHANGE_WORK = 1 << 14


def add_values(v, it, lo, hi, upto, mark, out, n):
    """Append to ``out[:n]`` the values ``v[lo:hi]`` at iterations ``it <= upto`` not yet in ``mark``, marking them.

    Returns the new count.  A kernel helper: a group's distinct values,
    its input's then its output history's.  O(hi - lo).
    """
    for j in range(lo, hi):
        if it[j] <= upto and not mark[v[j]]:
            mark[v[j]] = True
            out[n] = v[j]
            n += 1
    return n


def add_counted(cnt, v, d, nnz):
    """``cnt[v] += d`` with ``nnz`` the count of nonzero entries kept; ``(nnz, overflowed)``.  A kernel helper."""
    if sum_overflows(cnt[v], d):
        return nnz, True
    before = cnt[v] != 0
    cnt[v] += d
    return nnz + (cnt[v] != 0) - before, False


def first_extreme_change(mode, r, least, outer, in_a, in_i, in_v, in_d, i0, i1, out_a, out_i, out_v, out_d, o0, o1,
                         E, e0, e1, cnt, ocnt, mark, gv):
    """For a min (``mode`` 0) or max (1): the least iteration past ``r`` where its output would change; -1 if none.

    A kernel helper, :func:`~.chain.first_change`'s counterpart.  After
    round ``r`` emits ``E[e0:e1]`` (rows ``(g, value, 0, outer time,
    diff)``), the group's output at ``(c, L)`` is its output history at
    outer times ``<= c`` and iterations ``<= L`` plus those rows at outer
    times ``<= c``.  Supposing no input changes after round ``r`` (one
    that does is a seed whose own walk asks again), the visit of a later
    iteration ``L`` emits, by telescoping along its chain (the candidate
    outer times ``outer``), nothing iff at every ``c`` of ``outer`` that
    output is exactly one copy of the least (greatest) value with a
    positive count in the input at ``(c, L)``, or nothing where none has.
    The later iterations are tried in order, each accumulated afresh.
    ``least``, the least of them, is returned when a sum would leave int64
    or the work would pass :data:`EXTREME_CHANGE_WORK`.  ``cnt``, ``ocnt``
    (zeros) and ``mark`` (False) have a slot per value rank and are left
    so; ``gv``: room for the group's values.  O(l * (h + p * v)) for l
    later iterations, h history rows, p candidate times and v values.
    """
    BIG = np.iinfo(np.int64).max
    nv = add_values(in_v, in_i, i0, i1, BIG, mark, gv, 0)
    nv = add_values(out_v, out_i, o0, o1, BIG, mark, gv, nv)
    for x in range(e0, e1):
        if not mark[E[x, 1]]:
            mark[E[x, 1]] = True
            gv[nv] = E[x, 1]
            nv += 1
    vals = gv[:nv]
    for x in range(nv):
        mark[vals[x]] = False
    h = (i1 - i0) + (o1 - o0)
    nb = len(outer)
    if h * (h + nb * nv) > EXTREME_CHANGE_WORK:
        return least
    sort_small(vals)
    found = -1
    it = r
    while found < 0:
        L = next_later(it, in_i, i0, i1, out_i, o0, o1)
        if L == BIG:
            break
        p, q, e, nnz = i0, o0, e0, 0
        for b in range(nb):
            c = outer[b]
            over = False
            while p < i1 and in_a[p] <= c and not over:
                if in_i[p] <= L:
                    over = sum_overflows(cnt[in_v[p]], in_d[p])
                    cnt[in_v[p]] += 0 if over else in_d[p]
                p += 1
            while q < o1 and out_a[q] <= c and not over:
                if out_i[q] <= L:
                    nnz, over = add_counted(ocnt, out_v[q], out_d[q], nnz)
                q += 1
            while e < e1 and E[e, 3] <= c and not over:
                nnz, over = add_counted(ocnt, E[e, 1], E[e, 4], nnz)
                e += 1
            if over:
                found = least
                break
            m = -1
            for x in range(nv):
                v = vals[x] if mode == 0 else vals[nv - 1 - x]
                if cnt[v] > 0:
                    m = v
                    break
            if not (nnz == 0 if m < 0 else nnz == 1 and ocnt[m] == 1):
                found = L
                break
        for x in range(nv):
            cnt[vals[x]] = 0
            ocnt[vals[x]] = 0
        it = L
    return found


@kernel("operators.reduce")
def key_walk(mode, k, r, bound_a, n_values,
             seed_g, seed_a,
             in_g, in_a, in_i, in_v, in_d,
             out_g, out_a, out_i, out_v, out_d, out_n, tie, part):
    """Output updates and pending times of min (mode 0), max (1), top_k (2), numbered top_k (3), rank (4) or
    dense rank (5) per seeded group.

    Every array is sorted by (group, outer time).  Seeds are
    ``(seed_g, seed_a)`` (all at iteration ``r``); the input history of the
    seeded groups is ``in_*`` (group, outer time, iteration, value rank in
    ``range(n_values)``, diff) and their output history likewise
    ``out_*``, with ``out_n`` each output row's number (mode 3; else
    unused).  Returns ``(E, P)``: ``E`` rows ``(g, value rank, number,
    outer time, diff)``, the output at iteration ``r`` (outer times
    ``< bound_a`` only; the number is 0 but in mode 3), and ``P`` rows
    ``(g, outer time, iteration)`` still to retire (for min and max, the
    first later iteration whose visit would emit, if any:
    :func:`first_extreme_change`).  Mode 3 keys its
    counts by (value, number) pairs, ``value * (k + 1) + number``.  Modes 4
    and 5 too, with every copy of a value under one number: 1 + the copies
    (mode 4) or the tie groups (mode 5) before its tie group, ``tie[v]``
    (nondecreasing in ``v``), for every value numbered at most ``k``.
    Modes 2-5 with ``part`` (nondecreasing in ``v``; empty: one part) rank
    each part of a key's values on its own.
    Contract as in :mod:`ddflow.operators.reduce.walk`.  One pass per group over its
    sorted history with counts in arrays indexed by value rank (reset
    after each group, never reallocated): for min and max O(h + |chain| x
    s) per group of h updates, s the values scanned to find the extreme
    at a chain time (the output there and the history read there are all
    that changes); for top_k O(h + |chain| x |values|); plus sorting
    each group's values.
    """
    BIG = np.iinfo(np.int64).max
    E = np.empty((16, 5), dtype=np.int64)
    ne = 0
    P = np.empty((16, 3), dtype=np.int64)
    npd = 0
    cnt = np.zeros(n_values, dtype=np.int64)
    prev = np.zeros(n_values, dtype=np.int64)
    des = np.zeros(n_values, dtype=np.int64)
    delta = np.zeros(n_values, dtype=np.int64)
    seen = np.zeros(n_values, dtype=np.bool_)
    touched = np.empty(n_values, dtype=np.int64)
    mark = np.zeros(n_values, dtype=np.bool_)  # min/max: values in ``st``, the ones this chain step changes
    st = np.empty(n_values, dtype=np.int64)
    chain = np.empty(len(seed_a) + len(in_a) + len(out_a), dtype=np.int64)
    scratch = np.empty(len(chain) + len(in_a) + len(out_a), dtype=np.int64)  # later_rounds'
    W = k + 1 if mode >= 3 else 0  # modes 3-5: pairs (value, number) as value * W + number
    pdelta = np.zeros(n_values * W, dtype=np.int64)
    pmark = np.zeros(n_values * W, dtype=np.bool_)
    pst = np.empty(n_values * W, dtype=np.int64)
    parted = len(part) > 0
    n_parts = part[n_values - 1] + 1 if parted and n_values > 0 else 1
    kept = k * n_parts if mode == 3 else (n_values if mode >= 4 else 0)  # rank: any number of values may tie
    prevl = np.empty(kept, dtype=np.int64)  # the pairs kept at the previous chain time, and their copies
    prevm = np.ones(kept, dtype=np.int64)
    desl = np.empty(kept, dtype=np.int64)
    desm = np.ones(kept, dtype=np.int64)
    nprev = 0
    ns = len(seed_g)
    s0 = 0
    i0 = 0
    o0 = 0
    while s0 < ns:
        g = seed_g[s0]
        s1 = run_of(seed_g, s0, g)[1]
        i0, i1 = run_of(in_g, i0, g)
        o0, o1 = run_of(out_g, o0, g)
        ms = seed_a[s0]  # seeds are sorted: the earliest
        e0 = ne  # the group's output rows start here
        pm = -1  # min/max: the group's output value rank at the previous chain time (-1: none)
        nprev = 0
        # The group's values visible at iteration r.
        nt = add_values(in_v, in_i, i0, i1, r, seen, touched, 0)
        nt = add_values(out_v, out_i, o0, o1, r, seen, touched, nt)
        vals = touched[:nt]
        sort_small(vals)  # ranks in value order
        # Walk the chain of outer times: seeds, and history at iterations <= r from the earliest seed on.
        p, q, sp = i0, o0, s0
        pn, qn = i0, o0
        nc = 0
        c = ms
        while c != BIG:
            if c >= bound_a:  # not complete yet: retire it when the frontier passes
                P = grown(P, npd, npd + 1)
                P[npd, 0] = g
                P[npd, 1] = c
                P[npd, 2] = r
                npd += 1
            else:
                while p < i1 and in_a[p] <= c:
                    if in_i[p] <= r:
                        cnt[in_v[p]] += in_d[p]
                    p += 1
                if mode < 2:
                    # min or max: the output is one value (or none); only it, the previous one and the
                    # output history read here change, so the step costs O(scan to the extreme + reads).
                    m = -1
                    if mode == 0:
                        for x in range(nt):
                            if cnt[vals[x]] > 0:
                                m = vals[x]
                                break
                    else:
                        for x in range(nt - 1, -1, -1):
                            if cnt[vals[x]] > 0:
                                m = vals[x]
                                break
                    nst = 0
                    if m != pm:
                        if pm >= 0:
                            nst = add_changed(delta, mark, st, nst, pm, -1)
                        if m >= 0:
                            nst = add_changed(delta, mark, st, nst, m, 1)
                    while q < o1 and out_a[q] <= c:
                        if out_i[q] <= r:
                            nst = add_changed(delta, mark, st, nst, out_v[q], -out_d[q])
                        q += 1
                    pm = m
                    changed, nch = st, nst
                elif mode >= 3:
                    # numbered: the kept copies are (value, number) pairs; the previous ones leave, the new
                    # ones come, the output history read here is subtracted, and what is left is emitted.
                    nps = 0
                    for x in range(nprev):
                        nps = add_changed(pdelta, pmark, pst, nps, prevl[x], -prevm[x])
                    ndes = 0
                    if mode == 3:
                        taken = 0  # copies kept in this part
                        lastp = -1
                        for x in range(nt):
                            v = vals[x]
                            if parted and part[v] != lastp:
                                lastp = part[v]
                                taken = 0
                            if taken >= k:
                                if parted:
                                    continue
                                break
                            take = min(cnt[v], k - taken) if cnt[v] > 0 else 0
                            for _ in range(take):
                                taken += 1
                                desl[ndes] = v * W + taken
                                nps = add_changed(pdelta, pmark, pst, nps, desl[ndes], 1)
                                ndes += 1
                    else:
                        copies = 0  # copies of the values so far (in this part)
                        groups = 0  # tie groups so far
                        before = 0  # copies before the current tie group
                        last = -1
                        lastp = -1
                        for x in range(nt):
                            v = vals[x]
                            if cnt[v] <= 0:
                                continue
                            if parted and part[v] != lastp:
                                lastp = part[v]
                                copies = 0
                                groups = 0
                                last = -1
                            if tie[v] != last:
                                last = tie[v]
                                before = copies
                                groups += 1
                            number = before + 1 if mode == 4 else groups
                            if number > k:
                                if parted:
                                    continue
                                break
                            desl[ndes] = v * W + number
                            desm[ndes] = cnt[v]
                            nps = add_changed(pdelta, pmark, pst, nps, desl[ndes], cnt[v])
                            ndes += 1
                            copies += cnt[v]
                    while q < o1 and out_a[q] <= c:
                        if out_i[q] <= r:
                            if out_n[q] < 1 or out_n[q] > k:
                                raise ValueError("key_walk: an output row number outside 1..k")
                            nps = add_changed(pdelta, pmark, pst, nps, out_v[q] * W + out_n[q], -out_d[q])
                        q += 1
                    E = grown(E, ne, ne + nps)
                    for x in range(nps):
                        pp = pst[x]
                        if pdelta[pp] != 0:
                            E[ne, 0] = g
                            E[ne, 1] = pp // W
                            E[ne, 2] = pp % W
                            E[ne, 3] = c
                            E[ne, 4] = pdelta[pp]
                            ne += 1
                        pdelta[pp] = 0
                        pmark[pp] = False
                    for x in range(ndes):
                        prevl[x] = desl[x]
                        prevm[x] = desm[x]
                    nprev = ndes
                    nch = 0
                    changed = st
                else:
                    for x in range(nt):
                        des[vals[x]] = 0
                    left = k
                    lastp = -1
                    for x in range(nt):
                        v = vals[x]
                        if parted and part[v] != lastp:
                            lastp = part[v]
                            left = k
                        if left <= 0:
                            if parted:
                                continue
                            break
                        if cnt[v] > 0:
                            take = min(cnt[v], left)
                            des[v] = take
                            left -= take
                    for x in range(nt):
                        v = vals[x]
                        delta[v] = des[v] - prev[v]
                        prev[v] = des[v]
                    while q < o1 and out_a[q] <= c:
                        if out_i[q] <= r:
                            delta[out_v[q]] -= out_d[q]
                        q += 1
                    changed, nch = vals, nt
                E = grown(E, ne, ne + nch)  # the values whose output changes here: emitted, then reset
                for x in range(nch):
                    v = changed[x]
                    if delta[v] != 0:
                        E[ne, 0] = g
                        E[ne, 1] = v
                        E[ne, 2] = 0
                        E[ne, 3] = c
                        E[ne, 4] = delta[v]
                        ne += 1
                    delta[v] = 0
                    mark[v] = False
            chain[nc] = c
            nc += 1
            c, sp, pn, qn = next_chain_time(c, r, sp, s1, seed_a, pn, i1, in_a, in_i, qn, o1, out_a, out_i)
        for x in range(nt):
            v = vals[x]
            cnt[v] = 0
            prev[v] = 0
            seen[v] = False
        later = n_later(r, in_i, i0, i1, out_i, o0, o1)
        if later and mode < 2:  # min, max: only the first later round whose visit would emit (if any)
            outer, least = later_times(r, ms, chain, 0, nc, later, in_a, in_i, i0, i1, out_a, out_i, o0, o1, scratch)
            # Between groups cnt and prev (unused by min and max) are zeros, seen False, touched free.
            L = first_extreme_change(mode, r, least, outer, in_a, in_i, in_v, in_d, i0, i1, out_a, out_i, out_v,
                                     out_d, o0, o1, E, e0, ne, cnt, prev, seen, touched)
            if L >= 0:
                P, npd = pend_at(P, npd, g, outer, L)
        elif later:  # P is reassigned only here (see chain_walk)
            P, npd = later_rounds(P, npd, g, r, ms, chain, 0, nc, later, in_a, in_i, i0, i1, out_a, out_i, o0, o1,
                                  scratch, False, chain, in_d, out_d)
        s0, i0, o0 = s1, i1, o1
    return E[:ne], P[:npd]
