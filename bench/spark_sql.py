"""A keyed count through Kafka -> Spark: ddflow's SQL view, ddflow's count() dataflow, and Spark's own groupBy().count().

The same topic (``--messages`` JSON messages over ``--keys`` keys) is read
by three streaming queries, one after another, alternated over
``--repeat`` rounds, at each ``--per-batch`` size (Spark's
``maxOffsetsPerTrigger``):

- ``sql``: ``StreamingDataflow().table("events", {"k": "bigint"}, time="t", ...)``
  ``.view("SELECT k, COUNT(*) AS n FROM events GROUP BY k")``;
- ``dataflow``: ``xs.project(0).count()`` built in Python;
- ``spark``: ``from_json`` then ``groupBy("k").count()`` in update mode to the ``noop`` sink.

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

CONFIGS = ("sql", "dataflow", "spark")


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


def run(config: str, spark, bootstrap: str, topic: str, messages: int, per_batch: int) -> dict:
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
        sink = MemorySink()
        if config == "sql":
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
        finally:
            s.stop()
        if q.exception() is not None:
            raise RuntimeError(f"{config}: the query failed: {q.exception()}")
        got = sink.contents()
        total = sum(n for (_, n), m in got.items() for _ in range(m))
        if total != messages:
            raise RuntimeError(f"{config}: the counts add up to {total}, not {messages}")
        rate, batches = _rate(q.recentProgress)
        return {"msgs_per_s": rate, "batches": batches}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.spark_sql", description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=500_000)
    p.add_argument("--keys", type=int, default=10_000)
    p.add_argument("--per-batch", default="20000,100000")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--configs", default=",".join(CONFIGS))
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
        produce(broker.bootstrap, topic, [(None, json.dumps({"k": k, "t": i}).encode(), i % 2)
                                          for i, k in enumerate(keys)])
        for per_batch in (int(x) for x in args.per_batch.split(",")):
            runs: dict[str, list[dict]] = {c: [] for c in args.configs.split(",")}
            for _ in range(args.repeat):
                for c in runs:  # alternated: the machine's speed drifts
                    runs[c].append(run(c, spark, broker.bootstrap, topic, args.messages, per_batch))
            for c, rs in runs.items():
                row = {"bench": "spark_sql", "config": c, "per_batch": per_batch, "messages": args.messages,
                       "keys": args.keys, "repeat": args.repeat,
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
