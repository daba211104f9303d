"""The general reduce tactic: any logic, any time depth, key by key.  The reference.

For each key that changed, the output may change only at the input
change times closed under the least upper bound with the key's input and
output history (the "interesting times").  Complete ones are evaluated in
lexicographic order, a linear extension of the partial order: at each,
the input accumulated to that time goes through the logic, the output
accumulated to that time (history plus what this step already produced)
is subtracted, and the difference is emitted at that time.  Incomplete
ones are kept as pending work and revisited when the frontier passes
them, which is what keeps loops correct.

Cost: per changed key, O(|interesting times| x |key history|) Python
work.  Slow, but simple enough to trust: every faster tactic is tested
against it.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ddflow.base.columnar import group_by_index
from ddflow.base.consolidate import consolidate
from ddflow.base.lattice import lex_order
from ddflow.base.updates import Updates, from_rows
from ddflow.graph.node import ready_mask
from ddflow.operators.reduce.logic import Logic, _checked, _sort_key
from ddflow.operators.reduce.tactic import ReduceTactic


class GeneralTactic(ReduceTactic):
    """Any logic at any depth; pending (key, time) pairs wait for their rounds."""

    @classmethod
    def accepts(cls, logic: Logic, depth: int) -> bool:
        return True

    def __init__(self, node):
        super().__init__(node)
        self.pending_keys: np.ndarray | None = None
        self.pending_times = np.zeros((0, node.depth), dtype=np.int64)

    def work_times(self):
        yield self.pending_times

    def held_columns(self):
        """The output trace and, for object keys, the keys of pending (key, time) pairs.  O(batches)."""
        yield from super().held_columns()
        if self.pending_keys is not None and len(self.pending_keys) and self.node.source.trace.kinds[0] == "o":
            yield self.pending_keys

    def step(self, new: Updates | None, bound: np.ndarray) -> None:
        pk, pt = None, None
        if len(self.pending_times):
            ok = ready_mask(self.pending_times, bound)
            if ok.any():
                pk, pt = self.pending_keys[ok], self.pending_times[ok]
                self.pending_keys, self.pending_times = self.pending_keys[~ok], self.pending_times[~ok]
        if new is None and pk is None:
            return
        self._retire(new, pk, pt, bound)

    def _retire(self, new: Updates | None, pk: np.ndarray | None, pt: np.ndarray | None,
                bound: np.ndarray) -> None:
        logic = self.node.logic
        ctx = self.node.ctx
        skeys, stimes = seeds(new, pk, pt)
        keys = np.unique(skeys)
        trace = self.node.source.trace
        in_q, inp = trace.seek(keys)
        if self.out_trace is not None:
            out_q, outp = self.out_trace.seek(keys)
        else:
            out_q, outp = np.zeros(0, dtype=np.int64), None
        depth = stimes.shape[1]
        in_kinds = trace.kinds
        decode = not logic.raw
        # Values as Python tuples: internal numbers for built-ins, decoded for user functions.
        in_vals = _rows(inp.cols[1:], in_kinds[1:], ctx.interner, decode, len(inp))
        in_key_py = _rows((keys,), in_kinds[:1], ctx.interner, decode)
        out_vals = _rows(outp.cols[1:], outp.kinds[1:], ctx.interner, decode, len(outp)) if outp is not None else []

        in_o, in_b = group_by_index(in_q, len(keys))
        out_o, out_b = group_by_index(out_q, len(keys))
        s_o, s_b = group_by_index(np.searchsorted(keys, skeys), len(keys))

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
            cands = lub_closure(st, np.concatenate([it, ot])) if depth > 1 else np.unique(st, axis=0)
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
                    for v, m in _checked(logic.evaluate(key_py, inputs), self.node.name):
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
            self.add_pending(np.concatenate(pend_k), np.concatenate(pend_t))
        if not res_keys:
            return
        out = self._encode(res_keys, res_vals, np.array(res_times, dtype=np.int64).reshape(-1, depth),
                           np.array(res_diffs, dtype=np.int64), in_kinds)
        self.output(consolidate(out))

    def add_pending(self, keys: np.ndarray, times: np.ndarray) -> None:
        """Remember (key, time) pairs to retire when the frontier passes them (kept distinct)."""
        if self.pending_keys is not None:
            keys = np.concatenate([self.pending_keys, keys])
            times = np.concatenate([self.pending_times, times])
        self.pending_keys, self.pending_times = _unique_pairs(keys, times)

    def _encode(self, keys: list, vals: list[tuple], times: np.ndarray, diffs: np.ndarray,
                in_kinds: tuple[str, ...]) -> Updates:
        logic = self.node.logic
        kinds = logic.out_kinds(in_kinds) if logic.raw else None
        if kinds is not None:
            width = len(kinds)
            cols = [np.asarray(keys, dtype=np.float64 if kinds[0] == "f" else np.int64)]
            for j in range(1, width):
                dt = np.float64 if kinds[j] == "f" else np.int64
                cols.append(np.fromiter((v[j - 1] for v in vals), dtype=dt, count=len(vals)))
            return Updates(tuple(cols), times, diffs, kinds)
        rows = [(k, *v) for k, v in zip(keys, vals)]
        if self.node.kinds is not None and rows and len(rows[0]) == len(self.node.kinds):
            kinds = self.node.kinds
        return from_rows(rows, times, diffs, self.node.ctx.interner, kinds=kinds, depth=times.shape[1],
                         where=f"reduce {self.node.name!r}")


def lub_closure(seeds: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Least upper bounds of at least one seed with any subset of ``others``, lexicographically sorted."""
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


def seeds(new: Updates | None, pk: np.ndarray | None, pt: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The keys and times a step retires: the new input's and the pending ones that came due."""
    keys = [a for a in (new.cols[0] if new is not None else None, pk) if a is not None]
    times = [a for a in (new.times if new is not None else None, pt) if a is not None]
    return np.concatenate(keys), np.concatenate(times)


def _unique_pairs(keys: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    u = consolidate(Updates((keys,), times, np.ones(len(keys), dtype=np.int64), ("f" if keys.dtype.kind == "f" else "i",)))
    return u.cols[0], u.times
