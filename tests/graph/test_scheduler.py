"""The one scheduler: what a node declares decides how it is scheduled, and workers reuse the same loop."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ddflow
from ddflow.base.native import native_module
from ddflow.errors import DataflowError, NonConvergence
from ddflow.graph.node import any_complete, ready_mask, ready_split
from ddflow.graph.scope import IterativeScope, Scheduler, least_round
from ddflow.workers.runtime import WorkerRuntime
from kernel_modes import MODES, as_run


class General(Scheduler):
    """A scheduler with a hook of its own: it runs the workers' general loop, as every worker does."""

    def step_node(self, node, bound):
        super().step_node(node, bound)


def test_workers_run_the_same_schedule_through_hooks_only():
    for method in ("step_scope", "step_loop"):
        assert getattr(WorkerRuntime, method) is getattr(Scheduler, method), f"WorkerRuntime overrides {method}"


def test_plan_orders_members_topologically_and_marks_what_needs_complete_input():
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    out = x.iterate(lambda v: v.map(lambda r: (r[0] // 2,)).concat(x).distinct())
    late = x.project(0)  # created after the loop, upstream of nothing in it
    out.concat(late).capture()
    plan = flow.top.plan()
    pos = {id(m): i for i, m in enumerate(plan.order)}
    for node in flow.top.all_nodes():
        a = flow.top.member_of(node)
        for target, port in node.targets:
            b = flow.top.member_of(target)
            if a is not b and port != target.feedback_port:
                assert pos[id(a)] < pos[id(b)]
    loops = [i for i, m in enumerate(plan.order) if isinstance(m, IterativeScope)]
    assert loops and all(plan.sync[i] for i in loops)
    assert not any(plan.sync[i] for i, m in enumerate(plan.order) if not isinstance(m, IterativeScope))


def test_loop_errors_come_from_the_scheduler():
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    x.iterate(lambda v: v.map(lambda r: (r[0] + 1,)).concat(x).distinct(), max_iterations=5).capture()
    x_in.insert((0,), 0)
    flow.advance_to(1)
    with pytest.raises(NonConvergence, match="max_iterations=5"):
        Scheduler().step_scope(flow.top, np.array([1]))
    flow2 = ddflow.Dataflow()
    _, y = flow2.new_collection("y")
    ddflow.Variable(y.iterative("unset"), y)
    with pytest.raises(DataflowError, match="never set"):
        flow2.run()


def reference_least_round(times: np.ndarray, outer_bound: np.ndarray) -> int:
    """The loop's next round from its work, in numpy (the rule ``next_round`` follows)."""
    k = len(outer_bound)
    if times.shape[1] <= k:
        times = np.concatenate([times, np.zeros((len(times), k + 1 - times.shape[1]), dtype=np.int64)], axis=1)
    ok = np.all(times[:, :k] < outer_bound, axis=1)
    return int(times[ok, k].min()) if ok.any() else -1


@settings(max_examples=200)
@given(data=st.data(), mode=st.sampled_from(MODES))
def test_least_round_matches_the_reference(data, mode):
    k = data.draw(st.integers(1, 2))
    cols = data.draw(st.integers(k, k + 2))  # k: an enter node's queue; k + 2: a nested loop's work
    n = data.draw(st.integers(0, 12))
    times = data.draw(hnp.arrays(np.int64, (n, cols), elements=st.integers(0, 5)))
    outer = data.draw(hnp.arrays(np.int64, k, elements=st.integers(0, 6)))
    assert as_run(least_round, mode)(times, outer) == reference_least_round(times, outer)


@settings(max_examples=200)
@given(data=st.data(), mode=st.sampled_from(MODES))
def test_any_complete_matches_the_ready_mask(data, mode):
    depth = data.draw(st.integers(1, 3))
    times = data.draw(hnp.arrays(np.int64, (data.draw(st.integers(0, 8)), depth), elements=st.integers(0, 4)))
    bound = data.draw(hnp.arrays(np.int64, depth, elements=st.integers(0, 5)))
    kernel = as_run(any_complete, mode)
    assert kernel(times, bound) == bool(ready_mask(times, bound).any())


@settings(max_examples=200)
@given(data=st.data(), mode=st.sampled_from(MODES))
def test_ready_split_is_the_ready_mask_and_its_count(data, mode):
    depth = data.draw(st.integers(1, 3))
    times = data.draw(hnp.arrays(np.int64, (data.draw(st.integers(0, 8)), depth), elements=st.integers(0, 4)))
    bound = data.draw(hnp.arrays(np.int64, depth, elements=st.integers(0, 5)))
    mask, count = as_run(ready_split, mode)(times, bound)
    want = np.all(times < bound, axis=1)
    assert mask.dtype == bool and mask.tolist() == want.tolist() and count == int(want.sum())


def test_a_reduce_whose_work_is_all_later_is_not_stepped():
    """A reduce retires only times complete under the bound, so the scheduler skips it when none are.

    Inside a loop a reduce's input often arrives a round early; here the
    arrangement (which inserts whatever reaches it) is handed an update at
    time 5 while the bound is 3.
    """
    from ddflow.base.updates import Updates
    from ddflow.operators.arrange import ArrangeNode

    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    out = x.count().capture()
    stepped = []

    class Recording(Scheduler):
        def step_node(self, node, bound):
            stepped.append(type(node).__name__)
            super().step_node(node, bound)

    x_in.update([(1, 2)], times=[0])
    flow.advance_to(1)
    Recording().step_scope(flow.top, np.array([1]))
    assert stepped.count("ReduceNode") == 1
    arrange = next(n for n in flow.top.all_nodes() if isinstance(n, ArrangeNode))
    arrange.push(0, Updates((np.array([1]), np.array([3])), np.array([[5]]), np.array([1]), ("i", "i")))
    stepped.clear()
    Recording().step_scope(flow.top, np.array([3]))
    # The arrangement inserted the update when it was pushed (a batch of a few updates); the reduce holds it
    # at a time not yet complete, so nothing is stepped.
    assert stepped == []
    Recording().step_scope(flow.top, np.array([6]))
    assert stepped.count("ReduceNode") == 1
    assert sorted(out.drain()) == [((1, 2, 1), 0, 1), ((1, 3, 1), 5, 1)]


def test_nodes_without_work_are_not_stepped():
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    _, y = flow.new_collection("y")
    x.distinct().capture()
    y.distinct().capture()
    stepped = []

    class Recording(Scheduler):
        def step_node(self, node, bound):
            stepped.append(node)
            super().step_node(node, bound)

    x_in.insert((1,), 0)
    flow.advance_to(1)
    Recording().step_scope(flow.top, np.array([1]))
    y_side, todo = set(), [y.node]
    while todo:  # y's input and everything downstream of it: no work reaches them
        n = todo.pop()
        if n not in y_side:
            y_side.add(n)
            todo.extend(t for t, _ in n.targets)
    # Every node on x's side is stepped, except those that did their work when pushed: inline ones, and the
    # arrangement, handed a batch of one update.
    from ddflow.operators.arrange import ArrangeNode
    x_side = {n for n in set(flow.top.all_nodes()) - y_side if not n.inline and not isinstance(n, ArrangeNode)}
    assert set(stepped) == x_side and len(stepped) == len(x_side) > 0
    assert not y_side & set(stepped)


def test_inline_nodes_work_when_pushed_and_are_never_stepped():
    """Projections and concats handle each batch as it arrives, and the plan leaves them out.

    Arrangements insert a batch of a few updates when it is pushed.  Run in
    a loop and at the top level, under the one-worker path and the workers'
    general loop: the output is the same, and no inline node, nor any
    arrangement (every batch here is small), is stepped or left holding
    anything.
    """
    for scheduler in (Scheduler, General):
        flow = ddflow.Dataflow()
        e_in, edges = flow.new_collection("edges")
        r_in, roots = flow.new_collection("roots")
        start = roots.project(0, 0)
        reach = start.iterate(lambda r: r.join(edges).project(2, 1).concat(start).distinct())
        both = reach.project(1, 0).concat(edges).count().capture()
        stepped = []

        class Recording(scheduler):
            def step_node(self, node, bound):
                stepped.append(node)
                super().step_node(node, bound)

        e_in.update([(1, 2), (2, 3), (3, 1)], times=0)
        r_in.update([(1,)], times=0)
        flow.advance_to(1)
        rec = Recording()
        rec.step_scope(flow.top, np.array([1]))
        nodes = list(flow.top.all_nodes())
        inline = [n for n in nodes if n.inline]
        assert {type(n).__name__ for n in inline} == {"ColumnsNode", "ConcatNode"}
        inline += [n for n in nodes if type(n).__name__ == "ArrangeNode"]
        assert not set(stepped) & set(inline), scheduler
        assert all(not any(n.queues) for n in inline)
        # (root, reached node) pairs and the edges, each record with how often it occurs
        pairs = [(1, 1), (1, 2), (1, 3)] + [(1, 2), (2, 3), (3, 1)]
        assert sorted(both.drain()) == [((*p, pairs.count(p)), 0, 1) for p in sorted(set(pairs))], scheduler


def test_an_inline_node_names_itself_in_its_errors():
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    x.project(3).distinct().capture()
    x_in.update([(1, 2)], times=0)
    flow.advance_to(1)
    with pytest.raises(ddflow.SchemaError, match=r"operator 'project.*projects fields \(3,\) of records with 2"):
        flow.run()


@pytest.mark.parametrize("steps", [1, 7])
def test_a_loop_runs_each_iteration_once(steps):
    """Feedback the body makes in round ``i`` is work for round ``i + 1``, not a rerun of round ``i``.

    A loop counting 0, 1, ..., ``steps`` changes once per iteration, so it
    takes ``steps + 1`` rounds: iterations 0 to ``steps``, each run once
    (a variable reporting its feedback at the body's iteration ran every
    round twice).
    """
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    out = x.iterate(lambda v: v.map(lambda r: (min(r[0] + 1, steps),)).distinct()).capture()
    rounds = []

    class Recording(Scheduler):
        def agree_round(self, mine):
            rounds.append(mine)
            return mine

    x_in.insert((0,), 0)
    flow.advance_to(1)
    Recording().step_scope(flow.top, np.array([1]))
    assert rounds == [*range(steps + 1), None]
    assert out.contents(0) == {(steps,): 1}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 3), st.booleans()), max_size=30))
def test_one_worker_steps_what_the_general_loop_steps(edges):
    """``Scheduler.alone``'s loop and the workers' general one step the same nodes in the same order, to the same output.

    A reachability loop (a join, a distinct and feedback) and a count
    outside it; the general loop is what any scheduler with a hook of its
    own runs (here one that records).
    """
    from ddflow.graph.node import Node

    def run(general: bool):
        flow = ddflow.Dataflow()
        e_in, e = flow.new_collection("edges")
        roots = e.project(0).distinct()
        reach = roots.iterate(lambda r: r.join(e.enter(r.scope)).project(1).concat(r).distinct(), max_iterations=50)
        out, counts = reach.capture(), e.count().capture()
        stepped = []

        real = Node.run_step

        def recording(self, bound):
            stepped.append((self.name, bound.tolist()))
            return real(self, bound)

        flow._scheduler = General() if general else Scheduler()
        assert flow._scheduler.alone is not general
        Node.run_step = recording
        try:
            for t in range(6):  # each edge comes at its time and, if it says so, goes two steps later
                now = [((a, b), 1) for a, b, at, _ in edges if at == t]
                now += [((a, b), -1) for a, b, at, goes in edges if goes and at + 2 == t]
                if now:
                    e_in.update([r for r, _ in now], times=t, diffs=[d for _, d in now])
                flow.advance_to(t + 1)
                flow.run()
        finally:
            Node.run_step = real
        return stepped, sorted(out.drain()), sorted(counts.drain())

    assert run(True) == run(False)


@pytest.mark.parametrize("steps", [1, 7])
def test_one_worker_asks_for_the_next_round_only_after_a_round_that_emitted_nothing(steps, monkeypatch):
    """Round ``r + 1`` follows a round ``r`` that emitted updates, without a scan of the body's work.

    The counting loop changes at every iteration up to ``steps``, so it
    asks twice: for its first round, and after the empty round
    ``steps + 1``, which ends it.  The general loop asks at every round.
    """
    asked = []
    real = IterativeScope.next_round

    def next_round(self, outer_bound):
        asked.append(real(self, outer_bound))
        return asked[-1]

    monkeypatch.setattr(IterativeScope, "next_round", next_round)
    for general, want in ((False, [0, None]), (True, [*range(steps + 1), None])):
        flow = ddflow.Dataflow()
        x_in, x = flow.new_collection("x")
        out = x.iterate(lambda v: v.map(lambda r: (min(r[0] + 1, steps),)).distinct()).capture()

        x_in.insert((0,), 0)
        flow.advance_to(1)
        asked.clear()
        (General() if general else Scheduler()).step_scope(flow.top, np.array([1]))
        assert asked == want
        assert out.contents(0) == {(steps,): 1}


@pytest.mark.parametrize("general", [False, True])
def test_a_loop_converging_at_its_last_allowed_iteration_does_not_fail(general):
    """The round after the last one with work is past ``max_iterations``: one worker asks, it does not fail."""
    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    out = x.iterate(lambda v: v.map(lambda r: (min(r[0] + 1, 5),)).distinct(), max_iterations=5).capture()

    x_in.insert((0,), 0)
    flow.advance_to(1)
    (General() if general else Scheduler()).step_scope(flow.top, np.array([1]))
    assert out.contents(0) == {(5,): 1}
    x_in.insert((0,), 1)  # a second copy of the start: the counts change, the loop runs to 5 again
    flow.advance_to(2)
    (General() if general else Scheduler()).step_scope(flow.top, np.array([2]))
    assert out.contents(1) == {(5,): 1}


def test_a_member_stepped_every_round_without_progress_does_not_keep_the_loop_going():
    """An enter node holding input for a later outer time is stepped every round, and emits nothing.

    Rounds follow one another only while the body emits: counting to 5
    takes iterations 0 to 5 and one empty round, not every iteration up
    to ``max_iterations`` (a loop guessing from "stepped" ran all 1,000).
    The held record enters when its time is complete.
    """
    from ddflow.base.updates import Updates
    from ddflow.operators.iterate import EnterNode

    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    out = x.iterate(lambda v: v.map(lambda r: (min(r[0] + 1, 5),)).distinct(), max_iterations=1000).capture()
    x_in.insert((0,), 0)
    flow.advance_to(1)
    Scheduler().step_scope(flow.top, np.array([1]))  # the loop's first step: every node has its kinds now
    loop = next(m for m in flow.top.nodes if isinstance(m, IterativeScope))
    enter = next(n for n in loop.nodes if isinstance(n, EnterNode))
    enter.push(0, Updates((np.array([3]),), np.array([[4]]), np.array([1]), ("i",)))  # at time 4, later than 2
    x_in.insert((1,), 1)
    loop.rounds_run = 0
    Scheduler().step_scope(flow.top, np.array([2]))
    assert loop.rounds_run <= 7 and enter.queued() == 1
    assert out.contents(1) == {(5,): 1}
    Scheduler().step_scope(flow.top, np.array([5]))
    assert out.contents(4) == {(5,): 1} and enter.queued() == 0


def test_an_arrangement_queues_large_batches_and_keeps_their_order():
    """More than ``EAGER_ROWS`` updates wait for the step, so a step's batches are consolidated once, together.

    A small batch pushed after a queued one waits too: nothing is inserted
    ahead of what is already queued.  The trace is then given one batch.
    """
    from ddflow.base.updates import Updates
    from ddflow.operators.arrange import EAGER_ROWS, ArrangeNode

    flow = ddflow.Dataflow()
    x_in, x = flow.new_collection("x")
    out = x.distinct().capture()
    x_in.update([(0, 0)], times=[0])
    flow.advance_to(1)
    flow.run()
    arrange = next(n for n in flow.top.all_nodes() if isinstance(n, ArrangeNode))
    inserted = []
    insert = arrange.trace.insert_consolidating
    arrange.trace.insert_consolidating = lambda u: inserted.append(len(u)) or insert(u)
    small = Updates((np.array([-1]), np.array([7])), np.array([[1]]), np.array([1]), ("i", "i"))
    arrange.push(0, small)
    assert inserted == [1] and not arrange.queues[0]  # a small batch: inserted when pushed
    n = EAGER_ROWS + 1
    big = Updates((np.arange(1, n + 1), np.arange(n)), np.full((n, 1), 1), np.ones(n, dtype=np.int64), ("i", "i"))
    arrange.push(0, big)
    arrange.push(0, small)
    assert inserted == [1] and len(arrange.queues[0]) == 2
    Scheduler().step_scope(flow.top, np.array([2]))
    assert inserted == [1, n + 1] and not arrange.queues[0]
    assert sorted(out.drain()) == sorted([((0, 0), 0, 1), ((-1, 7), 1, 1)] + [((k, k - 1), 1, 1) for k in range(1, n + 1)])


def test_native_completion_kernels_refuse_times_shorter_than_the_bound():
    """Times with fewer coordinates than the bound would be read past their rows: a ValueError; no rows, no reads."""
    N = native_module().graph
    times, bound = np.zeros((2, 1), dtype=np.int64), np.ones(2, dtype=np.int64)
    for kernel in (N.ready_split, N.any_complete, N.least_round):
        with pytest.raises(ValueError, match="fewer coordinates"):
            kernel(times, bound)
    assert N.least_round(np.zeros((0, 1), dtype=np.int64), bound) == -1 and not N.any_complete(times[:0], bound)


def test_a_long_chain_of_inline_operators_runs_at_a_bounded_depth():
    """2,000 stateless operators in a row (each applies what it is pushed, at once): no RecursionError, and every
    update arrives exactly once, through a join and a count after the chain too."""
    flow = ddflow.Dataflow()
    pairs_in, pairs = flow.new_collection("pairs")
    c = pairs
    for k in range(2000):
        c = c.project(1, 0)  # swapped 2,000 times: back as it was
    joined = c.join(pairs).project(0, 1, 2).capture()
    counted = c.project(0).count().capture()
    rows = [(i % 7, i) for i in range(50)]
    pairs_in.update(rows, times=0)
    flow.advance_to(1)
    flow.run()
    assert sorted(r for r, _, _ in joined.drain()) == sorted((a, b, d) for a, b in rows for c_, d in rows if c_ == a)
    assert sorted(r for r, _, _ in counted.drain()) == sorted({(k, sum(1 for a, _ in rows if a == k)) for k, _ in rows})
