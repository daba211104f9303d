"""State bounded by live data: a GROUP BY whose rows were deleted comes back to its live size, idle steps included.

The traces of an input whose rows were all deleted merge down to a few
tiny batches within a bounded number of steps, whether the dataflow is
idle (``run()`` changing nothing) or busy with another input; the view's
output equals the from-scratch answer at every step meanwhile.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.traces.spine import IDLE_FLOOR, IDLE_FUEL, MIN_FUEL

#: Insertion (and deletion) batch sizes: large and small, so that the spines' batches span several levels.
CHUNKS = [50_000, 25_000, 12_000, 6_000, 3_000, 1_500, 1_000, 700, 500, 200, 64, 20, 10, 5, 1]
N = sum(CHUNKS)


class View:
    """The view ``k -> COUNT(*)`` accumulated over every time so far: the capture's changes, drained and added up.

    In numpy (a Python dict of 100,000 rows a step would be the test's
    whole cost): rows ``(k, n)`` and their multiplicities, sorted.
    """

    def __init__(self, cap):
        self.cap = cap
        self.k = self.n = self.m = np.zeros(0, dtype=np.int64)

    def now(self) -> "View":
        u = self.cap.drain_updates()
        if len(u.diffs):  # columns k, n, then the view's null mask (none here)
            k, n, m = (np.concatenate([a, b]) for a, b in ((self.k, u.cols[0]), (self.n, u.cols[1]),
                                                           (self.m, u.diffs)))
            order = np.lexsort((n, k))
            k, n, m = k[order], n[order], m[order]
            start = np.flatnonzero(np.r_[True, (k[1:] != k[:-1]) | (n[1:] != n[:-1])])
            m = np.add.reduceat(m, start) if len(start) else m
            keep = m != 0
            self.k, self.n, self.m = k[start][keep], n[start][keep], m[keep]
        return self

    def __eq__(self, want: "dict | np.ndarray") -> bool:
        """Equal to the from-scratch answer: ``{k: count}``, or the live keys (each counted once)."""
        if isinstance(want, dict):
            keys = np.fromiter(want.keys(), dtype=np.int64, count=len(want))
            counts = np.fromiter(want.values(), dtype=np.int64, count=len(want))
        else:
            keys, counts = want, np.ones(len(want), dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        return (np.array_equal(self.k, keys[order]) and np.array_equal(self.n, counts[order])
                and bool((self.m == 1).all()))

    def __repr__(self) -> str:
        return f"View({len(self.k)} rows: {dict(zip(self.k[:5].tolist(), self.n[:5].tolist()))} ...)"


def expected(live: np.ndarray) -> np.ndarray:
    """From scratch: every live key once, so COUNT(*) is 1 (the keys stand for ``{k: 1}``)."""
    return live


def step(flow) -> None:
    flow.advance_to(flow.frontier + 1)
    flow.run()


@pytest.mark.parametrize("workers", [1, 2])
def test_group_by_comes_back_to_constant_state_after_deleting_everything(workers):
    with ddflow.Dataflow(workers=workers) as flow:
        t_in, _ = flow.new_collection("t", schema={"k": "bigint", "v": "bigint"})
        view = View(flow.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k").capture())
        keys = np.random.default_rng(5).permutation(N).astype(np.int64)
        live = np.zeros(0, dtype=np.int64)
        lo = 0
        for size in CHUNKS:  # insert every key, a chunk a step
            part = keys[lo: lo + size]
            t_in.update({"k": part, "v": part * 3}, times=flow.frontier)
            step(flow)
            live, lo = np.concatenate([live, part]), lo + size
            assert view.now() == expected(live)
        peak = flow.trace_size()
        assert peak >= 2 * N  # the input's accumulated counts and the arrangement
        deletion = np.random.default_rng(6).permutation(keys)
        lo = 0
        for size in CHUNKS[::-1]:  # delete every key, small chunks first
            part = deletion[lo: lo + size]
            t_in.update({"k": part, "v": part * 3}, times=flow.frontier, diffs=-1)
            step(flow)
            lo += size
            assert view.now() == expected(deletion[lo:])
        held = [flow.trace_size()]
        bound = 4 * peak // IDLE_FUEL + 20
        for _ in range(bound):  # idle steps: nothing changes, the output stays empty, the state goes
            step(flow)
            held.append(flow.trace_size())
            assert view.now() == {}
        assert held[0] > N  # without idle effort it would stay there
        assert held[-1] <= 4 * IDLE_FLOOR, held
        assert all(s["records"] <= 2 * IDLE_FLOOR for s in flow.stats()), flow.stats()
        assert flow.trace_bytes() <= 64 * 1024
        assert max(held[1:]) <= held[0]  # idle steps never grow it


@pytest.mark.parametrize("workers", [1, 2])
def test_deleted_string_keys_leave_the_interner_too(workers):
    """Codes of values no trace holds any more are collected once the traces let them go, with no new value since."""
    n = 20_000
    with ddflow.Dataflow(workers=workers) as flow:
        t_in, _ = flow.new_collection("t", schema={"k": "string"})
        cap = flow.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k").capture()
        keys = pa.table({"k": pa.array([f"key-{i}" for i in range(n)])})
        t_in.update(keys, times=0)
        step(flow)
        assert len(cap.drain()) == n
        t_in.update(keys, times=flow.frontier, diffs=-1)
        step(flow)
        assert len(cap.drain()) == n
        for _ in range(4 * (4 * n) // IDLE_FUEL + 20):
            step(flow)
        assert flow.trace_size() <= 4 * IDLE_FLOOR
        assert cap.contents(flow.frontier - 1) == {}
        assert len(flow.interner) <= 4 * IDLE_FLOOR
        if workers > 1:
            assert all(w["interner_values"] <= 4 * IDLE_FLOOR for w in flow.worker_stats())


def test_an_input_that_stops_shrinks_while_another_goes_on():
    """Idle is per trace: a stopped input's traces compact although every step writes another input."""
    with ddflow.Dataflow() as flow:
        a_in, _ = flow.new_collection("a", schema={"k": "bigint"})
        b_in, _ = flow.new_collection("b", schema={"k": "bigint"})
        va = View(flow.sql("SELECT k, COUNT(*) AS n FROM a GROUP BY k").capture())
        vb = View(flow.sql("SELECT k, COUNT(*) AS n FROM b GROUP BY k").capture())
        n = 20_000
        keys = np.arange(n, dtype=np.int64)
        a_in.update({"k": keys}, times=0)
        step(flow)
        a_in.update({"k": keys}, times=flow.frontier, diffs=-1)
        step(flow)
        assert flow.trace_size() >= 4 * n
        for i in range(4 * (4 * n) // MIN_FUEL + 20):  # each step writes b: a's traces get what an insertion gives
            b_in.update({"k": np.array([i % 50], dtype=np.int64)}, times=flow.frontier)
            step(flow)
            assert va.now() == {}
        assert vb.now() == {k: len(range(k, i + 1, 50)) for k in range(min(50, i + 1))}
        def held(table: str) -> int:
            return sum(s["records"] for s in flow.stats()
                       if s["operator"] == table or f"map_columns({table})" in s["operator"])

        assert held("a") <= 4 * IDLE_FLOOR and held("b") > 0, flow.stats()


def test_a_dataflow_in_its_idle_shape_does_no_idle_work(monkeypatch):
    """Once every trace is in its idle shape, a step that changes nothing exerts none of them."""
    import ddflow.traces.spine as spine_mod

    calls = []
    real = spine_mod.Spine.exert_idle
    monkeypatch.setattr(spine_mod.Spine, "exert_idle", lambda self, fuel: calls.append(self) or real(self, fuel))
    with ddflow.Dataflow() as flow:
        t_in, _ = flow.new_collection("t", schema={"k": "bigint"})
        flow.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k").capture()
        keys = np.arange(10_000, dtype=np.int64)
        t_in.update({"k": keys}, times=0)
        step(flow)
        t_in.update({"k": keys}, times=flow.frontier, diffs=-1)
        step(flow)
        for _ in range(20):
            step(flow)
        assert calls and flow.trace_size() == 0
        calls.clear()
        for _ in range(20):
            step(flow)
        flow.run()  # a run without an advance: idle too
        assert calls == []


@settings(max_examples=12)
@given(st.lists(st.tuples(st.sampled_from([0, 1, 40, 900, 5_000]), st.sampled_from([0, 1, 40, 900, 5_000, 10**9]),
                          st.integers(0, 2**32 - 1)), min_size=1, max_size=8),
       st.integers(0, 6))
def test_random_insertions_and_deletions_come_back_to_the_live_size(steps, extra_idle):
    """A random stream of insertions and deletions, then idle steps: state within a constant of the live rows."""
    with ddflow.Dataflow() as flow:
        t_in, _ = flow.new_collection("t", schema={"k": "bigint"})
        view = View(flow.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k").capture())
        live = np.zeros(0, dtype=np.int64)
        fresh = 0
        for n_ins, n_del, seed in steps:
            rng = np.random.default_rng(seed)
            dels = rng.choice(live, min(n_del, len(live)), replace=False)
            ins = np.arange(fresh, fresh + n_ins, dtype=np.int64)
            fresh += n_ins
            t_in.update({"k": np.concatenate([ins, dels])}, times=flow.frontier,
                        diffs=np.concatenate([np.ones(len(ins), np.int64), -np.ones(len(dels), np.int64)]))
            step(flow)
            live = np.concatenate([np.setdiff1d(live, dels), ins])
            assert view.now() == expected(live)
        peak = flow.trace_size()
        for _ in range(4 * peak // IDLE_FUEL + 2 * len(steps) + 10 + extra_idle):
            step(flow)
            assert view.now() == expected(live)
        # Two traces (the input's counts and the arrangement), each within twice what is live plus a floor.
        assert flow.trace_size() <= 2 * (2 * len(live) + 2 * IDLE_FLOOR)
