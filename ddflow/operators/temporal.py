"""Temporal operators: stateless rewrites of *when* a record is present, the basis of event time.

Differential dataflow has no window operator; its idiom (and Materialize's
``mz_now()``) is to give a record a +1 at the time it becomes valid and a
-1 at the time it stops being valid.  The operators here are that idiom,
vectorized; none keeps state but the updates it moved to a later time,
held until that time is complete, and everything that depends on their
output (windows, temporal filters) leaves every trace once the frontier
passes the retraction: compaction advances ``t`` and ``end`` to the same
frontier, the +1 and the -1 meet at one time, and the record's
accumulation there is zero, so it is dropped (see :mod:`traces.spine`).

They work on top-level times (depth 1): a record's data time is compared
with field values on the same clock (event time in microseconds, where
the inputs declare ``event_time``).

Definitions, for an update ``(r, t, d)``, ``lower(r)`` / ``upper(r)`` the
record's validity bounds and ``end(r)`` its close time:

    temporal_filter:  (r, max(t, lower), d)  and  (r, max(t, upper), -d),   when max(t, lower) < max(t, upper)
    close_at:         (r, t, d)                                             when t < end(r)
    close_at, final:  (r, end(r), d)                                        when t < end(r)
    window:           ((*r, s, s + w), t, d)   for each window start s with s <= ts(r) < s + w,
                      and with ``expire`` also  ((*r, s, s + w), max(t, s + w), -d)

so the accumulation of ``temporal_filter`` at time ``T`` is every record
accumulated by ``T`` with ``lower <= T < upper``, and that of
``close_at`` at ``T`` is the record's accumulation at ``min(T, end - 1)``:
its value when it closed, kept.
"""
from __future__ import annotations

from abc import abstractmethod
from typing import Callable

import numpy as np

from ddflow.base.updates import Updates
from ddflow.errors import SchemaError
from ddflow.graph.node import Node, ready_mask
from ddflow.graph.scope import Scope

#: "No bound": a lower bound that every time passes, an upper bound no time reaches.
NO_LOWER = np.iinfo(np.int64).min
NO_UPPER = np.iinfo(np.int64).max


def _bounds(fn: Callable, u: Updates, ctx, where: str) -> tuple[np.ndarray, ...]:
    out = fn(*u.decoded_columns(ctx.interner))
    if isinstance(out, np.ndarray):
        out = (out,)
    arrays = []
    for a in out:
        a = np.asarray(a)
        if a.shape != (len(u),) or a.dtype.kind not in "iu":
            raise SchemaError(f"{where}: the bounds must be int64 arrays of {len(u)} times, got {a.dtype} {a.shape}")
        arrays.append(a.astype(np.int64, copy=False))
    return tuple(arrays)


class _Holding(Node):
    """A stateless operator that moves updates to later times, and holds each until its time is complete.

    What it emits is then always complete, as from any other operator: a
    sink never sees a retraction (or a final row) before its time, and no
    arrangement downstream holds updates it cannot use yet.  The held
    updates are this node's only state; they are counted in ``queued``.
    """

    def __init__(self, scope: Scope, name: str):
        super().__init__(scope, name)
        self.held: list[Updates] = []

    def release(self, u: Updates | None, bound: np.ndarray) -> None:
        parts = self.held + ([u] if u is not None and len(u) else [])
        if not parts:
            return
        every = Updates.concat(parts) if len(parts) > 1 else parts[0]
        ready = ready_mask(every.times, bound)
        if ready.all():
            self.held = []
            self.emit(every)
            return
        later = every.take(np.flatnonzero(~ready))
        self.held = [later] if len(later) else []
        self.emit(every.take(np.flatnonzero(ready)))

    def step(self, bound: np.ndarray) -> None:
        u = self.dequeue()
        if u is not None:
            _top_level(u, f"operator {self.name!r}")
            u = self.moved(u)
        self.release(u, bound)

    @abstractmethod
    def moved(self, u: Updates) -> Updates:
        """The updates this operator makes of the input ``u`` (any times at or after their own)."""

    def work_times(self):
        yield from super().work_times()
        for u in self.held:
            yield u.times

    def held_columns(self):
        yield from super().held_columns()
        for u in self.held:
            yield from (c for c, k in zip(u.cols, u.kinds) if k == "o")

    def queued(self) -> int:
        return super().queued() + sum(len(u) for u in self.held)

    def start_worker(self, me: int) -> None:
        super().start_worker(me)
        self.held = []


def _top_level(u: Updates, where: str) -> None:
    if u.depth != 1:
        raise SchemaError(f"{where}: temporal operators work on top-level times (depth 1), not inside a loop")


class TemporalFilterNode(_Holding):
    """Each record is present while ``lower <= time < upper`` (``fn(*columns) -> (lower, upper)``).

    Stateless but for the updates it moved ahead, held until complete.
    Cost: O(n) vectorized for n updates, plus ``fn``.
    """

    def __init__(self, scope: Scope, name: str, fn: Callable):
        super().__init__(scope, name)
        self.fn = fn

    def moved(self, u: Updates) -> Updates:
        where = f"operator {self.name!r}"
        lower, upper = _bounds(self.fn, u, self.ctx, where)
        t = u.times[:, 0]
        start, stop = np.maximum(t, lower), np.maximum(t, upper)
        live = np.flatnonzero(start < stop)
        ends = live[upper[live] != NO_UPPER]
        enter = u.take(live)
        enter = Updates(enter.cols, start[live].reshape(-1, 1), enter.diffs, enter.kinds)
        leave = u.take(ends)
        leave = Updates(leave.cols, stop[ends].reshape(-1, 1), -leave.diffs, leave.kinds)
        return Updates.concat([enter, leave]) if len(leave) else enter


class WindowNode(_Holding):
    """Each record once per window ``[s, s + width)`` that holds its time (``s = offset mod slide``), bounds appended.

    ``fn(*columns) -> (ts, valid)``: the record's time and whether it has
    one (a record without one is in no window).  With ``expire``, each
    copy also leaves at its window's end.  Stateless but for those
    leavings, held until complete.  Cost: O(n w / s) vectorized for n
    updates.
    """

    def __init__(self, scope: Scope, name: str, fn: Callable, width: int, slide: int, offset: int, expire: bool):
        super().__init__(scope, name)
        if width <= 0 or slide <= 0:
            raise SchemaError(f"window {name!r}: the width and the slide must be positive, got {width} and {slide}")
        self.fn, self.width, self.slide, self.offset, self.expire = fn, int(width), int(slide), int(offset), expire

    def moved(self, u: Updates) -> Updates:
        ts, valid = self.fn(*u.decoded_columns(self.ctx.interner))
        ts = np.asarray(ts, dtype=np.int64)
        valid = np.asarray(valid, dtype=bool)
        latest = ts - np.mod(ts - self.offset, self.slide)  # the last window start at or before ts
        parts = []
        for k in range(-(-self.width // self.slide)):
            start = latest - k * self.slide
            idx = np.flatnonzero(valid & (start + self.width > ts))
            if not len(idx):
                continue
            s = start[idx]
            e = s + self.width
            got = u.take(idx)
            got = Updates(got.cols + (s, e), got.times, got.diffs, got.kinds + ("i", "i"))
            parts.append(got)
            if self.expire:
                t = got.times[:, 0]
                leave = np.maximum(t, e)
                parts.append(Updates(got.cols, leave.reshape(-1, 1), -got.diffs, got.kinds))
        if not parts:
            return u.take(np.zeros(0, dtype=np.int64))
        return Updates.concat(parts) if len(parts) > 1 else parts[0]


class CloseAtNode(_Holding):
    """Drops every change of a record at or after its close time ``fn(*columns)``: it keeps its value at close.

    ``final``: the changes before the close also move to the close time,
    so they add up there and the record appears once, final, when it
    closes.  Stateless but for the final rows, held until their close is
    complete.  Cost: O(n) vectorized for n updates, plus ``fn``.
    """

    def __init__(self, scope: Scope, name: str, fn: Callable, final: bool = False):
        super().__init__(scope, name)
        self.fn = fn
        self.final = final

    def moved(self, u: Updates) -> Updates:
        (end,) = _bounds(self.fn, u, self.ctx, f"operator {self.name!r}")[:1]
        keep = np.flatnonzero(u.times[:, 0] < end)
        kept = u.take(keep)
        if self.final:
            kept = Updates(kept.cols, end[keep].reshape(-1, 1), kept.diffs, kept.kinds)
        return kept
