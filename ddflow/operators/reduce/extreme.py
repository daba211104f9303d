"""The extreme tactic: min, max and top_k over numeric values, at the top level and in a top-level loop.

Times are ``(a,)`` at the top level and ``(a, i)`` in a loop.  In round
``r`` of a loop every seed (a changed key) is at iteration ``r``, so the
complete times at which a key's output may change form a chain
``(a_0, r) < (a_1, r) < ...``: the seeds' outer times and the outer times
of the key's history (input and output) at iterations ``<= r`` from the
earliest seed on.  At the top level the same holds with ``r = 0``.  Along
the chain the output to emit telescopes: at ``a_j`` emit
``D_j - D_(j-1) - H_j``, where ``D_j`` is the logic applied to the input
accumulated at ``(a_j, r)`` and ``H_j`` the output history that first
becomes visible at ``a_j``; the accumulated output at every chain time is
then exactly ``D_j``.  History at later iterations makes the later
iterations of the chain's outer times pending, as in
:mod:`ddflow.operators.reduce.iterate`; chain times not yet complete
(outer time past the bound) wait as pending too.

One compiled walk per step visits each changed key once: it sorts the
key's history by outer time and advances a count per distinct value
along the chain, so a key costs
O(h log h + |chain| x |distinct values|) for a history of h updates, with
no Python per key and no per-key ``np.unique`` of times (what the general
tactic pays).  Values are compared by rank: numeric columns map to int64
keys in the same order, so several value fields compare as tuples do.
Steps whose values are objects (compared decoded) or NaN (which Python's
``min`` leaves unordered) go to the general tactic, which this one
extends and shares its pending times and output trace with.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.columnar import group_by_index
from ddflow.base.consolidate import consolidate
from ddflow.base.kernels import key_matrix, lazy_jit, sort_rows
from ddflow.base.updates import Updates
from ddflow.operators.reduce.general import GeneralTactic, _unique_pairs
from ddflow.operators.reduce.logic import ExtremeLogic, Logic

#: Logic kinds as the kernel numbers them.
MODES = {"min": 0, "max": 1, "top_k": 2}


class ExtremeTactic(GeneralTactic):
    """min, max, top_k at depth 1 and 2 (numeric values; others fall back to the reference)."""

    @classmethod
    def accepts(cls, logic: Logic, depth: int) -> bool:
        return isinstance(logic, ExtremeLogic) and depth in (1, 2)

    def _retire(self, new, pk, pt, bound):
        trace = self.node.source.trace
        parts = [u for u in (new, None if pk is None else Updates((pk,), pt, np.ones(len(pk), dtype=np.int64),
                                                                     trace.kinds[:1])) if u is not None]
        skeys = np.concatenate([u.cols[0] for u in parts])
        stimes = np.concatenate([u.times for u in parts])
        depth = stimes.shape[1]
        r = int(bound[-1]) - 1 if depth == 2 else 0
        vkinds = trace.kinds[1:]
        if any(k not in "ifb" for k in vkinds) or (depth == 2 and (stimes[:, 1] != r).any()):
            return super()._retire(new, pk, pt, bound)
        keys = np.unique(skeys)
        in_q, inp = trace.seek(keys)
        if self.out_trace is not None:
            out_q, outp = self.out_trace.seek(keys)
        else:
            out_q, outp = np.zeros(0, dtype=np.int64), Updates.empty(trace.kinds, depth)
        if any(k == "f" and np.isnan(c).any() for c, k in zip((*inp.cols[1:], *outp.cols[1:]), vkinds * 2)):
            return super()._retire(new, pk, pt, bound)
        # Values ranked in tuple order; the rank's first row holds its columns.
        vcols = [np.concatenate([a, b]) for a, b in zip(inp.cols[1:], outp.cols[1:])]
        vrank, vfirst = _dense_rank(vcols)
        n_in = len(inp)
        logic = self.node.logic
        s_o, s_b = group_by_index(np.searchsorted(keys, skeys), len(keys))
        i_o, i_b = group_by_index(in_q, len(keys))
        o_o, o_b = group_by_index(out_q, len(keys))
        it = _iterations(inp.times)
        ot = _iterations(outp.times)
        emitted, pending = extreme_walk(
            MODES[logic.kind], logic.k, r, int(bound[0]),
            s_b, stimes[s_o, 0],
            i_b, inp.times[i_o, 0], it[i_o], vrank[:n_in][i_o], inp.diffs[i_o],
            o_b, outp.times[o_o, 0], ot[o_o], vrank[n_in:][o_o], outp.diffs[o_o])
        if len(pending):
            ptimes = pending[:, 1:] if depth == 2 else pending[:, 1:2]
            pk_all, pt_all = keys[pending[:, 0]], ptimes
            if self.pending_keys is not None:
                pk_all = np.concatenate([self.pending_keys, pk_all])
                pt_all = np.concatenate([self.pending_times, pt_all])
            self.pending_keys, self.pending_times = _unique_pairs(pk_all, pt_all)
        if not len(emitted):
            return
        rows = vfirst[emitted[:, 1]]
        cols = (keys[emitted[:, 0]], *(c[rows] for c in vcols))
        times = emitted[:, 2:3] if depth == 1 else np.column_stack([emitted[:, 2], np.full(len(emitted), r)])
        self.output(consolidate(Updates(cols, times, emitted[:, 3].copy(), trace.kinds)))


def _iterations(times: np.ndarray) -> np.ndarray:
    return times[:, 1] if times.shape[1] > 1 else np.zeros(len(times), dtype=np.int64)


def _dense_rank(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's rank among the distinct rows of ``cols`` (tuple order), and each rank's first row."""
    n = len(cols[0])
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    K = key_matrix(cols)
    order = sort_rows(K)
    Ks = K[order]
    new = np.ones(n, dtype=bool)
    new[1:] = (Ks[1:] != Ks[:-1]).any(axis=1)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.cumsum(new) - 1
    return rank, order[new]


@lazy_jit
def extreme_walk(mode, k, r, bound_a,
                 seed_b, seed_a,
                 in_b, in_a, in_i, in_v, in_d,
                 out_b, out_a, out_i, out_v, out_d):
    """Output updates and pending times of min (mode 0), max (1) or top_k (2) for each seeded group.

    Arrays are grouped by group ``g``: group ``g``'s seeds are
    ``seed_a[seed_b[g]:seed_b[g+1]]`` (outer times, all at iteration
    ``r``), its input history ``in_*[in_b[g]:in_b[g+1]]`` (outer time,
    iteration, value rank, diff) and likewise its output history.  Returns
    ``(E, P)``: ``E`` rows ``(g, value rank, outer time, diff)``, the
    output at iteration ``r`` (times ``a < bound_a`` only), and ``P`` rows
    ``(g, outer time, iteration)`` still to retire.  Contract as in the
    module docstring; O(h log h + |chain| x |values|) per group.
    """
    G = len(seed_b) - 1
    E = np.empty((16, 4), dtype=np.int64)
    ne = 0
    P = np.empty((16, 3), dtype=np.int64)
    npd = 0
    for g in range(G):
        s0, s1 = seed_b[g], seed_b[g + 1]
        i0, i1 = in_b[g], in_b[g + 1]
        o0, o1 = out_b[g], out_b[g + 1]
        ms = seed_a[s0]
        for j in range(s0, s1):
            ms = min(ms, seed_a[j])
        # History visible at iteration r, and the chain of outer times.
        n_now = 0
        n_later = 0
        for j in range(i0, i1):
            if in_i[j] <= r:
                n_now += 1
            else:
                n_later += 1
        m_now = 0
        for j in range(o0, o1):
            if out_i[j] <= r:
                m_now += 1
            else:
                n_later += 1
        cand = np.empty(s1 - s0 + n_now + m_now, dtype=np.int64)
        nc = 0
        for j in range(s0, s1):
            cand[nc] = seed_a[j]
            nc += 1
        ia = np.empty(n_now, dtype=np.int64)
        iv = np.empty(n_now, dtype=np.int64)
        idf = np.empty(n_now, dtype=np.int64)
        x = 0
        for j in range(i0, i1):
            if in_i[j] <= r:
                ia[x] = in_a[j]
                iv[x] = in_v[j]
                idf[x] = in_d[j]
                x += 1
                if in_a[j] >= ms:
                    cand[nc] = in_a[j]
                    nc += 1
        oa = np.empty(m_now, dtype=np.int64)
        ov = np.empty(m_now, dtype=np.int64)
        odf = np.empty(m_now, dtype=np.int64)
        x = 0
        for j in range(o0, o1):
            if out_i[j] <= r:
                oa[x] = out_a[j]
                ov[x] = out_v[j]
                odf[x] = out_d[j]
                x += 1
                if out_a[j] >= ms:
                    cand[nc] = out_a[j]
                    nc += 1
        chain = np.unique(cand[:nc])
        vals = np.unique(np.concatenate((iv, ov)))
        L = len(vals)
        ilid = np.searchsorted(vals, iv)
        olid = np.searchsorted(vals, ov)
        iord = np.argsort(ia, kind="mergesort")
        oord = np.argsort(oa, kind="mergesort")
        cnt = np.zeros(L, dtype=np.int64)
        prev = np.zeros(L, dtype=np.int64)
        des = np.zeros(L, dtype=np.int64)
        p = 0
        q = 0
        for c in chain:
            if c >= bound_a:  # not complete yet: retire it when the frontier passes
                if npd + 1 > len(P):
                    P2 = np.empty((2 * len(P), 3), dtype=np.int64)
                    P2[:npd] = P[:npd]
                    P = P2
                P[npd, 0] = g
                P[npd, 1] = c
                P[npd, 2] = r
                npd += 1
                continue
            while p < n_now and ia[iord[p]] <= c:
                cnt[ilid[iord[p]]] += idf[iord[p]]
                p += 1
            des[:] = 0
            if mode == 0:
                for lid in range(L):
                    if cnt[lid] > 0:
                        des[lid] = 1
                        break
            elif mode == 1:
                for lid in range(L - 1, -1, -1):
                    if cnt[lid] > 0:
                        des[lid] = 1
                        break
            else:
                left = k
                for lid in range(L):
                    if left <= 0:
                        break
                    if cnt[lid] > 0:
                        take = min(cnt[lid], left)
                        des[lid] = take
                        left -= take
            delta = des - prev
            while q < m_now and oa[oord[q]] <= c:
                delta[olid[oord[q]]] -= odf[oord[q]]
                q += 1
            if ne + L > len(E):
                E2 = np.empty((max(2 * len(E), ne + L), 4), dtype=np.int64)
                E2[:ne] = E[:ne]
                E = E2
            for lid in range(L):
                if delta[lid] != 0:
                    E[ne, 0] = g
                    E[ne, 1] = vals[lid]
                    E[ne, 2] = c
                    E[ne, 3] = delta[lid]
                    ne += 1
            prev[:] = des
        if n_later:
            # Later iterations where this round's change is visible, at every candidate outer time.
            its = np.empty(n_later, dtype=np.int64)
            outer = np.empty(len(chain) + n_later, dtype=np.int64)
            outer[: len(chain)] = chain
            no = len(chain)
            x = 0
            for j in range(i0, i1):
                if in_i[j] > r:
                    its[x] = in_i[j]
                    x += 1
                    if in_a[j] >= ms:
                        outer[no] = in_a[j]
                        no += 1
            for j in range(o0, o1):
                if out_i[j] > r:
                    its[x] = out_i[j]
                    x += 1
                    if out_a[j] >= ms:
                        outer[no] = out_a[j]
                        no += 1
            its = np.unique(its)
            outer = np.unique(outer[:no])
            need = npd + len(its) * len(outer)
            if need > len(P):
                P2 = np.empty((max(2 * len(P), need), 3), dtype=np.int64)
                P2[:npd] = P[:npd]
                P = P2
            for a in outer:
                for i in its:
                    P[npd, 0] = g
                    P[npd, 1] = a
                    P[npd, 2] = i
                    npd += 1
    return E[:ne], P[:npd]
