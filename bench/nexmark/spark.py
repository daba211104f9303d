"""Nexmark bids through Kafka -> Spark: ddflow's streaming views against Spark Structured Streaming itself.

    python -m bench.nexmark.spark --events 200000 --per-batch 20000 --repeat 2 --queries q0,q1,q2,q12

The generator's bids go to one topic of the embedded broker as JSON
(``date_time`` as integer microseconds).  For each query, alternated over
``--repeat`` rounds, two streaming queries read the whole topic
(``availableNow``) in ``--per-batch`` messages per micro-batch:

- ``ddflow``: ``StreamingDataflow().table("bid", ..., time="date_time", lateness=...)``
  with the query as a view (a windowed query in ``mode="final"``, as Spark's append mode),
  to a memory sink;
- ``spark``: ``from_json``, ``timestamp_micros``, ``withWatermark`` on the same lateness,
  the same SQL text through ``spark.sql`` on a temporary view, to the ``noop`` sink in
  append mode.

Rates (messages/s) come from Spark's progress reports for both, every
micro-batch but the first, medians over the rounds, so the two are timed
alike.  The ddflow query checks its output against DuckDB from scratch on
the events before its final watermark (``bench.nexmark.oracle``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

BID = {"auction": "bigint", "bidder": "bigint", "price": "bigint", "channel": "string", "url": "string",
       "date_time": "timestamp", "extra": "string"}


def run(config: str, spark, bootstrap: str, topic: str, name: str, sql: str, per_batch: int, lateness_s: int,
        bids) -> dict:
    from bench.spark_sql import _rate, _source
    from ddflow.streaming.driver import StreamingDataflow
    from ddflow.streaming.sinks import MemorySink

    df = _source(spark, bootstrap, topic, per_batch)
    windowed = "window(" in sql
    with tempfile.TemporaryDirectory() as ckpt:
        if config == "spark":
            from pyspark.sql import functions as F
            from pyspark.sql.types import LongType, StringType, StructField, StructType

            schema = StructType([StructField(c, LongType() if t in ("bigint", "timestamp") else StringType())
                                 for c, t in BID.items()])
            bid = (df.select(F.from_json(F.col("value").cast("string"), schema).alias("m")).select("m.*")
                   .withColumn("date_time", F.expr("timestamp_micros(date_time)"))
                   .withWatermark("date_time", f"{lateness_s} seconds"))
            bid.createOrReplaceTempView("bid")
            q = (spark.sql(sql).writeStream.outputMode("append").format("noop")
                 .option("checkpointLocation", ckpt).trigger(availableNow=True).start())
            q.awaitTermination()
            rate, batches = _rate(q.recentProgress)
            return {"msgs_per_s": rate, "batches": batches}
        sink = MemorySink()
        s = (StreamingDataflow(name=f"nexmark-{name}")
             .table("bid", BID, format="json", time="date_time", lateness=lateness_s * 1_000_000, topic=topic)
             .view(name, sql).output(name, sink, mode="final" if windowed else "changelog"))
        q = s.start(df, checkpointLocation=ckpt, trigger={"availableNow": True})
        try:
            q.awaitTermination()
            frontier = s.flow.frontier
        finally:
            s.stop()
        if q.exception() is not None:
            raise RuntimeError(f"{name}: the query failed: {q.exception()}")
        rate, batches = _rate(q.recentProgress)
        return {"msgs_per_s": rate, "batches": batches, "correct": _check(name, sql, sink, bids, frontier)}


def _check(name: str, sql: str, sink, bids, frontier: int) -> bool:
    """ddflow's accumulated output equals DuckDB's on the bids before the final watermark (closed windows only)."""
    from collections import Counter

    from bench.nexmark import oracle

    duck = oracle.Duck()
    duck.append({"bid": bids})
    duck.cutoff(frontier)
    want = duck.query(sql)
    names = [c for c in sink.table().schema.names if c not in ("time", "diff")] if sink.batches else []
    if "endtime" in names:  # mode="final": only the windows the watermark closed are out yet
        want = [r for r in want if r[names.index("endtime")] <= frontier - 1]
    got = Counter({tuple(oracle.normalize(v) for v in r): m for r, m in sink.contents().items()})
    why = oracle.compare(+got, want)
    if why is not None:
        print(f"{name}: MISMATCH {why[:300]}", file=sys.stderr)
    return why is None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.nexmark.spark", description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--per-batch", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--queries", default="q0,q1,q2,q12")
    p.add_argument("--lateness-s", type=int, default=2)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    import pyarrow as pa

    from bench.nexmark.generator import generate
    from bench.nexmark.queries import QUERIES
    from ddflow.streaming.broker import EmbeddedBroker, create_topics, produce
    from ddflow.streaming.spark import local_session

    bids = generate(args.events, seed=0, disorder_us=500_000)["bid"]
    rows = bids.to_pylist()
    spark = local_session("bench-nexmark-spark")
    spark.sparkContext.setLogLevel("ERROR")
    out = []
    with EmbeddedBroker() as broker:
        topic = "nexmark-bids"
        create_topics(broker.bootstrap, [topic], partitions=2)
        produce(broker.bootstrap, topic, [
            (None, json.dumps({**r, "date_time": int(pa.scalar(r["date_time"], pa.timestamp("us")).value)}).encode(),
             i % 2) for i, r in enumerate(rows)])
        for name in args.queries.split(","):
            runs: dict[str, list[dict]] = {"ddflow": [], "spark": []}
            for _ in range(args.repeat):
                for c in runs:  # alternated: the machine's speed drifts
                    runs[c].append(run(c, spark, broker.bootstrap, topic, name, QUERIES[name], args.per_batch,
                                       args.lateness_s, bids))
            row = {"bench": "nexmark_spark", "query": name, "events": len(rows), "per_batch": args.per_batch,
                   "repeat": args.repeat}
            for c, rs in runs.items():
                row[f"{c}_msgs_per_s"] = statistics.median(r["msgs_per_s"] for r in rs)
            row["ddflow_correct"] = all(r["correct"] for r in runs["ddflow"])
            row["ddflow_over_spark"] = row["ddflow_msgs_per_s"] / row["spark_msgs_per_s"]
            out.append(row)
            print(json.dumps(row), flush=True)
    spark.stop()
    if args.json:
        with open(args.json, "a") as f:
            for r in out:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
