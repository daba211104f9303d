"""Input nodes: updates submitted by the user wait here until the frontier passes their times.

(:class:`ConstantNode` is the other source: fixed rows, no handle, emitted once.)

An input may be declared *nonnegative* (a table of records, a streaming
input): its accumulated count of every record stays >= 0 at every time.
A retraction of a record that is not there would make it a signed
multiset, which no SQL table is, and which can make a loop diverge (a
negative edge closing a cycle adds and removes the same facts forever).
So, when the frontier passes an update's time, the node checks it
against the input's own arrangement before any operator sees it:

    for every record r and complete time t:  sum(d for (r, s, d) applied, s <= t) >= 0

Likewise a record whose count would leave int64 in a step: all of that
step's updates of the record are dropped (an exact accounting of which
one "caused" it does not exist; the batch's contribution does).

An update that would break either is not applied: with ``nonnegative="error"``
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
from ddflow.base.kernels import key_matrix, row_hashes
from ddflow.base.updates import Updates
from ddflow.errors import DataflowError, SchemaError, UsageError
from ddflow.graph.node import Node, object_columns, ready_mask, ready_split
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
        #: Every update of a record is at one time (its event time is a field of it): a record from a finished
        #: step can never change again, so the check keeps nothing between steps (bounded state).
        self.one_time_per_record = False

    def step(self, bound: np.ndarray) -> None:
        """Emit the queued updates at times before ``bound``; keep the rest.  O(n) vectorized (+ a seek if checked)."""
        q = self.queues[0]
        if not q:
            return
        u = Updates.concat(q)
        ready, due = ready_split(u.times, bound)
        if due == len(u):  # the usual step: everything submitted is before the frontier
            self.queues[0], out = [], u
        else:
            self.queues[0] = [u.take(np.flatnonzero(~ready))]
            out = u.take(np.flatnonzero(ready)) if due else None
        if out is not None:
            if self.nonnegative is not None and len(out):
                out = self._checked(out)
                if self.one_time_per_record:
                    self.accumulated = self._handle = None
            if len(out):
                self.emit(out)

    def _checked(self, u: Updates) -> Updates:
        """``u`` without the updates that would take a record's count below zero or past int64 (module docstring)."""
        if self.accumulated is None:  # keyed by a hash of the whole record: a seek reads only these records
            self.accumulated = Trace(("i", *u.kinds), u.depth, name=f"{self.name}.accumulated")
            self._handle = self.accumulated.reader()
        try:
            c = consolidate(u, where=f"input {self.name!r}")  # sorted by (record, time)
        except SchemaError:  # a record's diffs at one time add up past int64
            c = None
        if c is not None:
            h, starts, before = self._running(c)
            reach = segmented_cumsum(np.abs(c.diffs).astype(np.float64), starts) + np.abs(before).astype(np.float64)
        if c is None or (reach >= 2.0 ** 62).any():  # a count may leave int64: find the records exactly
            u = self._without_overflow(u)
            c = consolidate(u, where=f"input {self.name!r}")
            h, starts, before = self._running(c)
        if (segmented_cumsum(c.diffs, starts) + before >= 0).all():
            self._remember(c, h)
            return u  # as submitted: one update per message, in order (dead letters downstream stay per message)
        # Some removal cannot be covered: decide update by update, in each record's time order.
        order = np.lexsort(key_matrix(list(u.cols), u.times).T[::-1])
        srt = u.take(order)
        _, starts, before = self._running(srt)
        keep = np.empty(len(u), dtype=bool)
        keep[order] = self._keep(srt, starts, before[starts], segmented_cumsum(srt.diffs, starts) + before)
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

    def _without_overflow(self, u: Updates) -> Updates:
        """``u`` without every update of a record whose count would leave int64 in this step (Python ints, exact).

        The whole step's contribution of such a record is dropped, so what
        is applied never depends on which of its updates came first.  Rare:
        only called when a count may come near 2**62.
        """
        rows = u.to_rows(self.ctx.interner)
        by_record: dict = {}
        for i, (record, time, diff) in enumerate(rows):
            by_record.setdefault(record, []).append((time, int(diff), i))
        recs = list(by_record)
        reps = [c[[by_record[r][0][2] for r in recs]] for c in u.cols]
        before = self._counts_of(reps, row_hashes(reps)) if recs else np.zeros(0, dtype=np.int64)
        drop = np.zeros(len(u), dtype=bool)
        lo, hi = -(1 << 63), (1 << 63) - 1
        for r, b in zip(recs, before.tolist()):
            count = b
            for _, d, _ in sorted(by_record[r], key=lambda x: x[0]):
                count += d
                if not lo <= count <= hi:
                    break
            else:
                continue
            for _, _, i in by_record[r]:
                drop[i] = True
        bad = np.flatnonzero(drop)
        if self.nonnegative == "error" and len(bad):
            record, time, diff = rows[bad[0]]
            raise DataflowError(f"input {self.name!r}: the updates of {record!r} in this run add up past int64 "
                                f"(one: time {time}, diff {diff}); none applied. Declare the input "
                                "nonnegative='dead-letter' to drop such a record's updates instead.")
        for i in bad.tolist():
            record, _, diff = rows[i]
            self.failed.append({"operator": self.name, "record": record, "time": u.times[i].tolist(), "diff": diff,
                                "error": "the record's diffs in this batch add up past int64 (all of its updates "
                                         "in the batch are dropped)", "traceback": ""})
        return u.take(np.flatnonzero(~drop))

    def _running(self, u: Updates) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For updates sorted by record: each row's record hash, the record groups' starts, and each row's
        record count before this step (what the running sums start from)."""
        cols = list(u.cols)
        h = row_hashes(cols)
        starts = group_starts(cols)
        before = self._counts_of([c[starts] for c in cols], h[starts])
        return h, starts, np.repeat(before, np.diff(np.append(starts, len(u))))

    def _remember(self, u: Updates, hashes: np.ndarray | None = None) -> None:
        """Add applied updates to the accumulated counts (records prefixed by their ``hashes``, computed if None)."""
        if len(u):
            h = row_hashes(list(u.cols)) if hashes is None else hashes
            keyed = Updates((h, *u.cols), u.times, u.diffs, ("i", *u.kinds))
            self.accumulated.insert_updates(consolidate(keyed), consolidated=True)

    def _counts_of(self, records: list[np.ndarray], hashes: np.ndarray) -> np.ndarray:
        """The accumulated count of each of ``records`` (distinct rows, as columns) over everything applied so far."""
        n = len(hashes)
        if not len(self.accumulated) or not n:
            return np.zeros(n, dtype=np.int64)
        _, hist = self.accumulated.seek(np.unique(hashes))
        if not len(hist):
            return np.zeros(n, dtype=np.int64)
        depth = hist.times.shape[1]
        tot = consolidate(Updates(hist.cols, np.zeros((len(hist), depth), dtype=np.int64), hist.diffs, hist.kinds))
        idx = lookup_rows(list(tot.cols), [hashes, *records])
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


class ConstantNode(Node):
    """Fixed rows emitted once at the scope's first time (0, ..., 0); no handle feeds it, no run changes it.

    Every worker holds a copy of the graph, so only worker 0 emits the
    rows (the driver never steps nodes when there are workers); an
    operator after it that needs rows by key exchanges them as it does any
    input's.  With no rows it is an empty collection (a loop variable's
    start).  Cost: O(rows) once, at the first step whose bound is past 0.
    """

    def __init__(self, scope: Scope, name: str, rows: Updates | None):
        super().__init__(scope, name, n_inputs=0)
        self.pending = rows if rows is not None and len(rows) else None

    def step(self, bound: np.ndarray) -> None:
        u = self.pending
        if u is not None and ready_mask(u.times[:1], bound).all():  # every row is at the scope's first time
            self.pending = None
            self.emit(u)

    def work_times(self):
        if self.pending is not None:
            yield self.pending.times

    def held_columns(self):
        if self.pending is not None:
            yield from object_columns(self.pending)

    def start_worker(self, me: int) -> None:
        super().start_worker(me)
        if me != 0:
            self.pending = None
