"""Chains of loop times: one compiled walk telescopes each group's output along its chain.

For one group, the complete times of round ``r`` whose output may change
form a chain ``(a_0, r) < (a_1, r) < ...``: the seeds' outer times and the
outer times of the group's history (input and output) at iterations
``<= r`` that lie after the earliest seed.  Along a chain the output to
emit telescopes: at ``(a_i, r)`` emit ``D_i - D_(i-1)`` minus the group's
output history first visible at ``a_i``.  :func:`chain_walk` builds every
group's chain, accumulated counts and later-round pending times in one
pass over the histories sorted by (group, time); :func:`chain_output`
(ints) or :func:`_assemble` (any columns) writes the output.  Used by the
loop tactic (:mod:`.iterate`) and, for the later rounds to pend
(:func:`later_rounds`, or :func:`later_times` and :func:`pend_at` with a
search of its own between), by the walk (:mod:`.keywalk`).
"""
from __future__ import annotations

import numpy as np

from ddflow.base.columnar import pair_order
from ddflow.base.consolidate import consolidate
from ddflow.base.kernels import group_sums, grown, lex_order, run_of, sorted_unique
from ddflow.base.native import kernel
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError
from ddflow.operators.reduce.logic import SCALAR_DISTINCT
from ddflow.traces.merge import sum_overflows


def overflow_message(logic) -> str:
    """The error for a loop count past int64, naming the operator."""
    return (f"{logic.name}: a record's count in the loop adds up past int64 (multiplicities "
            "this large overflow where the loop adds them: make the input's diffs smaller, or "
            "distinct it before the loop)")


def scalar_loop(
    groups: list[np.ndarray],
    seed_gid: np.ndarray,
    seed_t: np.ndarray,
    in_gid: np.ndarray,
    in_times: np.ndarray,
    in_diffs: np.ndarray,
    out_gid: np.ndarray,
    out: Updates,
    logic,
    kinds: tuple[str, ...],
    r: int,
) -> tuple[Updates, np.ndarray, np.ndarray]:
    """Output updates for round ``r`` and pending (group id, time) pairs, from histories in any order.

    ``groups``: the columns of the distinct seeded groups (sorted unique rows);
    ``seed_*``: seeds by group id and outer time (all at iteration ``r``);
    ``in_*``: the groups' input history; ``out``/``out_gid``: their output history.
    Cost: three sorts by (group, outer time), one :func:`chain_walk`, and a
    fixed number of vectorized steps for the logic and the output.
    """
    so = pair_order(seed_gid, seed_t)
    io = pair_order(in_gid, in_times[:, 0])
    oo = pair_order(out_gid, out.times[:, 0])
    c_gid, c_a, acc, out_pos, P, overflow = chain_walk(r, seed_gid[so], seed_t[so],
                                                      in_gid[io], in_times[io, 0], in_times[io, 1], in_diffs[io],
                                                      out_gid[oo], out.times[oo, 0], out.times[oo, 1], out.diffs[oo],
                                                      logic.scalar_code == SCALAR_DISTINCT)
    if overflow:
        raise SchemaError(overflow_message(logic))
    val, mult = logic.scalar_rows(acc)
    mult = np.asarray(mult, dtype=np.int64)
    emitted = _assemble(groups, c_gid, c_a, mult, val, out, out_pos, oo, kinds, r)
    return emitted, P[:, 0].copy(), P[:, 1:].copy()


def _assemble(groups, c_gid, c_a, mult, val, out: Updates, out_pos, oo, kinds, r: int) -> Updates:
    """What :func:`chain_output` emits, vectorized over any column kinds, consolidated.

    ``oo``: the order :func:`chain_walk` read the output history in (None: as given).
    """
    first = np.ones(len(c_gid), dtype=bool)
    first[1:] = c_gid[1:] != c_gid[:-1]
    times_now = np.column_stack([c_a, np.full(len(c_a), r, dtype=np.int64)])
    base = [g[c_gid] for g in groups]
    parts = []
    # + D_i at (a_i, r)
    sel = np.flatnonzero(mult != 0)
    parts.append(_rows(base, val, sel, times_now[sel], mult[sel], kinds))
    # - D_(i-1) at (a_i, r)
    prev = np.flatnonzero(~first)
    prev = prev[mult[prev - 1] != 0]
    parts.append(_rows(base, val, prev - 1, times_now[prev], -mult[prev - 1], kinds))
    # - output history first visible at a_i
    hit = np.flatnonzero(out_pos >= 0)
    if len(hit):
        o_idx = oo[hit] if oo is not None else hit
        parts.append(Updates(tuple(c[o_idx] for c in out.cols), times_now[out_pos[hit]], -out.diffs[o_idx], kinds))
    return consolidate(Updates.concat(parts))


def chain_net(r, c_gid, c_a, mult, groups, odiffs, out_pos):
    """:func:`chain_output` for a logic without a value column (distinct, threshold), in chain order.  A kernel helper.

    Without values, a chain row's updates all share its group's row and its
    time, and rows come by group and then time, which is the consolidated
    order: so the sums are taken in place per chain row, in the order
    :func:`chain_output`'s sort would visit them (``+D_i``, ``-D_(i-1)``,
    then the history entries in their order), and nothing is sorted.
    O(chain + history).
    """
    n = len(c_gid)
    ng = groups.shape[0]
    net = np.empty(n, dtype=np.int64)
    for i in range(n):
        s = mult[i]
        if i > 0 and c_gid[i - 1] == c_gid[i] and mult[i - 1] != 0:
            d = -mult[i - 1]
            t = s + d
            if ((s ^ t) & (d ^ t)) < 0:
                return np.empty((ng, 0), dtype=np.int64), np.empty((0, 2), dtype=np.int64), net[:0], True
            s = t
        net[i] = s
    for q in range(len(out_pos)):
        i = out_pos[q]
        if i >= 0:
            s, d = net[i], -odiffs[q]
            t = s + d
            if ((s ^ t) & (d ^ t)) < 0:
                return np.empty((ng, 0), dtype=np.int64), np.empty((0, 2), dtype=np.int64), net[:0], True
            net[i] = t
    k = 0
    for i in range(n):
        if net[i] != 0:
            k += 1
    cols = np.empty((ng, k), dtype=np.int64)
    times = np.empty((k, 2), dtype=np.int64)
    sums = np.empty(k, dtype=np.int64)
    x = 0
    for i in range(n):
        if net[i] != 0:
            g = c_gid[i]
            for c in range(ng):
                cols[c, x] = groups[c, g]
            times[x, 0] = c_a[i]
            times[x, 1] = r
            sums[x] = net[i]
            x += 1
    return cols, times, sums, False


@kernel("operators.reduce")
def chain_output(r, c_gid, c_a, mult, val, has_val, groups, ocols, odiffs, out_pos):
    """The output of round ``r`` along the chains, consolidated and sorted: what :func:`_assemble` emits, for ints.

    For chain row ``i`` (group ``g``, outer time ``a_i``): ``+D_i`` at
    ``(a_i, r)`` and ``-D_(i-1)`` (the group's previous chain row) there;
    for each output history update ``q`` first visible at chain row
    ``out_pos[q]``, its negation there.  ``D`` is the group's row
    (``groups[:, g]``, then ``val[i]`` if ``has_val``) with multiplicity
    ``mult[i]``.  Equal rows at equal times are added up and zeros
    dropped, so the result is what a consolidation of those updates
    gives, in its order (by row, then time): chain rows come by group
    (groups are sorted rows) and time, so without a value column that is
    chain order and :func:`chain_net` sums in place; with one, a sort (a
    natural merge sort) orders each chain row's values.
    Returns ``(cols, times, diffs, overflow)`` with ``cols`` an ``(arity,
    n)`` matrix; ``overflow`` when a sum leaves int64 (the rest is then
    meaningless).  O(chain + history), O(m log m) for m entries with values.
    """
    if not has_val:
        return chain_net(r, c_gid, c_a, mult, groups, odiffs, out_pos)
    n = len(c_gid)
    ng = groups.shape[0]
    arity = ng + 1
    # The history entries of each chain row (a counting sort by chain row).
    start = np.zeros(n + 1, dtype=np.int64)
    for q in range(len(out_pos)):
        if out_pos[q] >= 0:
            start[out_pos[q] + 1] += 1
    for i in range(n):
        start[i + 1] += start[i]
    fill = start[:n].copy()
    hist = np.empty(start[n], dtype=np.int64)
    for q in range(len(out_pos)):
        i = out_pos[q]
        if i >= 0:
            hist[fill[i]] = q
            fill[i] += 1
    # With a value column from here on. Entries (group, value, chain row) with their diffs, in chain order.
    cap = 2 * n + start[n]
    M = np.empty((cap, 3), dtype=np.int64)
    D = np.empty(cap, dtype=np.int64)
    m = 0
    for i in range(n):
        g = c_gid[i]
        for src in range(2):
            j = i if src == 0 else i - 1
            if j < 0 or c_gid[j] != g or mult[j] == 0:
                continue
            M[m, 0] = g
            M[m, 1] = val[j]
            M[m, 2] = i
            D[m] = mult[j] if src == 0 else -mult[j]
            m += 1
        for x in range(start[i], start[i + 1]):
            q = hist[x]
            M[m, 0] = g
            M[m, 1] = ocols[ng, q]
            M[m, 2] = i
            D[m] = -odiffs[q]
            m += 1
    M = M[:m]
    sel, sums, overflow = group_sums(M, lex_order(M), D)
    if overflow:
        return np.empty((arity, 0), dtype=np.int64), np.empty((0, 2), dtype=np.int64), sums, True
    k = len(sel)
    cols = np.empty((arity, k), dtype=np.int64)
    times = np.empty((k, 2), dtype=np.int64)
    for x in range(k):
        e = sel[x]
        for c in range(ng):
            cols[c, x] = groups[c, M[e, 0]]
        cols[ng, x] = M[e, 1]
        times[x, 0] = c_a[M[e, 2]]
        times[x, 1] = r
    return cols, times, sums, False


def n_later(r, in_i, i0, i1, out_i, o0, o1):
    """How many of a group's history rows (input ``i0:i1``, output ``o0:o1``) lie past iteration ``r``.  A kernel helper."""
    n = 0
    for j in range(i0, i1):
        if in_i[j] > r:
            n += 1
    for j in range(o0, o1):
        if out_i[j] > r:
            n += 1
    return n


#: :func:`first_change` searches only where ``h * (h + 2 p)`` (h history rows, p candidate times) is at most
#: this; past it, the least later iteration is visited, as for every other logic.  Most groups are far
#: smaller: 2,048 pended about a quarter fewer seeds at 10,000-node reach K=1000, and no fewer at K=1.
FIRST_CHANGE_WORK = 1 << 8


def add_at_iteration(S, outer, a, i, d, p0, p1, L):
    """Add to ``S[b]`` the diffs ``d[p0:p1]`` at iteration ``L`` (``i``) and outer times ``a <= outer[b]``.  A kernel helper.

    For :func:`first_change`.  Returns True, leaving ``S`` partly added,
    when a sum would leave int64.  O((p1 - p0) * len(outer)).
    """
    for p in range(p0, p1):
        if i[p] == L:
            x = d[p]
            for b in range(len(outer)):
                if outer[b] >= a[p]:
                    if sum_overflows(S[b], x):
                        return True
                    S[b] += x
    return False


def next_later(it, in_i, i0, i1, out_i, o0, o1):
    """The least iteration past ``it`` of the group's history rows (int64's greatest if none).  A kernel helper.  O(h)."""
    L = np.iinfo(np.int64).max
    for p in range(i0, i1):
        if it < in_i[p] < L:
            L = in_i[p]
    for q in range(o0, o1):
        if it < out_i[q] < L:
            L = out_i[q]
    return L


def first_change(r, least, outer, chain, acc, c0, nc, in_a, in_i, in_d, i0, i1, out_a, out_i, out_d, o0, o1, work):
    """For a distinct: the least iteration past ``r`` at which its output would change; -1 if none would.  A kernel helper.

    After round ``r`` emits, the group's output accumulated at each chain
    time ``c`` is ``[acc(c) > 0]`` (``acc``: the input counts at iterations
    ``<= r``, ``chain[c0:c0 + nc]``).  Supposing no input changes after
    round ``r`` (a change that does is a seed whose own walk asks again),
    the visit of iteration ``L`` emits, by telescoping, ``E(c) = [in(c,
    L) > 0] - out(c, L)`` summed along its chain, so nothing iff ``E = 0``
    at every candidate outer time ``c`` (``outer``, sorted: ``E`` changes
    only there), where ``in``/``out`` add the later history at iterations
    in ``(r, L]`` at outer times ``<= c``.  The later iterations are
    tried in order.  ``least``: the least of them, returned when a sum
    would leave int64 or the search would pass :data:`FIRST_CHANGE_WORK`.
    ``work``: at least ``2 * len(outer)`` int64s of the caller's scratch.
    O(l * (h + p)) for l later iterations, h history rows and p outer
    times.
    """
    h = (i1 - i0) + (o1 - o0)
    nb = len(outer)
    if h * (h + 2 * nb) > FIRST_CHANGE_WORK:
        return least
    BIG = np.iinfo(np.int64).max
    D, O = work[:nb], work[nb:2 * nb]
    j = c0
    for b in range(nb):
        while j + 1 < c0 + nc and chain[j + 1] <= outer[b]:
            j += 1
        D[b] = acc[j]
        O[b] = 1 if acc[j] > 0 else 0
    it = r
    while True:
        L = next_later(it, in_i, i0, i1, out_i, o0, o1)
        if L == BIG:
            return -1
        if add_at_iteration(D, outer, in_a, in_i, in_d, i0, i1, L) or \
                add_at_iteration(O, outer, out_a, out_i, out_d, o0, o1, L):
            return least
        for b in range(nb):
            if O[b] != (1 if D[b] > 0 else 0):
                return L
        it = L


def later_rounds(P, npd, g, r, ms, chain, c0, nc, n_later, in_a, in_i, i0, i1, out_a, out_i, o0, o1, scratch,
                 distinct, acc, in_d, out_d):
    """Append to ``P`` (rows ``(group, outer time, iteration)``, ``npd`` used) group ``g``'s next later round.

    A kernel helper (compiled with the kernels that call it), called for a
    group with ``n_later`` (:func:`n_later`) history rows past ``r``.
    Those rows make this round's change visible again at their iterations.
    Only the least of those iterations, ``i``, is made pending, crossed with
    every candidate outer time (the group's ``nc`` chain times
    ``chain[c0:c0 + nc]`` and its later history's outer times from the
    earliest seed ``ms`` on): when round ``i`` evaluates those seeds, its
    walk finds the group's history past ``i`` and makes the next one
    pending in turn, with at least these outer times (its chain holds
    them).  A later iteration whose rows have since consolidated away is
    no longer found, and needs no visit: neither accumulation changes
    there.  So every later iteration that can change the output is still
    visited, and a round does not queue all of them again only for the
    pending set to drop the repeats.  ``scratch``: at least ``nc +
    n_later`` int64s (three times that for a distinct), allocated once by
    the caller for every group.
    For a ``distinct`` (``acc``: the chain's accumulated input counts;
    ``in_d``/``out_d``: the histories' diffs), the iteration pended is the
    least at which the output would change (:func:`first_change`), and
    none where it would not: a visit that emits nothing is not made.
    Returns ``(P, npd)``.  O(h + p log p) for h history rows and p outer
    times, and :func:`first_change`'s for a distinct.
    """
    outer, least = later_times(r, ms, chain, c0, nc, n_later, in_a, in_i, i0, i1, out_a, out_i, o0, o1, scratch)
    if distinct:
        least = first_change(r, least, outer, chain, acc, c0, nc, in_a, in_i, in_d, i0, i1, out_a, out_i, out_d,
                             o0, o1, scratch[nc + n_later:])
        if least < 0:
            return P, npd
    return pend_at(P, npd, g, outer, least)


def later_times(r, ms, chain, c0, nc, n_later, in_a, in_i, i0, i1, out_a, out_i, o0, o1, scratch):
    """:func:`later_rounds`' candidate outer times (sorted, distinct) and the least later iteration.  A kernel helper.

    The candidates: the chain ``chain[c0:c0 + nc]`` and the outer times,
    from the earliest seed ``ms`` on, of the ``n_later`` history rows past
    ``r``; written into ``scratch[:nc + n_later]``.  O(h + p log p).
    """
    outer = scratch[:nc + n_later]
    for x in range(nc):
        outer[x] = chain[c0 + x]
    nout = nc
    least = np.iinfo(np.int64).max
    for j in range(i0, i1):
        if in_i[j] > r:
            least = min(least, in_i[j])
            if in_a[j] >= ms:
                outer[nout] = in_a[j]
                nout += 1
    for j in range(o0, o1):
        if out_i[j] > r:
            least = min(least, out_i[j])
            if out_a[j] >= ms:
                outer[nout] = out_a[j]
                nout += 1
    return sorted_unique(outer[:nout]), least


def pend_at(P, npd, g, outer, L):
    """Append to ``P`` (``npd`` rows used) the rows ``(g, a, L)`` for each ``a`` of ``outer``.  A kernel helper.  O(p)."""
    P = grown(P, npd, npd + len(outer))
    for a in outer:
        P[npd, 0] = g
        P[npd, 1] = a
        P[npd, 2] = L
        npd += 1
    return P, npd


def next_chain_time(c, r, sp, s1, seed_a, pn, i1, in_a, in_i, qn, o1, out_a, out_i):
    """The chain time after ``c``: the least later seed, or later history time at an iteration ``<= r``.

    Returns it (int64's max when there is none) and the seed cursor and
    the look-ahead cursors ``pn``/``qn`` into the group's input ``[pn,
    i1)`` and output ``[qn, o1)`` histories, each moved to its first row
    after ``c`` at an iteration ``<= r``.  A row they pass is never the
    answer again (``c`` only grows; its iteration does not change), so
    the caller keeps them for the group's next call: each history row is
    passed once per group, not once per chain time (a group with many
    rows at later iterations and many seeds was quadratic).  O(rows
    passed).
    """
    while sp < s1 and seed_a[sp] <= c:
        sp += 1
    nxt = seed_a[sp] if sp < s1 else np.iinfo(np.int64).max
    while pn < i1 and (in_a[pn] <= c or in_i[pn] > r):
        pn += 1
    if pn < i1 and in_a[pn] < nxt:
        nxt = in_a[pn]
    while qn < o1 and (out_a[qn] <= c or out_i[qn] > r):
        qn += 1
    if qn < o1 and out_a[qn] < nxt:
        nxt = out_a[qn]
    return nxt, sp, pn, qn


@kernel("operators.reduce")
def chain_walk(r, seed_g, seed_a, in_g, in_a, in_i, in_d, out_g, out_a, out_i, out_d, distinct):
    """The chain of each seeded group at iteration ``r``, its input counts, and the pending times.

    Every array is sorted by (group, outer time).  Per group the chain is
    the seeds' outer times and the outer times of its history at
    iterations ``<= r`` from the earliest seed on, in order.  Returns
    ``(cg, ca, acc, out_pos, P)``: the chain rows' group and outer time;
    ``acc`` the group's input accumulated at each chain time (iterations
    ``<= r``); ``out_pos`` for each output history update the chain row
    where it first becomes visible (-1: at a later iteration, or after the
    last chain time); ``P`` rows ``(group, outer time, iteration)`` from
    :func:`later_rounds` (``distinct``: the logic is a distinct, which
    pends only the rounds where its output would change; ``out_d``: the
    output history's diffs, read for it).  One pass per group: O(h +
    |chain|) for h history updates, plus sorting the pending candidates of
    groups with later history.
    """
    BIG = np.iinfo(np.int64).max
    ns, ni, no = len(seed_g), len(in_g), len(out_g)
    cap = ns + ni + no
    cg = np.empty(cap, dtype=np.int64)
    ca = np.empty(cap, dtype=np.int64)
    acc = np.empty(cap, dtype=np.int64)
    out_pos = np.full(no, -1, dtype=np.int64)
    P = np.empty((16, 3), dtype=np.int64)
    scratch = np.empty(3 * (cap + ni + no), dtype=np.int64)  # later_rounds': a group's chain plus its history, thrice
    nc = 0
    npd = 0
    s0 = 0
    i0 = 0
    o0 = 0
    overflow = False
    while s0 < ns:
        g = seed_g[s0]
        s1 = run_of(seed_g, s0, g)[1]
        i0, i1 = run_of(in_g, i0, g)
        o0, o1 = run_of(out_g, o0, g)
        ms = seed_a[s0]
        c0 = nc
        total = 0
        p, q, sp = i0, o0, s0
        pn, qn = i0, o0
        c = ms
        while c != BIG:
            while p < i1 and in_a[p] <= c:
                if in_i[p] <= r:
                    d = in_d[p]
                    if sum_overflows(total, d):
                        overflow = True  # the count leaves int64: reported, never wrapped
                    else:
                        total += d
                p += 1
            while q < o1 and out_a[q] <= c:
                if out_i[q] <= r:
                    out_pos[q] = nc
                q += 1
            cg[nc] = g
            ca[nc] = c
            acc[nc] = total
            nc += 1
            c, sp, pn, qn = next_chain_time(c, r, sp, s1, seed_a, pn, i1, in_a, in_i, qn, o1, out_a, out_i)
        later = n_later(r, in_i, i0, i1, out_i, o0, o1)
        if later:  # P is reassigned only here: an array reassigned on every pass costs the loop reference counting
            P, npd = later_rounds(P, npd, g, r, ms, ca, c0, nc - c0, later, in_a, in_i, i0, i1, out_a, out_i, o0, o1,
                                  scratch, distinct, acc, in_d, out_d)
        s0, i0, o0 = s1, i1, o1
    return cg[:nc], ca[:nc], acc[:nc], out_pos, P[:npd], overflow


def _rows(base, val, sel, times, mult, kinds) -> Updates:
    cols = tuple(c[sel] for c in base)
    if val is not None:
        cols = cols + (np.asarray(val)[sel],)
    return Updates(cols, times, mult, kinds)
