"""ddflow's workers as Spark barrier tasks (``Dataflow(workers=W, spark=spark)``) on the test session's Spark.

The session is ``local-cluster[2,1,1024]`` (two executors of one core, in
JVMs of their own; ``DDFLOW_TEST_MASTER``): W = 2 puts one worker on each
executor, W = 3 forks two workers from one task.  The oracle dataflows of
``tests/test_dataflows.py`` run at W = 1 here and W = 2, 3 there, and every
count must give the oracle's answer at every complete time and exactly
W = 1's output changes.  Faults: a worker that raises, a worker killed,
its task killed by Spark, its executor killed: each fails the dataflow
within seconds with an error naming the worker and its host.
"""
from __future__ import annotations

import os
import signal
import time

import pytest
from hypothesis import HealthCheck, given, settings

import ddflow
import oracle as O
from oracle import int_rows, nonneg_schedules, run_scenario
from test_dataflows import (cc_dataflow, cc_oracle, kcore_dataflow, kcore_oracle, nested_dataflow, nested_oracle,
                            reach_dataflow, reach_oracle)

NODE, EDGE = int_rows(1, 0, 7), int_rows(2, 0, 7)


def setup_module(module):
    """This module's functions go to the executors by value: the executors cannot import the tests."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(module)


@pytest.fixture(scope="module")
def cluster(spark):
    if not spark.sparkContext.master.startswith("local-cluster"):
        pytest.skip("needs the test session on local-cluster (DDFLOW_TEST_MASTER)")
    return spark


def tagged(tag, c):
    """``(tag, a, b)``: the outputs have one or two fields; concat needs one arity."""
    return c.map(lambda r: (tag, *r, -1) if len(r) == 1 else (tag, *r))


def all_dataflow(roots, edges, jumps):
    """Reachability, connected components, the 2-core and a nested loop, in one dataflow (one pool start)."""
    return tagged("reach", reach_dataflow(roots, edges)).concat(
        tagged("cc", cc_dataflow(edges)), tagged("kcore", kcore_dataflow(edges, use_threshold=True)),
        tagged("nested", nested_dataflow(roots, edges, jumps)), tagged("deg", edges.project(0).count()))


def all_oracle(roots, edges, jumps):
    parts = {"reach": reach_oracle(roots, edges), "cc": cc_oracle(edges), "kcore": kcore_oracle(edges),
             "nested": nested_oracle(roots, edges, jumps),
             "deg": {(k, m): 1 for (k,), m in O.project(edges, 0).items() if m}}
    return {(tag, *r, -1) if len(r) == 1 else (tag, *r): m for tag, s in parts.items() for r, m in s.items()}


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nonneg_schedules({"roots": NODE, "edges": EDGE, "jumps": EDGE}, max_updates=40))
def test_oracle_dataflows_on_executors_equal_one_worker(cluster, schedule):
    run_scenario(["roots", "edges", "jumps"], all_dataflow, all_oracle, schedule, workers=(1, 2, 3), spark=cluster)


def test_closures_and_strings_reach_the_executors(cluster):
    """Lambdas closing over driver-side values, and strings interned on the executors, come back the same."""
    table = {i: f"node-{i}" for i in range(10)}
    outs = {}
    for w, sp in ((1, None), (2, cluster)):
        with ddflow.Dataflow(workers=w, spark=sp) as flow:
            h, xs = flow.new_collection("xs")
            cap = xs.map(lambda r: (table[r[0] % 10], r[1])).reduce(lambda k, vals: [((sum(v * m for (v,), m in vals),), 1)]) \
                .capture()
            h.update([(i, i * i) for i in range(50)], times=0)
            flow.advance_to(1)
            flow.run()
            outs[w] = cap.drain()
            if sp is not None:
                assert set(flow._pool.placement.hosts) == {"127.0.0.1"}
                assert not set(flow._pool.pids) & {os.getpid()}
    assert outs[2] == outs[1] and len(outs[1]) == 10


def _flow(cluster, fn=lambda r: r, workers=2, heartbeat_timeout=5.0):
    flow = ddflow.Dataflow(workers=workers, spark=cluster, heartbeat_timeout=heartbeat_timeout)
    h, xs = flow.new_collection("xs")
    cap = xs.map(fn).project(0).count().capture()
    h.update([(i,) for i in range(10)], times=0)
    flow.advance_to(1)
    flow.run()
    return flow, h, cap


def _raise_on_13(r):
    if r[0] == 13:
        raise ValueError("thirteen")
    return r


def test_a_worker_that_raises_is_named_with_its_host(cluster):
    flow, h, _ = _flow(cluster, _raise_on_13)
    h.insert((13,), time=1)
    flow.advance_to(2)
    t = time.monotonic()
    with pytest.raises(ValueError, match=r"thirteen \[worker \d on host 127\.0\.0\.1, operator 'map"):
        flow.run()
    assert time.monotonic() - t < 10
    with pytest.raises(ddflow.DataflowError, match="failed earlier"):
        flow.run()
    assert flow._pool.placement.launcher.join(30)  # Spark's job is over: the slots are free again


@pytest.mark.parametrize("how", ["worker", "task", "executor"])
def test_a_dead_worker_task_or_executor_stops_the_dataflow_within_seconds(cluster, how):
    """SIGKILL the worker process, have Spark kill its task (job group cancelled), or SIGKILL its executor JVM."""
    flow, h, _ = _flow(cluster)
    pool = flow._pool
    victim = 1
    if how == "worker":
        os.kill(pool.pids[victim], signal.SIGKILL)
        named = rf"worker {victim} \(pid {pool.pids[victim]} on host 127\.0\.0\.1\) died \(killed by SIGKILL\)"
    elif how == "task":
        pool.placement.launcher.cancel()  # as Spark kills the stage's tasks when a job is cancelled
        named = r"(worker \d \(pid \d+ on host 127\.0\.0\.1\) died|cancelled.*its workers: worker 0 \(pid \d+ on host " \
                r"127\.0\.0\.1\), worker 1)"
    else:
        os.kill(_executor_of(pool.pids[victim]), signal.SIGKILL)
        named = r"worker \d \(pid \d+ on host 127\.0\.0\.1\) died"
    _runs_fail_within(flow, h, named, seconds=15)
    assert not any(_alive(p) for p in pool.pids)
    with pytest.raises(ddflow.DataflowError, match="failed earlier"):
        flow.run()
    assert pool.placement.launcher.join(60)
    if how == "executor":  # the cluster starts a new executor; later tests need both
        _wait_for_executors(cluster, 2)


def test_a_hung_worker_is_named_through_its_task(cluster):
    flow, h, _ = _flow(cluster, heartbeat_timeout=3.0)
    pool = flow._pool
    os.kill(pool.pids[0], signal.SIGSTOP)
    _runs_fail_within(flow, h, rf"worker 0 \(pid {pool.pids[0]} on host 127\.0\.0\.1\) is hung .*no heartbeat "
                               r".*stopped", seconds=15)
    assert pool.placement.launcher.join(60)
    assert not _alive(pool.pids[0])


def _runs_fail_within(flow, h, named: str, seconds: float) -> None:
    """Keep feeding and running (a kill takes effect a moment later): the dataflow must fail, naming the worker."""
    t = time.monotonic()
    with pytest.raises(ddflow.DataflowError, match=named):
        for step in range(1, 10_000):
            h.insert((7,), time=step)
            flow.advance_to(step + 1)
            flow.run()
            assert time.monotonic() - t < seconds, f"still running {seconds} s after the fault"
            time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _executor_of(pid: int) -> int:
    """The executor JVM above a worker process (worker < task's Python worker < daemon < JVM)."""
    p = pid
    for _ in range(6):
        with open(f"/proc/{p}/stat") as f:
            p = int(f.read().rsplit(")", 1)[1].split()[1])
        with open(f"/proc/{p}/cmdline", "rb") as f:
            if b"CoarseGrainedExecutorBackend" in f.read():
                return p
    raise AssertionError(f"no executor JVM above pid {pid}")


def _wait_for_executors(spark, n: int, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < n + 1:
        assert time.monotonic() < end, f"the cluster did not get back {n} executors"
        time.sleep(0.5)


def test_spark_is_refused_for_anything_but_a_session():
    with pytest.raises(ddflow.UsageError, match="SparkSession"):
        ddflow.Dataflow(workers=2, spark="local-cluster")



def test_a_function_the_executors_cannot_import_is_named_at_start(cluster, tmp_path, monkeypatch):
    """A function from a module only the driver has: the first run says so (not a hang, not Spark's retries)."""
    (tmp_path / "driver_only_udfs.py").write_text("def double(r):\n    return (r[0] * 2,)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import driver_only_udfs

    flow = ddflow.Dataflow(workers=2, spark=cluster)
    h, xs = flow.new_collection("xs")
    xs.map(driver_only_udfs.double).capture()
    h.insert((1,), time=0)
    flow.advance_to(1)
    t = time.monotonic()
    with pytest.raises(ddflow.DataflowError, match=r"could not load the dataflow: ModuleNotFoundError: No module "
                                                   r"named 'driver_only_udfs'.*register_pickle_by_value"):
        flow.run()
    assert time.monotonic() - t < 30


def test_an_executor_that_cannot_load_the_native_extension_is_told_what_it_needs():
    """A task whose Python cannot load ``ddflow._native`` fails at its first import of ddflow: the start's error
    carries that error and says what an executor needs (the wheel, or a packed venv), not "are the slots free".
    The error is the real one, from an interpreter whose extension path is broken."""
    import subprocess
    import sys

    from ddflow.streaming.cluster import explained

    run = subprocess.run([sys.executable, "-c", "import ddflow.workers.remote"], capture_output=True, text=True,
                         env={**os.environ, "DDFLOW_NATIVE_LIBRARY": "/nonexistent/_native.so"}, timeout=120)
    assert run.returncode != 0
    cause = run.stderr.strip().splitlines()[-1]
    assert cause.startswith("ddflow.base.native.NativeError: ddflow's native extension (ddflow._native) could not "
                            "be loaded: /nonexistent/_native.so")
    message = explained(cause)
    assert message.startswith(cause) and "its wheel in the executors' environment" in message
    assert "spark.archives" in message and "slots" not in message
    missing = explained("ModuleNotFoundError: No module named 'ddflow'")
    assert "its wheel in the executors' environment" in missing
    assert explained("ModuleNotFoundError: No module named 'driver_only_udfs'") == \
        "ModuleNotFoundError: No module named 'driver_only_udfs'"


# -- lifecycle: close() releases the barrier tasks' slots ------------------------------------------------------


def _counted(flow):
    """Build and run a small count; its output (so a start that silently ran nothing would show)."""
    h, xs = flow.new_collection("xs")
    cap = xs.project(0).count().capture()
    h.update([(i % 3,) for i in range(9)], times=0)
    flow.advance_to(1)
    flow.run()
    return cap.drain()


COUNTED = [((0, 3), 0, 1), ((1, 3), 0, 1), ((2, 3), 0, 1)]


def _job_ended(flow) -> bool:
    return flow._pool.placement.launcher.join(0)


def test_close_frees_the_slots_for_the_next_dataflow(cluster):
    """close() returns once Spark's job has ended; the next dataflow gets every slot (a held slot fails its start)."""
    first = ddflow.Dataflow(workers=2, spark=cluster)
    assert _counted(first) == COUNTED
    first.close()
    assert _job_ended(first)
    first.close()  # idempotent
    with pytest.raises(ddflow.DataflowError, match="closed"):
        first.run()
    with ddflow.Dataflow(workers=2, spark=cluster) as second:
        assert _counted(second) == COUNTED
    assert _job_ended(second)  # leaving the with block closed it
    third = ddflow.Dataflow(workers=2, spark=cluster)
    assert _counted(third) == COUNTED
    third.close()


def test_a_dropped_dataflow_frees_its_slots_at_once(cluster):
    """The last reference gone, the slots are free: no cyclic collection needed (the collector is off here)."""
    import gc

    gc.collect()
    gc.disable()
    try:
        flow = ddflow.Dataflow(workers=2, spark=cluster)
        assert _counted(flow) == COUNTED
        launcher = flow._pool.placement.launcher
        del flow
        assert launcher.join(0)
    finally:
        gc.enable()
    later = ddflow.Dataflow(workers=2, spark=cluster)
    assert _counted(later) == COUNTED
    later.close()


def test_a_start_that_finds_the_slots_held_names_the_dataflow_holding_them(cluster):
    holder = ddflow.Dataflow(workers=2, spark=cluster, name="bids per auction")
    assert _counted(holder) == COUNTED
    group = holder._pool.placement.launcher.group
    blocked = ddflow.Dataflow(workers=2, spark=cluster)
    with pytest.raises(ddflow.UsageError, match=rf"need 1 free task slot; the cluster has 2, 0 kept for other jobs: "
                                                rf"ddflow dataflow 'bids per auction' \(created at test_cluster\.py:\d+\) "
                                                rf"holds 2 \(Spark job group {group}\); close\(\) it"):
        blocked.run()
    holder.close()
    after = ddflow.Dataflow(workers=2, spark=cluster)
    assert _counted(after) == COUNTED
    after.close()


class _Marker:
    """Unpickling this creates ``path``: what an attacker's pickled frame header would do in a worker."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_no_secret_in_the_job_and_strangers_run_nothing_on_the_executors(cluster, tmp_path):
    """The Spark job's group and description name the dataflow, not its secret; a pickled frame and a size claim
    at each executor's ingest port are refused (the executors run on this machine: the file would appear), and the
    routed input that follows gives the right counts."""
    import base64
    import pickle
    import socket
    import struct

    marker = str(tmp_path / "pwned")
    with ddflow.Dataflow(workers=2, spark=cluster, name="attacked") as flow:
        h, xs = flow.new_collection("xs")
        cap = xs.project(0).count().capture()
        ingest = flow.ingest()  # starts the workers on the executors
        placement = flow._pool.placement
        launcher, secret = placement.launcher, placement.credentials._secret
        shown = f"{launcher.group} {launcher.description}"
        for form in (secret.hex(), base64.b64encode(secret).decode(), repr(secret)):
            assert form not in shown
        assert "ddflow dataflow 'attacked'" in launcher.description
        assert cluster.sparkContext.statusTracker().getJobIdsForGroup(launcher.group)  # the job's real group
        header = pickle.dumps(("in", (0, 0, [0]), [], [], _Marker(marker)), protocol=5)
        strangers = []
        for address in ingest.addresses:
            for data in (struct.pack("<QI", 12 + len(header), len(header)) + header, struct.pack("<QI", 400 << 20, 9)):
                s = socket.create_connection(tuple(address))
                s.sendall(data)
                strangers.append(s)
        for part, rows in enumerate(([(1, 0), (2, 0), (1, 5)], [(2, 7), (3, 1)])):
            got = ingest.send(0, part, {"xs": (rows, 0, 1)})
            if h.kinds is None:
                h.kinds = tuple(got["kinds"]["xs"])
        flow.advance_to(1)
        flow.run(routed=(0, 2))
        assert sorted(cap.drain()) == [((1, 2), 0, 1), ((2, 2), 0, 1), ((3, 1), 0, 1)]
        for s in strangers:
            s.close()
    assert not os.path.exists(marker)
