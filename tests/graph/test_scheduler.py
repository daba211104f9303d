"""The one scheduler: what a node declares decides how it is scheduled, and workers reuse the same loop."""
from __future__ import annotations

import numpy as np
import pytest

import ddflow
from ddflow.errors import DataflowError, NonConvergence
from ddflow.graph.scope import IterativeScope, Scheduler
from ddflow.workers.runtime import WorkerRuntime


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
