"""Fused loop rounds (``operators/round.py``): a round in one call is the round in three steps, exactly.

A fused run must be the unfused run (routes still on) and the run with
neither: the same output at every step, the same counters and records
held on every operator, the same column kinds on every node.  The round
kernel, compiled, is checked against its plain self on the arguments a
run passes it, arenas included.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import ddflow
import ddflow.operators.round as round_module
import ddflow.operators.route as route_module
from ddflow.operators.round import ROUND, round_of
from tests.operators.test_route import _steps, schedules

#: Calls kernels with argument types of its own: they compile in the test process, so it runs last (conftest.py).
pytestmark = pytest.mark.compiles


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
    return reach, right, counted, twice


def _run(schedule, fused: bool = True, routed: bool = True):
    with pytest.MonkeyPatch.context() as mp:
        if not fused:
            mp.setattr(round_module, "_find", lambda node: None)
        if not routed:
            mp.setattr(route_module, "_find", lambda node: None)
        return _steps(schedule, _bodies)


@settings(max_examples=30, deadline=None)
@given(schedules())
def test_a_fused_run_is_the_unfused_run(schedule):
    fused = _run(schedule)
    assert fused == _run(schedule, fused=False)
    assert fused == _run(schedule, fused=False, routed=False)


def test_which_bodies_are_fused():
    with ddflow.Dataflow() as flow:
        _, edges = flow.new_collection("edges", schema=("i", "i"))
        for c in _bodies(edges):
            c.capture()
        edges.map(lambda e: (e[0], e[0])).iterate(  # min: the walk tactic, not the loop tactic's one call
            lambda lab: lab.join(edges).project(2, 1).concat(lab).min()).capture()
        found = {n.name.split("(")[1].split(")")[0]: round_of(n) is not None
                 for n in flow.top.all_nodes() if type(n).__name__ == "VariableNode"}
    assert sorted(found.values()) == [False, False, True, True, True], found


def _arena_words(buf, T, rows, lo, hi):
    """Rows ``rows`` of a table whose addresses into ``buf`` are made offsets, and ``buf[lo:hi]``."""
    base, end = buf.ctypes.data, buf.ctypes.data + 8 * len(buf)
    R = T[rows].copy()
    inside = (R >= base) & (R < end)
    R[inside] -= base
    return R.tolist(), buf[lo:hi].tolist()


def test_the_round_kernel_compiled_is_its_plain_self_on_a_run():
    """Every round of a run of reach, its right-side twin and count: compiled and plain give the same, words too."""
    kernel = round_module.loop_round
    stages, written = [], []

    def both(*args):
        args = list(args)
        copies = [a.copy() if isinstance(a, np.ndarray) and a.flags.writeable else a for a in args]
        got = kernel(*args)
        want = kernel.plain(*copies)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if isinstance(g, np.ndarray):
                assert g.shape == w.shape and g.tolist() == w.tolist()
            else:
                assert g == w
        # The arenas' (buf, used, T, at) are arguments 5-8, 14-17 and 22-25; the words then used, results 3, 6, 14.
        for (b, u, t, at), now in (((5, 6, 7, 8), 3), ((14, 15, 16, 17), 6), ((22, 23, 24, 25), 14)):
            if got[now] == args[u]:
                continue  # nothing written there (the row at ``at`` is whatever it was)
            written.append(now)
            assert _arena_words(args[b], args[t], slice(args[at], args[at] + 1), args[u], got[now]) == \
                _arena_words(copies[b], copies[t], slice(args[at], args[at] + 1), args[u], want[now])
        stages.append(got[0])
        return got

    rng = np.random.default_rng(5)
    schedule, t = [], 0
    present = []
    for _ in range(12):
        rows, times, diffs = [], [], []
        for _ in range(3):
            if present and rng.random() < 0.4:
                rows.append(present.pop(int(rng.integers(len(present)))))
                diffs.append(-1)
            else:
                rows.append((int(rng.integers(8)), int(rng.integers(8))))
                diffs.append(1)
            times.append(t + int(rng.integers(2)))
        present += [r for r, d in zip(rows, diffs) if d > 0]
        t += 2
        schedule.append((rows, times, diffs, t))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(round_module, "loop_round", both)
        _steps(schedule, _bodies)
    assert ROUND in stages and sorted(set(written)) == [3, 6, 14]


def _count_reach(edges):
    """Reach from the nodes with a self-loop, counting paths' edge diffs: a count that can overflow in round 3."""
    roots = edges.filter(lambda e: e[0] == e[1]).project(0, 0)
    return [roots.iterate(lambda r: r.join(edges).project(2, 1).concat(roots).count().project(0, 1),
                          max_iterations=100)]


def test_an_error_in_the_fused_reduce_is_the_reduces_own():
    """The count of (3, 0) adds 2**62 at rounds 2 and 3: the round's reduce stage fails, and the reduce raises."""
    schedule = [([(0, 0), (0, 1), (0, 4), (4, 2), (1, 3), (2, 3)], [0] * 6, [1, 1, 1, 1, 2**62, 2**62], 2)]
    kernel, stages, errors = round_module.loop_round, [], []

    def spy(*args):
        stages.append((got := kernel(*args))[0])
        return got

    for fused in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(round_module, "loop_round", spy)
            if not fused:
                mp.setattr(round_module, "_find", lambda node: None)
            with pytest.raises(ddflow.SchemaError) as e:
                _steps(schedule, _count_reach)
            errors.append(str(e.value))
    assert stages == [round_module.JOINED]
    assert errors[0] == errors[1] and "count(" in errors[0] and "past int64" in errors[0]
