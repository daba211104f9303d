"""Workers that hang or die between runs: the driver names them, never blocks, and stays failed.

A stopped worker (SIGSTOP) would otherwise block ``run()`` forever; a
worker killed while idle would surface as a raw ``ChannelClosed`` naming
whichever peer noticed first, and later calls as ``OSError`` on closed
sockets.
"""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import ddflow

pytestmark = pytest.mark.timeout(60)


def _flow(workers: int = 2, **kw) -> tuple[ddflow.Dataflow, ddflow.InputHandle]:
    """A dataflow that has run once, so its workers are forked and idle."""
    flow = ddflow.Dataflow(workers=workers, **kw)
    h, a = flow.new_collection("a")
    a.count().capture()
    h.update([(k,) for k in range(20)], times=0)
    flow.advance_to(1)
    flow.run()
    slot, end = flow._pool.slot, time.monotonic() + 5.0
    while (slot[1::2] != -1).any() and time.monotonic() < end:  # run() returns before the workers compact
        time.sleep(0.005)
    assert (slot[1::2] == -1).all(), "the workers never went idle"
    return flow, h


def _spin(r: tuple) -> tuple:
    """Python busy for 2 ms, holding the GIL but for the interpreter's switch interval."""
    end = time.perf_counter() + 0.002
    while time.perf_counter() < end:
        pass
    return r


@pytest.fixture
def flows():
    """Dataflows made by a test: their workers are woken and killed afterwards, whatever the test did."""
    made: list[ddflow.Dataflow] = []
    yield made
    for flow in made:
        for pid in flow._pool.pids if flow._pool is not None else []:
            if _alive(pid):  # an unreaped child of ours: the pid cannot have passed to another process
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        flow.close()


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a child of ours still running (one that has ended is reaped here)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == 0


@pytest.mark.parametrize("victim", [0, 1])
def test_a_stopped_worker_fails_run_within_the_heartbeat_timeout(flows, victim):
    flow, h = _flow(heartbeat_timeout=2.0)
    flows.append(flow)
    pids = list(flow._pool.pids)
    os.kill(pids[victim], signal.SIGSTOP)
    h.insert((1,), time=1)
    flow.advance_to(2)
    t0 = time.monotonic()
    with pytest.raises(ddflow.DataflowError,
                       match=rf"worker {victim} \(pid {pids[victim]}\) .*no heartbeat .*stopped") as err:
        flow.run()
    assert time.monotonic() - t0 < 2.0 + 3.0  # the timeout, plus one poll and reaping
    assert "heartbeat_timeout" in str(err.value)
    assert not any(_alive(p) for p in pids)  # every worker was stopped and reaped
    with pytest.raises(ddflow.DataflowError, match=rf"worker {victim} \(pid {pids[victim]}\)"):
        flow.trace_size()
    t0 = time.monotonic()
    flow.close()
    assert time.monotonic() - t0 < 0.5


def test_a_worker_stopped_mid_run_is_named_not_the_peer_waiting_for_it(flows):
    flow = ddflow.Dataflow(workers=2, heartbeat_timeout=1.5)
    flows.append(flow)
    h, a = flow.new_collection("a")
    a.map(_spin, name="spin").count().capture()
    h.update([(k,) for k in range(10)], times=0)
    flow.advance_to(1)
    flow.run()  # forks the workers
    pid = flow._pool.pids[1]
    h.update([(k,) for k in range(1000)], times=1)  # about 1 s of spinning per worker
    flow.advance_to(2)
    stopper = threading.Timer(0.3, os.kill, (pid, signal.SIGSTOP))
    stopper.start()
    try:
        with pytest.raises(ddflow.DataflowError,
                           match=rf"worker 1 \(pid {pid}\) is hung while running operator 'spin'.*stopped"):
            flow.run()
    finally:
        stopper.join()


@pytest.mark.parametrize("victim", [0, 1, 2])
def test_a_worker_killed_while_idle_is_named_by_the_next_run_and_every_call_after(flows, victim):
    flow, h = _flow(workers=3)
    flows.append(flow)
    pids = list(flow._pool.pids)
    os.kill(pids[victim], signal.SIGKILL)
    time.sleep(0.2)  # the other workers notice their peer is gone and exit first: they must not be blamed
    h.insert((1,), time=1)
    flow.advance_to(2)
    named = rf"worker {victim} \(pid {pids[victim]}\) died \(killed by SIGKILL\) while idle"
    with pytest.raises(ddflow.DataflowError, match=named) as first:
        flow.run()
    assert not any(_alive(p) for p in pids)
    for call in (flow.run, flow.trace_size, flow.trace_bytes, flow.worker_stats, flow.run):
        with pytest.raises(ddflow.DataflowError, match=named) as later:
            call()
        assert str(first.value) in str(later.value)
    t0 = time.monotonic()
    flow.close()
    assert time.monotonic() - t0 < 0.5


def test_a_worker_killed_while_idle_is_named_by_trace_size_too(flows):
    flow, h = _flow()
    flows.append(flow)
    pids = list(flow._pool.pids)
    os.kill(pids[1], signal.SIGKILL)
    named = rf"worker 1 \(pid {pids[1]}\) died \(killed by SIGKILL\)"
    with pytest.raises(ddflow.DataflowError, match=named):
        flow.trace_size()
    with pytest.raises(ddflow.DataflowError, match=named):
        flow.run()  # the pool's failure is the dataflow's: run() refuses too


def test_heartbeats_keep_a_busy_but_healthy_dataflow_running(flows):
    flow = ddflow.Dataflow(workers=2, heartbeat_timeout=1.0)
    flows.append(flow)
    h, a = flow.new_collection("a")
    out = a.map(_spin).count().capture()
    h.update([(k % 4,) for k in range(1000)], times=0)  # a run of about 1 s per worker: longer than a beat
    flow.advance_to(1)
    t0 = time.monotonic()
    flow.run()
    assert time.monotonic() - t0 > 0.8
    assert sorted(out.drain()) == [((k, 250), 0, 1) for k in range(4)]
    time.sleep(1.2)  # idle longer than the timeout: still fine
    assert flow.trace_size() > 0


def test_heartbeat_timeout_is_validated_and_can_be_turned_off():
    for bad in (0, -1.0, True, "5", float("nan")):
        with pytest.raises(ValueError, match="heartbeat_timeout"):
            ddflow.Dataflow(workers=2, heartbeat_timeout=bad)
    with ddflow.Dataflow(workers=2, heartbeat_timeout=None) as flow:
        h, a = flow.new_collection("a")
        out = a.count().capture()
        h.insert((1,), time=0)
        flow.advance_to(1)
        flow.run()
        assert out.drain() == [((1, 1), 0, 1)]
        assert flow._pool.heartbeat_timeout is None
    assert ddflow.Dataflow(workers=2).heartbeat_timeout == 30.0  # generous by default
