"""The dataflow's metrics against workloads whose answers are known, and the Prometheus endpoint scraped over loopback.

Each count is checked against an oracle computed from the input alone:
- state rows of a keyed count equal its live keys once merged, never fall
  below them, and stay within the spine's idle bound;
- retractions at an output equal the (record, time) pairs whose
  from-scratch multiplicity fell, over random streams with many data
  times per advance, at one and two workers;
- updates in equal the updates fed, and rejected removals equal the
  removals of absent records;
- a scrape of ``serve_metrics`` parses (prometheus-client's own parser)
  to the same values as ``metrics()``, and ``python -m ddflow.top``
  reads it.
"""
from __future__ import annotations

import collections
import json
import math
import subprocess
import sys
import urllib.request

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow
from ddflow.base.metrics import Histogram, families, quantile_of, text_format

#: Random streams: (key, value, time offset within the advance, diff) per advance.
UPDATE = st.tuples(st.integers(0, 6), st.integers(0, 3), st.integers(0, 4), st.sampled_from([1, 1, 1, -1]))
STREAM = st.lists(st.lists(UPDATE, max_size=12), min_size=1, max_size=8)


def _feed(stream):
    """(rows, times, diffs) per advance, times increasing across advances by 5 (several data times per advance)."""
    for i, step in enumerate(stream):
        yield ([(k, v) for k, v, _, _ in step], [5 * i + dt for _, _, dt, _ in step], [d for *_, d in step],
               5 * (i + 1))


def _distinct_retractions(stream) -> int:
    """From scratch: how many (record, time) pairs the distinct of the accumulated input loses a record at."""
    acc: collections.Counter = collections.Counter()
    events = sorted(((5 * i + dt, (k, v), d) for i, step in enumerate(stream) for k, v, dt, d in step))
    by_time: dict[int, list] = collections.defaultdict(list)
    for t, r, d in events:
        by_time[t].append((r, d))
    lost = 0
    for t in sorted(by_time):
        before = {r for r, n in acc.items() if n > 0}
        for r, d in by_time[t]:
            acc[r] += d
        after = {r for r, n in acc.items() if n > 0}
        lost += len(before - after)
    return lost


@pytest.mark.parametrize("workers", [1, 2])
@settings(max_examples=25, deadline=None)
@given(stream=STREAM)
def test_retractions_equal_the_removals_that_reach_the_output(workers, stream):
    with ddflow.Dataflow(workers=workers) as flow:
        e_in, e = flow.new_collection("e", schema=["i", "i"])
        out = e.distinct().capture(name="uniq")
        fed = 0
        for rows, times, diffs, frontier in _feed(stream):
            e_in.update(rows, times=times, diffs=diffs)
            fed += len(rows)
            flow.advance_to(frontier)
            flow.run()
        m = flow.metrics()
        changes = out.changes()
        assert m["outputs"]["uniq"]["retractions"] == _distinct_retractions(stream)
        assert m["outputs"]["uniq"]["retractions"] == sum(1 for _, _, d in changes if d < 0)
        assert m["outputs"]["uniq"]["updates"] == len(changes)
        assert m["inputs"]["e"] == {"updates": fed, "rejected": 0}
        assert m["runs"] == len(stream) and m["step_seconds"]["count"] == len(stream)
        delivered_runs = m["outputs"]["uniq"]["freshness_seconds"]["count"]
        assert delivered_runs <= len(stream) and (delivered_runs > 0) == bool(changes)
        if workers > 1:
            assert [w["worker"] for w in m["workers"]] == [0, 1]
            assert sum(w["records"] for w in m["workers"]) == sum(o["records"] for o in m["operators"].values())


@settings(max_examples=25, deadline=None)
@given(stream=STREAM)
def test_state_rows_bound_the_live_keys(stream):
    """A keyed count's state (the arrangement of its keys; the count itself keeps no output trace) holds at least
    one row per live key at every time, and after idle runs no more than the spine's idle shape allows: about
    twice what merging everything would leave, plus ``IDLE_FLOOR`` (:meth:`ddflow.traces.spine.Spine.reclaimable`)."""
    from ddflow.traces.spine import IDLE_FLOOR

    flow = ddflow.Dataflow()
    e_in, e = flow.new_collection("e", schema=["i", "i"])
    e.project(0).count(name="per_key").capture()
    acc: collections.Counter = collections.Counter()
    for rows, times, diffs, frontier in _feed(stream):
        # Removals only of what is there: a signed multiset with negative counts has no "live" keys.
        keep = []
        for r, t, d in sorted(zip(rows, times, diffs), key=lambda x: x[1]):
            if d < 0 and acc[r] <= 0:
                continue
            acc[r] += d
            keep.append((r, t, d))
        if keep:
            e_in.update([r for r, _, _ in keep], times=[t for _, t, _ in keep], diffs=[d for *_, d in keep])
        flow.advance_to(frontier)
        flow.run()
        assert _arranged(flow) >= len({k for (k, _), n in acc.items() if n > 0})
    live = len({k for (k, _), n in acc.items() if n > 0})
    for _ in range(20):  # idle runs: the merges finish
        flow.advance_to(flow.frontier + 1)
        flow.run()
    assert live <= _arranged(flow) <= 2 * live + 2 * IDLE_FLOOR
    assert flow.metrics()["operators"]["per_key"]["records"] == 0  # a count keeps no output trace


@pytest.mark.parametrize("workers", [1, 2])
def test_state_rows_equal_the_live_keys(workers):
    """Keys loaded with repeats, then half of them deleted: once merged, the state holds exactly the live keys."""
    n = 10_000
    with ddflow.Dataflow(workers=workers) as flow:
        e_in, e = flow.new_collection("e", schema=["i", "i"])
        e.project(0).count(name="per_key").capture()
        e_in.update([(k, v) for k in range(n) for v in (0, 1)], times=0)
        flow.advance_to(1)
        flow.run()
        assert _arranged(flow) == n
        e_in.update([(k, v) for k in range(0, n, 2) for v in (0, 1)], times=1, diffs=-1)
        for t in range(2, 40):
            flow.advance_to(t)
            flow.run()
            if _arranged(flow) == n // 2:
                break
        assert _arranged(flow) == n // 2


def _arranged(flow) -> int:
    """Rows held by the dataflow's one arrangement (the count's keys; with workers, summed over them)."""
    arranged, = [s["records"] for s in flow.metrics()["operators"].values() if s["kind"] == "ArrangeNode"]
    return arranged


def test_rejected_removals_are_counted():
    flow = ddflow.Dataflow()
    a_in, a = flow.new_collection("a", nonnegative="dead-letter")
    a.capture()
    a_in.update([(1,), (2,)], times=0)
    a_in.update([(1,), (3,), (4,)], times=1, diffs=-1)  # 3 and 4 are not there
    flow.advance_to(2)
    flow.run()
    assert flow.metrics()["inputs"]["a"]["rejected"] == 2
    assert len(a_in.take_rejected()) == 2
    assert flow.metrics()["inputs"]["a"]["rejected"] == 2  # taken, still counted
    assert flow.metrics()["inputs"]["a"]["updates"] == 5


def test_histogram_quantiles_against_sorted_samples():
    """The interpolated quantile lies in the bucket of the true quantile (the most a bucketed histogram says)."""
    import random

    rng = random.Random(7)
    for _ in range(50):
        xs = [rng.lognormvariate(-6, 2) for _ in range(rng.randrange(1, 400))]
        h = Histogram()
        for x in xs:
            h.observe(x)
        for q in (0.5, 0.9, 0.99):
            true = sorted(xs)[max(math.ceil(q * len(xs)) - 1, 0)]
            got = h.quantile(q)
            bounds = (0.0, *h.bounds, math.inf)
            i = next(j for j in range(1, len(bounds)) if true <= bounds[j])
            hi = bounds[i - 1] if math.isinf(bounds[i]) else bounds[i]  # past the last bound: that bound
            assert bounds[i - 1] <= got <= hi, (q, true, got)
        again = Histogram.from_dict(h.as_dict())
        assert again.counts == h.counts and again.count == len(xs)
    assert math.isnan(Histogram().quantile(0.5))
    assert quantile_of([(1.0, 0), (math.inf, 3)], 0.5) == 1.0


def _scrape(url: str) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    body = urllib.request.urlopen(url, timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(body) for s in fam.samples}


def test_the_prometheus_endpoint_serves_what_metrics_returns():
    pytest.importorskip("prometheus_client")
    with ddflow.Dataflow(name="scraped") as flow:
        e_in, e = flow.new_collection("e", schema=["i", "i"])
        e.distinct().capture(name="uniq")
        server = flow.serve_metrics(every=0)
        assert server.url.startswith("http://127.0.0.1:")
        e_in.update([(1, 2), (1, 3), (2, 3)], times=0)
        e_in.update([(1, 3)], times=1, diffs=-1)
        flow.advance_to(2)
        flow.run()
        got = _scrape(server.url)
        m = flow.metrics()
        base = (("dataflow", "scraped"),)
        assert got[("ddflow_output_retractions_total", (*base, ("output", "uniq")))] == 1
        assert got[("ddflow_output_updates_total", (*base, ("output", "uniq")))] == m["outputs"]["uniq"]["updates"]
        assert got[("ddflow_input_updates_total", (*base, ("input", "e")))] == 4
        assert got[("ddflow_frontier", base)] == 2
        assert got[("ddflow_runs_total", base)] == 1
        assert got[("ddflow_step_seconds_count", base)] == 1
        for op, s in m["operators"].items():
            assert got[("ddflow_operator_records", (*base, ("kind", s["kind"]), ("operator", op)))] == s["records"]
        # Our own text format says the same as the endpoint (for files and tests without prometheus-client).
        from prometheus_client.parser import text_string_to_metric_families

        ours = {(s.name, tuple(sorted(s.labels.items()))): s.value
                for fam in text_string_to_metric_families(text_format(families(m, "scraped"))) for s in fam.samples}
        assert {k: v for k, v in ours.items() if "busy" not in k[0]} == {
            k: v for k, v in got.items() if k[0].startswith("ddflow_") and "busy" not in k[0]}
        top = subprocess.run([sys.executable, "-m", "ddflow.top", server.url, "--once", "--json"],
                             capture_output=True, text=True, timeout=60)
        assert top.returncode == 0, top.stderr
        frame = json.loads(top.stdout)
        assert frame["outputs"]["uniq"]["retractions"] == 1 and frame["title"] == "scraped"
        assert {r["operator"] for r in frame["operators"]} == set(m["operators"])
    assert server.closed  # closed with its dataflow
    with pytest.raises(OSError):
        urllib.request.urlopen(server.url, timeout=5)


def test_top_names_what_it_cannot_read(tmp_path):
    for source, says in ((str(tmp_path / "nowhere"), "neither a metrics URL"), (str(tmp_path), "no progress records"),
                         ("http://127.0.0.1:9/metrics", "cannot read")):
        r = subprocess.run([sys.executable, "-m", "ddflow.top", source, "--once"], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2 and says in r.stderr, (source, r.stderr)


def test_a_dataflow_serving_metrics_is_still_released_when_dropped():
    import gc
    import weakref

    flow = ddflow.Dataflow()
    flow.new_collection("e")
    server = flow.serve_metrics()
    ref = weakref.ref(flow)
    del flow
    if ref() is not None:
        gc.collect()
    assert ref() is None and server.closed  # the endpoint held only the published families, and went with it
