"""A loop round in one compiled call: variable, join and distinct, count or min (max, top_k) run as one kernel.

Reach's body, ``reach.join(edges).project(2, 1).concat(start).distinct()``,
is at one update a step about ten rounds of a few rows each.  Each
stateful step of a round is one compiled call already, and writes its
output straight into the trace that reads it (:mod:`ddflow.operators.route`),
so a round is three kernels with Python between them: the variable's
feedback (:func:`~ddflow.operators.iterate.feedback_round_into`), the
join (:func:`~ddflow.operators.join.join_table_into`) and the loop
reduce (:func:`~ddflow.operators.reduce.iterate.loop_step`).  Where the
body has that shape, :func:`loop_round` calls the three in one kernel and
Python only records what they wrote and emits the reduce's output.

The shape (:func:`round_of`): the variable is routed to an arrangement
read by one join alone (not a self-join); the join is routed to an
arrangement read by one reduce alone, whose tactic is the loop tactic's
one-call step (count, distinct) or the walk's (a min, max or top_k of
one integer value, as connected components by least label has it:
:func:`~ddflow.operators.reduce.walk.walk_step`).  A round runs fused,
at the variable's step, when running the steps one by one would do
exactly what it does:

* the variable's step is its one-call step (feedback alone, due, small);
* nothing is queued at the join or the reduce, and no other member
  between the variable and the reduce in the round's order has work it
  could do (it could reach the join or the reduce first);
* the three arenas have room without a merge (the steps would merge at
  the same inserts), the other side of the join has a trace, and the
  kinds match all the way (nothing is coerced or fixed on the way);
* a walk's step would be its one call, keeping no history (the advance
  moved the outer time by one at most:
  :meth:`~ddflow.operators.reduce.walk.WalkTactic.steps_in_one_call`),
  and the join's output is complete (the walk holds what is not).  What
  the walk holds from earlier steps and is now complete joins the seeds,
  as its step would take it (at one update an advance, the first round
  of an advance reaches every later iteration the variable changed at).

Otherwise, or when a stage's output is too large for an arena, the
stages the kernel did not finish are left to the usual steps, which find
the last finished stage's batch queued as they would have: the round is
never half-applied, only partly fused.  ``tests/operators/test_round.py``
checks fused runs against unfused ones, step by step.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.columnar import frozen
from ddflow.base.jit import lazy_jit
from ddflow.base.kernels import SMALL_ROWS
from ddflow.graph.node import Node, ready_split
from ddflow.operators.feedback import feedback_round_into
from ddflow.operators.join import JoinNode, join_table_into
from ddflow.operators.reduce.iterate import LoopTactic, loop_step
from ddflow.operators.reduce.node import ReduceNode
from ddflow.operators.reduce.walk import MODES, NUMBERED, NUMPY_SORT_ABOVE, WalkTactic, walk_step
from ddflow.operators.reduce.tactic import DONE
from ddflow.operators.route import Route, route_of
from ddflow.traces import layout

_NO_KEYS, _NO_TIMES = frozen(np.zeros(0, dtype=np.int64), np.zeros((0, 2), dtype=np.int64))
#: What :func:`loop_round` finished: nothing (the variable's step runs as usual); the variable's feedback
#: (in its arrangement; the join's step runs as usual); and the join's output (in the reduce's input
#: arrangement; the reduce's step runs as usual); or the whole round.
NOTHING, FED, JOINED, ROUND = 0, 1, 2, 3


class Round:
    """A loop body fused by :func:`loop_round`: a variable, the join reading it, the reduce reading the join.

    ``fed``: the variable's (its ``source``) route to the join's arrangement; ``joined``:
    the join's route to the reduce's; ``between``: the other members the
    round steps between the variable and the reduce, which must have no
    work for the round to run fused.
    """

    __slots__ = ("fed", "join", "delta_left", "other", "joined", "reduce", "between", "walk")

    def __init__(self, fed: Route, join: JoinNode, joined: Route, reduce: ReduceNode, between: tuple[Node, ...]):
        self.fed, self.join, self.joined, self.reduce, self.between = fed, join, joined, reduce, between
        self.delta_left = join.left is fed.arrangement
        self.other = join.right if self.delta_left else join.left
        #: The reduce's walk mode (a min, max or top_k: :func:`walk_step`), or -1 (count, distinct: :func:`loop_step`).
        self.walk = MODES[reduce.logic.name] if type(reduce.tactic) is WalkTactic else -1

    def run(self, K: np.ndarray, diffs: np.ndarray, kinds: tuple[str, ...], bound: np.ndarray) -> bool:
        """Run a round from the variable's feedback ``K`` (rows then times), ``diffs``; whether it ran.

        False, with nothing changed but arenas made ready, where the
        module docstring's conditions do not hold: the variable's step
        then goes on as usual.  O(the three kernels), one compiled call.
        """
        join, red = self.join, self.reduce
        if join.queues[0] or join.queues[1] or red.queues[0]:
            return False
        for m in self.between:
            if m.has_ready_work(bound):
                return False
        a, a2 = self.fed.arrangement, self.joined.arrangement
        at, et, it, ot = a.trace, self.other.trace, a2.trace, red.tactic.out_trace
        if at is None or et is None or it is None or ot is None or not (et.ints and ot.ints):
            return False
        if at.kinds[0] != et.kinds[0] or a.kinds != at.kinds or a2.kinds != it.kinds:
            return False
        jkinds = at.kinds + et.kinds[1:] if self.delta_left else et.kinds + at.kinds[1:]
        out_kinds = red.logic.out_kinds(it.kinds)
        if ot.kinds != out_kinds or len(it.kinds) < red.logic.min_arity or red.kinds != out_kinds:
            return False
        tactic = red.tactic
        if self.walk >= 0:
            if not tactic.steps_in_one_call(it, bound):
                return False
            pk, pt, hk, ht, held = tactic.round_seeds(bound)
            hk, ht = frozen(np.ascontiguousarray(hk), np.ascontiguousarray(ht))
        else:
            (pk, pt), hk, ht, held = tactic.pending_keys(len(it.kinds)), _NO_KEYS, _NO_TIMES, None
        # Before any table is read: making room may merge (the variable's arrangement, as its own step would).
        fed = self.fed.target(kinds)
        if fed is None:
            return False
        joined = self.joined.target(jkinds, (at, et), merge=False)
        out = ot.spine.arena_free(SMALL_ROWS)
        if joined is None or out is None:
            return False
        m = len(kinds)
        bo = out.target()
        logic = red.logic
        stage, k1, n1, used1, k2, n2, used2, B, cols, times, ds, later, later_t, status, now_used = loop_round(
            K, diffs, m, bound, *fed, et.spine.table().matrix, len(et.kinds), self.delta_left, layout.CHECK_ABOVE,
            *joined, pk, pt, len(out_kinds), logic.scalar_code if self.walk < 0 else -1, self.walk,
            getattr(logic, "k", 1), NUMPY_SORT_ABOVE, hk, ht, *bo, SMALL_ROWS)
        if stage == NOTHING:
            return False
        if stage == FED:  # the join's output is not for an arena: the join's step takes the batch as usual
            self.fed.written(kinds, k1, *_unpacked(B, len(at.kinds)), used1)
            return True
        self._handed(self.fed, kinds, k1, n1, used1, join)
        if stage == JOINED:  # the reduce's step takes the batch (and raises what its kernel reported)
            self.joined.written(jkinds, k2, *_unpacked(B, len(it.kinds)), used2)
            return True
        if k2:
            self._handed(self.joined, jkinds, k2, n2, used2, red)
        if self.walk >= 0:
            tactic.finish_round(cols, times, ds, later, later_t, now_used, bo[1], bound, out_kinds, held)
        else:
            tactic.finish(cols, times, ds, later, later_t, status, now_used, bo[1], bound, it.kinds, out_kinds)
        return True

    @staticmethod
    def _handed(route: Route, kinds: tuple[str, ...], k: int, n: int, used: int, reader: Node) -> None:
        """``route`` wrote ``n`` of ``k`` updates, which its arrangement emitted to ``reader`` (inside the kernel)."""
        route.counted(kinds, k, n, used)
        if n:
            route.arrangement.updates_out += n
            reader.updates_in += n


def _unpacked(B: np.ndarray, m: int) -> tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
    """A batch :func:`loop_round` packed as rows of ``m`` fields, times, diff: its columns, times and diffs."""
    return (tuple(np.ascontiguousarray(B[:, j]) for j in range(m)), np.ascontiguousarray(B[:, m:-1]),
            np.ascontiguousarray(B[:, -1]))


def round_of(variable: Node) -> Round | None:
    """The fused round starting at ``variable``, or None where its loop body has another shape.

    Kept on the node until the graph changes: O(1), O(body) when found again.
    """
    return variable.graph_cached("_round", _find)


def _find(variable: Node) -> Round | None:
    fed = route_of(variable)
    if fed is None or len(fed.arrangement.targets) != 1:
        return None
    join, _ = fed.arrangement.targets[0]
    if type(join) is not JoinNode or join.left is join.right:
        return None
    joined = route_of(join)
    if joined is None or len(joined.arrangement.targets) != 1:
        return None
    red, _ = joined.arrangement.targets[0]
    if type(red) is not ReduceNode or red.source is not joined.arrangement:
        return None
    logic = red.logic
    loop = type(red.tactic) is LoopTactic and logic.scalar_code is not None
    walks = type(red.tactic) is WalkTactic and logic.name in MODES and logic.name not in NUMBERED \
        and not logic.partition and not logic.desc
    if not (loop or walks):
        return None
    scope = variable.scope
    plan = scope.plan()
    if not plan.local or any(scope.member_of(n) is not n for n in (join, red)):
        return None
    steps = [m for m, _ in plan.steps]
    if variable not in steps or join not in steps or red not in steps:
        return None
    v, j, r = steps.index(variable), steps.index(join), steps.index(red)
    if not v < j < r:
        return None
    between = tuple(m for m, loop in plan.steps[v + 1: r] if m is not join)
    if any(loop for _, loop in plan.steps[v + 1: r]):
        return None  # a nested loop runs rounds of its own in between
    return Round(fed, join, joined, red, between)


def _packed(C, T, D, n):
    """The first ``n`` updates of columns ``C`` (as rows), times ``T`` and diffs ``D`` as one matrix of rows."""
    m, depth = C.shape[0], T.shape[1]
    B = np.empty((n, m + depth + 1), dtype=np.int64)
    for i in range(n):
        for j in range(m):
            B[i, j] = C[j, i]
        for c in range(depth):
            B[i, m + c] = T[i, c]
        B[i, m + depth] = D[i]
    return B


@lazy_jit(uses=(_packed,), calls=(feedback_round_into, join_table_into, loop_step, walk_step, ready_split))
def loop_round(K, diffs, m, bound, idx1, buf1, used1, T1, at1, ET, e_arity, delta_left, limit,
               idx2, buf2, used2, T2, at2, pk, pt, out_arity, code, walk, k, sort_above, hk, ht,
               bufO, usedO, TO, atO, small):
    """A loop round: the variable's feedback, the join reading it, the reduce reading the join, one call.

    ``K``/``diffs``/``m``/``bound``: as :func:`feedback_round_into`, whose
    output goes to the arena ``idx1, buf1, used1, T1, at1``; ``ET``: the
    table of the join's other side (``e_arity`` fields; the variable's
    arrangement is the join's left side when ``delta_left``); the join's
    output goes to the arena ``idx2, ...``, of the reduce's input, and
    :func:`loop_step` (pending seeds ``pk``/``pt``; logic ``code``) reads
    it there and writes its output to the arena ``bufO, usedO, TO, atO``.
    With ``walk`` a walk mode (:data:`~ddflow.operators.reduce.walk.MODES`,
    else -1) the reduce is :func:`~ddflow.operators.reduce.walk.walk_step`
    instead (mode ``walk``, ``k``, ``sort_above``; the pending keys are
    ``pk``'s one column, and come back as ``later``'s one row; the keys
    ``hk`` at times ``ht``, the walk's held input now complete, are seeds
    too), and a join output not all complete under ``bound`` is left to
    its usual step, which holds what is not.  Returns
    ``(stage, k1, n1, used1, k2, n2, used2, B, cols, times, diffs, later,
    later_t, status, used)``: the last stage finished (:data:`NOTHING`,
    :data:`FED`, :data:`JOINED`, :data:`ROUND`); per routed stage, the
    updates it emitted, those its arrangement took and the words then used
    there; ``B``, the batch the usual step of the next stage takes, as
    rows of fields, times and diff (empty at :data:`ROUND`); and
    :func:`loop_step`'s output, seeds, status and words used (meaningful
    at :data:`ROUND`; an output too large for the arena is left to Python
    to insert).  A stage that does not finish wrote nothing.  Few arrays
    returned, since numba boxes each with a Python call.  Cost: as the
    three kernels.
    """
    depth = K.shape[1] - m
    ng = len(idx2)
    none1, noT = np.empty(0, dtype=np.int64), np.empty((0, depth), dtype=np.int64)
    no_cols, no_later = np.empty((out_arity, 0), dtype=np.int64), np.empty((ng, 0), dtype=np.int64)
    k1, C1, T1s, D1, due, overflow, now1 = feedback_round_into(K, diffs, m, bound, idx1, buf1, used1, T1, at1)
    if not due or overflow:
        return NOTHING, k1, 0, used1, 0, 0, used2, _packed(C1, T1s, D1, 0), \
            no_cols, noT, none1, no_later, noT, DONE, usedO
    n1 = len(D1)
    if n1 == 0:  # nothing reaches the join: the reduce's step (pending seeds) runs as usual
        return FED, k1, 0, now1, 0, 0, used2, _packed(C1, T1s, D1, 0), no_cols, noT, none1, no_later, noT, DONE, usedO
    M, MD, status, k2, C2, T2s, D2, now2 = join_table_into(ET, C1, T1s, D1, e_arity, depth, delta_left, limit,
                                                           idx2, buf2, used2, T2, at2)
    if status != 0:
        return FED, k1, n1, now1, 0, 0, used2, _packed(C1, T1s, D1, n1), \
            no_cols, noT, none1, no_later, noT, DONE, usedO
    n2 = len(D2)
    in_T = T2[: at2 + (1 if n2 else 0)]
    out_T = TO[:atO]
    if walk >= 0:
        if ready_split(T2s, bound)[1] != n2:  # the walk holds what is not complete: its usual step
            return JOINED, k1, n1, now1, k2, n2, now2, _packed(C2, T2s, D2, n2), \
                no_cols, noT, none1, no_later, noT, DONE, usedO
        nh = len(hk)  # the seeds: what the step would dequeue, the held input first
        sk, sT = np.empty(nh + n2, dtype=np.int64), np.empty((nh + n2, depth), dtype=np.int64)
        sk[:nh], sT[:nh] = hk, ht
        sk[nh:], sT[nh:] = C2[0], T2s
        cols, times, ds, keys, key_offs, V, val_offs, row, pend_k, later_t, st, nowO = walk_step(
            walk, k, sk, sT, np.ascontiguousarray(pk[:, 0]), pt, bound, in_T, out_T, sort_above,
            bufO, usedO, TO, atO, small)
        later = np.empty((1, len(pend_k)), dtype=np.int64)
        later[0, :] = pend_k
    else:
        nk = np.ascontiguousarray(C2.T)  # the rows, as loop_step takes its new seeds
        cols, times, ds, keys, key_offs, V, val_offs, row, later, later_t, st, nowO = loop_step(
            nk, T2s, pk, pt, bound, in_T, out_T, out_arity, code, bufO, usedO, TO, atO, small)
    if st != DONE:
        return JOINED, k1, n1, now1, k2, n2, now2, _packed(C2, T2s, D2, n2), \
            no_cols, noT, none1, no_later, noT, st, usedO
    return ROUND, k1, n1, now1, k2, n2, now2, _packed(C2, T2s, D2, 0), cols, times, ds, later, later_t, st, nowO
