"""The streaming job that test_crash_recovery.py and bench/kill_matrix.py kill and restart.

    python tests/streaming/crash_job.py --bootstrap HOST:PORT --topic EDGES --out-prefix OUT \
        --work DIR [--max-offsets 10] [--fault POINT:BATCH_ID] [--pidfile FILE] \
        [--keys int|string] [--snapshot-every 2] [--workers 1] [--route --master local-cluster[2,1,1024]]

Kafka topic ``--topic`` (JSON edge updates ``{"src", "dst", "t", "diff"}``)
-> Spark (``ddkafka``, ``Trigger.AvailableNow``, ``maxOffsetsPerTrigger``)
-> ddflow: reachability from the fixed roots (:func:`roots`) and the
out-degree of every node -> each output to a Parquet sink (``DIR/reach``,
``DIR/degree``) and a Kafka sink (topics ``OUT-reach``, ``OUT-degree``);
dead letters to ``DIR/dead``; Spark's checkpoint in ``DIR/checkpoint`` and
ddflow's state in ``DIR/state`` (a snapshot every ``--snapshot-every``
batches; any cadence may follow any other over the same state).  Running
it again with the same arguments resumes the job.

``--keys string``: the nodes are strings (:func:`node`), interned by the
dataflow, so a process restored from a snapshot computes its changes in
another order than the one that wrote them: what the sinks' canonical
order makes harmless.  ``--workers W``: W forked worker processes; with
``--route`` they run on Spark's executors (``--master`` must give some)
and each batch's rows go from the executors straight to them.

``--fault POINT:BATCH_ID`` kills the job when batch ``BATCH_ID`` reaches
``POINT`` (one of the driver's test hook points, ``StreamingDataflow._fault``:
``restore``, ``before_output``, ``mid_output``, ``before_state``,
``in_snapshot``, ``after_state``): with SIGKILL to every process below it
(Spark's JVM, PySpark's worker daemon, which leads a process group of its
own, and its workers) and to its own process group, when the job leads
one, else with ``os._exit(CRASH_EXIT)``.  ``--pidfile`` receives the pid of
Spark's JVM, which outlives this process by a moment after a crash.

The test imports ``run`` to make the uninterrupted reference run in its
own Spark session.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

CRASH_EXIT = 17
ROOTS = [0, 1]
OUTPUTS = {"reach": ["node", "root"], "degree": ["node", "count"]}


def node(i: int, keys: str = "int"):
    """Node ``i`` as the job's messages name it: the int, or a string (of two shapes, so that neither the
    numbers' order nor the first-seen order is the strings' order)."""
    if keys == "int":
        return i
    return f"n{i}" if i % 2 else f"node-{i:02d}"


def roots(keys: str = "int") -> list:
    return [node(r, keys) for r in ROOTS]


def build(flow: Any, keys: str = "int"):
    from ddflow.streaming.demo import reach_dataflow

    kind = "i" if keys == "int" else "o"
    roots_in, roots_ = flow.new_collection("roots", schema=(kind,))
    roots_in.update([(r,) for r in roots(keys)], times=0)  # static input, rebuilt identically on restart
    edges_in, edges = flow.new_collection("edges", schema=(kind, kind))
    return {"edges": edges_in}, {"reach": reach_dataflow(roots_, edges), "degree": edges.project(0).count()}


def make_stream(bootstrap: str, out_prefix: str, work: str, keys: str = "int", snapshot_every: int = 2,
                workers: int = 1, spark: Any = None) -> Any:
    from ddflow.streaming.driver import StreamingDataflow
    from ddflow.streaming.sinks import JsonLinesSink, KafkaSink, ParquetSink

    stream = (StreamingDataflow(lambda flow: _both(build(flow, keys)), name="crash-job")
              .input("edges", fields=["src", "dst"], format="json", time="t", diff="diff")
              .deadLetter(JsonLinesSink(os.path.join(work, "dead")))
              .stateLocation(os.path.join(work, "state"), snapshotEvery=snapshot_every))
    if workers > 1:
        stream.workers(workers, spark=spark)
    for name, names in OUTPUTS.items():
        stream.output(name, ParquetSink(os.path.join(work, name)), names=names)
        stream.output(f"{name}_kafka", KafkaSink(bootstrap, f"{out_prefix}-{name}"), names=names)
    return stream


def _both(built):
    """Each output twice: once for the Parquet sink, once for the Kafka sink."""
    handles, outs = built
    return handles, {**outs, **{f"{n}_kafka": c for n, c in outs.items()}}


def run(spark: Any, bootstrap: str, topic: str, out_prefix: str, work: str, max_offsets: int = 10,
        fault: tuple[str, int] | None = None, keys: str = "int", snapshot_every: int = 2, workers: int = 1,
        route: bool = False) -> list[int]:
    """Run the job to completion (availableNow); the batch ids it processed."""
    from ddflow.streaming.kafka.source import FORMAT

    stream = make_stream(bootstrap, out_prefix, work, keys, snapshot_every, workers, spark if route else None)
    if fault is not None:
        def crash(point: str, batch_id: int) -> None:
            if (point, batch_id) == fault:
                sys.stdout.flush()
                if os.getpgrp() == os.getpid():  # started in its own session: SIGKILL the JVM and workers too
                    kill_descendants()  # PySpark's worker daemon leads a process group of its own
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                os._exit(CRASH_EXIT)

        stream._fault = crash
    done: list[int] = []
    stream.onBatch(lambda batch_id, stats: done.append(batch_id))
    df = (spark.readStream.format(FORMAT)
          .option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic)
          .option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", max_offsets)
          .load())
    query = stream.start(df, checkpointLocation=os.path.join(work, "checkpoint"), trigger={"availableNow": True})
    try:
        query.awaitTermination()
    finally:
        query.stop()
        stream.stop()
        for spec in stream.outputs.values():
            close = getattr(spec.sink, "close", None)
            if close is not None:
                close()
    return done


def kill_descendants() -> None:
    """SIGKILL every process below this one (the JVM, PySpark's daemon and its workers), whatever its group."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d))
    todo, below = [os.getpid()], []
    while todo:
        for c in children.get(todo.pop(), []):
            below.append(c)
            todo.append(c)
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--out-prefix", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--max-offsets", type=int, default=10)
    ap.add_argument("--fault", default=None, help="POINT:BATCH_ID")
    ap.add_argument("--pidfile", default=None)
    ap.add_argument("--keys", choices=["int", "string"], default="int")
    ap.add_argument("--snapshot-every", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--route", action="store_true", help="workers on the executors, fed by them directly")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)
    fault = None
    if args.fault:
        point, batch = args.fault.rsplit(":", 1)
        fault = (point, int(batch))

    from ddflow.streaming.spark import local_session

    spark = local_session("ddflow-crash-job", args.master)
    try:
        if args.pidfile:
            with open(args.pidfile, "w") as f:
                f.write(str(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))
        done = run(spark, args.bootstrap, args.topic, args.out_prefix, args.work, args.max_offsets, fault,
                   args.keys, args.snapshot_every, args.workers, args.route)
        print(f"crash_job: processed batches {done}", flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
