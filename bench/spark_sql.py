"""A keyed count through Kafka -> Spark: ddflow's SQL view, ddflow's count() dataflow, and Spark's own groupBy().count().

The same topic (``--messages`` JSON messages over ``--keys`` keys) is read
by three streaming queries, one after another, alternated over
``--repeat`` rounds, at each ``--per-batch`` size (Spark's
``maxOffsetsPerTrigger``):

- ``sql``: ``StreamingDataflow().table("events", {"k": "bigint"}, time="t", ...)``
  ``.view("SELECT k, COUNT(*) AS n FROM events GROUP BY k")``;
- ``dataflow``: ``xs.project(0).count()`` built in Python;
- ``spark``: ``from_json`` then ``groupBy("k").count()`` in update mode to the ``noop`` sink;
- ``sql-window``: ddflow's windowed count, ``GROUP BY k, window(ts, '10 seconds')`` over an event-time
  table (``time="ts", lateness="10 seconds"``: the watermark);
- ``spark-window``: Spark's own, ``withWatermark("ts", "10 seconds")`` then
  ``groupBy(window("ts", "10 seconds"), "k").count()``, in append mode to the ``noop`` sink.

Each message carries an event time ``ts`` (microseconds), ``--event-rate``
messages per second of event time, in order per partition.

Rate = messages / seconds, from Spark's own progress reports (every
micro-batch's ``triggerExecution``, the first one left out: it holds the
start-up), so the three are timed alike.  The two ddflow queries check
that their counts add up to the messages.  Medians over the rounds.

    python -m bench.spark_sql --messages 500000 --per-batch 20000,100000 --repeat 3 --json bench/results/spark_sql.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

import numpy as np

CONFIGS = ("sql", "dataflow", "spark", "sql-window", "spark-window")


def _source(spark, bootstrap: str, topic: str, per_batch: int):
    return (spark.readStream.format("ddkafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", per_batch).load())


def _rate(progress: list) -> tuple[float, int]:
    """Messages per second over every micro-batch but the first, from Spark's progress reports."""
    rows = [p for p in progress if p.get("numInputRows")]
    if len(rows) > 1:
        rows = rows[1:]
    n = sum(p["numInputRows"] for p in rows)
    secs = sum(p["durationMs"]["triggerExecution"] for p in rows) / 1000.0
    return n / secs if secs else float("nan"), len(progress)


T0 = 1_767_225_600_000_000  # the first message's event time, microseconds


def run(config: str, spark, bootstrap: str, topic: str, messages: int, per_batch: int, step: int = 100) -> dict:
    """One streaming query over the whole topic (``availableNow``); its rate and batch count."""
    from ddflow.streaming.driver import StreamingDataflow
    from ddflow.streaming.sinks import MemorySink

    df = _source(spark, bootstrap, topic, per_batch)
    with tempfile.TemporaryDirectory() as ckpt:
        if config == "spark":
            from pyspark.sql import functions as F
            from pyspark.sql.types import LongType, StructField, StructType

            schema = StructType([StructField("k", LongType()), StructField("t", LongType())])
            counts = (df.select(F.from_json(F.col("value").cast("string"), schema).alias("m"))
                      .select("m.k").groupBy("k").count())
            q = (counts.writeStream.outputMode("update").format("noop").option("checkpointLocation", ckpt)
                 .trigger(availableNow=True).start())
            q.awaitTermination()
            rate, batches = _rate(q.recentProgress)
            return {"msgs_per_s": rate, "batches": batches}
        if config == "spark-window":
            from pyspark.sql import functions as F
            from pyspark.sql.types import LongType, StructField, StructType

            schema = StructType([StructField("k", LongType()), StructField("ts", LongType())])
            counts = (df.select(F.from_json(F.col("value").cast("string"), schema).alias("m"))
                      .select("m.k", F.expr("timestamp_micros(m.ts)").alias("ts"))
                      .withWatermark("ts", "10 seconds")
                      .groupBy(F.window("ts", "10 seconds"), "k").count())
            q = (counts.writeStream.outputMode("append").format("noop").option("checkpointLocation", ckpt)
                 .trigger(availableNow=True).start())
            q.awaitTermination()
            rate, batches = _rate(q.recentProgress)
            return {"msgs_per_s": rate, "batches": batches}
        sink = MemorySink()
        if config == "sql-window":
            s = (StreamingDataflow(name="bench-sql-window")
                 .table("events", {"k": "bigint", "ts": "timestamp"}, format="json", time="ts",
                        lateness="10 seconds", topic=topic)
                 .view("counts", "SELECT k, window.start AS ws, COUNT(*) AS n FROM events "
                                 "GROUP BY k, window(ts, '10 seconds')")
                 .output("counts", sink))
        elif config == "sql":
            s = (StreamingDataflow(name="bench-sql")
                 # the same fields as the dataflow's input: the key (the time is read from "t", not a column)
                 .table("events", {"k": "bigint"}, format="json", time="t", topic=topic)
                 .view("counts", "SELECT k, COUNT(*) AS n FROM events GROUP BY k")
                 .output("counts", sink))
        else:
            def build(flow):
                h, xs = flow.new_collection("xs")
                return {"xs": h}, {"counts": xs.project(0).count()}
            s = (StreamingDataflow(build, name="bench-dataflow")
                 .input("xs", fields=["k"], format="json", time="t", topic=topic)
                 .output("counts", sink, names=["k", "n"]))
        q = s.start(df, checkpointLocation=ckpt, trigger={"availableNow": True})
        try:
            q.awaitTermination()
            frontier = s.flow.frontier
        finally:
            s.stop()
        if q.exception() is not None:
            raise RuntimeError(f"{config}: the query failed: {q.exception()}")
        got = sink.contents()
        total = sum(r[-1] * m for r, m in got.items())
        expected = messages
        if config == "sql-window":  # rows at or past the final watermark are not complete yet: not counted
            expected = min(messages, -(-(frontier - T0) // step))
        if total != expected:
            raise RuntimeError(f"{config}: the counts add up to {total}, not {expected}")
        rate, batches = _rate(q.recentProgress)
        return {"msgs_per_s": rate, "batches": batches}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.spark_sql", description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=500_000)
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--per-batch", default="20000,100000")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--event-rate", type=int, default=10_000, help="messages per second of event time")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from ddflow.streaming.broker import EmbeddedBroker, create_topics, produce
    from ddflow.streaming.spark import local_session

    spark = local_session("bench-spark-sql")
    spark.sparkContext.setLogLevel("ERROR")
    rows = []
    with EmbeddedBroker() as broker:
        topic = "bench-events"
        create_topics(broker.bootstrap, [topic], partitions=2)
        keys = np.random.default_rng(7).integers(0, args.keys, args.messages).tolist()
        step = 1_000_000 // args.event_rate
        produce(broker.bootstrap, topic, [(None, json.dumps({"k": k, "t": i, "ts": T0 + i * step}).encode(), i % 2)
                                          for i, k in enumerate(keys)])
        for per_batch in (int(x) for x in args.per_batch.split(",")):
            runs: dict[str, list[dict]] = {c: [] for c in args.configs.split(",")}
            for _ in range(args.repeat):
                for c in runs:  # alternated: the machine's speed drifts
                    runs[c].append(run(c, spark, broker.bootstrap, topic, args.messages, per_batch, step))
            for c, rs in runs.items():
                row = {"bench": "spark_sql", "config": c, "per_batch": per_batch, "messages": args.messages,
                       "keys": args.keys, "repeat": args.repeat, "event_rate": args.event_rate,
                       "msgs_per_s": statistics.median(r["msgs_per_s"] for r in rs),
                       "runs_msgs_per_s": [round(r["msgs_per_s"]) for r in rs], "batches": rs[0]["batches"]}
                rows.append(row)
                print(json.dumps(row), flush=True)
    spark.stop()
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
