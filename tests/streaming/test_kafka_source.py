"""The ``ddkafka`` Spark source against a real broker and a real local Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest

from ddflow.streaming.broker import (
    BrokerError,
    EmbeddedBroker,
    create_topics,
    end_offsets,
    produce,
    produce_transactional,
)
from ddflow.streaming.kafka.client import KafkaSourceError, _limit, _Options, _read_range
from ddflow.streaming.kafka.source import FORMAT, KafkaInputPartition, register

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

T0 = 1_700_000_000_000  # producer timestamps, ms


def messages(n: int, partitions: int = 2, start: int = 0, tag: str = "v") -> list[tuple]:
    """Message i goes to partition i % partitions with timestamp T0 + i."""
    out = []
    for i in range(start, start + n):
        key = None if i % 5 == 0 else f"k{i}".encode()
        out.append((key, f"{tag}{i}".encode(), i % partitions, T0 + i))
    return out


def stream(spark: Any, bootstrap: str, topic: str, **options: Any) -> Any:
    reader = (
        spark.readStream.format(FORMAT)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def run_available_now(
    spark: Any, bootstrap: str, topic: str, checkpoint: Path, timeout: float = 120, **options: Any
) -> list[list[dict]]:
    """Run an availableNow query to completion; the rows of each micro-batch."""
    from pyspark.sql import functions as F

    batches: list[list[dict]] = []

    def sink(df: Any, batch_id: int) -> None:
        rows = df.select(
            "key", "value", "topic", "partition", "offset",
            F.unix_millis("timestamp").alias("ts"), "timestampType",
        ).collect()
        batches.append([r.asDict() for r in rows])

    query = (
        stream(spark, bootstrap, topic, **options)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(timeout), "availableNow query did not finish"
    finally:
        query.stop()
    return batches


def as_messages(rows: list[dict]) -> list[tuple]:
    return sorted((r["partition"], r["offset"], r["key"], r["value"], r["ts"]) for r in rows)


def expected(msgs: list[tuple], first_offset: Optional[dict] = None) -> list[tuple]:
    """(partition, offset, key, value, ts) for messages produced in order to an
    otherwise untouched range starting at ``first_offset[partition]``."""
    next_off = dict(first_offset or {})
    out = []
    for key, value, p, ts in msgs:
        off = next_off.get(p, 0)
        next_off[p] = off + 1
        out.append((p, off, key, value, ts))
    return sorted(out)


def flat(batches: list[list[dict]]) -> list[dict]:
    return [r for b in batches for r in b]


# -- (a) every message exactly once, every column right -----------------------


def test_reads_all_messages_once(spark, kafka_bootstrap, new_topic, tmp_path):
    topic = new_topic(partitions=2)
    msgs = messages(40)
    produce(kafka_bootstrap, topic, msgs)

    rows = flat(run_available_now(
        spark, kafka_bootstrap, topic, tmp_path / "ck", startingOffsets="earliest"
    ))

    assert as_messages(rows) == expected(msgs)
    assert {r["topic"] for r in rows} == {topic}
    assert {r["timestampType"] for r in rows} == {0}  # CreateTime
    assert sum(r["key"] is None for r in rows) == 8


def test_schema_matches_spark_kafka_source(spark, kafka_bootstrap, new_topic):
    register(spark)  # again: registering is idempotent
    df = stream(spark, kafka_bootstrap, new_topic(partitions=1))
    assert df.isStreaming
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )


# -- (b) exactly once across stop/restart from the checkpoint -----------------


def test_restart_resumes_from_checkpoint(spark, kafka_bootstrap, new_topic, tmp_path):
    topic = new_topic(partitions=2)
    ck = tmp_path / "ck"
    first = messages(30)
    produce(kafka_bootstrap, topic, first)
    rows1 = flat(run_available_now(spark, kafka_bootstrap, topic, ck, startingOffsets="earliest"))
    assert as_messages(rows1) == expected(first)

    more = messages(20, start=30, tag="w")
    produce(kafka_bootstrap, topic, more)
    rows2 = flat(run_available_now(spark, kafka_bootstrap, topic, ck, startingOffsets="earliest"))
    assert as_messages(rows2) == expected(more, first_offset={0: 15, 1: 15})

    # Nothing new: the restarted query finishes without a non-empty batch.
    assert flat(run_available_now(spark, kafka_bootstrap, topic, ck)) == []


# -- (c) admission control -----------------------------------------------------


def test_max_offsets_per_trigger(spark, kafka_bootstrap, new_topic, tmp_path):
    topic = new_topic(partitions=2)
    msgs = messages(25)
    produce(kafka_bootstrap, topic, msgs)

    batches = run_available_now(
        spark, kafka_bootstrap, topic, tmp_path / "ck",
        startingOffsets="earliest", maxOffsetsPerTrigger=7,
    )

    sizes = [len(b) for b in batches]
    assert all(s <= 7 for s in sizes), sizes
    assert len([s for s in sizes if s]) >= 4  # ceil(25 / 7)
    assert as_messages(flat(batches)) == expected(msgs)


def test_offset_gaps_from_transaction_markers(spark, kafka_bootstrap, new_topic, tmp_path):
    """Commit markers take offsets no record has; reads must still end."""
    topic = new_topic(partitions=1)
    for i in range(3):
        produce_transactional(
            kafka_bootstrap, topic, [(None, f"tx{i}-{j}".encode(), 0) for j in range(3)]
        )
    assert end_offsets(kafka_bootstrap, topic) == {0: 12}  # 9 records + 3 commit markers

    # Limit 4 makes micro-batch ranges end on a marker and start after one.
    batches = run_available_now(
        spark, kafka_bootstrap, topic, tmp_path / "ck",
        startingOffsets="earliest", maxOffsetsPerTrigger=4,
    )
    values = [r["value"] for r in sorted(flat(batches), key=lambda r: r["offset"])]
    assert values == [f"tx{i}-{j}".encode() for i in range(3) for j in range(3)]
    assert all(len(b) <= 4 for b in batches)


@pytest.mark.parametrize("max_rows", [1, 3, 7, 100])
def test_limit_allocation_is_bounded_and_fair(max_rows):
    begin = {"a": {"0": 0, "1": 5, "2": 9}, "b": {"0": 0}}
    end = {"a": {"0": 10, "1": 6, "2": 9}, "b": {"0": 4}}
    got = _limit(begin, end, max_rows)
    admitted = sum(got[t][p] - begin[t][p] for t in got for p in got[t])
    assert admitted == min(max_rows, 15)
    assert all(begin[t][p] <= got[t][p] <= end[t][p] for t in got for p in got[t])


# -- (d) startingOffsets -------------------------------------------------------


def test_starting_offsets_latest(spark, kafka_bootstrap, new_topic, tmp_path):
    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, messages(10))
    ck = tmp_path / "ck"
    # Default for streaming reads is "latest": old messages are skipped.
    assert flat(run_available_now(spark, kafka_bootstrap, topic, ck)) == []

    more = messages(6, start=10, tag="n")
    produce(kafka_bootstrap, topic, more)
    rows = flat(run_available_now(spark, kafka_bootstrap, topic, ck))
    assert as_messages(rows) == expected(more, first_offset={0: 5, 1: 5})


def test_starting_offsets_json(spark, kafka_bootstrap, new_topic, tmp_path):
    topic = new_topic(partitions=2)
    msgs = messages(20)  # 10 per partition
    produce(kafka_bootstrap, topic, msgs)
    starting = json.dumps({topic: {"0": 7, "1": -2}})
    rows = flat(run_available_now(
        spark, kafka_bootstrap, topic, tmp_path / "ck", startingOffsets=starting
    ))
    want = [m for m in expected(msgs) if m[0] == 1 or m[1] >= 7]
    assert as_messages(rows) == want

    starting = json.dumps({topic: {"0": -1, "1": 9}})
    rows = flat(run_available_now(
        spark, kafka_bootstrap, topic, tmp_path / "ck2", startingOffsets=starting
    ))
    assert [(r["partition"], r["offset"]) for r in rows] == [(1, 9)]


def test_batch_read(spark, kafka_bootstrap, new_topic):
    topic = new_topic(partitions=2)
    msgs = messages(12)
    produce(kafka_bootstrap, topic, msgs)
    df = (
        spark.read.format(FORMAT)
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("endingOffsets", json.dumps({topic: {"0": 4, "1": -1}}))
        .load()
    )
    got = sorted((r.partition, r.offset) for r in df.collect())
    assert got == [(0, o) for o in range(4)] + [(1, o) for o in range(6)]


# -- (e) clear errors ----------------------------------------------------------


def test_missing_topic_is_a_clear_error(spark, kafka_bootstrap, tmp_path):
    topic = "no-such-topic-ddflow"
    with pytest.raises(Exception) as info:
        run_available_now(spark, kafka_bootstrap, topic, tmp_path / "ck")
    text = str(info.value)
    assert f"Kafka topic '{topic}' does not exist on {kafka_bootstrap}" in text


def test_out_of_range_start_is_a_clear_error(spark, kafka_bootstrap, new_topic, tmp_path):
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, messages(3, partitions=1))
    with pytest.raises(Exception) as info:
        run_available_now(
            spark, kafka_bootstrap, topic, tmp_path / "ck",
            startingOffsets=json.dumps({topic: {"0": 50}}),
        )
    text = str(info.value)
    assert f"topic '{topic}' partition 0 is out of range" in text
    assert "available offsets are 0..3" in text


def test_unreachable_broker_is_a_clear_error(spark, tmp_path):
    with pytest.raises(Exception) as info:
        run_available_now(
            spark, "127.0.0.1:1", "some-topic", tmp_path / "ck",
            **{"kafkaConsumer.pollTimeoutMs": 1000},
        )
    assert "cannot reach Kafka at 127.0.0.1:1 to look up topic 'some-topic'" in str(info.value)


def test_executor_read_errors_name_topic_and_partition(kafka_bootstrap, new_topic):
    """What a Spark task reports when its offset range cannot be read (no Spark
    needed: this is the function the task runs)."""
    topic = new_topic(partitions=1)
    produce(kafka_bootstrap, topic, messages(4, partitions=1))
    opts = _Options.parse({
        "kafka.bootstrap.servers": kafka_bootstrap, "subscribe": topic,
        "kafkaConsumer.pollTimeoutMs": "300",
    }, streaming=True)
    assert sum(b.num_rows for b in _read_range(opts, KafkaInputPartition(topic, 0, 1, 4))) == 3
    with pytest.raises(KafkaSourceError, match=(
        f"topic '{topic}' partition 0 .* the partition ends at offset 4, so offsets up to 9"
    )):
        list(_read_range(opts, KafkaInputPartition(topic, 0, 2, 9)))
    with pytest.raises(KafkaSourceError, match="Kafka topic 'gone' does not exist"):
        list(_read_range(opts, KafkaInputPartition("gone", 0, 0, 1)))


def test_bad_options_are_clear_errors(spark, kafka_bootstrap, new_topic, tmp_path):
    topic = new_topic(partitions=1)
    with pytest.raises(Exception, match="maxOffsetsPerTrigger must be a positive integer"):
        run_available_now(spark, kafka_bootstrap, topic, tmp_path / "a", maxOffsetsPerTrigger=0)
    with pytest.raises(Exception, match="must list every partition"):
        run_available_now(spark, kafka_bootstrap, topic, tmp_path / "b",
                          startingOffsets=json.dumps({topic: {}}))


# -- broker helpers (no Spark) ------------------------------------------------


def test_end_offsets_are_true_ends(kafka_bootstrap, new_topic):
    """Tansu's high watermark is the last batch's base offset + 1; ours is right."""
    from confluent_kafka import Consumer, TopicPartition

    topic = new_topic(partitions=3)
    for _ in range(3):  # several record batches per partition
        produce(kafka_bootstrap, topic, messages(40))
    assert end_offsets(kafka_bootstrap, topic) == {0: 60, 1: 60, 2: 0}
    c = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "x"})
    try:
        _, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
    finally:
        c.close()
    assert hi <= 60  # < 60 on Tansu, == 60 on Kafka


def test_create_topics_is_idempotent(kafka_bootstrap, new_topic):
    topic = new_topic(partitions=2)
    create_topics(kafka_bootstrap, [topic], partitions=2)
    assert end_offsets(kafka_bootstrap, topic) == {0: 0, 1: 0}
    with pytest.raises(BrokerError, match="does not exist"):
        end_offsets(kafka_bootstrap, topic + "-missing")


def test_broker_startup_failure_shows_its_output():
    broker = EmbeddedBroker(extra_args=["--no-such-flag"], startup_timeout=5)
    with pytest.raises(BrokerError, match="exited with code") as info:
        broker.start()
    assert "no-such-flag" in str(info.value)
    assert not broker.running


def test_broker_refuses_a_busy_port(kafka_bootstrap):
    port = int(kafka_bootstrap.rsplit(":", 1)[1])
    with pytest.raises(BrokerError, match="already in use"):
        EmbeddedBroker(port=port).start()


# -- data loss: offsets that went backwards (failOnDataLoss) --------------------------------------


def loss_opts(bootstrap: str, topic: str, fail: str) -> _Options:
    return _Options.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "failOnDataLoss": fail,
                           "kafkaConsumer.pollTimeoutMs": "30000"}, streaming=True)


def test_a_topic_shorter_than_the_read_offsets_is_data_loss_named_at_once(kafka_bootstrap, new_topic):
    """No Spark: the planner's own answers.  Before, the end probe sought past the end and timed out (30 s)."""
    from ddflow.streaming.kafka.client import _Kafka

    topic = new_topic(partitions=2)
    produce(kafka_bootstrap, topic, messages(10))  # 5 per partition
    k = _Kafka(loss_opts(kafka_bootstrap, topic, "true"))
    try:
        with pytest.raises(KafkaSourceError) as e:
            k.next_end({topic: {"0": 40, "1": 3}})
        msg = str(e.value)
        assert f"data loss on {kafka_bootstrap}: topic '{topic}' partition 0 ends at offset 5 but the query has " \
               "read up to offset 40" in msg and "partition 1" not in msg and "failOnDataLoss=false" in msg
        with pytest.raises(KafkaSourceError, match="partition 1 ends at offset 5 but the micro-batch reads up to "
                                                   "offset 9"):
            k.ranges({topic: {"0": 0, "1": 3}}, {topic: {"0": 5, "1": 9}})  # a batch planned before the loss
        assert k.next_end({topic: {"0": 2, "1": 3}}) == {topic: {"0": 5, "1": 5}}  # no loss: as before
    finally:
        k.close()
    go_on = _Kafka(loss_opts(kafka_bootstrap, topic, "false"))
    try:
        start = {topic: {"0": 40, "1": 3}}
        end = go_on.next_end(start)
        assert end == {topic: {"0": 5, "1": 5}}
        assert go_on.ranges(start, end) == [(topic, 0, 0, 5), (topic, 1, 3, 5)]  # partition 0 from its earliest
    finally:
        go_on.close()
    with pytest.raises(KafkaSourceError, match="failOnDataLoss must be 'true' or 'false'"):
        loss_opts(kafka_bootstrap, topic, "maybe")


def test_a_topic_recreated_shorter_fails_the_query_naming_it_or_goes_on_with_fail_on_data_loss_false(
        spark, tmp_path):
    """The broker loses the topic (in-memory storage, restarted on its port) and it comes back shorter."""
    import shutil

    broker = EmbeddedBroker().start()
    port = broker.port
    topic = "orders"
    try:
        create_topics(broker.bootstrap, [topic], partitions=1)
        produce(broker.bootstrap, topic, messages(20, partitions=1))
        first = flat(run_available_now(spark, broker.bootstrap, topic, tmp_path / "ck", startingOffsets="earliest"))
        assert len(first) == 20
        broker.stop()
        broker = EmbeddedBroker(port=port).start()
        create_topics(broker.bootstrap, [topic], partitions=1)
        produce(broker.bootstrap, topic, messages(5, partitions=1, tag="new"))
        shutil.copytree(tmp_path / "ck", tmp_path / "ck2")
        with pytest.raises(Exception) as e:  # at once, not "timed out ... finding the end" after 30 s
            run_available_now(spark, broker.bootstrap, topic, tmp_path / "ck")
        assert f"topic '{topic}' partition 0 ends at offset 5 but the query has read up to offset 20" in str(e.value)
        rows = flat(run_available_now(spark, broker.bootstrap, topic, tmp_path / "ck2", failOnDataLoss="false"))
        assert sorted(r["value"] for r in rows) == sorted(f"new{i}".encode() for i in range(5))
    finally:
        broker.stop()
