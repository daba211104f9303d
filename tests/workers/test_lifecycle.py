"""A dataflow's lifecycle, as Python's files and sockets: ``close`` (or leaving ``with``) releases the workers.

``finish`` is "no more input" (run to the end of time, workers kept);
``close`` releases everything and is idempotent; a dataflow nobody
references is released when its last reference goes, without the cyclic
garbage collector (checked with the collector off).  The Spark side (a
barrier stage's task slots) is in ``tests/streaming/test_cluster.py``.
"""
from __future__ import annotations

import gc
import os
import re
import weakref

import pytest

import ddflow


def _reaped(pid: int) -> bool:
    """Whether the worker has exited and been waited for (what ``close`` promises when it returns)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def _started(workers: int = 2):
    flow = ddflow.Dataflow(workers=workers)
    h, xs = flow.new_collection("xs", schema={"k": "bigint", "v": "bigint"})
    cap = flow.sql("SELECT k, COUNT(*) AS n FROM xs GROUP BY k").capture()
    doubled = xs.map(lambda r: (r[0] * 2,)).capture()
    h.update([(1, 10), (1, 11), (2, 20)], times=0)
    flow.advance_to(1)
    flow.run()
    return flow, h, cap, doubled


def test_close_releases_the_workers_and_refuses_runs_and_updates():
    flow, h, cap, _ = _started()
    pids = list(flow._pool.pids)
    flow.close()
    assert flow.closed and all(_reaped(p) for p in pids)
    flow.close()  # idempotent
    with pytest.raises(ddflow.DataflowError, match="closed: its workers and task slots are released"):
        flow.run()
    with pytest.raises(ddflow.DataflowError, match="'xs': the dataflow is closed; no more updates"):
        h.update([(3, 30)])
    with pytest.raises(ddflow.DataflowError, match="closed"):
        flow.worker_stats()
    assert cap.contents(0) == {(1, 2): 1, (2, 1): 1}  # what was captured stays readable


def test_leaving_a_with_block_closes():
    with ddflow.Dataflow(workers=2) as flow:
        h, xs = flow.new_collection("xs")
        cap = xs.count().capture()
        h.insert((1,), time=0)
        flow.advance_to(1)
        flow.run()
        pids = list(flow._pool.pids)
    assert flow.closed and all(_reaped(p) for p in pids)
    assert cap.drain() == [((1, 1), 0, 1)]


def test_an_error_in_a_with_block_still_closes():
    with pytest.raises(ZeroDivisionError):
        with ddflow.Dataflow(workers=2) as flow:
            h, xs = flow.new_collection("xs")
            xs.count().capture()
            h.insert((1,), time=0)
            flow.advance_to(1)
            flow.run()
            pids = list(flow._pool.pids)
            1 / 0
    assert flow.closed and all(_reaped(p) for p in pids)


def test_finish_runs_to_the_end_of_time_and_keeps_the_workers():
    flow, h, cap, _ = _started()
    h.update([(2, 21)], times=5)
    flow.finish()
    flow.finish()  # idempotent
    assert flow.finished and not flow.closed
    assert cap.contents(5) == {(1, 2): 1, (2, 2): 1}
    assert len(flow.worker_stats()) == 2  # the workers are still there
    with pytest.raises(ddflow.DataflowError, match="'xs': the dataflow is finished; no more updates"):
        h.update([(3, 30)])
    pids = list(flow._pool.pids)
    flow.close()
    assert all(_reaped(p) for p in pids)


def test_a_dropped_dataflow_releases_its_workers_at_once_without_the_cyclic_collector():
    """Handles, captures and the SQL front end do not keep the dataflow alive, and nothing makes a cycle through it."""
    gc.collect()
    gc.disable()
    try:
        flow, h, cap, doubled = _started()
        pids = list(flow._pool.pids)
        alive = weakref.ref(flow)
        del flow  # the handle and the captures are still held
        assert alive() is None, f"something still refers to the dataflow: {gc.get_referrers(alive())}"
        assert all(_reaped(p) for p in pids)
        assert cap.contents(0) == {(1, 2): 1, (2, 1): 1} and len(doubled.drain()) == 2
        with pytest.raises(ddflow.DataflowError, match="'xs': its dataflow is gone"):
            h.update([(3, 30)])
    finally:
        gc.enable()


def test_a_dataflow_in_process_is_released_too_when_dropped():
    gc.collect()
    gc.disable()
    try:
        flow, h, cap, _ = _started(workers=1)
        alive = weakref.ref(flow)
        del flow
        assert alive() is None
    finally:
        gc.enable()


def test_the_placement_is_told_what_the_dataflow_is_called():
    """What Spark's job description (and a start that finds the slots held) names: its name and where it was made."""
    here = os.path.basename(__file__)
    named = ddflow.Dataflow(workers=2, name="bids")
    named.run()
    assert re.fullmatch(rf"ddflow dataflow 'bids' \(created at {here}:\d+\)", named._pool.placement.label)
    named.close()
    flow = ddflow.Dataflow(workers=2)
    flow.run()
    assert re.fullmatch(rf"ddflow dataflow created at {here}:\d+", flow._pool.placement.label)
    flow.close()
