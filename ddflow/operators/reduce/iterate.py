"""The loop tactic: count, distinct and threshold at loop times ``(t, i)``, vectorized.

Inside a top-level loop, round ``r`` retires seeds at times ``(t, r)``.
For one group the complete times whose output may change form a chain
``(a_0, r) < (a_1, r) < ...``: the seeds' outer times and the outer
times of the group's history (input and output) at iterations ``<= r``
that lie after the earliest seed.  Along a chain the output to emit
telescopes: at ``(a_i, r)`` emit ``D_i - D_(i-1)`` (the desired output
now minus the desired output at the previous chain time) minus the
group's output history that first becomes visible at ``a_i``.  Then the
accumulated output at every chain time is exactly the desired one, with
no per-group Python.

Times at later iterations where the new input is also visible (the
group's history iterations ``> r``, crossed with its candidate outer
times) are returned as pending seeds for their rounds.  Over-approximating
that set is safe: evaluating a time whose output does not change emits
nothing.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.columnar import lookup_rows, ranges
from ddflow.base.consolidate import consolidate
from ddflow.base.updates import Updates
from ddflow.errors import DataflowError
from ddflow.graph.node import ready_mask
from ddflow.operators.reduce.logic import Logic
from ddflow.operators.reduce.tactic import ReduceTactic


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

    def step(self, new: Updates | None, bound: np.ndarray) -> None:
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
        trace = self.node.source.trace
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
        groups = consolidate(Updates(seeds_u.cols, np.zeros((len(seeds_u), 1), dtype=np.int64),
                                     np.ones(len(seeds_u), dtype=np.int64), gk)).cols
        seed_gid = lookup_rows(list(groups), list(seeds_u.cols))
        keys = np.unique(groups[0])
        _, hist = trace.seek(keys)
        in_gid = lookup_rows(list(groups), list(hist.cols[:ng]))
        keep = np.flatnonzero(in_gid >= 0)
        hist, in_gid = hist.take(keep), in_gid[keep]
        out_kinds = logic.out_kinds(trace.kinds)
        if self.out_trace is not None:
            _, oh = self.out_trace.seek(keys)
            out_gid = lookup_rows(list(groups), list(oh.cols[:ng]))
            keep = np.flatnonzero(out_gid >= 0)
            oh, out_gid = oh.take(keep), out_gid[keep]
        else:
            oh, out_gid = Updates.empty(out_kinds, 2), np.zeros(0, dtype=np.int64)
        emitted, p_gid, p_times = scalar_loop(list(groups), seed_gid, seeds_u.times[:, 0], in_gid, hist.times,
                                              hist.diffs, out_gid, oh, logic, out_kinds, r)
        if len(p_gid):
            p = Updates(tuple(g[p_gid] for g in groups), p_times, np.ones(len(p_gid), dtype=np.int64), gk)
            allp = Updates.concat([self.pending_rows, p]) if self.pending_rows is not None else p
            self.pending_rows = _dedupe(allp)
        if len(emitted):
            self.output(emitted)


def _dedupe(u: Updates) -> Updates:
    """Distinct (row, time) pairs, each with diff 1."""
    u = consolidate(u.with_diffs(np.ones(len(u), dtype=np.int64)))
    return u.with_diffs(np.ones(len(u), dtype=np.int64))


def _rank(*arrays: np.ndarray) -> list[np.ndarray]:
    """Dense ranks of values across several arrays (order preserving), one array per input."""
    allv = np.concatenate(arrays)
    uniq, inv = np.unique(allv, return_inverse=True)
    out, pos = [], 0
    for a in arrays:
        out.append(inv[pos : pos + len(a)].astype(np.int64))
        pos += len(a)
    return out


def _segment_sum_at(p_gid, p_t, p_val, q_gid, q_t):
    """For each query (g, a): sum of point values with the same g and t <= a."""
    if not len(q_gid):
        return np.zeros(0, dtype=p_val.dtype if len(p_val) else np.int64)
    if not len(p_gid):
        return np.zeros(len(q_gid), dtype=p_val.dtype)
    pr, qr = _rank(p_t, q_t)
    width = int(max(pr.max(initial=0), qr.max(initial=0))) + 1
    pk = p_gid * width + pr
    qk = q_gid * width + qr
    order = np.argsort(pk, kind="stable")
    pk_s = pk[order]
    csum = np.cumsum(p_val[order])
    # Last point with key <= query key within the same group.
    idx = np.searchsorted(pk_s, qk, side="right") - 1
    gstart = np.searchsorted(pk_s, q_gid * width, side="left") - 1
    base = np.where(gstart >= 0, csum[np.maximum(gstart, 0)], 0)
    val = np.where(idx >= 0, csum[np.maximum(idx, 0)], 0)
    return np.where(idx > gstart, val - base, 0)


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
    """Output updates for round ``r`` and pending (group id, time) pairs.

    ``groups``: the columns of the distinct seeded groups (sorted unique rows);
    ``seed_*``: seeds by group id and outer time (all at iteration ``r``);
    ``in_*``: the groups' input history; ``out``/``out_gid``: their output history.
    """
    n_groups = len(groups[0])
    out_times = out.times
    # -- candidate outer times: the chain at iteration r --------------------------------
    min_seed = np.full(n_groups, np.iinfo(np.int64).max)
    np.minimum.at(min_seed, seed_gid, seed_t)
    in_now = in_times[:, 1] <= r
    out_now = out_times[:, 1] <= r
    cg = [seed_gid]
    ct = [seed_t]
    for gid, times, now in ((in_gid, in_times, in_now), (out_gid, out_times, out_now)):
        sel = now & (times[:, 0] >= min_seed[gid])
        cg.append(gid[sel])
        ct.append(times[sel, 0])
    cand = consolidate(Updates((np.concatenate(cg), np.concatenate(ct)), np.zeros((sum(map(len, cg)), 1), dtype=np.int64),
                               np.ones(sum(map(len, cg)), dtype=np.int64), ("i", "i")))
    c_gid, c_a = cand.cols
    # -- accumulated input at each chain time --------------------------------------------
    acc = _segment_sum_at(in_gid[in_now], in_times[in_now, 0], in_diffs[in_now], c_gid, c_a)
    val, mult = logic.scalar_rows(acc)
    mult = np.asarray(mult, dtype=np.int64)
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
    # - output history first visible at a_i: each update goes to the first chain time at or after it.
    if out_now.any():
        o_idx = np.flatnonzero(out_now)
        og, ot = out_gid[o_idx], out_times[o_idx, 0]
        cr, orr = _rank(c_a, ot)
        width = int(max(cr.max(initial=0), orr.max(initial=0))) + 1
        ck = c_gid * width + cr  # sorted: cand is sorted by (gid, a)
        ok_ = og * width + orr
        pos = np.searchsorted(ck, ok_, side="left")
        hit = (pos < len(ck))
        hit[hit] &= c_gid[pos[hit]] == og[hit]
        o_idx, pos = o_idx[hit], pos[hit]
        parts.append(Updates(tuple(c[o_idx] for c in out.cols), times_now[pos], -out.diffs[o_idx], kinds))
    emitted = consolidate(Updates.concat(parts))
    # -- pending: later iterations where this round's change is visible --------------------
    later_g = np.concatenate([in_gid[~in_now], out_gid[~out_now]])
    later_i = np.concatenate([in_times[~in_now, 1], out_times[~out_now, 1]])
    if len(later_g):
        pend = consolidate(Updates((later_g, later_i), np.zeros((len(later_g), 1), dtype=np.int64),
                                   np.ones(len(later_g), dtype=np.int64), ("i", "i")))
        # Outer times for each group: the chain's outer times plus history after the first seed.
        ag = [c_gid]
        at = [c_a]
        for gid, times in ((in_gid, in_times), (out_gid, out_times)):
            s = ~(times[:, 1] <= r) & (times[:, 0] >= min_seed[gid])
            ag.append(gid[s])
            at.append(times[s, 0])
        outs = consolidate(Updates((np.concatenate(ag), np.concatenate(at)), np.zeros((sum(map(len, ag)), 1), dtype=np.int64),
                                   np.ones(sum(map(len, ag)), dtype=np.int64), ("i", "i")))
        pg, pi = pend.cols
        og, oa = outs.cols
        # Cross product within each group.
        o_start = np.searchsorted(og, np.arange(n_groups), side="left")
        o_end = np.searchsorted(og, np.arange(n_groups), side="right")
        cnt = (o_end - o_start)[pg]
        rep_g = np.repeat(pg, cnt)
        rep_i = np.repeat(pi, cnt)
        idx = ranges(o_start[pg], o_end[pg])
        p_gid = rep_g
        p_times = np.column_stack([oa[idx], rep_i])
    else:
        p_gid = np.zeros(0, dtype=np.int64)
        p_times = np.zeros((0, 2), dtype=np.int64)
    return emitted, p_gid, p_times


def _rows(base, val, sel, times, mult, kinds) -> Updates:
    cols = tuple(c[sel] for c in base)
    if val is not None:
        cols = cols + (np.asarray(val)[sel],)
    return Updates(cols, times, mult, kinds)
