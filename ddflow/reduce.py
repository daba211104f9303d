"""The reduce family: per-key reductions kept exactly up to date.

For each key that changed, the output may change only at the input
change times closed under lattice join with the key's input and output
history (the "interesting times").  Complete ones are evaluated in
lexicographic order, a linear extension of the partial order: at each,
the input accumulated to that time goes through the reduction, the
output accumulated to that time (history plus what this step already
produced) is subtracted, and the difference is emitted at that time.
Incomplete ones are kept as pending work and revisited when the
frontier passes them, which is what keeps loops correct.

With totally ordered (depth 1) times the closure is just the change
times, and count, distinct and threshold run fully vectorized:
per group a running sum over the new times, starting from the total
before this step.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Sequence

import numpy as np

from ddflow.arrange import ArrangeNode
from ddflow.errors import DataflowError
from ddflow.reduce_loop import scalar_loop
from ddflow.lattice import lex_order
from ddflow.node import Node, Scope, ready_mask
from ddflow.traces import Trace, TraceHandle
from ddflow.updates import Updates, consolidate, from_rows, group_starts, pack_keys

ReduceFn = Callable[[Any, list[tuple[tuple, int]]], list[tuple[tuple, int]]]


class Logic(ABC):
    """How a reduction turns a key's accumulated values into output values."""

    name = "reduce"
    #: Evaluate on internal column values (numbers, interned codes) rather than decoded Python values.
    raw = False
    #: Vectorized kernels apply: the group is the whole record and its output follows from its count.
    scalar = False

    @abstractmethod
    def evaluate(self, key: Any, vals: list[tuple[tuple, int]]) -> list[tuple[tuple, int]]:
        """The output values for one key's accumulated input values."""

    def out_kinds(self, in_kinds: tuple[str, ...]) -> tuple[str, ...] | None:
        return None


class UserLogic(Logic):
    def __init__(self, fn: ReduceFn):
        self.fn = fn
        self.name = getattr(fn, "__name__", "reduce")

    def evaluate(self, key, vals):
        return self.fn(key, vals)


class CountLogic(Logic):
    name, raw, scalar = "count", True, True

    def evaluate(self, key, vals):
        return [(v + (m,), 1) for v, m in vals]

    def out_kinds(self, in_kinds):
        return (*in_kinds, "i")

    def scalar_rows(self, cnt):
        return cnt, cnt != 0  # extra column value, multiplicity


class DistinctLogic(Logic):
    name, raw, scalar = "distinct", True, True

    def evaluate(self, key, vals):
        return [(v, 1) for v, m in vals if m > 0]

    def out_kinds(self, in_kinds):
        return in_kinds

    def scalar_rows(self, cnt):
        return None, (cnt > 0).astype(np.int64)


class ThresholdLogic(Logic):
    name, raw, scalar = "threshold", True, True

    def __init__(self, fn: Callable[[int], int]):
        self.fn = fn
        self._vfn = np.frompyfunc(lambda c: int(fn(int(c))), 1, 1)

    def evaluate(self, key, vals):
        out = []
        for v, m in vals:
            k = int(self.fn(m))
            if k:
                out.append((v, k))
        return out

    def out_kinds(self, in_kinds):
        return in_kinds

    def scalar_rows(self, cnt):
        mult = self._vfn(cnt).astype(np.int64) if len(cnt) else np.zeros(0, dtype=np.int64)
        mult[cnt == 0] = 0
        return None, mult


class SumLogic(Logic):
    # Reduce semantics (a key is present while any record has nonzero multiplicity) need
    # per-record state, so sum takes the general path rather than the (count, sum) kernels.
    name, raw, scalar = "sum", True, False

    def evaluate(self, key, vals):
        if not vals:
            return []
        return [((sum(v[0] * m for v, m in vals),), 1)]

    def out_kinds(self, in_kinds):
        return (in_kinds[0], "f" if in_kinds[1] == "f" else "i")


class ExtremeLogic(Logic):
    """min / max / top_k of the values of each key."""

    def __init__(self, kind: str, k: int = 1):
        self.kind, self.k = kind, k
        self.name = kind

    def evaluate(self, key, vals):
        live = [(v, m) for v, m in vals if m > 0]
        if not live:
            return []
        if self.kind == "min":
            return [(min(live)[0], 1)]
        if self.kind == "max":
            return [(max(live)[0], 1)]
        out, left = [], self.k
        for v, m in sorted(live):
            if left <= 0:
                break
            take = min(m, left)
            out.append((v, take))
            left -= take
        return out

    def out_kinds(self, in_kinds):
        return in_kinds


def join_closure(seeds: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Joins of at least one seed with any subset of ``others``, lexicographically sorted."""
    c = np.unique(seeds, axis=0)
    if seeds.shape[1] == 1 or not len(others):
        return c
    pool = np.unique(others, axis=0)
    while True:
        joined = np.maximum(c[:, None, :], pool[None, :, :]).reshape(-1, c.shape[1])
        nxt = np.unique(np.concatenate([c, joined]), axis=0)
        if len(nxt) == len(c):
            return c
        c = nxt


def lookup_rows(table: Sequence[np.ndarray], query: Sequence[np.ndarray]) -> np.ndarray:
    """For each query row, the index of the equal row in ``table`` (sorted, unique rows), or -1."""
    n_t = len(table[0])
    if not n_t:
        return np.full(len(query[0]), -1, dtype=np.int64)
    packed = pack_keys([np.concatenate([t, q]) for t, q in zip(table, query)])
    if packed is not None:
        tk, qk = packed[:n_t], packed[n_t:]
        pos = np.minimum(np.searchsorted(tk, qk), n_t - 1)
        return np.where(tk[pos] == qk, pos, -1)
    both = [np.concatenate([t, q]) for t, q in zip(table, query)]
    flag = np.concatenate([np.zeros(n_t, dtype=np.int64), np.ones(len(query[0]), dtype=np.int64)])
    order = np.lexsort([flag, *both[::-1]])
    starts = group_starts([c[order] for c in both])
    gid = np.cumsum(np.isin(np.arange(len(order)), starts)) - 1
    first = order[starts]  # table rows come first within a group
    res = np.full(len(query[0]), -1, dtype=np.int64)
    is_q = order >= n_t
    grp_first = first[gid[is_q]]
    res[order[is_q] - n_t] = np.where(grp_first < n_t, grp_first, -1)
    return res


class ReduceNode(Node):
    def __init__(self, scope: Scope, name: str, source: ArrangeNode, logic: Logic):
        super().__init__(scope, name)
        self.source = source
        self.logic = logic
        source.connect(self, 0)
        # total: depth-1 scalar kernel; loop: depth-2 scalar kernel (reduce_loop); general: per key.
        if logic.scalar and scope.depth == 1:
            self.mode = "total"
        elif logic.scalar and scope.depth == 2:
            self.mode = "loop"
        else:
            self.mode = "general"
        self.pending_rows: Updates | None = None  # loop mode: seeds for later rounds, by group
        self.out_trace: Trace | None = None
        self.out_handle: TraceHandle | None = None
        self.pending_keys: np.ndarray | None = None
        self.pending_times = np.zeros((0, scope.depth), dtype=np.int64)

    def trace_handles(self) -> list[TraceHandle]:
        return [self.out_handle] if self.out_handle is not None else []

    def work_times(self):
        yield from super().work_times()
        yield self.pending_times
        if self.pending_rows is not None:
            yield self.pending_rows.times

    def step(self, bound: np.ndarray) -> None:
        q = self.queues[0]
        new = Updates.concat(q) if q else None
        self.queues[0] = []
        if new is not None:
            ok = ready_mask(new.times, bound)
            if not ok.all():
                self.queues[0] = [new.take(np.flatnonzero(~ok))]
                new = new.take(np.flatnonzero(ok))
            if not len(new):
                new = None
        if self.mode == "loop":
            self._step_loop(new, bound)
            return
        pk, pt = None, None
        if len(self.pending_times):
            ok = ready_mask(self.pending_times, bound)
            if ok.any():
                pk, pt = self.pending_keys[ok], self.pending_times[ok]
                self.pending_keys, self.pending_times = self.pending_keys[~ok], self.pending_times[~ok]
        if new is None and pk is None:
            return
        if new is not None and new.arity < (2 if isinstance(self.logic, (SumLogic, ExtremeLogic)) else 1):
            raise ValueError(f"{self.logic.name} {self.name!r}: records need a key and a value field, got {new.arity} field(s)")
        if self.mode == "total":
            self.emit(self._step_total(new))
        else:
            self._step_general(new, pk, pt, bound)

    # -- depth 1, scalar reductions: fully vectorized ----------------------------------
    def _step_total(self, new: Updates) -> Updates:
        trace = self.source.trace
        logic = self.logic
        new = consolidate(new)  # sorted by (record, time): each group's times in order
        gcols = list(new.cols)
        starts = group_starts(gcols)
        # State before this step: the trace already holds the new updates, so subtract them.
        _, hist = trace.seek(np.unique(new.cols[0]))
        tot = consolidate(Updates(hist.cols, np.zeros((len(hist), 1), dtype=np.int64), hist.diffs, hist.kinds))
        gkeys = [c[starts] for c in gcols]
        idx = lookup_rows(list(tot.cols), gkeys)
        g_of = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(new))))
        new_cnt = np.add.reduceat(new.diffs, starts)
        tot_cnt = tot.diffs[np.maximum(idx, 0)] if len(tot) else np.zeros(len(idx), dtype=np.int64)
        old_cnt = np.where(idx >= 0, tot_cnt, 0) - new_cnt
        run_cnt = _segmented_cumsum(new.diffs, starts) + old_cnt[g_of]
        prev_cnt = run_cnt - new.diffs
        cur_val, cur_mult = logic.scalar_rows(run_cnt)
        prev_val, prev_mult = logic.scalar_rows(prev_cnt)
        base = tuple(new.cols)
        kinds = logic.out_kinds(new.kinds)
        parts = []
        for val, mult, sign in ((cur_val, cur_mult, 1), (prev_val, prev_mult, -1)):
            mult = np.asarray(mult, dtype=np.int64)
            sel = np.flatnonzero(mult != 0)
            cols = tuple(c[sel] for c in base) + ((np.asarray(val)[sel],) if val is not None else ())
            parts.append(Updates(cols, new.times[sel], sign * mult[sel], kinds))
        # A (group, time) whose value did not change cancels here.
        return consolidate(Updates.concat(parts))

    # -- depth 2 (a top-level loop), scalar reductions: vectorized ----------------------
    def _step_loop(self, new: Updates | None, bound: np.ndarray) -> None:
        logic = self.logic
        pend = None
        if self.pending_rows is not None:
            ok = ready_mask(self.pending_rows.times, bound)
            if ok.any():
                pend = self.pending_rows.take(np.flatnonzero(ok))
                rest = self.pending_rows.take(np.flatnonzero(~ok))
                self.pending_rows = rest if len(rest) else None
        if new is None and pend is None:
            return
        trace = self.source.trace
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
            raise DataflowError(f"reduce {self.name!r}: internal error, seeds at iterations other than the current round {r}")
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
            if self.out_trace is None:
                self.out_trace = Trace(emitted.kinds, 2, name=f"{self.name}.output")
                self.out_handle = self.out_trace.reader()
            self.out_trace.insert_updates(emitted, consolidated=True)
            self.emit(emitted)

    # -- any depth, any reduction ----------------------------------------------------------
    def _step_general(self, new: Updates | None, pk: np.ndarray | None, pt: np.ndarray | None,
                      bound: np.ndarray) -> None:
        logic = self.logic
        flow = self.flow
        seed_keys = [a for a in (new.cols[0] if new is not None else None, pk) if a is not None]
        seed_times = [a for a in (new.times if new is not None else None, pt) if a is not None]
        skeys = np.concatenate(seed_keys)
        stimes = np.concatenate(seed_times)
        keys = np.unique(skeys)
        trace = self.source.trace
        in_q, inp = trace.seek(keys)
        if self.out_trace is not None:
            out_q, outp = self.out_trace.seek(keys)
        else:
            out_q, outp = np.zeros(0, dtype=np.int64), None
        depth = stimes.shape[1]
        in_kinds = trace.kinds
        decode = not logic.raw
        # Values as Python tuples: internal numbers for built-ins, decoded for user functions.
        in_vals = _rows(inp.cols[1:], in_kinds[1:], flow.interner, decode, len(inp))
        in_key_py = _rows((keys,), in_kinds[:1], flow.interner, decode)
        out_vals = _rows(outp.cols[1:], outp.kinds[1:], flow.interner, decode, len(outp)) if outp is not None else []

        in_o, in_b = _group(in_q, len(keys))
        out_o, out_b = _group(out_q, len(keys))
        s_o, s_b = _group(np.searchsorted(keys, skeys), len(keys))

        res_keys: list[Any] = []
        res_vals: list[tuple] = []
        res_times: list[np.ndarray] = []
        res_diffs: list[int] = []
        pend_k: list[np.ndarray] = []
        pend_t: list[np.ndarray] = []
        for ki in range(len(keys)):
            rows = in_o[in_b[ki] : in_b[ki + 1]]
            orows = out_o[out_b[ki] : out_b[ki + 1]]
            st = stimes[s_o[s_b[ki] : s_b[ki + 1]]]
            it, idf = inp.times[rows], inp.diffs[rows]
            if outp is not None:
                ot, odf = outp.times[orows], outp.diffs[orows]
            else:
                ot, odf = np.zeros((0, depth), dtype=np.int64), np.zeros(0, dtype=np.int64)
            cands = join_closure(st, np.concatenate([it, ot])) if depth > 1 else np.unique(st, axis=0)
            ok = ready_mask(cands, bound)
            if not ok.all():
                later = cands[~ok]
                pend_k.append(np.full(len(later), keys[ki]))
                pend_t.append(later)
                cands = cands[ok]
            if not len(cands):
                continue
            cands = cands[lex_order(cands)]
            ivals = [in_vals[r] for r in rows]
            ovals = [out_vals[r] for r in orows]
            key_py = in_key_py[ki][0]
            produced: list[tuple[tuple, np.ndarray, int]] = []
            for t in cands:
                acc: dict[tuple, int] = {}
                for j in np.flatnonzero(np.all(it <= t, axis=1)):
                    v = ivals[j]
                    acc[v] = acc.get(v, 0) + int(idf[j])
                inputs = sorted(((v, m) for v, m in acc.items() if m), key=_sort_key)
                desired: dict[tuple, int] = {}
                if inputs:
                    for v, m in _checked(logic.evaluate(key_py, inputs), self.name):
                        if m:
                            desired[v] = desired.get(v, 0) + m
                for j in np.flatnonzero(np.all(ot <= t, axis=1)):
                    v = ovals[j]
                    desired[v] = desired.get(v, 0) - int(odf[j])
                for v, pt_, d in produced:
                    if np.all(pt_ <= t):
                        desired[v] = desired.get(v, 0) - d
                for v, d in desired.items():
                    if d:
                        produced.append((v, t, d))
            for v, t, d in produced:
                res_keys.append(key_py)
                res_vals.append(v)
                res_times.append(t)
                res_diffs.append(d)
        if pend_k:
            pk_all = np.concatenate([self.pending_keys, *pend_k]) if self.pending_keys is not None else np.concatenate(pend_k)
            pt_all = np.concatenate([self.pending_times, *pend_t])
            self.pending_keys, self.pending_times = _unique_pairs(pk_all, pt_all)
        if not res_keys:
            return
        out = self._encode(res_keys, res_vals, np.array(res_times, dtype=np.int64).reshape(-1, depth),
                           np.array(res_diffs, dtype=np.int64), in_kinds)
        out = consolidate(out)
        if self.out_trace is None:
            self.out_trace = Trace(out.kinds, depth, name=f"{self.name}.output")
            self.out_handle = self.out_trace.reader()
        elif out.kinds != self.out_trace.kinds:
            out = flow.coerce(out, self.out_trace.kinds, self.name)
        self.out_trace.insert_updates(out, consolidated=True)
        self.emit(out)

    def _encode(self, keys: list, vals: list[tuple], times: np.ndarray, diffs: np.ndarray,
                in_kinds: tuple[str, ...]) -> Updates:
        logic = self.logic
        kinds = logic.out_kinds(in_kinds) if logic.raw else None
        if kinds is not None:
            width = len(kinds)
            cols = [np.asarray(keys, dtype=np.float64 if kinds[0] == "f" else np.int64)]
            for j in range(1, width):
                dt = np.float64 if kinds[j] == "f" else np.int64
                cols.append(np.fromiter((v[j - 1] for v in vals), dtype=dt, count=len(vals)))
            return Updates(tuple(cols), times, diffs, kinds)
        rows = [(k, *v) for k, v in zip(keys, vals)]
        if self.kinds is not None and rows and len(rows[0]) == len(self.kinds):
            kinds = self.kinds
        return from_rows(rows, times, diffs, self.flow.interner, kinds=kinds, depth=times.shape[1],
                         where=f"reduce {self.name!r}")


def _checked(out: Any, name: str) -> list[tuple[tuple, int]]:
    """A reduction's output as ``[(value_tuple, int)]``, or a TypeError naming the reduce."""
    res = []
    for item in out:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], tuple)
                and isinstance(item[1], (int, np.integer)) and not isinstance(item[1], (bool, np.bool_))):
            raise TypeError(f"reduce {name!r}: the function must return [(value_tuple, int_multiplicity)], "
                            f"got the item {item!r}")
        res.append((item[0], int(item[1])))
    return res


def _sort_key(item: tuple[tuple, int]) -> tuple:
    try:
        return (0, item[0])
    except TypeError:
        return (1, repr(item[0]))


def _rows(cols: Sequence[np.ndarray], kinds: Sequence[str], interner, decode: bool, n: int = 0) -> list[tuple]:
    if not len(cols):
        return [()] * n  # records that are only a key: every value is the empty tuple
    lists = []
    for c, k in zip(cols, kinds):
        if decode and k == "o":
            lists.append(interner.decode(c).tolist())
        elif decode and k == "b":
            lists.append(c.astype(bool).tolist())
        else:
            lists.append(c.tolist())
    return list(zip(*lists))


def _group(idx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Order and bounds grouping positions by ``idx`` in ``range(n)``."""
    order = np.argsort(idx, kind="stable")
    bounds = np.searchsorted(idx[order], np.arange(n + 1))
    return order, bounds


def _segmented_cumsum(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    c = np.cumsum(x)
    before = np.concatenate(([0], c[starts[1:] - 1])) if len(starts) else np.zeros(0, dtype=x.dtype)
    return c - np.repeat(before, np.diff(np.append(starts, len(x))))


def _dedupe(u: Updates) -> Updates:
    """Distinct (row, time) pairs, each with diff 1."""
    u = consolidate(u.with_diffs(np.ones(len(u), dtype=np.int64)))
    return u.with_diffs(np.ones(len(u), dtype=np.int64))


def _unique_pairs(keys: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    u = consolidate(Updates((keys,), times, np.ones(len(keys), dtype=np.int64), ("f" if keys.dtype.kind == "f" else "i",)))
    return u.cols[0], u.times
