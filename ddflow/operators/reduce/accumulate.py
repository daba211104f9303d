"""Accumulate: per group, the count and the diff-weighted sums of its records, kept from the changes alone.

Contract.  The input holds records ``(g, w)`` with ``g = (g_0..g_(k-1))``
the group (any kinds) and ``w = (w_1..w_m)`` int64 weights.  For every
group ``g`` and time ``t``, with ``U(g, t)`` the input updates
``((g, w), s, d)`` with ``s <= t``:

    c(g, t)   = sum(d             for (g, w), s, d in U(g, t))
    S_j(g, t) = sum(d * w_j       for (g, w), s, d in U(g, t))     (j = 1..m)

and the output accumulated to ``t`` is exactly

    {(g, c(g, t), S_1(g, t), .., S_m(g, t)): 1  for every g with c(g, t) != 0}

so the output updates are the changelog of that table: at each time where
a group's vector changes, its old row with -1 and its new row with +1.
Every sum (and every product ``d * w_j``) is exact; one past int64 is a
:class:`~ddflow.errors.SchemaError` naming the operator, never a wrap.

Float weights.  With ``floats = q``, each record ends in ``q`` float64
values ``x_1..x_q`` after its int weights, and the output row ends in
``X_1..X_q``: ``X_j(g, t)`` is ``sum(d * x_j)`` over ``U(g, t)`` computed
exactly and rounded once (:mod:`ddflow.base.exactsum`: NaN and infinities
by IEEE's rules), so it depends on the group's records alone, never on
the order or history of their updates.  Each ``x_j`` is kept as the
diff-weighted sums of its integer limbs (at most four nonzero a value),
which retract exactly; a limb total past int64 (after about ``2**39``
full-size values) is an error.

How (depth 1, top-level times).  :class:`ExplodeNode` turns each update
``((g, w), s, d)`` into ``m + 1`` updates ``((g, j), s, d * w_j)`` with
``w_0 = 1`` (products checked; zeros dropped).  These records carry no
value beyond ``(g, j)``, so the arrangement's trace compacts every
``(g, j)`` to one row holding ``sum(d * w_j)`` once the frontier passes
its times: O(m + 1) rows per group, whatever its history.  The
:class:`AccumulateTactic` then retires a step like
:class:`~ddflow.operators.reduce.total.TotalTactic`: it seeks the changed
groups' compacted totals (the totals after the step; minus the step's own
diffs, the totals before), runs the new diffs in time order per group
(one compiled pass, overflow-checked) and emits, at every changed time,
the group's previous row with -1 and its new row with +1.  A refresh
reads O(1) rows per changed group, never its history.  Groups sharing the
first field ``g_0`` (the arrangement's key) are read together: put the
most selective field first.

Float weights explode into their limb slots (``1 + m + (j - 1) * SLOTS +
slot``); a step works on the slots that occur in it, and rounds each
emitted row's limbs once (:func:`~ddflow.base.exactsum.round_limbs`).

In a loop (depth > 1) the operator is a general reduce whose Python logic
(:class:`AccumulateLogic`) sums each changed group's values at each
interesting time: correct, but it reads the group's history.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.columnar import lookup_rows, wrapping_products
from ddflow.base.consolidate import consolidate, group_starts
from ddflow.base.exactsum import SLOTS, exact_units, float_limbs, round_limbs, rounded_total
from ddflow.base.native import kernel
from ddflow.base.updates import Updates
from ddflow.errors import SchemaError
from ddflow.graph.node import Node, ready_mask
from ddflow.graph.scope import Scope
from ddflow.operators.reduce.logic import Logic
from ddflow.operators.reduce.tactic import ReduceTactic

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def _check_shape(name: str, u: Updates, groups: int, weights: int, floats: int = 0) -> None:
    if u.arity != groups + weights + floats:
        raise SchemaError(f"accumulate {name!r}: records need {groups} group field(s), {weights} weight(s) "
                          f"and {floats} float weight(s), got {u.arity} field(s)")
    bad = [i for i in range(groups, groups + weights) if u.kinds[i] not in "ib"]
    if bad:
        raise SchemaError(f"accumulate {name!r}: weights are int64, field {bad[0]} is of kind {u.kinds[bad[0]]!r}")
    bad = [i for i in range(groups + weights, u.arity) if u.kinds[i] != "f"]
    if bad:
        raise SchemaError(f"accumulate {name!r}: float weights are float64, field {bad[0]} is of kind "
                          f"{u.kinds[bad[0]]!r}")


class ExplodeNode(Node):
    """``((g, w_1..w_m), t, d)`` becomes ``((g, j), t, d * w_j)`` for ``j = 0..m`` (``w_0 = 1``); zeros dropped.

    Stateless.  Cost: O(n (m + 1)) vectorized for n updates.
    """

    def __init__(self, scope: Scope, name: str, groups: int, weights: int, where: str, floats: int = 0):
        super().__init__(scope, name)
        self.groups, self.weights, self.where, self.floats = groups, weights, where, floats

    def step(self, bound: np.ndarray) -> None:
        u = self.dequeue()
        if u is None:
            return
        self.emit(explode(u, self.groups, self.weights, self.where, self.floats))


def explode(u: Updates, groups: int, weights: int, where: str, floats: int = 0) -> Updates:
    """The exploded form of ``u`` (see :class:`ExplodeNode`).  O(n (m + 1 + 4 q)), vectorized."""
    _check_shape(where, u, groups, weights, floats)
    out = _explode_ints(u, groups, weights, where)
    if not floats:
        return out
    parts = [out]
    for i in range(floats):
        row, slot, val = float_limbs(np.ascontiguousarray(u.cols[groups + weights + i], dtype=np.float64))
        d = u.diffs[row]
        prod, wrapped = wrapping_products(d, val)
        if wrapped.any():
            at = int(np.flatnonzero(wrapped)[0])
            raise SchemaError(f"accumulate {where!r}: float weight {i + 1} = {u.cols[groups + weights + i][row[at]]!r}"
                              f" times the diff {int(d[at])} does not fit the exact sum's int64 limbs")
        j = 1 + weights + i * SLOTS + slot
        cols = tuple(c[row] for c in u.cols[:groups]) + (j,)
        parts.append(Updates(cols, u.times[row], prod, u.kinds[:groups] + ("i",)))
    return Updates.concat(parts)


def _explode_ints(u: Updates, groups: int, weights: int, where: str) -> Updates:
    """The count and int weights' records ``((g, j), t, d * w_j)``, ``j = 0..m``, zeros dropped."""
    n, m1 = len(u), weights + 1
    w = np.empty((n, m1), dtype=np.int64)
    w[:, 0] = 1
    for j in range(weights):
        w[:, j + 1] = u.cols[groups + j]
    d = np.repeat(u.diffs, m1)
    prod, wrapped = wrapping_products(d, w.ravel())
    if wrapped.any():
        i = int(np.flatnonzero(wrapped)[0])
        raise SchemaError(f"accumulate {where!r}: weight {i % m1} = {int(w.ravel()[i])} times the diff {int(d[i])} "
                          f"does not fit in int64")
    keep = np.flatnonzero(prod)
    rows = keep // m1
    cols = tuple(c[rows] for c in u.cols[:groups]) + ((keep % m1).astype(np.int64),)
    return Updates(cols, u.times[rows], prod[keep], u.kinds[:groups] + ("i",))


class AccumulateLogic(Logic):
    """The algebra for the per-key reference path: records ``(g_0, g_1.., w.., x..)`` keyed by ``g_0``.

    Float weights are summed as exact integers of ``2**-1074`` units and
    rounded once, as the compiled path does.
    """

    name = "accumulate"

    def __init__(self, groups: int, weights: int, where: str = "accumulate", floats: int = 0):
        self.groups, self.weights, self.where, self.floats = groups, weights, where, floats

    def evaluate(self, key, vals):
        sums: dict[tuple, list[int]] = {}
        rest, m = self.groups - 1, self.weights
        for v, mult in vals:
            acc = sums.setdefault(v[:rest], [0] * (m + 1 + 4 * self.floats))
            acc[0] += mult
            for j, w in enumerate(v[rest:rest + m]):
                acc[j + 1] += int(w) * mult
            for j, x in enumerate(v[rest + m:]):
                for i, part in enumerate(exact_units(float(x))):
                    acc[m + 1 + 4 * j + i] += part * mult
        out = []
        for g, acc in sums.items():
            if any(not _I64_MIN <= s <= _I64_MAX for s in acc[:m + 1]):
                raise SchemaError(f"accumulate {self.where!r}: a sum of group {(key, *g)} does not fit in int64")
            if acc[0]:
                xs = tuple(rounded_total(*acc[m + 1 + 4 * j:m + 5 + 4 * j]) for j in range(self.floats))
                out.append(((*g, *acc[:m + 1], *xs), 1))
        return out


class AccumulateTactic(ReduceTactic):
    """Depth 1 over the exploded records: totals from the compacted trace, new diffs run in time order."""

    @classmethod
    def accepts(cls, logic: Logic, depth: int) -> bool:
        return isinstance(logic, AccumulateLogic) and depth == 1

    def step(self, new: Updates | None, bound: np.ndarray) -> None:
        if new is not None:
            self.node.emit(self._changes(new, bound))

    def _changes(self, new: Updates, bound: np.ndarray) -> Updates:
        logic = self.node.logic
        k, m1, q = logic.groups, logic.weights + 1, logic.floats
        new = consolidate(new)  # sorted by (g.., j, time)
        if not len(new):
            return new
        gcols, j = list(new.cols[:k]), new.cols[k]
        starts = group_starts(gcols)
        mark = np.zeros(len(new), dtype=np.int64)
        mark[starts] = 1
        gid = np.cumsum(mark) - 1
        groups = [c[starts] for c in gcols]
        # Totals after this step (the trace already holds the new updates): one compacted row per (g, j).
        # Updates at times not yet complete (a window's future retraction) wait in the trace: left out.
        _, hist = self.node.source.trace.seek(np.unique(new.cols[0]))
        hist = hist.take(np.flatnonzero(ready_mask(hist.times, bound)))
        tot = consolidate(Updates(hist.cols, np.zeros((len(hist), 1), dtype=np.int64), hist.diffs, hist.kinds),
                          where=f"accumulate {self.node.name!r}")
        # Columns: the count and int weights always; of the float weights' limb slots, those this step meets.
        slots = np.arange(m1, dtype=np.int64)
        if q:
            slots = np.union1d(slots, np.union1d(j, tot.cols[k] if len(tot) else slots))
        width = len(slots)
        after = np.zeros((len(starts), width), dtype=np.int64)
        idx = lookup_rows(groups, list(tot.cols[:k])) if len(tot) else np.zeros(0, dtype=np.int64)
        hit = idx >= 0
        after[idx[hit], np.searchsorted(slots, tot.cols[k][hit])] = tot.diffs[hit]
        # Events: the distinct (group, time) pairs, in time order per group.
        t = new.times[:, 0]
        order = np.lexsort((t, gid))
        eg, et = gid[order], t[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = (eg[1:] != eg[:-1]) | (et[1:] != et[:-1])
        eid = np.cumsum(first) - 1
        delta = np.zeros((int(first.sum()), width), dtype=np.int64)
        delta[eid, np.searchsorted(slots, j[order])] = new.diffs[order]
        ev_g, ev_t = eg[first], et[first]
        prev, cur, bad = running_sums(after, ev_g, delta)
        if bad >= 0:
            g = tuple(c[bad].item() for c in groups)
            raise SchemaError(f"accumulate {self.node.name!r}: a running sum of the group with fields {g} "
                              f"passes int64 (count, weighted sum or a float weight's limb)")
        parts = []
        for vec, sign in ((prev, -1), (cur, 1)):
            sel = np.flatnonzero(vec[:, 0])
            cols = tuple(c[ev_g[sel]] for c in groups) + tuple(vec[sel, i].copy() for i in range(m1))
            for i in range(q):
                lo, hi = np.searchsorted(slots, [m1 + i * SLOTS, m1 + (i + 1) * SLOTS])
                cols += (round_limbs(np.ascontiguousarray(vec[sel, lo:hi]), slots[lo:hi] - (m1 + i * SLOTS)),)
            parts.append(Updates(cols, ev_t[sel].reshape(-1, 1), np.full(len(sel), sign, dtype=np.int64),
                                 new.kinds[:k] + ("i",) * m1 + ("f",) * q))
        return consolidate(Updates.concat(parts))


@kernel("operators.reduce")
def running_sums(after, ev_g, delta):
    """Each event's group vector before and after it; ``(prev, cur, bad)``.

    ``after``: ``(G, m1)`` totals of each group once every event is
    applied; ``ev_g``: the group of each event, sorted (events of a group
    in time order); ``delta``: ``(E, m1)`` each event's change.  The
    totals before the first event of a group are ``after`` minus the sum
    of its events; then ``cur[e] = prev[e] + delta[e]`` and
    ``prev[e + 1] = cur[e]`` within the group.  ``bad`` is a group whose
    sum passed int64 at some point (-1 if none).  O(E m1), one pass.
    """
    E, m1 = delta.shape
    big = np.iinfo(np.int64).max
    small = np.iinfo(np.int64).min
    prev = np.empty((E, m1), dtype=np.int64)
    cur = np.empty((E, m1), dtype=np.int64)
    state = np.empty(m1, dtype=np.int64)
    e0 = 0
    while e0 < E:
        g = ev_g[e0]
        e1 = e0
        while e1 < E and ev_g[e1] == g:
            e1 += 1
        for i in range(m1):
            s = after[g, i]
            for e in range(e0, e1):
                x = delta[e, i]
                # s - x, checked
                if (x < 0 and s > big + x) or (x > 0 and s < small + x):
                    return prev, cur, g
                s -= x
            state[i] = s
        for e in range(e0, e1):
            for i in range(m1):
                s = state[i]
                x = delta[e, i]
                prev[e, i] = s
                if (x > 0 and s > big - x) or (x < 0 and s < small - x):
                    return prev, cur, g
                s += x
                cur[e, i] = s
                state[i] = s
        e0 = e1
    return prev, cur, -1


def running_sums_reference(after, ev_g, delta):
    """:func:`running_sums` in plain Python integers (the oracle its tests compare with)."""
    E, m1 = delta.shape
    prev = [[0] * m1 for _ in range(E)]
    cur = [[0] * m1 for _ in range(E)]
    groups: dict[int, list[int]] = {}
    for e in range(E):
        groups.setdefault(int(ev_g[e]), []).append(e)
    for g, evs in groups.items():
        state = [int(after[g, i]) - sum(int(delta[e, i]) for e in evs) for i in range(m1)]
        # The kernel subtracts one event at a time: any partial difference past int64 is an overflow.
        for i in range(m1):
            s = int(after[g, i])
            for e in evs:
                s -= int(delta[e, i])
                if not _I64_MIN <= s <= _I64_MAX:
                    return prev, cur, g
        for e in evs:
            for i in range(m1):
                prev[e][i] = state[i]
                state[i] += int(delta[e, i])
                if not _I64_MIN <= state[i] <= _I64_MAX:
                    return prev, cur, g
                cur[e][i] = state[i]
    return prev, cur, -1
