"""Exactly once after a restore from a snapshot, with string keys (the short, deterministic kill matrix).

A query with string keys (a SQL ``GROUP BY`` over a string column, and
reachability over string node names) writes every output to a
``KafkaSink`` and a ``ParquetSink``, with a snapshot every one or two
batches.  It dies (the driver's fault hook raises) right after a batch's
outputs went out and before its state commit (``before_state``), or
between its two Kafka sinks (``mid_output``); a new ``StreamingDataflow``
over the same state restores (from a snapshot, whose compaction reorders
rows, so the new process interns the strings in another order and
computes the same changes in another order) and replays the batch.

The oracle is the same batches through a query that never stopped:
each output topic, read plainly (no de-duplication), must hold the same
records with the same headers in the same order on every partition, the
Parquet files the same rows, and the accumulated outputs the from-scratch
answers.  Kafka is the real embedded broker; no Spark (``process_arrow``
takes the Kafka-shaped micro-batches Spark would hand the driver).
"""
from __future__ import annotations

import collections
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ddflow
from ddflow.streaming.broker import create_topics
from ddflow.streaming.demo import bfs, reach_dataflow
from ddflow.streaming.driver import StreamingDataflow
from ddflow.streaming.sinks import AUTH_HEADER, KafkaSink, ParquetSink, _read_all, accumulate, read_changes
from ddflow.streaming.state import StateStore
from tests.streaming.test_driver import kafka_rows

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

TOTALS = "SELECT cust, SUM(amount) AS total, COUNT(*) AS n FROM orders GROUP BY cust"
ROOTS = ["n-0", "n-1"]


class Died(Exception):
    """The fault hook's stand-in for SIGKILL: nothing after the hook runs in this process."""


def build(flow: ddflow.Dataflow):
    """Reachability over string nodes from fixed roots (a loop), beside the SQL table's view."""
    roots_in, roots = flow.new_collection("roots", schema=("o",))
    roots_in.update([(r,) for r in ROOTS], times=0)
    edges_in, edges = flow.new_collection("edges", schema=("o", "o"))
    return {"edges": edges_in}, {"reach": reach_dataflow(roots, edges), "reach_pq": reach_dataflow(roots, edges)}


def workload(seed: int, batches: int = 7, per_batch: int = 16):
    """Kafka-shaped micro-batches of orders (string customers, inserts and deletes of what is there) and edges
    between string nodes (a sliding window); the final orders and edges."""
    rng = random.Random(seed)
    custs = [f"{rng.choice(['acme', 'b', 'zed', 'Ünïcode', 'c-long-customer-name'])}-{i}" for i in range(9)]
    nodes = [f"n-{i}" if i % 3 else f"node-{i:03d}" for i in range(10)]
    live_orders: list[tuple[str, int]] = []
    window = collections.deque((rng.choice(nodes), rng.choice(nodes)) for _ in range(8))
    out, t, off = [], 0, 0
    first = [{"src": s, "dst": d, "t": 0, "diff": 1} for s, d in window]
    for b in range(batches):
        orders, edges = [], first if b == 0 else []
        for _ in range(per_batch):
            t += 1
            if live_orders and rng.random() < 0.35:
                c, a = live_orders.pop(rng.randrange(len(live_orders)))
                orders.append({"cust": c, "amount": a, "t": t, "diff": -1})
            else:
                c, a = rng.choice(custs), rng.randrange(1, 50)
                live_orders.append((c, a))
                orders.append({"cust": c, "amount": a, "t": t, "diff": 1})
            if rng.random() < 0.5:
                old, new = window.popleft(), (rng.choice(nodes), rng.choice(nodes))
                window.append(new)
                edges += [{"src": old[0], "dst": old[1], "t": t, "diff": -1},
                          {"src": new[0], "dst": new[1], "t": t, "diff": 1}]
        out.append(pa.concat_tables([kafka_rows(orders, topic="orders", start=off),
                                     kafka_rows(edges, topic="edges", start=off + 1000)]))
        off += len(orders)
    return out, live_orders, list(window)


def stream(bootstrap: str, prefix: str, work, snapshot_every: int, workers: int = 1) -> StreamingDataflow:
    s = (StreamingDataflow(build, name="exactly-once").workers(workers)
         .table("orders", {"cust": "string", "amount": "bigint"}, format="json", time="t", diff="diff",
                topic="orders")
         .input("edges", ["src", "dst"], format="json", time="t", diff="diff", topic="edges")
         .view("totals", TOTALS).view("totals_pq", TOTALS)
         .output("totals", KafkaSink(bootstrap, f"{prefix}-totals"))
         .output("reach", KafkaSink(bootstrap, f"{prefix}-reach"), names=["node", "root"])
         .output("totals_pq", ParquetSink(str(work / "totals")))
         .output("reach_pq", ParquetSink(str(work / "reach")), names=["node", "root"])
         .stateLocation(str(work / "state"), snapshot_every))
    return s


def topics(bootstrap: str, prefix: str) -> None:
    create_topics(bootstrap, [f"{prefix}-totals", f"{prefix}-reach"], partitions=3)


def partitions(bootstrap: str, topic: str) -> dict[int, list]:
    """Each partition's records (key, value, headers but the authenticator, which covers the topic's name and
    the query's key) in offset order, read plainly."""
    out: dict[int, list] = collections.defaultdict(list)
    for part, offset, key, value, headers in sorted(_read_all(bootstrap, topic), key=lambda r: (r[0], r[1])):
        out[part].append((key, value, tuple(h for h in headers or () if h[0] != AUTH_HEADER)))
    return dict(out)


def parquet_files(path) -> dict[str, list[dict]]:
    return {f.name: pq.read_table(f).to_pylist() for f in sorted(path.glob("*.parquet"))}


def run_reference(bootstrap, prefix, work, batches, snapshot_every, workers) -> None:
    s = stream(bootstrap, prefix, work, snapshot_every, workers)
    try:
        for b, t in enumerate(batches):
            s.process_arrow(t, b)
    finally:
        s.stop()


@pytest.mark.parametrize("seed, point, batch, snapshot_every, workers", [
    (1, "before_state", 2, 2, 1),   # restored from the snapshot of batches 0..1, batch 2 replayed
    (2, "before_state", 4, 1, 1),   # a snapshot every batch: restored from the snapshot of 0..3
    (3, "mid_output", 3, 3, 1),     # the totals topic has batch 3, the reach topic not
    (4, "before_state", 3, 2, 2),   # two forked workers
])
def test_a_replay_after_a_restore_from_a_snapshot_writes_every_record_once(
        kafka_bootstrap, tmp_path, seed, point, batch, snapshot_every, workers):
    batches, orders, window = workload(seed)
    ref_prefix, prefix = f"eo-ref-{seed}-{tmp_path.name}"[:60], f"eo-{seed}-{tmp_path.name}"[:60]
    topics(kafka_bootstrap, ref_prefix)
    topics(kafka_bootstrap, prefix)
    run_reference(kafka_bootstrap, ref_prefix, tmp_path / "ref", batches, snapshot_every, workers)

    work = tmp_path / "crashy"
    first = stream(kafka_bootstrap, prefix, work, snapshot_every, workers)

    def die(where: str, batch_id: int) -> None:
        if (where, batch_id) == (point, batch):
            raise Died(where)

    first._fault = die
    try:
        with pytest.raises(Died):
            for b in range(batch + 1):
                first.process_arrow(batches[b], b)
    finally:
        first.stop()
    manifest = StateStore(str(work / "state")).manifest
    assert manifest.batch_id == batch - 1 and manifest.files[0].startswith("snapshot-"), manifest

    again = stream(kafka_bootstrap, prefix, work, snapshot_every, workers)  # the restarted query
    try:
        for b in range(batch, len(batches)):  # Spark replays the batch it had not committed, then goes on
            again.process_arrow(batches[b], b)
    finally:
        again.stop()
    sinks = {n: again.outputs[n].sink for n in ("totals", "reach")}
    assert sinks["totals"].skipped > 0  # the replay found its records on the topic and wrote none twice

    for name in ("totals", "reach"):
        got, want = partitions(kafka_bootstrap, f"{prefix}-{name}"), partitions(kafka_bootstrap, f"{ref_prefix}-{name}")
        assert got == want, name  # same records, same headers, same order, partition by partition
        assert parquet_files(work / name) == parquet_files(tmp_path / "ref" / name), name
    key = StateStore(str(work / "state")).key
    totals = collections.defaultdict(lambda: [0, 0])
    for c, a in orders:
        totals[c][0] += a
        totals[c][1] += 1
    want_totals = {(c, a, n): 1 for c, (a, n) in totals.items()}
    acc = collections.Counter()
    for ch in read_changes(kafka_bootstrap, f"{prefix}-totals", state_key=key):  # every record signed by the query
        acc[tuple(ch["record"])] += ch["diff"]
    assert {k: v for k, v in acc.items() if v} == want_totals
    assert accumulate(ParquetSink(str(work / "reach")).table()) == {p: 1 for p in bfs(window, ROOTS)}


WINDOWS = ("SELECT auction, window.start AS ws, window.end AS we, COUNT(*) AS n, MAX(price) AS top "
           "FROM bids GROUP BY auction, window(ts, '10 seconds')")
T0_US = 1_767_225_600_000_000  # 2026-01-01 UTC, microseconds


def window_batches(seed: int, batches: int = 8, per_batch: int = 12):
    """Kafka-shaped micro-batches of bids (string auctions, event times 0.9 s apart, now and then one late by up
    to 3 s, within the watermark's lateness) and retractions of recent bids (diff -1 at the bid's own time, so
    the snapshot drops both, and a restored process interns the auctions in another order); the net bids."""
    rng = random.Random(seed)
    auctions = [f"{rng.choice(['lot', 'Ärmel', 'z'])}-{i}" for i in range(6)]
    out, bids, i = [], [], 0
    for b in range(batches):
        rows = []
        for _ in range(per_batch):
            i += 1
            if bids and rng.random() < 0.25:
                gone = bids.pop(rng.randrange(max(len(bids) - 2, 0), len(bids)))  # one of the last two
                rows.append({**gone, "diff": -1})
                continue
            ts = T0_US + i * 900_000 - (rng.randrange(3_000_000) if rng.random() < 0.2 else 0)
            bid = {"auction": rng.choice(auctions), "price": rng.randrange(1, 100), "ts": ts, "diff": 1}
            bids.append(bid)
            rows.append(bid)
        out.append(kafka_rows(rows, topic="bids", start=b * per_batch))
    return out, bids


def window_stream(bootstrap: str, prefix: str, work, snapshot_every: int) -> StreamingDataflow:
    return (StreamingDataflow(name="exactly-once-windows")
            .table("bids", {"auction": "string", "price": "bigint", "ts": "timestamp"}, format="json", time="ts",
                   diff="diff", lateness="5 seconds", topic="bids")
            .view("windows", WINDOWS).view("windows_pq", WINDOWS)
            .output("windows", KafkaSink(bootstrap, f"{prefix}-windows"), mode="final")
            .output("windows_pq", ParquetSink(str(work / "windows")), mode="final")
            .stateLocation(str(work / "state"), snapshot_every))


@pytest.mark.parametrize("seed, batch, snapshot_every", [(1, 4, 2), (4, 3, 1)])  # both fail unsorted
def test_final_window_rows_are_written_once_across_a_replay_after_a_snapshot(kafka_bootstrap, tmp_path, seed, batch,
                                                                            snapshot_every):
    """The issue's other symptom: final-mode window rows written twice after a restore, with string keys."""
    batches, bids = window_batches(seed)
    ref_prefix, prefix = f"eo-wref-{seed}-{tmp_path.name}"[:60], f"eo-w-{seed}-{tmp_path.name}"[:60]
    create_topics(kafka_bootstrap, [f"{ref_prefix}-windows", f"{prefix}-windows"], partitions=2)
    ref = window_stream(kafka_bootstrap, ref_prefix, tmp_path / "ref", snapshot_every)
    for b, t in enumerate(batches):
        ref.process_arrow(t, b)
    ref.stop()
    first = window_stream(kafka_bootstrap, prefix, tmp_path / "crashy", snapshot_every)

    def die(where: str, batch_id: int) -> None:
        if (where, batch_id) == ("before_state", batch):
            raise Died(where)

    first._fault = die
    with pytest.raises(Died):
        for b in range(batch + 1):
            first.process_arrow(batches[b], b)
    first.stop()
    assert StateStore(str(tmp_path / "crashy" / "state")).manifest.files[0].startswith("snapshot-")
    again = window_stream(kafka_bootstrap, prefix, tmp_path / "crashy", snapshot_every)
    for b in range(batch, len(batches)):
        again.process_arrow(batches[b], b)
    again.stop()
    assert again.outputs["windows"].sink.skipped > 0
    got = partitions(kafka_bootstrap, f"{prefix}-windows")
    assert got == partitions(kafka_bootstrap, f"{ref_prefix}-windows")
    assert parquet_files(tmp_path / "crashy" / "windows") == parquet_files(tmp_path / "ref" / "windows")
    rows = [json.loads(v) for p in got.values() for _, v, _ in p]
    assert rows and all(r["diff"] == 1 for r in rows)
    closed = collections.Counter()  # from scratch: the windows the last watermark closed
    watermark = max(json.loads(v)["ts"] for t in batches for v in t.column("value").to_pylist()) - 5_000_000
    for b in bids:
        start = b["ts"] - (b["ts"] - T0_US) % 10_000_000
        if start + 10_000_000 <= watermark:
            closed[(b["auction"], start)] += 1
    assert sorted((r["record"][0], r["record"][3]) for r in rows) == sorted((a, n) for (a, _), n in closed.items())


def test_the_sinks_output_order_does_not_depend_on_the_row_order(kafka_bootstrap, tmp_path):
    """The same changes in two row orders: the same Kafka records in the same order, the same Parquet file."""
    rng = random.Random(5)
    rows = [{"cust": f"c{rng.randrange(10 ** rng.randrange(1, 4))}", "total": rng.randrange(-9, 9), "time": 3,
             "diff": rng.choice([1, -1])} for _ in range(60)]
    prefix = f"eo-order-{tmp_path.name}"[:60]
    create_topics(kafka_bootstrap, [f"{prefix}-a", f"{prefix}-b"], partitions=2)
    shuffled = rows[:]
    rng.shuffle(shuffled)
    for tag, rs in (("a", rows), ("b", shuffled)):
        with KafkaSink(kafka_bootstrap, f"{prefix}-{tag}", key=b"k" * 32) as sink:
            sink.write(0, pa.Table.from_pylist(rs))
        ParquetSink(str(tmp_path / tag)).write(0, pa.Table.from_pylist(rs))
    assert partitions(kafka_bootstrap, f"{prefix}-a") == partitions(kafka_bootstrap, f"{prefix}-b")
    assert parquet_files(tmp_path / "a") == parquet_files(tmp_path / "b")
    assert json.loads(partitions(kafka_bootstrap, f"{prefix}-a")[0][0][1])["record"]  # a real record
