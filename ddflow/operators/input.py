"""Input nodes: updates submitted by the user wait here until the frontier passes their times.

An input may be declared *nonnegative* (a table of records, a streaming
input): its accumulated count of every record stays >= 0 at every time.
A retraction of a record that is not there would make it a signed
multiset, which no SQL table is, and which can make a loop diverge (a
negative edge closing a cycle adds and removes the same facts forever).
So, when the frontier passes an update's time, the node checks it
against the input's own arrangement before any operator sees it:

    for every record r and complete time t:  sum(d for (r, s, d) applied, s <= t) >= 0

An update that would break it is not applied: with ``nonnegative="error"``
the run fails naming the input, the record and the time (nothing of that
update reaches any operator); with ``"dead-letter"`` it is dropped and
recorded in :attr:`InputNode.failed` with the reason, for the caller (the
streaming driver's dead letters).  Updates are taken in time order per
record, so a removal at t is checked against what was inserted before t.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.columnar import lookup_rows, segmented_cumsum
from ddflow.base.consolidate import consolidate, group_starts
from ddflow.base.kernels import row_hashes
from ddflow.base.updates import Updates
from ddflow.errors import DataflowError, UsageError
from ddflow.graph.node import Node
from ddflow.graph.scope import Scope
from ddflow.traces import Trace, TraceHandle

#: What a nonnegative input does with an update that would take a record's count below zero.
POLICIES = (None, "error", "dead-letter")


class InputNode(Node):
    """Holds submitted updates until the frontier passes their times, then emits them (checked, if nonnegative)."""

    def __init__(self, scope: Scope, name: str, nonnegative: str | None = None):
        super().__init__(scope, name, n_inputs=1)
        if nonnegative not in POLICIES:
            raise UsageError(f"input {name!r}: nonnegative is one of {POLICIES}, not {nonnegative!r}")
        self.nonnegative = nonnegative
        self.on_error = "dead-letter" if nonnegative == "dead-letter" else "fail"
        self.failed: list[dict] = []
        self.accumulated: Trace | None = None  # every applied update, compacted: the counts to check against
        self._handle: TraceHandle | None = None

    def step(self, bound: np.ndarray) -> None:
        """Emit the queued updates at times before ``bound``; keep the rest.  O(n) vectorized (+ a seek if checked)."""
        q = self.queues[0]
        if not q:
            return
        u = Updates.concat(q)
        ready = np.all(u.times < bound, axis=1)
        self.queues[0] = [u.take(np.flatnonzero(~ready))] if not ready.all() else []
        if ready.any():
            out = u.take(np.flatnonzero(ready))
            if self.nonnegative is not None and len(out):
                out = self._checked(out)
            if len(out):
                self.emit(out)

    def _checked(self, u: Updates) -> Updates:
        """``u`` without the updates that would take a record's count below zero (see the module docstring)."""
        u = consolidate(u, where=f"input {self.name!r}")  # sorted by (record, time)
        if self.accumulated is None:  # keyed by a hash of the whole record: a seek reads only these records
            self.accumulated = Trace(("i", *u.kinds), u.depth, name=f"{self.name}.accumulated")
            self._handle = self.accumulated.reader()
        starts = group_starts(list(u.cols))
        before = self._counts_before(u, starts)
        run = segmented_cumsum(u.diffs, starts) + np.repeat(before, np.diff(np.append(starts, len(u))))
        if (run >= 0).all():
            self._remember(u)
            return u
        keep = self._keep(u, starts, before, run)
        bad = np.flatnonzero(~keep)
        rows = u.take(bad).to_rows(self.ctx.interner)
        if self.nonnegative == "error":
            (record, time, diff) = rows[0]
            raise DataflowError(
                f"input {self.name!r}: the update {record!r} at time {time} with diff {diff} takes the record's "
                f"count below zero (it is not there to remove); {len(rows)} such update(s) in this run, none applied. "
                "Declare the input nonnegative='dead-letter' to drop them instead.")
        for (record, _, diff), time in zip(rows, u.times[bad].tolist()):
            self.failed.append({"operator": self.name, "record": record, "time": time, "diff": diff,
                                "error": "a retraction of a record that is not there (its count would go below "
                                         "zero)", "traceback": ""})
        kept = u.take(np.flatnonzero(keep))
        self._remember(kept)
        return kept

    def _remember(self, u: Updates) -> None:
        """Add applied updates to the accumulated counts (records prefixed by their hash)."""
        if len(u):
            keyed = Updates((row_hashes(list(u.cols)), *u.cols), u.times, u.diffs, ("i", *u.kinds))
            self.accumulated.insert_updates(consolidate(keyed))

    def _counts_before(self, u: Updates, starts: np.ndarray) -> np.ndarray:
        """Each record group's accumulated count over everything applied before this step."""
        if not len(self.accumulated):
            return np.zeros(len(starts), dtype=np.int64)
        first = [c[starts] for c in u.cols]
        hashes = row_hashes(first)
        _, hist = self.accumulated.seek(np.unique(hashes))
        if not len(hist):
            return np.zeros(len(starts), dtype=np.int64)
        tot = consolidate(Updates(hist.cols, np.zeros((len(hist), u.depth), dtype=np.int64), hist.diffs, hist.kinds))
        idx = lookup_rows(list(tot.cols), [hashes, *first])
        return np.where(idx >= 0, tot.diffs[np.maximum(idx, 0)] if len(tot) else 0, 0)

    @staticmethod
    def _keep(u: Updates, starts: np.ndarray, before: np.ndarray, run: np.ndarray) -> np.ndarray:
        """Which updates to apply: in each record's time order, drop a negative one the count cannot cover.

        Vectorized for records that never go negative; a record that does is
        walked in Python (its few updates in this step), since dropping one
        update changes the counts after it.
        """
        keep = np.ones(len(u), dtype=bool)
        ends = np.append(starts[1:], len(u))
        group = np.repeat(np.arange(len(starts)), ends - starts)
        for g in np.unique(group[run < 0]).tolist():
            count = int(before[g])
            for i in range(starts[g], ends[g]):
                d = int(u.diffs[i])
                if count + d < 0:
                    keep[i] = False
                else:
                    count += d
        return keep

    def trace_handles(self) -> list[TraceHandle]:
        return [self._handle] if self._handle is not None else []

    def held_columns(self):
        yield from super().held_columns()
        if self.accumulated is not None:
            yield from self.accumulated.object_columns()
