"""Workers as Spark barrier tasks against forked workers: per-round cost, throughput, streaming rate.

    python -m bench.cluster [--parts rounds,throughput,streaming] [--workers 2,4] [--repeat 3] [--json FILE]

Runs on a ``local-cluster[2,1,1024]`` Spark (two executor JVMs of one
core on this machine; W = 4 puts two workers in each task: oversubscribed
on purpose, it measures overhead).  Placements, alternated within each
repetition (medians reported):

* ``forked``: ``Dataflow(workers=W)``, socketpairs (the one-machine default);
* ``forked-tcp``: the same over loopback TCP;
* ``executors``: ``Dataflow(workers=W, spark=spark)``, the workers forked by
  barrier tasks in the executors' Python workers, connected by TCP.

Parts: ``rounds``, the time per loop round of a loop with one update
(coordination, no data work: as ``bench.rounds``); ``throughput``, a keyed
count fed K = 1, 100, 1000 updates per run (each at its own data time),
updates per second; ``streaming``, a keyed count fed from Kafka by a Spark
query (``--per-batch`` messages per micro-batch), its sustained rate from the first
batch's end to the last one's, with the workers forked (driver in the
data path), on the executors with the rows collected to the driver, and
on the executors with the rows routed from the executors straight to them.
Pool start-up and kernel loading are excluded: every dataflow runs its work once before it is timed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import ddflow

PLACEMENTS = ("forked", "forked-tcp", "executors")


def _flow(placement: str, workers: int, spark) -> ddflow.Dataflow:
    if workers == 1:
        return ddflow.Dataflow()
    if placement == "executors":
        return ddflow.Dataflow(workers=workers, spark=spark)
    return ddflow.Dataflow(workers=workers, transport="tcp" if placement == "forked-tcp" else "socketpair")


def _loop_rounds(placement: str, workers: int, spark, n: int) -> dict:
    """A loop that counts a record up to ``n``: each round one update through an exchange and a distinct.

    Record 1 counts at time 1 (warm-up: the workers start and load their
    compiled kernels), record 2 at time 2 (timed).
    """
    with _flow(placement, workers, spark) as flow:
        h, a = flow.new_collection("a", schema=("i", "i"))
        out = a.iterate(lambda x: x.map_columns(lambda i, c: (i, np.minimum(c + 1, n))).distinct(), name="count",
                        max_iterations=n + 10).capture()
        for t in (1, 2):
            h.insert((t, 0), time=t)
            flow.advance_to(t + 1)
            t0 = time.perf_counter()
            flow.run()
            wall = time.perf_counter() - t0
        assert out.contents(2) == {(1, n): 1, (2, n): 1}
        res = {"us_per_round": wall / n * 1e6}
        stats = flow.worker_stats()
        if stats:
            coord = np.concatenate([np.asarray(s["coord_s"][-n:]) for s in stats]) * 1e6
            res["coord_p50_us"] = float(np.percentile(coord, 50))
        return res


def throughput(placement: str, workers: int, spark, k: int, seconds: float = 2.0) -> dict:
    """A keyed count over 1,000 keys; each run K inserts at K data times; updates per second."""
    rng = np.random.default_rng(1)
    with _flow(placement, workers, spark) as flow:
        h, xs = flow.new_collection("xs", schema=("i", "i"))
        out = xs.project(0).count().capture()
        h.update({"k": rng.integers(0, 1000, k), "v": np.arange(k)}, times=np.zeros(k, dtype=np.int64))
        flow.advance_to(1)
        flow.run()  # warm-up: starts the workers, loads the kernels
        t, done, runs = 1, 0, 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds or runs < 3:
            keys = rng.integers(0, 1000, k)
            h.update({"k": keys, "v": np.arange(done, done + k)}, times=np.arange(t, t + k))
            t += k
            flow.advance_to(t)
            flow.run()
            out.drain_updates()
            done += k
            runs += 1
        wall = time.perf_counter() - t0
    return {"updates_per_s": done / wall, "us_per_run": wall / runs * 1e6, "runs": runs}


def streaming(config: str, spark, bootstrap: str, topic: str, messages: int, per_batch: int) -> dict:
    """A keyed count fed by a Spark query over ``topic``; sustained messages per second between batch ends."""
    from ddflow.streaming.driver import StreamingDataflow
    from ddflow.streaming.sinks import MemorySink

    def build(flow):
        h, xs = flow.new_collection("xs")
        return {"xs": h}, {"counts": xs.project(0).count()}

    sink = MemorySink()
    ends: list[float] = []
    s = StreamingDataflow(build, name=f"bench-{config}")
    if config == "forked":
        s = s.workers(2)
    else:
        s = s.workers(2, spark=spark, route=config == "executors-routed")
    s = (s.input("xs", fields=["k"], format="json", time="t", topic=topic).output("counts", sink, names=["k", "n"])
         .onBatch(lambda b, st: ends.append(time.perf_counter())))
    df = (spark.readStream.format("ddkafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", per_batch).load())
    with tempfile.TemporaryDirectory() as ckpt:
        q = s.start(df, checkpointLocation=ckpt, trigger={"availableNow": True})
        try:
            q.awaitTermination()
        finally:
            s.stop()
        assert q.exception() is None
    got = sink.contents()
    assert sum(n for (_, n), m in got.items() if m > 0) == messages, "counts do not add up to the messages"
    n_batches = len(ends)
    rate = (messages - per_batch) / (ends[-1] - ends[0]) if n_batches > 1 else float("nan")
    return {"msgs_per_s": rate, "batches": n_batches, "routed_bytes": s.metrics.routed_bytes}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", default="rounds,throughput,streaming")
    p.add_argument("--workers", default="2,4")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--messages", type=int, default=60_000)
    p.add_argument("--per-batch", type=int, default=6_000)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from ddflow.streaming.spark import local_session

    spark = local_session("bench-cluster", "local-cluster[2,1,1024]")
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # this script's functions go to the executors
    parts = args.parts.split(",")
    ws = [int(w) for w in args.workers.split(",")]
    rows: list[dict] = []

    def emit(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)

    def medians(kind: str, cases: list[tuple], fn) -> None:
        runs: dict[tuple, list[dict]] = {c: [] for c in cases}
        for _ in range(args.repeat):
            for c in cases:  # alternated: the machine's speed drifts
                runs[c].append(fn(*c))
        for c, rs in runs.items():
            emit({"part": kind, "case": list(c), **{k: statistics.median(r[k] for r in rs) for k in rs[0]}})

    if "rounds" in parts:
        medians("rounds", [("in-process", 1)] + [(pl, w) for w in ws for pl in PLACEMENTS],
                lambda pl, w: _loop_rounds(pl, w, spark, args.rounds))
    if "throughput" in parts:
        for k in (1, 100, 1000):
            medians("throughput", [("in-process", 1, k)] + [(pl, w, k) for w in ws for pl in PLACEMENTS],
                    lambda pl, w, k: throughput(pl, w, spark, k))
    if "streaming" in parts:
        from ddflow.streaming.broker import EmbeddedBroker, create_topics, produce

        with EmbeddedBroker() as broker:
            topic = "bench-keys"
            create_topics(broker.bootstrap, [topic], partitions=2)
            rng = np.random.default_rng(2)
            keys = rng.integers(0, 1000, args.messages).tolist()
            produce(broker.bootstrap, topic, [(None, json.dumps({"k": k, "t": i}).encode(), i % 2)
                                              for i, k in enumerate(keys)])
            medians("streaming", [("forked",), ("executors-collected",), ("executors-routed",)],
                    lambda c: streaming(c, spark, broker.bootstrap, topic, args.messages, args.per_batch))
    spark.stop()
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps({"bench": "cluster", **r}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
