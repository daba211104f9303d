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

How.  The state is the records held, as int64 rows (key, ts, the other
fields; floats by :func:`~ddflow.base.kernels.float_keys`, so, as
consolidation compares them, -0.0 is 0.0 and NaNs are one) sorted, each
with its count and the session it is shown in: the output accumulated so
far is exactly ``{(record, start, end): count}`` over the state, so the
output a key has shown needs no second copy.  A step is one compiled
call, :func:`session_step`: keys are independent, so it walks the state
and the step's updates (sorted by key, then time) key by key; a key with
updates or with a session to close (``end + 1`` under the bound) replays
its times in order, recomputing its sessions at each and emitting the
difference from what it shows.  Cost per step: O(u log u) to sort ``u``
updates, O(r) compiled work per touched key and time for its ``r``
records, and an O(state) compiled copy of the untouched keys; state
O(records in open sessions).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from ddflow.base.kernels import float_values, key_matrix, sort_rows
from ddflow.base.native import kernel
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError
from ddflow.graph.node import Node, ready_mask
from ddflow.graph.scope import Scope

#: :func:`session_step`'s fault codes.
COUNT_OVERFLOW, TS_OVERFLOW = 1, 2


class SessionNode(Node):
    """Tags records with their key's session (see the module's contract).  Keyed on field 0."""

    needs_complete_input = True

    def __init__(self, scope: Scope, name: str, ts_field: int, gap: int, expire: bool):
        super().__init__(scope, name)
        if gap <= 0:
            raise SchemaError(f"session window {name!r}: the gap must be positive, got {gap}")
        if ts_field < 1:
            raise SchemaError(f"session window {name!r}: the time field must follow the key (field 0), got {ts_field}")
        self.ts_field, self.gap, self.expire = ts_field, int(gap), expire
        self.in_kinds: tuple[str, ...] | None = None
        self.order: list[int] = []  # state column j holds input field order[j]: key, ts, then the rest
        # The state (see the module docstring): rows sorted, counts, the session each is shown in.
        self.rows = np.zeros((0, 0), dtype=np.int64)
        self.counts = np.zeros(0, dtype=np.int64)
        self.starts = np.zeros(0, dtype=np.int64)
        self.ends = np.zeros(0, dtype=np.int64)
        self.wake: int | None = None  # with expire: the least end + 1 held, when the next session closes

    def step(self, bound: np.ndarray) -> None:
        limit = int(bound[0])
        ready = self.dequeue()
        if ready is not None:
            ready = self._checked(ready)
            ok = ready_mask(ready.times, bound)
            if not ok.all():  # not complete yet: back to the queue, which the scheduler watches (as a reduce)
                self.queues[0] = [ready.take(np.flatnonzero(~ok))]
                ready = ready.take(np.flatnonzero(ok))
        if (ready is None or not len(ready)) and (self.wake is None or self.wake >= limit):
            return
        w = len(self.order)
        if ready is not None and len(ready):
            U = key_matrix([ready.cols[j] for j in self.order])
            times = ready.times[:, 0]
            by = sort_rows(np.column_stack([U[:, 0], times, U[:, 1:]]))  # key, then time: the order each key replays
            U, times, diffs = U[by], times[by], ready.diffs[by]
        else:
            U, times, diffs = np.zeros((0, w), dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        rows, counts, starts, ends, out, wake, fault, at = session_step(
            self.rows, self.counts, self.starts, self.ends, U, times, diffs, limit, self.gap, self.expire)
        if fault:  # nothing is kept: the state stays as it was before this step
            raise SchemaError(self._fault(fault, at))
        self.rows, self.counts, self.starts, self.ends = rows, counts, starts, ends
        self.wake = None if wake == np.iinfo(np.int64).max else int(wake)
        if out.shape[1]:
            self._emit(out)

    def _checked(self, ready: Updates) -> Updates:
        """The batch in the kinds the state holds; the first batch fixes them."""
        if ready.depth != 1:
            raise SchemaError(f"session window {self.name!r}: works on top-level times, not inside a loop")
        if self.in_kinds is None:
            if self.ts_field >= ready.arity:
                raise SchemaError(f"session window {self.name!r}: time field {self.ts_field}, "
                                  f"but records have {ready.arity} fields")
            if ready.kinds[self.ts_field] != "i":
                raise SchemaError(f"session window {self.name!r}: the time field {self.ts_field} must be an int "
                                  f"(microseconds), got kind {ready.kinds[self.ts_field]!r}")
            self.in_kinds = ready.kinds
            self.order = [0, self.ts_field] + [j for j in range(1, ready.arity) if j != self.ts_field]
            self.rows = np.zeros((0, ready.arity), dtype=np.int64)
        elif ready.kinds != self.in_kinds:
            ready = self.ctx.coerce(ready, self.in_kinds, self.name)
        return ready

    def _fault(self, fault: int, at: int) -> str:
        if fault == COUNT_OVERFLOW:
            return (f"session window {self.name!r}: a record's count passes int64 at time {at}; "
                    "the step was not applied")
        return (f"session window {self.name!r}: event time {at} plus the gap ({self.gap}) passes int64; "
                "the step was not applied")

    def _emit(self, out: np.ndarray) -> None:
        """The output (one row each: state columns, start, end, time, diff) as updates: the input's fields, then the bounds."""
        w = len(self.order)
        cols: list[np.ndarray] = [np.empty(0)] * w
        for j, field in enumerate(self.order):
            cols[field] = float_values(out[j]) if self.in_kinds[field] == "f" else out[j]
        self.emit(Updates((*cols, out[w], out[w + 1]), out[w + 2].reshape(-1, 1), out[w + 3], self.in_kinds + ("i", "i")))

    def work_times(self) -> Iterable[np.ndarray]:
        """The queued input's times, and the next close (times are totally ordered: the least wake says it all)."""
        yield from super().work_times()
        if self.wake is not None:
            yield np.array([[self.wake]], dtype=np.int64)

    def held_columns(self) -> Iterable[np.ndarray]:
        yield from super().held_columns()
        for j, field in enumerate(self.order):
            if self.in_kinds[field] == "o" and len(self.rows):
                yield np.ascontiguousarray(self.rows[:, j])

    def records_held(self) -> int:
        """Records in open sessions (each is also what the output shows).  O(1)."""
        return super().records_held() + len(self.rows)

    def bytes_held(self) -> int:
        return super().bytes_held() + sum(a.nbytes for a in (self.rows, self.counts, self.starts, self.ends))


def _longer(A, n, need):
    """``A`` (2-D, one row per column) with room for at least ``need`` entries, its first ``n`` kept.

    Capacity doubles; copied by loops, as :func:`~ddflow.base.kernels.grown`.
    """
    if need <= A.shape[1]:
        return A
    B = np.empty((A.shape[0], max(2 * A.shape[1], need)), dtype=A.dtype)
    for c in range(A.shape[0]):
        for i in range(n):
            B[c, i] = A[c, i]
    return B


def _copy_rows(R, C, S, E, lo, hi, R2, C2, S2, E2, at):
    """Rows ``lo:hi`` of a state (rows, counts, starts, ends) into another from row ``at``; returns the row after."""
    for x in range(lo, hi):
        for c in range(R.shape[1]):
            R2[at, c] = R[x, c]
        C2[at] = C[x]
        S2[at] = S[x]
        E2[at] = E[x]
        at += 1
    return at


@kernel("operators")
def session_step(R, C, S, E, U, ut, ud, limit, gap, expire):
    """One step of the session operator over its state; see the module docstring for the contract.

    State: rows ``R`` (key, ts, other fields), sorted, with counts ``C``
    and shown sessions ``[S, E]``.  Updates: rows ``U`` in the same
    columns at times ``ut`` with diffs ``ud``, sorted by key then time,
    all complete (``< limit``).  Returns ``(R, C, S, E, O, wake, fault,
    at)``: the new state; output rows ``O`` = (state columns, start,
    end, time, diff); the least ``end + 1`` held with ``expire`` (int64
    max: none); and ``fault`` (0, or :data:`COUNT_OVERFLOW` /
    :data:`TS_OVERFLOW` with ``at`` the time or ``ts``: then nothing else
    returned is meaningful).  ``O`` is column-major (one row per output
    column), so the output's columns are views, not strided copies.  A touched key costs O(r) per time it
    replays, r its records, plus O(log r + r) per update to find or make
    room for its row; untouched keys are copied.
    """
    BIG = np.iinfo(np.int64).max
    n, w = R.shape
    m = U.shape[0]
    cap = n + m
    R2 = np.empty((cap, w), dtype=np.int64)
    C2 = np.empty(cap, dtype=np.int64)
    S2 = np.empty(cap, dtype=np.int64)
    E2 = np.empty(cap, dtype=np.int64)
    n2 = 0
    O = np.empty((w + 4, 16), dtype=np.int64)  # column-major: each output column contiguous
    no = 0
    # One key's records while it replays: rows, counts now, count and session shown (shown count 0: not shown).
    B = np.empty((cap, w), dtype=np.int64)
    bc = np.empty(cap, dtype=np.int64)
    bsc = np.empty(cap, dtype=np.int64)
    bs = np.empty(cap, dtype=np.int64)
    be = np.empty(cap, dtype=np.int64)
    wake = BIG
    i = 0
    j = 0
    while i < n or j < m:
        key = R[i, 0] if j >= m or (i < n and R[i, 0] < U[j, 0]) else U[j, 0]
        i1 = i
        while i1 < n and R[i1, 0] == key:
            i1 += 1
        j1 = j
        while j1 < m and U[j1, 0] == key:
            j1 += 1
        if j1 == j and not (expire and i1 > i and E[i] + 1 < limit):  # untouched: kept as it is
            n2 = _copy_rows(R, C, S, E, i, i1, R2, C2, S2, E2, n2)
            if expire and i1 > i:
                wake = min(wake, E[i] + 1)
            i, j = i1, j1
            continue
        nb = _copy_rows(R, C, S, E, i, i1, B, bc, bs, be, 0)
        bsc[:nb] = C[i:i1]
        p = j
        while True:  # this key's input times and closes, in time order
            due = expire and nb > 0 and be[0] + 1 < limit
            if p >= j1 and not due:
                break
            t = ut[p] if p < j1 else BIG
            if due and be[0] + 1 < t:
                t = be[0] + 1
            while p < j1 and ut[p] == t:  # apply the updates at t: find the row (sorted by ts, then fields)
                lo = 0
                hi = nb
                while lo < hi:
                    mid = (lo + hi) // 2
                    less = False
                    for c in range(1, w):
                        if B[mid, c] != U[p, c]:
                            less = B[mid, c] < U[p, c]
                            break
                    if less:
                        lo = mid + 1
                    else:
                        hi = mid
                same = lo < nb
                if same:
                    for c in range(1, w):
                        if B[lo, c] != U[p, c]:
                            same = False
                            break
                d = ud[p]
                if same:
                    v = bc[lo]
                    if (d > 0 and v > BIG - d) or (d < 0 and v < -BIG - 1 - d):
                        return R2[:0], C2[:0], S2[:0], E2[:0], O[:, :0], BIG, 1, t
                    bc[lo] = v + d
                else:
                    if U[p, 1] > BIG - gap - 1:
                        return R2[:0], C2[:0], S2[:0], E2[:0], O[:, :0], BIG, 2, U[p, 1]
                    for x in range(nb, lo, -1):
                        for c in range(w):
                            B[x, c] = B[x - 1, c]
                        bc[x] = bc[x - 1]
                        bsc[x] = bsc[x - 1]
                        bs[x] = bs[x - 1]
                        be[x] = be[x - 1]
                    for c in range(w):
                        B[lo, c] = U[p, c]
                    bc[lo] = d
                    bsc[lo] = 0
                    bs[lo] = 0
                    be[lo] = 0
                    nb += 1
                p += 1
            # Recompute the sessions at t over the live records (nonzero count), emit what changed, keep the open.
            k = 0
            x = 0
            while x < nb:
                y = x
                while y < nb and bc[y] == 0:
                    y += 1
                s = B[y, 1] if y < nb else 0  # all dead from x on: nothing is kept, s and e are not used
                last = s
                if y < nb:
                    y += 1
                while y < nb and (bc[y] == 0 or B[y, 1] <= last + gap):
                    if bc[y] != 0:
                        last = B[y, 1]
                    y += 1
                e = last + gap
                closed = expire and e < t
                O = _longer(O, no, no + 2 * (y - x))
                for z in range(x, y):
                    keep = bc[z] != 0 and not closed
                    if keep and bsc[z] != 0 and bs[z] == s and be[z] == e:
                        if bc[z] != bsc[z]:
                            for c in range(w):
                                O[c, no] = B[z, c]
                            O[w, no] = s
                            O[w + 1, no] = e
                            O[w + 2, no] = t
                            O[w + 3, no] = bc[z] - bsc[z]
                            no += 1
                    else:
                        if bsc[z] != 0:
                            for c in range(w):
                                O[c, no] = B[z, c]
                            O[w, no] = bs[z]
                            O[w + 1, no] = be[z]
                            O[w + 2, no] = t
                            O[w + 3, no] = -bsc[z]
                            no += 1
                        if keep:
                            for c in range(w):
                                O[c, no] = B[z, c]
                            O[w, no] = s
                            O[w + 1, no] = e
                            O[w + 2, no] = t
                            O[w + 3, no] = bc[z]
                            no += 1
                    if keep:
                        for c in range(w):
                            B[k, c] = B[z, c]
                        bc[k] = bc[z]
                        bsc[k] = bc[z]
                        bs[k] = s
                        be[k] = e
                        k += 1
                x = y
            nb = k
        n2 = _copy_rows(B, bc, bs, be, 0, nb, R2, C2, S2, E2, n2)
        if expire and nb > 0:
            wake = min(wake, be[0] + 1)
        i, j = i1, j1
    return R2[:n2], C2[:n2], S2[:n2], E2[:n2], O[:, :no], wake, 0, 0

