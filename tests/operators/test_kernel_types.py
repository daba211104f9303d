"""A kernel an operator calls from Python sees one tuple of argument types, whatever the data.

numba compiles a kernel once per tuple of argument types (a read-only
array is another type than a writable one, a strided column another than
a contiguous one), so a type that depends on the data is a compile of
seconds in the middle of a user's dataflow, at the first step that
happens to make the other one, after the warm-up compiled the first.
Each kernel here is spied on while dataflows whose inputs reach it both
ways run (feedback from a trace and from a join, deltas queued as one
batch and as several, short and long histories, keys from a batch and
from ``np.unique``, an arrangement's small batch from a kernel or from a
map); the spy records the types and calls through.
"""
from __future__ import annotations

import numba
import numpy as np
import pytest

import ddflow
import ddflow.operators.iterate as loop_plumbing
import ddflow.operators.join as join_module
import ddflow.operators.reduce.iterate as loop_tactic
import ddflow.operators.reduce.walk as walk_tactic
import ddflow.operators.round as loop_round
import ddflow.traces.spine as spine
from ddflow.base.kernels import kernels
from tests.test_dataflows import kcore_dataflow


def _reach_read_twice(edges):
    """Reachability whose variable two operators read: its output is not routed to one arrangement
    (``feedback_round``, not ``feedback_round_into``)."""
    roots = edges.filter(lambda e: e[0] == 1).project(0, 0)
    return roots.iterate(lambda r: r.join(edges).project(2, 1).concat(roots).concat(r.project(0, 0)).distinct())


def _reach(edges):
    """Reachability from node 0: feedback from a ``distinct`` (its trace's read-only arrays; kcore's comes
    from a join, writable)."""
    roots = edges.filter(lambda e: e[0] == 0).project(0, 0)
    return roots.iterate(lambda r: r.join(edges).project(2, 1).concat(roots).distinct())


@pytest.fixture
def seen(monkeypatch):
    """The argument types each spied kernel was called with, by kernel name."""
    types: dict[str, set] = {}
    spied = ((loop_plumbing, "feedback_round"), (loop_plumbing, "feedback_round_into"), (join_module, "join_table"),
             (join_module, "join_table_into"), (loop_tactic, "chain_walk"),
             (loop_tactic, "loop_seeds"), (loop_tactic, "loop_step"), (walk_tactic, "key_walk"),
             (spine, "arena_insert"), (loop_round, "loop_round"))
    for module, name in spied:
        kernel = getattr(module, name)

        def spy(*args, _kernel=kernel, _name=name):
            types.setdefault(_name, set()).add(tuple(numba.typeof(a) for a in args))
            return _kernel(*args)
        monkeypatch.setattr(module, name, spy)
    compiled = kernels()  # the batch seek: traces and joins whose keys are not int64 (floats here)
    seek = compiled.seek

    def seek_spy(*args):
        types.setdefault("seek", set()).add(tuple(numba.typeof(a) for a in args))
        return seek(*args)
    monkeypatch.setattr(compiled, "seek", seek_spy)
    return types


def test_the_kernels_an_operator_calls_see_one_type_per_argument_whatever_the_data(seen):
    rng = np.random.default_rng(7)
    with ddflow.Dataflow() as flow:
        edges_in, edges = flow.new_collection("edges", schema=("i", "i"))
        for out in (kcore_dataflow(edges, True), kcore_dataflow(edges, False), _reach(edges), _reach_read_twice(edges)):
            out.capture()
        # Float keys: a join and a count seek each batch with the delta's keys, made by a queue or not.
        floats = edges.map(lambda e: (e[0] / 2, e[1]))
        floats.join(floats).capture()
        floats.count().capture()
        # Min over two value fields, at the top and inside a loop: the walk's general path (key_walk).
        wide = edges.map(lambda e: (e[0], e[1], e[0] + e[1]))
        wide.min().capture()
        wide.min().iterate(lambda v: wide.enter(v.scope).min()).capture()
        t = 0
        # A first step of many edges (long histories, several batches queued at once), then single edges
        # added and removed (short ones, one batch).
        rows = [tuple(map(int, e)) for e in rng.integers(0, 12, size=(40, 2))]
        edges_in.update(rows, times=[t + i % 3 for i in range(len(rows))])
        for step in range(12):
            t += 3
            flow.advance_to(t)
            flow.run()
            e = rows[step] if step % 2 else tuple(map(int, rng.integers(0, 12, size=2)))
            edges_in.update([e], times=t, diffs=-1 if step % 2 else 1)
        flow.advance_to(t + 1)
        flow.run()
    assert set(seen) == {"feedback_round", "feedback_round_into", "join_table", "join_table_into", "chain_walk", "loop_seeds", "loop_step", "key_walk", "seek",
                         "arena_insert", "loop_round"}, \
        f"a spied kernel was never called: {sorted(seen)}"
    counts = {name: len(tuples) for name, tuples in seen.items()}
    assert counts == dict.fromkeys(seen, 1), f"argument type tuples by kernel: {counts}; {seen}"
