"""Fused loop rounds (``operators/round.py``): a round in one call is the round in three steps, exactly.

A fused run must be the unfused run (routes still on) and the run with
neither: the same output at every step, the same counters and records
held on every operator, the same seeds pending and input held at every
reduce, the same column kinds on every node.  The round
kernel, native, is checked against its plain reference on the
arguments a run passes it, arenas included.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow
import ddflow.operators.round as round_module
import ddflow.operators.route as route_module
from ddflow.operators.reduce.iterate import LoopTactic
from ddflow.operators.reduce.walk import MODES, WalkTactic
from ddflow.operators.round import ROUND, round_of
from kernel_modes import as_run
from tests.operators.test_route import _steps, same_writes, schedules


def _bodies(edges):
    """Loop bodies of reach's shape (fused), with the variable on either side of the join and a count; and not."""
    roots = edges.filter(lambda e: e[0] < 2).project(0, 0)
    bound = dict(max_iterations=100)  # a loop that fails to converge fails at once
    reach = roots.iterate(lambda r: r.join(edges).project(2, 1).concat(roots).distinct(), **bound)
    # The variable on the join's right: (node, next) joined with (node, root) is (node, next, root).
    right = roots.iterate(lambda r: edges.join(r).project(1, 2).concat(roots).distinct(), **bound)
    # count: the reduce's output (node, root, count) goes back through a projection.
    counted = roots.iterate(lambda r: r.join(edges).project(2, 1).concat(roots).count().project(0, 1), **bound)
    # Not fused: the variable is read twice.
    twice = roots.iterate(lambda r: r.join(edges).project(2, 1).concat(r.project(0, 0)).distinct(), **bound)
    # Components by min label: the walk's one call (fused when an advance moves one time).
    both = edges.concat(edges.project(1, 0))
    start = both.project(0, 0)
    labels = start.iterate(lambda lab: lab.join(both).project(2, 1).concat(start).min(), **bound)
    # Each node's two least labels along edges one way: top_k's mode and k through the fused walk.
    tails = edges.project(0, 0)
    two = tails.iterate(lambda lab: lab.join(edges).project(2, 1).concat(tails).top_k(2), **bound)
    # The least (label, node) pair: two values, so the walk's step is not its one call, and the round never fuses.
    pairs = both.project(0, 0, 1)
    least = pairs.iterate(lambda lab: lab.join(both).project(3, 1, 2).concat(pairs).min(), **bound)
    return reach, right, counted, twice, labels, two, least


def _pending(flow):
    """Every reduce's seeds waiting for later rounds, and the input a walk holds: as the steps would leave them."""
    out = []
    for n in flow.top.all_nodes():
        t = getattr(n, "tactic", None)
        if isinstance(t, LoopTactic) and t.pending_rows is not None:
            out.append((n.name, [c.tolist() for c in t.pending_rows.cols], t.pending_rows.times.tolist()))
        elif isinstance(t, WalkTactic):
            if t.pending_keys is not None:
                out.append((n.name, t.pending_keys.tolist(), t.pending_times.tolist()))
            if t.held is not None:
                out.append((n.name, [c.tolist() for c in t.held.cols], t.held.times.tolist()))
    return out


def _run(schedule, fused: bool = True, routed: bool = True):
    with pytest.MonkeyPatch.context() as mp:
        if not fused:
            mp.setattr(round_module, "_find", lambda node: None)
        if not routed:
            mp.setattr(route_module, "_find", lambda node: None)
        return _steps(schedule, _bodies, _pending)


@st.composite
def unit_schedules(draw):
    """Edge updates at one data time an advance, the frontier one past it: a walk's rounds fuse only so."""
    out, present = [], []
    for t in range(draw(st.integers(1, 8))):
        rows, diffs = [], []
        for _ in range(draw(st.integers(0, 3))):
            if present and draw(st.booleans()):
                rows.append(present.pop(draw(st.integers(0, len(present) - 1))))
                diffs.append(-1)
            else:
                rows.append((draw(st.integers(0, 7)), draw(st.integers(0, 7))))
                diffs.append(1)
        present += [r for r, d in zip(rows, diffs) if d > 0]
        out.append((rows, [t] * len(rows), diffs, t + 1))
    return out


@settings(max_examples=30, deadline=None)
@given(st.one_of(schedules(), unit_schedules()))
def test_a_fused_run_is_the_unfused_run(schedule):
    fused = _run(schedule)
    assert fused == _run(schedule, fused=False)
    assert fused == _run(schedule, fused=False, routed=False)


def test_which_bodies_are_fused():
    with ddflow.Dataflow() as flow:
        _, edges = flow.new_collection("edges", schema=("i", "i"))
        for c in _bodies(edges):
            c.capture()
        edges.map(lambda e: (e[0], e[0])).iterate(  # a min whose variable is read twice
            lambda lab: lab.join(edges).project(2, 1).concat(lab).min()).capture()
        found = [round_of(n) is not None for n in flow.top.all_nodes() if type(n).__name__ == "VariableNode"]
    assert found == [True, True, True, False, True, True, True, False], found


def _arena_words(buf, T, rows, lo, hi):
    """Rows ``rows`` of a table whose addresses into ``buf`` are made offsets, and ``buf[lo:hi]``."""
    base, end = buf.ctypes.data, buf.ctypes.data + 8 * len(buf)
    R = T[rows].copy()
    inside = (R >= base) & (R < end)
    R[inside] -= base
    return R.tolist(), buf[lo:hi].tolist()


def test_the_round_kernel_native_is_its_plain_reference_on_a_run():
    """Every call of a run of the fused bodies: native and plain give the same, words too, walks and chains
    included."""
    kernel, other = as_run(round_module.loop_round, "native"), as_run(round_module.loop_round, "plain")
    stages, written, chains = [], [], []

    def both(*args):
        args = list(args)
        copies = [a.copy() if isinstance(a, np.ndarray) and a.flags.writeable else a for a in args]
        got = kernel(*args)
        want = other(*copies)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if isinstance(g, np.ndarray):
                assert g.shape == w.shape and g.tolist() == w.tolist()
            else:
                assert g == w
        same_writes(args, copies)  # every word and table row, where the checks below compare what was written
        # The arenas' (buf, used, T, at) are arguments 5-8, 14-17 and 27-30; the words used after each round
        # run are columns 2, 5 and 7 of the rounds' rows (result 1), a batch written where they grow.
        rounds = got[1].tolist()
        for (b, u, t, at), col in (((5, 6, 7, 8), 2), ((14, 15, 16, 17), 5), ((27, 28, 29, 30), 7)):
            used = [args[u]] + [row[col] for row in rounds]
            batches = sum(x != y for x, y in zip(used, used[1:]))
            if not batches:
                continue  # nothing written there (the row at ``at`` is whatever it was)
            written.append(col)
            rows = slice(args[at], args[at] + batches)
            assert _arena_words(args[b], args[t], rows, args[u], used[-1]) == \
                _arena_words(copies[b], copies[t], rows, args[u], used[-1])
        stages.append((got[0], args[22]))  # the stage, and the walk mode (-1: the loop tactic)
        chains.append(len(rounds))
        assert len(rounds) <= args[32]  # never more rounds than the chain (argument 32) allows
        return got

    rng = np.random.default_rng(5)
    schedule, t = [], 0
    present = []
    for a in range(24):  # then one data time an advance (a walk's rounds fuse)
        rows, times, diffs = [], [], []
        for _ in range(3):
            if present and rng.random() < 0.4:
                rows.append(present.pop(int(rng.integers(len(present)))))
                diffs.append(-1)
            else:
                rows.append((int(rng.integers(8)), int(rng.integers(8))))
                diffs.append(1)
            times.append(t + int(rng.integers(2)) if a < 12 else t)
        present += [r for r, d in zip(rows, diffs) if d > 0]
        t += 2 if a < 12 else 1
        schedule.append((rows, times, diffs, t))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(round_module, "loop_round", both)
        _steps(schedule, _bodies)
    assert {(ROUND, -1), (ROUND, MODES["min"]), (ROUND, MODES["top_k"])} <= set(stages)
    assert sorted(set(written)) == [2, 5, 7]
    assert max(chains) > 1  # rounds after the first ran in the same call


def _two_paths(edges):
    """Least labels along edges one way: at time 1 a new edge (0, 10) brings label 0 to node 50 a round earlier."""
    tails = edges.project(0, 0)
    return [tails.iterate(lambda lab: lab.join(edges).project(2, 1).concat(tails).min(), max_iterations=100)]


def test_a_fused_walk_pends_the_rounds_its_step_would():
    """Node 50 had label 0 from round 4 (0-1-2-3-50); at time 1 it has it from round 3 (0-10-11-50).

    The fused round at iteration 3 must pend node 50 at iteration 4, where
    its old change is to be undone, and node 99 likewise one round later:
    no other seed reaches them there.  Random graphs seldom have this shape.
    """
    schedule = [([(0, 1), (1, 2), (2, 3), (3, 50), (50, 99), (10, 11), (11, 50)], [0] * 7, [1] * 7, 1),
                ([(0, 10)], [1], [1], 2)]
    kernel, pended = round_module.loop_round, []

    def spy(*args):
        got = kernel(*args)
        if got[0] == ROUND and args[22] == MODES["min"]:
            pended.append((got[6].tolist(), got[7].tolist()))
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(round_module, "loop_round", spy)
        chained = _steps(schedule, _two_paths, _pending)
        mp.setattr(round_module.Round, "_chain", lambda *a: 1)  # each round's seeds returned by its own call
        fused = _steps(schedule, _two_paths, _pending)
        mp.setattr(round_module, "_find", lambda node: None)
        assert chained == fused == _steps(schedule, _two_paths, _pending)
    assert ([[50]], [[1, 3]]) in pended and ([[99]], [[1, 4]]) in pended
    assert ((50, 1), 1, -1) not in fused[0][-1][0]  # node 50 keeps label 0


def _count_reach(edges):
    """Reach from the nodes with a self-loop, counting paths' edge diffs: a count that can overflow in round 3."""
    roots = edges.filter(lambda e: e[0] == e[1]).project(0, 0)
    return [roots.iterate(lambda r: r.join(edges).project(2, 1).concat(roots).count().project(0, 1),
                          max_iterations=100)]


def _errors_fused_and_not(schedule, build, error, spy):
    """The messages of the ``error`` that ``build``'s run over ``schedule`` raises fused (kernel calls through
    ``spy``) and unfused."""
    errors = []
    for fused in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(round_module, "loop_round", spy)
            if not fused:
                mp.setattr(round_module, "_find", lambda node: None)
            with pytest.raises(error) as e:
                _steps(schedule, build)
            errors.append(str(e.value))
    return errors


def test_an_error_in_the_fused_reduce_is_the_reduces_own():
    """The count of (3, 0) adds 2**62 at rounds 2 and 3: the round's reduce stage fails, and the reduce raises."""
    schedule = [([(0, 0), (0, 1), (0, 4), (4, 2), (1, 3), (2, 3)], [0] * 6, [1, 1, 1, 1, 2**62, 2**62], 2)]
    kernel, stages = round_module.loop_round, []

    def spy(*args):
        stages.append((got := kernel(*args))[0])
        return got

    errors = _errors_fused_and_not(schedule, _count_reach, ddflow.SchemaError, spy)
    assert stages == [round_module.JOINED]
    assert errors[0] == errors[1] and "count(" in errors[0] and "past int64" in errors[0]


def _path_reach(limit):
    """Reach from node 0 along a path: one round a node, so the fused rounds chain as far as the arenas let them."""
    def build(edges):
        roots = edges.filter(lambda e: e[0] == 0).project(0, 0)
        return [roots.iterate(lambda r: r.join(edges).project(2, 1).concat(roots).distinct(), max_iterations=limit)]
    return build


def _rounds_run(flow):
    return [n.rounds_run for n in flow.top.nodes if hasattr(n, "rounds_run")]


def test_chained_rounds_are_the_rounds_one_by_one():
    """A path of 40 edges added one a step, then cut in the middle: the chained run is the unfused one, rounds too."""
    schedule = [([(i, i + 1)], [i], [1], i + 1) for i in range(40)]
    schedule += [([(20, 21)], [40], [-1], 41), ([(20, 21)], [41], [1], 42)]
    kernel, chains = round_module.loop_round, []

    def spy(*args):
        got = kernel(*args)
        chains.append(len(got[1]))
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(round_module, "loop_round", spy)
        chained = _steps(schedule, _path_reach(100), _rounds_run)
        mp.setattr(round_module.Round, "_chain", lambda *a: 1)
        single = _steps(schedule, _path_reach(100), _rounds_run)
        mp.setattr(round_module, "_find", lambda node: None)
        assert chained == single == _steps(schedule, _path_reach(100), _rounds_run)
    assert max(chains) > 2


def test_a_chain_takes_the_input_a_walk_held_at_its_round():
    """Least labels along a path: edge (30, 31) joins node 30's labels at iterations 0-30 at once.

    The walk holds the join's output at the later iterations; each chained
    round must take the rows of its own iteration, as the walk's step would.
    """
    def labels(edges):
        tails = edges.project(0, 0)
        return [tails.iterate(lambda lab: lab.join(edges).project(2, 1).concat(tails).min(), max_iterations=100)]

    schedule = [([(i, i + 1) for i in range(30)], [0] * 30, [1] * 30, 1), ([(30, 31)], [1], [1], 2),
                ([(30, 31), (0, 1)], [2, 2], [-1, -1], 3)]
    kernel, took = round_module.loop_round, []

    def spy(*args):
        got = kernel(*args)
        took.append(int(got[9].sum()))
        return got

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(round_module, "loop_round", spy)
        chained = _steps(schedule, labels, _pending)
        mp.setattr(round_module.Round, "_chain", lambda *a: 1)
        single = _steps(schedule, labels, _pending)
        mp.setattr(round_module, "_find", lambda node: None)
        assert chained == single == _steps(schedule, labels, _pending)
    assert max(took) > 1


def test_a_chain_stops_at_max_iterations():
    """A loop that needs more rounds than it may run fails as the unfused loop does, at the same round."""
    schedule = [([(i, i + 1) for i in range(30)], [0] * 30, [1] * 30, 1)]
    kernel, chains = round_module.loop_round, []

    def spy(*args):
        got = kernel(*args)
        chains.append(len(got[1]))
        return got

    errors = _errors_fused_and_not(schedule, _path_reach(29), ddflow.NonConvergence, spy)
    assert errors[0] == errors[1] and "max_iterations=29" in errors[0] and "iteration 30" in errors[0]
    assert max(chains) > 1


def test_the_native_round_kernel_refuses_arrays_that_do_not_fit_together():
    """What loop_round itself reads is checked at its entry (ValueError); the kernels it calls check theirs."""
    from ddflow.base.native import native_module

    loop_round = native_module().operators.loop_round
    i64 = np.int64

    def args(**change):
        a = dict(K=np.zeros((1, 4), i64), diffs=np.ones(1, i64), m=2, bound=np.array([5, 5], i64),
                 idx1=np.array([0, 1], i64), buf1=np.zeros(400, i64), used1=0, T1=np.zeros((2, 11), i64), at1=0,
                 ET=np.zeros((0, 11), i64), e_arity=2, delta_left=True, limit=1 << 20, idx2=np.array([0, 1], i64),
                 buf2=np.zeros(400, i64), used2=0, T2=np.zeros((2, 11), i64), at2=0, pk=np.zeros((0, 2), i64),
                 pt=np.zeros((0, 2), i64), out_arity=2, code=0, walk=-1, k=1, sort_above=64, hk=np.zeros(0, i64),
                 ht=np.zeros((0, 2), i64), bufO=np.zeros(400, i64), usedO=0, TO=np.zeros((2, 11), i64), atO=0,
                 small=32, chain=1, rk=np.zeros(0, i64), rt=np.zeros((0, 2), i64))
        a.update(change)
        return list(a.values())

    # The feedback written, nothing joined (the other side is empty): a round with no output, as the reference has it.
    assert loop_round(*args())[0] == as_run(round_module.loop_round, "plain")(*args())[0] == ROUND
    for change, what in ((dict(m=4), "m >= 1 columns and then its times"),
                         (dict(idx2=np.zeros(0, i64)), "must not be empty"),
                         (dict(at2=3), "must lie in their tables"),
                         (dict(hk=np.zeros(1, i64)), "held keys hk"),
                         (dict(rk=np.zeros(1, i64), rt=np.zeros((1, 1), i64)), "held keys rk"),
                         (dict(walk=0, pk=np.zeros((1, 0), i64), pt=np.zeros((1, 2), i64)), "pending keys pk"),
                         (dict(small=256), "ARENA_ROWS")):
        with pytest.raises(ValueError, match=what):
            loop_round(*args(**change))
