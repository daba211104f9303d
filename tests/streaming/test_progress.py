"""A streaming query's progress records and metrics, against workloads whose answers are known.

- Dead letters by reason and late rows equal the bad and late messages
  injected, over random micro-batches (the driver's path, ``process_arrow``).
- Progress records have Spark's ``StreamingQueryProgress`` fields, reach
  listeners, and land in the state directory, where ``python -m
  ddflow.top`` reads them.
- The metrics endpoint, scraped over loopback, says the same.
- Source lag, against the real broker the fixtures start: 0 after the
  topic is drained, N after N more messages nobody read.
"""
from __future__ import annotations

import collections
import json
import random
import subprocess
import sys
import urllib.request

import pyarrow as pa
import pytest

from tests.streaming.test_driver import fast_stream, kafka_rows, roots_rows

#: What each kind of bad message is, and the reason its dead letter is counted under.
BAD = {
    "malformed": lambda rng, t: rng.choice([b"{not json", json.dumps({"src": 1, "t": t, "diff": 1}).encode(),
                                            json.dumps({"src": "x", "dst": 1, "t": t, "diff": 1}).encode()]),
    "time_past_max": lambda rng, t: {"src": 1, "dst": 2, "t": 2**63 - 1, "diff": 1},
    "time_ahead": lambda rng, t: {"src": 1, "dst": 2, "t": 2**62, "diff": 1},
}


def _scrape(url: str) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    body = urllib.request.urlopen(url, timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(body) for s in fam.samples}


@pytest.mark.parametrize("seed", range(4))
def test_dead_letters_by_reason_and_late_rows_equal_what_was_injected(tmp_path, seed):
    pytest.importorskip("prometheus_client")
    rng = random.Random(seed)
    state = str(tmp_path / "state")
    s = fast_stream(state).serveMetrics()
    seen: list[dict] = []
    s.addListener(seen.append)
    s.addListener(lambda p: 1 / 0)  # a listener that raises is warned about, never fails the query
    sent: collections.Counter = collections.Counter()
    late = 0
    t = 1
    with pytest.warns(UserWarning, match="progress listener .* raised ZeroDivisionError"):
        s.process_arrow(pa.concat_tables([roots_rows([0]), kafka_rows([{"src": 0, "dst": 1, "t": 0, "diff": 1}])]),
                        0)
    off = 1
    batches = rng.randrange(3, 7)
    for b in range(1, batches + 1):
        msgs = []
        for _ in range(rng.randrange(1, 15)):
            kind = rng.choice(["good"] * 4 + list(BAD) + ["late"])
            if kind == "good":
                msgs.append({"src": rng.randrange(5), "dst": rng.randrange(5), "t": t + rng.randrange(3), "diff": 1})
            elif kind == "late":  # before the frontier this batch starts at
                msgs.append({"src": 1, "dst": 1, "t": rng.randrange(0, s.flow.frontier), "diff": 1})
                late += 1
            else:
                msgs.append(BAD[kind](rng, t))
                sent[kind] += 1
        with pytest.warns(UserWarning, match="progress listener .* raised ZeroDivisionError"):
            s.process_arrow(kafka_rows(msgs, start=off), b)
        off += len(msgs)
        t += 3
    got = collections.Counter()
    for (name, reason), n in s.progress.dead_letters.items():
        assert name == "edges"
        got[reason] += n
    assert got == collections.Counter({**sent, **({"time_before_frontier": late} if late else {})})
    assert dict(s.progress.late_rows) == ({"edges": late} if late else {})
    assert s.metrics.dead_letters == sum(sent.values()) + late
    # Progress records: Spark's fields, one per batch, to listeners, in memory and in the state directory.
    assert [p["batchId"] for p in seen] == list(range(batches + 1))
    assert [p["batchId"] for p in s.recentProgress] == list(range(batches + 1))
    last = s.lastProgress
    for key in ("id", "runId", "name", "timestamp", "batchId", "numInputRows", "inputRowsPerSecond",
                "processedRowsPerSecond", "durationMs", "stateOperators", "sources", "sink"):
        assert key in last, key
    assert last["durationMs"]["triggerExecution"] >= last["durationMs"]["run"] >= 0
    assert sum(p["numDeadLetters"] for p in s.recentProgress) == sum(sent.values()) + late
    assert {o["operatorName"] for o in last["stateOperators"]} >= {"edges"}
    assert last["sources"] == [
        {"description": "edges:0", "endOffset": off, "latestOffset": None, "offsetsBehind": None,
         "secondsBehind": None},
        {"description": "roots:0", "endOffset": 10_001, "latestOffset": None, "offsetsBehind": None,
         "secondsBehind": None}]
    from ddflow.streaming.progress import read_progress

    assert [p["batchId"] for p in read_progress(state, last=100)] == list(range(batches + 1))
    # The endpoint, scraped: the same counts by reason, and the dataflow's families under the outputs' names.
    scraped = _scrape(s.metricsUrl)
    by_reason = {dict(k[1])["reason"]: v for k, v in scraped.items() if k[0] == "ddflow_dead_letters_total"}
    assert by_reason == {r: float(n) for r, n in got.items()}
    assert scraped[("ddflow_batches_total", (("query", "test"),))] == batches + 1
    assert ("ddflow_output_updates_total", (("dataflow", "test"), ("output", "reach"))) in scraped
    top = subprocess.run([sys.executable, "-m", "ddflow.top", state, "--once", "--json"], capture_output=True,
                         text=True, timeout=60)
    assert top.returncode == 0, top.stderr
    frame = json.loads(top.stdout)
    assert set(frame["outputs"]) == {"reach", "degree"} and str(batches) in frame["title"]
    url = s.metricsUrl
    s.stop()
    assert s.metricsUrl is None
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=5)


def test_the_progress_file_rolls_over_and_a_torn_line_is_skipped(tmp_path):
    from ddflow.streaming import progress

    state = str(tmp_path / "state")
    s = fast_stream(state)
    old = progress.ROLL_LINES
    progress.ROLL_LINES = 3
    try:
        for b in range(7):
            s.process_arrow(kafka_rows([{"src": b, "dst": b + 1, "t": b, "diff": 1}], start=b), b)
    finally:
        progress.ROLL_LINES = old
    with open(tmp_path / "state" / progress.PROGRESS_FILE, "a") as f:
        f.write('{"batchId": 99, "cut sho')
    assert [p["batchId"] for p in progress.read_progress(state, last=10)] == [3, 4, 5, 6]


@pytest.mark.kafka
def test_source_lag_is_zero_when_drained_and_n_after_n_unread(kafka_bootstrap, new_topic):
    """The lag probe asks the real broker: after a batch that read everything, 0; after N more, N (and the
    endpoint shows it without another batch: a stuck query is when it matters)."""
    pytest.importorskip("prometheus_client")
    from confluent_kafka import Consumer, TopicPartition
    from ddflow.streaming.broker import produce
    from ddflow.streaming.driver import StreamingDataflow
    from ddflow.streaming.sinks import MemorySink

    topic = new_topic(1, "edges")

    def build(flow):
        h, e = flow.new_collection("edges", schema=("i", "i"))
        return {"edges": h}, {"deg": e.project(0).count()}

    s = (StreamingDataflow(build, name="lag").input("edges", fields=["src", "dst"], format="json", time="t")
         .output("deg", MemorySink(), names=["src", "n"]).serveMetrics(kafkaBootstrap=kafka_bootstrap))
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "lag-test", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])

    def read_batch(n: int) -> pa.Table:
        msgs = []
        while len(msgs) < n:
            m = consumer.poll(10)
            assert m is not None, f"the broker gave {len(msgs)} of {n} messages"
            assert m.error() is None, m.error()
            msgs.append(m)
        return pa.table({"key": pa.nulls(n, pa.binary()), "value": [m.value() for m in msgs],
                         "topic": [m.topic() for m in msgs], "partition": pa.array([m.partition() for m in msgs],
                                                                                    pa.int32()),
                         "offset": pa.array([m.offset() for m in msgs], pa.int64()),
                         "timestamp": pa.array([m.timestamp()[1] * 1000 for m in msgs], pa.timestamp("us", tz="UTC")),
                         "timestampType": pa.array([0] * n, pa.int32())})

    try:
        produce(kafka_bootstrap, topic, [(None, json.dumps({"src": i, "dst": i, "t": i}).encode(), 0)
                                         for i in range(5)])
        s.process_arrow(read_batch(5), 0)
        assert s.lastProgress["sources"][0]["offsetsBehind"] == 0
        assert s.lastProgress["sources"][0]["secondsBehind"] == 0.0
        key = ("ddflow_source_lag_offsets", (("partition", "0"), ("query", "lag"), ("topic", topic)))
        assert _scrape(s.metricsUrl)[key] == 0
        produce(kafka_bootstrap, topic, [(None, json.dumps({"src": i, "dst": i, "t": 5 + i}).encode(), 0)
                                         for i in range(7)])
        s.progress._probed = 0.0  # the probe answers at most once a second: ask now
        assert _scrape(s.metricsUrl)[key] == 7
        s.process_arrow(read_batch(3), 1)
        assert s.lastProgress["sources"][0]["offsetsBehind"] == 4
        behind = s.lastProgress["sources"][0]["secondsBehind"]
        assert isinstance(behind, float) and behind >= 0.0  # measured (not None) once the probe says it is behind
    finally:
        consumer.close()
        s.stop()
