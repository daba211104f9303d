"""The main job: Kafka -> Spark Structured Streaming -> ddflow reachability -> Kafka.

    python -m ddflow.streaming.demo --duration 30 --rate 200

Starts the embedded Kafka-compatible broker (or uses ``--bootstrap``),
produces the reachability workload (a graph, then a sliding window of
edge updates: each update removes the oldest edge and adds a random one,
at its own data time) at ``--rate`` updates/s, runs a Spark streaming
query over it whose micro-batches feed ddflow's reachability dataflow,
writes the output changes to a Kafka topic, prints a progress line per
second, and ends with a summary.  The final output, read back from Kafka,
is checked against a from-scratch BFS.  The last line is one JSON object;
the exit status is 1 if ``correct`` is false.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid

import numpy as np
import pyarrow as pa

import ddflow


def reach_dataflow(roots: ddflow.Collection, edges: ddflow.Collection) -> ddflow.Collection:
    """(node, root) for every node reachable from a root."""
    start = roots.project(0, 0)
    return start.iterate(lambda r: r.join(edges).project(2, 1).concat(start).distinct(), name="reach")


def edge_counts(edges: ddflow.Collection) -> ddflow.Collection:
    """(src, number of edges leaving src): the keyed count."""
    return edges.project(0).count()


def bfs(edges: list[tuple[int, int]], roots: list[int]) -> set[tuple[int, int]]:
    """(node, root) pairs by plain BFS: the from-scratch answer the demo checks its output against."""
    adj = collections.defaultdict(list)
    for s, d in edges:
        adj[s].append(d)
    out = set()
    for r in roots:
        seen, todo = {r}, [r]
        while todo:
            n = todo.pop()
            for m in adj[n]:
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        out |= {(n, r) for n in seen}
    return out


class Producer(threading.Thread):
    """Produces the workload: roots and initial edges at time 0, then one update per data time."""

    def __init__(self, bootstrap: str, edges_topic: str, roots_topic: str, nodes: int, n_edges: int, roots: int,
                 rate: float, duration: float, seed: int):
        super().__init__(daemon=True, name="demo-producer")
        from confluent_kafka import Producer as KProducer

        self.p = KProducer({"bootstrap.servers": bootstrap, "linger.ms": 2})
        self.edges_topic, self.roots_topic = edges_topic, roots_topic
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.nodes = nodes
        self.window = collections.deque(map(tuple, rng.integers(0, nodes, size=(n_edges, 2)).tolist()))
        self.roots = rng.choice(nodes, size=roots, replace=False).tolist()
        self.rate, self.duration = rate, duration
        self.started_at: float | None = None  # wall clock when timed updates began
        self.last_time = 0
        self.error: BaseException | None = None
        # Timed updates start once the query has taken in the initial load, so that Spark's
        # start-up (10+ s) is not counted as latency of the first updates.
        self.go = threading.Event()

    def _send(self, topic: str, obj: dict) -> None:
        while True:
            try:
                self.p.produce(topic, json.dumps(obj).encode())
                return
            except BufferError:
                self.p.poll(0.01)

    def run(self) -> None:
        """Send the initial load, wait for ``go``, then the timed updates; errors land in ``self.error``."""
        try:
            for r in self.roots:
                self._send(self.roots_topic, {"root": r, "t": 0})
            for s, d in self.window:
                self._send(self.edges_topic, {"src": s, "dst": d, "t": 0, "diff": 1})
            self.p.flush(30)
            self.go.wait()
            start = time.time()
            t = 0
            self.started_at = start
            while time.time() - start < self.duration:
                due = int((time.time() - start) * self.rate)
                if due > t:
                    k = due - t
                    fresh = self.rng.integers(0, self.nodes, size=(k, 2)).tolist()
                    for new in fresh:
                        t += 1
                        old = self.window.popleft()
                        self.window.append(tuple(new))
                        self._send(self.edges_topic, {"src": old[0], "dst": old[1], "t": t, "diff": -1})
                        self._send(self.edges_topic, {"src": new[0], "dst": new[1], "t": t, "diff": 1})
                self.p.poll(0)
                self.last_time = t - 1  # time t may still be straddling; see frontierPolicy
                time.sleep(0.002)
            # An update's two records may straddle micro-batches, so the query retires a batch's
            # largest time only with the next batch; this empty marker lets the last one retire.
            self._send(self.edges_topic, {"src": 0, "dst": 0, "t": t + 1, "diff": 0})
            self.p.flush(30)
            self.last_time = t
        except BaseException as e:  # surfaced by the main thread
            self.error = e
        finally:
            self.p = None  # the client closes before the broker stops


def main(argv: list[str] | None = None) -> int:
    """Run the demo (see the module docstring); 0 if the output was correct."""
    ap = argparse.ArgumentParser(prog="python -m ddflow.streaming.demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of input (default 30)")
    ap.add_argument("--rate", type=float, default=100.0, help="updates per second (default 100)")
    ap.add_argument("--bootstrap", default=None, help="use this Kafka instead of the embedded broker")
    ap.add_argument("--query", choices=("reach", "count"), default="reach",
                    help="reachability from the roots (default) or the keyed count of edges per source")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--edges", type=int, default=2000)
    ap.add_argument("--roots", type=int, default=10)
    ap.add_argument("--max-offsets-per-trigger", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1, help="ddflow worker processes (default 1)")
    ap.add_argument("--out", default="demo-output", help="directory for the latency plot and summary")
    args = ap.parse_args(argv)

    from ddflow.streaming.broker import EmbeddedBroker, create_topics
    from ddflow.streaming.driver import StreamingDataflow
    from ddflow.streaming.kafka.source import FORMAT
    from ddflow.streaming.sinks import KafkaSink, read_changes
    from ddflow.streaming.spark import local_session

    broker = None
    if args.bootstrap is None:
        print("starting the embedded Kafka-compatible broker (Tansu)...", flush=True)
        broker = EmbeddedBroker().start()
        bootstrap = broker.bootstrap
    else:
        bootstrap = args.bootstrap
    run_id = uuid.uuid4().hex[:8]
    t_edges, t_roots, t_out = f"demo-edges-{run_id}", f"demo-roots-{run_id}", f"demo-reach-{run_id}"
    t_sql = f"demo-degree-{run_id}"
    create_topics(bootstrap, [t_edges, t_roots, t_out, t_sql], partitions=1)
    work = tempfile.mkdtemp(prefix="ddflow-demo-")
    print("starting Spark (local[2])...", flush=True)
    spark = local_session("ddflow-demo")
    try:
        producer = Producer(bootstrap, t_edges, t_roots, args.nodes, args.edges, args.roots, args.rate,
                            args.duration, args.seed)

        def build(flow: ddflow.Dataflow):
            roots_in, roots = flow.new_collection("roots", schema=("i",))
            edges_in, edges = flow.new_collection("edges", schema=("i", "i"))
            out = reach_dataflow(roots, edges) if args.query == "reach" else edge_counts(edges)
            return {"roots": roots_in, "edges": edges_in}, {"out": out}

        latencies: list[float] = []
        batch_log: list[dict] = []
        last_batch_end = [time.time()]
        lock = threading.Lock()

        def on_batch(batch_id: int, stats: dict) -> None:
            now = time.time()
            table = stats["input"]
            producer.go.set()
            lat_ms = np.zeros(0)
            if table.num_rows and producer.started_at is not None:
                # Kafka's CreateTime stamps each message as it is produced; updates of the initial load are not timed.
                ts = table.column("timestamp").cast(pa.int64()).to_numpy(zero_copy_only=False) / 1e3
                ts = ts[ts >= producer.started_at * 1e3]
                lat_ms = now * 1e3 - ts
            with lock:
                latencies.extend(lat_ms.tolist())
                batch_log.append({"batch_id": batch_id, "rows": stats["rows"], "updates": stats["updates"],
                                  "ddflow_s": stats["ddflow_s"], "wall_s": now - last_batch_end[0],
                                  "sink_s": stats["sink_s"], "to_arrow_s": stats["to_arrow_s"], "state_s": stats["state_s"],
                                  "t_end": now,
                                  "trace_size": stats["trace_size"], "max_time": stats["frontier"] - 1})
                last_batch_end[0] = now

        stream = (StreamingDataflow(build, name="reach-demo")
                  .input("roots", fields=["root"], format="json", time="t", topic=t_roots)
                  .input("edges", fields=["src", "dst"], format="json", time="t", diff="diff", topic=t_edges)
                  .output("out", KafkaSink(bootstrap, t_out),
                          names=["node", "root"] if args.query == "reach" else ["src", "count"])
                  # The same edges as a SQL table, and a SQL view over it: no dataflow code.
                  .table("edge_rows", {"src": "bigint", "dst": "bigint"}, format="json", time="t", diff="diff",
                         topic=t_edges)
                  .view("degree", "SELECT src, COUNT(*) AS out_degree FROM edge_rows GROUP BY src")
                  .output("degree", KafkaSink(bootstrap, t_sql))
                  .frontierPolicy("before-max")
                  .workers(args.workers)
                  .onBatch(on_batch))
        df = (spark.readStream.format(FORMAT)
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", f"{t_roots},{t_edges}")
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
              .load())
        producer.start()
        t_start = time.time()
        query = stream.start(df, checkpointLocation=os.path.join(work, "checkpoint"),
                             trigger={"processingTime": "0 seconds"}, queryName="ddflow_demo")
        last_print = 0.0
        startup_s = None
        checks = [0.0]

        def now_check() -> bool:
            # Asking the JVM about the query contends with the running micro-batch: not every tick.
            if time.time() - checks[0] >= 2.0:
                checks[0] = time.time()
                return True
            return False
        deadline = t_start + args.duration + max(60.0, args.duration)
        while True:
            time.sleep(0.25)
            if now_check() and query.exception() is not None:
                raise RuntimeError(f"the Spark query failed: {query.exception()}")
            if producer.error is not None:
                raise RuntimeError(f"the producer failed: {producer.error}")
            now = time.time()
            with lock:
                done_time = max((b["max_time"] for b in batch_log if b["max_time"] is not None), default=-1)
                lat = np.array(latencies[-2000:])
                n_batches = len(batch_log)
                size = batch_log[-1]["trace_size"] if batch_log else 0
            if now - last_print >= 1.0:
                last_print = now
                lat_s = (f"latency p50 {np.percentile(lat, 50):7.1f} ms p99 {np.percentile(lat, 99):7.1f} ms"
                         if len(lat) else "latency (waiting for the first micro-batch)")
                print(f"[{now - t_start:5.1f}s] micro-batches {n_batches:4d} | updates {max(done_time, 0):7d} "
                      f"| {max(done_time, 0) / max(now - t_start - (startup_s or 0.0), 1e-9):7.1f} updates/s | {lat_s} "
                      f"| state {size} updates",
                      flush=True)
            if startup_s is None and producer.go.is_set():
                startup_s = now - t_start
            if not producer.is_alive() and done_time >= producer.last_time:
                break
            if now > deadline:
                print("timed out waiting for the query to catch up", file=sys.stderr)
                break
        elapsed = time.time() - t_start
        if os.environ.get("DDFLOW_DEMO_DEBUG"):
            for pr in query.recentProgress:
                print(json.dumps({"spark_batch": pr.get("batchId"), "durationMs": pr.get("durationMs"),
                                  "rows": pr.get("numInputRows"), "ts": pr.get("timestamp")}), file=sys.stderr)
        query.stop()
        stream.stop()
        for spec in stream.outputs.values():
            spec.sink.close()
        # Check: the output, read back from Kafka, equals reachability on the final window.
        acc: dict[tuple, int] = {}
        for ch in read_changes(bootstrap, t_out):
            k = tuple(ch["record"])
            acc[k] = acc.get(k, 0) + ch["diff"]
        got = {k for k, v in acc.items() if v}
        if args.query == "reach":
            expect = bfs(list(producer.window), producer.roots)
        else:
            expect = set(collections.Counter(s for s, _ in producer.window).items())
        correct = got == expect and all(v == 1 for v in acc.values() if v)
        sql_acc: dict[tuple, int] = {}
        for ch in read_changes(bootstrap, t_sql):
            k = tuple(ch["record"])
            sql_acc[k] = sql_acc.get(k, 0) + ch["diff"]
        sql_got = {k: v for k, v in sql_acc.items() if v}
        sql_correct = sql_got == {(s, n): 1 for s, n in collections.Counter(s for s, _ in producer.window).items()}
        startup_s = startup_s or 0.0
        lat = np.array(latencies) if latencies else np.array([np.nan])
        dd_s = sum(b["ddflow_s"] for b in batch_log)
        wall_s = sum(b["wall_s"] for b in batch_log)
        if os.environ.get("DDFLOW_DEMO_DEBUG"):
            for b in batch_log:
                print(json.dumps(b), file=sys.stderr)
        summary = {
            "micro_batches": len(batch_log),
            "updates": producer.last_time,
            "updates_per_s": producer.last_time / max(elapsed - startup_s, 1e-9),
            "latency_ms_p50": float(np.nanpercentile(lat, 50)),
            "latency_ms_p99": float(np.nanpercentile(lat, 99)),
            "ddflow_share": dd_s / wall_s if wall_s else 0.0,
            "mean_batch_s": wall_s / len(batch_log) if batch_log else 0.0,
            "query": args.query,
            "workers": args.workers,
            "final_output_records": len(got),
            "rate": args.rate,
            "duration_s": args.duration,
            "spark_startup_s": startup_s,
            "dead_letters": stream.metrics.dead_letters,
            "correct": bool(correct),
            "sql_view": "SELECT src, COUNT(*) AS out_degree FROM edge_rows GROUP BY src",
            "sql_view_records": len(sql_got),
            "sql_view_correct": bool(sql_correct),
        }
        os.makedirs(args.out, exist_ok=True)
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots(figsize=(6, 4))
            xs = np.sort(lat[~np.isnan(lat)])
            if len(xs):
                ax.plot(xs, np.arange(1, len(xs) + 1) / len(xs))
            ax.set_xlabel("end-to-end latency, produce -> output visible (ms)")
            ax.set_ylabel("fraction of input records")
            ax.set_title(f"ddflow demo: {args.query} at {args.rate:g} updates/s")
            ax.grid(alpha=0.3)
            fig.tight_layout()
            fig.savefig(os.path.join(args.out, "latency_cdf.png"), dpi=100)
            summary["plot"] = os.path.join(args.out, "latency_cdf.png")
        except ImportError:
            pass
        print(json.dumps(summary), flush=True)
        return 0 if correct and sql_correct else 1
    finally:
        spark.stop()
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
