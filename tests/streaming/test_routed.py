"""One feed: rows routed from Spark's executors straight to the workers give what the driver's path gives.

With ``workers(2, spark=spark)`` each micro-batch's partitions are admitted,
cast and logged on the executors (:mod:`ddflow.streaming.routing`) through
the driver's own feed (:mod:`ddflow.streaming.admission`).  Each test runs
the same micro-batches (Arrow tables shaped like Spark's Kafka rows, made a
Spark DataFrame of two partitions) through both paths and checks after
every batch that the routed outputs are the driver path's, change for
change, that the dead letters are the same, and that the accumulated output
is the from-scratch answer over the rows applied (DuckDB for SQL tables,
plain Python for windows).  Each routed query is restarted midway from its
state (snapshots every two batches): the log the executors and the driver
wrote restores the same counts, and the driver path restores it too.

The session's Spark is local-cluster[2,1,1024] (conftest): two executor
JVMs, one holding the workers' barrier task, the other the micro-batches'.
"""
from __future__ import annotations

import collections
import datetime
import decimal
import json
import random

import pyarrow as pa
import pytest

from ddflow.streaming.driver import StreamingDataflow
from ddflow.streaming.sinks import MemorySink

pytestmark = pytest.mark.spark

S = 1_000_000
T0 = 1_767_225_600 * S  # 2026-01-01, microseconds since the epoch
EPOCH = datetime.datetime(1970, 1, 1)
D = decimal.Decimal


@pytest.fixture(scope="module")
def cluster(spark):
    if not spark.sparkContext.master.startswith("local-cluster"):
        pytest.skip("needs the test session on local-cluster (DDFLOW_TEST_MASTER)")
    return spark


def kafka_rows(values: list, topic: str, start: int) -> pa.Table:
    """An Arrow table like a micro-batch of Spark's Kafka source (dicts become JSON, Decimals JSON numbers)."""
    n = len(values)
    enc = [v if isinstance(v, bytes) else json.dumps(v, default=float).encode() for v in values]
    return pa.table({
        "key": pa.nulls(n, pa.binary()),
        "value": pa.array(enc, pa.binary()),
        "topic": pa.array([topic] * n, pa.string()),
        "partition": pa.array([0] * n, pa.int32()),
        "offset": pa.array(range(start, start + n), pa.int64()),
        "timestamp": pa.array([T0 + i for i in range(start, start + n)], pa.timestamp("us", tz="UTC")),
        "timestampType": pa.array([0] * n, pa.int32()),
    })


def routed(spark, stream: StreamingDataflow, table: pa.Table, batch_id: int) -> None:
    """The micro-batch as Spark hands ``foreachBatch`` a DataFrame (two partitions: the session's parallelism)."""
    stream.process_batch(spark.createDataFrame(table), batch_id)


def changes(sink: MemorySink, batch_id: int) -> collections.Counter:
    """One batch's output changes as a multiset (workers may emit them in another order)."""
    return collections.Counter(tuple(r.values()) for r in sink.batches[batch_id].to_pylist())


def letters(sink: MemorySink, batch_id: int) -> list:
    t = sink.batches.get(batch_id)
    return sorted(((r["input"], r["error"], r["offset"], r["value"]) for r in t.to_pylist()), key=repr) if t else []


def micros(ts: int) -> datetime.datetime:
    return EPOCH + datetime.timedelta(microseconds=ts)


# -- SQL tables: timestamps, decimals, strings, NULLs, removals of absent records ------------------------------

TOTALS = ("SELECT c.region, o.cust, COUNT(*) AS n, SUM(o.price) AS total, MAX(o.ts) AS last "
          "FROM orders o JOIN customers c ON o.cust = c.id GROUP BY c.region, o.cust")
DEAR = "SELECT o_id, cust, price, ts FROM orders WHERE price >= 50"
CUSTOMERS = [("ann", "north"), ("bob", "south"), ("cy", "north"), ("dee", "east")]


def order_batches(seed: int, n: int = 6) -> tuple[list[pa.Table], list[dict]]:
    """Orders over ``n`` micro-batches (customers in the first), each message at its own time ``t``.

    Inserts, removals of inserted rows, removals of rows never inserted or
    already removed (rejected: dead letters), re-inserts of those, prices as
    JSON numbers and strings, NULLs, and messages that are dead letters
    (a price past the scale or the precision, a timestamp past year 9999).
    Returns the batches and every message that parses, in time order.
    """
    rng = random.Random(seed)
    live: list[dict] = []
    gone: list[dict] = []
    good: list[dict] = []
    batches = []
    t, offset, o_id = 1, 0, 0
    for b in range(n):
        msgs: list = []
        if b == 0:
            msgs += [{"id": c, "region": r, "t": 0, "topic": "customers"} for c, r in CUSTOMERS]
        for _ in range(rng.randint(5, 10)):
            r = rng.random()
            if live and r < 0.25:
                m = dict(live.pop(rng.randrange(len(live))), t=t, diff=-1)
                gone.append(m)
            elif gone and r < 0.4:  # removed already, or never there: rejected; or back again
                m = dict(rng.choice(gone), t=t, diff=rng.choice([-1, 1]))
                if m["diff"] == 1:
                    live.append(m)
            elif r < 0.48:
                m = {"o_id": 10_000 + o_id, "cust": rng.choice(["ann", "bob"]), "price": D("9.99"),
                     "ts": T0, "t": t, "diff": -1}  # a row nobody inserted
                gone.append(m)
                o_id += 1
            elif r < 0.56 or (b == 1 and not any(isinstance(v, bytes) for v in msgs)):
                for bad in ({"price": 1.255}, {"price": "123456789.1"}, {"ts": 2**62}, {"price": True}):
                    msgs.append(json.dumps({"o_id": -1, "cust": "ann", "price": 1, "ts": T0, "t": t, "diff": 1,
                                            **bad}).encode())
                    t += 1
                continue
            else:
                price = rng.choice([None, D(rng.randint(0, 9999)) / 100, D(rng.randint(0, 99)) * 10])
                m = {"o_id": o_id, "cust": rng.choice(["ann", "bob", "cy", "dee", "eve", None]), "price": price,
                     "ts": T0 + rng.randint(0, 10**9), "t": t, "diff": 1}
                if price is not None and rng.random() < 0.3:
                    m["price"] = f"{price}"  # a decimal string, as Spark's from_json takes one
                o_id += 1
                live.append(m)
            msgs.append(m)
            t += 1
        rows = [v for v in msgs if isinstance(v, bytes) or v.get("topic") != "customers"]
        cust = [{k: v for k, v in m.items() if k != "topic"} for m in msgs if isinstance(m, dict)
                and m.get("topic") == "customers"]
        good += [{**m, "topic": "customers"} for m in cust] + [m for m in rows if isinstance(m, dict)]
        batches.append(pa.concat_tables([kafka_rows(cust, "customers", 100_000 + offset),
                                         kafka_rows(rows, "orders", offset)]))
        offset += len(msgs)
    return batches, good


def orders_stream(state: str | None = None, spark=None) -> StreamingDataflow:
    s = (StreamingDataflow(name="orders")
         .table("orders", {"o_id": "bigint", "cust": "string", "price": "decimal(10,2)", "ts": "timestamp"},
                format="json", time="t", diff="diff", topic="orders")
         .table("customers", {"id": "string", "region": "string"}, format="json", time="t", topic="customers")
         .view("totals", TOTALS).output("totals", MemorySink())
         .view("dear", DEAR).output("dear", MemorySink())
         .deadLetter(MemorySink()))
    if spark is not None:
        s.workers(2, spark=spark)
    if state is not None:
        s.stateLocation(state, snapshotEvery=2)
    return s


def applied_orders(good: list[dict], upto: int) -> collections.Counter:
    """The order rows applied by time ``upto`` (plain Python): a removal the row's count cannot cover is rejected."""
    live: collections.Counter = collections.Counter()
    for m in good:
        if m.get("topic") == "customers" or m["t"] >= upto:
            continue
        rec = (m["o_id"], m["cust"], None if m["price"] is None else D(m["price"]), micros(m["ts"]))
        if live[rec] + m["diff"] >= 0:
            live[rec] += m["diff"]
    return +live


def duckdb_orders(live: collections.Counter) -> dict[str, dict]:
    """The views from scratch, by DuckDB, over the rows applied."""
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE orders (o_id BIGINT, cust VARCHAR, price DECIMAL(10,2), ts TIMESTAMP)")
    con.execute("CREATE TABLE customers (id VARCHAR, region VARCHAR)")
    con.executemany("INSERT INTO customers VALUES (?, ?)", CUSTOMERS)
    rows = [rec for rec, m in live.items() for _ in range(m)]
    if rows:
        con.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", rows)
    return {name: dict(collections.Counter(con.execute(q).fetchall())) for name, q in (("totals", TOTALS),
                                                                                        ("dear", DEAR))}


def test_sql_tables_routed_from_the_executors_equal_the_driver_path_and_duckdb(cluster, tmp_path):
    batches, good = order_batches(seed=4)
    ref = orders_stream()
    for b, t in enumerate(batches):
        ref.process_arrow(t, b)
        want = duckdb_orders(applied_orders(good, ref.flow.frontier))
        assert {n: ref.outputs[n].sink.contents() for n in want} == want, b
    dead = ref.dead_letter
    assert any("does not fit decimal(10,2)" in e for e in dead.table().column("error").to_pylist())
    assert any("not there" in e for e in dead.table().column("error").to_pylist())
    state = str(tmp_path / "state")
    first = orders_stream(state, cluster)
    halves = [(first, range(3)), (orders_stream(state, cluster), range(3, len(batches)))]
    try:
        for s, bs in halves:
            for b in bs:
                routed(cluster, s, batches[b], b)
                for name in ("totals", "dear"):
                    assert changes(s.outputs[name].sink, b) == changes(ref.outputs[name].sink, b), (name, b)
                assert letters(s.dead_letter, b) == letters(dead, b), b
            s.stop()
        assert halves[1][0].metrics.routed_bytes > 0
    finally:
        for s, _ in halves:
            s.stop()
    # The log the executors wrote (and the driver corrected) restores on the driver's path too: forked workers,
    # the same dataflow (a state is refused by a dataflow of another shape, and W=1 has no exchanges).
    again = orders_stream(state).workers(2)
    last = batches[-1].num_rows
    extra = kafka_rows([{"o_id": 7, "cust": "ann", "price": D("60.00"), "ts": T0, "t": 10_000, "diff": 1}],
                       "orders", 10_000 + last)
    again.process_arrow(extra, len(batches))
    ref.process_arrow(extra, len(batches))
    again.stop()
    for name in ("totals", "dear"):
        assert changes(again.outputs[name].sink, len(batches)) == changes(ref.outputs[name].sink, len(batches))


# -- event time: lateness, windows, final mode, decimals, strings, removals of absent records -----------------

WINDOWS = ("SELECT auction, window.start AS ws, window.end AS we, COUNT(*) AS n, SUM(price) AS total "
           "FROM bids GROUP BY auction, window(ts, '4 seconds')")
BIDDERS_VIEW = "SELECT bidder, COUNT(*) AS n FROM bids GROUP BY bidder"
WIDTH, LATENESS = 4 * S, 2 * S


def bid_batches(seed: int, n: int = 8) -> list[list[dict]]:
    """Bids out of order within 3 s (a second more than the lateness), some removed again, some removals of bids
    nobody made (rejected when the watermark passes them: often a batch or two later), prices as numbers and
    strings."""
    rng = random.Random(seed)
    clock, sent, out = T0, [], []
    for _ in range(n):
        clock += rng.randint(0, 2 * S)
        msgs = []
        for _ in range(rng.randint(2, 7)):
            r = rng.random()
            if sent and r < 0.15:
                m = dict(sent.pop(rng.randrange(len(sent))), diff=-1)
            else:
                m = {"auction": rng.randint(1, 3), "bidder": rng.choice(["ann", "bob", "cy"]),
                     "price": D(rng.randint(100, 9999)) / 100, "ts": clock - rng.randint(0, 3 * S),
                     "diff": -1 if r < 0.27 else 1}
                if rng.random() < 0.3:
                    m["price"] = str(m["price"])
                if m["diff"] == 1:
                    sent.append(m)
            msgs.append(m)
        out.append(msgs)
    return out


def bids_stream(state: str | None = None, spark=None) -> StreamingDataflow:
    s = (StreamingDataflow(name="bids")
         .table("bids", {"auction": "bigint", "bidder": "string", "price": "decimal(10,2)", "ts": "timestamp"},
                format="json", time="ts", diff="diff", lateness="2 seconds")
         .view("windows", WINDOWS).output("windows", MemorySink())
         .view("closed", WINDOWS).output("closed", MemorySink(), mode="final")
         .view("bidders", BIDDERS_VIEW).output("bidders", MemorySink())
         .deadLetter(MemorySink()))
    if spark is not None:
        s.workers(2, spark=spark)
    if state is not None:
        s.stateLocation(state, snapshotEvery=2)
    return s


class BidOracle:
    """What the watermark, lateness and nonnegative inputs make of the bids, in plain Python."""

    def __init__(self):
        self.watermark = 0
        self.latest: int | None = None
        self.updates: collections.defaultdict = collections.defaultdict(list)  # record -> its diffs, not late

    def batch(self, msgs: list[dict]) -> None:
        for m in msgs:
            if m["ts"] < self.watermark:
                continue  # late: a dead letter
            rec = (m["auction"], m["bidder"], D(m["price"]), m["ts"])
            self.updates[rec].append(m["diff"])
            self.latest = max(self.latest or m["ts"], m["ts"])
        self.watermark = max(self.watermark, self.latest - LATENESS)

    def applied(self) -> collections.Counter:
        """Each record's updates share its event time, so they are checked together when the watermark passes:
        a total >= 0 is applied, removals of a bid nobody made are rejected (the generator makes no other kind)."""
        out = collections.Counter()
        for rec, diffs in self.updates.items():
            if rec[3] < self.watermark:
                assert sum(diffs) >= 0 or all(d < 0 for d in diffs), rec
                out[rec] = max(sum(diffs), 0)
        return +out

    def views(self) -> dict[str, dict]:
        win: collections.Counter = collections.Counter()
        total: collections.defaultdict = collections.defaultdict(D)
        bidders: collections.Counter = collections.Counter()
        for (a, bidder, price, ts), m in self.applied().items():
            key = (a, ts - ts % WIDTH)
            win[key] += m
            total[key] += price * m
            bidders[bidder] += m
        windows = {(a, micros(ws), micros(ws + WIDTH), n, total[(a, ws)]): 1 for (a, ws), n in win.items() if n}
        return {"windows": windows, "bidders": {(b, n): 1 for b, n in bidders.items() if n},
                "closed": {k: 1 for k in windows if (k[2] - EPOCH) // datetime.timedelta(microseconds=1)
                           <= self.watermark - 1}}


def test_event_time_routed_from_the_executors_equals_the_driver_path_and_the_oracle(cluster, tmp_path):
    msgs = bid_batches(seed=2)
    batches, off = [], 0
    for m in msgs:
        batches.append(kafka_rows(m, "bids", off))
        off += len(m)
    ref, oracle, watermarks = bids_stream(), BidOracle(), []
    for b, t in enumerate(batches):
        ref.process_arrow(t, b)
        oracle.batch(msgs[b])
        watermarks.append(ref.flow.frontier)
        assert ref.flow.frontier == oracle.watermark
        assert {n: ref.outputs[n].sink.contents() for n in ("windows", "closed", "bidders")} == oracle.views(), b
    errors = ref.dead_letter.table().column("error").to_pylist()
    assert any("not there" in e for e in errors) and any(e.startswith("late") for e in errors)
    state = str(tmp_path / "state")
    halves = [(bids_stream(state, cluster), range(4)), (bids_stream(state, cluster), range(4, len(batches)))]
    try:
        for s, bs in halves:
            for b in bs:
                routed(cluster, s, batches[b], b)
                assert s.flow.frontier == watermarks[b]
                for name in ("windows", "closed", "bidders"):
                    assert changes(s.outputs[name].sink, b) == changes(ref.outputs[name].sink, b), (name, b)
                assert letters(s.dead_letter, b) == letters(ref.dead_letter, b), b
            s.stop()
    finally:
        for s, _ in halves:
            s.stop()


# -- a table of Spark's own column types, routed -------------------------------------------------------------


def test_a_table_of_spark_timestamps_and_decimals_routed_equals_the_driver_path(cluster, tmp_path):
    """format="columns": Spark's TimestampType and DecimalType columns, as mapInArrow hands them to the executors."""
    schema = "o_id long, cust string, price decimal(10,2), ts timestamp, t long, diff long"
    first = [(i, ["ann", "bob", None][i % 3], D(i * 125) / 100, micros(T0 + i * S), i, 1) for i in range(12)]
    second = [first[1][:4] + (20, -1), first[1][:4] + (21, -1), (99, "ann", D("1.00"), micros(T0), 22, -1)]
    frames = [cluster.createDataFrame(rows, schema) for rows in (first, second)]

    def stream(spark=None):
        s = (StreamingDataflow(name="columns")
             .table("orders", {"o_id": "bigint", "cust": "string", "price": "decimal(10,2)", "ts": "timestamp"},
                    time="t", diff="diff")
             .view("totals", "SELECT cust, COUNT(*) AS n, SUM(price) AS total, MIN(ts) AS earliest FROM orders "
                             "GROUP BY cust").output("totals", MemorySink())
             .deadLetter(MemorySink()))
        return s.workers(2, spark=spark).stateLocation(str(tmp_path / "state")) if spark is not None else s

    ref, s = stream(), stream(cluster)
    try:
        for b, df in enumerate(frames):
            ref.process_batch(df, b)
            s.process_batch(df, b)
            assert changes(s.outputs["totals"].sink, b) == changes(ref.outputs["totals"].sink, b), b
            assert letters(s.dead_letter, b) == letters(ref.dead_letter, b)
    finally:
        s.stop()
    live = collections.Counter(r[:4] for r in first)
    live[first[1][:4]] -= 1  # the second removal of the row, and the removal of a row nobody inserted: rejected
    want = collections.defaultdict(lambda: [0, D(0), None])
    for (_, cust, price, ts), m in (+live).items():
        w = want[cust]
        w[0], w[1], w[2] = w[0] + m, w[1] + price * m, ts if w[2] is None else min(w[2], ts)
    assert ref.outputs["totals"].sink.contents() == {(c, n, tot, ts): 1 for c, (n, tot, ts) in want.items()}
    assert sorted(json.loads(r["value"])["record"] for r in s.dead_letter.batches[1].to_pylist()) == [
        [1, "bob", "1.25", str(micros(T0 + S))], [99, "ann", "1.00", str(micros(T0))]]
