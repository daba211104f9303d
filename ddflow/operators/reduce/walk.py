"""The walk tactic: min, max, top_k and its numbered forms by one compiled walk over each changed key's history.

The numbered forms are SQL's ranking functions kept to the first ``k``:
row numbers, and RANK and DENSE_RANK, under which the values tying on
their leading fields (:func:`tie_groups`) share one number.

Times are ``(a,)`` at the top level and ``(a, i)`` in a loop.  In round
``r`` of a loop every seed (a changed key) is at iteration ``r``, so the
complete times at which a key's output may change form a chain
``(a_0, r) < (a_1, r) < ...``: the seeds' outer times and the outer times
of the key's history (input and output) at iterations ``<= r`` from the
earliest seed on.  At the top level the same holds with ``r = 0``.  Along
the chain the output to emit telescopes: at ``a_j`` emit
``D_j - D_(j-1) - H_j``, where ``D_j`` is the logic applied to the input
accumulated at ``(a_j, r)`` and ``H_j`` the output history that first
becomes visible at ``a_j``; the accumulated output at every chain time is
then exactly ``D_j``.  History at later iterations makes the next of
those iterations pending at the chain's outer times, as in
:mod:`ddflow.operators.reduce.iterate`; chain times not yet complete
(outer time past the bound) wait as pending too.

The step sorts the changed keys' histories by (key, outer time) once;
one compiled walk then visits each key, advancing a count per distinct
value along the chain, so a key costs O(h + |chain| x |distinct values|)
for a history of h updates, with no Python per key and no per-key
``np.unique`` of times (what the general tactic pays).  Values are
compared by rank: numeric columns map to int64 keys in the same order,
so several value fields compare as tuples do; object values (strings)
are ranked by their decoded values in the step that reads them (one sort
in C, :func:`_comparable`).  Steps whose values include NaN (which
Python's ``min`` leaves unordered) or objects that cannot be compared
with each other go to the general tactic, which this one extends and
shares its pending times and output trace with.

Distinct in a loop could walk the same way (its output is a function of
each value's count), but walking every value of a changed key costs more
than the loop tactic's walk of only the changed records: on
``bench.reach`` it was 15% faster at one update per step and 20% slower
at a thousand, so distinct stays with the loop tactic.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.columnar import frozen, pair_order, time_column
from ddflow.base.consolidate import consolidate
from ddflow.base.kernels import key_matrix, sort_rows
from ddflow.base.native import kernel
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError
from ddflow.graph.node import any_complete, object_columns, ready_split
from ddflow.operators.reduce.general import GeneralTactic, seeds
from ddflow.operators.reduce.compacted import (RoundHistory, compacted_histories, entry_columns, history_arguments,
                                               no_history)
from ddflow.operators.reduce.keywalk import key_walk, rank_values, walk_rows
from ddflow.operators.reduce.logic import ExtremeLogic, Logic
from ddflow.operators.reduce.tactic import BAD_ROUND, DONE, OVERFLOW
from ddflow.operators.reduce.pending import due_seeds, merge_pending
from ddflow.traces.arena import write_trie
from ddflow.traces.layout import build_trie, histories

#: Logics as the kernel numbers them.
MODES = {"min": 0, "max": 1, "top_k": 2, "row_number": 3, "rank": 4, "dense_rank": 5}
#: Logics whose output rows end in a number (a row number or a rank).
NUMBERED = ("row_number", "rank", "dense_rank")
_NO_GROUPS = np.zeros(0, dtype=np.int64)
_NO_TIMES = np.zeros((0, 2), dtype=np.int64)
#: Numbered top_k counts (value, number) pairs in arrays of n_values x (k + 1); a step needing more goes to
#: the general tactic (a large k over many values), so the arrays stay under about 70 MB.
PAIRS_AT_MOST = 1 << 22


class WalkTactic(GeneralTactic):
    """min, max, top_k (numbered or not) at depth 1 and 2 (numeric values; others fall back to the reference).

    Takes all its input, complete or not, and holds what is not yet
    complete itself (``held``), so that a step knows what the input trace
    took since the last one: the updates it is given.  Its history kept
    across rounds (:class:`~.compacted.RoundHistory`) adds them.
    """

    takes_unready = True

    def __init__(self, node):
        super().__init__(node)
        self.held: Updates | None = None  # input dequeued but not yet complete (already in the input trace)
        self.history: RoundHistory | None = None  # the last one-call step's keys in a loop, compacted to its round
        self.b0: int | None = None  # the outer bound of the last step
        self.span = 0  # how far it moved at the last advance (:meth:`_span`)

    def work_times(self):
        yield from super().work_times()
        if self.held is not None:
            yield self.held.times

    def held_columns(self):
        """The output trace, pending keys and held input's object columns.  O(batches)."""
        yield from super().held_columns()
        if self.held is not None:
            yield from object_columns(self.held)

    @classmethod
    def accepts(cls, logic: Logic, depth: int) -> bool:
        return isinstance(logic, ExtremeLogic) and depth in (1, 2)

    def step(self, new: Updates | None, bound: np.ndarray) -> None:
        trace = self.node.source.trace
        arrived = new  # what the input trace took since the last step
        if self.held is not None:
            new = Updates.concat([self.held, new]) if new is not None else self.held
            self.held = None
        history, self.history = self.history, None  # kept only by a one-call step that completes
        if (trace.ints and (self.out_trace is None or self.out_trace.ints) and all(k in "ib" for k in trace.kinds[1:])
                and not self.node.logic.desc):
            self._step_ints(self._ready(new, bound), arrived, bound, trace, history)
        else:
            super().step(self._ready(new, bound), bound)

    def _span(self, b0: int) -> int:
        """How far the outer bound moved at the last advance (0 before the second), recorded.  O(1)."""
        if b0 != self.b0:
            self.span, self.b0 = self._span_at(b0), b0
        return self.span

    def _span_at(self, b0: int) -> int:
        """What :meth:`_span` would return at outer bound ``b0``, recording nothing.  O(1)."""
        if b0 == self.b0:
            return self.span
        return b0 - self.b0 if self.b0 is not None else 0

    def steps_in_one_call(self, trace, bound: np.ndarray) -> bool:
        """Whether a step at ``bound`` on complete input would be :func:`walk_step`, keeping no history.

        What a fused loop round (:mod:`ddflow.operators.round`) asks before
        it calls that kernel itself: int64 traces of one integer value,
        ascending, no parts, the outer bound moved by one time at most.
        Changes nothing.  O(fields).
        """
        logic, out = self.node.logic, self.out_trace
        return not (logic.desc or logic.partition or logic.name in NUMBERED) and trace.ints \
            and (out is None or out.ints) and len(trace.kinds) == 2 and trace.kinds[1] in "ib" \
            and (len(bound) != 2 or self._span_at(int(bound[0])) <= 1)

    def round_seeds(self, bound: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Updates | None]:
        """A fused round's seeds: pending keys (one column) and times, then the held input's now complete, and the rest.

        The held rows complete under ``bound`` are seeds as :meth:`step`
        would take them; the rest stay held.  Changes nothing.  O(held).
        """
        pk = (self.pending_keys if self.pending_keys is not None else _NO_GROUPS)[:, None]
        h = self.held
        if h is None:
            return pk, self.pending_times, _NO_GROUPS, _NO_TIMES, None
        ok, due = ready_split(h.times, bound)
        if due == len(h):
            return pk, self.pending_times, h.cols[0], h.times, None
        if not due:  # the same rows as the step would hold again, in the same order
            return pk, self.pending_times, _NO_GROUPS, _NO_TIMES, h
        ready = np.flatnonzero(ok)
        return pk, self.pending_times, h.cols[0][ready], h.times[ready], h.take(np.flatnonzero(~ok))

    def finish_round(self, cols: np.ndarray, times: np.ndarray, diffs: np.ndarray, later: np.ndarray,
                     later_t: np.ndarray, now_used: int, used: int, bound: np.ndarray, out_kinds: tuple[str, ...],
                     held: Updates | None) -> None:
        """Keep what a fused round's :func:`walk_step` returned (``later``: one row), as :meth:`step` does.

        ``used``: the output arena's words before the call (the output went
        there if ``now_used`` differs); ``held``: what stays held.
        """
        self.held = held
        self.history = None
        self._span(int(bound[0]))
        self.pending_keys, self.pending_times = later[0], later_t
        if now_used != used:
            self.output_written(Updates.unchecked(tuple(cols), times, diffs, out_kinds), now_used)
        elif len(diffs):
            self.output(Updates(tuple(cols), times, diffs, out_kinds))

    def _ready(self, new: Updates | None, bound: np.ndarray) -> Updates | None:
        """The updates of ``new`` complete under ``bound`` (None if none); the rest are held.  O(n)."""
        if new is None:
            return None
        ok, due = ready_split(new.times, bound)
        if due == len(new):
            return new
        self.held = new.take(np.flatnonzero(~ok))
        return new.take(np.flatnonzero(ok)) if due else None

    def _step_ints(self, new: Updates | None, arrived: Updates | None, bound: np.ndarray, trace,
                   history: RoundHistory | None) -> None:
        """The step over int64 traces of integer values: a fixed number of compiled calls, whatever the number of keys.

        :func:`~.pending.due_seeds` (the seeds, grouped and sorted), one
        :func:`histories` per trace, :func:`rank_values`, :func:`key_walk`,
        :func:`walk_rows` (consolidated as it writes) and
        :func:`~.pending.merge_pending`.  A step outside the walk's
        contract (a seed at another iteration, too many numbered pairs)
        goes to :meth:`GeneralTactic.step`, before anything has changed.
        min, max and top_k of one value field take one call instead
        (:meth:`_step_one_call`).  ``new``: the complete input;
        ``arrived``: what the input trace took since the last step.
        """
        depth = len(bound)
        pk, pt = self.pending_keys, self.pending_times
        if pk is None:
            pk = np.zeros(0, dtype=np.int64)
        if new is None and not (len(pt) and any_complete(pt, bound)):
            return
        if new is not None:
            nk, nt = new.cols[0], new.times
        else:
            nk, nt = pk[:0], pt[:0]
        logic = self.node.logic
        numbered = logic.name in NUMBERED
        m = len(trace.kinds) - 1
        if m == 1 and not numbered and not logic.partition:
            return self._step_one_call(new, arrived, nk, nt, pk, pt, bound, trace, history)
        keys, sg, sa, waiting, bad = due_seeds(nk, nt, pk, pt, bound)
        if bad:
            return super().step(new, bound)
        r = int(bound[-1]) - 1 if depth == 2 else 0
        groups = keys[None, :]
        in_g, Ci, it, idf = histories(trace.spine.table().matrix, groups, len(trace.kinds), depth)
        out_kinds = logic.out_kinds(trace.kinds)
        if self.out_trace is not None:
            out_g, Co, ot, odf = histories(self.out_trace.spine.table().matrix, groups, len(out_kinds), depth)
        else:
            out_g, odf = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
            Co, ot = np.zeros((len(out_kinds), 0), dtype=np.int64), np.zeros((0, depth), dtype=np.int64)
        vrank, vfirst, n_values, lo, narrow = rank_values(Ci, Co, m, _value_order(Ci, Co, m), NUMPY_SORT_ABOVE)
        if numbered and n_values * (logic.k + 1) > PAIRS_AT_MOST:
            return super().step(new, bound)
        ni = len(idf)
        out_n = Co[-1] if numbered else np.zeros(len(odf), dtype=np.int64)
        field = lambda c: np.concatenate([Ci[1 + c], Co[1 + c]])  # noqa: E731
        first = None if narrow else vfirst
        tie, part = (_leading(min(f, m), field, n_values, first) for f in (logic.ties, logic.partition))
        emitted, later = key_walk(
            MODES[logic.name], getattr(logic, "k", 1), r, int(bound[0]), n_values, sg, sa,
            in_g, time_column(it, 0), _iterations(it), vrank[:ni], idf,
            out_g, time_column(ot, 0), _iterations(ot), vrank[ni:], odf, out_n, tie, part)
        self.pending_keys, self.pending_times = merge_pending(pk, pt, waiting, keys, later)
        if len(emitted):
            cols, times, diffs, overflow = walk_rows(emitted, keys, vfirst, lo, narrow, Ci, Co, m, numbered, depth, r)
            if overflow:
                raise SchemaError(f"{logic.name} {self.node.name!r}: a sum of output diffs does not fit in int64")
            if len(diffs):
                self.output(Updates(tuple(cols), times, diffs, out_kinds))

    def _step_one_call(self, new, arrived, nk, nt, pk, pt, bound, trace, history: RoundHistory | None) -> None:
        """min, max and top_k of one int value field: the whole step in one compiled call (:func:`walk_step`).

        In a loop whose outer frontier moves past more than one time an
        advance, the keys it reads are kept compacted to the round for the
        next step of the same advance (``history``, the last step's;
        :func:`walk_step_kept`).  At one time an advance the trace's own
        compaction has already folded the outer times: on ``bench.sssp``
        the kept histories were a fifth smaller only, and the kernel's
        median call 40% slower (15 against 22 us), so nothing is kept.
        """
        logic = self.node.logic
        keep = len(bound) == 2 and self._span(int(bound[0])) > 1
        nt, = frozen(nt)  # read-only as a new batch's times are: one signature (see frozen)
        target = self.out_target(trace.kinds)  # before the tables are read: it may merge
        one = (MODES[logic.name], getattr(logic, "k", 1), nk, nt, pk, pt, bound, trace.spine.table().matrix,
               self.out_table(len(trace.kinds)), NUMPY_SORT_ABOVE, *target)
        if not keep:
            cols, times, diffs, tkeys, key_offs, V, val_offs, row, pend_k, pend_t, status, used = walk_step(*one)
        else:
            args = history_arguments(history, bound, 1, 2)
            if args[0].shape[1] and arrived is not None:  # what the trace took since, for the keys kept
                args = (*args[:3], *frozen(key_matrix(arrived.cols), arrived.times, arrived.diffs), *args[3:])
            else:
                args = (*args[:3], *no_history(1, 2)[2:], *args[3:])
            cols, times, diffs, tkeys, key_offs, V, val_offs, row, pend_k, pend_t, groups, inputs, outputs, status, \
                used = walk_step_kept(*one, *args)
        if status == BAD_ROUND:  # outside the walk's contract: the reference, before anything has changed
            return super().step(new, bound)
        if status == OVERFLOW:
            raise SchemaError(f"{logic.name} {self.node.name!r}: a sum of diffs does not fit in int64")
        self.pending_keys, self.pending_times = pend_k, pend_t
        if used != target[1]:
            self.output_written(Updates.unchecked(tuple(cols), times, diffs, trace.kinds), used)
        elif len(diffs):
            self.output(Updates(tuple(cols), times, diffs, trace.kinds), (tkeys, V, key_offs, val_offs, row))
        if keep:
            emitted = (np.ascontiguousarray(cols.T), times, diffs) if len(diffs) else no_history(1, 2)[2:]
            self.history = RoundHistory(int(bound[0]), int(bound[1]) - 1, groups, inputs, outputs, emitted)

    def _retire(self, new, pk, pt, bound):
        trace = self.node.source.trace
        skeys, stimes = seeds(new, pk, pt)
        depth = stimes.shape[1]
        r = int(bound[-1]) - 1 if depth == 2 else 0
        vkinds = trace.kinds[1:]
        logic = self.node.logic
        if any(k not in "ifbo" for k in vkinds) or (depth == 2 and (stimes[:, 1] != r).any()):
            return super()._retire(new, pk, pt, bound)
        keys = np.unique(skeys)
        # A trace of int64 columns is read in one compiled call, its histories already sorted by (key, time).
        presorted = trace.ints and (self.out_trace is None or self.out_trace.ints)
        numbered = logic.name in NUMBERED  # the output's last field is the number, not a value
        in_q, inp = _read(trace, keys, presorted)
        if self.out_trace is not None:
            out_q, outp = _read(self.out_trace, keys, presorted)
        else:
            out_q, outp = np.zeros(0, dtype=np.int64), Updates.empty(logic.out_kinds(trace.kinds), depth)
        out_vals = outp.cols[1:-1] if numbered else outp.cols[1:]
        if any(k == "f" and np.isnan(c).any() for c, k in zip((*inp.cols[1:], *out_vals), vkinds * 2)):
            return super()._retire(new, pk, pt, bound)
        # Values ranked in tuple order; the rank's first row holds its columns.
        vcols = [np.concatenate([a, b]) for a, b in zip(inp.cols[1:], out_vals)]
        lo = _narrow_int_range(vcols, vkinds) if not logic.desc else None
        if lo is not None:  # one integer value in a narrow range: its offset from the least is an order-keeping rank
            vrank = vcols[0] - lo
            vfirst = None
            n_values = int(vrank.max()) + 1 if len(vrank) else 0
            tie, part = (_leading(f, None, n_values, None) for f in (logic.ties, logic.partition))
        else:
            ordered = _comparable(vcols, vkinds, self.node.ctx.interner, logic.desc)
            if ordered is None:  # objects Python cannot order among themselves: the reference says what happens
                return super()._retire(new, pk, pt, bound)
            vrank, vfirst = _dense_rank(ordered, len(inp) + len(outp))
            n_values = len(vfirst)
            # Ties and parts: equal in the leading fields (objects by their decoded order, not their codes).
            at = np.cumsum([0] + [2 if k == "o" else 1 for k in vkinds])
            tie, part = (_leading(min(f, len(vkinds)), lambda c: ordered[at[c]], n_values, vfirst)
                         for f in (logic.ties, logic.partition))
        if numbered and n_values * (logic.k + 1) > PAIRS_AT_MOST:
            return super()._retire(new, pk, pt, bound)
        n_in = len(inp)
        sg = np.searchsorted(keys, skeys)
        s_o = pair_order(sg, stimes[:, 0])
        i_o = slice(None) if presorted else pair_order(in_q, inp.times[:, 0])
        o_o = slice(None) if presorted else pair_order(out_q, outp.times[:, 0])
        out_n = outp.cols[-1][o_o] if numbered else np.zeros(len(outp), dtype=np.int64)
        emitted, pending = key_walk(
            MODES[logic.name], getattr(logic, "k", 1), r, int(bound[0]), n_values,
            sg[s_o], stimes[s_o, 0],
            in_q[i_o], time_column(inp.times, 0)[i_o], _iterations(inp.times)[i_o], vrank[:n_in][i_o], inp.diffs[i_o],
            out_q[o_o], time_column(outp.times, 0)[o_o], _iterations(outp.times)[o_o], vrank[n_in:][o_o], outp.diffs[o_o],
            out_n,
            tie, part)
        if len(pending):
            self.add_pending(keys[pending[:, 0]], pending[:, 1:1 + depth])
        if not len(emitted):
            return
        if vfirst is None:
            cols = (keys[emitted[:, 0]], emitted[:, 1] + lo)
        else:
            rows = vfirst[emitted[:, 1]]
            cols = (keys[emitted[:, 0]], *(c[rows] for c in vcols))
        if numbered:
            cols = (*cols, emitted[:, 2].copy())
        times = emitted[:, 3:4] if depth == 1 else np.column_stack([emitted[:, 3], np.full(len(emitted), r)])
        self.output(consolidate(Updates(cols, times, emitted[:, 4].copy(), logic.out_kinds(trace.kinds))))


def _read(trace, keys: np.ndarray, presorted: bool) -> tuple[np.ndarray, Updates]:
    """Every update of sorted unique ``keys`` in ``trace``, with each one's key index.

    ``presorted``: one compiled call over the trace's table
    (:func:`ddflow.traces.layout.histories`), sorted by (key, outer time);
    else the trace's seek, in no particular order.
    """
    if not presorted:
        return trace.seek(keys)
    gid, cols, times, diffs = histories(trace.spine.table().matrix, keys[None, :], len(trace.kinds), trace.depth)
    return gid, Updates(tuple(cols), times, diffs, trace.kinds)


def _iterations(times: np.ndarray) -> np.ndarray:
    """Each time's iteration (0 at depth 1), contiguous: one signature for the kernels it is handed to."""
    return time_column(times, 1) if times.shape[1] > 1 else np.zeros(len(times), dtype=np.int64)


def _narrow_int_range(cols: list[np.ndarray], kinds: tuple[str, ...]) -> int | None:
    """The least value when ``cols`` is one integer column whose range is at most twice its length, else None.

    Then ``value - least`` ranks values in order, and the walk's arrays
    indexed by rank stay O(n) without sorting the values.  O(n).
    """
    if len(cols) != 1 or kinds[0] not in "ib" or not len(cols[0]):
        return None
    lo, hi = int(cols[0].min()), int(cols[0].max())
    return lo if hi - lo < 2 * len(cols[0]) else None


def _comparable(cols: list[np.ndarray], kinds: tuple[str, ...], interner,
                desc: tuple[int, ...] = ()) -> list[np.ndarray] | None:
    """``cols`` with each object column (interned codes) as two int64 columns ordered as its values are.

    The first is the value's rank among the column's decoded values (None
    first, as :func:`~ddflow.operators.reduce.logic._sort_key` puts it),
    the second the code itself, so distinct objects that compare equal
    stay distinct values.  The columns of the fields in ``desc`` are
    reversed (negated; integers complemented).  None when some values
    cannot be compared (a ``TypeError``).  O(n log n): decoding is
    vectorized and the sort compares in C.
    """
    if "o" not in kinds and not desc:
        return cols
    out = []
    for f, (c, k) in enumerate(zip(cols, kinds)):
        if k != "o":
            if f in desc:
                c = -c if k == "f" else ~np.asarray(c, dtype=np.int64)
            out.append(c)
            continue
        vals = interner.decode(c)
        some = np.flatnonzero(~np.equal(vals, None).astype(bool))
        rank = np.full(len(c), -1, dtype=np.int64)
        if len(some):
            try:
                _, inv = np.unique(vals[some], return_inverse=True)
            except TypeError:
                return None
            rank[some] = inv.reshape(-1)
        out += [-rank, -np.asarray(c, dtype=np.int64)] if f in desc else [rank, c]
    return out


def _dense_rank(cols: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each of ``n`` rows' rank among the distinct rows of ``cols`` (tuple order), and each rank's first row."""
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    K = key_matrix(cols)
    order = sort_rows(K)
    Ks = K[order]
    new = np.ones(n, dtype=bool)
    new[1:] = (Ks[1:] != Ks[:-1]).any(axis=1)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.cumsum(new) - 1
    return rank, order[new]


def _leading(fields: int, field, n_values: int, first: np.ndarray | None) -> np.ndarray:
    """The groups of value ranks equal in their first ``fields`` value fields (``field(c)``: field ``c`` of
    every history row), for the kernel's ``tie`` and ``part``; none when ``fields`` is 0; one a rank when the
    ranks are offsets (``first`` None: one value field)."""
    if not fields:
        return _NO_GROUPS
    if first is None:
        return np.arange(n_values, dtype=np.int64)
    return tie_groups([field(c) for c in range(fields)], first)


def tie_groups(cols: list[np.ndarray], first: np.ndarray) -> np.ndarray:
    """Each value rank's tie group: ranks whose first rows agree in ``cols`` share one, numbered in rank order.

    Values are ranked in tuple order, so rows equal in the leading fields
    have consecutive ranks and the groups are nondecreasing.  O(n_values).

    >>> tie_groups([np.array([5, 5, 7, 5])], np.array([0, 3, 2])).tolist()
    [0, 0, 1]
    """
    if not len(first):
        return np.zeros(0, dtype=np.int64)
    new = np.zeros(len(first), dtype=np.int64)
    for c in cols:
        v = c[first]
        new[1:] |= v[1:] != v[:-1]
    return np.cumsum(new)


#: Above this many history rows the walk's values are sorted by numpy (a vectorized sort, several times
#: faster than a compiled merge sort on 20,000 rows) before :func:`rank_values`; below, inside it.
NUMPY_SORT_ABOVE = 512
_NO_ORDER = np.zeros(0, dtype=np.int64)


def _value_order(Ci: np.ndarray, Co: np.ndarray, m: int) -> np.ndarray:
    """For many rows whose values are not narrow, their order by value (tuple order), sorted by numpy; else none.

    O(n log n) for n > ``NUMPY_SORT_ABOVE`` rows, O(1) otherwise.
    """
    n = Ci.shape[1] + Co.shape[1]
    if n <= NUMPY_SORT_ABOVE:
        return _NO_ORDER
    vals = [np.concatenate([Ci[1 + c], Co[1 + c]]) for c in range(m)]
    if m == 1:
        if _narrow_int_range(vals, ("i",)) is not None:
            return _NO_ORDER
        return np.argsort(vals[0])
    return sort_rows(key_matrix(vals))


def walk_step_body(mode, k, nk, nt, pk, pt, bound, in_T, out_T, sort_above, buf, used, T, at, small, keep,
                   c_groups, c_in, c_out, a_rows, a_times, a_diffs, e_rows, e_times, e_diffs):
    """A walk tactic's step for min, max or top_k (``mode``) of one int value field, in one compiled call.

    What :meth:`WalkTactic._step_ints` does in several calls for these
    logics: :func:`~.pending.due_seeds`, :func:`histories` of both traces
    (tables ``in_T``, ``out_T``), :func:`rank_values` (over
    ``sort_above`` rows whose values are not narrow, ranked after a radix
    sort of their values), :func:`key_walk`, :func:`~.pending.merge_pending`,
    :func:`walk_rows`, and the output's batch for the output trace: an
    output of up to ``small`` updates written into its arena
    (:func:`traces.arena.write_trie` at ``buf``, ``used``, ``T``, ``at``:
    :meth:`traces.arena.Arena.target`), a larger one built as a trie
    (:func:`traces.layout.build_trie`).  With ``keep`` (in a loop) the
    histories are compacted to the round and read from the last step's
    where it holds the key (``c_groups`` to ``e_diffs``: the last step's
    keys, input and output, what the input trace took since, as rows,
    times and diffs, and what the last step emitted; else unused).  A
    kernel helper, called by :func:`walk_step` and :func:`walk_step_kept`.
    Returns ``(cols, times, diffs, keys, key_offs, V, val_offs, row,
    pending keys, pending times, groups, inputs, outputs, status, used)``:
    the trie's levels and row empty when the output went to the arena,
    which ``used`` then says (the words now used there); the three before
    the status what :class:`~.compacted.RoundHistory` keeps (at depth 1
    empty); status :data:`DONE`, :data:`BAD_ROUND` (nothing else is then
    meaningful) or :data:`OVERFLOW`.  Cost: as those kernels.
    """
    depth = len(bound)
    r = bound[depth - 1] - 1 if depth == 2 else 0
    arity = 2
    empty1, emptyT, no_offs = np.empty(0, dtype=np.int64), np.empty((0, depth), dtype=np.int64), np.empty(0, dtype=np.int32)
    no_cols, no_vals = np.empty((arity, 0), dtype=np.int64), np.empty((arity - 1, 0), dtype=np.int64)
    no_groups, no_entries = np.empty((1, 0), dtype=np.int64), np.empty((0, 5), dtype=np.int64)
    keys, sg, sa, waiting, bad = due_seeds(nk, nt, pk, pt, bound)
    if bad:
        return no_cols, emptyT, empty1, empty1, no_offs, no_vals, no_offs, empty1, pk, pt, no_groups, no_entries, \
            no_entries, BAD_ROUND, used
    groups = np.empty((1, len(keys)), dtype=np.int64)
    for g in range(len(keys)):
        groups[0, g] = keys[g]
    E_in, E_out = no_entries, no_entries
    if keep:  # compacted to the round, from the last step's where it holds the key
        E_in, overflow_in = compacted_histories(in_T, groups, arity, r, c_groups, c_in, a_rows, a_times, a_diffs)
        E_out, overflow_out = compacted_histories(out_T, groups, arity, r, c_groups, c_out, e_rows, e_times, e_diffs)
        if overflow_in or overflow_out:
            return no_cols, emptyT, empty1, empty1, no_offs, no_vals, no_offs, empty1, pk, pt, no_groups, no_entries, \
                no_entries, OVERFLOW, used
        in_g, Ci, it, idf = entry_columns(E_in, groups)
        out_g, Co, ot, odf = entry_columns(E_out, groups)
    else:
        in_g, Ci, it, idf = histories(in_T, groups, arity, depth)
        out_g, Co, ot, odf = histories(out_T, groups, arity, depth)
    ni = len(idf)
    vrank, vfirst, n_values, lo, narrow = rank_values(Ci, Co, 1, empty1, sort_above)
    in_i, out_i = np.zeros(ni, dtype=np.int64), np.zeros(len(odf), dtype=np.int64)
    for i in range(ni if depth == 2 else 0):
        in_i[i] = it[i, 1]
    for i in range(len(odf) if depth == 2 else 0):
        out_i[i] = ot[i, 1]
    emitted, later = key_walk(mode, k, r, bound[0], n_values, sg, sa,
                              in_g, np.ascontiguousarray(it[:, 0]), in_i, vrank[:ni], idf,  # contiguous: as the
                              out_g, np.ascontiguousarray(ot[:, 0]), out_i, vrank[ni:], odf,  # native twin takes them
                              np.zeros(len(odf), dtype=np.int64),
                              empty1, empty1)
    pend_k, pend_t = merge_pending(pk, pt, waiting, keys, later)
    if len(emitted) == 0:
        return no_cols, emptyT, empty1, empty1, no_offs, no_vals, no_offs, empty1, pend_k, pend_t, groups, E_in, E_out, \
            DONE, used
    cols, times, diffs, overflow = walk_rows(emitted, keys, vfirst, lo, narrow, Ci, Co, 1, False, depth, r)
    if overflow:
        return no_cols, emptyT, empty1, empty1, no_offs, no_vals, no_offs, empty1, pk, pt, no_groups, no_entries, \
            no_entries, OVERFLOW, used
    if len(diffs) == 0:
        return cols, times, diffs, empty1, no_offs, no_vals, no_offs, empty1, pend_k, pend_t, groups, E_in, E_out, DONE, \
            used
    if len(diffs) <= small:
        return cols, times, diffs, empty1, no_offs, no_vals, no_offs, empty1, pend_k, pend_t, groups, E_in, E_out, DONE, \
            write_trie(cols, times, diffs, buf, used, T, at)
    tkeys, key_offs, V, val_offs, row = build_trie(np.ascontiguousarray(cols.T), times, diffs)
    return cols, times, diffs, tkeys, key_offs, V, val_offs, row, pend_k, pend_t, groups, E_in, E_out, DONE, used


@kernel("operators.reduce")
def walk_step(mode, k, nk, nt, pk, pt, bound, in_T, out_T, sort_above, buf, used, T, at, small):
    """:func:`walk_step_body` reading every key from the traces and keeping nothing.

    Returns its first eleven results, its status and the arena's words
    used.  Fifteen arguments, not twenty-five: a step of a few keys notices
    each argument's conversion at the call.
    """
    e1, e2 = np.empty(0, dtype=np.int64), np.empty((0, 2), dtype=np.int64)
    res = walk_step_body(mode, k, nk, nt, pk, pt, bound, in_T, out_T, sort_above, buf, used, T, at, small, False,
                         np.empty((1, 0), dtype=np.int64), np.empty((0, 5), dtype=np.int64),
                         np.empty((0, 5), dtype=np.int64), e2, e2, e1, e2, e2, e1)
    return res[0], res[1], res[2], res[3], res[4], res[5], res[6], res[7], res[8], res[9], res[13], res[14]


@kernel("operators.reduce")
def walk_step_kept(mode, k, nk, nt, pk, pt, bound, in_T, out_T, sort_above, buf, used, T, at, small,
                   c_groups, c_in, c_out, a_rows, a_times, a_diffs, e_rows, e_times, e_diffs):
    """:func:`walk_step_body` in a loop, its histories compacted to the round and kept for the next step.

    ``c_groups`` to ``e_diffs``: what the last step kept
    (:class:`~.compacted.RoundHistory`) and what the input trace took since.
    Returns all of :func:`walk_step_body`'s results.
    """
    return walk_step_body(mode, k, nk, nt, pk, pt, bound, in_T, out_T, sort_above, buf, used, T, at, small, True,
                          c_groups, c_in, c_out, a_rows, a_times, a_diffs, e_rows, e_times, e_diffs)
