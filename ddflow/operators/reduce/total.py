"""The total-order tactic: count, distinct and threshold at depth 1, fully vectorized.

With totally ordered times the interesting times of a key are just its
change times, and a scalar logic's output follows from the record's count.
So per record group: a running sum of the new diffs over the group's new
times, starting from the count before this step (read from the input
trace), gives the count at each new time; the output at each time is the
logic at that count minus the logic at the count just before.

Cost: O(n log n) numpy work for n new updates, plus one trace seek of
their keys; no Python per key.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.columnar import lookup_rows, segmented_cumsum
from ddflow.base.consolidate import consolidate, group_starts
from ddflow.base.updates import Updates
from ddflow.graph.node import ready_mask
from ddflow.operators.reduce.logic import Logic
from ddflow.operators.reduce.tactic import ReduceTactic


class TotalTactic(ReduceTactic):
    """Scalar logics (count, distinct, threshold) at depth 1."""

    @classmethod
    def accepts(cls, logic: Logic, depth: int) -> bool:
        return logic.scalar and depth == 1

    def step(self, new: Updates | None, bound: np.ndarray) -> None:
        if new is not None:
            self.node.emit(self._changes(new, bound))

    def _changes(self, new: Updates, bound: np.ndarray) -> Updates:
        trace = self.node.source.trace
        logic = self.node.logic
        new = consolidate(new)  # sorted by (record, time): each group's times in order
        gcols = list(new.cols)
        starts = group_starts(gcols)
        # State before this step: the trace already holds the new updates, so subtract them.  Updates at
        # times not yet complete (a window's future retraction) wait in the trace too: left out.
        _, hist = trace.seek(np.unique(new.cols[0]))
        hist = hist.take(np.flatnonzero(ready_mask(hist.times, bound)))
        tot = consolidate(Updates(hist.cols, np.zeros((len(hist), 1), dtype=np.int64), hist.diffs, hist.kinds))
        gkeys = [c[starts] for c in gcols]
        idx = lookup_rows(list(tot.cols), gkeys)
        g_of = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(new))))
        new_cnt = np.add.reduceat(new.diffs, starts)
        tot_cnt = tot.diffs[np.maximum(idx, 0)] if len(tot) else np.zeros(len(idx), dtype=np.int64)
        old_cnt = np.where(idx >= 0, tot_cnt, 0) - new_cnt
        run_cnt = segmented_cumsum(new.diffs, starts) + old_cnt[g_of]
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
