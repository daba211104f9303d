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
never half-applied, only partly fused.

One call may run the next rounds too, a chain, where the scheduler would
run nothing but them (one worker; a reduce whose output goes straight
back to the variable; no other member with work) and no spine
would merge in between (:meth:`Round._chain`).  A round of the chain
starts from the one before's output, as the variable's step would take
it; Python then records each round's batches, counters and output in
the steps' order (:meth:`Round._replayed`), and the scheduler goes on
after the last round (``IterativeScope.rounds_ahead``).  At one update
an advance, reach runs about eight rounds an update in about four calls.
``tests/operators/test_round.py`` checks fused runs, chained or not,
against unfused ones, step by step.
"""
from __future__ import annotations

import numpy as np

from ddflow.base.columnar import frozen
from ddflow.base.kernels import SMALL_ROWS
from ddflow.base.native import kernel
from ddflow.base.updates import Updates
from ddflow.errors import DataflowError
from ddflow.graph.node import Node, complete_row, ready_split
from ddflow.operators.feedback import feedback_round_into
from ddflow.operators.join import JoinNode, join_table_into
from ddflow.operators.reduce.iterate import LoopTactic, loop_step
from ddflow.operators.reduce.node import ReduceNode
from ddflow.operators.reduce.walk import MODES, NUMBERED, NUMPY_SORT_ABOVE, WalkTactic, walk_step
from ddflow.operators.reduce.tactic import DONE
from ddflow.operators.route import Route, route_of
from ddflow.traces import layout
from ddflow.traces.arena import has_room

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
        then goes on as usual.  The rounds after it that the call ran too
        (a chain) are recorded in order, and reported to the scheduler
        through the loop's ``rounds_ahead``.  O(the three kernels) a
        round, one compiled call.
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
        chain = self._chain(kinds, out_kinds, bound, (at.spine, it.spine, ot.spine))
        rk, rt = frozen(np.ascontiguousarray(held.cols[0]), np.ascontiguousarray(held.times)) \
            if held is not None else (_NO_KEYS, _NO_TIMES)  # read-only both ways: one signature
        stage, R, B, cols, times, ds, later, later_t, status, taken = loop_round(
            K, diffs, m, bound, *fed, et.spine.table().matrix, len(et.kinds), self.delta_left, layout.CHECK_ABOVE,
            *joined, pk, pt, len(out_kinds), logic.scalar_code if self.walk < 0 else -1, self.walk,
            getattr(logic, "k", 1), NUMPY_SORT_ABOVE, hk, ht, *bo, SMALL_ROWS, chain, rk, rt)
        rounds = R.tolist()
        k1, n1, used1, k2, n2, used2, _, _ = rounds[0]
        if stage == NOTHING:
            return False
        if stage == FED:  # the join's output is not for an arena: the join's step takes the batch as usual
            self.fed.written(kinds, k1, *_unpacked(B, len(at.kinds)), used1)
            return True
        self._handed(self.fed, kinds, k1, n1, used1, join)
        if stage == JOINED:  # the reduce's step takes the batch (and raises what its kernel reported)
            self.joined.written(jkinds, k2, *_unpacked(B, len(it.kinds)), used2)
            return True
        used, o, last = bo[1], 0, len(rounds) - 1
        for r, (k1, n1, used1, k2, n2, used2, n_out, now_used) in enumerate(rounds):
            if r:  # a chained round: what the unfused round asks and takes, in its order (see _replayed)
                self._replayed(r, rounds[r - 1])
                self._handed(self.fed, kinds, k1, n1, used1, join)
            if k2:
                self._handed(self.joined, jkinds, k2, n2, used2, red)
            out_r = (cols[:, o: o + n_out], times[o: o + n_out], ds[o: o + n_out])
            if r < last:  # its output went into the arena (else no round followed): emitted, the feedback included
                tactic.output_written(Updates.unchecked(tuple(out_r[0]), out_r[1], out_r[2], out_kinds), now_used)
            elif self.walk >= 0:
                tactic.finish_round(*out_r, later, later_t, now_used, used, bound, out_kinds,
                                    self._still_held(held, taken))
            else:
                tactic.finish(*out_r, later, later_t, status, now_used, used, bound, it.kinds, out_kinds)
            used, o = now_used, o + n_out
        if last:
            self.fed.source.scope.rounds_ahead = last
        return True

    @staticmethod
    def _still_held(held: Updates | None, taken: np.ndarray) -> Updates | None:
        """The walk's held input that no round of the chain took (``taken``: per row of ``held``), or None."""
        if held is None or not taken.any():
            return held
        keep = np.flatnonzero(taken == 0)
        return held.take(keep) if len(keep) else None

    def _chain(self, kinds: tuple[str, ...], out_kinds: tuple[str, ...], bound: np.ndarray, spines: tuple) -> int:
        """How many rounds :func:`loop_round` may run from this one: 1 (this round alone) unless all of these hold.

        Running round ``r + 1`` inside the call is what the scheduler would
        do next when nothing else in the loop could act before it: one
        worker, whose scheduler lets the loop chain (``chain_limit``, also
        the rounds left before ``max_iterations``); the reduce's output goes
        straight back to the variable, whose feedback then has the kinds
        this round's had, and otherwise only out of the loop; and no
        other member has work at any iteration of this outer time (what
        reaches them comes from outside the loop, not from the round).
        (A walk's input held for later iterations is no obstacle: the
        kernel gives each chained round the rows at its iteration, as the
        walk's step would take them.)  Each spine must take the rounds'
        batches without merging
        (:meth:`traces.spine.Spine.quiet_writes`), so that recording them
        after the call, in the steps' order, is recording each at once.
        O(members + spines).
        """
        variable, red = self.fed.source, self.reduce
        loop = variable.scope
        limit = loop.chain_limit
        if limit <= 1 or kinds != out_kinds or variable.queues[0] or variable.held:
            return 1
        for t, port in red.targets:
            if t is variable and port != variable.feedback_port or t is not variable and loop.member_of(t) is not None:
                return 1
        if variable.feedback_source is not red:
            return 1
        later = bound.copy()
        later[-1] = np.iinfo(np.int64).max
        for m, nested in loop.plan().steps:
            if nested or m is not variable and m is not self.join and m is not red and m.has_ready_work(later):
                return 1
        for s in spines:
            limit = min(limit, s.quiet_writes())
        return limit

    def _replayed(self, r: int, before: list[int]) -> None:
        """Before recording chained round ``r``: ask each arena for its target, as the round's steps would.

        The kernel wrote round ``r``'s batches where the arenas now point
        (no merge came between: :meth:`_chain`), so each
        :meth:`traces.arena.Arena.written` finds the target it expects;
        ``before``, round ``r - 1``'s row of the kernel's ``R``, says where
        that is, and is checked.  The variable's feedback, round ``r - 1``'s
        output, is what the kernel took: it leaves the variable's queue as
        the variable's step would dequeue it.  O(1).
        """
        variable = self.fed.source
        fb = variable.dequeue(1)
        spines = (self.fed.arrangement.trace.spine, self.joined.arrangement.trace.spine,
                  self.reduce.tactic.out_trace.spine)
        for spine, used in zip(spines, (before[2], before[5], before[7])):
            arena = spine.arena_free(SMALL_ROWS)
            if fb is None or arena is None or arena.target()[1] != used:
                raise DataflowError(f"loop {variable.scope.name!r}: internal error, round {r} of a fused chain "
                                    "does not follow from the round before it")

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


def _round(K, diffs, m, bound, idx1, buf1, used1, T1, at1, ET, e_arity, delta_left, limit,
           idx2, buf2, used2, T2, at2, pk, pt, out_arity, code, walk, k, sort_above, hk, ht,
           bufO, usedO, TO, atO, small):
    """One loop round: the variable's feedback, the join reading it, the reduce reading the join.

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
    to insert).  A stage that does not finish wrote nothing.  A kernel
    helper (:func:`loop_round` runs it once a round).  Cost: as the three
    kernels.
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


@kernel("operators")
def loop_round(K, diffs, m, bound, idx1, buf1, used1, T1, at1, ET, e_arity, delta_left, limit,
               idx2, buf2, used2, T2, at2, pk, pt, out_arity, code, walk, k, sort_above, hk, ht,
               bufO, usedO, TO, atO, small, chain, rk, rt):
    """Loop rounds in one call: round ``bound[-1] - 1`` (:func:`_round`), then up to ``chain - 1`` after it.

    The arguments are :func:`_round`'s, and ``chain``: the most rounds to
    run.  A round after the first runs where the one before it finished
    whole and its output, of 1 to ``small`` updates, went into the
    output's arena (the variable's next feedback, as its usual step takes
    it), and each arena has the words for another batch of ``small``
    and a row (the caller's ``chain`` keeps within what the spines take
    without merging).  It starts from that output, one
    iteration on, with the round's seeds left for later as its pending
    ones; a walk's held input that is not complete at the first round
    (keys ``rk`` at times ``rt``) joins the seeds of the round where it
    is, first, as the walk's step would take it.  A later round that does
    not finish whole is dropped: what it wrote lies past the words
    reported used, and its row past the arena's last, which the next
    batch overwrites.

    Returns ``(stage, R, B, cols, times, diffs, later, later_t,
    status, taken)``: the first round's stage, ``B`` and ``status`` as
    :func:`_round` returns them; per round run a row of ``R``: ``(k1,
    n1, used1, k2, n2, used2, n_out, usedO)``, the updates each routed
    stage emitted and its arrangement took, the output's updates, and
    the words then used in each arena; the rounds' outputs one after
    the other (``cols`` by columns), the last round's seeds for later,
    and per row of ``rk`` whether a round took it (1) or it stays held
    (0).  Cost: as the three kernels, a round.
    """
    R = np.zeros((max(chain, 1), 8), dtype=np.int64)
    # Writable copies (a few rows each): the later rounds' arrays are, so _round compiles for one signature.
    diffs, pk, pt, hk, ht = diffs.copy(), pk.copy(), pt.copy(), hk.copy(), ht.copy()
    stage, k1, n1, now1, k2, n2, now2, B, cols, times, ds, later, later_t, st, nowO = _round(
        K, diffs, m, bound, idx1, buf1, used1, T1, at1, ET, e_arity, delta_left, limit,
        idx2, buf2, used2, T2, at2, pk, pt, out_arity, code, walk, k, sort_above, hk, ht,
        bufO, usedO, TO, atO, small)
    R[0, 0], R[0, 1], R[0, 2], R[0, 3], R[0, 4], R[0, 5], R[0, 6], R[0, 7] = k1, n1, now1, k2, n2, now2, len(ds), nowO
    taken = np.zeros(len(rk), dtype=np.int64)
    if stage != ROUND or chain <= 1:
        return stage, R[:1], B, cols, times, ds, later, later_t, st, taken
    depth = K.shape[1] - m
    # The rounds' outputs, one after the other (grown by doubling); the last round's state besides.
    oc, ot, od = np.empty((out_arity, 2 * len(ds) + small), dtype=np.int64), \
        np.empty((2 * len(ds) + small, depth), dtype=np.int64), np.empty(2 * len(ds) + small, dtype=np.int64)
    oc[:, :len(ds)], ot[:len(ds)], od[:len(ds)] = cols, times, ds
    total, c, b = len(ds), 1, bound.copy()
    a1, a2, aO = at1 + (1 if n1 else 0), at2 + (1 if n2 else 0), atO + (1 if nowO != usedO else 0)
    u1, u2, uO = now1, now2, nowO
    last_out, last_used = len(ds), usedO
    while c < chain:
        if last_out == 0 or last_out > small or uO == last_used:
            break  # no feedback, or one the variable's usual step would not take in one call, or not in the arena
        if not (has_room(buf1, u1, small, len(idx1), depth) and has_room(buf2, u2, small, len(idx2), depth)
                and has_room(bufO, uO, small, out_arity, depth) and a1 < len(T1) and a2 < len(T2) and aO < len(TO)):
            break  # no words or no row left for a batch (unchecked writes: asked here whatever the caller said)
        b[-1] += 1
        n = last_out
        Kc = np.empty((n, out_arity + depth), dtype=np.int64)
        for i in range(n):
            for j in range(out_arity):
                Kc[i, j] = oc[j, total - n + i]
            for j in range(depth):
                Kc[i, out_arity + j] = ot[total - n + i, j]
        Dc = od[total - n: total].copy()
        pkc = np.ascontiguousarray(later.T)
        due = np.zeros(len(rk), dtype=np.int64)  # the held rows complete now, in their order
        nd = 0
        for i in range(len(rk)):
            if not taken[i] and complete_row(rt, i, b):
                due[nd] = i
                nd += 1
        hkc, htc = np.empty(nd, dtype=np.int64), np.empty((nd, depth), dtype=np.int64)
        for x in range(nd):
            hkc[x] = rk[due[x]]
            htc[x] = rt[due[x]]
        stage_c, k1, n1, now1, k2, n2, now2, _, cols, times, ds, later_c, later_tc, st_c, now_c = _round(
            Kc, Dc, out_arity, b, idx1, buf1, u1, T1, a1, ET, e_arity, delta_left, limit,
            idx2, buf2, u2, T2, a2, pkc, later_t, out_arity, code, walk, k, sort_above, hkc, htc,
            bufO, uO, TO, aO, small)
        if stage_c != ROUND:
            break  # dropped: the caller's next round runs it as usual
        for x in range(nd):
            taken[due[x]] = 1
        R[c, 0], R[c, 1], R[c, 2], R[c, 3], R[c, 4], R[c, 5], R[c, 6], R[c, 7] = \
            k1, n1, now1, k2, n2, now2, len(ds), now_c
        if total + len(ds) > len(od):
            grow = 2 * (total + len(ds))
            oc2, ot2, od2 = np.empty((out_arity, grow), dtype=np.int64), np.empty((grow, depth), dtype=np.int64), \
                np.empty(grow, dtype=np.int64)
            oc2[:, :total], ot2[:total], od2[:total] = oc[:, :total], ot[:total], od[:total]
            oc, ot, od = oc2, ot2, od2
        oc[:, total: total + len(ds)], ot[total: total + len(ds)], od[total: total + len(ds)] = cols, times, ds
        total += len(ds)
        a1, a2, aO = a1 + (1 if n1 else 0), a2 + (1 if n2 else 0), aO + (1 if now_c != uO else 0)
        last_out, last_used = len(ds), uO
        u1, u2, uO = now1, now2, now_c
        later, later_t, st = later_c, later_tc, st_c
        c += 1
    return stage, R[:c], B, np.ascontiguousarray(oc[:, :total]), ot[:total], od[:total], later, later_t, st, taken
