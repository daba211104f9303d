"""The streaming driver end to end, and its state and dead letters without Spark.

Spark tests (real local Spark, real broker from conftest):
- Kafka -> ddflow (reachability and a keyed count) -> Kafka and Parquet:
  the accumulated outputs equal the from-scratch answers, over a first
  query and a restarted second one with several micro-batches.
- Malformed and late messages go to the dead-letter sink with the reason;
  the query keeps going and the good messages count.

Fast tests (``process_arrow`` on Arrow tables shaped like Kafka rows):
replayed batch ids are skipped, snapshots restore, each kind of bad
message is a dead letter, batches without output changes.
"""
from __future__ import annotations

import collections
import json
import os
import signal
import sys
import random
from typing import Any

import pyarrow as pa
import pytest

import ddflow
from ddflow.streaming.demo import bfs, reach_dataflow
from ddflow.streaming.driver import StreamingDataflow
from ddflow.streaming.sinks import JsonLinesSink, KafkaSink, MemorySink, ParquetSink, accumulate, read_changes
from ddflow.streaming.state import StateError, StateStore

ROOTS = [0, 1]


# -- helpers ------------------------------------------------------------------------


def build(flow: ddflow.Dataflow):
    """Reachability from the roots over the edges, and the out-degree (a keyed count) of each node."""
    roots_in, roots = flow.new_collection("roots", schema=("i",))
    edges_in, edges = flow.new_collection("edges", schema=("i", "i"))
    reach = reach_dataflow(roots, edges)
    degree = edges.project(0).count()
    return {"roots": roots_in, "edges": edges_in}, {"reach": reach, "degree": degree,
                                                    "reach_pq": reach, "degree_pq": degree}


def distinct_reach_build(flow: ddflow.Dataflow):
    """``build`` with one more operator: another dataflow over the same inputs (a foreign state's maker)."""
    handles, outs = build(flow)
    return handles, {**outs, "reach": outs["reach"].distinct()}


def expected(edges: list[tuple[int, int]], roots: list[int]) -> tuple[dict, dict]:
    """From-scratch answers as accumulated outputs: record -> multiplicity."""
    reach = {pair: 1 for pair in bfs(edges, roots)}
    degree = {(s, c): 1 for s, c in collections.Counter(s for s, _ in edges).items()}
    return reach, degree


def edge_updates(n_edges: int, n_updates: int, nodes: int, seed: int, t0: int = 0):
    """Initial edges at time ``t0``, then sliding-window updates at distinct increasing times.

    Returns (initial messages, update messages, final edge multiset).
    """
    rng = random.Random(seed)
    window = collections.deque((rng.randrange(nodes), rng.randrange(nodes)) for _ in range(n_edges))
    initial = [{"src": s, "dst": d, "t": t0, "diff": 1} for s, d in window]
    updates = []
    t = t0
    for _ in range(n_updates):
        old = window.popleft()
        new = (rng.randrange(nodes), rng.randrange(nodes))
        window.append(new)
        updates.append({"src": old[0], "dst": old[1], "t": t + 1, "diff": -1})
        updates.append({"src": new[0], "dst": new[1], "t": t + 2, "diff": 1})
        t += 2
    return initial, updates, list(window)


def kafka_rows(values: list[Any], topic: str = "edges", start: int = 0) -> pa.Table:
    """An Arrow table like a micro-batch of Spark's Kafka source (dicts become JSON)."""
    n = len(values)
    enc = [v if isinstance(v, bytes) or v is None else json.dumps(v).encode() for v in values]
    return pa.table({
        "key": pa.nulls(n, pa.binary()),
        "value": pa.array(enc, pa.binary()),
        "topic": pa.array([topic] * n, pa.string()),
        "partition": pa.array([0] * n, pa.int32()),
        "offset": pa.array(range(start, start + n), pa.int64()),
        "timestamp": pa.array([1_700_000_000_000_000 + i for i in range(start, start + n)], pa.timestamp("us", tz="UTC")),
        "timestampType": pa.array([0] * n, pa.int32()),
    })


def fast_stream(state: str | None = None, snapshot_every: int = 50, dead: str | None = None):
    """Edges and roots from one Kafka-like table (told apart by topic), outputs to memory."""
    s = (StreamingDataflow(build, name="test")
         .input("roots", fields=["root"], format="json", time="t", topic="roots")
         .input("edges", fields=["src", "dst"], format="json", time="t", diff="diff", topic="edges"))
    for name, names in (("reach", ["node", "root"]), ("degree", ["node", "count"])):
        s.output(name, MemorySink(), names=names)
    if dead is not None:
        s.deadLetter(JsonLinesSink(dead))
    if state is not None:
        s.stateLocation(state, snapshot_every)
    return s


def roots_rows(roots: list[int], t: int = 0) -> pa.Table:
    return kafka_rows([{"root": r, "t": t} for r in roots], topic="roots", start=10_000)


def fast_batches(seed: int = 3) -> tuple[list[pa.Table], list[tuple[int, int]]]:
    """Six micro-batches of Kafka-like rows (roots first) and the final edge multiset."""
    initial, updates, final = edge_updates(10, 20, 12, seed)
    batches = [pa.concat_tables([roots_rows(ROOTS), kafka_rows(initial)])]
    off = len(initial)
    for i in range(0, len(updates), 8):
        chunk = updates[i:i + 8]
        batches.append(kafka_rows(chunk, start=off))
        off += len(chunk)
    return batches, final


def routed_spark(request) -> Any:
    """The session's Spark for a test's routed variant (workers on executors, rows routed from them).

    This module's functions go to the executors by value (they cannot import the tests).
    """
    spark = request.getfixturevalue("spark")
    if not spark.sparkContext.master.startswith("local-cluster"):
        pytest.skip("needs the test session on local-cluster (DDFLOW_TEST_MASTER)")
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return spark


def feed(stream: StreamingDataflow, table: pa.Table, batch_id: int, spark: Any = None) -> None:
    """One micro-batch: on the driver's path (``process_arrow``), or, with ``spark``, as the DataFrame Spark
    hands ``foreachBatch`` (two partitions: the session's parallelism), whose rows the executors route."""
    if spark is None:
        stream.process_arrow(table, batch_id)
    else:
        stream.process_batch(spark.createDataFrame(table), batch_id)


# -- fast: state, replay, snapshots ----------------------------------------------------------


def test_replayed_batch_id_is_skipped(tmp_path):
    batches, final = fast_batches()
    state = str(tmp_path / "state")
    s = fast_stream(state)
    for b in (0, 1, 2):
        s.process_arrow(batches[b], b)
    reach = s.outputs["reach"].sink
    before = {b: t for b, t in reach.batches.items()}
    manifest = StateStore(state).manifest
    assert manifest.batch_id == 2

    # Spark replays batch 2 (crash after the state commit, before Spark's): nothing happens.
    s.process_arrow(batches[2], 2)
    s.process_arrow(batches[1], 1)
    assert s.metrics.skipped_batches == 2 and s.metrics.batches == 3
    assert reach.batches == before
    assert StateStore(state).manifest == manifest

    # The same after a restart: the restored dataflow skips it and goes on correctly.
    s2 = fast_stream(state)
    s2.open()
    s2.process_arrow(batches[2], 2)
    assert s2.metrics.skipped_batches == 1 and not s2.outputs["reach"].sink.batches
    for b in range(3, len(batches)):
        s2.process_arrow(batches[b], b)
        s.process_arrow(batches[b], b)
    # Outputs after the restart equal those of the process that never stopped, batch by batch.
    for name in ("reach", "degree"):
        restarted = s2.outputs[name].sink.batches
        assert sorted(restarted) == list(range(3, len(batches)))
        for b, t in restarted.items():
            assert t.to_pylist() == s.outputs[name].sink.batches[b].to_pylist(), (name, b)
    want_reach, want_degree = expected(final, ROOTS)
    assert s.outputs["reach"].sink.contents() == want_reach
    assert s.outputs["degree"].sink.contents() == want_degree


@pytest.mark.parametrize("restart_after", [1, 2, 3, 4])
def test_snapshot_restore(tmp_path, restart_after):
    """snapshot_every=2: restarting after each number of batches restores the same dataflow."""
    batches, final = fast_batches(seed=11)
    state = str(tmp_path / "state")
    ref = fast_stream()
    for b, t in enumerate(batches):
        ref.process_arrow(t, b)

    s = fast_stream(state, snapshot_every=2)
    for b in range(restart_after + 1):
        s.process_arrow(batches[b], b)
    store = StateStore(state, 2)
    m = store.manifest
    files = sorted(f for f in os.listdir(state) if not f.startswith("."))  # dot files are not state (.progress)
    assert m.batch_id == restart_after
    n_done = restart_after + 1
    # A snapshot replaces the log every second batch; at most one log file follows it.
    assert m.files[0].startswith("snapshot-") and m.batches_since_snapshot == n_done % 2
    assert len(m.files) == 1 + n_done % 2
    assert files == sorted(m.files + ["manifest.json", "state.key"])
    # The snapshot holds consolidated updates at its frontier - 1, no cancelled records.
    snap = StateStore.read_file(os.path.join(state, m.files[0]))
    snap_time = (m.frontier if n_done % 2 == 0 else StateStore.read_file(os.path.join(state, m.files[1]))
                 ["edges"].column("time").to_pylist()[0]) - 1
    assert set(snap) == {"roots", "edges"}
    for t in snap.values():
        assert set(t.column("time").to_pylist()) == {snap_time}
        assert 0 not in t.column("diff").to_pylist()

    s2 = fast_stream(state, snapshot_every=2)
    s2.open()
    assert s2.flow.frontier == s.flow.frontier == m.frontier
    for b in range(n_done, len(batches)):
        s2.process_arrow(batches[b], b)
    for name in ("reach", "degree"):
        for b, t in s2.outputs[name].sink.batches.items():
            assert t.to_pylist() == ref.outputs[name].sink.batches[b].to_pylist(), (name, b)
    # Accumulated: what s delivered before the restart plus what s2 delivered after = from scratch.
    want_reach, want_degree = expected(final, ROOTS)
    for name, want in (("reach", want_reach), ("degree", want_degree)):
        both = pa.concat_tables([s.outputs[name].sink.table(), s2.outputs[name].sink.table()])
        assert accumulate(both) == want


# -- fast: dead letters ------------------------------------------------------------------------

BAD = [
    pytest.param(b"{not json", "unparseable JSON", id="not-json"),
    pytest.param(b"\xff\xfe", "unparseable JSON", id="not-utf8"),
    pytest.param(None, "null value", id="null-value"),
    pytest.param([1, 2], "expected a JSON object", id="not-an-object"),
    pytest.param({"src": 1, "t": 5, "diff": 1}, "'dst' is missing", id="missing-field"),
    pytest.param({"src": 1, "dst": 2, "diff": 1}, "'t' is missing", id="missing-time"),
    pytest.param({"src": 1, "dst": None, "t": 5, "diff": 1}, "'dst' is missing or null", id="null-field"),
    pytest.param({"src": "a", "dst": 2, "t": 5, "diff": 1}, "'src' has value 'a'", id="string-for-int"),
    pytest.param({"src": 1.5, "dst": 2, "t": 5, "diff": 1}, "'src' has value 1.5", id="float-for-int"),
    pytest.param({"src": True, "dst": 2, "t": 5, "diff": 1}, "'src' has value True", id="bool-for-int"),
    pytest.param({"src": [1], "dst": 2, "t": 5, "diff": 1}, "'src' has value [1]", id="list-for-int"),
    pytest.param({"src": 1, "dst": 2, "t": "5", "diff": 1}, "'t' has value '5'", id="string-time"),
    pytest.param({"src": 1, "dst": 2, "t": 5.5, "diff": 1}, "'t' has value 5.5", id="float-time"),
    pytest.param({"src": 1, "dst": 2, "t": 5, "diff": "x"}, "'diff' has value 'x'", id="string-diff"),
    pytest.param({"src": 1, "dst": 2, "t": 5, "diff": 2 ** 70}, "'diff' has value", id="huge-diff"),
    # Deep nesting: Python's parser raises RecursionError past ~1,000 levels, Arrow's reader crashes past ~20,000.
    pytest.param(b'{"src": 1, "dst": 2, "t": 5, "diff": 1, "x": ' + b"[" * 30000 + b"]" * 30000 + b"}",
                 "nested deeper than 64 levels", id="deep-nesting"),
    pytest.param(b"[" * 100000, "nested deeper than 64 levels", id="deep-unclosed"),
]


@pytest.mark.parametrize("where", ["first", "last", "alone"])
@pytest.mark.parametrize("bad, error", BAD)
def test_bad_message_is_a_dead_letter(tmp_path, bad, error, where):
    dead = str(tmp_path / "dead")
    s = fast_stream(str(tmp_path / "state"), dead=dead)
    s.process_arrow(pa.concat_tables([roots_rows([0]), kafka_rows([{"src": 0, "dst": 1, "t": 1, "diff": 1}])]), 0)
    good = [{"src": 1, "dst": 2, "t": 5, "diff": 1}, {"src": 2, "dst": 3, "t": 6, "diff": 1}]
    msgs = {"first": [bad] + good, "last": good + [bad], "alone": [bad]}[where]
    s.process_arrow(kafka_rows(msgs, start=1), 1)
    s.process_arrow(kafka_rows([{"src": 3, "dst": 4, "t": 7, "diff": 1}], start=10), 2)  # the query goes on
    rows = JsonLinesSink(dead).rows()
    assert len(rows) == 1, rows
    r = rows[0]
    assert error in r["error"] and r["input"] == "edges" and r["topic"] == "edges"
    assert r["offset"] == 1 + next(i for i, m in enumerate(msgs) if m is bad) and r["partition"] == 0
    if isinstance(bad, bytes) and bad.isascii():
        assert r["value"] == bad.decode()
    if where == "alone":
        want = {(0, 0), (1, 0)}
    else:
        want = {(n, 0) for n in range(5)}
    assert s.outputs["reach"].sink.contents() == {p: 1 for p in want}
    assert s.metrics.dead_letters == 1


def test_late_update_is_a_dead_letter_by_default(tmp_path):
    dead = str(tmp_path / "dead")
    s = fast_stream(dead=dead)
    s.process_arrow(pa.concat_tables([roots_rows([0]), kafka_rows([{"src": 0, "dst": 1, "t": 3, "diff": 1}])]), 0)
    assert s.flow.frontier == 4
    s.process_arrow(kafka_rows([{"src": 1, "dst": 2, "t": 3, "diff": 1}, {"src": 1, "dst": 3, "t": 4, "diff": 1}],
                               start=1), 1)
    rows = JsonLinesSink(dead).rows()
    assert [(r["offset"], r["error"]) for r in rows] == [(1, "time before the frontier 4")]
    assert s.outputs["reach"].sink.contents() == {(0, 0): 1, (1, 0): 1, (3, 0): 1}


def test_a_time_past_int64_limits_is_a_dead_letter_and_the_query_goes_on(tmp_path):
    dead = str(tmp_path / "dead")
    s = fast_stream(dead=dead)
    s.process_arrow(pa.concat_tables([roots_rows([0]), kafka_rows([{"src": 0, "dst": 1, "t": 2**63 - 1, "diff": 1},
                                                                   {"src": 0, "dst": 2, "t": 3, "diff": 1}])]), 0)
    s.process_arrow(kafka_rows([{"src": 2, "dst": 3, "t": 5, "diff": 1}], start=2), 1)
    assert [(r["offset"], r["error"]) for r in JsonLinesSink(dead).rows()] == [
        (0, "time past the largest data time 9223372036854775806")]
    assert s.outputs["reach"].sink.contents() == {(0, 0): 1, (2, 0): 1, (3, 0): 1}


def test_a_far_future_time_is_a_dead_letter_not_a_frontier_jump(tmp_path):
    dead = str(tmp_path / "dead")
    s = fast_stream(dead=dead)
    s.process_arrow(pa.concat_tables([roots_rows([0]), kafka_rows([{"src": 0, "dst": 1, "t": 3, "diff": 1}])]), 0)
    s.process_arrow(kafka_rows([{"src": 1, "dst": 2, "t": 2**62, "diff": 1}, {"src": 1, "dst": 3, "t": 4, "diff": 1}],
                               start=1), 1)
    s.process_arrow(kafka_rows([{"src": 3, "dst": 4, "t": 5, "diff": 1}], start=3), 2)  # not late: the frontier held
    rows = JsonLinesSink(dead).rows()
    assert [(r["offset"], r["error"]) for r in rows] == [
        (1, "time more than 1099511627776 past the frontier 4 (maxTimeAhead)")]
    assert s.outputs["reach"].sink.contents() == {(0, 0): 1, (1, 0): 1, (3, 0): 1, (4, 0): 1}
    assert StreamingDataflow(build).maxTimeAhead(None).max_time_ahead is None


def test_late_update_with_late_error_raises():
    s = (StreamingDataflow(build)
         .input("edges", fields=["src", "dst"], format="json", time="t", diff="diff", late="error"))
    s.process_arrow(kafka_rows([{"src": 0, "dst": 1, "t": 3, "diff": 1}]), 0)
    with pytest.raises(ddflow.FrontierError, match="before the frontier 4"):
        s.process_arrow(kafka_rows([{"src": 1, "dst": 2, "t": 3, "diff": 1}], start=1), 1)


def test_kafka_columns_as_time_with_json_values():
    """Kafka's offset (the default) or ``kafka.timestamp`` with JSON values reads the Kafka column."""
    for time_col in (None, "kafka.offset", "kafka.timestamp"):
        s = (StreamingDataflow(build)
             .input("edges", fields=["src", "dst"], format="json", time=time_col)
             .output("degree", MemorySink(), names=["node", "count"]))
        s.process_arrow(kafka_rows([{"src": 1, "dst": 2}, {"src": 1, "dst": 3}]), 0)
        assert s.metrics.dead_letters == 0, time_col
        assert s.outputs["degree"].sink.contents() == {(1, 2): 1}, time_col


def test_a_json_field_named_like_a_kafka_column_is_the_field_or_refused():
    """``{"key": 7}``: a table column ``key`` is the JSON field; ``.input`` asks which ``key`` is meant."""
    rows = [{"key": 7, "t": 3}, {"key": 7, "t": 3}, {"key": 8, "t": 4}]
    s = (StreamingDataflow()
         .table("ev", {"key": "bigint"}, format="json", time="t")
         .view("n", "SELECT key, COUNT(*) AS c FROM ev GROUP BY key")
         .output("n", MemorySink()))
    s.process_arrow(kafka_rows(rows), 0)
    assert s.outputs["n"].sink.contents() == {(7, 2): 1, (8, 1): 1}
    for bad in ({"fields": ["key"]}, {"fields": ["src"], "time": "timestamp"}, {"fields": ["kafka.nope"]}):
        with pytest.raises(ValueError, match="could mean the JSON field or Kafka|names no Kafka column"):
            StreamingDataflow(build).input("edges", format="json", **bad)
    s = (StreamingDataflow(build)
         .input("edges", fields=["json.key", "kafka.partition"], format="json", time="t")
         .output("degree", MemorySink(), names=["node", "count"]))
    s.process_arrow(kafka_rows(rows), 0)
    assert s.outputs["degree"].sink.contents() == {(7, 2): 1, (8, 1): 1}


def test_batches_without_output_changes():
    """Empty micro-batches, and batches whose changes cancel, give empty outputs with the output's columns."""
    s = fast_stream()
    s.process_arrow(kafka_rows([]), 0)  # nothing yet: column kinds unknown
    s.process_arrow(roots_rows([5]), 1)
    s.process_arrow(kafka_rows([{"src": 5, "dst": 6, "t": 1, "diff": 1}], start=0), 2)
    s.process_arrow(kafka_rows([]), 3)
    sink = s.outputs["reach"].sink
    assert sink.batches[0].num_rows == 0 and sink.batches[3].num_rows == 0
    assert sink.batches[3].column_names == ["node", "root", "time", "diff"]
    assert sink.contents() == {(5, 5): 1, (6, 5): 1}


# -- Spark + Kafka ------------------------------------------------------------------------------


def _ddkafka(spark, bootstrap: str, topics: list[str], max_offsets: int | None = None):
    r = (spark.readStream.format("ddkafka")
         .option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", ",".join(topics))
         .option("startingOffsets", "earliest"))
    if max_offsets is not None:
        r = r.option("maxOffsetsPerTrigger", max_offsets)
    return r.load()


def _spark_stream(bootstrap: str, t_roots: str, t_edges: str, out: dict[str, str], work, batches: list,
                  workers: int = 1, spark=None):
    s = (StreamingDataflow(build, name="e2e").workers(workers, spark=spark)
         .input("roots", fields=["root"], format="json", time="t", topic=t_roots)
         .input("edges", fields=["src", "dst"], format="json", time="t", diff="diff", topic=t_edges)
         .output("reach", KafkaSink(bootstrap, out["reach"]), names=["node", "root"])
         .output("degree", KafkaSink(bootstrap, out["degree"]), names=["node", "count"])
         .output("reach_pq", ParquetSink(str(work / "reach")), names=["node", "root"])
         .output("degree_pq", ParquetSink(str(work / "degree")), names=["node", "count"])
         .deadLetter(JsonLinesSink(str(work / "dead")))
         .onBatch(lambda b, stats: batches.append(stats)))
    return s


def _run(stream, df, checkpoint) -> None:
    query = stream.start(df, checkpointLocation=checkpoint, trigger={"availableNow": True})
    try:
        query.awaitTermination()
    finally:
        stream.stop()
        for spec in stream.outputs.values():
            if hasattr(spec.sink, "close"):
                spec.sink.close()
    assert query.exception() is None


def _kafka_contents(bootstrap: str, topic: str) -> dict:
    acc: collections.Counter = collections.Counter()
    for ch in read_changes(bootstrap, topic):
        acc[tuple(ch["record"])] += ch["diff"]
    return {k: v for k, v in acc.items() if v}


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.parametrize("workers", [1, 2, "executors"])
def test_kafka_to_ddflow_to_kafka_and_parquet(spark, kafka_bootstrap, new_topic, tmp_path, workers):
    """The whole path, and a restart from the state log.

    With 2 workers the Spark query feeds forked worker processes; with
    "executors", 2 workers run as Spark barrier tasks, the executors send
    them each batch's rows directly (the first query runs so, undisturbed),
    and a worker is SIGKILLed after the second batch of the second query:
    the next batch reopens the dataflow on new tasks, restores it from the
    input log and runs again, and the outputs are still exact, with no
    duplicate.
    """
    from ddflow.streaming.broker import produce

    on_executors = isinstance(workers, str)
    if on_executors:
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the executors cannot import the tests
    sp, w = (spark, 2) if on_executors else (None, workers)
    t_roots, t_edges = new_topic(1, "roots"), new_topic(1, "edges")
    out = {"reach": new_topic(1, "reach"), "degree": new_topic(1, "degree")}
    initial, updates, final = edge_updates(40, 30, 25, seed=5)
    produce(kafka_bootstrap, t_roots, [(None, json.dumps({"root": r, "t": 0}).encode()) for r in ROOTS])
    produce(kafka_bootstrap, t_edges, [(str(m["src"]).encode(), json.dumps(m).encode()) for m in initial])
    checkpoint = str(tmp_path / "checkpoint")

    # First query: roots and the initial graph, one micro-batch.
    batches: list = []
    _run(_spark_stream(kafka_bootstrap, t_roots, t_edges, out, tmp_path, batches, w, sp),
         _ddkafka(spark, kafka_bootstrap, [t_roots, t_edges]), checkpoint)
    assert len(batches) == 1 and batches[0]["updates"] == len(ROOTS) + len(initial)
    want_reach, want_degree = expected([(m["src"], m["dst"]) for m in initial], ROOTS)
    assert _kafka_contents(kafka_bootstrap, out["reach"]) == want_reach
    assert accumulate(ParquetSink(str(tmp_path / "reach")).table()) == want_reach

    # More input, then the job restarted (a new StreamingDataflow restores from its state) with
    # several micro-batches.
    produce(kafka_bootstrap, t_edges, [(str(m["src"]).encode(), json.dumps(m).encode()) for m in updates])
    batches2: list = []
    stream = _spark_stream(kafka_bootstrap, t_roots, t_edges, out, tmp_path, batches2, w, sp)
    if on_executors:
        def kill_after_second(batch_id, stats):
            batches2.append(stats)
            if len(batches2) == 2:
                os.kill(stream.flow._pool.pids[1], signal.SIGKILL)
        stream.onBatch(kill_after_second)
    _run(stream, _ddkafka(spark, kafka_bootstrap, [t_roots, t_edges], max_offsets=16), checkpoint)
    assert len(batches2) == -(-len(updates) // 16) >= 3
    assert [b["batch_id"] for b in batches2] == list(range(1, 1 + len(batches2)))
    assert sum(b["updates"] for b in batches2) == len(updates)
    assert all(b["dead_letters"] == 0 for b in batches + batches2)
    assert stream.metrics.worker_restarts == (1 if on_executors else 0)
    if on_executors:
        assert stream.metrics.routed_bytes > 0  # the rows went from the executors to the workers

    want_reach, want_degree = expected(final, ROOTS)
    assert _kafka_contents(kafka_bootstrap, out["reach"]) == want_reach
    assert _kafka_contents(kafka_bootstrap, out["degree"]) == want_degree
    assert accumulate(ParquetSink(str(tmp_path / "reach")).table()) == want_reach
    assert accumulate(ParquetSink(str(tmp_path / "degree")).table()) == want_degree
    # Each sink received exactly the changes of the other (same records, times and diffs).
    pq_changes = collections.Counter()
    for r in ParquetSink(str(tmp_path / "reach")).table().to_pylist():
        pq_changes[(r["node"], r["root"], r["time"])] += r["diff"]
    kafka_changes = collections.Counter()
    for ch in read_changes(kafka_bootstrap, out["reach"]):
        kafka_changes[(*ch["record"], ch["time"])] += ch["diff"]
    assert pq_changes == kafka_changes
    assert not JsonLinesSink(str(tmp_path / "dead")).rows()


@pytest.mark.spark
@pytest.mark.kafka
def test_malformed_and_late_messages_go_to_dead_letters(spark, kafka_bootstrap, new_topic, tmp_path):
    from ddflow.streaming.broker import produce

    t_roots, t_edges = new_topic(1, "roots"), new_topic(1, "edges")
    out = {"reach": new_topic(1, "reach"), "degree": new_topic(1, "degree")}
    produce(kafka_bootstrap, t_roots, [(None, json.dumps({"root": 0, "t": 0}).encode())])
    good = [{"src": i, "dst": i + 1, "t": i + 1, "diff": 1} for i in range(12)]
    bad = {
        3: b"this is not JSON",
        5: json.dumps({"src": 9, "t": 4, "diff": 1}).encode(),                 # missing dst
        8: json.dumps({"src": "nine", "dst": 1, "t": 7, "diff": 1}).encode(),  # wrong type
        9: json.dumps({"src": 1, "dst": 2, "t": 7.5, "diff": 1}).encode(),     # wrong type of time
        12: json.dumps({"src": 0, "dst": 50, "t": 2, "diff": 1}).encode(),     # late: before the frontier
    }
    msgs: list[bytes] = []
    for i, m in enumerate(good):
        if i in bad:
            msgs.append(bad[i])
        msgs.append(json.dumps(m).encode())
    msgs.append(bad[12])
    # The root first, alone: with maxOffsetsPerTrigger it could land in a micro-batch after edges
    # with later data times, and then it would be late itself.
    batches: list = []
    checkpoint = str(tmp_path / "checkpoint")
    _run(_spark_stream(kafka_bootstrap, t_roots, t_edges, out, tmp_path, batches),
         _ddkafka(spark, kafka_bootstrap, [t_roots, t_edges]), checkpoint)
    produce(kafka_bootstrap, t_edges, [(None, m) for m in msgs])
    _run(_spark_stream(kafka_bootstrap, t_roots, t_edges, out, tmp_path, batches),
         _ddkafka(spark, kafka_bootstrap, [t_roots, t_edges], max_offsets=6), checkpoint)
    assert len(batches) == 1 + 3  # the query kept going past the bad messages
    assert sum(b["dead_letters"] for b in batches) == len(bad)
    dead = JsonLinesSink(str(tmp_path / "dead")).rows()
    offsets = {v: i for i, v in enumerate(msgs)}
    got = {r["offset"]: r["error"] for r in dead}
    assert sorted(got) == sorted(offsets[v] for v in bad.values())
    assert all(r["topic"] == t_edges and r["input"] == "edges" for r in dead)
    assert got[offsets[bad[3]]].startswith("unparseable JSON")
    assert "'dst' is missing" in got[offsets[bad[5]]]
    assert "'src' has value 'nine'" in got[offsets[bad[8]]]
    assert "'t' has value 7.5" in got[offsets[bad[9]]]
    assert got[offsets[bad[12]]].startswith("time before the frontier")
    assert {r["offset"]: r["value"] for r in dead}[offsets[bad[3]]] == "this is not JSON"
    # Every good message was processed: a path 0 -> 1 -> ... -> 12.
    assert _kafka_contents(kafka_bootstrap, out["reach"]) == {(n, 0): 1 for n in range(13)}
    assert accumulate(ParquetSink(str(tmp_path / "degree")).table()) == {(i, 1): 1 for i in range(12)}


@pytest.mark.parametrize("policy", ["after-batch", "before-max"])
def test_frontier_policy_when_a_time_straddles_batches(tmp_path, policy):
    """One data time's updates split across two micro-batches: before-max keeps both, after-batch
    retires the time with the first batch and dead-letters the rest as late."""
    dead = JsonLinesSink(str(tmp_path / "dead"))
    out = MemorySink()

    def build_count(flow):
        h, edges = flow.new_collection("edges", schema=("i", "i"))
        return {"edges": h}, {"deg": edges.project(0).count()}

    s = (StreamingDataflow(build_count).input("edges", fields=["src", "dst"], format="json", time="t", diff="diff")
         .output("deg", out, names=["src", "n"]).deadLetter(dead).frontierPolicy(policy))
    s.process_arrow(kafka_rows([{"src": 1, "dst": 2, "t": 1, "diff": 1}, {"src": 1, "dst": 2, "t": 2, "diff": -1}]), 0)
    s.process_arrow(kafka_rows([{"src": 1, "dst": 3, "t": 2, "diff": 1}, {"src": 0, "dst": 0, "t": 3, "diff": 0}],
                               start=2), 1)
    if policy == "before-max":
        assert dead.rows() == []
        # At time 2 the edge (1,2) was replaced by (1,3): the count of node 1 stays 1, nothing changes at 2.
        assert out.contents() == {(1, 1): 1}
        assert sorted(out.table().column("time").to_pylist()) == [1]
    else:
        assert [r["error"] for r in dead.rows()] == ["time before the frontier 3"]
        assert out.contents() == {}  # the removal at 2 retired alone; its replacement was late


def test_frontier_policy_rejects_unknown():
    with pytest.raises(ValueError, match="frontier policy"):
        StreamingDataflow(build).frontierPolicy("eventually")


def test_snapshot_keeps_updates_not_yet_retired(tmp_path):
    """Under before-max the batch's largest time is pending when the snapshot is taken: a restart
    must still deliver its output, not fold it into the already-delivered past."""
    def build_count(flow):
        h, edges = flow.new_collection("edges", schema=("i", "i"))
        return {"edges": h}, {"deg": edges.project(0).count()}

    def stream(out):
        return (StreamingDataflow(build_count).input("edges", fields=["src", "dst"], format="json", time="t",
                                                     diff="diff")
                .output("deg", out, names=["src", "n"]).frontierPolicy("before-max")
                .stateLocation(str(tmp_path / "state"), snapshotEvery=1))

    first = MemorySink()
    s = stream(first)
    s.process_arrow(kafka_rows([{"src": 1, "dst": 2, "t": 1, "diff": 1}, {"src": 1, "dst": 3, "t": 2, "diff": 1}]), 0)
    assert first.contents() == {(1, 1): 1}  # time 2 is not final yet
    second = MemorySink()
    s2 = stream(second)  # restart from the snapshot
    s2.process_arrow(kafka_rows([{"src": 0, "dst": 0, "t": 3, "diff": 0}], start=2), 1)
    assert accumulate(pa.concat_tables([first.table(), second.table()])) == {(1, 2): 1}


def test_sql_tables_and_views_without_dataflow_code(tmp_path):
    """.table().view().output(): JSON rows to a SQL view's changelog, NULLs, dead letters, restore from the log."""
    orders = {"o_id": "bigint", "cust": "string", "amount": "bigint"}

    def stream():
        out, dead = MemorySink(), MemorySink()
        s = (StreamingDataflow(name="sql")
             .table("orders", orders, format="json", time="t", diff="diff", topic="orders")
             .view("totals", "SELECT cust, SUM(amount) AS total, COUNT(*) AS n FROM orders GROUP BY cust")
             .output("totals", out)
             .deadLetter(dead)
             .stateLocation(str(tmp_path / "state")))
        return s, out, dead

    s, out, dead = stream()
    s.process_arrow(kafka_rows([], topic="orders"), 0)  # no output yet: an empty, typed changelog
    assert out.batches[0].num_rows == 0 and out.batches[0].column_names == ["cust", "total", "n", "time", "diff"]
    s.process_arrow(kafka_rows([{"o_id": 1, "cust": "a", "amount": 5, "t": 0, "diff": 1},
                                {"o_id": 2, "cust": None, "amount": 3, "t": 0, "diff": 1},
                                {"o_id": 3, "cust": "a", "t": 1, "diff": 1},
                                {"o_id": "x", "cust": "b", "amount": 1, "t": 1, "diff": 1}], topic="orders"), 1)
    table = out.batches[1]
    assert table.column_names == ["cust", "total", "n", "time", "diff"]
    assert str(table.schema.field("total").type) == "int64"
    assert accumulate(table) == {("a", 5, 2): 1, (None, 3, 1): 1}
    assert dead.batches[1].num_rows == 1 and "o_id" in dead.batches[1].column("error")[0].as_py()
    s.stop()
    s2, out2, _ = stream()  # restarted: the state replays the logged input
    s2.process_arrow(kafka_rows([{"o_id": 4, "cust": "a", "amount": 1, "t": 2, "diff": 1}], topic="orders", start=4), 2)
    assert accumulate(out2.batches[2]) == {("a", 5, 2): -1, ("a", 6, 3): 1}
    s2.stop()


@pytest.mark.spark
@pytest.mark.kafka
def test_sql_views_from_kafka_through_spark(spark, kafka_bootstrap, new_topic, tmp_path):
    """Kafka -> Spark -> SQL tables and views (no dataflow code) -> Kafka and Parquet changelogs, against DuckDB."""
    import duckdb

    from ddflow.streaming.broker import produce

    t_orders, t_customers, t_out = new_topic(1, "orders"), new_topic(1, "customers"), new_topic(1, "totals")
    rng = random.Random(7)
    orders = [{"o_id": i, "cust": rng.choice(["a", "b", "c", None]), "amount": rng.choice([1, 2, 5, None]), "t": i}
              for i in range(40)]
    customers = [{"id": c, "region": r, "t": 0} for c, r in (("a", "north"), ("b", "south"), ("c", "north"))]
    produce(kafka_bootstrap, t_customers, [(None, json.dumps(m).encode()) for m in customers])
    produce(kafka_bootstrap, t_orders, [(None, json.dumps(m).encode()) for m in orders[:20]])
    totals = "SELECT c.region, SUM(o.amount) AS total, COUNT(*) AS n FROM orders o JOIN customers c ON o.cust = c.id " \
             "GROUP BY c.region"
    batches: list = []

    def stream():
        return (StreamingDataflow(name="sql-e2e")
                .table("orders", {"o_id": "bigint", "cust": "string", "amount": "bigint"}, format="json", time="t",
                       topic=t_orders)
                .table("customers", {"id": "string", "region": "string"}, format="json", time="t", topic=t_customers)
                .view("totals", totals)
                .output("totals", KafkaSink(kafka_bootstrap, t_out))
                .view("by_cust", "SELECT cust, COUNT(amount) AS k FROM orders GROUP BY cust")
                .output("by_cust", ParquetSink(str(tmp_path / "by_cust")))
                .onBatch(lambda b, stats: batches.append(stats)))

    # The customers and the first orders in one micro-batch; then the job restarted over the rest, several batches.
    _run(stream(), _ddkafka(spark, kafka_bootstrap, [t_customers, t_orders]), str(tmp_path / "ckpt"))
    produce(kafka_bootstrap, t_orders, [(None, json.dumps(m).encode()) for m in orders[20:]])
    _run(stream(), _ddkafka(spark, kafka_bootstrap, [t_customers, t_orders], max_offsets=8), str(tmp_path / "ckpt"))
    assert len(batches) >= 4 and all(b["dead_letters"] == 0 for b in batches)
    con = duckdb.connect()
    con.execute("CREATE TABLE orders (o_id BIGINT, cust VARCHAR, amount BIGINT)")
    con.execute("CREATE TABLE customers (id VARCHAR, region VARCHAR)")
    con.executemany("INSERT INTO orders VALUES (?, ?, ?)", [(m["o_id"], m["cust"], m["amount"]) for m in orders])
    con.executemany("INSERT INTO customers VALUES (?, ?)", [(m["id"], m["region"]) for m in customers])
    assert _kafka_contents(kafka_bootstrap, t_out) == {r: 1 for r in con.execute(totals).fetchall()}
    by_cust = con.execute("SELECT cust, COUNT(amount) AS k FROM orders GROUP BY cust").fetchall()
    table = ParquetSink(str(tmp_path / "by_cust")).table()
    assert table.column_names[:2] == ["cust", "k"] and accumulate(table) == {r: 1 for r in by_cust}


def ratio_build(flow: ddflow.Dataflow):
    """A row-wise function that raises on some records (dst == 0), then a keyed sum."""
    edges_in, edges = flow.new_collection("edges", schema=("i", "i"))
    ratios = edges.map(lambda r: (r[0], 60 // r[1])).sum()
    return {"edges": edges_in}, {"ratios": ratios}


def ratio_stream(state: str | None = None, dead: str | None = None, on_error: str = "dead-letter", workers: int = 1,
                 spark: Any = None):
    s = (StreamingDataflow(ratio_build).workers(workers, spark=spark)
         .input("edges", ["src", "dst"], format="json", time="t", diff="diff", onError=on_error)
         .output("ratios", MemorySink(), names=["src", "sum"]))
    if state is not None:
        s.stateLocation(state, snapshotEvery=2)
    if dead is not None:
        s.deadLetter(JsonLinesSink(dead))
    return s


@pytest.mark.parametrize("workers", [1, 2, "executors"])
def test_on_error_dead_letter_drops_what_raises_the_same_way_after_a_restart(tmp_path, workers, request):
    """Also routed ("executors"): the functions raise in the workers on Spark's executors, fed by the executors."""
    spark = routed_spark(request) if workers == "executors" else None
    workers = 2 if spark is not None else workers
    initial, updates, final = edge_updates(12, 24, 5, seed=9)  # dst == 0 for about a fifth of the edges
    msgs = initial + updates
    batches = [kafka_rows(initial)] + [kafka_rows(updates[i:i + 6], start=len(initial) + i)
                                       for i in range(0, len(updates), 6)]
    ref = ratio_stream(dead=str(tmp_path / "ref-dead"))  # one worker: the reference
    for b, t in enumerate(batches):
        ref.process_arrow(t, b)
    want: dict = {}
    for s_, d_ in final:
        if d_:
            want[s_] = want.get(s_, 0) + 60 // d_
    assert ref.outputs["ratios"].sink.contents() == {(k, v): 1 for k, v in want.items()}
    ref_dead = JsonLinesSink(str(tmp_path / "ref-dead")).rows()
    bad = [m for m in msgs if m["dst"] == 0]
    assert bad and [json.loads(r["value"]) for r in ref_dead] == [
        {"record": [m["src"], m["dst"]], "time": [m["t"]], "diff": m["diff"]} for m in bad]
    assert all(r["input"] == "edges" and "ZeroDivisionError" in r["error"] and "map" in r["error"] for r in ref_dead)

    # Restarted from its state midway: the same outputs and dead letters for every later batch.
    state, dead = str(tmp_path / "state"), str(tmp_path / "dead")
    first = ratio_stream(state, dead, workers=workers, spark=spark)
    for b in range(3):
        feed(first, batches[b], b, spark)
    first.stop()
    again = ratio_stream(state, dead, workers=workers, spark=spark)
    again.open()
    for b in range(3, len(batches)):
        feed(again, batches[b], b, spark)
        assert again.outputs["ratios"].sink.batches[b].to_pylist() == ref.outputs["ratios"].sink.batches[b].to_pylist()
    again.stop()
    got_dead = JsonLinesSink(dead).rows()
    if workers > 1:  # each worker reports its own, in worker order: the same rows, in another order
        got_dead, ref_dead = (sorted(d, key=lambda r: r["value"]) for d in (got_dead, ref_dead))
    assert got_dead == ref_dead

    # The default policy fails the batch, naming the operator (on executors: test_cluster.py).
    if spark is None:
        failing = ratio_stream(on_error="fail", workers=workers)
        with pytest.raises(ZeroDivisionError, match="operator 'map"):
            for b, t in enumerate(batches):
                failing.process_arrow(t, b)
        failing.stop()


def test_a_removal_of_an_absent_edge_closing_a_cycle_is_a_dead_letter_and_the_query_goes_on(tmp_path):
    """The issue's one valid message that hung the loop forever, and every restart with it."""
    dead = str(tmp_path / "dead")
    s = fast_stream(state=str(tmp_path / "state"), dead=dead)
    s.process_arrow(pa.concat_tables([roots_rows([0]), kafka_rows([{"src": 0, "dst": 2, "t": 0, "diff": 1},
                                                                    {"src": 2, "dst": 1, "t": 0, "diff": 1}])]), 0)
    s.process_arrow(kafka_rows([{"src": 1, "dst": 2, "t": 2, "diff": -1}, {"src": 1, "dst": 3, "t": 2, "diff": 1}],
                               start=2), 1)
    assert s.outputs["reach"].sink.contents() == {(0, 0): 1, (2, 0): 1, (1, 0): 1, (3, 0): 1}
    rows = JsonLinesSink(dead).rows()
    assert [(r["input"], json.loads(r["value"])["record"], r["error"]) for r in rows] == [
        ("edges", [1, 2], "input 'edges': a retraction of a record that is not there (its count would go below zero)")]
    s.stop()
    again = fast_stream(state=str(tmp_path / "state"), dead=dead)  # a restart replays the log: no hang either
    again.process_arrow(kafka_rows([{"src": 3, "dst": 4, "t": 3, "diff": 1}], start=4), 2)
    assert again.outputs["reach"].sink.contents() == {(4, 0): 1}


def test_a_state_directory_of_another_query_is_refused(tmp_path):
    """Same code, other inputs (or another dataflow, or another Spark query): StateError saying which."""
    state = str(tmp_path / "state")
    s = fast_stream(state=state)
    s.process_arrow(pa.concat_tables([roots_rows([0]), kafka_rows([{"src": 0, "dst": 2, "t": 0, "diff": 1}])]), 0)
    s.stop()
    def stream(build_fn, edge_fields):
        return (StreamingDataflow(build_fn, name="test")
                .input("roots", fields=["root"], format="json", time="t", topic="roots")
                .input("edges", fields=edge_fields, format="json", time="t", diff="diff", topic="edges")
                .output("reach", MemorySink(), names=["node", "root"]).stateLocation(state))

    with pytest.raises(StateError, match="belongs to another query: its inputs and their schemas"):
        stream(build, ["dst", "src"]).process_arrow(kafka_rows([]), 1)
    with pytest.raises(StateError, match="its dataflow"):
        stream(distinct_reach_build, ["src", "dst"]).process_arrow(kafka_rows([]), 1)
    s2 = fast_stream(state=state)  # the original query still opens its own state
    s2.process_arrow(kafka_rows([{"src": 2, "dst": 3, "t": 1, "diff": 1}], start=1), 1)
    assert s2.outputs["reach"].sink.contents() == {(3, 0): 1}
    s2.stop()


def test_a_state_directory_of_another_spark_query_is_refused(tmp_path):
    state, ckpt = str(tmp_path / "state"), tmp_path / "ckpt"
    (ckpt / "commits").mkdir(parents=True)
    (ckpt / "metadata").write_text('{"id":"query-1"}\n')
    s = fast_stream(state=state)
    s.checkpoint_location = str(ckpt)  # what start() sets: Spark's checkpoint, with the query's id
    s.process_arrow(pa.concat_tables([roots_rows([0]), kafka_rows([{"src": 0, "dst": 2, "t": 0, "diff": 1}])]), 0)
    s.stop()
    (ckpt / "commits" / "0").write_text("v1\n{}")
    (ckpt / "metadata").write_text('{"id":"query-2"}\n')  # another query's checkpoint with the same batch count
    other = fast_stream(state=state)
    other.checkpoint_location = str(ckpt)
    with pytest.raises(StateError, match="its Spark query id .*query-1.*query-2"):
        other.process_arrow(kafka_rows([]), 1)


def test_a_state_directory_that_cannot_be_written_is_named_at_start(tmp_path):
    """Not a bare PermissionError at the first commit: the path and the remedy, before anything runs."""
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    places = [blocked / "state"]  # under a regular file: nobody, root included, can write there
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        places.append(ro)
    for state in places:
        with pytest.raises(StateError, match="cannot write there.*writable stateLocation"):
            fast_stream(state=str(state)).process_arrow(kafka_rows([]), 0)


@pytest.mark.spark
@pytest.mark.kafka
def test_hostile_messages_through_spark_are_dead_letters_and_another_querys_state_is_refused(
        spark, kafka_bootstrap, new_topic, tmp_path):
    """Issue 22's cases as they arrive through Kafka and Spark, in one query.

    The absent edge closing a cycle, two messages whose diffs add up past
    int64, and a JSON field named ``key``: dead letters with the reason (or
    the JSON field), and the query goes on.  Then a query of another
    dataflow and another Spark checkpoint over the same state: refused.
    """
    from ddflow.streaming.broker import produce

    t_roots, t_edges, t_ev = new_topic(1, "roots"), new_topic(1, "edges"), new_topic(1, "ev")
    big = (1 << 62) + 1
    produce(kafka_bootstrap, t_roots, [(None, json.dumps({"root": 0, "t": 0}).encode())])
    edges = [{"src": 0, "dst": 2, "t": 0, "diff": 1}, {"src": 2, "dst": 1, "t": 0, "diff": 1},
             {"src": 1, "dst": 2, "t": 2, "diff": -1},                                  # never inserted: a cycle
             {"src": 5, "dst": 6, "t": 3, "diff": big}, {"src": 5, "dst": 6, "t": 3, "diff": big},  # past int64
             {"src": 2, "dst": 3, "t": 4, "diff": 1}]
    produce(kafka_bootstrap, t_edges, [(b"k", json.dumps(m).encode()) for m in edges])
    produce(kafka_bootstrap, t_ev, [(b"kafka-key", json.dumps({"key": k, "t": 5}).encode()) for k in (7, 7, 8)])

    def stream(build_fn=build):
        return (StreamingDataflow(build_fn, name="hostile")
                .input("roots", fields=["root"], format="json", time="t", topic=t_roots)
                .input("edges", fields=["src", "dst"], format="json", time="t", diff="diff", topic=t_edges)
                .table("ev", {"key": "bigint"}, format="json", time="t", topic=t_ev)
                .view("keys", "SELECT key, COUNT(*) AS n FROM ev GROUP BY key")
                .output("reach", ParquetSink(str(tmp_path / "reach")), names=["node", "root"])
                .output("keys", ParquetSink(str(tmp_path / "keys")))
                .deadLetter(JsonLinesSink(str(tmp_path / "dead")))
                .stateLocation(str(tmp_path / "state")))

    _run(stream(), _ddkafka(spark, kafka_bootstrap, [t_roots, t_edges, t_ev]), str(tmp_path / "ckpt"))
    assert accumulate(ParquetSink(str(tmp_path / "reach")).table()) == {(0, 0): 1, (2, 0): 1, (1, 0): 1, (3, 0): 1}
    assert accumulate(ParquetSink(str(tmp_path / "keys")).table()) == {(7, 2): 1, (8, 1): 1}  # the JSON field
    dead = sorted((json.loads(r["value"])["record"], r["error"]) for r in JsonLinesSink(str(tmp_path / "dead")).rows())
    assert [r for r, _ in dead] == [[1, 2], [5, 6], [5, 6]]
    assert "not there" in dead[0][1] and all("past int64" in e for _, e in dead[1:])

    produce(kafka_bootstrap, t_edges, [(None, json.dumps({"src": 3, "dst": 4, "t": 6, "diff": 1}).encode())])
    with pytest.raises(Exception, match="belongs to another query"):
        _run(stream(distinct_reach_build), _ddkafka(spark, kafka_bootstrap, [t_roots, t_edges, t_ev]), str(tmp_path / "ckpt"))


def test_the_input_log_holds_only_applied_updates_so_snapshots_restore_the_same_counts(tmp_path):
    """A rejected removal, then an insert of the same record: the count is 1, after any restart too."""
    state = str(tmp_path / "state")
    s = fast_stream(state=state, snapshot_every=1)
    s.process_arrow(pa.concat_tables([roots_rows([0]), kafka_rows([{"src": 0, "dst": 2, "t": 1, "diff": -1}])]), 0)
    s.process_arrow(kafka_rows([{"src": 0, "dst": 2, "t": 2, "diff": 1}], start=1), 1)
    assert s.outputs["degree"].sink.contents() == {(0, 1): 1}
    s.stop()
    again = fast_stream(state=state, snapshot_every=1)
    again.process_arrow(kafka_rows([{"src": 0, "dst": 3, "t": 3, "diff": 1}], start=2), 2)
    assert again.outputs["degree"].sink.contents() == {(0, 1): -1, (0, 2): 1}


def count_build(flow: ddflow.Dataflow):
    """The out-degree of each node (a keyed count) over the edges."""
    h, edges = flow.new_collection("edges", schema=("i", "i"))
    return {"edges": h}, {"deg": edges.project(0).count()}


@pytest.mark.parametrize("path", ["driver", "executors"])
def test_a_removal_rejected_a_batch_after_it_was_logged_is_cancelled_in_the_log(tmp_path, path, request):
    """Under before-max a batch's largest time retires with the next batch: a removal of an absent edge at that
    time is rejected a batch after its own batch was logged (and committed).  Then the edge is inserted.
    Restarted from a snapshot of that log, the edge counts once (the log cancels the rejected removal), not
    zero (the removal and the insert added up), and the next batches give what the uninterrupted query gives.
    """
    spark = routed_spark(request) if path == "executors" else None

    def stream(state=None, sp=None):
        s = (StreamingDataflow(count_build).input("edges", fields=["src", "dst"], format="json", time="t",
                                                  diff="diff")
             .output("deg", MemorySink(), names=["src", "n"]).deadLetter(MemorySink()).frontierPolicy("before-max"))
        if sp is not None:
            s.workers(2, spark=sp)
        return s.stateLocation(state, snapshotEvery=1) if state is not None else s

    batches = [kafka_rows([{"src": 1, "dst": 2, "t": 1, "diff": 1}, {"src": 5, "dst": 6, "t": 2, "diff": -1}]),
               kafka_rows([{"src": 1, "dst": 3, "t": 3, "diff": 1}], start=2),
               kafka_rows([{"src": 5, "dst": 6, "t": 4, "diff": 1}], start=3),
               kafka_rows([{"src": 9, "dst": 9, "t": 6, "diff": 1}], start=4),
               kafka_rows([{"src": 5, "dst": 7, "t": 7, "diff": 1}, {"src": 9, "dst": 8, "t": 8, "diff": 1}],
                          start=5)]
    ref = stream()
    for b, t in enumerate(batches):
        ref.process_arrow(t, b)
    assert [json.loads(r["value"])["record"] for r in ref.dead_letter.batches[1].to_pylist()] == [[5, 6]]
    assert ref.outputs["deg"].sink.contents() == {(1, 2): 1, (5, 2): 1, (9, 1): 1}
    state = str(tmp_path / "state")
    first = stream(state, spark)
    try:
        for b in range(4):
            feed(first, batches[b], b, spark)
    finally:
        first.stop()
    again = stream(state, spark)
    try:
        feed(again, batches[4], 4, spark)
    finally:
        again.stop()
    assert accumulate(pa.concat_tables([first.outputs["deg"].sink.table(), again.outputs["deg"].sink.table()])) \
        == ref.outputs["deg"].sink.contents()
    assert sorted(again.outputs["deg"].sink.batches[4].to_pylist(), key=repr) == \
        sorted(ref.outputs["deg"].sink.batches[4].to_pylist(), key=repr)


def test_updates_not_yet_checked_are_restored_as_logged_not_added_up(tmp_path):
    """Two batches leave a removal of 2 and an insert of 1 of one edge pending at one time (before-max).  Taken
    one by one when the time retires, the removal is rejected and the insert applied (count 1); added up they
    would be one removal of 1, rejected (count 0).  A restart between them must give what no restart gives."""
    def stream(state):
        return (StreamingDataflow(count_build).input("edges", fields=["src", "dst"], format="json", time="t",
                                                     diff="diff")
                .output("deg", MemorySink(), names=["src", "n"]).deadLetter(MemorySink())
                .frontierPolicy("before-max").stateLocation(state, snapshotEvery=1))

    batches = [kafka_rows([{"src": 1, "dst": 2, "t": 1, "diff": 1}, {"src": 5, "dst": 6, "t": 2, "diff": -2}]),
               kafka_rows([{"src": 5, "dst": 6, "t": 2, "diff": 1}], start=2),
               kafka_rows([{"src": 9, "dst": 9, "t": 3, "diff": 1}], start=3)]
    ref = stream(str(tmp_path / "ref"))
    for b, t in enumerate(batches):
        ref.process_arrow(t, b)
    assert ref.outputs["deg"].sink.contents() == {(1, 1): 1, (5, 1): 1}
    assert [json.loads(r["value"])["diff"] for r in ref.dead_letter.batches[2].to_pylist()] == [-2]
    first = stream(str(tmp_path / "state"))
    for b in range(2):
        first.process_arrow(batches[b], b)
    again = stream(str(tmp_path / "state"))
    again.process_arrow(batches[2], 2)
    assert again.outputs["deg"].sink.batches[2].to_pylist() == ref.outputs["deg"].sink.batches[2].to_pylist()
    assert letters_of(again, 2) == letters_of(ref, 2)


def letters_of(stream: StreamingDataflow, batch_id: int) -> list:
    return [(r["input"], r["error"], r["value"]) for r in stream.dead_letter.batches[batch_id].to_pylist()]


def test_loop_limits_reach_views_and_programs_through_the_builder():
    """.view(..., maxIterations=) and .datalog(..., maxRecords=) bound their fixpoints: the batch fails naming the
    loop, while the same query without limits converges (a counter up to 50 needs 50 rounds)."""
    nums = {"n": "bigint"}
    counting = "WITH RECURSIVE up(n) AS (SELECT n FROM nums UNION SELECT n + 1 FROM up WHERE n < 50) SELECT n FROM up"
    derive = (".decl nums(n: number) .input nums .decl up_dl(n: number) up_dl(n) :- nums(n). "
              "up_dl(m) :- up_dl(n), n < 50, m = n + 1. .output up_dl")
    rows = kafka_rows([{"n": 0, "t": 0, "diff": 1}], topic="nums")

    def stream(**limits):
        out = MemorySink()
        s = (StreamingDataflow(name="limits").table("nums", nums, format="json", time="t", diff="diff", topic="nums")
             .view("up", counting, **limits.get("view", {})).output("up", out)
             .datalog(derive, **limits.get("datalog", {})).output("up_dl", MemorySink()))
        return s, out

    s, out = stream()
    s.process_arrow(rows, 0)
    assert len(accumulate(out.batches[0])) == 51
    s.stop()
    for limits, bound in (({"view": {"maxIterations": 10}}, "max_iterations=10"),
                          ({"datalog": {"maxRecords": 20}}, "max_records")):
        s, _ = stream(**limits)
        with pytest.raises(ddflow.NonConvergence, match=bound):
            s.process_arrow(rows, 0)
        s.stop()
    # The snake_case names of before the naming rule still work, for one release, with a warning.
    with pytest.warns(DeprecationWarning, match=r"datalog\(max_records=\.\.\.\) is now datalog\(maxRecords="):
        s, _ = stream(datalog={"max_records": 20})
    with pytest.raises(ddflow.NonConvergence, match="max_records"):
        s.process_arrow(rows, 0)
    s.stop()
    with pytest.raises(TypeError, match="at once"):
        StreamingDataflow().stateLocation("/nowhere", snapshot_every=1, snapshotEvery=2)
