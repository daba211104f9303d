"""The loop tactic: count, distinct and threshold at loop times ``(t, i)``, one compiled walk per step.

Inside a top-level loop, round ``r`` retires seeds at times ``(t, r)``:
the new ones and the pending ones now complete (:func:`loop_seeds`).
Each seeded group's output is telescoped along its chain of times by
:func:`~.chain.chain_walk` (see :mod:`.chain` for the math), with no
per-group Python.

Times at later iterations where the new input is also visible (the
group's history iterations ``> r``, crossed with its candidate outer
times) must be evaluated too.  The least of those iterations is returned
as pending seeds for its round (:func:`~.chain.later_rounds`) and merged
into the waiting set by :func:`loop_pending`; that round's walk pends
the next one.  Over-approximating the set is safe: evaluating a time
whose output does not change emits nothing.  A distinct skips the later
iterations where its output would not change (:func:`~.chain.first_change`).
"""
from __future__ import annotations

import numpy as np

from ddflow.base.columnar import frozen, lookup_rows, time_column
from ddflow.base.consolidate import consolidate
from ddflow.base.kernels import key_matrix, lex_order, rows_differ
from ddflow.base.native import kernel
from ddflow.base.updates import Updates
from ddflow.errors import DataflowError, SchemaError
from ddflow.graph.node import any_complete, complete_row, object_columns, ready_mask, ready_split
from ddflow.operators.reduce.chain import _assemble, chain_output, chain_walk, overflow_message, \
    scalar_loop
from ddflow.operators.reduce.logic import SCALAR_COUNT, SCALAR_DISTINCT, Logic
from ddflow.operators.reduce.tactic import BAD_ROUND, DONE, OVERFLOW, ReduceTactic
from ddflow.traces.arena import write_trie
from ddflow.traces.layout import build_trie, histories


class LoopTactic(ReduceTactic):
    """Scalar logics inside a top-level loop (depth 2); seeds for later rounds wait by group."""

    takes_unready = True

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
        """Everything dequeued arrives here, complete or not: seeds for later rounds wait in ``pending_rows``."""
        trace = self.node.source.trace
        out_kinds = self.node.logic.out_kinds(trace.kinds)
        if trace.ints and (self.out_trace is None or self.out_trace.ints):
            self._step_ints(new, bound, trace, out_kinds)
        else:
            self._step_read(self.node.ready_part(new, bound), bound, trace, out_kinds)

    def _step_ints(self, new: Updates | None, bound: np.ndarray, trace, out_kinds: tuple[str, ...]) -> None:
        """The step over int64 traces: for count and distinct one compiled call (:func:`loop_step`).

        Other logics (threshold's user function) take :func:`loop_step_by_parts`,
        the same kernels called one by one with the logic evaluated in
        between.  Either way the output's trie is built once, for the
        output trace, by the call that made it; :func:`loop_step` writes an
        output of a few updates straight into the trace's arena.
        """
        ng = len(trace.kinds)
        pend = self.pending_rows
        if new is None and (pend is None or not any_complete(pend.times, bound)):
            return
        nk, nt = (key_matrix(new.cols), new.times) if new is not None else (_no_rows(ng), _no_rows(2))
        if nt.flags.writeable:  # a batch's times are read-only, no rows or a queue's concatenation not: one signature
            nt, = frozen(nt)
        pk, pt = self.pending_keys(ng)
        logic = self.node.logic
        if logic.scalar_code is not None:
            buf, used, T, at, small = self.out_target(out_kinds)  # before the tables are read: it may merge
            in_T, out_T = trace.spine.table().matrix, self.out_table(len(out_kinds))
            cols, times, diffs, keys, key_offs, V, val_offs, row, later, later_t, status, now_used = loop_step(
                nk, nt, pk, pt, bound, in_T, out_T, len(out_kinds), logic.scalar_code, buf, used, T, at, small)
            self.finish(cols, times, diffs, later, later_t, status, now_used, used, bound, trace.kinds, out_kinds,
                        (keys, V, key_offs, val_offs, row))
            return
        in_T, out_T = trace.spine.table().matrix, self.out_table(len(out_kinds))
        emitted, later, later_t, status = loop_step_by_parts(nk, nt, pk, pt, bound, in_T, out_T, logic, out_kinds)
        self._raise(status, bound)
        self._pend(later, later_t, trace.kinds)
        if len(emitted):
            self.output(emitted)

    def pending_keys(self, ng: int) -> tuple[np.ndarray, np.ndarray]:
        """The pending seeds as :func:`loop_step` takes them: their rows' ``(n, ng)`` matrix and their times."""
        pend = self.pending_rows
        return (key_matrix(pend.cols), pend.times) if pend is not None else (_no_rows(ng), _no_rows(2))

    def finish(self, cols: np.ndarray, times: np.ndarray, diffs: np.ndarray, later: np.ndarray, later_t: np.ndarray,
               status: int, now_used: int, used: int, bound: np.ndarray, in_kinds: tuple[str, ...],
               out_kinds: tuple[str, ...], trie: tuple | None = None) -> None:
        """Keep what a :func:`loop_step` returned: raise its error, keep its seeds, record and emit its output.

        ``used``: the words of the output's arena before the call (the
        output went there when ``now_used`` differs); ``trie``: the
        output's trie when the call built it (else it is built here).
        """
        self._raise(status, bound)
        self._pend(later, later_t, in_kinds)
        emitted = Updates.unchecked(tuple(cols), times, diffs, out_kinds)
        if now_used != used:
            self.output_written(emitted, now_used)
        elif len(emitted):
            self.output(emitted, trie)

    def _pend(self, later: np.ndarray, later_t: np.ndarray, kinds: tuple[str, ...]) -> None:
        self.pending_rows = Updates.unchecked(tuple(later), later_t, seed_diffs(len(later_t)), kinds) \
            if len(later_t) else None

    def _raise(self, status: int, bound: np.ndarray) -> None:
        """The error a step's ``status`` (:data:`BAD_ROUND`, :data:`OVERFLOW`) stands for, if any."""
        if status == BAD_ROUND:
            raise DataflowError(f"reduce {self.node.name!r}: internal error, seeds at iterations other than "
                                f"the current round {int(bound[-1]) - 1}")
        if status == OVERFLOW:
            raise SchemaError(overflow_message(self.node.logic))

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
            p = Updates(tuple(g[p_gid] for g in groups), p_times, seed_diffs(len(p_gid)), gk)
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


def _no_rows(width: int) -> np.ndarray:
    return np.zeros((0, width), dtype=np.int64)


_ONES = np.ones(1 << 12, dtype=np.int64)
_ONES.setflags(write=False)


def seed_diffs(n: int) -> np.ndarray:
    """The diffs of ``n`` pending seeds: all 1, and never read (a seed says only which group, when).

    A read-only view of one shared array up to 4,096 seeds (``np.ones``
    costs a microsecond, a fifth of a small loop step's Python), a new
    array above.  O(1), O(n) above.

    >>> seed_diffs(3).tolist(), seed_diffs(3).flags.writeable
    ([1, 1, 1], False)
    """
    return _ONES[:n] if n <= len(_ONES) else np.ones(n, dtype=np.int64)


def loop_step_by_parts(nk, nt, pk, pt, bound, in_T, out_T, logic, out_kinds):
    """:func:`loop_step` with the logic evaluated in Python between its kernels: for any scalar logic.

    The reference :func:`loop_step` is tested against, and the path of
    threshold (a user function) and of logics with float output.
    Returns ``(emitted, later cols, later times, status)``.  Cost: six
    kernel calls and the logic's vectorized evaluation.
    """
    ok, due = ready_split(nt, bound)
    if due < len(nt):  # new seeds of later rounds wait with the pending ones
        pk, pt = np.concatenate([pk, nk[~ok]]), np.concatenate([pt, nt[~ok]])
        nk, nt = nk[ok], nt[ok]
    r = int(bound[-1]) - 1
    nt, = frozen(nt)  # read-only, as a new batch's times are: one signature
    gmat, seed_gid, seed_t, waiting, bad = loop_seeds(nk, nt, pk, pt, bound)
    if bad:
        return None, None, None, BAD_ROUND
    ng, arity = gmat.shape[0], len(out_kinds)
    in_gid, _, in_times, in_diffs = histories(in_T, gmat, ng, 2)
    out_gid, o_cols, o_times, o_diffs = histories(out_T, gmat, arity, 2)
    c_gid, c_a, acc, out_pos, P, overflow = chain_walk(r, seed_gid, seed_t, in_gid, time_column(in_times, 0),
                                                      time_column(in_times, 1), in_diffs, out_gid,
                                                      time_column(o_times, 0), time_column(o_times, 1), o_diffs,
                                                      logic.scalar_code == SCALAR_DISTINCT)
    if overflow:
        return None, None, None, OVERFLOW
    val, mult = logic.scalar_rows(acc)
    mult = np.asarray(mult, dtype=np.int64)
    if val is not None and np.asarray(val).dtype != np.int64:
        # A logic with float output: the general assembly.
        out = Updates(tuple(o_cols), o_times, o_diffs, out_kinds)
        emitted = _assemble(list(gmat), c_gid, c_a, mult, val, out, out_pos, None, out_kinds, r)
    else:
        v = np.zeros(0, dtype=np.int64) if val is None else np.asarray(val)
        cols, times, diffs, overflow = chain_output(r, c_gid, c_a, mult, v, val is not None, gmat, o_cols, o_diffs,
                                                    out_pos)
        if overflow:
            return None, None, None, OVERFLOW
        emitted = Updates.unchecked(tuple(cols), times, diffs, out_kinds)
    later, later_t = loop_pending(pk, pt, waiting, gmat, P)
    return emitted, later, later_t, DONE


@kernel("operators.reduce")
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
        if complete_row(pt, i, bound):
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
        if i == 0 or rows_differ(M, x, firsts[G - 1], m):
            firsts[G] = x
            G += 1
        gid[i] = G - 1
        t[i] = M[x, m]
    groups = np.empty((m, G), dtype=np.int64)
    for g in range(G):
        for c in range(m):
            groups[c, g] = M[firsts[g], c]
    return groups, gid, t, waiting, bad


@kernel("operators.reduce")
def loop_pending(pk, pt, waiting, groups, P):
    """The seeds for later rounds: the pending ones still ``waiting`` and the new ones ``P``, distinct and sorted.

    ``P`` rows are ``(group, outer time, iteration)`` with groups columns
    of ``groups``.  Returns ``(cols, times)``: an ``(m, n)`` matrix of the
    seeds' group columns and their ``(n, 2)`` times, sorted by (group,
    time) with repeats dropped.  Both parts come sorted (the pending set
    is this kernel's last output; :func:`chain_walk` lists ``P`` by group,
    then time, and ``groups`` are sorted rows), so :func:`lex_order` (a
    natural merge sort) merges two runs: O(p) for p seeds; input out of
    order costs O(p log p).
    """
    m = groups.shape[0]
    nw = 0
    for i in range(len(waiting)):
        if waiting[i]:
            nw += 1
    n = nw + P.shape[0]
    M = np.empty((n, m + 2), dtype=np.int64)
    x = 0
    for i in range(len(waiting)):
        if waiting[i]:
            for c in range(m):
                M[x, c] = pk[i, c]
            M[x, m] = pt[i, 0]
            M[x, m + 1] = pt[i, 1]
            x += 1
    for j in range(P.shape[0]):
        for c in range(m):
            M[nw + j, c] = groups[c, P[j, 0]]
        M[nw + j, m] = P[j, 1]
        M[nw + j, m + 1] = P[j, 2]
    order = lex_order(M)
    cols = np.empty((m, n), dtype=np.int64)
    times = np.empty((n, 2), dtype=np.int64)
    out = 0
    for x in range(n):
        r = order[x]
        if out > 0 and not rows_differ(M, r, order[x - 1], m + 2):
            continue
        for c in range(m):
            cols[c, out] = M[r, c]
        times[out, 0] = M[r, m]
        times[out, 1] = M[r, m + 1]
        out += 1
    return cols[:, :out], times[:out]


@kernel("operators.reduce")
def loop_step(nk, nt, pk, pt, bound, in_T, out_T, out_arity, code, buf, used, T, at, small):
    """A loop tactic's step for count (``code`` ``SCALAR_COUNT``) or distinct (``SCALAR_DISTINCT``), one compiled call.

    ``nk``/``nt``: the new input's rows and times, complete under
    ``bound`` or not; ``pk``/``pt``: the pending seeds; ``in_T``/``out_T``:
    the input and output traces' tables.  What :func:`loop_step_by_parts`
    does, with the logic evaluated here, and the output's batch built for
    the output trace: an output of up to ``small`` updates is written into
    its arena (:func:`traces.arena.write_trie` at ``buf``, ``used``,
    ``T``, ``at``: :meth:`traces.arena.Arena.target`), a larger one built
    as a trie (:func:`traces.layout.build_trie`).  Returns ``(cols, times,
    diffs, keys, key_offs, V, val_offs, row, later, later_t, status,
    used)``: the output (columns as rows of ``cols``), its trie levels and
    table row (empty when it went to the arena, which ``used`` then says:
    the words now used there), the seeds for later rounds (sorted,
    distinct), and :data:`DONE`, :data:`BAD_ROUND` or :data:`OVERFLOW`
    (the rest is then empty).  Cost: as the kernels it calls, O(s log s +
    chain + history).
    """
    ng = nk.shape[1]
    r = bound[len(bound) - 1] - 1
    nn, npd = nk.shape[0], pk.shape[0]
    ready = np.empty(nn, dtype=np.bool_)
    nr = 0
    for i in range(nn):
        ready[i] = complete_row(nt, i, bound)
        nr += ready[i]
    # New seeds of later rounds wait with the pending ones (after them, so a sorted pending set stays one run).
    rk, rt = np.empty((nr, ng), dtype=np.int64), np.empty((nr, 2), dtype=np.int64)
    wk, wt = np.empty((npd + nn - nr, ng), dtype=np.int64), np.empty((npd + nn - nr, 2), dtype=np.int64)
    for i in range(npd):
        for c in range(ng):
            wk[i, c] = pk[i, c]
        wt[i, 0], wt[i, 1] = pt[i, 0], pt[i, 1]
    x, y = 0, npd
    for i in range(nn):
        if ready[i]:
            for c in range(ng):
                rk[x, c] = nk[i, c]
            rt[x, 0], rt[x, 1] = nt[i, 0], nt[i, 1]
            x += 1
        else:
            for c in range(ng):
                wk[y, c] = nk[i, c]
            wt[y, 0], wt[y, 1] = nt[i, 0], nt[i, 1]
            y += 1
    empty1, empty2 = np.empty(0, dtype=np.int64), np.empty((0, 2), dtype=np.int64)
    no_offs, no_row = np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int64)
    no_cols, no_vals, no_later = np.empty((out_arity, 0), dtype=np.int64), np.empty((out_arity - 1, 0), dtype=np.int64), \
        np.empty((ng, 0), dtype=np.int64)
    gmat, seed_gid, seed_t, waiting, bad = loop_seeds(rk, rt, wk, wt, bound)
    if bad:
        return no_cols, empty2, empty1, empty1, no_offs, no_vals, no_offs, no_row, no_later, empty2, BAD_ROUND, used
    in_gid, _, in_times, in_diffs = histories(in_T, gmat, ng, 2)
    out_gid, o_cols, o_times, o_diffs = histories(out_T, gmat, out_arity, 2)
    # The time columns contiguous, as chain_walk's native twin takes them (the plain step calls it, native or not).
    in_a, in_i = np.ascontiguousarray(in_times[:, 0]), np.ascontiguousarray(in_times[:, 1])
    out_a, out_i = np.ascontiguousarray(o_times[:, 0]), np.ascontiguousarray(o_times[:, 1])
    c_gid, c_a, acc, out_pos, P, overflow = chain_walk(r, seed_gid, seed_t, in_gid, in_a, in_i, in_diffs, out_gid,
                                                      out_a, out_i, o_diffs, code == SCALAR_DISTINCT)
    if overflow:
        return no_cols, empty2, empty1, empty1, no_offs, no_vals, no_offs, no_row, no_later, empty2, OVERFLOW, used
    count = code == SCALAR_COUNT
    mult = np.empty(len(acc), dtype=np.int64)
    for i in range(len(acc)):  # CountLogic.scalar_rows and DistinctLogic.scalar_rows
        mult[i] = (acc[i] != 0) if count else (acc[i] > 0)
    cols, times, diffs, overflow = chain_output(r, c_gid, c_a, mult, acc if count else empty1, count, gmat, o_cols,
                                                o_diffs, out_pos)
    if overflow:
        return no_cols, empty2, empty1, empty1, no_offs, no_vals, no_offs, no_row, no_later, empty2, OVERFLOW, used
    later, later_t = loop_pending(wk, wt, waiting, gmat, P)
    if len(diffs) == 0:
        return cols, times, diffs, empty1, no_offs, no_vals, no_offs, no_row, later, later_t, DONE, used
    if len(diffs) <= small:
        return cols, times, diffs, empty1, no_offs, no_vals, no_offs, no_row, later, later_t, DONE, \
            write_trie(cols, times, diffs, buf, used, T, at)
    keys, key_offs, V, val_offs, row = build_trie(cols.T, times, diffs)
    return cols, times, diffs, keys, key_offs, V, val_offs, row, later, later_t, DONE, used


def _dedupe(u: Updates) -> Updates:
    """Distinct (row, time) pairs, each with diff 1."""
    u = consolidate(u.with_diffs(np.ones(len(u), dtype=np.int64)))
    return u.with_diffs(np.ones(len(u), dtype=np.int64))
