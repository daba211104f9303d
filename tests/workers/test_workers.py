"""Multi-worker dataflows: exchange edge cases, faults, and what runs where.

The operator and dataflow oracle suites already run every scenario at
W = 1, 2 and 3 (``oracle.WORKERS``); here are the cases they do not reach:
a worker that dies or raises, skew, empty rounds, many data times per
message time, values created on workers, and the driver-side API.
"""
from __future__ import annotations

import os
import re
import signal
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow
import oracle as O
from ddflow.base.updates import Updates
from ddflow.workers.exchange import partition, route
from oracle import int_rows, nonneg_schedules, run_scenario, schedules

pytestmark = pytest.mark.timeout(120)


def reach(roots, edges):
    return roots.iterate(lambda r: r.join(edges).map(lambda t: (t[1],)).concat(roots).distinct(), name="reach")


def reach_oracle(roots, edges):
    return O.fixpoint(roots, lambda r: O.distinct(O.add(O.fmap(O.join(r, edges), lambda t: (t[1],)), roots)))


# -- routing ---------------------------------------------------------------------------------------


def test_route_is_arithmetic_and_total():
    keys = np.arange(-1000, 1000, dtype=np.int64)
    for w in (1, 2, 3, 7, 8):
        owner = route(keys, w)
        assert owner.min() >= 0 and owner.max() < w
        assert set(owner.tolist()) == set(range(w))  # every worker owns some keys
    assert route(np.array([0.0, -0.0]), 5)[0] == route(np.array([0.0, -0.0]), 5)[1]
    nans = np.array([np.nan, (np.array([np.nan]).view(np.int64) | 1).view(np.float64)[0]])  # two NaN payloads
    assert route(nans, 5)[0] == route(nans, 5)[1]  # consolidation treats every NaN as one key


def test_partition_keeps_every_update_once():
    rng = np.random.default_rng(1)
    u = Updates((rng.integers(0, 50, 500), rng.integers(0, 5, 500)), rng.integers(0, 9, (500, 1)),
                rng.integers(-2, 3, 500), ("i", "i"))
    parts = partition(u, 3)
    assert sum(map(len, parts)) == len(u)
    for w, p in enumerate(parts):
        assert (route(p.cols[0], 3) == w).all()


# -- exchange edge cases -------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(schedules({"a": st.tuples(st.just(7), st.integers(0, 5)), "b": st.tuples(st.just(7), st.integers(0, 5))}))
def test_skew_every_key_on_one_worker(schedule):
    """One key: every update goes to one worker; the others exchange no data, only counts."""
    run_scenario(["a", "b"], lambda a, b: a.join(b).count().concat(a.distinct().map(lambda r: (*r, -1, 0))),
                 lambda a, b: O.add(O.count(O.join(a, b)), O.fmap(O.distinct(a), lambda r: (*r, -1, 0))), schedule,
                 workers=(1, 3, 4))


def test_empty_rounds_and_idle_workers():
    """Runs with no input, inputs to one collection only, and loops with nothing to do."""
    steps = [([], 1), ([], 2), ([("roots", (0,), 2, 1)], 3), ([], 4), ([("edges", (0, 1), 4, 1)], 5), ([], 9),
             ([("edges", (0, 1), 9, -1)], 10), ([], 12)]
    run_scenario(["roots", "edges"], reach, reach_oracle, steps, workers=(1, 2, 3))


def test_many_data_times_per_message_time():
    """2,000 updates at 1,000 data times retired by one advance give each update's own output change."""
    rng = np.random.default_rng(3)
    n = 1000
    src, dst = rng.integers(0, 60, n), rng.integers(0, 60, n)
    outs = {}
    for w in (1, 3):
        with ddflow.Dataflow(workers=w) as flow:
            hr, roots = flow.new_collection("roots")
            he, edges = flow.new_collection("edges")
            cap = reach(roots, edges).capture()
            hr.insert((0,), time=0)
            times = np.arange(1, n + 1)
            he.update({"s": np.concatenate([src, src[:n // 2]]), "d": np.concatenate([dst, dst[:n // 2]])},
                      times=np.concatenate([times, times[: n // 2] + n]),
                      diffs=np.concatenate([np.ones(n, np.int64), -np.ones(n // 2, np.int64)]))
            flow.advance_to(2 * n + 1)
            flow.run()
            outs[w] = cap.changes()
    assert outs[1] == outs[3]
    assert len({t for _, t, _ in outs[3]}) > 10  # full resolution: many distinct output times


@settings(max_examples=20, deadline=None)
@given(nonneg_schedules({"roots": int_rows(1, 0, 7), "edges": int_rows(2, 0, 7)}, max_updates=30))
def test_five_workers_three_tree_levels(schedule):
    """W = 5: the merge and allreduce tree has an incomplete last level."""
    run_scenario(["roots", "edges"], reach, reach_oracle, schedule, workers=(1, 5))


def _slow_swap(r):
    """Keyed by destination; the worker holding source 3 sends late, so its peers must wait for it."""
    if r[0] == 3:
        time.sleep(0.01)
    return (r[1], r[0])


def test_every_worker_count_from_one_to_eight_agrees():
    """The collectives fold the workers beyond a power of two (W = 3, 5, 6, 7) and halve count vectors
    (W = 4, 8), with one worker behind the others; every W delivers the same changes, at the same
    times, in the same runs (a wrong count of expected messages would hang or lose data)."""
    rng = np.random.default_rng(11)
    src, dst = rng.integers(0, 40, 300), rng.integers(0, 40, 300)
    outs = {}
    for w in range(1, 9):
        with ddflow.Dataflow(workers=w) as flow:
            he, edges = flow.new_collection("edges")
            back = edges.map(_slow_swap)
            caps = [back.count().capture(), back.join(edges).map(lambda r: (r[1], r[2])).distinct().capture()]
            for run in range(3):
                lo = 100 * run
                he.update({"s": src[lo : lo + 100], "d": dst[lo : lo + 100]}, times=np.arange(lo, lo + 100) + 1)
                if run:
                    he.update({"s": src[lo - 100 : lo - 50], "d": dst[lo - 100 : lo - 50]},
                              times=np.arange(lo, lo + 50) + 1, diffs=-1)
                flow.advance_to(lo + 101)
                flow.run()
                outs.setdefault(w, []).append([sorted(c.drain()) for c in caps])  # what each run delivered
    assert all(len(c) for run in outs[1] for c in run)  # every run changes both outputs
    for w in range(2, 9):
        assert outs[w] == outs[1], w


def test_workers_over_tcp_deliver_what_one_worker_does():
    """transport="tcp": the same framing, completion counts and merge tree over loopback TCP, W = 2 and 3.

    Every run's changes (reachability in a loop, a keyed count, strings
    made on the workers) equal those of one worker, and the final
    reachability equals a breadth-first search.
    """
    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, 30, 240), rng.integers(0, 30, 240)
    outs = {}
    for w, transport in ((1, "socketpair"), (2, "tcp"), (3, "tcp")):
        with ddflow.Dataflow(workers=w, transport=transport) as flow:
            hr, roots = flow.new_collection("roots")
            he, edges = flow.new_collection("edges")
            caps = [reach(roots, edges).capture(), edges.project(0).count().capture(),
                    edges.map(lambda r: (f"n{r[1]}",)).distinct().capture()]
            hr.update([(0,), (1,)], times=0)
            for run in range(3):
                lo = 80 * run
                he.update(list(zip(src[lo:lo + 80].tolist(), dst[lo:lo + 80].tolist())), times=run)
                if run:
                    he.update(list(zip(src[lo - 80:lo - 40].tolist(), dst[lo - 80:lo - 40].tolist())), times=run,
                              diffs=-1)
                flow.advance_to(run + 1)
                flow.run()
                outs.setdefault(w, []).append([sorted(c.drain()) for c in caps])
    live = list(zip(src[120:240].tolist(), dst[120:240].tolist()))
    seen, todo = {0, 1}, [0, 1]
    while todo:
        n = todo.pop()
        for s_, d_ in live:
            if s_ == n and d_ not in seen:
                seen.add(d_)
                todo.append(d_)
    acc = {}
    for run in outs[1]:
        for row, _, d in run[0]:
            acc[row] = acc.get(row, 0) + d
    assert {r for r, m in acc.items() if m} == {(n,) for n in seen}
    assert outs[2] == outs[1] and outs[3] == outs[1]


@settings(max_examples=30, deadline=None)
@given(schedules({"a": int_rows(2, 0, 6)}))
def test_values_created_on_workers(schedule):
    """Strings and tuples made by a map on one worker are joined and counted on another, and decoded in the driver."""
    def build(a):
        named = a.map(lambda r: (f"n{r[0]}", (r[1], "x")))
        return named.join(named.map(lambda r: (r[0], r[1][0] % 2))).count()

    def query(a):
        named = O.fmap(a, lambda r: (f"n{r[0]}", (r[1], "x")))
        return O.count(O.join(named, O.fmap(named, lambda r: (r[0], r[1][0] % 2))))
    run_scenario(["a"], build, query, schedule, workers=(1, 2, 3))


def test_subscribe_runs_in_the_driver_with_merged_batches():
    seen = []
    with ddflow.Dataflow(workers=3) as flow:
        h, a = flow.new_collection("a")
        a.count().subscribe(seen.append)
        h.update([(k % 10, k) for k in range(100)], times=0)
        flow.advance_to(1)
        flow.run()
        assert len(seen) == 1  # one consolidated batch per retired time range, not one per worker
        assert sorted(seen[0].to_pylist(), key=lambda r: (r["c0"], r["c1"]))[0] == {
            "c0": 0, "c1": 0, "c2": 1, "time": 0, "diff": 1}
        assert seen[0].num_rows == 100


def test_trace_size_and_worker_stats_cover_every_worker():
    sizes = {}
    for w in (1, 2):
        with ddflow.Dataflow(workers=w) as flow:
            h, a = flow.new_collection("a")
            a.distinct().capture()
            h.update([(k,) for k in range(1000)], times=0)
            flow.advance_to(1)
            flow.run()
            sizes[w] = flow.trace_size()
            if w == 2:
                stats = flow.worker_stats()
                assert [s["worker"] for s in stats] == [0, 1]
                assert all(s["trace_size"] > 0 for s in stats)  # the keys are spread over both
                assert sizes[w] == sum(s["trace_size"] for s in stats)
    assert sizes[1] == sizes[2] == 1000


def test_worker_stats_count_time_between_runs_as_idle_not_waiting():
    """``wait_s`` is waiting on peers within runs; a pause between runs is ``idle_s``; steps met while waiting are busy.

    A worker's wait for the driver's next command counted as waiting, so a
    benchmark's wait per round grew with whatever the driver did between
    runs.  Each second counts once: wait and busy together fit in the
    runs' wall time.
    """
    with ddflow.Dataflow(workers=2) as flow:
        h, a = flow.new_collection("a")
        a.iterate(lambda v: v.map(lambda r: (min(r[0] + 1, 30),)).distinct()).capture()
        in_runs = 0.0
        for t in range(3):
            h.update([(k,) for k in range(50)], times=t)
            flow.advance_to(t + 1)
            t0 = time.perf_counter()
            flow.run()
            in_runs += time.perf_counter() - t0
            time.sleep(0.4)
        stats = flow.worker_stats()
    for s in stats:
        assert s["idle_s"] >= 1.0  # the pauses, at least (and the time before the first run)
        assert 0 <= s["wait_s"] and s["wait_s"] + s["busy_s"] <= in_runs, (s["wait_s"], s["busy_s"], in_runs)


def test_worker_traces_compact_as_the_frontier_advances():
    """A sliding window keeps the same state on 3 workers as on 1: workers compact to the driver's frontier."""
    sizes = {}
    for w in (1, 3):
        with ddflow.Dataflow(workers=w) as flow:
            h, a = flow.new_collection("a")
            a.count().capture()
            for t in range(60):
                h.update([(k, t) for k in range(20)], times=t)
                if t >= 5:
                    h.update([(k, t - 5) for k in range(20)], times=t, diffs=-1)
                flow.advance_to(t + 1)
                flow.run()
            sizes[w] = flow.trace_size()
    # Without compaction the 3-worker traces would hold all 60 x 20 inserts and 55 x 20 removals.
    assert sizes[3] <= 2 * sizes[1] < 60 * 20, sizes


# -- faults --------------------------------------------------------------------------------------------


def _boom_flow(fn, workers=2):
    flow = ddflow.Dataflow(workers=workers)
    h, a = flow.new_collection("a")
    cap = a.map(fn, name="boom").distinct().capture()
    return flow, h, cap


def _die_on_13(r):
    if r[0] == 13:
        os.kill(os.getpid(), signal.SIGKILL)
    return r


def test_a_killed_worker_stops_the_dataflow_with_an_error_naming_it():
    flow, h, cap = _boom_flow(_die_on_13)
    h.update([(k,) for k in range(10)], times=0)
    flow.advance_to(1)
    flow.run()
    before = cap.changes()
    h.insert((13,), time=1)
    flow.advance_to(2)
    with pytest.raises(ddflow.DataflowError, match=r"worker \d \(pid \d+\) died \(killed by SIGKILL\) "
                                                   r"while running operator 'boom'"):
        flow.run()
    # The driver's state is intact: earlier output stays, and the dataflow refuses to go on.
    assert cap.changes() == before
    with pytest.raises(ddflow.DataflowError, match="failed earlier"):
        flow.run()


def _segfault_on_13(r):
    if r[0] == 13:
        os.kill(os.getpid(), signal.SIGSEGV)  # what a native kernel's bad read does
    return r


def test_a_worker_killed_by_a_fatal_signal_is_named_with_the_stack_it_was_in():
    flow, h, _ = _boom_flow(_segfault_on_13)
    h.update([(k,) for k in range(10)], times=0)
    flow.advance_to(1)
    flow.run()
    h.insert((13,), time=1)
    flow.advance_to(2)
    with pytest.raises(ddflow.DataflowError) as e:
        flow.run()
    msg = str(e.value)
    assert re.search(r"worker \d \(pid \d+\) died \(killed by SIGSEGV\) while running operator 'boom'", msg), msg
    # faulthandler's dump, from the worker's file: the fault, then the Python frame that raised it.
    assert "Segmentation fault" in msg and "_segfault_on_13" in msg, msg


def _raise_on_13(r):
    if r[0] == 13:
        raise ValueError("no thirteens")
    return r


def test_a_worker_that_raises_reports_the_error_the_worker_and_the_operator():
    flow, h, cap = _boom_flow(_raise_on_13, workers=3)
    h.update([(k,) for k in range(20)], times=0)
    flow.advance_to(1)
    with pytest.raises(ValueError, match=r"no thirteens.*\[worker \d, operator 'boom'\]"):
        flow.run()
    with pytest.raises(ddflow.DataflowError, match="failed earlier"):
        flow.run()


def test_non_convergence_on_workers_names_the_loop():
    with ddflow.Dataflow(workers=2) as flow:
        h, a = flow.new_collection("a")
        a.iterate(lambda x: x.map(lambda r: (r[0] + 1,)).distinct(), name="forever", max_iterations=30).capture()
        h.insert((1,), time=0)
        flow.advance_to(1)
        with pytest.raises(ddflow.NonConvergence, match="loop 'forever' did not converge within max_iterations=30"):
            flow.run()


def test_workers_exit_when_the_dataflow_closes():
    flow = ddflow.Dataflow(workers=2)
    h, a = flow.new_collection("a")
    a.count().capture()
    h.insert((1,), time=0)
    flow.advance_to(1)
    flow.run()
    pids = list(flow._pool.pids)
    flow.close()
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaped already
    with pytest.raises(ddflow.DataflowError, match="closed"):
        h.insert((2,), time=1)


def test_an_unknown_transport_is_refused():
    with pytest.raises(ddflow.UsageError, match="transport"):
        ddflow.Dataflow(workers=2, transport="udp")


def test_bad_worker_counts_are_refused():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers"):
            ddflow.Dataflow(workers=bad)


def test_workers_poll_only_with_a_core_to_spare():
    """Polling holds a core: with as many workers as cores, the peer a worker waits for (or the driver) needs it."""
    from ddflow.workers.runtime import spin_seconds, usable_cores

    cores = usable_cores()
    assert spin_seconds(cores, 3e-4) == 0.0
    if cores > 1:
        assert spin_seconds(cores - 1, 3e-4) == 3e-4
