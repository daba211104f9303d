"""The loop tactic: count, distinct and threshold at loop times ``(t, i)``, one compiled walk per step.

Inside a top-level loop, round ``r`` retires seeds at times ``(t, r)``.
For one group the complete times whose output may change form a chain
``(a_0, r) < (a_1, r) < ...``: the seeds' outer times and the outer
times of the group's history (input and output) at iterations ``<= r``
that lie after the earliest seed.  Along a chain the output to emit
telescopes: at ``(a_i, r)`` emit ``D_i - D_(i-1)`` (the desired output
now minus the desired output at the previous chain time) minus the
group's output history that first becomes visible at ``a_i``.  Then the
accumulated output at every chain time is exactly the desired one.  One
kernel (:func:`chain_walk`) builds every group's chain, counts and
pending times in one pass over the histories sorted by (group, time);
the logic and the output are then a few vectorized steps, with no
per-group Python.

Times at later iterations where the new input is also visible (the
group's history iterations ``> r``, crossed with its candidate outer
times) are returned as pending seeds for their rounds.  Over-approximating
that set is safe: evaluating a time whose output does not change emits
nothing.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.columnar import lookup_rows, pair_order
from ddflow.base.consolidate import consolidate
from ddflow.base.kernels import grown, key_matrix, lazy_jit, lex_order, run_of, sorted_unique
from ddflow.base.updates import Updates
from ddflow.errors import DataflowError, SchemaError
from ddflow.graph.node import object_columns, ready_mask
from ddflow.operators.reduce.logic import Logic
from ddflow.operators.reduce.tactic import ReduceTactic
from ddflow.traces.layout import histories


class LoopTactic(ReduceTactic):
    """Scalar logics inside a top-level loop (depth 2); seeds for later rounds wait by group."""

    @classmethod
    def accepts(cls, logic: Logic, depth: int) -> bool:
        return logic.scalar and depth == 2

    def __init__(self, node):
        super().__init__(node)
        self.pending_rows: Updates | None = None  # seeds for later rounds, by group

    def work_times(self):
        if self.pending_rows is not None:
            yield self.pending_rows.times

    def held_columns(self):
        """The output trace and the pending seed rows.  O(batches)."""
        yield from super().held_columns()
        if self.pending_rows is not None:
            yield from object_columns(self.pending_rows)

    def step(self, new: Updates | None, bound: np.ndarray) -> None:
        trace = self.node.source.trace
        out_kinds = self.node.logic.out_kinds(trace.kinds)
        if trace.ints and (self.out_trace is None or self.out_trace.ints):
            self._step_ints(new, bound, trace, out_kinds)
        else:
            self._step_read(new, bound, trace, out_kinds)

    def _step_ints(self, new: Updates | None, bound: np.ndarray, trace, out_kinds: tuple[str, ...]) -> None:
        """The step over int64 traces: a fixed number of compiled calls, whatever the number of groups.

        :func:`loop_seeds` (the ready seeds, grouped and sorted), one
        :func:`histories` per trace, :func:`chain_walk`, the logic,
        :func:`chain_output`, one consolidation, and :func:`loop_pending`
        (the seeds for later rounds, kept sorted and distinct).
        """
        ng = len(trace.kinds)
        r = int(bound[-1]) - 1
        pend = self.pending_rows
        if new is None and (pend is None or not ready_mask(pend.times, bound).any()):
            return
        empty_k, empty_t = np.zeros((0, ng), dtype=np.int64), np.zeros((0, 2), dtype=np.int64)
        nk, nt = (key_matrix(new.cols), new.times) if new is not None else (empty_k, empty_t)
        pk, pt = (key_matrix(pend.cols), pend.times) if pend is not None else (empty_k, empty_t)
        gmat, seed_gid, seed_t, waiting, bad = loop_seeds(nk, nt, pk, pt, bound)
        if bad:
            raise DataflowError(f"reduce {self.node.name!r}: internal error, seeds at iterations other than the current round {r}")
        in_gid, _, in_times, in_diffs = histories(trace.spine.table().matrix, gmat, ng, 2)
        if self.out_trace is not None:
            out_gid, o_cols, o_times, o_diffs = histories(self.out_trace.spine.table().matrix, gmat, len(out_kinds), 2)
        else:
            out_gid, o_cols = np.zeros(0, dtype=np.int64), np.zeros((len(out_kinds), 0), dtype=np.int64)
            o_times, o_diffs = empty_t, np.zeros(0, dtype=np.int64)
        c_gid, c_a, acc, out_pos, P, overflow = chain_walk(r, seed_gid, seed_t, in_gid, in_times[:, 0], in_times[:, 1],
                                                          in_diffs, out_gid, o_times[:, 0], o_times[:, 1])
        if overflow:
            raise SchemaError(_overflow_message(self.node.logic))
        val, mult = self.node.logic.scalar_rows(acc)
        mult = np.asarray(mult, dtype=np.int64)
        if val is not None and np.asarray(val).dtype != np.int64:
            # A logic with float output: the general assembly (the output trace then reads batch by batch).
            out = Updates(tuple(o_cols), o_times, o_diffs, out_kinds)
            emitted = _assemble(list(gmat), c_gid, c_a, mult, val, out, out_pos, None, out_kinds, r)
        else:
            v = np.zeros(0, dtype=np.int64) if val is None else np.asarray(val)
            cols, times, diffs = chain_output(r, c_gid, c_a, mult, v, val is not None, gmat, o_cols, o_diffs, out_pos)
            emitted = consolidate(Updates(tuple(cols), times, diffs, out_kinds))
        later, later_t = loop_pending(pk, pt, waiting, gmat, P)
        self.pending_rows = Updates(tuple(later), later_t, np.ones(len(later_t), dtype=np.int64), trace.kinds) \
            if len(later_t) else None
        if len(emitted):
            self.output(emitted)

    def _step_read(self, new: Updates | None, bound: np.ndarray, trace, out_kinds: tuple[str, ...]) -> None:
        """The step over traces with a float column: histories read batch by batch (:meth:`_read`)."""
        logic = self.node.logic
        pend = None
        if self.pending_rows is not None:
            ok = ready_mask(self.pending_rows.times, bound)
            if ok.any():
                pend = self.pending_rows.take(np.flatnonzero(ok))
                rest = self.pending_rows.take(np.flatnonzero(~ok))
                self.pending_rows = rest if len(rest) else None
        if new is None and pend is None:
            return
        ng = len(trace.kinds)
        gk = trace.kinds
        seeds = []
        if new is not None:
            seeds.append(Updates(new.cols, new.times, new.diffs, gk))
        if pend is not None:
            seeds.append(pend)
        seeds_u = Updates.concat(seeds)
        r = int(bound[-1]) - 1
        if (seeds_u.times[:, 1] != r).any():
            raise DataflowError(f"reduce {self.node.name!r}: internal error, seeds at iterations other than the current round {r}")
        groups, seed_gid, in_gid, hist, out_gid, oh = self._read(seeds_u, trace, ng, gk, out_kinds)
        emitted, p_gid, p_times = scalar_loop(groups, seed_gid, seeds_u.times[:, 0], in_gid, hist.times, hist.diffs,
                                              out_gid, oh, logic, out_kinds, r)
        if len(p_gid):
            p = Updates(tuple(g[p_gid] for g in groups), p_times, np.ones(len(p_gid), dtype=np.int64), gk)
            allp = Updates.concat([self.pending_rows, p]) if self.pending_rows is not None else p
            self.pending_rows = _dedupe(allp)
        if len(emitted):
            self.output(emitted)

    def _read(self, seeds_u: Updates, trace, ng: int, gk: tuple[str, ...], out_kinds: tuple[str, ...]):
        """The seeded groups, their ids, and their input and output histories, read batch by batch.

        For traces with a float column (the compiled read takes int64 columns only).
        """
        groups = consolidate(Updates(seeds_u.cols, np.zeros((len(seeds_u), 1), dtype=np.int64),
                                     np.ones(len(seeds_u), dtype=np.int64), gk)).cols
        seed_gid = lookup_rows(list(groups), list(seeds_u.cols))
        keys = np.unique(groups[0])
        _, hist = trace.seek(keys)
        in_gid = lookup_rows(list(groups), list(hist.cols[:ng]))
        keep = np.flatnonzero(in_gid >= 0)
        hist, in_gid = hist.take(keep), in_gid[keep]
        if self.out_trace is not None:
            _, oh = self.out_trace.seek(keys)
            out_gid = lookup_rows(list(groups), list(oh.cols[:ng]))
            keep = np.flatnonzero(out_gid >= 0)
            oh, out_gid = oh.take(keep), out_gid[keep]
        else:
            oh, out_gid = Updates.empty(out_kinds, 2), np.zeros(0, dtype=np.int64)
        return list(groups), seed_gid, in_gid, hist, out_gid, oh


@lazy_jit(uses=(lex_order,))
def loop_seeds(nk, nt, pk, pt, bound):
    """This round's seeds: the new ones (rows ``nk`` at times ``nt``) and the pending ones complete under ``bound``.

    ``pk``/``pt``: the pending seeds' groups and times.  Returns ``(groups,
    gid, t, waiting, bad)``: the distinct seeded groups as an ``(m, G)``
    matrix in row order; each seed's group and outer time, sorted by
    (group, outer time) as :func:`chain_walk` reads them; which pending
    seeds wait for a later round; ``bad`` if a seed is not at the round
    ``bound[-1] - 1`` (an internal error).  O(s log s) for s seeds.
    """
    nn, m = nk.shape
    npend = pk.shape[0]
    d = len(bound)
    waiting = np.zeros(npend, dtype=np.bool_)
    src = np.empty(nn + npend, dtype=np.int64)  # seed i: row src[i] of nk, or row src[i] - nn of pk
    ns = 0
    for i in range(nn):
        src[ns] = i
        ns += 1
    for i in range(npend):
        ready = True
        for j in range(d):
            if pt[i, j] >= bound[j]:
                ready = False
                break
        if ready:
            src[ns] = nn + i
            ns += 1
        else:
            waiting[i] = True
    M = np.empty((ns, m + 1), dtype=np.int64)
    bad = False
    for s in range(ns):
        q = src[s]
        for c in range(m):
            M[s, c] = nk[q, c] if q < nn else pk[q - nn, c]
        M[s, m] = nt[q, 0] if q < nn else pt[q - nn, 0]
        if (nt[q, 1] if q < nn else pt[q - nn, 1]) != bound[d - 1] - 1:
            bad = True
    order = lex_order(M)
    gid = np.empty(ns, dtype=np.int64)
    t = np.empty(ns, dtype=np.int64)
    firsts = np.empty(ns, dtype=np.int64)
    G = 0
    for i in range(ns):
        x = order[i]
        new = i == 0
        if not new:
            p = firsts[G - 1]
            for c in range(m):
                if M[x, c] != M[p, c]:
                    new = True
                    break
        if new:
            firsts[G] = x
            G += 1
        gid[i] = G - 1
        t[i] = M[x, m]
    groups = np.empty((m, G), dtype=np.int64)
    for g in range(G):
        for c in range(m):
            groups[c, g] = M[firsts[g], c]
    return groups, gid, t, waiting, bad


def _pending_cmp(pk, pt, i, groups, P, j):
    """-1, 0 or 1 as pending seed ``i`` (``pk[i]``, ``pt[i]``) is before, equal to or after new seed ``P[j]``."""
    g = P[j, 0]
    for c in range(pk.shape[1]):
        if pk[i, c] != groups[c, g]:
            return -1 if pk[i, c] < groups[c, g] else 1
    for c in range(2):
        if pt[i, c] != P[j, 1 + c]:
            return -1 if pt[i, c] < P[j, 1 + c] else 1
    return 0


@lazy_jit(uses=(lex_order, _pending_cmp))
def loop_pending(pk, pt, waiting, groups, P):
    """The seeds for later rounds: the pending ones still ``waiting`` and the new ones ``P``, distinct and sorted.

    ``P`` rows are ``(group, outer time, iteration)`` with groups columns
    of ``groups``.  Returns ``(cols, times)``: an ``(m, n)`` matrix of the
    seeds' group columns and their ``(n, 2)`` times, sorted by (group,
    time) with repeats dropped.  Both inputs come sorted (the pending set
    is this kernel's last output; :func:`chain_walk` lists ``P`` by group,
    then time, and ``groups`` are sorted rows), so they are merged in
    O(p) for p seeds; input out of order is sorted first, O(p log p).
    """
    m = groups.shape[0]
    nw = 0
    for i in range(len(waiting)):
        if waiting[i]:
            nw += 1
    wi = np.empty(nw, dtype=np.int64)  # the waiting pending seeds, in order
    k = 0
    for i in range(len(waiting)):
        if waiting[i]:
            wi[k] = i
            k += 1
    ordered = True
    for x in range(1, nw):
        a, b = wi[x - 1], wi[x]
        for c in range(m + 2):
            u = pk[a, c] if c < m else pt[a, c - m]
            v = pk[b, c] if c < m else pt[b, c - m]
            if u != v:
                if u > v:
                    ordered = False
                break
    for j in range(1, P.shape[0]):
        for c in range(m + 2):
            u = groups[c, P[j - 1, 0]] if c < m else P[j - 1, c - m + 1]
            v = groups[c, P[j, 0]] if c < m else P[j, c - m + 1]
            if u != v:
                if u > v:
                    ordered = False
                break
    n = nw + P.shape[0]
    cols = np.empty((m, n), dtype=np.int64)
    times = np.empty((n, 2), dtype=np.int64)
    if not ordered:  # not expected: sort both together
        M = np.empty((n, m + 2), dtype=np.int64)
        for x in range(nw):
            for c in range(m):
                M[x, c] = pk[wi[x], c]
            M[x, m] = pt[wi[x], 0]
            M[x, m + 1] = pt[wi[x], 1]
        for j in range(P.shape[0]):
            for c in range(m):
                M[nw + j, c] = groups[c, P[j, 0]]
            M[nw + j, m] = P[j, 1]
            M[nw + j, m + 1] = P[j, 2]
        order = lex_order(M)
        out = 0
        for x in range(n):
            r = order[x]
            if out > 0:
                same = True
                for c in range(m + 2):
                    if M[r, c] != M[order[x - 1], c]:
                        same = False
                        break
                if same:
                    continue
            for c in range(m):
                cols[c, out] = M[r, c]
            times[out, 0] = M[r, m]
            times[out, 1] = M[r, m + 1]
            out += 1
        return cols[:, :out], times[:out]
    # Merge the two sorted lists; a seed equal to the last one written is a repeat.
    x, j, out = 0, 0, 0
    while x < nw or j < P.shape[0]:
        if j >= P.shape[0]:
            take_pending = True
        elif x >= nw:
            take_pending = False
        else:
            take_pending = _pending_cmp(pk, pt, wi[x], groups, P, j) <= 0
        if take_pending:
            i = wi[x]
            x += 1
            same = out > 0 and times[out - 1, 0] == pt[i, 0] and times[out - 1, 1] == pt[i, 1]
            for c in range(m):
                if not same:
                    break
                same = cols[c, out - 1] == pk[i, c]
            if same:
                continue
            for c in range(m):
                cols[c, out] = pk[i, c]
            times[out, 0] = pt[i, 0]
            times[out, 1] = pt[i, 1]
        else:
            g = P[j, 0]
            same = out > 0 and times[out - 1, 0] == P[j, 1] and times[out - 1, 1] == P[j, 2]
            for c in range(m):
                if not same:
                    break
                same = cols[c, out - 1] == groups[c, g]
            if same:
                j += 1
                continue
            for c in range(m):
                cols[c, out] = groups[c, g]
            times[out, 0] = P[j, 1]
            times[out, 1] = P[j, 2]
            j += 1
        out += 1
    return cols[:, :out], times[:out]


def _overflow_message(logic) -> str:
    return (f"{logic.name}: a record's count in the loop adds up past int64 (multiplicities "
            "this large overflow where the loop adds them: make the input's diffs smaller, or "
            "distinct it before the loop)")


def _dedupe(u: Updates) -> Updates:
    """Distinct (row, time) pairs, each with diff 1."""
    u = consolidate(u.with_diffs(np.ones(len(u), dtype=np.int64)))
    return u.with_diffs(np.ones(len(u), dtype=np.int64))


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
                                                      out_gid[oo], out.times[oo, 0], out.times[oo, 1])
    if overflow:
        raise SchemaError(_overflow_message(logic))
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


@lazy_jit
def chain_output(r, c_gid, c_a, mult, val, has_val, groups, ocols, odiffs, out_pos):
    """The output of round ``r`` along the chains, unconsolidated: what :func:`scalar_loop` emits.

    For chain row ``i`` (group ``g``, outer time ``a_i``): ``+D_i`` at
    ``(a_i, r)`` and ``-D_(i-1)`` (the group's previous chain row) there;
    for each output history update ``q`` first visible at chain row
    ``out_pos[q]``, its negation there.  ``D`` is the group's row
    (``groups[:, g]``, then ``val[i]`` if ``has_val``) with multiplicity
    ``mult[i]``.  Returns ``(cols, times, diffs)`` with ``cols`` an
    ``(arity, n)`` matrix.  O(chain + history), one pass.
    """
    n = len(c_gid)
    ng = groups.shape[0]
    arity = ng + 1 if has_val else ng
    cap = 2 * n + len(out_pos)
    cols = np.empty((arity, cap), dtype=np.int64)
    times = np.empty((cap, 2), dtype=np.int64)
    diffs = np.empty(cap, dtype=np.int64)
    k = 0
    for i in range(n):
        g = c_gid[i]
        for src in range(2):
            j = i if src == 0 else i - 1
            if j < 0 or c_gid[j] != g or mult[j] == 0:
                continue
            for c in range(ng):
                cols[c, k] = groups[c, g]
            if has_val:
                cols[ng, k] = val[j]
            times[k, 0] = c_a[i]
            times[k, 1] = r
            diffs[k] = mult[j] if src == 0 else -mult[j]
            k += 1
    for q in range(len(out_pos)):
        i = out_pos[q]
        if i < 0:
            continue
        for c in range(arity):
            cols[c, k] = ocols[c, q]
        times[k, 0] = c_a[i]
        times[k, 1] = r
        diffs[k] = -odiffs[q]
        k += 1
    return cols[:, :k], times[:k], diffs[:k]


def later_rounds(P, npd, g, r, ms, chain, nc, in_a, in_i, i0, i1, out_a, out_i, o0, o1):
    """Append to ``P`` (rows ``(group, outer time, iteration)``, ``npd`` used) group ``g``'s later rounds.

    A kernel helper (compiled with the kernels that call it).
    The group's history at iterations past ``r`` (input rows ``i0:i1``,
    output rows ``o0:o1``) makes this round's change visible again there:
    each of those iterations, crossed with every candidate outer time (the
    group's ``nc`` chain times and its later history's outer times from the
    earliest seed ``ms`` on).  Returns ``(P, npd)``.  O(h + p log p) for h
    history rows and p pending times; nothing when no history is later.
    """
    n_later = 0
    for j in range(i0, i1):
        if in_i[j] > r:
            n_later += 1
    for j in range(o0, o1):
        if out_i[j] > r:
            n_later += 1
    if not n_later:
        return P, npd
    its = np.empty(n_later, dtype=np.int64)
    outer = np.empty(nc + n_later, dtype=np.int64)
    for x in range(nc):
        outer[x] = chain[x]
    nout = nc
    x = 0
    for j in range(i0, i1):
        if in_i[j] > r:
            its[x] = in_i[j]
            x += 1
            if in_a[j] >= ms:
                outer[nout] = in_a[j]
                nout += 1
    for j in range(o0, o1):
        if out_i[j] > r:
            its[x] = out_i[j]
            x += 1
            if out_a[j] >= ms:
                outer[nout] = out_a[j]
                nout += 1
    its = sorted_unique(its)
    outer = sorted_unique(outer[:nout])
    P = grown(P, npd, npd + len(its) * len(outer))
    for a in outer:
        for i in its:
            P[npd, 0] = g
            P[npd, 1] = a
            P[npd, 2] = i
            npd += 1
    return P, npd


@lazy_jit(uses=(grown, run_of, sorted_unique, later_rounds))
def chain_walk(r, seed_g, seed_a, in_g, in_a, in_i, in_d, out_g, out_a, out_i):
    """The chain of each seeded group at iteration ``r``, its input counts, and the pending times.

    Every array is sorted by (group, outer time).  Per group the chain is
    the seeds' outer times and the outer times of its history at
    iterations ``<= r`` from the earliest seed on, in order.  Returns
    ``(cg, ca, acc, out_pos, P)``: the chain rows' group and outer time;
    ``acc`` the group's input accumulated at each chain time (iterations
    ``<= r``); ``out_pos`` for each output history update the chain row
    where it first becomes visible (-1: at a later iteration, or after the
    last chain time); ``P`` rows ``(group, outer time, iteration)`` from
    :func:`later_rounds`.  One pass per group: O(h + |chain|) for h history
    updates, plus sorting the pending candidates of groups with later history.
    """
    BIG = np.iinfo(np.int64).max
    ns, ni, no = len(seed_g), len(in_g), len(out_g)
    cap = ns + ni + no
    cg = np.empty(cap, dtype=np.int64)
    ca = np.empty(cap, dtype=np.int64)
    acc = np.empty(cap, dtype=np.int64)
    out_pos = np.full(no, -1, dtype=np.int64)
    P = np.empty((16, 3), dtype=np.int64)
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
        c = ms
        while c != BIG:
            while p < i1 and in_a[p] <= c:
                if in_i[p] <= r:
                    d = in_d[p]
                    if (d > 0 and total > BIG - d) or (d < 0 and total < -BIG - 1 - d):
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
            while sp < s1 and seed_a[sp] <= c:
                sp += 1
            nxt = seed_a[sp] if sp < s1 else BIG
            pp = p
            while pp < i1 and in_i[pp] > r:
                pp += 1
            if pp < i1 and in_a[pp] < nxt:
                nxt = in_a[pp]
            qq = q
            while qq < o1 and out_i[qq] > r:
                qq += 1
            if qq < o1 and out_a[qq] < nxt:
                nxt = out_a[qq]
            c = nxt
        P, npd = later_rounds(P, npd, g, r, ms, ca[c0:nc], nc - c0, in_a, in_i, i0, i1, out_a, out_i, o0, o1)
        s0, i0, o0 = s1, i1, o1
    return cg[:nc], ca[:nc], acc[:nc], out_pos, P[:npd], overflow


def _rows(base, val, sel, times, mult, kinds) -> Updates:
    cols = tuple(c[sel] for c in base)
    if val is not None:
        cols = cols + (np.asarray(val)[sel],)
    return Updates(cols, times, mult, kinds)
