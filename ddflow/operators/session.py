"""Session windows: each record tagged with the session of its key that holds it, exactly under removals.

Contract.  The input holds records ``(k, *fields)`` whose field ``ts``
(an int64, event time in microseconds) places them in time.  For a key
``k`` at time ``T``, let ``R(k, T)`` be its records accumulated by ``T``
(nonzero counts).  Sort their distinct ``ts``; a *session* is a maximal
run in which each ``ts`` is at most ``gap`` after the previous one
(Spark's ``session_window``: a record exactly ``gap`` after the last one
extends the session), from ``start`` = its first ``ts`` to ``end`` = its
last ``ts`` + ``gap``.  The output accumulated to ``T`` is

    {(k, *fields, start, end): count   for each record of R(k, T), in its session}

restricted, when ``expire`` is set, to the sessions with ``end >= T``:
a session leaves the output at time ``end + 1`` (a -1 for each of its
records at exactly that time), which is when it can no longer change if
every record's data time is its ``ts`` and nothing behind the frontier
arrives (an event-time input).  Its records then leave the state too, so
the state holds only open sessions.  Without ``expire`` (a ``ts`` that
is not the data time) nothing is ever dropped and the output is the
from-scratch sessionization of everything accumulated.

A removal at its own time recomputes its key's sessions, so removing a
record in the middle of a session splits it.

How.  The step retires the complete input times and the pending
wake-ups (``end + 1`` of each key's earliest open session) in time order;
at each time, every key touched recomputes its sessions from its records
and emits the difference from its previous output.  Cost: O(r log r)
Python work per touched key and time, for ``r`` records in the key's
open sessions; state O(records in open sessions).
"""
from __future__ import annotations

import heapq
from collections import defaultdict
from typing import Iterable

import numpy as np

from ddflow.base.kinds import DTYPE
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError
from ddflow.graph.node import Node, ready_mask
from ddflow.graph.scope import Scope

Row = tuple


class SessionNode(Node):
    """Tags records with their key's session (see the module's contract).  Keyed on field 0."""

    needs_complete_input = True

    def __init__(self, scope: Scope, name: str, ts_field: int, gap: int, expire: bool):
        super().__init__(scope, name)
        if gap <= 0:
            raise SchemaError(f"session window {name!r}: the gap must be positive, got {gap}")
        self.ts_field, self.gap, self.expire = ts_field, int(gap), expire
        self.records: dict[object, dict[Row, int]] = {}  # key -> record -> count
        self.shown: dict[object, dict[Row, int]] = {}  # key -> (record, start, end) -> count, as output
        self.wakes: list[tuple[int, object]] = []  # (time, key): recompute the key then (a session may close)
        self.wake_of: dict[object, int] = {}  # each key's one live wake (older heap entries are stale)
        self.in_kinds: tuple[str, ...] | None = None

    def step(self, bound: np.ndarray) -> None:
        ready = self.dequeue()
        if ready is not None:
            if ready.depth != 1:
                raise SchemaError(f"session window {self.name!r}: works on top-level times, not inside a loop")
            self.in_kinds = ready.kinds
            ok = ready_mask(ready.times, bound)
            if not ok.all():  # not complete yet: back to the queue, which the scheduler watches (as a reduce)
                self.queues[0] = [ready.take(np.flatnonzero(~ok))]
                ready = ready.take(np.flatnonzero(ok))
        limit = int(bound[0])
        by_time: dict[int, list[tuple[object, Row, int]]] = defaultdict(list)
        if ready is not None and len(ready):
            cols = [c.tolist() for c in ready.cols]
            for i, (t, d) in enumerate(zip(ready.times[:, 0].tolist(), ready.diffs.tolist())):
                row = tuple(c[i] for c in cols)
                by_time[t].append((row[0], row, d))
        inputs = sorted(by_time)
        out: list[tuple[Row, int, int]] = []
        at = 0
        while True:  # input times and wake-ups (booked as sessions change, always later) in time order
            next_in = inputs[at] if at < len(inputs) else None
            next_wake = self.wakes[0][0] if self.wakes and self.wakes[0][0] < limit else None
            if next_in is None and next_wake is None:
                break
            t = min(x for x in (next_in, next_wake) if x is not None)
            touched = []
            if next_in == t:
                at += 1
                for k, row, d in by_time[t]:
                    recs = self.records.setdefault(k, {})
                    c = recs.get(row, 0) + d
                    if c:
                        recs[row] = c
                    else:
                        del recs[row]
                    touched.append(k)
            while self.wakes and self.wakes[0][0] == t:
                _, k = heapq.heappop(self.wakes)
                if self.wake_of.get(k) == t:
                    del self.wake_of[k]
                    touched.append(k)
            for k in dict.fromkeys(touched):
                self._recompute(k, t, out)
        self._emit(out)

    def _recompute(self, k: object, t: int, out: list) -> None:
        """Key ``k``'s sessions at time ``t``: emit the change of its output, drop closed sessions, book the next wake."""
        recs = self.records.get(k, {})
        ts_of = self.ts_field
        times = sorted({r[ts_of] for r in recs})
        span: dict[int, tuple[int, int]] = {}
        first = 0
        for i in range(1, len(times) + 1):
            if i == len(times) or times[i] - times[i - 1] > self.gap:
                s, e = times[first], times[i - 1] + self.gap
                for x in times[first:i]:
                    span[x] = (s, e)
                first = i
        if self.expire:
            closed = {x for x, (_, e) in span.items() if e < t}
            if closed:
                for r in [r for r in recs if r[ts_of] in closed]:
                    del recs[r]
        now: dict[Row, int] = {}
        for r, c in recs.items():
            s, e = span[r[ts_of]]
            now[r + (s, e)] = c
        before = self.shown.get(k, {})
        for r, c in now.items():
            diff = c - before.get(r, 0)
            if diff:
                out.append((r, t, diff))
        for r, c in before.items():
            if r not in now:
                out.append((r, t, -c))
        if now:
            self.shown[k] = now
        else:
            self.shown.pop(k, None)
        if not recs:
            self.records.pop(k, None)
            self.wake_of.pop(k, None)
        elif self.expire:
            wake = min(span[r[ts_of]][1] for r in recs) + 1
            if self.wake_of.get(k) != wake:
                self.wake_of[k] = wake
                heapq.heappush(self.wakes, (wake, k))

    def _emit(self, out: list[tuple[Row, int, int]]) -> None:
        if not out:
            return
        kinds = self.in_kinds + ("i", "i")
        cols = tuple(np.array([r[j] for r, _, _ in out], dtype=DTYPE[kd]) for j, kd in enumerate(kinds))
        times = np.array([t for _, t, _ in out], dtype=np.int64).reshape(-1, 1)
        diffs = np.array([d for _, _, d in out], dtype=np.int64)
        self.emit(Updates(cols, times, diffs, kinds))

    def work_times(self) -> Iterable[np.ndarray]:
        yield from super().work_times()
        if self.wake_of:
            yield np.array([[t] for t in self.wake_of.values()], dtype=np.int64)

    def held_columns(self) -> Iterable[np.ndarray]:
        yield from super().held_columns()
        if self.in_kinds is not None:
            objs = [j for j, kd in enumerate(self.in_kinds) if kd == "o"]
            rows = [r for recs in self.records.values() for r in recs]
            rows += [r for shown in self.shown.values() for r in shown]
            for j in objs:
                yield np.array([r[j] for r in rows], dtype=np.int64)

    def records_held(self) -> int:
        """Records in open sessions (input kept, and output shown).  O(keys)."""
        return sum(len(v) for v in self.records.values()) + sum(len(v) for v in self.shown.values())
